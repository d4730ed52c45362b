"""Which loads one TMA box (per 128-byte panel) moves, and how (docs/sm90.md).

    box = tma_box(kernel, tiles, load)    # TmaBox, or a string saying why TMA cannot

Read by the plan construction (a warp-specialized producer loads a tile by TMA where a box
takes it, else with per-thread copies) and by the lowering (the box, the tensor map, the
layout TMA writes). cuTensorMapEncodeTiled takes boxes of rank 1 to 5 whose innermost
extent is whole 16-byte chunks, and fills out-of-bounds elements with zero only.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..sema import typed as T
from ..sema.dtypes import DTYPE_BYTES
from .swizzle import SmemLayout, tma_layout
from .tiles import (TileError, const, dim_expr, divisible, divisible_all, extent_value, mul,
                    stored_rows)

MAX_RANK = 5
# the element types a tensor map names (cuTensorMapEncodeTiled's CUtensorMapDataType;
# ptc's bool is one byte, moved as UINT8)
TMA_DTYPES = frozenset({"f16", "bf16", "f32", "i32", "i8", "u8", "f8e4m3", "f8e5m2", "bool"})


@dataclass(frozen=True)
class TmaBox:
    box: tuple[int, ...]      # elements per tensor dim, outermost first (one panel's box:
                              # the innermost extent is at most a panel's columns)
    layout: SmemLayout        # how the tile lands in shared memory
    strides: tuple[T.TExpr, ...]   # bytes between indices of each dim but the innermost,
                                   # innermost first (the tensor map's globalStrides)
    conditions: tuple[T.TExpr, ...]   # runtime dims that must make them 16-byte multiples


def tensor_strides(kernel: T.TypedKernel, tensor: str) -> tuple[T.TExpr, ...]:
    """The byte strides of a row-major tensor's dims but the innermost, innermost first."""
    t = kernel.tensor(tensor)
    out, acc = [], const(DTYPE_BYTES[t.dtype])
    for d in reversed(t.dims[1:]):
        acc = mul(acc, dim_expr(kernel, d))
        out.append(acc)
    return tuple(out)


# a tiled-mode box is consecutive rows; TMA's gather4 mode (four rows a copy) is not used
GATHERED = "its rows are gathered (each row's position is loaded; no tiled TMA box)"
# a box of every n-th element (elementStrides) is not used: the producer's threads copy it
STRIDED = "it takes every n-th element of a dim (a strided tile: the threads copy it)"
# a tile of rank 3 is its rows (ptc.sema.batched): a load's box of three dims lands them in
# order; a store of one goes from the registers
BATCHED = "its rows span two dims (a tile of rank 3, stored from the registers)"
# a 2-D tile broadcast over the heads of a tile of rank 3 reads its rows once per head (a
# row per head, each row for the head's rows)
REPEATED = "its rows repeat for each head of a tile of rank 3 (no box reads a row twice)"


