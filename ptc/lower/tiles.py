"""The global-memory side of a load or store: which elements of which tensor a tile is.

`global_tile(kernel, tiles, tensor, index)` turns a subscript (`A[i, k]`, `Q[b, h, m, :]`,
`dA[b, h, c, L - 1]`) into a GlobalTile whose origin, strides and bounds are typed scalar
expressions over dims, tile sizes and grid / loop indices. A tile has at most two axes
(the subscript's tile slices and whole dims, in the tensor's order); point indices fold
into the origin and a validity condition.
"""
from __future__ import annotations

import functools
import math

from ..sema import typed as T
from .storage import BatchRows, GatherRows, GlobalTile
from .swizzle import SmemLayout, smem_layout

I32 = T.TileType("i32")
BOOL = T.TileType("bool")


def const(n: int) -> T.Const:
    return T.Const(int(n), I32)


def dim(name: str) -> T.Scalar:
    return T.Scalar(name, "dim", I32)


def index(name: str) -> T.Scalar:
    return T.Scalar(name, "index", I32)


def add(a: T.TExpr, b: T.TExpr) -> T.TExpr:
    if _is(a, 0):
        return b
    if _is(b, 0):
        return a
    if isinstance(a, T.Const) and isinstance(b, T.Const):
        return const(a.value + b.value)
    return T.Elementwise("add", (a, b), I32)


def mul(a: T.TExpr, b: T.TExpr) -> T.TExpr:
    if _is(a, 1):
        return b
    if _is(b, 1):
        return a
    if _is(a, 0) or _is(b, 0):
        return const(0)
    if isinstance(a, T.Const) and isinstance(b, T.Const):
        return const(a.value * b.value)
    return T.Elementwise("mul", (a, b), I32)


def both(a: T.TExpr | None, b: T.TExpr) -> T.TExpr:
    return b if a is None else T.Elementwise("and", (a, b), BOOL)


def _is(e: T.TExpr, n: int) -> bool:
    return isinstance(e, T.Const) and e.value == n


class TileError(Exception):
    """The subscript is not a tile the lowering can address (the message says why)."""


def extent_value(kernel: T.TypedKernel, tiles, e: T.Extent) -> int:
    if len(T.extent_factors(e)) > 1:
        return math.prod(extent_value(kernel, tiles, f) for f in T.extent_factors(e))
    if isinstance(e, int):
        return e
    if e in tiles:
        return tiles[e]
    static = kernel.dim(e).static
    if static is None:
        raise TileError(f"{e} is used as a tile extent but is not known at compile time")
    return static


def dim_expr(kernel: T.TypedKernel, d: T.Extent) -> T.TExpr:
    """A tensor dim as an expression: a literal when it is fixed at compile time."""
    if isinstance(d, int):
        return const(d)
    static = kernel.dim(d).static
    return const(static) if static is not None else dim(d)


