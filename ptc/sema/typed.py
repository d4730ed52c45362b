"""The typed tile program: what `ptc.sema.check` produces and every later stage consumes.

Every expression carries its `TileType` (dtype and symbolic shape). Shapes hold extents:
a tile-size name (`BM`), a dim name (`D`, only when known at compile time), or an int
(1 for broadcast axes). `ptc.sema.printer` is the one canonical text form.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Union

from ..diagnostics import Span

Extent = Union[str, int]


def extent_factors(e: Extent) -> tuple[Extent, ...]:
    """The factors of an extent: `G*BM` (the rows of a tile of rank 3, ptc.sema.batched)
    is (G, BM); any other is itself."""
    return tuple(e.split("*")) if isinstance(e, str) and "*" in e else (e,)


def rows_extent(a: Extent, r: Extent) -> Extent:
    """The extent of A * R rows: `G*BM` (extent_factors reads it back)."""
    if isinstance(a, int) and isinstance(r, int):
        return a * r
    if a == 1:
        return r
    if r == 1:
        return a
    return f"{a}*{r}"


@dataclass(frozen=True)
class TileType:
    dtype: str
    shape: tuple[Extent, ...] = ()

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(str(e) for e in self.shape)}]"


# ---- kernel interface ----------------------------------------------------------------
@dataclass(frozen=True)
class TensorParam:
    name: str
    dtype: str
    dims: tuple[Extent, ...]
    is_output: bool

    def __str__(self) -> str:
        return f"{self.name}: {self.dtype}[{', '.join(str(d) for d in self.dims)}]"

    def shape_in(self, dims) -> tuple[int, ...]:
        """The concrete shape for the dim sizes `dims` (a mapping of name to size)."""
        return tuple(d if isinstance(d, int) else int(dims[d]) for d in self.dims)


@dataclass(frozen=True)
class ScalarParam:
    name: str
    dtype: str

    def __str__(self) -> str:
        return f"{self.name}: {self.dtype}"


@dataclass(frozen=True)
class TileSize:
    name: str
    choices: tuple[int, ...]
    # a tile size the kernel uses without a `tile` line: its candidates come from its role
    # (ptc.sema.tiles), and the search narrows them to the device and the problem size
    implicit: bool = False
    role: str = ""          # "m", "n" or "k" of a matmul, else "" (implicit ones only)
    dim: str = ""           # the dim it tiles in a `parallel`/`for` axis ("" if none)


@dataclass(frozen=True)
class TileDivides:
    """`tile BK divides G`: the tile size `tile` divides `of` (a dim, another tile size or
    a number) in every plan, `--tile` and call; checked where both are known."""

    tile: str
    of: str | int
    span: Span

    def __str__(self) -> str:
        return f"{self.tile} divides {self.of}"

    def holds(self, values: Mapping[str, int]) -> bool | None:
        """Whether it holds for the sizes in `values` (tile sizes and dims by name); None
        when one side is not there."""
        size = values.get(self.tile)
        of = self.of if isinstance(self.of, int) else values.get(self.of)
        if size is None or of is None:
            return None
        return of % size == 0


@dataclass(frozen=True)
class DimInfo:
    """A symbolic dim: its default size (from `dims`), and its compile-time value if the
    program needs one (a `:` extent, a register-tile size)."""

    name: str
    default: int | None
    static: int | None


# ---- expressions ---------------------------------------------------------------------
@dataclass(frozen=True)
class Const:
    value: Union[int, float, bool]
    type: TileType


@dataclass(frozen=True)
class Var:
    """A local variable bound by `=`."""

    name: str
    type: TileType


@dataclass(frozen=True)
class Scalar:
    """A kernel-level scalar: a dim's size, a tile size, a grid/loop index, a scalar param."""

    name: str
    kind: str  # "dim" | "tile" | "index" | "param"
    type: TileType


@dataclass(frozen=True)
class TileSlice:
    """Subscript item: the tile `var` of a dim (`A[i, ...]` with `i: BM of M`). An offset
    tile (`X[index(l) * 2 - 3 + r, c]`, loads only) takes every `stride`-th element from
    `var`'s tile moved `offset` elements (an i32 scalar index expression): element k is at
    (var * size + k) * stride + offset; its elements outside the dim, before 0 or past the
    end, read the load's pad."""

    var: str
    size: Extent
    offset: "TExpr | None" = None
    stride: int = 1


@dataclass(frozen=True)
class Point:
    """Subscript item: one element, by an i32 scalar expression (the dim is dropped)."""

    index: "TExpr"


