"""Tiles of rank 3 as rows: `[A, R, C]` is computed as `A * R` rows of `C` columns.

The back ends hold 1-D and 2-D register tiles, so a tile of rank 3 (a GQA group of query
heads, `q = load(Q[b, g, i, :])` as `[G, BM, D]`) is computed as the 2-D tile of its rows,
as FlashAttention-3's PackGQA packs the heads of a group into the M dimension. Values of
shape `[A, R]` that come from it (its row maxima and sums, what they are combined with)
are then vectors of `A * R` rows (a `[A, R]` load too: its elements in order are the
vector, `load(LSE[b, g, i])`). A `[A, R]` value is "batched" when it is such a vector, and
a plain 2-D tile otherwise; `analyze` decides which by unification over a grid's
statements and reports what the row form cannot compute (docs/language.md, "Tiles of rank
3"); `flatten` rewrites a checked kernel into that form (`ptc.sema.grids`: every grid the
back end builds is flat), computing a 2-D tile of indices and loads broadcast over the
heads (a causal mask, an attention bias) again for every row, and one of a value per head
(`load(slope[h])[:, None, None]`) for every row of its head (ptc.sema.batched_index).
The reference interpreter computes the language's own rank-3 semantics, and nothing here
is its truth.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..diagnostics import Span
from . import typed as T
from .typed import rows_extent
from .batched_index import RowDefinitions, along_rows, along_rows_form, over_rows, per_head, \
    per_row, single_definitions

HINT = ("a tile of rank 3 [A, R, C] is computed as A*R rows: it combines with tiles of its "
        "shape, [C] rows ([1, C], [1, 1, C]), scalars, its own row values ([A, R] "
        "reductions along its last axis or loads, as [A, R, 1]) and [R, C] tiles computed "
        "from indices and loads only (docs/language.md, \"Tiles of rank 3\")")


@dataclass(frozen=True)
class BatchError:
    message: str
    span: Span


@dataclass(frozen=True)
class Batched:
    """Which 2-D values of a kernel are vectors of a rank-3 tile's rows: the variables by
    name, and every rank-2 expression node by identity (valid while the kernel is)."""

    names: frozenset[str]
    nodes: dict
    errors: tuple[BatchError, ...]

    def of(self, e: T.TExpr) -> bool:
        return self.nodes.get(id(e), False)


class _Classes:
    """Union-find over rank-2 values, each class forced batched (by a span) or plain (by a
    span and a reason) at most once each."""

    def __init__(self):
        self.parent: dict = {}
        self.batched: dict = {}
        self.plain: dict = {}

    def find(self, x):
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a, b) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        self.parent[rb] = ra
        for forced in (self.batched, self.plain):
            if ra not in forced and rb in forced:
                forced[ra] = forced[rb]

    def force(self, x, batched: bool, why) -> None:
        forced = self.batched if batched else self.plain
        forced.setdefault(self.find(x), why)


class _Analysis:
    def __init__(self, defs):
        self.defs = defs            # single definitions: named tiles computed per row
        self.classes = _Classes()
        self.rank2: dict[int, object] = {}     # id(expr) -> its class key
        self.errors: list[BatchError] = []
        self.span = Span(1, 1, 1, 1)

    def fail(self, message: str) -> None:
        self.errors.append(BatchError(message, self.span))

    def plain(self, key, reason: str) -> None:
        self.classes.force(key, False, (self.span, reason))

    # ---- statements ----------------------------------------------------------------------
    def block(self, stmts) -> None:
        for s in stmts:
            if isinstance(s, T.Let):
                self.span = s.span
                key = self.value(s.value)
                if s.value.type.rank == 2:
                    self.classes.union(("var", s.name), key)
            elif isinstance(s, T.Store):
                self.span = s.span
                self.store(s)
            elif isinstance(s, T.Loop):
                self.block(s.body)

    def store(self, s: T.Store) -> None:
        axes = T.tile_axes(s.index)
        if axes == 3:
            self.rows_of(s.tensor, s.index)
        key = self.value(s.value)
        if axes == 3 and s.value.type.rank == 2:
            self.broadcast_rows(s.value, key)
        elif s.value.type.rank == 2 and any(isinstance(i, T.Gather) for i in s.index):
            self.plain(key, f"the {s.value.type} value scattered to {s.tensor} is a plain "
                            "2-D tile")
        # a 2-D value stored to a 2-D tile: plain, or a tile of rank 3's row values (the
        # back end stores their vector as a column of rows: ptc.lower.tiles)

    # ---- expressions ---------------------------------------------------------------------
    def value(self, e: T.TExpr):
        """Visit e; for a rank-2 value return its class key (None for other ranks)."""
        rank = e.type.rank
        if rank == 3:
            self.rank3(e)
            return None
        if rank == 2:
            return self.rank2_value(e)
        for c in T.children(e):
            key = self.value(c)
            if key is not None:      # a rank-2 value reduced or read into a vector/scalar
                self.plain(key, f"the {c.type} value reduced to {e.type} is a plain 2-D "
                                "tile (a tile of rank 3 reduces along its last axis only)")
        return None

    def rank3(self, e: T.TExpr) -> None:
        lead = e.type.shape[:2]
        if (lead[0] == 1) != (lead[1] == 1) and per_row(e, self.defs):
            # `index(m)[None, :, None]`, `load(slope[h])[:, None, None]`: computed again
            # for every row of the heads, or every row of each head
            return
        if (lead[0] == 1) != (lead[1] == 1):
            self.fail(f"a {e.type} tile broadcasts along one of its first two axes only; "
                      "a tile of rank 3 is computed as rows, so both are whole or both 1 "
                      "(or either 1, for a tile computed from indices and loads)")
            return
        if isinstance(e, T.Load):
            self.rows_of(e.tensor, e.index)
            for c in T.children(e):
                self.value(c)
        elif isinstance(e, T.Expand):
            arg = e.arg
            if arg.type.rank == 2 and e.axes == (2,):
                self.classes.force(self.value(arg), True, self.span)
            elif arg.type.rank <= 1 and (arg.type.rank == 0 or e.axes == (0, 1)):
                self.value(arg)
            else:
                self.fail(f"{arg.type} expanded to {e.type}: only the row values of a tile "
                          "of rank 3 ([A, R] as [:, :, None]) or a row ([C] as "
                          "[None, None, :]) expand to rank 3")
        elif isinstance(e, (T.MatMul, T.MmaAccumulate)):
            a, b = (e.lhs, e.rhs) if isinstance(e, T.MatMul) else (e.a, e.b)
            if isinstance(e, T.MmaAccumulate) and e.acc is not None:
                self.value(e.acc)
            self.value(a)
            key = self.value(b)
            if key is not None:
                self.plain(key, f"the right operand of a product of rank 3 ({b.type}) is a "
                                "plain 2-D tile")
        elif isinstance(e, T.Elementwise):
            for arg in e.args:
                if arg.type.rank == 2:
                    self.broadcast_rows(arg, self.value(arg))
                else:
                    self.value(arg)
        else:
            for c in T.children(e):
                self.value(c)

    def rows_of(self, tensor: str, index) -> None:
        """A tile of rank 3 of a tensor: its rows are two axes of computed positions."""
        for item in index:
            if isinstance(item, T.Gather):
                self.fail(f"a tile of rank 3 of {tensor} gathers its rows (not supported "
                          "yet: its axes are tiles, offset or strided tiles, or whole dims)")
                return

    def broadcast_rows(self, arg: T.TExpr, key) -> None:
        """A 2-D operand of a rank-3 result: a row `[1, C]` broadcast over all the rows, or
        a tile computed from indices and loads only, which the row form computes again per
        row (an attention bias, a causal mask)."""
        if arg.type.shape[0] != 1 and not per_row(arg, self.defs):
            self.fail(f"a {arg.type} tile is broadcast over the first axis of a tile of "
                      "rank 3; a tile of rank 3 is computed as rows, which a 2-D tile "
                      "cannot follow (one computed from indices and loads only, such as a "
                      "causal mask or a loaded bias, can)")
        elif key is not None:
            self.plain(key, f"the {arg.type} tile broadcast over a tile of rank 3 is a plain "
                            "2-D tile")

    def rank2_value(self, e: T.TExpr):
        key = ("node", id(e))
        self.rank2[id(e)] = key
        self.classes.find(key)
        if isinstance(e, T.Var):
            self.classes.union(key, ("var", e.name))
        elif isinstance(e, T.Reduce):
            if e.arg.type.rank == 3:
                self.rank3(e.arg)
                if (e.arg.type.shape[0] == 1) != (e.arg.type.shape[1] == 1):
                    self.fail(f"a {e.arg.type} tile of indices and loads is reduced; reduce "
                              "its 2-D form (without the None)")
                elif e.axis != 2:
                    self.fail(f"a tile of rank 3 ({e.arg.type}) reduces along its last axis "
                              f"only, not axis {e.axis}")
                else:
                    self.classes.force(key, True, self.span)
            else:
                raise AssertionError(e)      # a rank-2 reduce comes from rank 3
        elif isinstance(e, (T.Elementwise, T.Convert)):
            args = e.args if isinstance(e, T.Elementwise) else (e.arg,)
            for arg in args:
                sub = self.value(arg)
                if sub is not None and arg.type.shape == e.type.shape:
                    self.classes.union(key, sub)
                elif sub is not None or arg.type.rank == 1 and arg.type.shape != (1,):
                    # broadcast along one axis: a plain 2-D tile's rows or columns, or
                    # (spelled from vectors of indices and loads) a value per head or
                    # per row, which row values take too
                    if sub is not None:
                        self.plain(sub, f"the {arg.type} value broadcast to {e.type} is a "
                                        "plain 2-D tile")
                    if not along_rows_form(arg, e.type.shape, self.defs):
                        self.plain(key, f"the {e.type} value of a broadcast {arg.type} "
                                        "operand is a plain 2-D tile")
        elif isinstance(e, T.Rows):
            self.rows(e, key)
        elif isinstance(e, T.Fill):
            self.value(e.value)
        elif isinstance(e, T.Load) and not any(isinstance(i, T.Gather) for i in e.index):
            # either: its A*R elements in order are the rows' vector (`load(LSE[b, h, m])`)
            for c in T.children(e):
                self.value(c)
        elif isinstance(e, (T.Load, T.IndexVec, T.Const, T.Scalar, T.ElementAt)):
            for c in T.children(e):
                self.value(c)
            source = f"gathered from {e.tensor}" if isinstance(e, T.Load) else "of indices"
            self.plain(key, f"the {e.type} tile {source} is a plain 2-D tile")
        else:      # Transpose, MatMul, MmaAccumulate, Expand of a vector: plain 2-D tiles
            for c in T.children(e):
                sub = self.value(c)
                if sub is not None:
                    self.plain(sub, f"the {c.type} operand of a {_what(e)} is a plain 2-D "
                                    "tile")
            self.plain(key, f"the {e.type} {_what(e)} is a plain 2-D tile")
        return key


    def rows(self, e: T.Rows, key) -> None:
        """`rows(x)`: x's rows as a plain 2-D tile (the row form drops it)."""
        if 1 in e.arg.type.shape[:2]:
            self.fail(f"rows() of a {e.arg.type} tile: one that is 1 along either of its "
                      "first two axes is computed only as an operand broadcast over a tile "
                      "of rank 3; take its 2-D form instead")
        self.value(e.arg)
        self.plain(key, f"the rows of a {e.arg.type} tile are a plain 2-D tile")