def global_tile(kernel: T.TypedKernel, tiles, tensor: str, items,
                split: tuple[str, T.TExpr, int] | None = None,
                column_of_rows: bool = False) -> GlobalTile:
    """`split` = (grid index, first row, rows): a warpgroup's share of the tile rows that
    index selects (the rows from `first row` on of each tile). `column_of_rows`: a 2-D
    tile stored from a tile of rank 3's row values, one column of its two axes' rows
    (`stored_rows`)."""
    p = kernel.tensor(tensor)
    dims = [dim_expr(kernel, d) for d in p.dims]
    strides = [functools.reduce(mul, dims[j + 1:], const(1)) for j in range(len(dims))]
    origin: T.TExpr = const(0)
    valid: T.TExpr | None = None
    axes: list[tuple[int, T.TExpr, T.TExpr, T.TExpr, bool, int]] = []
    gather: GatherRows | BatchRows | None = None
    # (extent, start, bound, stride, whether the start may be below 0, step)
    if T.tile_axes(items) == 3 or column_of_rows:
        return _rank3_tile(kernel, tiles, tensor, items, dims, strides, split)
    for item, d, stride in zip(items, dims, strides):
        if isinstance(item, T.Point):
            at = point_index(kernel, item)
            origin = add(origin, mul(at, stride))
            lo = T.Elementwise("ge", (at, const(0)), BOOL)
            hi = T.Elementwise("lt", (at, d), BOOL)
            valid = both(both(valid, lo), hi)
        elif isinstance(item, T.TileSlice):
            size = extent_value(kernel, tiles, item.size)
            start = tile_start(kernel, item, size)
            if split is not None and item.var == split[0]:
                start, size = add(start, split[1]), split[2]
            origin = add(origin, mul(start, stride))
            axes.append((size, start, d, mul(stride, const(item.stride)),
                         item.offset is not None, item.stride))
        elif isinstance(item, (T.RepeatRows, T.Gather)):
            # rows at computed positions (the tile's rows): the copy checks each one
            gather, size = _row_positions(kernel, tiles, tensor, item, d, split, bool(axes))
            axes.append((size, const(0), const(size), stride, False, 1))
        else:
            axes.append((extent_value(kernel, tiles, item.extent), const(0), d, stride, False,
                         1))
    if len(axes) > 2:
        raise TileError(f"a tile of {tensor} spans {len(axes)} dims; tiles have at most 2")
    if isinstance(gather, BatchRows) and len(axes) == 1:     # a vector of repeated rows
        axes.append((1, const(0), const(1), const(1), False, 1))
    if gather is not None and len(axes) < 2:
        raise TileError(f"a tile of {tensor} gathers without a dim of columns")
    while len(axes) < 2:
        axes.insert(0, (1, const(0), const(1), const(0), False, 1))
    (rows, r0, rb, rs, rlow, rstep), (cols, c0, cb, cs, clow, cstep) = axes
    return GlobalTile(tensor, p.dtype, rows, cols, origin, rs, cs, r0, rb, c0, cb, valid,
                      rlow, clow, rstep, cstep, gather)


def _row_positions(kernel: T.TypedKernel, tiles, tensor: str, item, d: T.TExpr, split,
                   after_tiled: bool) -> tuple[GatherRows | BatchRows, int]:
    """(the rows' positions, their count) of gathered rows (every row inside the tile's
    bounds; a warpgroup's share of the rows is its share of the positions), or of rows
    repeated in the row form of a tile of rank 3 (T.RepeatRows): a 2-D tile's R rows
    once per head (row r is row r % R: BatchRows of outer step 0), or each of a tile's
    rows for the rows of its head (row r is row r // times: inner step 0)."""
    if isinstance(item, T.Gather):
        if after_tiled:
            raise TileError(f"a tile of {tensor} gathers a dim after a tiled one; "
                            "gathered dims are the tile's rows")
        index = global_tile(kernel, tiles, item.index.tensor, item.index.index, split)
        return GatherRows(index, int(item.index.pad), d), index.cols
    if after_tiled:
        raise TileError(f"a tile of {tensor} repeats a dim after a tiled one")
    times = extent_value(kernel, tiles, item.times)
    if isinstance(item.rows, T.TileSlice):
        size = extent_value(kernel, tiles, item.rows.size)
        start, step = tile_start(kernel, item.rows, size), item.rows.stride
    else:
        size, start, step = extent_value(kernel, tiles, item.rows.extent), const(0), 1
    if item.each:       # position (start + (r // times) * step) * 1 + 0
        return BatchRows(times, start, d, const(0), const(1), const(1), step, 0), size * times
    return BatchRows(size, const(0), const(1), start, d, const(0), 0, step), times * size


