"""Typed expressions -> C expressions evaluated for one element of a tile.

`render(e, idx)` returns a C expression for element `idx` (one C index expression per dim
of e's shape). Floating-point nodes compute in f32 and round to their dtype after every
operation, as the reference interpreter does; // and % floor. A renderer whose target has
16-bit instructions (`native16`) computes 16-bit +, - and * in 16 bits instead: the same
values (the f32 result of two 16-bit operands rounds to 16 bits as the exact one does, 24
>= 2 * 11 + 2 bits), without the conversions to f32 and back around each operation.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from ..lower import pairs
from ..ops import ELEMENTWISE
from ..sema import typed as T
from ..sema.ranges import fits_16_bits

CTYPES = {"f32": "float", "f16": "__half", "bf16": "__nv_bfloat16", "i32": "int",
          "i8": "int8_t", "u8": "uint8_t", "f8e4m3": "ptc::f8e4m3", "f8e5m2": "ptc::f8e5m2",
          "bool": "bool"}
# conversions to i8 and u8: round to nearest even and saturate, NaN -> 0 (cvt.rni.sat)
_NARROW = {"i8": "ptc::to_i8", "u8": "ptc::to_u8"}
# conversions to f16, bf16 and tf32; to FP8: nearest even, saturating to the largest finite
# value, NaN stays NaN (cvt.rn.satfinite; ptc's own bit manipulation, ptc_types)
_ROUND = {"f16": "ptc::round_f16", "bf16": "ptc::round_bf16", "tf32": "ptc::round_tf32",
          "f8e4m3": "ptc::round_f8e4m3", "f8e5m2": "ptc::round_f8e5m2"}
FLOATS = ("f32", "f16", "bf16", "f8e4m3", "f8e5m2")
# the operations computed in 16 bits where the renderer is `native16` (ptc_types: .rn forms,
# never contracted into an fma), and the integer dtypes converted to 16 bits in one step
NATIVE_OPS = {"add": "ptc::add_rn", "sub": "ptc::sub_rn", "mul": "ptc::mul_rn"}
INTEGERS = ("i32", "i8", "u8")
_BINARY = {o.name: o.c for o in ELEMENTWISE.values() if o.c_form == "infix"}
_UNARY = {o.name for o in ELEMENTWISE.values() if o.c_form == "call" and o.arity == 1}
_CALLS = {o.name for o in ELEMENTWISE.values() if o.c_form == "call" and o.arity == 2}


def is_float(dtype: str) -> bool:
    """A dtype whose values an expression computes as `float` (rounded to the dtype)."""
    return dtype in FLOATS


def bits16(value, dtype: str) -> int:
    """The bits of a 16-bit float literal, rounded as the interpreter rounds it."""
    from ..interp import NUMPY_DTYPES
    return int(np.asarray(float(value), np.float32).astype(NUMPY_DTYPES[dtype]).view(np.uint16))


def literal(value, dtype: str) -> str:
    if dtype == "bool":
        return "true" if value else "false"
    if dtype in ("i32", "i8", "u8"):
        return f"{int(value)}"
    v = float(value)
    if dtype in ("f8e4m3", "f8e5m2"):    # the FP8 value the interpreter's literal holds
        from ..interp import NUMPY_DTYPES
        v = float(np.asarray(v, np.float32).astype(NUMPY_DTYPES[dtype]))
    if math.isinf(v):
        return "(-INFINITY)" if v < 0 else "INFINITY"
    if math.isnan(v):
        return "NAN"
    return f"{v!r}f" if "e" in repr(v) or "." in repr(v) else f"{v!r}.0f"


class ExprRenderer:
    """`load(name, idx)` renders a read of a stored value; `scalar(name)` a kernel scalar;
    `spelling` names the ptc.ops.Op attribute that spells a function (c or hip)."""

    def __init__(self, read: Callable[[str, list[str]], str], scalar: Callable[[str], str],
                 extent: Callable[[T.Extent], int], spelling: str = "c",
                 native16: dict[str, str] | None = None,
                 ranges: dict[str, tuple[int, int]] | None = None):
        self.read = read
        self.ranges = ranges or {}          # named i32 values' ranges (sema.ranges)
        self.scalar = scalar
        self.extent = extent
        self.spelling = spelling
        self.native16 = native16 or {}     # 16-bit dtype -> its C type, where computed in 16 bits

    def function(self, op: str) -> str:
        return getattr(ELEMENTWISE[op], self.spelling)

    def shape(self, e) -> list[int]:
        return [self.extent(x) for x in e.type.shape]

    def render(self, e: T.TExpr, idx: list[str]) -> str:
        """A C expression of e's value: float for float dtypes (already rounded), int for
        i32 (wrapping like the interpreter's int32: + - * in unsigned arithmetic), bool
        for bool."""
        if isinstance(e, T.Const):
            return literal(e.value, e.type.dtype)
        if isinstance(e, T.Var):
            value = self.read(e.name, idx)
            return f"ptc::f32({value})" if is_float(e.type.dtype) else f"({value})"
        if isinstance(e, T.Scalar):
            v = self.scalar(e.name)
            return f"ptc::f32({v})" if is_float(e.type.dtype) else f"((int)({v}))"
        if isinstance(e, T.IndexVec) and e.var is None:      # arange
            return f"({idx[0]})"
        if isinstance(e, T.IndexVec):
            base = f"((int){self.scalar(e.var)})"
            if e.size is None:
                return base
            return f"({base} * {self.extent(e.size)} + {idx[0]})"
        moved = self.element_of(e, idx)
        if moved is not None:
            return self.render(*moved)
        if isinstance(e, T.Convert):
            return self.convert(self.render(e.arg, idx), e.arg.type.dtype, e.type.dtype, e.arg)
        if isinstance(e, T.Elementwise):
            return self.elementwise(e, idx)
        raise NotImplementedError(f"{type(e).__name__} inside an elementwise expression")

    @staticmethod
    def element_of(e: T.TExpr, idx: list[str]) -> tuple[T.TExpr, list[str]] | None:
        """The (operand, index) whose element is element `idx` of a fill, transpose or
        expand; None for any other node."""
        if isinstance(e, T.Fill):
            return e.value, []
        if isinstance(e, T.Transpose):
            return e.arg, [idx[1], idx[0]]
        if isinstance(e, T.Expand):
            return e.arg, [i for pos, i in enumerate(idx) if pos not in e.axes]
        return None

    def computes_in_16_bits(self, e: T.TExpr) -> bool:
        """Whether e's own operation is one the renderer computes in 16 bits: a 16-bit
        +, - or *, or a conversion from an integer to 16 bits."""
        if e.type.dtype not in self.native16:
            return False
        if isinstance(e, T.Elementwise):
            return e.op in NATIVE_OPS and all(a.type.dtype == e.type.dtype for a in e.args)
        return isinstance(e, T.Convert) and e.arg.type.dtype in INTEGERS

    def native(self, e: T.TExpr, idx: list[str]) -> str:
        """A C expression of e's value in its own 16-bit C type (e's dtype is in native16)."""
        ctype = self.native16[e.type.dtype]
        moved = self.element_of(e, idx)
        if moved is not None:
            return self.native(*moved)
        if isinstance(e, T.Const):
            return f"ptc::from_bits<{ctype}>({bits16(e.value, e.type.dtype):#06x})"
        if isinstance(e, T.Var):
            return f"ptc::as16<{ctype}>({self.read(e.name, idx)})"
        if self.computes_in_16_bits(e) and isinstance(e, T.Convert):
            return self.from_int(self.render(e.arg, idx), e.type.dtype, e.arg)
        if self.computes_in_16_bits(e):
            shape = self.shape(e)
            a, b = (self.native(x, self.broadcast(x, shape, idx)) for x in e.args)
            return f"{NATIVE_OPS[e.op]}({a}, {b})"
        if isinstance(e, T.Convert) and e.arg.type.dtype == e.type.dtype:
            return self.native(e.arg, idx)
        # any other value of the dtype: computed in f32, rounded already, converted exactly
        return f"ptc::as16<{ctype}>({self.render(e, idx)})"

    def pair(self, node: pairs.Node, idx: list[str], leaves: list[tuple[str, str]]) -> str:
        """A C expression of a register word: two values of a pair form (ptc.lower.pairs),
        computed a register at a time. Each value the form computes one at a time is
        appended to `leaves` as (C type, C expression for element idx); the word reads
        leaf k's two values as l<k>[0] and l<k>[1]."""
        dtype = node.expr.type.dtype
        ctype = self.native16[dtype]

        def leaf(c_type: str, text: str) -> str:
            leaves.append((c_type, text))
            k = len(leaves) - 1
            return f"l{k}[0], l{k}[1]"

        def integer(a: T.TExpr) -> str:
            a_idx = self.broadcast(a, self.shape(node.expr.arg), idx)
            found = pairs.nibble(a)
            if found is not None:
                word, shift = found
                words = leaf("uint32_t", f"(uint32_t)({self.render(word, a_idx)})")
                return f"ptc::nibbles16<{ctype}, {shift}>({words})"
            return f"ptc::biased16<{ctype}>({leaf('uint32_t', f'(uint32_t)({self.render(a, a_idx)})')})"

        if node.kind == "op":
            shape = self.shape(node.expr)
            a, b = (self.pair(n, self.broadcast(n.expr, shape, idx), leaves) for n in node.args)
            return f"ptc::pk_{node.expr.op}<{ctype}>({a}, {b})"
        if node.kind == "difference":
            a, b = (integer(x) for x in node.args)
            return f"ptc::pk_sub<{ctype}>({a}, {b})"
        if node.kind == "offset":
            bias = pairs.BIAS[dtype]
            return f"ptc::pk_sub<{ctype}>({integer(node.args[0])}, {bias * 0x10001:#010x}u)"
        return f"ptc::pack16<{ctype}>({leaf(ctype, self.native(node.expr, idx))})"

    def from_int(self, value: str, dtype: str, arg: T.TExpr) -> str:
        """Integer `arg` (whose value is `value`) converted to the 16-bit `dtype` in one step,
        in its C type: from 16 bits where its range fits them (one instruction on AMD, whose
        32-bit integers convert to f16 through f32)."""
        if fits_16_bits(arg, self.ranges):
            return f"ptc::from_short<{self.native16[dtype]}>((short)({value}))"
        return f"ptc::from_int<{self.native16[dtype]}>((int)({value}))"

    def broadcast(self, arg, result_shape: list[int], idx: list[str]) -> list[str]:
        shape = self.shape(arg)
        off = len(result_shape) - len(shape)
        return ["0" if n == 1 and result_shape[off + j] != 1 else idx[off + j]
                for j, n in enumerate(shape)]

    def elementwise(self, e: T.Elementwise, idx: list[str]) -> str:
        if self.computes_in_16_bits(e):
            return f"ptc::f32({self.native(e, idx)})"
        shape = self.shape(e)
        args = [self.render(a, self.broadcast(a, shape, idx)) for a in e.args]
        dtype = e.type.dtype
        op = e.op
        if op == "where":
            c, a, b = args
            out = f"({c} ? {a} : {b})"
        elif op == "neg":
            out = f"(-{args[0]})"
        elif op == "not":
            out = f"(!{args[0]})"
        elif op in _UNARY:
            out = f"{self.function(op)}({args[0]})" if dtype != "i32" else f"abs({args[0]})"
        elif op in ("max", "min"):
            fn = self.function(op)
            out = f"{fn}({args[0]}, {args[1]})" if is_float(dtype) else \
                f"(({args[0]}) {'>' if op == 'max' else '<'} ({args[1]}) ? ({args[0]}) : ({args[1]}))"
        elif op == "floordiv":
            out = f"ptc::floordiv({args[0]}, {args[1]})"
        elif op == "mod":
            out = f"ptc::floormod({args[0]}, {args[1]})"
        elif op in _CALLS:
            out = f"{self.function(op)}({args[0]}, {args[1]})"
        else:
            out = f"({args[0]} {_BINARY[op]} {args[1]})"
        if dtype in _ROUND:
            out = f"{_ROUND[dtype]}({out})"
        elif dtype == "i32" and op in ("add", "sub", "mul"):
            # wraps like the interpreter's int32, without signed overflow
            out = f"((int)((unsigned)({args[0]}) {_BINARY[op]} (unsigned)({args[1]})))"
        elif dtype == "i32" and op not in ("lt", "le", "gt", "ge", "eq", "ne"):
            out = f"((int)({out}))"
        return out

    def convert(self, value: str, src: str, dst: str, arg: T.TExpr) -> str:
        if dst in self.native16 and src in INTEGERS:
            return f"ptc::f32({self.from_int(value, dst, arg)})"
        if src == dst:
            return value
        if dst in _ROUND:
            return f"{_ROUND[dst]}((float)({value}))"
        if dst in _NARROW:
            return f"{_NARROW[dst]}({value})"
        if dst == "f32":
            return f"((float)({value}))"
        if dst == "i32":
            return f"((int)({value}))"
        return f"(({value}) != 0)"


def store_value(value: str, dtype: str) -> str:
    """Convert a rendered value to the C type stored in memory."""
    if dtype in ("f16", "bf16", "f8e4m3", "f8e5m2"):
        return f"ptc::from_f32<{CTYPES[dtype]}>({value})"
    if dtype == "i32":
        return f"(int)({value})"
    return value