def _what(e: T.TExpr) -> str:
    return {T.Transpose: "transposition", T.Expand: "expansion"}.get(type(e), "product")


def analyze(kernel: T.TypedKernel) -> Batched:
    """Which rank-2 values are a rank-3 tile's row vectors, and what cannot be computed."""
    a = _Analysis(single_definitions(kernel))
    for grid in kernel.body:
        a.block(grid.body)
    classes = a.classes
    errors = list(a.errors)
    roots = {classes.find(k) for k in classes.parent}
    for root in roots:
        if root in classes.batched and root in classes.plain:
            span, reason = classes.plain[root]
            errors.append(BatchError(
                f"{reason}, and it meets the row values of a tile of rank 3 (line "
                f"{classes.batched[root].line}), which are one vector of its rows", span))
    batched_roots = {r for r in roots if r in classes.batched}
    names = frozenset(k[1] for k in classes.parent
                      if k[0] == "var" and classes.find(k) in batched_roots)
    nodes = {i: classes.find(k) in batched_roots for i, k in a.rank2.items()}
    return Batched(names, nodes, tuple(dict.fromkeys(errors)))


# ---- the row form ------------------------------------------------------------------------
def flatten(kernel: T.TypedKernel) -> T.TypedKernel:
    """The kernel with every tile of rank 3 computed as its rows (`kernel` itself when it
    has none). Loads and stores keep their subscripts: the back end addresses the rows of
    a tile with three axes (ptc.lower.tiles)."""
    if not _has_rank3(kernel):
        return kernel
    info = analyze(kernel)
    if info.errors:      # check reported them; a caller that skipped it gets the first
        raise ValueError(info.errors[0].message)
    names, depths = _names(kernel)
    defs = RowDefinitions(single_definitions(kernel), names, depths)
    form = _RowForm(info, defs, {t.name for t in kernel.tiles})
    for g in kernel.body:       # once to find the row forms of named values the uses ask for
        form.stmts(g.body)
    return replace(kernel, body=tuple(replace(g, body=form.stmts(g.body))
                                      for g in kernel.body))