def _rank3_tile(kernel: T.TypedKernel, tiles, tensor: str, items, dims, strides,
                split) -> GlobalTile:
    """A tile of rank 3 as its rows (ptc.sema.batched): the first two axes' elements in
    order, addressed through BatchRows, the third the columns."""
    p = kernel.tensor(tensor)
    origin: T.TExpr = const(0)
    valid: T.TExpr | None = None
    axes = []       # (dim position, extent, start, bound, may start below 0, step)
    for j, (item, d, stride) in enumerate(zip(items, dims, strides)):
        if isinstance(item, T.Point):
            at = point_index(kernel, item)
            origin = add(origin, mul(at, stride))
            valid = both(both(valid, T.Elementwise("ge", (at, const(0)), BOOL)),
                         T.Elementwise("lt", (at, d), BOOL))
        elif isinstance(item, T.TileSlice):      # offset and strided axes too (a conv's pixels)
            size = extent_value(kernel, tiles, item.size)
            axes.append((j, size, tile_start(kernel, item, size), d, item.offset is not None,
                         item.stride))
        elif isinstance(item, T.WholeDim):
            axes.append((j, extent_value(kernel, tiles, item.extent), const(0), d, False, 1))
        else:
            raise TileError(f"a tile of rank 3 of {tensor} gathers its rows (not supported yet)")
    if len(axes) == 2:       # row values: one column (its stride unused, its bound 1)
        axes.append((len(dims), 1, const(0), const(1), False, 1))
        strides = list(strides) + [const(1)]
    (a, a_size, a_start, a_bound, _, a_step), (r, r_size, r_start, r_bound, _, r_step), \
        (c, cols, c_start, c_bound, c_low, c_step) = axes
    ratio: T.TExpr = const(1)
    for d in dims[a + 1:r + 1]:
        ratio = mul(ratio, d)
    origin = add(origin, mul(c_start, strides[c]))
    if split is not None:       # a consumer warpgroup's rows: whole elements of the outer axis
        if not (isinstance(items[a], T.TileSlice) and items[a].var == split[0]) or \
                split[2] % r_size:
            raise TileError(f"a tile of rank 3 of {tensor} is split over warpgroups other "
                            "than along its outer axis")
        first = T.Elementwise("floordiv", (split[1], const(r_size)), I32)
        a_start, a_size = add(a_start, mul(first, const(a_step))), split[2] // r_size
    rows = BatchRows(r_size, a_start, a_bound, r_start, r_bound, ratio, a_step, r_step)
    return GlobalTile(tensor, p.dtype, a_size * r_size, cols, origin, strides[r],
                      mul(strides[c], const(c_step)), const(0), const(a_size * r_size),
                      c_start, c_bound, valid, col_low=c_low, col_step=c_step, gather=rows)


def stored_rows(store: T.Store) -> bool:
    """Whether a store writes a tile of rank 3's row values to a 2-D tile: its value is
    their column of rows (`[GH*BM, 1]`, ptc.sema.batched) and its subscript two axes."""
    shape = store.value.type.shape
    return len(shape) == 2 and shape[1] == 1 and len(T.extent_factors(shape[0])) == 2 \
        and T.tile_axes(store.index) == 2


def copy_layout(kernel: T.TypedKernel, tiles, load: T.TExpr, shape, dtype: str
                ) -> SmemLayout | None:
    """The shared layout of a copied tile of `shape` (before an operand's transposition):
    a 2-D tile's (swizzle.smem_layout), a vector of rows' (rows_vector_layout), or none
    (a plain vector)."""
    if len(shape) == 2:
        return smem_layout(shape[0], shape[1], dtype)
    return rows_vector_layout(kernel, tiles, load)


def rows_vector_layout(kernel: T.TypedKernel, tiles, load: T.TExpr) -> SmemLayout | None:
    """The shared layout of a vector of a tile of rank 3's rows loaded as a tile of several
    rows (ptc.sema.batched): from two axes (`load(LSE[b, h, m])` as `[G*BM]`), or a vector
    repeated (`load(w[m])[:, None]` for each head, `load(slope[h])[:, None]` for each row
    of the head: one column). The tile is stored in
    order, unswizzled, so element r of the vector is row r // C, column r % C. None for
    any other load."""
    if not isinstance(load, T.Load) or load.type.rank != 1:
        return None
    tile = global_tile(kernel, tiles, load.tensor, load.index)
    return SmemLayout(tile.rows, tile.cols, tile.dtype, "none") if tile.rows > 1 else None


def tile_start(kernel: T.TypedKernel, item: T.TileSlice, size: int) -> T.TExpr:
    """The first element a tile slice selects: its tile's (times a strided tile's
    stride), moved by an offset tile's offset (which may put it before 0)."""
    start = mul(index(item.var), const(size * item.stride))
    return start if item.offset is None else add(start, element_reads(kernel, item.offset))


