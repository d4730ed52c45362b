"""2-D tiles broadcast over a tile of rank 3, in its row form (ptc.sema.batched).

A 2-D tile broadcast over the first axis of a `[GH, BM, BN]` tile has each of the
`GH * BM` rows read row `r % BM` of it, which a register tile of BM rows cannot follow. A
tile computed from indices and loads only -- tile and loop indices, `index(m)`, `arange`,
dims, scalars, literals and loads of plain tiles, as a causal mask `index(m)[:, None] >=
index(n)[None, :]` or an attention bias `load(bias[b, m, n])` is, named or not -- is
computed again in the row form instead: `index(m)` over the rows is
`m * BM + arange(GH * BM) % BM`, so each row holds the position of its own query, and a
load reads its rows once for each head (T.RepeatRows: row r of the copy is row r % BM).
The same holds the other way round (`per_head`): a tile of one value or row per head,
`[GH, 1, ..]`, is computed for every row of its head (row r is head r // BM's); and
`along_rows` makes a value per head or per row beside a tile's row values their vector.
A named definition that reads memory keeps its place outside a loop (RowDefinitions).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Mapping

from . import typed as T

I32 = "i32"


def single_definitions(kernel: T.TypedKernel) -> dict[str, T.TExpr]:
    """The value of each variable assigned exactly once in the kernel (a named mask)."""
    values: dict[str, list] = {}

    def walk(stmts) -> None:
        for s in stmts:
            if isinstance(s, T.Let):
                values.setdefault(s.name, []).append(s.value)
            elif isinstance(s, T.Loop):
                walk(s.body)
    for grid in kernel.body:
        walk(grid.body)
    return {name: vs[0] for name, vs in values.items() if len(vs) == 1}


def per_row(e: T.TExpr, defs: Mapping[str, T.TExpr]) -> bool:
    """Whether e is computed from indices, dims, scalars, literals and loads of plain tiles
    (of at most two axes, not gathered) only: what the row form computes again per row."""
    if isinstance(e, (T.Const, T.Scalar, T.IndexVec)):
        return True
    if isinstance(e, T.Var):
        return e.name in defs and per_row(defs[e.name], defs)
    if isinstance(e, T.Load):
        return e.type.rank <= 2 and T.tile_axes(e.index) == e.type.rank and \
            not any(isinstance(i, (T.Gather, T.RepeatRows)) for i in e.index) and \
            all(per_row(c, defs) for c in T.children(e))
    if isinstance(e, (T.Elementwise, T.Expand, T.Convert)):
        return all(per_row(c, defs) for c in T.children(e))
    return False


def named(var: T.Var, defs: Mapping[str, T.TExpr], key: tuple, convert) -> T.TExpr:
    """A named value in the row form: its definition converted (`convert`). One that reads
    memory, used inside a loop its definition is outside of, is bound to a name of its
    own beside the definition where `defs` keeps such names (RowDefinitions), so that its
    load is not moved into the loop; any other is computed where it is used, as its
    2-D form would be."""
    if isinstance(defs, RowDefinitions) and defs.outside(var.name) and \
            _reads_memory(defs[var.name], defs):
        return defs.bind(var.name, key, convert)
    return convert(defs[var.name])


def _reads_memory(e: T.TExpr, defs: Mapping[str, T.TExpr]) -> bool:
    if isinstance(e, T.Load):
        return True
    if isinstance(e, T.Var):
        return e.name in defs and _reads_memory(defs[e.name], defs)
    return any(_reads_memory(c, defs) for c in T.children(e))


class RowDefinitions(dict):
    """The single definitions of a kernel, and the row forms of them the rewrite asked for
    by (name, how): each bound to a fresh name (`rows`) right after its definition."""

    def __init__(self, defs: Mapping[str, T.TExpr], taken: set[str], depths: dict[str, int]):
        super().__init__(defs)
        self.taken = set(taken) | set(defs)
        self.depths = depths        # each definition's loop depth
        self.depth = 0              # the loop depth of the statement being rewritten
        self.rows: dict[tuple, tuple[str, T.TExpr]] = {}

    def outside(self, name: str) -> bool:
        """Whether `name` is defined outside a loop the statement being rewritten is in."""
        return self.depths.get(name, 0) < self.depth

    def bind(self, name: str, key: tuple, convert) -> T.Var:
        if (name, key) not in self.rows:
            value = convert(self[name])
            fresh = next(f"{name}_rows{k}" for k in range(1, 1000)
                         if f"{name}_rows{k}" not in self.taken)
            self.taken.add(fresh)
            self.rows[(name, key)] = fresh, value
        fresh, value = self.rows[(name, key)]
        return T.Var(fresh, value.type)

    def after(self, name: str) -> list[tuple[str, T.TExpr]]:
        """The row forms of `name` to bind after its definition, in the order asked."""
        return [bound for (n, _), bound in self.rows.items() if n == name]


def along_rows_form(e: T.TExpr, shape, defs: Mapping[str, T.TExpr]) -> bool:
    """Whether e, broadcast against `[A, R]` row values, is a value per head (`[A, 1]`) or
    per row of each head (`[1, R]`, `[R]`) spelled from vectors of indices and loads
    (`load(slope[h])[:, None]`, `index(m)[None, :] < S`), scalars and element-wise work on
    them: what `along_rows` turns into the rows' vector."""
    a, r = shape
    if e.type.shape not in ((a, 1), (1, r), (r,)) or a == 1 or r == 1:
        return False
    return _vector_spelled(e, defs)


