"""Where the lowered IR's values live -- a register tile in a named layout, a shared-memory
buffer (ring or scratch), a loaded tile read from its buffer -- and the global tiles its
copies and stores address (ptc.lower.ir builds its ops and kernels on these).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..sema import typed as T
from .swizzle import SmemLayout


# ---- where values live ------------------------------------------------------------------
@dataclass(frozen=True)
class Buffer:
    """A region of dynamic shared memory: `slots` copies of one tile (a ring) or scratch."""

    name: str                    # its C name
    dtype: str
    shape: tuple[int, ...]       # one slot
    slots: int
    layout: SmemLayout | None    # 2-D tiles: rows and swizzle; None: a plain vector
    slot_bytes: int              # bytes between slots (1024-aligned for swizzled tiles)
    offset: int                  # bytes into dynamic shared memory
    purpose: str                 # what it holds, for people
    plan_buffer: str = ""        # the plan's buffer it realizes ("" for scratch)
    live: tuple[int, int] = (0, 0)   # first and last op position that touch it

    @property
    def bytes(self) -> int:
        return self.slot_bytes * self.slots

    @property
    def end(self) -> int:
        return self.offset + self.bytes


@dataclass(frozen=True)
class RegTile:
    """A tile value in registers: `layout.size` values per thread."""

    name: str                    # its C name
    dtype: str
    shape: tuple[int, ...]       # the tile's shape (the layout may cover more)
    layout: str                  # a key of LoweredKernel.layouts


@dataclass(frozen=True)
class InShared:
    """A loaded tile, read where it is used from its buffer (slot per iteration)."""

    buffer: str
    loop: str                    # "" or the loop whose iteration picks the slot
    # its first axis holds the rows the consumer warpgroups divide: an instance's element
    # (r, ...) is the tile's (%row0 + r, ...)
    split: bool = False


# ---- global tiles ------------------------------------------------------------------------
@dataclass(frozen=True)
class GlobalTile:
    """A tile of a global tensor: element (r, c) of the tile (rows, cols; 1-D tiles have one
    row, 0-D one element) is at  tensor + origin + r * row_stride + c * col_stride  and
    exists when  row_start + r * row_step < row_bound  and  col_start + c * col_step <
    col_bound  and `valid` -- and, for an offset tile whose start may lie before the tensor
    (`row_low`, `col_low`), 0 <= row_start + r * row_step (and the same for columns). The
    steps are 1 but for a strided offset tile (whose row_stride is the dim's times the
    step). Offsets, strides and bounds are typed scalar expressions."""

    tensor: str
    dtype: str
    rows: int
    cols: int
    origin: T.TExpr              # element offset of (0, 0)
    row_stride: T.TExpr
    col_stride: T.TExpr
    row_start: T.TExpr
    row_bound: T.TExpr
    col_start: T.TExpr
    col_bound: T.TExpr
    valid: T.TExpr | None        # point indices inside their dims
    row_low: bool = False        # an offset tile's rows may start before row 0
    col_low: bool = False        # ... its columns before column 0
    row_step: int = 1            # a strided offset tile's rows: every row_step-th
    col_step: int = 1
    # gathered rows (each row's position is loaded) or a tile of rank 3's rows (computed)
    gather: "GatherRows | BatchRows | None" = None


@dataclass(frozen=True)
class GatherRows:
    """A gathered tile's rows: row r of the tile is row `index[r]` of the tensor (the
    GlobalTile's origin and row_start leave the rows out, its row_stride is the dim's),
    where `index` is the i32 tile `tile` (one row of `rows` positions), reading `pad`
    past the index tensor; a position outside [0, bound) is no row (the pad is read, a
    store skips it). The copy reads the index tensor itself, one position per row."""

    tile: GlobalTile
    pad: int
    bound: T.TExpr


@dataclass(frozen=True)
class BatchRows:
    """The rows of a tile of rank 3 (ptc.sema.batched): row r of the tile is element
    o = outer_start + (r // inner) * outer_step of its outer axis and i = inner_start +
    (r % inner) * inner_step of its inner axis, at position o * ratio + i counted in rows
    of the inner axis from the GlobalTile's origin (which leaves both out, as a gathered
    tile's does); a row either axis puts outside its dim (below 0 or past the end) is no
    row (the pad is read, a store skips it). `ratio` is the outer axis's stride over the
    inner's."""

    inner: int
    outer_start: T.TExpr
    outer_bound: T.TExpr
    inner_start: T.TExpr
    inner_bound: T.TExpr
    ratio: T.TExpr
    # an offset axis may start below 0 (its rows there are none); a strided one takes
    # every step-th element: element k of the axis is start + k * step
    outer_step: int = 1
    inner_step: int = 1


def c_name(value: str) -> str:
    """The C name of a value: `%s_mma` -> t_s_mma, `acc` -> v_acc."""
    return ("t_" + value[1:] if value.startswith("%") else "v_" + value).replace("%", "")
