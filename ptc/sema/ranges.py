"""The values an integer expression can take, where its operands bound them.

    int_range(e)      # (lo, hi), or None where nothing bounds e

From literals, the 8-bit dtypes (`u8` 0..255, `i8` -128..127, `bool` 0..1), `x & c` with
c >= 0 (0..c), shifts by literals, and +, -, * of bounded operands (interval arithmetic,
None where the result could leave i32, which wraps). The renderers convert an integer
whose range fits 16 bits to f16 / bf16 by one 16-bit conversion (the same value: every
integer of i16 converts to the nearest 16-bit float either way).
"""
from __future__ import annotations

from . import typed as T

I32 = (-2 ** 31, 2 ** 31 - 1)
DTYPE_RANGES = {"u8": (0, 255), "i8": (-128, 127), "bool": (0, 1)}


def int_range(e: T.TExpr) -> tuple[int, int] | None:
    if isinstance(e, T.Const) and isinstance(e.value, (bool, int)):
        return int(e.value), int(e.value)
    if isinstance(e, (T.Convert, T.Expand)):
        if e.arg.type.dtype in DTYPE_RANGES:
            return DTYPE_RANGES[e.arg.type.dtype]
        return int_range(e.arg) if e.arg.type.dtype == "i32" else None
    if not (isinstance(e, T.Elementwise) and len(e.args) == 2):
        return None
    a, b = (int_range(x) for x in e.args)
    if e.op == "bitand":
        masks = [r[1] for r in (a, b) if r is not None and r[0] >= 0]
        return (0, min(masks)) if masks else None
    if e.op == "shr" and b is not None and b[0] == b[1] and 0 <= b[0] < 32:
        lo, hi = a or I32
        return lo >> b[0], hi >> b[0]
    if a is None or b is None or e.op not in ("add", "sub", "mul"):
        return None
    if e.op == "add":
        out = (a[0] + b[0], a[1] + b[1])
    elif e.op == "sub":
        out = (a[0] - b[1], a[1] - b[0])
    else:
        corners = [x * y for x in a for y in b]
        out = (min(corners), max(corners))
    return out if I32[0] <= out[0] and out[1] <= I32[1] else None


def fits_16_bits(e: T.TExpr) -> bool:
    """Whether integer expression e always fits an i16."""
    r = int_range(e)
    return r is not None and -2 ** 15 <= r[0] and r[1] < 2 ** 15
