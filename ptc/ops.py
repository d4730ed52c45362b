"""The one table of tile operations: every elementwise op (`Elementwise.op`) and every
reduction (`Reduce.op`) of the typed IR, with everything each stage needs to know about it.

    name      the op's name in the typed IR (`add`, `exp`, `sum`)
    spelling  how a .pt program writes it: an operator (`+`, `<`, `!`) or a function (`exp`)
    arity     its operand count (a reduction: 1, plus its axis)
    rule      its typing rule (see `Op.result_dtype` and docs/language.md):
                arith    numeric operands, unified; the result has their dtype
                divide   arith, except that i32 operands are divided as f32
                integer  i32 operands only; the result is i32
                compare  operands unified; the result is bool
                logic    bool operands; the result is bool
                bitwise  i32 operands, bit by bit; the result is i32 (`&` and `|` on bools
                         are the logic ops `and` and `or`: ptc.sema.exprs picks by dtype)
                shift    i32 operands; the result is i32 (amounts outside 0..31 shift every
                         bit out: see `shift_left`)
                math     a numeric operand; i32 is converted to f32 first
                same     a numeric operand; the result keeps its dtype
                select   a bool condition and two unified values (`where`)
                sum      a reduction of numbers; f16 and bf16 accumulate in f32
                extreme  a reduction of numbers that keeps their dtype (max, min)
    numpy     the NumPy function the reference interpreter (ptc.interp) applies
    c         its CUDA C spelling for f32 operands, in the form `c_form` says:
                infix (`a + b`), prefix (`-a`), call (`expf(a)`) or select (`c ? a : b`);
                a reduction's is the C expression that folds `x` into `acc`
    hip       its HIP spelling: clang builtins or ptc's own helpers (targets/hip/templates), never
              HIP's device math library, which generated code does not link
    sfu       whether the GPU runs it on the special-function unit (transcendentals)
    simt_ops  its cost class: CUDA-core operations per element in the cost model
              (ptc.stask.propagate counts them; an SFU op also counts as `sfu_ops`)

The sema checkers (ptc.sema.exprs, ptc.sema.calls), the interpreter, the CUDA expression
renderer (ptc.render.cexpr) and the work counts of ptc.stask.propagate all read this table;
docs/architecture.md shows where each sits in the pipeline.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

RULES = ("arith", "divide", "integer", "compare", "logic", "bitwise", "shift", "math", "same",
         "select", "sum", "extreme")


def _rsqrt(x):
    return np.reciprocal(np.sqrt(x))


def _sigmoid(x):
    return np.reciprocal(1 + np.exp(-x))


_ERF = np.frompyfunc(math.erf, 1, 1)


def _erf(x):
    """erf in f64 (NumPy has none), which the interpreter rounds to the result's dtype."""
    return np.asarray(_ERF(np.asarray(x, np.float64)), np.float64)


def _shift_amount(b):
    """(amount in 0..31, whether the amount was in range): the hardware's shift takes the
    amount as unsigned and, on NVIDIA, clamps it to 32 (PTX shl/shr); AMD's keeps its low
    5 bits, so the C helpers clamp explicitly and every target gives these values."""
    b = np.asarray(b, np.int64)
    return np.clip(b, 0, 31), (b >= 0) & (b < 32)


def shift_left(a, b):
    """`a << b` on i32: the bits of a shifted left (wrapping); an amount outside 0..31
    (negative or >= 32) shifts every bit out and gives 0."""
    amount, inside = _shift_amount(b)
    a = np.asarray(a, np.int32)
    low_bits = np.asarray((a.astype(np.int64) << amount) & 0xFFFFFFFF).astype(np.uint32)
    return np.where(inside, low_bits.astype(np.int32), 0).astype(np.int32)   # wraps


def shift_right(a, b):
    """`a >> b` on i32: arithmetic (the sign bit fills in, so -7 >> 1 == -4, a floor
    division by 2**b); an amount outside 0..31 gives 0 or -1, the sign of a."""
    amount, inside = _shift_amount(b)
    a = np.asarray(a, np.int32)
    return np.where(inside, a.astype(np.int64) >> amount, np.where(a < 0, -1, 0)).astype(np.int32)


@dataclass(frozen=True)
class Op:
    name: str
    kind: str                  # "elementwise" | "reduce"
    spelling: str
    arity: int
    rule: str
    numpy: Callable
    c: str
    c_form: str                # infix | prefix | call | select | fold
    hip: str
    sfu: bool = False
    simt_ops: int = 1

    @property
    def is_operator(self) -> bool:
        """Written as an operator (`a + b`, `-a`) rather than a function call."""
        return not self.spelling[0].isalpha()

    def result_dtype(self, *dtypes: str) -> str:
        """The dtype of the result for operands of `dtypes` (for a binary op, already
        unified by the checker; for `where`, the condition's first)."""
        if self.rule in ("compare", "logic"):
            return "bool"
        if self.rule in ("bitwise", "shift"):
            return "i32"
        if self.rule in ("divide", "math"):
            return "f32" if dtypes[0] == "i32" else dtypes[0]
        if self.rule == "integer":
            return "i32"
        if self.rule == "select":
            return dtypes[1]
        if self.rule == "sum":
            return "f32" if dtypes[0] in ("f16", "bf16") else dtypes[0]
        return dtypes[0]   # arith, same, extreme


def _e(name, spelling, arity, rule, numpy, c, c_form, hip=None, sfu=False,
       simt_ops=1) -> Op:
    return Op(name, "elementwise", spelling, arity, rule, numpy, c, c_form,
              c if hip is None else hip, sfu, simt_ops)


