"""The values an integer expression can take, where its operands bound them.

    int_range(e)             # (lo, hi), or None where nothing bounds e
    int_range(e, names)      # the same, with the ranges of named values (named_ranges)

From literals, the 8-bit dtypes (`u8` 0..255, `i8` -128..127, `bool` 0..1), `x & c` with
c >= 0 (0..c), shifts by literals, and +, -, * of bounded operands (interval arithmetic,
None where the result could leave i32, which wraps); a named value bound once has the range
of its expression (`named_ranges`: `z = (load(Z[j]) as i32)[None, :]` is 0..255, as the
inline form is). The renderers convert an integer
whose range fits 16 bits to f16 / bf16 by one 16-bit conversion (the same value: every
integer of i16 converts to the nearest 16-bit float either way).
"""
from __future__ import annotations

from collections import Counter
from typing import Iterator, Mapping

from . import typed as T

I32 = (-2 ** 31, 2 ** 31 - 1)
DTYPE_RANGES = {"u8": (0, 255), "i8": (-128, 127), "bool": (0, 1)}


def int_range(e: T.TExpr, names: Mapping[str, tuple[int, int]] | None = None
              ) -> tuple[int, int] | None:
    """e's values from its operands, else those of its dtype where that is narrow (a loaded
    byte is 0..255 whatever computed it)."""
    r = _operand_range(e, names)
    return r if r is not None else DTYPE_RANGES.get(e.type.dtype)


def _operand_range(e: T.TExpr, names: Mapping[str, tuple[int, int]] | None
                   ) -> tuple[int, int] | None:
    if isinstance(e, T.Const) and isinstance(e.value, (bool, int)):
        return int(e.value), int(e.value)
    if isinstance(e, T.Var):
        return (names or {}).get(e.name)
    if isinstance(e, (T.Convert, T.Expand)):
        if e.arg.type.dtype in DTYPE_RANGES:
            return DTYPE_RANGES[e.arg.type.dtype]
        return int_range(e.arg, names) if e.arg.type.dtype == "i32" else None
    if not (isinstance(e, T.Elementwise) and len(e.args) == 2):
        return None
    a, b = (int_range(x, names) for x in e.args)
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


def fits_16_bits(e: T.TExpr, names: Mapping[str, tuple[int, int]] | None = None) -> bool:
    """Whether integer expression e always fits an i16."""
    r = int_range(e, names)
    return r is not None and -2 ** 15 <= r[0] and r[1] < 2 ** 15


def named_ranges(kernel: T.TypedKernel) -> dict[str, tuple[int, int]]:
    """The ranges of the i32 values the kernel binds to a name once, in program order
    (a name bound again, as a loop's carried value is, has none)."""
    lets = list(_lets(kernel.body))
    bound = Counter(let.name for let in lets)
    out: dict[str, tuple[int, int]] = {}
    for let in lets:
        if bound[let.name] == 1 and let.value.type.dtype == "i32":
            r = int_range(let.value, out)
            if r is not None:
                out[let.name] = r
    return out


def _lets(stmts) -> Iterator[T.Let]:
    for s in stmts:
        if isinstance(s, T.Let):
            yield s
        elif isinstance(s, (T.Loop, T.Grid)):
            yield from _lets(s.body)
