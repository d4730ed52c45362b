"""The dtype rules of docs/language.md: the dtypes, widening and promotion (each op's own
result dtype is in the op table, ptc.ops)."""
from __future__ import annotations

DTYPES = ("f16", "bf16", "f32", "i32", "bool")
# Named so the error can say "not yet supported" rather than "unknown".
FUTURE_DTYPES = ("f8e4m3", "f8e5m2", "i8", "i4", "f64", "tf32")
FLOATS = ("f16", "bf16", "f32")
DTYPE_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "i32": 4, "bool": 1}
MMA_DTYPES = ("f16", "bf16", "f32")
ATOMIC_DTYPES = ("f16", "bf16", "f32", "i32")


def is_float(dtype: str) -> bool:
    return dtype in FLOATS


def widens_to(src: str, dst: str) -> bool:
    """True when every `src` value is exactly a `dst` value (storing without `as`)."""
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

