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
                math     a numeric operand; i32 is converted to f32 first
                same     a numeric operand; the result keeps its dtype
                select   a bool condition and two unified values (`where`)
                sum      a reduction of numbers; f16 and bf16 accumulate in f32
                extreme  a reduction of numbers that keeps their dtype (max, min)
    numpy     the NumPy function the reference interpreter (ptc.interp) applies
    c         its CUDA C spelling for f32 operands, in the form `c_form` says:
                infix (`a + b`), prefix (`-a`), call (`expf(a)`) or select (`c ? a : b`);
                a reduction's is the C expression that folds `x` into `acc`
    hip       its HIP spelling: clang builtins or ptc's own helpers (templates/hip), never
              HIP's device math library, which generated code does not link
    sfu       whether the GPU runs it on the special-function unit (transcendentals)
    simt_ops  its cost class: CUDA-core operations per element in the cost model
              (ptc.stask.propagate counts them; an SFU op also counts as `sfu_ops`)

The sema checkers (ptc.sema.exprs, ptc.sema.calls), the interpreter, the CUDA expression
renderer (ptc.render.cexpr) and the work counts of ptc.stask.propagate all read this table;
docs/architecture.md shows where each sits in the pipeline.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

RULES = ("arith", "divide", "integer", "compare", "logic", "math", "same", "select", "sum",
         "extreme")


def _rsqrt(x):
    return np.reciprocal(np.sqrt(x))


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
        if self.rule in ("divide", "math"):
            return "f32" if dtypes[0] == "i32" else dtypes[0]
        if self.rule == "integer":
            return "i32"
        if self.rule == "select":
            return dtypes[1]
        if self.rule == "sum":
            return "f32" if dtypes[0] in ("f16", "bf16") else dtypes[0]
        return dtypes[0]   # arith, same, extreme


def _e(name, spelling, arity, rule, numpy, c, c_form, hip=None, sfu=False) -> Op:
    return Op(name, "elementwise", spelling, arity, rule, numpy, c, c_form,
              c if hip is None else hip, sfu)


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
# the binary operators of the language by spelling (`+` -> add); `-` and `!` as prefix
# operators are `neg` and `not`
BINARY_OPERATORS: dict[str, Op] = {o.spelling: o for o in ELEMENTWISE.values()
                                   if o.is_operator and o.arity == 2}
# the one-argument math functions (`exp(x)`)
UNARY_FUNCTIONS: tuple[str, ...] = tuple(o.name for o in ELEMENTWISE.values()
                                         if not o.is_operator and o.arity == 1)
assert all(o.rule in RULES for o in OPS)