def _names(kernel: T.TypedKernel) -> tuple[set[str], dict[str, int]]:
    """Every name a kernel binds or declares, and the loop depth of each variable's (last)
    assignment."""
    names = {p.name for p in kernel.inputs + kernel.outputs} | {t.name for t in kernel.tiles}
    depths: dict[str, int] = {}

    def walk(stmts, depth: int) -> None:
        for s in stmts:
            if isinstance(s, T.Let):
                names.add(s.name)
                depths[s.name] = depth
            elif isinstance(s, T.Loop):
                names.add(s.axis.var)
                walk(s.body, depth + 1)
    for g in kernel.body:
        names.update(a.var for a in g.axes)
        walk(g.body, 0)
    return names, depths


def _has_rank3(kernel: T.TypedKernel) -> bool:
    def rank3(e) -> bool:
        return e.type.rank == 3 or any(rank3(c) for c in T.children(e))

    def block(stmts) -> bool:
        return any(rank3(s.value) if isinstance(s, (T.Let, T.Store)) else
                   block(s.body) for s in stmts)
    return any(block(g.body) for g in kernel.body)


def _type(t: T.TileType, batched: bool) -> T.TileType:
    if t.rank == 3:
        return T.TileType(t.dtype, (rows_extent(*t.shape[:2]), t.shape[2]))
    if t.rank == 2 and batched:
        return T.TileType(t.dtype, (rows_extent(*t.shape),))
    return t


