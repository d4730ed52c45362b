"""Which loads one box of a bulk tensor copy (TMA on sm90; one per 128-byte panel) moves,
and how (docs/sm90.md).

    rules = copy_rules(device)                   # its backend's CopyRules, or None
    box = tma_box(kernel, tiles, load, rules)    # TmaBox, or a string saying why not

Read by the plan construction (a warp-specialized producer loads a tile by TMA where a box
takes it, else with per-thread copies) and by the lowering (the box, the tensor map, the
layout TMA writes). What a box may hold (element types, ranks, the chunk its rows and
strides come in, what it fills past the tensor's edges) and what a per-thread copy moves
at least are the backend's (`CopyRules`, declared by ptc/targets/<backend>/copy_rules.py:
CUDA's are cuTensorMapEncodeTiled's and cp.async's); the geometry is here.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..sema import typed as T
from ..sema.dtypes import DTYPE_BYTES
from .swizzle import SmemLayout, tma_layout
from .tiles import (TileError, const, dim_expr, divisible, divisible_all, extent_value, mul,
                    stored_rows)



@dataclass(frozen=True)
class CopyRules:
    """What a backend's copy units move (its copy_rules.py's RULES): a bulk tensor copy's
    box, and a per-thread asynchronous copy."""

    unit: str                  # the bulk copy's name, in messages ("TMA")
    dtypes: frozenset[str]     # the element types its descriptors name
    max_rank: int              # tensors of rank 1 .. max_rank
    chunk_bytes: int           # a box's rows, its innermost start and the tensor's strides
                               # are whole chunks of this many bytes
    fill: float                # what a copy writes for elements outside the tensor
    thread_unit: str           # the per-thread asynchronous copy's name ("cp.async")
    thread_bytes: int          # the least one of them moves

    @property
    def fills(self) -> str:
        """The fill value in messages."""
        return "zero" if self.fill == 0.0 else f"{self.fill}"


def copy_rules(device) -> CopyRules | None:
    """The copy rules `device`'s backend declares (None: it declares none, and no plan
    loads by a bulk tensor copy)."""
    from .. import targets

    return targets.copy_rules(device.backend)


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


def tma_box(kernel: T.TypedKernel, tiles, load: T.Load, rules: CopyRules | None
            ) -> TmaBox | str:
    """The box that loads `load`'s tile, or why no bulk copy can."""
    if rules is None:
        return "the backend declares no bulk tensor copy"
    if load.pad != rules.fill:
        return f"{rules.unit} fills out-of-bounds elements with {rules.fills}, not {load.pad}"
    if any(isinstance(i, T.Gather) for i in load.index):
        return GATHERED
    if any(isinstance(i, T.TileSlice) and i.stride != 1 for i in load.index):
        return STRIDED
    if repeated_rows(load):
        return REPEATED
    inner = load.index[-1]
    chunk = rules.chunk_bytes
    if isinstance(inner, T.TileSlice) and inner.offset is not None and \
            divisible(inner.offset, chunk // DTYPE_BYTES[kernel.tensor(load.tensor).dtype]) \
            != (True, ()):
        # the box's rows start anywhere (negative ones too); its innermost start is kept
        # to whole chunks, where the PTX ISA's tiled mode is plainly safe
        return f"its columns are moved by an offset that may not be whole {chunk}-byte chunks"
    # a tile of rank 3 is a box of three dims > 1, whose rows land in order: its rows
    return _box(kernel, tiles, load.tensor, load.index, load.type.shape, rules, 1,
                3 if batched_rows(load) else 2)


def tma_store_box(kernel: T.TypedKernel, tiles, store: T.Store, rules: CopyRules | None,
                  parts: int = 1) -> TmaBox | str:
    """The box that stores `store`'s tile (each of `parts` consumer warpgroups its share
    of the rows), or why no bulk copy can. TMA stores clip at the tensor's edges."""
    if rules is None:
        return "the backend declares no bulk tensor copy"
    if store.atomic:
        return "it adds atomically (no TMA reduction is issued)"
    if any(isinstance(i, T.Gather) for i in store.index):
        return GATHERED
    if batched_rows(store) or stored_rows(store):
        return BATCHED
    if len(store.value.type.shape) != 2:
        return "the epilogue stores 2-D tiles by TMA; others from the registers"
    return _box(kernel, tiles, store.tensor, store.index, store.value.type.shape, rules, parts)


def _box(kernel, tiles, name: str, index, shape_exprs, rules: CopyRules, parts: int,
         box_dims: int = 2) -> TmaBox | str:
    tensor = kernel.tensor(name)
    if tensor.dtype not in rules.dtypes:
        return f"no {rules.unit} descriptor takes {tensor.dtype} elements"
    if not 1 <= len(tensor.dims) <= rules.max_rank:
        return (f"{rules.unit} takes tensors of rank 1 to {rules.max_rank}, not "
                f"{len(tensor.dims)}")
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
    esize, chunk = DTYPE_BYTES[tensor.dtype], rules.chunk_bytes
    if box[-1] * esize % chunk:
        return (f"its innermost extent ({box[-1]} x {esize} bytes) is not whole {chunk}-byte "
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
    known, conds = divisible_all(strides, chunk)     # the row stride first: it asks for all
    if not known:
        return f"a row of {tensor.name} is never a whole number of {chunk}-byte chunks"
    conditions = [c for c in conds if isinstance(c, T.Scalar)]
    box[-1] = min(box[-1], layout.panel_cols)
    return TmaBox(tuple(box), layout, strides, tuple(conditions))


def per_thread_copy(kernel: T.TypedKernel, load: T.Load, rules: CopyRules | None) -> str | None:
    """None when a load the producer's threads copy can go by per-thread asynchronous
    copies (cp.async), else why not: gathered or strided rows in chunks of each row
    (construct.py checks that a layout TMA would write takes them), any other tile one
    element of `thread_bytes` or wider per copy at any stride; `fill` past the edges."""
    if rules is None:
        return "the backend declares no per-thread asynchronous copy"
    esize, fill, unit = DTYPE_BYTES[kernel.tensor(load.tensor).dtype], rules.fill, rules.thread_unit
    if isinstance(load.index[-1], T.TileSlice) and load.index[-1].stride != 1:
        return "its columns are every n-th element of the innermost dim (a strided tile)"
    if rows_addressed_each(load):
        # chunks of each row (element copies where the launch finds them unaligned)
        if load.pad != fill:
            return f"{unit} fills rows outside the tensor with {rules.fills}, not {load.pad}"
        return None
    if esize < rules.thread_bytes:
        return f"{unit} moves at least {rules.thread_bytes} bytes, and its elements are {esize}"
    if load.pad != fill:
        return f"{unit} fills past the edges with {rules.fills}, not {load.pad}"
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


__all__ = ["CopyRules", "TmaBox", "copy_rules", "tma_box", "tma_store_box", "tensor_strides", "per_thread_copy",
           "rows_addressed_each", "strided_rows", "batched_rows", "repeated_rows", "BATCHED",
           "REPEATED"]
