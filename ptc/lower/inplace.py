"""Accumulators updated in place: an mma's addend that is computed elementwise from the
accumulator (flash attention's `o * a[:, None]`, the rescale before `+ p @ v`) is stored in
the accumulator's own registers.

    values = in_place_addends(body, values)

Without this the rescaled tile is a second array that the mma copies back into the
accumulator: the copy is free for a plain C compiler, but a wgmma's accumulators are pinned
registers (asm operands), and ptxas moves all of them out and back each iteration (64 moves
per thread in flash attention's main loop on sm90).

The addend takes over the accumulator's registers when
- it is defined by Compute ops only, in the accumulator's layout, dtype and shape;
- those ops read the accumulator, if at all, element by element (elementwise ops and
  conversions only: no broadcast, transpose or reduction of it), so that each register is
  read before it is written;
- the two never hold different live values at once: at no op is one defined while the
  other is live after it (the liveness of ptc.lower.registers, loops closing over their back
  edge);
- neither is an mma's A operand in registers, which a wgmma reads until its wait, after the
  op that issued it.
The addend's RegTile then carries the accumulator's C name; the renderer declares each C
name once and skips the copy of an addend that shares the accumulator's registers.
"""
from __future__ import annotations

from dataclasses import replace

from ..sema import typed as T
from . import ir
from .registers import defines, live_values


def in_place_addends(body, values: dict) -> dict:
    """`values` with each eligible addend's RegTile renamed to its accumulator's."""
    ops, _, live_out = live_values(body, values)
    clashes: set[frozenset[str]] = set()
    for op, after in zip(ops, live_out):
        for d in defines(op):
            clashes |= {frozenset((d, x)) for x in after if x != d}
    register_a = {op.a.value for op in ir.walk(body)
                  if isinstance(op, (ir.Mma, ir.Wgmma)) and op.a.in_registers}
    out = dict(values)
    for op in ir.walk(body):
        if not isinstance(op, (ir.Mma, ir.Wgmma, ir.SimtMatmul)) or op.addend is None:
            continue
        add, acc = op.addend, op.out
        if add == acc or add in register_a or acc in register_a:
            continue
        home, into = values.get(add), values.get(acc)
        if not (isinstance(home, ir.RegTile) and isinstance(into, ir.RegTile)):
            continue
        if (home.layout, home.dtype, home.shape) != (into.layout, into.dtype, into.shape):
            continue
        definitions = [o for o in ops if add in defines(o)]
        if not all(isinstance(o, ir.Compute) and reads_elementwise(o.expr, acc, o.expr.type.shape)
                   for o in definitions):
            continue
        if frozenset((add, acc)) in clashes:
            continue
        out[add] = replace(home, name=out[acc].name)
    return out


def reads_elementwise(e: T.TExpr, name: str, shape: tuple[int, ...]) -> bool:
    """Whether `e` reads value `name` (of `shape`) only through elementwise ops, so that an
    element of the result reads only the same element of it."""
    if isinstance(e, T.Var):
        return e.name != name or e.type.shape == shape
    if isinstance(e, (T.Elementwise, T.Convert)):
        return all(reads_elementwise(a, name, shape) for a in T.children(e))
    return name not in _names(e)


def _names(e: T.TExpr) -> set[str]:
    if isinstance(e, T.Var):
        return {e.name}
    out: set[str] = set()
    for c in T.children(e):
        out |= _names(c)
    return out
