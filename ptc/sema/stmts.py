"""Checking blocks and statements: parallel and for blocks with their scopes, and
assignments (including loop-carried variables).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .. import ast
from ..diagnostics import Span
from . import dtypes as dt
from . import typed as T
from .calls import KNOWN_FUNCS
from .support import Abandon, V, store_targets, suggest


@dataclass
class Scope:
    kind: str  # "parallel" | "for"
    span: Span
    vars: dict[str, T.TileType] = field(default_factory=dict)
    carried: list[str] = field(default_factory=list)
    indices: list[str] = field(default_factory=list)   # the block's own, as written


class StmtChecker:
    """The block and statement part of KernelChecker (mixed into it; uses its state)."""

    # ---- blocks ----------------------------------------------------------------------
    def _axis(self, axis: ast.Axis) -> T.GridAxis | None:
        ok = True
        if axis.dim not in self.dims:
            hint = suggest(axis.dim, self.dims) or "dims: " + (", ".join(self.dims) or "none")
            kind = self.kernel_names.get(axis.dim, (None,))[0]
            article = "an" if kind and kind[0] in "aeiou" else "a"
            msg = (f"{axis.dim!r} is {article} {kind}, not a dim" if kind
                   else f"unknown dim {axis.dim!r}")
            self.error(msg, axis.dim_span, hint)
            ok = False
        size: T.Extent | None = None
        if axis.tile is not None:
            if isinstance(axis.tile, int):
                if axis.tile <= 0:
                    self.error(f"tile size must be positive, not {axis.tile}", axis.tile_span)
                    ok = False
                size = axis.tile
            elif axis.tile in self.poisoned:
                ok = False
            elif axis.tile not in self.tiles and not self._implicit_tile(
                    axis.tile, axis.tile_span, axis.dim):
                self.error(f"unknown tile size {axis.tile!r}", axis.tile_span,
                           suggest(axis.tile, self.tiles) or
                           f"declare it: `tile {axis.tile} in [64, 128]`")
                ok = False
            else:
                size = axis.tile
                if axis.tile in self.implicit:       # first met in a zeros() extent
                    self._implicit_tile(axis.tile, axis.tile_span, axis.dim)
        if not self._declare(axis.var, "index", axis.var_span) or not ok:
            self.poisoned.add(axis.var)
            return None
        ga = T.GridAxis(self._index_name(axis.var), size, axis.dim)
        self.indices[axis.var] = ga
        return ga

    def _index_name(self, written: str) -> str:
        """The typed program's name for an index: the name written, or -- when a block
        that ended before reused it -- `k_2`, `k_3`, ... (loops and regions downstream are
        named by their index, so each must be unique in the kernel)."""
        name, n = written, 1
        while name in self.index_names or (name != written and name in self.kernel_names):
            n += 1
            name = f"{written}_{n}"
        self.index_names.add(name)
        return name

    def _parallel(self, stmt: ast.Parallel) -> T.Grid | None:
        axes = [self._axis(a) for a in stmt.axes]
        self.scopes.append(Scope("parallel", stmt.span,
                                 indices=[a.var for a, ga in zip(stmt.axes, axes) if ga]))
        loads = len(self.output_loads)
        body = self._block(stmt.body)
        self._close_scope()
        self._outputs_read_where_written(stmt, self.output_loads[loads:])
        if any(a is None for a in axes):
            return None
        return T.Grid(tuple(axes), body, stmt.span)

    def _outputs_read_where_written(self, stmt: ast.Parallel, loads) -> None:
        """A grid may load an output it does not write: it reads what the grids before it
        wrote (zeros where none did), as they are launched in order. Its own writes it may
        not read: its tasks run in no order."""
        written = store_targets(stmt.body)
        for name, span in loads:
            if name in written:
                self.error(f"this grid loads output {name!r} and also writes it", span,
                           "a grid reads what the grids before it wrote: load it in a later "
                           "`parallel` block, or pass the values in as an input parameter")

    def _for(self, stmt: ast.For) -> T.Loop | None:
        until = None
        if stmt.until is not None:
            try:
                until = self._index_scalar(self.expr(stmt.until), stmt.until.span,
                                           "an `until` bound")
            except Abandon:
                pass
        axis = self._axis(stmt.axis)
        if axis is not None and axis.size is None:
            self.error(f"a for loop walks tiles: write `for {stmt.axis.var}: <tile size> of "
                       f"{stmt.axis.dim}`", stmt.axis.span,
                       "a single index (`b of B`) is for parallel axes only")
            axis = None
        scope = Scope("for", stmt.span, indices=[stmt.axis.var] if axis is not None else [])
        self.scopes.append(scope)
        body = self._block(stmt.body)
        self._close_scope()
        if not stmt.body:
            self.error(f"loop {stmt.axis.var} does nothing: its body is empty", stmt.axis.span,
                       "remove the loop, or put the work of each tile in its braces")
            return None
        if axis is None:
            return None
        return T.Loop(axis, until, body, tuple(scope.carried), stmt.span)

    def _close_scope(self) -> None:
        scope = self.scopes.pop()
        for name in scope.vars:
            self.expired[name] = scope.span
        for name in scope.indices:      # an index ends with its block; a later one may reuse it
            self.indices.pop(name, None)
            self.kernel_names.pop(name, None)
            self.expired[name] = scope.span
            self.expired_indices.add(name)

    def _block(self, stmts) -> tuple[T.TStmt, ...]:
        out = []
        for s in stmts:
            try:
                r = self._stmt(s)
            except Abandon:
                if isinstance(s, ast.Assign):
                    self.poisoned.add(s.name)
                continue
            if r is not None:
                out.append(r)
        return tuple(out)

    def _stmt(self, s) -> T.TStmt | None:
        if isinstance(s, ast.Assign):
            return self._assign(s)
        if isinstance(s, ast.ExprStmt):
            return self._expr_stmt(s)
        if isinstance(s, ast.For):
            return self._for(s)
        if isinstance(s, ast.Parallel):
            self.fail("parallel blocks cannot nest", s.span,
                      "list every axis in one `parallel i: BM of M, j: BN of N`")
        if isinstance(s, (ast.DimsDecl, ast.TileDecl)):
            word = "dims" if isinstance(s, ast.DimsDecl) else "tile"
            self.poisoned.update(item.name for item in s.items)
            self.fail(f"`{word}` declarations belong at kernel level", s.span,
                      "move it before the parallel block")
        raise AssertionError(s)

    # ---- statements ------------------------------------------------------------------
    def _lookup_var(self, name: str) -> tuple[int, T.TileType] | None:
        for depth in range(len(self.scopes) - 1, -1, -1):
            if name in self.scopes[depth].vars:
                return depth, self.scopes[depth].vars[name]
        return None

    def _assign(self, s: ast.Assign) -> T.Let:
        if s.name in self.kernel_names:
            kind = self.kernel_names[s.name][0]
            self.fail(f"cannot assign to {kind} {s.name!r}", s.name_span,
                      "choose another name for the variable")
        if s.name in dt.DTYPES or s.name in KNOWN_FUNCS:
            self.fail(f"{s.name!r} names a built-in; choose another name", s.name_span)
        found = self._lookup_var(s.name)
        if s.op is not None:
            if found is None:
                self._unknown_name(s.name, s.name_span)
            cur = V(T.Var(s.name, found[1]))
            value = self._binary(s.op, cur, self.expr(s.value), s.span,
                                 self._aug_op_span(s), (ast.Name(s.name, s.name_span), s.value))
        else:
            value = self.expr(s.value)
        value = V(mma_accumulate(value.expr), value.weak)
        if found is None:
            if value.weak:  # a bare literal becomes a variable of its default dtype
                value = V(value.expr)
            self.scopes[-1].vars[s.name] = value.type
            self.poisoned.discard(s.name)
            self._note_index_value(s.name, value.expr)
            return T.Let(s.name, value.expr, s.span)
        depth, old = found
        if value.weak:
            value = self._as_dtype(value, old.dtype)
        if value.type != old:
            carried = any(sc.kind == "for" for sc in self.scopes[depth + 1:])
            what = "loop-carried variable" if carried else "variable"
            keeps = "a variable keeps the dtype and shape of its first assignment"
            if value.type.shape != old.shape:
                hint = keeps
            elif isinstance(s.value, ast.Cast) and s.op is None:
                hint = f"{keeps}; give the converted value a new name"
            elif s.op is not None:
                hint = f"convert it: `{s.name} = ({s.name} {s.op} ...) as {old.dtype}`"
            else:
                text = self._operand_text(s.value, "(...)")
                hint = f"convert it: `{s.name} = {text} as {old.dtype}`"
                if not carried:
                    hint += ", or give it a new name"
            self.fail(f"{what} {s.name!r} changes type from {old} to {value.type}",
                      s.value.span, hint)
        for sc in self.scopes[depth + 1:]:
            if sc.kind == "for" and s.name not in sc.carried:
                sc.carried.append(s.name)
        return T.Let(s.name, value.expr, s.span)

    def _expr_stmt(self, s: ast.ExprStmt) -> T.Store:
        e = s.expr
        if isinstance(e, ast.Call) and e.func in ("store", "atomic_add"):
            return self._store(e)
        self.fail("this expression's value is not used", s.span,
                  "assign it (`name = ...`) or write it with store(...)")


def mma_accumulate(e: T.TExpr) -> T.TExpr:
    """An assigned `acc + a @ b` (or `a @ b + acc`) as one MmaAccumulate, so that the
    tensor core adds the accumulator; any other value as it is. The one place the pattern
    is recognised: later stages see the node."""
    if isinstance(e, T.Elementwise) and e.op == "add":
        x, y = e.args
        if isinstance(y, T.MatMul) or isinstance(x, T.MatMul):
            mm, acc = (y, x) if isinstance(y, T.MatMul) else (x, y)
            return T.MmaAccumulate(acc, mm.lhs, mm.rhs, e.type)
    return e
