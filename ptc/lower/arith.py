"""Arithmetic the lowering spells for the machine: exponentials in base 2.

    expr = base2_exponentials(expr)

The special-function unit computes 2^x only; `exp(v)` is rendered as 2^(v * log2 e), one
multiply and the MUFU. Softmax's `exp(x - y)` would then be a subtract, a multiply and
the MUFU per element; written as 2^(x * log2 e - y * log2 e) it is one fused multiply-add
(the compilers contract it: nvcc's default --fmad=true, clang's HIP default
-ffp-contract=fast-honor-pragmas) and the MUFU, with `y * log2 e` computed once per row
when y is a broadcast row value (flash attention's running max). Triton's and
FlashAttention's kernels do the same by hand. Only f32: 16-bit arithmetic rounds every op.
"""
from __future__ import annotations

import math

from ..sema import typed as T

LOG2E = math.log2(math.e)


def base2_exponentials(e: T.TExpr) -> T.TExpr:
    """`e` with every f32 exp(x - y) written as exp2(x * log2 e - y * log2 e)."""
    e = T.map_children(e, base2_exponentials)
    if (isinstance(e, T.Elementwise) and e.op == "exp" and e.type.dtype == "f32"
            and isinstance(e.args[0], T.Elementwise) and e.args[0].op == "sub"):
        diff = e.args[0]
        x, y = diff.args
        scaled = T.Elementwise("sub", (_times_log2e(x), _times_log2e(y)), diff.type)
        return T.Elementwise("exp2", (scaled,), e.type)
    return e


def _times_log2e(v: T.TExpr) -> T.TExpr:
    """v * log2 e; for a broadcast (`mn[:, None]`), the broadcast of mn * log2 e: the
    product is then one per row, as the compilers compute it and ptc.lower.costs counts."""
    if isinstance(v, T.Expand):
        return T.Expand(_times_log2e(v.arg), v.axes, T.TileType("f32", v.type.shape))
    return T.Elementwise("mul", (v, T.Const(LOG2E, T.TileType("f32"))),
                         T.TileType("f32", v.type.shape))