@dataclass(frozen=True)
class WholeDim:
    """Subscript item `:` — the whole (compile-time) extent."""

    extent: Extent


@dataclass(frozen=True)
class Gather:
    """Subscript item: gathered rows (`X[load(idx[i], pad=-1), k]`): tile element k is at
    position `index[k]` of the dim, where `index` is an i32 `[size]` tile load; a position
    outside the dim (below 0 or at its size and past) reads the pad, and a store skips it.
    The index load is not an operand of the expression: the copy reads the index tensor
    itself, row by row (docs/gathered-tiles.md, part 3)."""

    index: "Load"
    size: Extent


@dataclass(frozen=True)
class RepeatRows:
    """Subscript item of the row form only (ptc.sema.batched_index): the R rows `rows`
    selects (a tile slice or a whole dim), `times` times -- as a whole (row r is row
    r % R: a 2-D tile of data broadcast over the heads of a tile of rank 3), or `each`
    row in turn (row r is row r // times: one row per head broadcast over its rows)."""

    rows: "TileSlice | WholeDim"
    times: Extent
    each: bool = False


IndexItem = Union[TileSlice, Point, WholeDim, Gather, RepeatRows]


@dataclass(frozen=True)
class Load:
    tensor: str
    index: tuple[IndexItem, ...]
    pad: float
    type: TileType


@dataclass(frozen=True)
class Elementwise:
    """An elementwise op with NumPy broadcasting; args are already of the result's
    computation dtype except for comparisons, `where`'s condition and logical ops."""

    op: str
    args: tuple["TExpr", ...]
    type: TileType


@dataclass(frozen=True)
class Reduce:
    op: str  # sum | max | min
    arg: "TExpr"
    axis: int
    type: TileType


@dataclass(frozen=True)
class MatMul:
    lhs: "TExpr"
    rhs: "TExpr"
    type: TileType


@dataclass(frozen=True)
class MmaAccumulate:
    """`acc + a @ b` as one tensor-core operation: the f32 product of `a` and `b` added to
    the accumulator `acc`.

    The checker makes one for an assignment whose value is `acc + a @ b` or `a @ b + acc`
    (`x += a @ b` included); elsewhere a product stays a MatMul. In the sTask-graph every
    mma statement holds one: the flattener (ptc.stask.build) turns each remaining MatMul
    into an MmaAccumulate with `acc` None (a zero accumulator), so every later stage finds
    an mma task's work in this one node."""

    acc: "TExpr | None"
    a: "TExpr"
    b: "TExpr"
    type: TileType


@dataclass(frozen=True)
class Transpose:
    arg: "TExpr"
    type: TileType


@dataclass(frozen=True)
class Rows:
    """`rows(x)`: a tile of rank 3 `[A, R, C]` as the 2-D tile of its `A * R` rows, in
    order (NumPy's `x.reshape(A * R, C)`; the back end's own form of it, ptc.sema.batched)."""

    arg: "TExpr"
    type: TileType


@dataclass(frozen=True)
class Convert:
    arg: "TExpr"
    type: TileType


@dataclass(frozen=True)
class Expand:
    """Insert unit axes (`x[:, None]`): `axes` are the positions of the new axes in the result."""

    arg: "TExpr"
    axes: tuple[int, ...]
    type: TileType


@dataclass(frozen=True)
class Fill:
    value: "TExpr"  # a scalar
    type: TileType


@dataclass(frozen=True)
class IndexVec:
    """`index(i)`: the global positions covered by tile `i` (a scalar for a single index);
    `arange(E)`, var None: the positions 0 .. E - 1."""

    var: str | None
    size: Extent | None
    type: TileType


@dataclass(frozen=True)
class ElementAt:
    """A scalar read from a tensor inside an index (`load(table[b, n + 0])` in a subscript
    or an `until` bound), as the lowering addresses it: element `offset` of the tensor
    counted in elements from its start, or `pad` where `valid` is false (a position
    outside a dim). Only lowered kernels hold it; the checker's form is the Load."""

    tensor: str
    offset: "TExpr"
    valid: "TExpr | None"
    pad: int
    type: TileType


TExpr = Union[Const, Var, Scalar, Load, Elementwise, Reduce, MatMul, MmaAccumulate, Transpose,
              Rows, Convert, Expand, Fill, IndexVec, ElementAt]