def tma_box(kernel: T.TypedKernel, tiles, load: T.Load) -> TmaBox | str:
    """The box that loads `load`'s tile, or why TMA cannot."""
    if load.pad != 0.0:
        return f"TMA fills out-of-bounds elements with zero, not {load.pad}"
    if any(isinstance(i, T.Gather) for i in load.index):
        return GATHERED
    if any(isinstance(i, T.TileSlice) and i.stride != 1 for i in load.index):
        return STRIDED
    if repeated_rows(load):
        return REPEATED
    inner = load.index[-1]
    if isinstance(inner, T.TileSlice) and inner.offset is not None and \
            divisible(inner.offset, 16 // DTYPE_BYTES[kernel.tensor(load.tensor).dtype]) \
            != (True, ()):
        # the box's rows start anywhere (negative ones too); its innermost start is kept
        # to whole 16-byte chunks, where the PTX ISA's tiled mode is plainly safe
        return "its columns are moved by an offset that may not be whole 16-byte chunks"
    # a tile of rank 3 is a box of three dims > 1, whose rows land in order: its rows
    return _box(kernel, tiles, load.tensor, load.index, load.type.shape, 1,
                3 if batched_rows(load) else 2)


def tma_store_box(kernel: T.TypedKernel, tiles, store: T.Store, parts: int = 1) -> TmaBox | str:
    """The box that stores `store`'s tile (each of `parts` consumer warpgroups its share
    of the rows), or why TMA cannot. TMA stores clip at the tensor's edges."""
    if store.atomic:
        return "it adds atomically (no TMA reduction is issued)"
    if any(isinstance(i, T.Gather) for i in store.index):
        return GATHERED
    if batched_rows(store) or stored_rows(store):
        return BATCHED
    if len(store.value.type.shape) != 2:
        return "the epilogue stores 2-D tiles by TMA; others from the registers"
    return _box(kernel, tiles, store.tensor, store.index, store.value.type.shape, parts)


def _box(kernel, tiles, name: str, index, shape_exprs, parts: int,
         box_dims: int = 2) -> TmaBox | str:
    tensor = kernel.tensor(name)
    if tensor.dtype not in TMA_DTYPES:
        return f"no tensor map takes {tensor.dtype} elements"
    if not 1 <= len(tensor.dims) <= MAX_RANK:
        return f"TMA takes tensors of rank 1 to {MAX_RANK}, not {len(tensor.dims)}"
    try:
        box = []
        for item in index:
            if isinstance(item, T.TileSlice):
                box.append(extent_value(kernel, tiles, item.size))
            elif isinstance(item, T.Point):
                box.append(1)
            else:
                box.append(extent_value(kernel, tiles, item.extent))
        shape = [extent_value(kernel, tiles, e) for e in shape_exprs]
    except TileError as exc:
        return str(exc)
    if parts > 1:
        if len(shape) != 2 or shape[0] % parts:
            return f"its rows do not divide over {parts} consumer warpgroups"
        row = next((i for i, b in enumerate(box[:-1]) if b == shape[0]), None)
        if row is None:
            return "its rows are not one dim of the tensor"
        box[row] //= parts
        shape[0] //= parts
    esize = DTYPE_BYTES[tensor.dtype]
    if box[-1] * esize % 16:
        return (f"its innermost extent ({box[-1]} x {esize} bytes) is not whole 16-byte "
                "chunks")
    if len([x for x in box if x > 1]) > box_dims or len(shape) > 2:
        return "it spans more than two dims of the tensor"
    rows, cols = shape if len(shape) == 2 else (1, shape[0])
    if cols != box[-1]:
        return "its columns are not the tensor's innermost dim"
    layout = tma_layout(rows, cols, tensor.dtype)
    if layout is None:
        return (f"no box takes a {rows} x {cols} {tensor.dtype} tile (rows of whole 16-byte "
                "chunks, at most 256 rows)")
    strides = tensor_strides(kernel, name)
    known, conds = divisible_all(strides, 16)     # the row stride first: it asks for all
    if not known:
        return f"a row of {tensor.name} is never a whole number of 16-byte chunks"
    conditions = [c for c in conds if isinstance(c, T.Scalar)]
    box[-1] = min(box[-1], layout.panel_cols)
    return TmaBox(tuple(box), layout, strides, tuple(conditions))


def per_thread_copy(kernel: T.TypedKernel, load: T.Load) -> str | None:
    """None when a load the producer's threads copy can go by cp.async, else why not:
    gathered or strided rows in 16-byte chunks of each row (construct.py checks that a
    layout TMA would write takes them), any other tile one element of 4 bytes or wider
    per copy at any stride; zero past the edges."""
    esize = DTYPE_BYTES[kernel.tensor(load.tensor).dtype]
    if isinstance(load.index[-1], T.TileSlice) and load.index[-1].stride != 1:
        return "its columns are every n-th element of the innermost dim (a strided tile)"
    if rows_addressed_each(load):
        # 16-byte chunks of each row (element copies where the launch finds them unaligned)
        if load.pad != 0.0:
            return f"cp.async fills rows outside the tensor with zero, not {load.pad}"
        return None
    if esize < 4:
        return f"cp.async moves at least 4 bytes, and its elements are {esize}"
    if load.pad != 0.0:
        return f"cp.async fills past the edges with zero, not {load.pad}"
    return None


def rows_addressed_each(load: T.Load) -> bool:
    """Whether each of a load's rows is at a position of its own (gathered, strided, the
    rows of a tile of rank 3, or repeated for each head): no tiled box takes them, and the
    producer's threads copy each row's 16-byte chunks into the layout TMA would write."""
    return any(isinstance(i, T.Gather) for i in load.index) or strided_rows(load) or \
        batched_rows(load) or repeated_rows(load)


def strided_rows(load: T.Load) -> bool:
    """Whether a tile takes every n-th row (its columns consecutive): the producer's
    threads copy its rows' 16-byte chunks into the layout TMA would write."""
    return any(isinstance(i, T.TileSlice) and i.stride != 1 for i in load.index[:-1])


def batched_rows(access: T.Load | T.Store) -> bool:
    """Whether a load or store is of a tile of rank 3, computed as its rows: the copy
    addresses each row (ptc.lower.tiles, BatchRows)."""
    return T.tile_axes(access.index) == 3


def repeated_rows(load: T.Load) -> bool:
    """Whether a load's rows repeat in the row form of a tile of rank 3 (T.RepeatRows):
    the copy addresses each row (ptc.lower.tiles, BatchRows of a step 0 along one axis)."""
    return any(isinstance(i, T.RepeatRows) for i in load.index)


__all__ = ["TmaBox", "tma_box", "tma_store_box", "tensor_strides", "per_thread_copy",
           "rows_addressed_each", "strided_rows", "batched_rows", "repeated_rows", "BATCHED",
           "REPEATED"]
