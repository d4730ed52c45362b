"""16-bit register values computed two at a time (ir.Compute.pairs).

A packed 16-bit register tile holds two values per 32-bit register: registers 2j and 2j + 1
of its layout, which lie next to each other along the axis of the layout's first register
digit. Where the renderer computes that dtype's + - * two at a time (Capabilities.packed16:
v_pk_add_f16 / v_pk_mul_f16 on CDNA), an expression whose integers become 16-bit floats
through the exponent bias is computed a register at a time:

- an integer a in 0..MAX (1023 for f16, 127 for bf16) is the float with the bits BIAS | a
  minus the float BIAS (1024.0 for f16): both are exact, the mantissa holds a;
- so (a - b) as f16, with a and b in 0..MAX, is (BIAS | a) - (BIAS | b), one exact packed
  subtraction for two values;
- and a nibble (w >> s) & 15 of two words is two byte selections and a mask and an or
  (v_perm_b32, v_and_or_b32): the W4A16 dequantization (docs/low-precision.md).

`form(e, dtype)` classifies an expression the way the renderer prints it (ptc.render.cexpr
`ExprRenderer.pair`) and the cost model counts it (`pair_counts`): the same values as the
element-wise code, bit for bit.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ..sema import typed as T
from ..sema.ranges import int_range

Ranges = Mapping[str, tuple[int, int]] | None

# the float whose bits are BIAS | a is BIAS_VALUE + a for a in 0..MAX
BIAS = {"f16": 0x6400, "bf16": 0x4300}
MAX = {"f16": 1023, "bf16": 127}
PACKED_OPS = ("add", "sub", "mul")
# instructions per register word, read from the clang-19 gfx942 ISA of the W4A16 sample:
# a nibble of two words is a byte selection (v_perm_b32), a shift where the nibble is a
# byte's high half, and v_and_or_b32; any other biased integer pair a shift-or and an or
NIBBLE_INSTRUCTIONS = 2
HIGH_NIBBLE_INSTRUCTIONS = 1
BIASED_INSTRUCTIONS = 2
PACK_INSTRUCTIONS = 1


def pair_axis(layout) -> int | None:
    """The axis along which a register pair's two values lie (the layout's first register
    digit, of even size, moves along it); None where registers 2j and 2j + 1 are not a
    pair of one digit."""
    if not layout.regs or layout.regs[0].size % 2:
        return None
    return layout.regs[0].along()


def nibble(e: T.TExpr) -> tuple[T.TExpr, int] | None:
    """(the i32 word, the shift s) of `(w >> s) & 15` or `w & 15`, s a multiple of 4 below
    32; None for anything else."""
    if not (isinstance(e, T.Elementwise) and e.op == "bitand" and
            isinstance(e.args[1], T.Const) and e.args[1].value == 15):
        return None
    word = e.args[0]
    if word.type.dtype != "i32":
        return None
    if isinstance(word, T.Elementwise) and word.op == "shr" and \
            isinstance(word.args[1], T.Const) and word.args[0].type.dtype == "i32":
        s = int(word.args[1].value)
        return (word.args[0], s) if 0 <= s < 32 and s % 4 == 0 else None
    return word, 0


def biased(e: T.TExpr, dtype: str, names: Ranges = None) -> bool:
    """Whether integer e always lies in 0..MAX[dtype]: its float is BIAS | e, less the bias
    (its range is `sema.ranges`', with the named values' `names`)."""
    if e.type.dtype not in ("i32", "i8", "u8"):
        return False
    r = int_range(e, names)
    return r is not None and 0 <= r[0] and r[1] <= MAX[dtype]


@dataclass(frozen=True)
class Node:
    """One node of a pair form. kind: "op" (a packed + - * of two forms), "difference"
    (a - b as the dtype, both biased), "offset" (a as the dtype, a biased), "leaf" (a value
    computed a half at a time and packed)."""

    kind: str
    expr: T.TExpr
    args: tuple = ()          # op: two Nodes; difference / offset: the biased integers


def form(e: T.TExpr, dtype: str, names: Ranges = None) -> Node:
    """e (of 16-bit `dtype`) as the renderer computes it a register at a time; `names`:
    the ranges of named integer values (ir.LoweredKernel.int_ranges)."""
    if isinstance(e, T.Elementwise) and e.op in PACKED_OPS and e.type.dtype == dtype and \
            all(a.type.dtype == dtype for a in e.args):
        return Node("op", e, tuple(form(a, dtype, names) for a in e.args))
    if isinstance(e, T.Convert) and e.type.dtype == dtype:
        arg = e.arg
        if isinstance(arg, T.Elementwise) and arg.op == "sub" and \
                all(biased(a, dtype, names) for a in arg.args):
            return Node("difference", e, tuple(arg.args))
        if biased(arg, dtype, names):
            return Node("offset", e, (arg,))
    return Node("leaf", e)


def worth_pairing(node: Node) -> bool:
    """Whether a form converts an integer through the bias: the pair code's gain (a form of
    leaves and packed ops alone is what the element-wise code compiles to already)."""
    return node.kind in ("difference", "offset") or \
        (node.kind == "op" and any(worth_pairing(a) for a in node.args))


def computes_in_pairs(e: T.TExpr, dtype: str, layout, packed16: frozenset[str],
                      names: Ranges = None) -> bool:
    """The lowering's decision for a Compute of a packed 16-bit register tile: in pairs
    where the renderer packs the dtype's arithmetic, the layout pairs its registers, and
    the expression converts integers through the bias."""
    return dtype in packed16 and dtype in BIAS and layout.size % 2 == 0 and \
        pair_axis(layout) is not None and worth_pairing(form(e, dtype, names))


def integer_instructions(a: T.TExpr) -> int:
    """Instructions per register word that put a biased integer pair's bits in place; none
    for a broadcast (`z[None, :]`: one pair per row or column of it, computed once, as
    costs.expression_counts counts what a broadcast reads)."""
    if isinstance(a, T.Expand):
        return 0
    found = nibble(a)
    if found is not None:
        return NIBBLE_INSTRUCTIONS + (HIGH_NIBBLE_INSTRUCTIONS if found[1] % 8 == 4 else 0)
    return BIASED_INSTRUCTIONS


def pair_leaves(node: Node) -> list[T.TExpr]:
    """The expressions a form computes a value at a time (its leaves, the biased integers'
    operands)."""
    if node.kind == "leaf":
        return [node.expr]
    if node.kind == "op":
        return [x for a in node.args for x in pair_leaves(a)]
    out = []
    for a in node.args:
        found = nibble(a)
        out.append(found[0] if found is not None else a)
    return out


def pair_instructions(node: Node) -> int:
    """Instructions per register word of a form, less its leaves' own work (a broadcast
    leaf is packed once per row or column of it)."""
    if node.kind == "leaf":
        return 0 if isinstance(node.expr, T.Expand) else PACK_INSTRUCTIONS
    if node.kind == "op":
        return 1 + sum(pair_instructions(a) for a in node.args)
    # the packed subtraction, and each biased integer's bits (an offset subtracts a constant)
    return 1 + sum(integer_instructions(a) for a in node.args)


def pieces(node: Node) -> set[str]:
    """What a form is made of, by the instruction each piece is (the coverage table's
    `pairs16` family): nibble.low / nibble.high (a nibble at the bottom or the top of its
    byte), biased (any other integer), offset and difference (the subtraction of the
    bias, or of two biased integers), add / sub / mul, pack (a leaf's two values)."""
    if node.kind == "leaf":
        return {"pack"}
    if node.kind == "op":
        return {node.expr.op}.union(*(pieces(a) for a in node.args))
    out = {node.kind}
    for a in node.args:
        found = nibble(a)
        out.add("biased" if found is None else
                "nibble.high" if found[1] % 8 == 4 else "nibble.low")
    return out


PIECES = ("nibble.low", "nibble.high", "biased", "offset", "difference", "add", "sub", "mul",
          "pack")
