"""Which register tiles stmatrix stores to shared memory (register_to_shared_stmatrix.cuh).

stmatrix.x4 writes four 8 x 8 matrices of 16-bit values whose rows are 16-byte chunks; a
warp's 16 rows x 16 columns of a wgmma accumulator packed in pairs are exactly its four
registers (docs/sm90.md). The lowering uses it where the layout and the tile allow, and
st.shared (one 32-bit store per pair) elsewhere.
"""
from __future__ import annotations

from .layout import Layout, digits
from .swizzle import SmemLayout

SIXTEEN_BIT = ("f16", "bf16")
# the wgmma accumulator's lanes and warps, and its first two register digits (a pair of
# columns, then rows + 8): ptc.lower.specialized.wgmma_layouts
LANES = digits((4, (0, 2)), (8, (1, 0)))
WARPS = digits((4, (16, 0)))
PAIR_THEN_ROWS = digits((2, (0, 1)), (2, (8, 0)))


def stmatrix_blocks(lay: Layout, shape: tuple[int, ...], dtype: str,
                    shared: SmemLayout) -> tuple[int, int] | None:
    """(64-row atoms, 16-column blocks) of a register tile that stmatrix.x4 stores whole,
    or None: 16-bit values in the wgmma accumulator layout, no registers past the tile's
    edge, into rows of whole 16-byte chunks (the TMA layouts)."""
    if dtype not in SIXTEEN_BIT or len(shape) != 2 or shared.swizzle != "tma":
        return None
    if lay.lanes != LANES or lay.warps != WARPS or lay.regs[:2] != PAIR_THEN_ROWS:
        return None
    if any(lay.exceeds(shape)):
        return None
    rest = lay.regs[2:]
    if not rest or rest[0].stride != (0, 8) or rest[0].size % 2:
        return None
    atoms = 1
    if len(rest) == 2 and rest[1].stride == (64, 0):
        atoms = rest[1].size
    elif len(rest) != 1:
        return None
    return atoms, rest[0].size // 2