def _vector_spelled(e: T.TExpr, defs) -> bool:
    if isinstance(e, T.Var):
        return e.name in defs and _vector_spelled(defs[e.name], defs)
    if e.type.rank <= 1:
        return per_row(e, defs)
    if isinstance(e, T.Expand):
        return e.arg.type.rank <= 1 and per_row(e.arg, defs)
    if isinstance(e, (T.Elementwise, T.Convert)):
        return all(_vector_spelled(c, defs) for c in T.children(e))
    return False


def along_rows(e: T.TExpr, shape, defs: Mapping[str, T.TExpr],
               size: Callable[[T.Extent], T.TExpr], rows: Callable) -> T.TExpr:
    """A value per head or per row (along_rows_form) broadcast against `[A, R]` row values,
    as the `[A * R]` vector of the rows: element r is head r // R's, or row r % R's."""
    a, r = shape
    if isinstance(e, T.Var):
        return named(e, defs, ("along", shape),
                     lambda d: along_rows(d, shape, defs, size, rows))
    if e.type.rank == 0:
        return e
    if e.type.rank == 1:                                  # [R], aligned as [1, R]
        return _vector(e, a, defs, size, rows)
    if isinstance(e, T.Expand) and e.arg.type.rank == 0:  # a scalar as [1, 1]
        return e.arg
    if isinstance(e, T.Expand):
        per_head = e.type.shape == (a, 1)
        return _vector(e.arg, r if per_head else a, defs, size, rows, each=per_head)
    new = T.map_children(e, lambda c: along_rows(c, shape, defs, size, rows))
    return replace(new, type=T.TileType(e.type.dtype, (rows(a, r),)))


def over_rows(e: T.TExpr, heads: T.Extent, defs: Mapping[str, T.TExpr],
              size: Callable[[T.Extent], T.TExpr], rows: Callable,
              each: bool = False) -> T.TExpr:
    """A `[R, C]` tile (or `[R, 1]`) of indices and loads broadcast over the `heads` of a
    tile of rank 3, as the `[heads * R, C]` tile of its rows (row r is row r % R). With
    `each`, a `[G, C]` tile of one row per head, as the `[G * heads, C]` tile of each head's
    `heads` rows (row r is row r // heads). `size(extent)` is an extent as an i32 scalar
    expression, `rows(A, R)` the extent of A * R rows."""
    if isinstance(e, T.Var):
        return named(e, defs, ("over", heads, each),
                     lambda d: over_rows(d, heads, defs, size, rows, each))
    if e.type.rank == 3:            # [1, R, C] (`index(m)[None, :, None]`): its 2-D form's
        return _leading_one(e, heads, defs, size, rows)
    if e.type.rank <= 1 or e.type.shape[0] == 1:      # a row, a scalar: as it is
        return e
    n = rows(e.type.shape[0], heads) if each else rows(heads, e.type.shape[0])
    shape = (n,) + e.type.shape[1:]
    if isinstance(e, T.Load):
        return _repeated_load(e, heads, shape, each)
    if isinstance(e, T.Expand):                         # v[:, None]: a vector of the rows
        arg = _vector(e.arg, heads, defs, size, rows, each)
        return replace(e, arg=arg, type=T.TileType(e.type.dtype, shape))
    new = T.map_children(e, lambda c: over_rows(c, heads, defs, size, rows, each))
    return replace(new, type=T.TileType(e.type.dtype, shape))


