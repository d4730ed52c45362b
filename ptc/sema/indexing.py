"""Checking tensor indexing: the `A[i, k]` inside load/store/atomic_add, and the i32
scalars that serve as indices and loop bounds.
"""
from __future__ import annotations

from .. import ast
from ..diagnostics import Span
from . import typed as T
from .support import Abandon, V, suggest


class IndexChecker:
    """The tensor-indexing part of KernelChecker (mixed into it; uses its state)."""

    def _tensor_index(self, sub: ast.Expr, func: str):
        """The tensor parameter `A[i, k]` names, its subscript items and the shape of the
        tile they select."""
        tensor = self._subscripted_tensor(sub, func)
        items: list[T.IndexItem] = []
        for item, dim in zip(sub.items, tensor.dims):
            items.append(self._subscript_item(item, dim, tensor, func, items))
        self._check_gather_placement(sub, tensor, items)
        shape = tuple(_tile_extent(it) for it in items if not isinstance(it, T.Point))
        return tensor, tuple(items), shape

    def _subscripted_tensor(self, sub: ast.Expr, func: str) -> T.TensorParam:
        """The tensor parameter a load/store subscript names, with one index per dim."""
        if not (isinstance(sub, ast.Subscript) and isinstance(sub.base, ast.Name)):
            self.fail(f"{func} takes a tile of a tensor parameter, e.g. {func}(A[i, k])",
                      sub.span)
        name = sub.base.id
        if name not in self.tensors:
            if name in self.poisoned:
                raise Abandon()
            if self._lookup_var(name) is not None:
                self.fail(f"{name!r} is a tile value, not a tensor parameter", sub.base.span,
                          f"it is already in registers: use `{name}` directly"
                          if func == "load" else
                          f"{func} writes outputs, which are declared after `->`")
            kind = self.kernel_names.get(name, (None,))[0]
            if kind:
                self.fail(f"{name!r} is a {kind}, not a tensor parameter", sub.base.span)
            self.fail(f"unknown tensor {name!r}", sub.base.span,
                      suggest(name, self.tensors) or
                      "tensors: " + (", ".join(self.tensors) or "none"))
        tensor = self.tensors[name]
        if len(sub.items) != len(tensor.dims):
            self.fail(f"{name} has {len(tensor.dims)} dims ({', '.join(map(str, tensor.dims))}) "
                      f"but {len(sub.items)} indices", sub.span,
                      "give one index per dim: a tile index, a single index or integer, or `:`")
        return tensor

    def _subscript_item(self, item: ast.Expr, dim: T.Extent, tensor: T.TensorParam,
                        func: str, before: list) -> T.IndexItem:
        """One item of a tensor subscript, on `dim`: `:`, a tile or single index, an offset
        tile, gathered rows or a scalar index expression."""
        if isinstance(item, ast.NewAxis):
            self.fail("`None` adds an axis to a value; it cannot index a tensor", item.span)
        if isinstance(item, ast.Full):
            if isinstance(dim, str):
                self._need_static(dim, item.span)
            return T.WholeDim(dim)
        if isinstance(item, ast.Name) and item.id in self.indices:
            return self._index_item(item, dim, tensor)
        v = self.expr(item)
        vec = _index_vec(v.expr) if v.type.rank == 1 else None
        if vec is not None and vec.var is None:
            self.fail("arange() positions select no tile of a tensor", item.span,
                      "a tile at an offset is index(t) + e, with t a tile index")
        if vec is not None:
            return self._offset_tile(v, item.span, func, tensor.name)
        if v.type.rank == 1:
            return self._gather(v, item.span, before)
        return T.Point(self._index_scalar(v, item.span, "a tensor index"))

    def _index_item(self, item: ast.Name, dim: T.Extent, tensor: T.TensorParam) -> T.IndexItem:
        """A tile index (its tile) or a single index (one element) used on `dim`, which
        must be the dim it walks."""
        if item.id in self.poisoned:  # declared twice: which one is meant is unclear
            raise Abandon()
        axis = self.indices[item.id]
        if axis.dim != dim:
            name = tensor.name
            what = "tiles" if axis.size is not None else "indexes"
            others = [v for v, a in self.indices.items() if a.dim == dim]
            shown = ", ".join(map(str, tensor.dims))
            hint = (f"{name} is {tensor.dtype}[{shown}]; index its {dim} dim with an "
                    f"index over {dim}")
            if others:
                hint += f", such as {others[0]}"
            self.fail(f"index {item.id!r} {what} {axis.dim} but is used on dim {dim} "
                      f"of {name}", item.span, hint)
        if axis.size is not None:
            return T.TileSlice(axis.var, axis.size)
        return T.Point(T.Scalar(axis.var, "index", T.TileType("i32")))

    def _check_gather_placement(self, sub: ast.Subscript, tensor: T.TensorParam,
                                items: list) -> None:
        """Gathered rows are the first axis of the tile, with a tiled dim after them."""
        name = tensor.name
        gathered = [k for k, it in enumerate(items) if isinstance(it, T.Gather)]
        if gathered and any(isinstance(it, (T.TileSlice, T.WholeDim))
                            for it in items[:gathered[0]]):
            self.fail(f"gathered rows are a tile's first axis: {name}'s gathered dim "
                      f"{tensor.dims[gathered[0]]} comes after a tiled one",
                      sub.items[gathered[0]].span,
                      "gather a dim before the tiled ones, or take the earlier dims as "
                      "single indices")
        if gathered and not any(isinstance(it, (T.TileSlice, T.WholeDim))
                                for it in items[gathered[0] + 1:]):
            dim = tensor.dims[gathered[0]]
            self.fail(f"gathered columns are not supported yet: the gathered dim {dim} of "
                      f"{name} has no tiled dim after it", sub.items[gathered[0]].span,
                      "gather whole rows: take a later dim as a tile or `:`, e.g. "
                      "X[load(idx[i], pad=-1), k]")

    def _offset_tile(self, v: V, span: Span, func: str, tensor: str) -> T.TileSlice:
        """`index(l) - 3 + r`: the tile of `l`'s positions, moved by a scalar index
        expression (docs/language.md, "Offset tiles")."""
        shown = f"index({_index_vec(v.expr).var})"
        if func != "load":
            self.fail(f"{func} writes whole tiles: an offset tile is for load only", span,
                      f"{func} the tile itself and move what you load instead, e.g. "
                      f"load(X[{shown} - 1, ...])")
        found = split_offset(v.expr)
        if isinstance(found, str):
            self.fail(f"an offset tile's subscript is {shown} [* S] + e: "
                      f"{found.replace('index(l)', shown)}", span,
                      f"write {shown} + e, {shown} - e or {shown} * S + e: S a positive "
                      "integer literal, e an i32 scalar of tile and loop indices, dims, tile "
                      "sizes and integers")
        vec, stride, offset = found
        if offset is None:
            return T.TileSlice(vec.var, vec.size, None, stride)
        e = self._index_scalar(V(offset), span, "an offset tile's offset")
        return T.TileSlice(vec.var, vec.size, e, stride)

    def _gather(self, v: V, span: Span, before: list) -> T.Gather:
        """`X[load(idx[i], pad=-1), k]`: the rows an i32 index tile names (docs/language.md,
        "Gathered rows")."""
        load = v.expr
        if isinstance(load, T.Var):
            load = self.gather_values.get(load.name, load)
        if not isinstance(load, T.Load):
            why = (f"{load.name!r} is assigned more than once"
                   if isinstance(load, T.Var) and self.assignment_counts[load.name] > 1
                   else "this one is computed")
            self.fail(f"a gathered subscript is an i32 index tile loaded from a tensor: {why}",
                      span, "load the positions as they are, e.g. X[load(idx[i], pad=-1), k]; "
                      "compute them into an index tensor beforehand")
        if load.type.dtype != "i32":
            self.fail(f"a gathered subscript's positions must be i32, not {load.type}", span,
                      "load an i32 tensor of row positions")
        if any(isinstance(x, T.Gather) for x in tuple(before) + load.index):
            self.fail("a subscript gathers along one dim only", span,
                      "gather the rows; take the other dims as tiles, points or `:`")
        if any(isinstance(x, T.TileSlice) and (x.offset is not None or x.stride != 1)
               for x in load.index):
            # the copies read a gather's positions from its index tile as it is tiled
            self.fail("a gathered subscript's positions are a tile of the index tensor, "
                      "not an offset or strided one", span,
                      "load the positions at `idx[i]`; write the moved positions into an "
                      "index tensor beforehand")
        return T.Gather(load, load.type.shape[0])

    def _index_scalar(self, v: V, span: Span, what: str) -> T.TExpr:
        """An i32 scalar that indexes a tensor or bounds a loop, as every back end computes
        it: before any tile is loaded, from tile indices, dims, tile sizes, scalar
        parameters and integers. A variable bound once to such an expression stands for
        it (and is replaced by it); anything read from memory or computed from tiles is
        an error here, not a kernel that does not build."""
        self._require_int_scalar(v, span, what)
        e = T.substituted(self._as_dtype(v, "i32").expr, self.index_values)
        bad = first_non_index(e)
        if isinstance(bad, T.Var) and isinstance(self.not_index_values.get(bad.name), T.Load):
            bad = self.not_index_values[bad.name]        # `row = load(ids[t])`: a gather too
        if isinstance(bad, T.Load):
            self.fail(f"{what} read from a tensor is an i32 element, not {bad.type.dtype} "
                      f"({bad.tensor})", span, "store the indices as i32")
        if isinstance(bad, T.Var):
            why = ("is assigned more than once" if self.assignment_counts[bad.name] > 1
                   else "is computed from tiles")
            self.fail(f"{what} cannot depend on {bad.name!r}: it {why}", span,
                      "an index is known before any tile is loaded: build it from tile "
                      "indices, dims, tile sizes, scalar parameters and integers, or from a "
                      "variable assigned once to such an expression")
        if bad is not None:
            self.fail(f"{what} must be computed from tile indices, dims, tile sizes, scalar "
                      "parameters and integers", span)
        return e

    def _note_index_value(self, name: str, value: T.TExpr) -> None:
        """Remember a variable assigned once in the kernel, to an index expression: an
        index may read it (`_index_scalar`)."""
        if self.assignment_counts.get(name) == 1 and isinstance(value, T.Load) and \
                value.type.rank == 1:
            self.gather_values[name] = value      # `rows = load(idx[i])`: gathered rows
        if self.assignment_counts.get(name) != 1 or value.type.rank != 0:
            return
        value = T.substituted(value, self.index_values)
        bad = first_non_index(value)
        if bad is None:
            self.index_values[name] = value
        else:
            self.not_index_values[name] = bad

    def _require_int_scalar(self, v: V, span: Span, what: str) -> None:
        if v.type.rank != 0 or v.type.dtype != "i32":
            if v.type.rank != 0:
                hint = ("it must be one value per task, not a tile; build it from tile "
                        "indices, dims, tile sizes and integers, e.g. (m + 1) * BM")
            else:
                hint = ("tile indices, dims, tile sizes and integers combine with + - * // %; "
                        "or convert with `as i32`")
            self.fail(f"{what} must be an i32 scalar, not {v.type}", span, hint)