def _r(name, numpy, fold) -> Op:
    return Op(name, "reduce", name, 1, "sum" if name == "sum" else "extreme", numpy, fold,
              "fold", fold)


OPS: tuple[Op, ...] = (
    # binary operators
    _e("add", "+", 2, "arith", np.add, "+", "infix"),
    _e("sub", "-", 2, "arith", np.subtract, "-", "infix"),
    _e("mul", "*", 2, "arith", np.multiply, "*", "infix"),
    _e("div", "/", 2, "divide", np.divide, "/", "infix"),
    _e("floordiv", "//", 2, "integer", np.floor_divide, "ptc::floordiv", "call"),
    _e("mod", "%", 2, "integer", np.mod, "ptc::floormod", "call"),
    _e("lt", "<", 2, "compare", np.less, "<", "infix"),
    _e("le", "<=", 2, "compare", np.less_equal, "<=", "infix"),
    _e("gt", ">", 2, "compare", np.greater, ">", "infix"),
    _e("ge", ">=", 2, "compare", np.greater_equal, ">=", "infix"),
    _e("eq", "==", 2, "compare", np.equal, "==", "infix"),
    _e("ne", "!=", 2, "compare", np.not_equal, "!=", "infix"),
    _e("and", "&", 2, "logic", np.logical_and, "&&", "infix"),
    _e("or", "|", 2, "logic", np.logical_or, "||", "infix"),
    _e("bitand", "&", 2, "bitwise", np.bitwise_and, "&", "infix"),
    _e("bitor", "|", 2, "bitwise", np.bitwise_or, "|", "infix"),
    _e("xor", "^", 2, "bitwise", np.bitwise_xor, "^", "infix"),
    # shifts go through helpers: C leaves shifts of negative values (<<) and of 32 or more
    # bits undefined, and AMD's shifter keeps only 5 bits of the amount
    _e("shl", "<<", 2, "shift", shift_left, "ptc::shift_left", "call"),
    _e("shr", ">>", 2, "shift", shift_right, "ptc::shift_right", "call"),
    # unary operators
    _e("neg", "-", 1, "same", np.negative, "-", "prefix"),
    _e("not", "!", 1, "logic", np.logical_not, "!", "prefix"),
    # functions
    # exp and exp2 are the SFU's approximation (docs/language.md, "Numerics")
    _e("exp", "exp", 1, "math", np.exp, "ptc::exp_sfu", "call", sfu=True),
    _e("exp2", "exp2", 1, "math", np.exp2, "ptc::exp2_sfu", "call", sfu=True),
    _e("log", "log", 1, "math", np.log, "logf", "call", hip="ptc::log_", sfu=True),
    _e("sqrt", "sqrt", 1, "math", np.sqrt, "sqrtf", "call", hip="ptc::sqrt_", sfu=True),
    _e("rsqrt", "rsqrt", 1, "math", _rsqrt, "ptc::rsqrt_", "call", sfu=True),
    # tanh, sigmoid and erf: accurate to a few ulp (docs/language.md, "Numerics"); on CUDA
    # tanh and sigmoid cost an ex2 and a reciprocal on the SFU, erf is a polynomial
    _e("tanh", "tanh", 1, "math", np.tanh, "tanhf", "call", hip="ptc::tanh_", sfu=True),
    _e("sigmoid", "sigmoid", 1, "math", _sigmoid, "ptc::sigmoid_", "call", sfu=True),
    _e("erf", "erf", 1, "math", _erf, "erff", "call", hip="ptc::erf_", simt_ops=12),
    _e("abs", "abs", 1, "same", np.abs, "fabsf", "call", hip="__builtin_fabsf"),
    _e("max", "max", 2, "arith", np.maximum, "fmaxf", "call", hip="__builtin_fmaxf"),
    _e("min", "min", 2, "arith", np.minimum, "fminf", "call", hip="__builtin_fminf"),
    _e("where", "where", 3, "select", np.where, "?:", "select"),
    # reductions (`sum(x, axis=1)`, `rowmax(x)`)
    _r("sum", np.sum, "acc += x;"),
    _r("max", np.max, "acc = fmaxf(acc, x);"),
    _r("min", np.min, "acc = fminf(acc, x);"),
)

ELEMENTWISE: dict[str, Op] = {o.name: o for o in OPS if o.kind == "elementwise"}
REDUCTIONS: dict[str, Op] = {o.name: o for o in OPS if o.kind == "reduce"}
# the binary operators of the language by spelling (`+` -> add, `&` -> bitand); `-` and `!`
# as prefix operators are `neg` and `not`
BINARY_OPERATORS: dict[str, Op] = {o.spelling: o for o in ELEMENTWISE.values()
                                   if o.is_operator and o.arity == 2 and o.rule != "logic"}
# `&` and `|` of two bools: the logic ops (`and`, `or`), not the bitwise ones
LOGIC_OPERATORS: dict[str, Op] = {o.spelling: o for o in ELEMENTWISE.values()
                                  if o.is_operator and o.arity == 2 and o.rule == "logic"}
# the ops whose result is the SFU's (the cost model counts one SFU instruction per value)
SFU_OPS: tuple[str, ...] = tuple(o.name for o in ELEMENTWISE.values() if o.sfu)
# the one-argument math functions (`exp(x)`)
UNARY_FUNCTIONS: tuple[str, ...] = tuple(o.name for o in ELEMENTWISE.values()
                                         if not o.is_operator and o.arity == 1)
assert all(o.rule in RULES for o in OPS)