def element_reads(kernel: T.TypedKernel, e: T.TExpr) -> T.TExpr:
    """An index expression (a single index, an offset, an `until` bound) with each element
    it reads from a tensor (`load(table[b, n + 0])`) addressed: its offset in the tensor
    and whether its own indices are inside (else it reads its load's pad)."""
    if isinstance(e, T.Load) and not e.type.shape:
        at = global_tile(kernel, {}, e.tensor, e.index)
        return T.ElementAt(e.tensor, at.origin, at.valid, int(e.pad), e.type)
    return T.map_children(e, lambda c: element_reads(kernel, c))


def until_bound(kernel: T.TypedKernel, loop: T.Loop) -> T.TExpr | None:
    """A loop's `until` bound as the kernel computes it (None: none)."""
    return None if loop.until is None else element_reads(kernel, loop.until)


def point_index(kernel: T.TypedKernel, item: T.Point) -> T.TExpr:
    """A single index as the kernel computes it (the elements it reads addressed)."""
    return element_reads(kernel, item.index)


def loop_vars(e: T.TExpr) -> set[str]:
    """Grid and loop indices an expression reads."""
    out: set[str] = set()
    if isinstance(e, T.Scalar) and e.kind == "index":
        out.add(e.name)
    for c in T.children(e):
        out |= loop_vars(c)
    return out


def divisible(e: T.TExpr, n: int, assumed: frozenset[str] = frozenset()
              ) -> tuple[bool, tuple[T.TExpr, ...]]:
    """(known, runtime conditions): is integer expression e a multiple of n? Products are
    multiples when a factor is; sums when every term is. What cannot be decided at compile
    time comes back as conditions on runtime dims. Dims named in `assumed` are multiples
    already (a condition asked before): a row-major tensor's outer strides are its row
    stride times more dims, so once the row stride is a multiple they all are, whatever
    the outer dims (a group count G = 1 must not fail the check)."""
    if n == 1:
        return True, ()
    if isinstance(e, T.Const):
        return e.value % n == 0, ()
    if isinstance(e, T.Scalar) and e.kind == "dim":
        return True, (() if e.name in assumed else (e,))
    if isinstance(e, T.Elementwise) and e.op == "mul":
        # each factor once (asking again for each case made nested products exponential)
        (ok_a, cond_a), (ok_b, cond_b) = (divisible(x, n, assumed) for x in e.args)
        if ok_a and not cond_a or ok_b and not cond_b:
            return True, ()
        if ok_a and ok_b:   # either factor will do: the fewer conditions, on a tie the inner
            # factor (a stride is the outer dims times the inner ones: (H * W) * C asks C only)
            return True, min(cond_b, cond_a, key=len)
        if ok_a:
            return True, cond_a
        return ok_b, cond_b
    if isinstance(e, T.Elementwise) and e.op == "add":
        # the terms of an offset, fewest dims first: c * L asks L, and then h * (NC * L)
        # asks nothing more
        return divisible_all(sorted(_terms(e), key=lambda x: len(_dims(x))), n, assumed)
    return False, ()


def _terms(e: T.TExpr) -> list[T.TExpr]:
    if isinstance(e, T.Elementwise) and e.op == "add":
        return [t for x in e.args for t in _terms(x)]
    return [e]


def _dims(e: T.TExpr) -> list[str]:
    if isinstance(e, T.Scalar) and e.kind == "dim":
        return [e.name]
    return [d for c in T.children(e) for d in _dims(c)]


def divisible_all(exprs, n: int, assumed: frozenset[str] = frozenset()
                  ) -> tuple[bool, tuple[T.TExpr, ...]]:
    """(known, runtime conditions): are all of `exprs` multiples of n? Each is asked with
    the dims the ones before it asked taken as multiples, so put the row stride first:
    the offsets and outer strides built on it then ask nothing more."""
    conds: list[T.TExpr] = []
    for e in exprs:
        ok, c = divisible(e, n, assumed | {x.name for x in conds if isinstance(x, T.Scalar)})
        if not ok:
            return False, ()
        conds += c
    return True, tuple(dict.fromkeys(conds))
