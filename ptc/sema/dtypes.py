"""The dtype rules of docs/language.md: the dtypes, widening and promotion (each op's own
result dtype is in the op table, ptc.ops)."""
from __future__ import annotations

DTYPES = ("f16", "bf16", "f32", "i32", "i8", "u8", "f8e4m3", "f8e5m2", "bool")
# Storage dtypes of quantized data: loaded, stored and converted (`as`), but every operation
# on them computes on i32 (ptc.sema.exprs widens them first; docs/language.md, rule 8).
NARROW_INTS = ("i8", "u8")
# The 8-bit floats (OCP FP8): storage dtypes too, every operation computes on f32 (rule 9).
# f8e4m3 is E4M3FN: bias 7, no infinities, one NaN per sign (S.1111.111), largest 448;
# f8e5m2 is IEEE-like: bias 15, infinities and NaNs, largest 57344.
FP8 = ("f8e4m3", "f8e5m2")
FP8_MAX = {"f8e4m3": 448.0, "f8e5m2": 57344.0}
# the dtypes an operation widens first, and to what
WIDENED = {"i8": "i32", "u8": "i32", "f8e4m3": "f32", "f8e5m2": "f32"}
INT_RANGES = {"i32": (-2 ** 31, 2 ** 31 - 1), "i8": (-128, 127), "u8": (0, 255)}
# An operand format, not a storage dtype: `x as tf32` rounds f32 values to 10 mantissa bits
# (to nearest, ties away from zero, as cvt.rna.tf32.f32), and tf32 values only feed `@`
# (f32 accumulate), which may then run on TF32 tensor cores (docs/language.md).
OPERAND_DTYPES = ("tf32",)
# Named so the error can say "not yet supported" rather than "unknown".
FUTURE_DTYPES = ("i4", "u4", "f64")
FLOATS = ("f16", "bf16", "f32")
DTYPE_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "i32": 4, "i8": 1, "u8": 1,
               "f8e4m3": 1, "f8e5m2": 1, "bool": 1, "tf32": 4}
MMA_DTYPES = ("f16", "bf16", "f32", "tf32", "i8", "f8e4m3", "f8e5m2")
# the dtype `a @ b` gives (and accumulates in) for operands of a dtype: i8 products are exact
# s32 sums that wrap modulo 2^32; FP8 products (e4m3 and e5m2 mixed too) are f32 sums of
# exact products, as f16's (docs/language.md, rule 1)
MMA_RESULT = {"i8": "i32"}
ATOMIC_DTYPES = ("f16", "bf16", "f32", "i32")


def is_float(dtype: str) -> bool:
    return dtype in FLOATS


def widens_to(src: str, dst: str) -> bool:
    """True when every `src` value is exactly a `dst` value (storing without `as`)."""
    if src in NARROW_INTS:      # 8 significant bits: exact in every wider number format
        return src == dst or dst in ("i32", "f32", "f16", "bf16")
    if src in FP8:      # at most 3 significant bits, exponents within f16's and bf16's
        return src == dst or dst in ("f32", "f16", "bf16")
    return src == dst or (src in ("f16", "bf16") and dst == "f32")


def promote(a: str, b: str) -> str | None:
    """The dtype of an arithmetic operation on `a` and `b`, or None when it needs a cast."""
    if a == b:
        return a
    if "bool" in (a, b):
        return None
    if a == "i32":
        return b
    if b == "i32":
        return a
    if widens_to(a, b):
        return b
    if widens_to(b, a):
        return a
    return None  # f16 with bf16



I32_RANGE = INT_RANGES["i32"]


def literal_value(expr) -> float | int | None:
    """The value of a literal (a constant, or a negated one), else None."""
    from . import typed as T

    if isinstance(expr, T.Const):
        return expr.value
    if isinstance(expr, T.Elementwise) and expr.op == "neg":
        inner = literal_value(expr.args[0])
        return None if inner is None else -inner
    return None


def fp8_range(dtype: str) -> str:
    """What an FP8 dtype holds, for hints."""
    top = FP8_MAX[dtype]
    tiny = {"f8e4m3": "2^-9", "f8e5m2": "2^-16"}[dtype]
    return (f"{dtype} values lie in {-top:g}..{top:g}, the smallest nonzero magnitude "
            f"being {tiny}" + ("" if dtype == "f8e5m2" else ", with no infinities"))


def literal_problem(value: float | int, dtype: str) -> str | None:
    """Why `value` cannot stand for itself in `dtype` ("rounds to 0", "overflows"), or None."""
    import math

    import ml_dtypes
    import numpy as np

    if dtype in INT_RANGES:
        lo, hi = INT_RANGES[dtype]
        if dtype in NARROW_INTS and not float(value).is_integer():
            return "is not an integer"
        if float(value).is_integer() and not lo <= value <= hi:
            return f"is outside its range ({lo}..{hi})"
        return None
    if dtype in FP8:
        # a literal is a value of its dtype, never a conversion: it must be one, to rounding
        if math.isinf(value):
            return None if dtype == "f8e5m2" else "is infinite, and f8e4m3 has no infinities"
        top = FP8_MAX[dtype]
        if abs(value) > top:
            return f"is outside its range ({-top:g}..{top:g})"
        rounded = float(np.float32(value).astype({"f8e4m3": ml_dtypes.float8_e4m3fn,
                                                   "f8e5m2": ml_dtypes.float8_e5m2}[dtype]))
        return "rounds to 0" if value != 0 and rounded == 0 else None
    if not math.isfinite(value):
        return None
    kind = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32}[dtype]
    with np.errstate(over="ignore", under="ignore"):
        rounded = float(kind(value))
    if value != 0 and rounded == 0:
        return "rounds to 0"
    if not math.isfinite(rounded):
        return f"overflows to {'-' if value < 0 else ''}inf (largest: {float(kind(np.finfo(kind).max)):g})"
    return None