def children(e: TExpr) -> tuple[TExpr, ...]:
    """The operands of an expression (a load's operands are its point indices)."""
    if isinstance(e, Elementwise):
        return e.args
    if isinstance(e, (Reduce, Transpose, Rows, Convert, Expand)):
        return (e.arg,)
    if isinstance(e, MatMul):
        return (e.lhs, e.rhs)
    if isinstance(e, MmaAccumulate):
        return (e.a, e.b) if e.acc is None else (e.acc, e.a, e.b)
    if isinstance(e, Fill):
        return (e.value,)
    if isinstance(e, Load):
        return tuple(x for x in map(index_operand, e.index) if x is not None)
    if isinstance(e, ElementAt):
        return (e.offset,) if e.valid is None else (e.offset, e.valid)
    return ()


def substituted(e: TExpr, names: Mapping[str, TExpr]) -> TExpr:
    """e with each variable named in `names` replaced by what it stands for."""
    if isinstance(e, Var) and e.name in names:
        return names[e.name]
    return map_children(e, lambda c: substituted(c, names))


def reads_memory(e: TExpr) -> bool:
    """Whether e reads a tensor (a load anywhere in it, subscripts included)."""
    return isinstance(e, (Load, ElementAt)) or any(reads_memory(c) for c in children(e))


def index_operand(item: IndexItem) -> "TExpr | None":
    """The scalar expression a subscript item reads: a point's index, an offset tile's
    offset (None for the rest)."""
    if isinstance(item, Point):
        return item.index
    if isinstance(item, TileSlice):
        return item.offset
    if isinstance(item, RepeatRows):
        return index_operand(item.rows)
    return None


def tile_axes(index: tuple[IndexItem, ...]) -> int:
    """How many axes a subscript's tile has: its items other than single indices."""
    return sum(not isinstance(i, Point) for i in index)


def map_children(e: TExpr, fn) -> TExpr:
    """e with every operand c replaced by fn(c) (the inverse view of `children`)."""
    from dataclasses import replace
    if isinstance(e, Elementwise):
        return replace(e, args=tuple(fn(a) for a in e.args))
    if isinstance(e, (Reduce, Transpose, Rows, Convert, Expand)):
        return replace(e, arg=fn(e.arg))
    if isinstance(e, MatMul):
        return replace(e, lhs=fn(e.lhs), rhs=fn(e.rhs))
    if isinstance(e, MmaAccumulate):
        return replace(e, acc=None if e.acc is None else fn(e.acc), a=fn(e.a), b=fn(e.b))
    if isinstance(e, Fill):
        return replace(e, value=fn(e.value))
    if isinstance(e, Load):
        def item(i):
            if isinstance(i, Point):
                return replace(i, index=fn(i.index))
            if isinstance(i, TileSlice) and i.offset is not None:
                return replace(i, offset=fn(i.offset))
            return replace(i, rows=item(i.rows)) if isinstance(i, RepeatRows) else i
        return replace(e, index=tuple(item(i) for i in e.index))
    if isinstance(e, ElementAt):
        return replace(e, offset=fn(e.offset), valid=None if e.valid is None else fn(e.valid))
    return e


# ---- statements ----------------------------------------------------------------------
@dataclass(frozen=True)
class Let:
    name: str
    value: TExpr
    span: Span


@dataclass(frozen=True)
class Store:
    tensor: str
    index: tuple[IndexItem, ...]
    value: TExpr
    atomic: bool
    span: Span


@dataclass(frozen=True)
class GridAxis:
    var: str
    size: Extent | None  # None: a single index (`b of B`)
    dim: str


@dataclass(frozen=True)
class Loop:
    axis: GridAxis
    until: TExpr | None
    body: tuple["TStmt", ...]
    carried: tuple[str, ...]  # variables from outside the loop that it reassigns
    span: Span


@dataclass(frozen=True)
class Grid:
    axes: tuple[GridAxis, ...]
    body: tuple["TStmt", ...]
    span: Span


TStmt = Union[Let, Store, Loop, Grid]


@dataclass(frozen=True)
class TypedKernel:
    name: str
    inputs: tuple[Union[TensorParam, ScalarParam], ...]
    outputs: tuple[TensorParam, ...]
    dims: tuple[DimInfo, ...]
    tiles: tuple[TileSize, ...]
    body: tuple[Grid, ...]
    span: Span
    divides: tuple[TileDivides, ...] = ()     # the `tile A divides B` constraints

    def tensor(self, name: str) -> TensorParam:
        for p in self.inputs + self.outputs:
            if p.name == name and isinstance(p, TensorParam):
                return p
        raise KeyError(name)

    def dim(self, name: str) -> DimInfo:
        for d in self.dims:
            if d.name == name:
                return d
        raise KeyError(name)


@dataclass(frozen=True)
class Program:
    filename: str
    kernels: tuple[TypedKernel, ...]