class _RowForm:
    """The rewrite of a kernel's statements into the row form."""

    def __init__(self, info: Batched, defs, tile_names):
        self.info, self.defs, self.tile_names = info, defs, tile_names

    def stmts(self, stmts) -> tuple:
        out: list = []
        for s in stmts:
            if isinstance(s, T.Let):        # then the row forms its uses asked for
                out.append(replace(s, value=self.expr(s.value)))
                out += [T.Let(fresh, value, s.span) for fresh, value in self.defs.after(s.name)]
            elif isinstance(s, T.Store):
                out.append(self.store(s))
            else:
                self.defs.depth += 1
                out.append(replace(s, body=self.stmts(s.body)))
                self.defs.depth -= 1
        return tuple(out)

    def store(self, s: T.Store) -> T.Store:
        """A store of row values ([A, R], their vector of A*R rows) is a store of its
        column of rows, [A*R, 1]: ptc.lower.tiles addresses the tile's two axes as rows."""
        value = self.expr(s.value)
        if s.value.type.rank == 2 and value.type.rank == 1:
            value = T.Expand(value, (1,), T.TileType(value.type.dtype, value.type.shape + (1,)))
        return replace(s, value=value)

    def size(self, e: T.Extent) -> T.TExpr:
        if isinstance(e, int):
            return T.Const(e, T.TileType("i32"))
        return T.Scalar(e, "tile" if e in self.tile_names else "dim", T.TileType("i32"))

    def broadcast(self, a: T.TExpr, shape) -> T.TExpr:
        """An operand of a rank-3 element-wise result of `shape`, in the row form: a 2-D
        tile of indices and loads (or one of rank 3 that is 1 along the heads) computed
        for every row of the heads, one that is 1 along the rows for every row of its
        head; others as they are."""
        lead = a.type.shape[:2]
        if a.type.rank == 2 and a.type.shape[0] != 1 or \
                a.type.rank == 3 and lead[0] == 1 and lead[1] != 1:
            return over_rows(a, shape[0], self.defs, self.size, rows_extent)
        if a.type.rank == 3 and lead[0] != 1 and lead[1] == 1:
            return per_head(a, shape[1], self.defs, self.size, rows_extent)
        return self.expr(a)

    def expr(self, e: T.TExpr) -> T.TExpr:
        if isinstance(e, T.Rows):       # the row form is the rows already
            return self.expr(e.arg)
        info = self.info
        batched = e.type.rank == 2 and (info.of(e) or isinstance(e, T.Var) and
                                        e.name in info.names)
        if isinstance(e, T.Elementwise) and e.type.rank == 3:
            # a 2-D tile of indices and loads broadcast over the heads: again for every row
            new = replace(e, args=tuple(self.broadcast(a, e.type.shape) for a in e.args))
        elif isinstance(e, (T.Elementwise, T.Convert)) and batched:
            # row values: a value per head or per row beside them, as their vector
            new = T.map_children(e, lambda a: along_rows(
                a, e.type.shape, self.defs, self.size, rows_extent)
                if a.type.rank >= 1 and a.type.shape != e.type.shape else self.expr(a))
        else:
            new = T.map_children(e, self.expr)
        if isinstance(e, T.Reduce) and e.arg.type.rank == 3:
            new = replace(new, axis=1)
        elif isinstance(e, T.Expand) and e.type.rank == 3:
            # [A, R] -> [A, R, 1] is [A*R] -> [A*R, 1]; [C] -> [1, 1, C] is [1, C]
            new = replace(new, axes={2: (1,), 1: (0,), 0: (0, 1)}[e.arg.type.rank])
        return replace(new, type=_type(e.type, batched)) if hasattr(new, "type") else new