def per_head(e: T.TExpr, rows_per_head: T.Extent, defs: Mapping[str, T.TExpr],
             size: Callable[[T.Extent], T.TExpr], rows: Callable) -> T.TExpr:
    """A tile of rank 3 of indices and loads that is 1 along the rows (`[G, 1, C]`,
    `[G, 1, 1]`: a value per head, `load(slope[h])[:, None, None]`) broadcast over the
    `rows_per_head` rows of each head, as the `[G * R, C]` tile of the rows: row r holds
    head r // R's."""
    if isinstance(e, T.Var):
        return named(e, defs, ("head", rows_per_head),
                     lambda d: per_head(d, rows_per_head, defs, size, rows))
    if e.type.rank < 3:             # [C] rows, [1, C], scalars beside it: as they are
        return e
    g, _, c = e.type.shape
    if g == 1:                      # [1, 1, C] beside it: a row
        return _leading_one(e, rows_per_head, defs, size, rows)
    shape = (rows(g, rows_per_head), c)
    if isinstance(e, T.Expand) and e.arg.type.rank == 2:      # x[:, None, :]
        return over_rows(e.arg, rows_per_head, defs, size, rows, each=True)
    if isinstance(e, T.Expand) and e.arg.type.rank == 1:      # v[:, None, None]
        arg = _vector(e.arg, rows_per_head, defs, size, rows, each=True)
        return replace(e, arg=arg, axes=(1,), type=T.TileType(e.type.dtype, shape))
    new = T.map_children(e, lambda x: per_head(x, rows_per_head, defs, size, rows))
    return replace(new, type=T.TileType(e.type.dtype, shape))


def _leading_one(e: T.TExpr, heads: T.Extent, defs, size, rows) -> T.TExpr:
    """An index-only tile of rank 3 that is 1 along the heads (`[1, R, C]`, `[1, 1, C]`,
    `[1, R, 1]`) as the rows' 2-D tile: `[heads * R, C]` (a row `[1, C]` as it is)."""
    if isinstance(e, T.Var):
        return named(e, defs, ("one", heads),
                     lambda d: _leading_one(d, heads, defs, size, rows))
    if e.type.rank < 3:             # [R, C], [C], scalars beside it: as over_rows takes them
        return over_rows(e, heads, defs, size, rows)
    _, r, c = e.type.shape
    shape = ((rows(heads, r),) if r != 1 else (1,)) + (c,)
    if isinstance(e, T.Expand):
        # v[None, :, None] -> the rows' vector as a column; v[None, None, :] -> [1, C];
        # x[None, :, :] -> x's rows; a scalar -> [1, 1]
        if e.arg.type.rank == 1:
            arg = _vector(e.arg, heads, defs, size, rows) if r != 1 else e.arg
            return replace(e, arg=arg, axes=(1,) if r != 1 else (0,),
                           type=T.TileType(e.type.dtype, shape))
        if e.arg.type.rank == 2:
            return over_rows(e.arg, heads, defs, size, rows)
        return replace(e, axes=(0, 1), type=T.TileType(e.type.dtype, shape))
    new = T.map_children(e, lambda x: _leading_one(x, heads, defs, size, rows))
    return replace(new, type=T.TileType(e.type.dtype, shape))


def _vector(v: T.TExpr, heads: T.Extent, defs, size, rows, each: bool = False) -> T.TExpr:
    """A `[R]` vector of indices and loads as the `[heads * R]` vector of the rows: row r
    holds element r % R; with `each`, a `[G]` vector as the `[G * heads]` one whose row r
    holds element r // heads."""
    if isinstance(v, T.Var):
        return named(v, defs, ("vector", heads, each),
                     lambda d: _vector(d, heads, defs, size, rows, each))
    if v.type.rank == 0:
        return v
    n = rows(v.type.shape[0], heads) if each else rows(heads, v.type.shape[0])
    if isinstance(v, T.Load):
        return _repeated_load(v, heads, (n,), each)
    if isinstance(v, T.IndexVec):
        every = T.IndexVec(None, n, T.TileType(I32, (n,)))
        pos = T.Elementwise("floordiv", (every, size(heads)), T.TileType(I32, (n,))) if each \
            else T.Elementwise("mod", (every, size(v.size)), T.TileType(I32, (n,)))
        if v.var is None:                                 # arange(R)
            return pos
        start = T.Elementwise("mul", (T.Scalar(v.var, "index", T.TileType(I32)),
                                      size(v.size)), T.TileType(I32))
        return T.Elementwise("add", (pos, start), T.TileType(I32, (n,)))
    new = T.map_children(v, lambda c: _vector(c, heads, defs, size, rows, each))
    return replace(new, type=T.TileType(v.type.dtype, (n,)))


def _repeated_load(load: T.Load, times: T.Extent, shape, each: bool) -> T.Load:
    """A load of `[R, C]` (or `[R]`) as the tile that reads its rows `times` times, as a
    whole or each in turn: its first tile axis wrapped in T.RepeatRows."""
    first = next(k for k, i in enumerate(load.index) if not isinstance(i, T.Point))
    index = load.index[:first] + (T.RepeatRows(load.index[first], times, each),) + \
        load.index[first + 1:]
    return replace(load, index=index, type=T.TileType(load.type.dtype, tuple(shape)))