def _tile_extent(item: T.IndexItem) -> T.Extent:
    """The extent of the tile axis a (non-point) subscript item selects."""
    return item.extent if isinstance(item, T.WholeDim) else item.size


def _index_vec(e: T.TExpr) -> T.IndexVec | None:
    """The first index(t) an expression reads (None: none)."""
    if isinstance(e, T.IndexVec):
        return e
    return next((v for v in map(_index_vec, T.children(e)) if v is not None), None)


def split_offset(e: T.TExpr) -> tuple[T.IndexVec, int, T.TExpr | None] | str:
    """(the index(l) in e, the number it is multiplied by, the scalar added -- None for
    none) where e is index(l) times positive integers plus or minus scalars, else why
    not."""
    if isinstance(e, T.IndexVec):
        return (e, 1, None) if e.size is not None else "it is not a tile index"
    if isinstance(e, T.Convert):
        return split_offset(e.arg)
    if not (isinstance(e, T.Elementwise) and e.op in ("add", "sub", "mul")):
        return "it computes more than a sum"
    tiles = [a for a in e.args if a.type.rank]
    if len(tiles) != 1:
        return "it adds two tile-shaped terms"
    (tile,) = tiles
    scalar = e.args[1] if tile is e.args[0] else e.args[0]
    if e.op == "sub" and tile is e.args[1]:
        return "index(l) is subtracted (the tile would run backwards)"
    found = split_offset(tile)
    if isinstance(found, str):
        return found
    vec, stride, offset = found
    if e.op == "mul":
        if not (isinstance(scalar, T.Const) and isinstance(scalar.value, int)
                and scalar.value > 0):
            return "a stride is a positive integer literal (index(l) * 2)"
        step = scalar.value
        return vec, stride * step, None if offset is None else \
            T.Elementwise("mul", (offset, scalar), scalar.type)
    if offset is None:
        return vec, stride, (scalar if e.op == "add" else
                             T.Elementwise("neg", (scalar,), scalar.type))
    return vec, stride, T.Elementwise(e.op, (offset, scalar), scalar.type)


def first_non_index(e: T.TExpr) -> T.TExpr | None:
    """The first part of a scalar expression that is not computed from kernel-level
    scalars, constants and i32 elements of tensors alone (None: all of it is). An element
    read from a tensor (a page of a block table, a block's expert, a sequence's start) is
    indexed by such an expression itself."""
    if isinstance(e, (T.Scalar, T.Const)):
        return None
    scalar_read = isinstance(e, T.Load) and e.type == T.TileType("i32")
    if scalar_read or isinstance(e, (T.Elementwise, T.Convert)) and e.type.rank == 0:
        return next((b for b in map(first_non_index, T.children(e)) if b is not None), None)
    return e
