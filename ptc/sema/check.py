"""The type checker: `ast.Module` -> `typed.Program`, or every independent error at once.

Rules are those of docs/language.md. Each statement is checked on its own: an error in one
is reported and the name it would have bound is poisoned, so later uses stay quiet
instead of cascading.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from .. import ast
from ..diagnostics import Collector, Diagnostic, Span
from . import dtypes as dt
from . import typed as T
from .shapes import broadcast_shapes, same_extent


class _Bad(Exception):
    """An error already reported (or a poisoned name): abandon this statement."""


@dataclass(frozen=True)
class V:
    """A checked expression; `weak` marks an untyped literal that adopts its partner's dtype."""

    expr: T.TExpr
    weak: bool = False

    @property
    def type(self) -> T.TileType:
        return self.expr.type


def check(module: ast.Module, shapes: dict[str, int]) -> T.Program:
    collector = Collector()
    kernels: list[T.TypedKernel] = []
    seen: dict[str, ast.Kernel] = {}
    all_dims: set[str] = set()
    for k in module.kernels:
        if k.name in seen:
            collector.error(f"kernel {k.name!r} is defined twice", k.name_span,
                            hint=f"the first is at line {seen[k.name].span.line}")
            continue
        seen[k.name] = k
        checker = KernelChecker(k, shapes, collector, module.source)
        result = checker.run()
        all_dims |= set(checker.dims)
        if result is not None:
            kernels.append(result)
    if not module.kernels:
        collector.error("the file holds no kernels", Span(1, 1, 1, 1),
                        hint="a kernel starts with `kernel NAME(...) -> (...) { ... }`")
    for name in shapes:
        if module.kernels and name not in all_dims:
            collector.diagnostics.append(Diagnostic(
                f"--shape gives {name}, which is not a dim of any kernel in {module.filename}",
                hint="dims here: " + (", ".join(sorted(all_dims)) or "none")))
    collector.raise_if_any()
    return T.Program(module.filename, tuple(kernels))


def _suggest(name: str, candidates) -> str | None:
    candidates = list(candidates)
    for c in candidates:  # a difference of case only (BT for Bt) is the likeliest slip
        if c.lower() == name.lower() and c != name:
            return f"did you mean {c!r}?"
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else None


@dataclass
class _Scope:
    kind: str  # "parallel" | "for"
    span: Span
    vars: dict[str, T.TileType] = field(default_factory=dict)
    carried: list[str] = field(default_factory=list)


UNARY_MATH = ("exp", "exp2", "log", "sqrt", "rsqrt", "abs")
ROW_REDUCE = {"rowsum": "sum", "rowmax": "max", "rowmin": "min"}
ARITH = {"+": "add", "-": "sub", "*": "mul", "/": "div", "//": "floordiv", "%": "mod"}
COMPARE = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}
LOGIC = {"&": "and", "|": "or"}
KNOWN_FUNCS = (UNARY_MATH + tuple(ROW_REDUCE) +
               ("load", "store", "atomic_add", "zeros", "full", "index", "where", "max", "min",
                "sum"))


class KernelChecker:
    def __init__(self, kernel: ast.Kernel, shapes: dict[str, int], collector: Collector,
                 source: str = ""):
        self.k = kernel
        self.source = source
        self.shapes = shapes
        self.col = collector
        self.kernel_names: dict[str, tuple[str, Span]] = {}  # name -> (kind, span)
        self.dims: dict[str, Span] = {}
        self.dim_defaults: dict[str, int] = {}
        self.static_needed: dict[str, Span] = {}
        self.tensors: dict[str, T.TensorParam] = {}
        self.scalars: dict[str, T.ScalarParam] = {}
        self.tiles: dict[str, tuple[int, ...]] = {}
        self.indices: dict[str, T.GridAxis] = {}
        self.scopes: list[_Scope] = []
        self.poisoned: set[str] = set()
        self.expired: dict[str, Span] = {}   # names local to a finished block -> block span
        self.written: set[str] = set()
        self.assigned_anywhere = _assigned_names(kernel.body)
        self.store_targets = _store_targets(kernel.body)
        self.errors_before = len(collector.diagnostics)

    # ---- driver ----------------------------------------------------------------------
    def run(self) -> T.TypedKernel | None:
        inputs = tuple(self._param(p, is_output=False) for p in self.k.params)
        outputs = tuple(self._param(p, is_output=True) for p in self.k.outputs)
        for stmt in self.k.body:
            if isinstance(stmt, ast.DimsDecl):
                self._dims_decl(stmt)
            elif isinstance(stmt, ast.TileDecl):
                self._tile_decl(stmt)
        grids = []
        for stmt in self.k.body:
            if isinstance(stmt, (ast.DimsDecl, ast.TileDecl)):
                continue
            if isinstance(stmt, ast.Parallel):
                grid = self._parallel(stmt)
                if grid is not None:
                    grids.append(grid)
            elif isinstance(stmt, ast.For):
                self.error("a `for` loop must be inside a parallel block", stmt.span,
                           "`for` is a sequential loop within one task; to spread the tiles "
                           "over the GPU write `parallel "
                           f"{_source_text(self.source, stmt.axis.span)} {{ ... }}`")
            else:
                if isinstance(stmt, ast.Assign):
                    self.poisoned.add(stmt.name)
                self.error("only `dims`, `tile` and `parallel` may stand at kernel level",
                           stmt.span, "put this statement inside the parallel block")
        has_work = any(isinstance(s, (ast.Parallel, ast.For)) for s in self.k.body)
        if not has_work:
            self.error(f"kernel {self.k.name!r} has no parallel block", self.k.name_span,
                       "the work goes in `parallel i: BM of M { ... }`")
        for out in outputs if has_work else ():
            if out is not None and out.name not in self.written | self.store_targets:
                self.error(f"output {out.name!r} is never written", self._param_span(out.name),
                           f"write it with store({out.name}[...], value)")
        dims = self._dim_infos()
        if len(self.col.diagnostics) > self.errors_before:
            return None
        return T.TypedKernel(self.k.name, inputs, outputs, dims,
                             tuple(T.TileSize(n, c) for n, c in self.tiles.items()),
                             tuple(grids), self.k.span)

    def error(self, message: str, span: Span, hint: str | None = None) -> None:
        self.col.error(message, span, hint)

    def fail(self, message: str, span: Span, hint: str | None = None):
        self.error(message, span, hint)
        raise _Bad()

    # ---- signature ---------------------------------------------------------------------
    def _declare(self, name: str, kind: str, span: Span) -> bool:
        if name in self.kernel_names:
            other_kind, other = self.kernel_names[name]
            article = "an" if other_kind[0] in "aeiou" else "a"
            self.error(f"{name!r} is already declared as {article} {other_kind} "
                       f"(line {other.line})",
                       span, "kernel, parameter, dim, tile-size and index names must differ")
            return False
        self.kernel_names[name] = (kind, span)
        return True

    def _dtype(self, name: str, span: Span) -> str | None:
        if name in dt.DTYPES:
            return name
        if name in dt.FUTURE_DTYPES:
            self.error(f"dtype {name} is not supported yet", span,
                       "supported: " + ", ".join(dt.DTYPES))
        else:
            self.error(f"unknown dtype {name!r}", span,
                       _suggest(name, dt.DTYPES) or "dtypes: " + ", ".join(dt.DTYPES))
        return None

    def _param(self, p: ast.Param, is_output: bool):
        if isinstance(p.type, ast.ScalarType):
            if is_output:
                self.error(f"output {p.name!r} must be a tensor", p.type.span,
                           f"a single value is a one-element tensor: "
                           f"{p.name}: {p.type.dtype}[1]")
                self.poisoned.add(p.name)
                return None
            dtype = self._dtype(p.type.dtype, p.type.span)
            if not self._declare(p.name, "scalar parameter", p.span) or dtype is None:
                self.poisoned.add(p.name)
                return None
            sp = T.ScalarParam(p.name, dtype)
            self.scalars[p.name] = sp
            return sp
        dtype = self._dtype(p.type.dtype, p.type.dtype_span)
        dims: list[T.Extent] = []
        for d in p.type.dims:
            if isinstance(d.name, int):
                if d.name <= 0:
                    self.error(f"a tensor dim must be positive, not {d.name}", d.span)
                dims.append(d.name)
                continue
            if d.name in dt.DTYPES:
                self.error(f"dim name {d.name!r} is a dtype", d.span, "choose another name")
            if d.name not in self.dims:
                if self._declare(d.name, "dim", d.span):
                    self.dims[d.name] = d.span
            dims.append(d.name)
        ok = self._declare(p.name, "output" if is_output else "parameter", p.span)
        if dtype is None or not ok:
            self.poisoned.add(p.name)
            return None
        tp = T.TensorParam(p.name, dtype, tuple(dims), is_output)
        self.tensors[p.name] = tp
        return tp

    def _param_span(self, name: str) -> Span:
        return self.kernel_names.get(name, ("", self.k.name_span))[1]

    def _dims_decl(self, stmt: ast.DimsDecl) -> None:
        for item in stmt.items:
            if item.name not in self.dims:
                self.error(f"{item.name!r} is not a dim of kernel {self.k.name!r}", item.span,
                           "dims: " + (", ".join(self.dims) or "none") +
                           "; dims come from the parameters' types")
            elif item.name in self.dim_defaults:
                self.error(f"dim {item.name} already has a default size", item.span)
            elif item.value <= 0:
                self.error(f"dim {item.name} must be positive, not {item.value}", item.span)
            else:
                self.dim_defaults[item.name] = item.value

    def _tile_decl(self, stmt: ast.TileDecl) -> None:
        for item in stmt.items:
            bad = [c for c in item.choices if c <= 0]
            if bad:
                self.error(f"tile size {item.name} must be positive, not {bad[0]}",
                           self._number_in(item.span, bad[0], skip=len(item.name)))
                self.poisoned.add(item.name)
                continue
            if len(set(item.choices)) != len(item.choices):
                self.error(f"tile size {item.name} lists a candidate twice", item.span)
                self.poisoned.add(item.name)
                continue
            if self._declare(item.name, "tile size", item.span):
                self.tiles[item.name] = item.choices

    def _dim_infos(self) -> tuple[T.DimInfo, ...]:
        infos = []
        for name in self.dims:
            value = self.shapes.get(name, self.dim_defaults.get(name))
            static = None
            if name in self.static_needed:
                if value is None and name not in self.poisoned:
                    self.error(
                        f"dim {name} must be known at compile time (it sets a tile extent here)",
                        self.static_needed[name],
                        f"pass --shape {name}=<size>, or declare `dims {name} = <size>`")
                static = value
            infos.append(T.DimInfo(name, self.dim_defaults.get(name), static))
        return tuple(infos)

    def _need_static(self, dim: str, span: Span) -> None:
        self.static_needed.setdefault(dim, span)

    # ---- blocks ----------------------------------------------------------------------
    def _axis(self, axis: ast.Axis) -> T.GridAxis | None:
        ok = True
        if axis.dim not in self.dims:
            hint = _suggest(axis.dim, self.dims) or "dims: " + (", ".join(self.dims) or "none")
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
            elif axis.tile not in self.tiles:
                self.error(f"unknown tile size {axis.tile!r}", axis.tile_span,
                           _suggest(axis.tile, self.tiles) or
                           f"declare it: `tile {axis.tile} in [64, 128]`")
                ok = False
            else:
                size = axis.tile
        if not self._declare(axis.var, "index", axis.var_span) or not ok:
            self.poisoned.add(axis.var)
            return None
        ga = T.GridAxis(axis.var, size, axis.dim)
        self.indices[axis.var] = ga
        return ga

    def _parallel(self, stmt: ast.Parallel) -> T.Grid | None:
        axes = [self._axis(a) for a in stmt.axes]
        self.scopes.append(_Scope("parallel", stmt.span))
        body = self._block(stmt.body)
        self._close_scope()
        if any(a is None for a in axes):
            return None
        return T.Grid(tuple(axes), body, stmt.span)

    def _for(self, stmt: ast.For) -> T.Loop | None:
        until = None
        if stmt.until is not None:
            try:
                v = self.expr(stmt.until)
                self._require_int_scalar(v, stmt.until.span, "an `until` bound")
                until = self._as_dtype(v, "i32").expr
            except _Bad:
                pass
        axis = self._axis(stmt.axis)
        if axis is not None and axis.size is None:
            self.error(f"a for loop walks tiles: write `for {stmt.axis.var}: <tile size> of "
                       f"{stmt.axis.dim}`", stmt.axis.span,
                       "a single index (`b of B`) is for parallel axes only")
            axis = None
        scope = _Scope("for", stmt.span)
        self.scopes.append(scope)
        body = self._block(stmt.body)
        self._close_scope()
        if axis is None:
            return None
        return T.Loop(axis, until, body, tuple(scope.carried), stmt.span)

    def _close_scope(self) -> None:
        scope = self.scopes.pop()
        for name in scope.vars:
            self.expired[name] = scope.span

    def _block(self, stmts) -> tuple[T.TStmt, ...]:
        out = []
        for s in stmts:
            try:
                r = self._stmt(s)
            except _Bad:
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
        if found is None:
            if value.weak:  # a bare literal becomes a variable of its default dtype
                value = V(value.expr)
            self.scopes[-1].vars[s.name] = value.type
            self.poisoned.discard(s.name)
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

    def _store(self, call: ast.Call) -> T.Store:
        atomic = call.func == "atomic_add"
        self._no_kwargs(call)
        if len(call.args) != 2:
            self.fail(f"{call.func} takes 2 arguments (a tile of an output and a value), "
                      f"got {len(call.args)}", call.span, f"{call.func}(C[i, j], value)")
        target, value_ast = call.args
        tensor, index, shape = self._tensor_index(target, call.func)
        if not tensor.is_output:
            self.fail(f"cannot {'add into' if atomic else 'store to'} input {tensor.name!r}; "
                      "inputs are read-only", target.span,
                      "declare the result among the outputs after `->`")
        value = self.expr(value_ast)
        if value.weak:
            value = self._as_dtype(value, tensor.dtype)
        if atomic and tensor.dtype not in dt.ATOMIC_DTYPES:
            self.fail(f"atomic_add needs a f16, bf16, f32 or i32 output, not {tensor.dtype}",
                      target.span)
        if not dt.widens_to(value.type.dtype, tensor.dtype):
            hint = f"convert it: `{self._operand_text(value_ast, '...')} as {tensor.dtype}`"
            change = ("narrow it" if dt.widens_to(tensor.dtype, value.type.dtype)
                      else "change its format")
            self.fail(f"{call.func} of {_an(value.type.dtype)} value into {tensor.dtype} output "
                      f"{tensor.name!r} would {change} silently", value_ast.span, hint)
        target_type = T.TileType(tensor.dtype, shape)
        if broadcast_shapes(value.type.shape, shape) != shape:
            self.fail(f"{call.func} of {_an(str(value.type))} value into the {target_type} tile "
                      f"{_source_text(self.source, target.span)}: shapes differ", value_ast.span)
        self.written.add(tensor.name)
        expr = value.expr
        if value.type.dtype != tensor.dtype:
            expr = T.Convert(expr, T.TileType(tensor.dtype, value.type.shape))
        return T.Store(tensor.name, index, expr, atomic, call.span)

    # ---- expressions -----------------------------------------------------------------
    def expr(self, e: ast.Expr) -> V:
        if isinstance(e, ast.IntLit):
            return V(T.Const(e.value, T.TileType("i32")), weak=True)
        if isinstance(e, ast.FloatLit):
            return V(T.Const(e.value, T.TileType("f32")), weak=True)
        if isinstance(e, ast.Name):
            return self._name(e)
        if isinstance(e, ast.Binary):
            if e.op == "@":
                return self._matmul(self.expr(e.lhs), self.expr(e.rhs), e.span, e.op_span,
                                    (e.lhs, e.rhs))
            return self._binary(e.op, self.expr(e.lhs), self.expr(e.rhs), e.span, e.op_span,
                                (e.lhs, e.rhs))
        if isinstance(e, ast.Unary):
            return self._unary(e)
        if isinstance(e, ast.Cast):
            v = self.expr(e.operand)
            dtype = self._dtype(e.dtype, e.dtype_span)
            if dtype is None:
                raise _Bad()
            if v.weak:
                return self._as_dtype(v, dtype)
            if v.type.dtype == dtype:
                return v
            return V(T.Convert(v.expr, T.TileType(dtype, v.type.shape)))
        if isinstance(e, ast.Subscript):
            return self._value_subscript(e)
        if isinstance(e, ast.Attribute):
            v = self.expr(e.base)
            if e.name != "T":
                self.fail(f"tiles have no attribute {e.name!r}", e.span, "only `.T` (transpose)")
            if v.type.rank != 2:
                hint = None
                if v.type.rank == 1:
                    text = self._operand_text(e.base, "x")
                    hint = (f"a 1-D tile is neither a row nor a column; `{text}[None, :]` is "
                            f"[1, {v.type.shape[0]}] and `{text}[:, None]` is "
                            f"[{v.type.shape[0]}, 1]")
                self.fail(f".T transposes a 2-D tile; this one is {v.type}", e.span, hint)
            a, b = v.type.shape
            return V(T.Transpose(v.expr, T.TileType(v.type.dtype, (b, a))))
        if isinstance(e, ast.Call):
            return self._call(e)
        raise AssertionError(e)

    def _unknown_name(self, name: str, span: Span):
        if name in self.poisoned:
            raise _Bad()
        if name in self.expired:
            where = self.expired[name]
            self.fail(f"{name!r} is defined only inside the block at line {where.line}", span,
                      f"assign {name} before that block to use it after it")
        if name in self.assigned_anywhere:
            self.fail(f"{name!r} is used before it is assigned", span,
                      f"assign {name} first (a value a loop updates is created before the loop)")
        visible = [n for sc in self.scopes for n in sc.vars] + list(self.kernel_names)
        self.fail(f"unknown name {name!r}", span, _suggest(name, visible))

    def _name(self, e: ast.Name) -> V:
        found = self._lookup_var(e.id)
        if found is not None:
            return V(T.Var(e.id, found[1]))
        if e.id in self.scalars:
            return V(T.Scalar(e.id, "param", T.TileType(self.scalars[e.id].dtype)))
        if e.id in self.dims:
            return V(T.Scalar(e.id, "dim", T.TileType("i32")))
        if e.id in self.tiles:
            return V(T.Scalar(e.id, "tile", T.TileType("i32")))
        if e.id in self.indices:
            return V(T.Scalar(e.id, "index", T.TileType("i32")))
        if e.id in self.tensors:
            self.fail(f"{e.id!r} is a tensor; read a tile of it with load({e.id}[...])", e.span)
        if e.id in dt.DTYPES:
            self.fail(f"{e.id!r} is a dtype, not a value", e.span)
        self._unknown_name(e.id, e.span)

    def _as_dtype(self, v: V, dtype: str) -> V:
        """Give a weak literal (or any value) the dtype `dtype`."""
        if v.type.dtype == dtype:
            return V(v.expr)
        if isinstance(v.expr, T.Const):
            value = v.expr.value
            if dtype == "i32":
                value = int(value) if float(value).is_integer() else value
            elif dtype in dt.FLOATS:
                value = float(value)
            return V(T.Const(value, T.TileType(dtype, v.type.shape)))
        return V(T.Convert(v.expr, T.TileType(dtype, v.type.shape)))

    def _unify(self, a: V, b: V, span: Span, what: str) -> tuple[V, V, str]:
        """Bring two operands to one dtype by rules 2-4 of docs/language.md."""
        if a.weak and not b.weak:
            target = b.type.dtype if not (b.type.dtype == "i32" and a.type.dtype == "f32") else "f32"
            a = self._as_dtype(a, target)
        elif b.weak and not a.weak:
            target = a.type.dtype if not (a.type.dtype == "i32" and b.type.dtype == "f32") else "f32"
            b = self._as_dtype(b, target)
        dtype = dt.promote(a.type.dtype, b.type.dtype)
        if dtype is None:
            self.fail(f"{what} mixes {a.type.dtype} and {b.type.dtype}", span,
                      "convert one side with `as`, e.g. `x as f32`")
        weak = a.weak and b.weak
        return V(self._as_dtype(a, dtype).expr, weak), V(self._as_dtype(b, dtype).expr, weak), dtype

    def _broadcast(self, types: list[T.TileType], span: Span,
                   operands=None) -> tuple[T.Extent, ...]:
        shape = broadcast_shapes(*(t.shape for t in types))
        if shape is None:
            shown = " and ".join(str(t) for t in types)
            hint = None
            ranks = {t.rank for t in types}
            if len(ranks) > 1:
                hint = "add an axis with x[:, None] or x[None, :]"
            if operands is not None and len(types) == 2 and abs(types[0].rank - types[1].rank) == 1:
                # name the fix: which operand, and where its new axis goes
                low = 0 if types[0].rank < types[1].rank else 1
                other = types[1 - low].shape
                text = self._operand_text(operands[low], "x")
                rank = types[low].rank
                for where, new in (("[:, None]", types[low].shape + (1,)),
                                   ("[None, :]", (1,) + types[low].shape)):
                    if rank == 1 and broadcast_shapes(new, other) is not None:
                        hint = (f"add an axis: `{text}{where}` is "
                                f"[{', '.join(map(str, new))}]")
                        break
            self.fail(f"cannot broadcast {shown}", span, hint)
        return shape

    def _number_in(self, span: Span, value: int, skip: int = 0) -> Span:
        """The span of the integer literal `value` inside `span` (one line), else `span`."""
        lines = self.source.splitlines()
        if span.line != span.end_line or not 1 <= span.line <= len(lines):
            return span
        text = lines[span.line - 1][span.col - 1:span.end_col - 1]
        m = re.search(rf"(?<![\w.]){value}(?![\w.])", text[skip:])
        if m is None:
            return span
        col = span.col + skip + m.start()
        return Span(span.line, col, span.line, col + len(m.group()))

    def _find_op(self, span: Span, op: str) -> Span:
        """The one-character operator `op` inside `span` (a one-line span), else `span`."""
        lines = self.source.splitlines()
        if span.line != span.end_line or not 1 <= span.line <= len(lines):
            return span
        text = lines[span.line - 1][span.col - 1:span.end_col - 1]
        if text.count(op) != 1:
            return span
        col = span.col + text.index(op)
        return Span(span.line, col, span.line, col + 1)

    def _aug_op_span(self, s: ast.Assign) -> Span:
        """The span of the `+=` of an augmented assignment (found in the source text)."""
        line = s.name_span.line
        lines = self.source.splitlines()
        if 1 <= line <= len(lines):
            col = lines[line - 1].find(s.op + "=", s.name_span.end_col - 1)
            if col >= 0:
                return Span(line, col + 1, line, col + 3)
        return s.span

    def _binary(self, op: str, a: V, b: V, span: Span, op_span: Span, operands=None) -> V:
        if op == "@":
            return self._matmul(a, b, span, op_span)
        if op in LOGIC:
            op_span = self._find_op(op_span, op)  # the parser gives the gap between operands
            for v in (a, b):
                if v.type.dtype != "bool":
                    self.fail(f"`{op}` needs bool operands, not {v.type.dtype}", op_span,
                              "compare first, e.g. (x > 0) & (y > 0)")
            a, b, dtype = self._unify(a, b, op_span, f"`{op}`")
            shape = self._broadcast([a.type, b.type], span, operands)
            return V(T.Elementwise(LOGIC[op], (a.expr, b.expr), T.TileType(dtype, shape)),
                     a.weak and b.weak)
        for v in (a, b):
            if v.type.dtype == "bool":
                self.fail(f"`{op}` does not apply to bool values", op_span,
                          "use where(cond, a, b) to choose between values")
        if op in ("//", "%"):
            for v in (a, b):
                if v.type.dtype != "i32":
                    self.fail(f"`{op}` needs integer operands, not {v.type.dtype}", op_span,
                              "use `/` for floats" if op == "//" else None)
        a, b, dtype = self._unify(a, b, op_span, f"`{op}`")
        shape = self._broadcast([a.type, b.type], span, operands)
        if op in COMPARE:
            return V(T.Elementwise(COMPARE[op], (a.expr, b.expr), T.TileType("bool", shape)))
        if op == "/" and dtype == "i32":
            a, b, dtype = self._as_dtype(a, "f32"), self._as_dtype(b, "f32"), "f32"
        return V(T.Elementwise(ARITH[op], (a.expr, b.expr), T.TileType(dtype, shape)),
                 a.weak and b.weak)

    def _matmul(self, a: V, b: V, span: Span, op_span: Span, operands=None) -> V:
        lhs, rhs = operands or (None, None)
        lt, rt = self._operand_text(lhs, "a"), self._operand_text(rhs, "b")
        for v, side, node in ((a, "left", lhs), (b, "right", rhs)):
            if v.weak or v.type.rank != 2:
                hint = None
                if v.type.rank == 1:
                    text = self._operand_text(node, "x")
                    hint = (f"make it 2-D: `{text}[None, :]` is [1, {v.type.shape[0]}]"
                            if side == "left" else
                            f"make it 2-D: `{text}[:, None]` is [{v.type.shape[0]}, 1]")
                self.fail(f"`@` needs 2-D tiles; the {side} operand is {v.type}",
                          node.span if node is not None else span, hint)
        if a.type.dtype != b.type.dtype:
            # convert the wider side (mma inputs are usually half precision)
            if dt.widens_to(b.type.dtype, a.type.dtype):
                example = f"`({lt} as {b.type.dtype}) @ {rt}`"
            else:
                example = f"`{lt} @ ({rt} as {a.type.dtype})`"
            self.fail(f"`@` operands differ in dtype: {a.type} @ {b.type}", op_span,
                      f"convert one side, e.g. {example}")
        if a.type.dtype not in dt.MMA_DTYPES:
            self.fail(f"`@` multiplies f16, bf16 or f32 tiles, not {a.type.dtype}", op_span)
        (m, k1), (k2, n) = a.type.shape, b.type.shape
        if not same_extent(k1, k2):
            hint = None
            if same_extent(k1, n):
                hint = f"transpose the right operand: `{lt} @ {rt}.T`"
            elif same_extent(m, k2):
                hint = f"transpose the left operand: `{lt}.T @ {rt}`"
            self.fail(f"`@` inner dims differ: {a.type} @ {b.type} ({k1} vs {k2})", op_span, hint)
        return V(T.MatMul(a.expr, b.expr, T.TileType("f32", (m, n))))

    def _operand_text(self, node, fallback: str) -> str:
        """Source text of an operand for a hint, parenthesized unless it is a postfix form."""
        if node is None:
            return fallback
        text = _source_text(self.source, node.span)
        if text == "..." or len(text) > 40:
            return fallback
        if isinstance(node, (ast.Name, ast.Call, ast.Subscript, ast.Attribute, ast.IntLit,
                             ast.FloatLit)):
            return text
        return f"({text})"

    def _unary(self, e: ast.Unary) -> V:
        v = self.expr(e.operand)
        if e.op == "-":
            if v.type.dtype == "bool":
                self.fail("unary `-` does not apply to bool values", e.span, "use `!`")
            return V(T.Elementwise("neg", (v.expr,), v.type), v.weak)
        if v.type.dtype != "bool":
            self.fail(f"`!` needs a bool operand, not {v.type.dtype}", e.span,
                      "negate numbers with `-`")
        return V(T.Elementwise("not", (v.expr,), v.type))

    def _value_subscript(self, e: ast.Subscript) -> V:
        if isinstance(e.base, ast.Name) and e.base.id in self.tensors:
            self.fail(f"read a tile of tensor {e.base.id!r} with load({_source_text(self.source, e.span)})", e.span)
        v = self.expr(e.base)
        full = [i for i in e.items if isinstance(i, ast.Full)]
        for item in e.items:
            if not isinstance(item, (ast.Full, ast.NewAxis)):
                self.fail("a tile value takes only `:` and `None` subscripts (to add axes)",
                          item.span, "index tensors inside load(...)")
        if len(full) != v.type.rank:
            self.fail(f"{v.type} has {v.type.rank} axes but the subscript keeps {len(full)}",
                      e.span, "write one `:` per axis and `None` for each new axis")
        shape: list[T.Extent] = []
        axes = []
        it = iter(v.type.shape)
        for pos, item in enumerate(e.items):
            if isinstance(item, ast.NewAxis):
                axes.append(pos)
                shape.append(1)
            else:
                shape.append(next(it))
        if not axes:
            return v
        return V(T.Expand(v.expr, tuple(axes), T.TileType(v.type.dtype, tuple(shape))), v.weak)

    # ---- tensor indexing -------------------------------------------------------------
    def _tensor_index(self, sub: ast.Expr, func: str):
        if not (isinstance(sub, ast.Subscript) and isinstance(sub.base, ast.Name)):
            self.fail(f"{func} takes a tile of a tensor parameter, e.g. {func}(A[i, k])",
                      sub.span)
        name = sub.base.id
        if name not in self.tensors:
            if name in self.poisoned:
                raise _Bad()
            if self._lookup_var(name) is not None:
                self.fail(f"{name!r} is a tile value, not a tensor parameter", sub.base.span,
                          f"it is already in registers: use `{name}` directly"
                          if func == "load" else
                          f"{func} writes outputs, which are declared after `->`")
            kind = self.kernel_names.get(name, (None,))[0]
            if kind:
                self.fail(f"{name!r} is a {kind}, not a tensor parameter", sub.base.span)
            self.fail(f"unknown tensor {name!r}", sub.base.span,
                      _suggest(name, self.tensors) or
                      "tensors: " + (", ".join(self.tensors) or "none"))
        tensor = self.tensors[name]
        if len(sub.items) != len(tensor.dims):
            self.fail(f"{name} has {len(tensor.dims)} dims ({', '.join(map(str, tensor.dims))}) "
                      f"but {len(sub.items)} indices", sub.span,
                      "give one index per dim: a tile index, a single index or integer, or `:`")
        items: list[T.IndexItem] = []
        shape: list[T.Extent] = []
        for item, dim in zip(sub.items, tensor.dims):
            if isinstance(item, ast.NewAxis):
                self.fail("`None` adds an axis to a value; it cannot index a tensor", item.span)
            if isinstance(item, ast.Full):
                if isinstance(dim, str):
                    self._need_static(dim, item.span)
                items.append(T.WholeDim(dim))
                shape.append(dim)
                continue
            if isinstance(item, ast.Name) and item.id in self.indices:
                if item.id in self.poisoned:  # declared twice: which one is meant is unclear
                    raise _Bad()
                axis = self.indices[item.id]
                if axis.dim != dim:
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
                    items.append(T.TileSlice(item.id, axis.size))
                    shape.append(axis.size)
                else:
                    items.append(T.Point(T.Scalar(item.id, "index", T.TileType("i32"))))
                continue
            v = self.expr(item)
            self._require_int_scalar(v, item.span, "a tensor index")
            items.append(T.Point(self._as_dtype(v, "i32").expr))
        return tensor, tuple(items), tuple(shape)

    def _require_int_scalar(self, v: V, span: Span, what: str) -> None:
        if v.type.rank != 0 or v.type.dtype != "i32":
            if v.type.rank != 0:
                hint = ("it must be one value per task, not a tile; build it from tile "
                        "indices, dims, tile sizes and integers, e.g. (m + 1) * BM")
            else:
                hint = ("tile indices, dims, tile sizes and integers combine with + - * // %; "
                        "or convert with `as i32`")
            self.fail(f"{what} must be an i32 scalar, not {v.type}", span, hint)

    # ---- calls -----------------------------------------------------------------------
    def _no_kwargs(self, call: ast.Call, allowed=()) -> dict[str, ast.Expr]:
        out = {}
        for kw in call.kwargs:
            if kw.name not in allowed:
                self.fail(f"{call.func}() has no argument {kw.name!r}", kw.span,
                          f"it takes: {', '.join(allowed)}" if allowed else None)
            if kw.name in out:
                self.fail(f"argument {kw.name!r} given twice", kw.span)
            out[kw.name] = kw.value
        return out

    def _arity(self, call: ast.Call, n: int, usage: str) -> None:
        if len(call.args) != n:
            self.fail(f"{call.func} takes {n} argument{'s' if n != 1 else ''}, "
                      f"got {len(call.args)}", call.span, f"usage: {usage}")

    def _call(self, call: ast.Call) -> V:
        f = call.func
        if f in ("store", "atomic_add"):
            self.fail(f"{f}(...) is a statement; it has no value", call.span,
                      f"call {f}(...) on a line of its own")
        if f == "load":
            return self._load(call)
        if f in ("zeros", "full"):
            return self._fill(call)
        if f == "index":
            self._no_kwargs(call)
            self._arity(call, 1, "index(i)")
            arg = call.args[0]
            if not (isinstance(arg, ast.Name) and arg.id in self.indices):
                self.fail("index() takes a tile or grid index, e.g. index(n)", arg.span)
            axis = self.indices[arg.id]
            shape = (axis.size,) if axis.size is not None else ()
            return V(T.IndexVec(arg.id, axis.size, T.TileType("i32", shape)))
        if f in UNARY_MATH:
            self._no_kwargs(call)
            self._arity(call, 1, f"{f}(x)")
            v = self.expr(call.args[0])
            if v.type.dtype == "bool":
                self.fail(f"{f} does not apply to bool values", call.args[0].span)
            if f == "abs":
                return V(T.Elementwise(f, (v.expr,), v.type), v.weak)
            if v.type.dtype == "i32":
                v = self._as_dtype(v, "f32")
            return V(T.Elementwise(f, (v.expr,), v.type))
        if f in ROW_REDUCE:
            self._no_kwargs(call)
            self._arity(call, 1, f"{f}(x)")
            v = self.expr(call.args[0])
            if v.type.rank != 2:
                op = ROW_REDUCE[f]
                self.fail(f"{f} reduces the rows of a 2-D tile; this one is {v.type}",
                          call.args[0].span,
                          f"reduce a 1-D tile with {op}(x, axis=0)" if v.type.rank == 1 else
                          f"for other ranks use {op}(x, axis=...)")
            return self._reduce(ROW_REDUCE[f], v, 1, call)
        if f in ("max", "min", "sum"):
            kw = self._no_kwargs(call, ("axis",))
            if "axis" in kw:
                self._arity(call, 1, f"{f}(x, axis=1)")
                axis_ast = kw["axis"]
                if not isinstance(axis_ast, ast.IntLit):
                    self.fail("axis= takes an integer literal", axis_ast.span)
                v = self.expr(call.args[0])
                axis = axis_ast.value
                if not -v.type.rank <= axis < max(v.type.rank, 1) or v.type.rank == 0:
                    self.fail(f"axis {axis} is out of range for {v.type}", axis_ast.span,
                              f"its axes are 0..{v.type.rank - 1} (or -{v.type.rank}..-1)"
                              if v.type.rank else "a scalar has no axis to reduce")
                return self._reduce(f, v, axis % v.type.rank, call)
            if f == "sum":
                self.fail("sum needs an axis: sum(x, axis=1)", call.span)
            self._arity(call, 2, f"{f}(a, b), or {f}(x, axis=1) to reduce")
            a, b = self.expr(call.args[0]), self.expr(call.args[1])
            if "bool" in (a.type.dtype, b.type.dtype):
                self.fail(f"{f} does not apply to bool values", call.span)
            a, b, dtype = self._unify(a, b, call.span, f"{f}()")
            shape = self._broadcast([a.type, b.type], call.span)
            return V(T.Elementwise(f, (a.expr, b.expr), T.TileType(dtype, shape)),
                     a.weak and b.weak)
        if f == "where":
            self._no_kwargs(call)
            self._arity(call, 3, "where(cond, a, b)")
            c = self.expr(call.args[0])
            if c.type.dtype != "bool":
                self.fail(f"where's condition must be bool, not {c.type.dtype}",
                          call.args[0].span, "compare, e.g. where(x > 0, x, 0.0)")
            a, b = self.expr(call.args[1]), self.expr(call.args[2])
            if "bool" in (a.type.dtype, b.type.dtype) and a.type.dtype != b.type.dtype:
                self.fail("where mixes bool and numeric values", call.span)
            a, b, dtype = self._unify(a, b, call.span, "where()")
            shape = self._broadcast([c.type, a.type, b.type], call.span)
            return V(T.Elementwise("where", (c.expr, a.expr, b.expr), T.TileType(dtype, shape)),
                     a.weak and b.weak)
        hint = _suggest(f, KNOWN_FUNCS)
        self.fail(f"unknown function {f!r}", call.func_span, hint)

    def _reduce(self, op: str, v: V, axis: int, call: ast.Call) -> V:
        if v.type.dtype == "bool":
            self.fail(f"{call.func} does not apply to bool values", call.span)
        shape = v.type.shape[:axis] + v.type.shape[axis + 1:]
        return V(T.Reduce(op, v.expr, axis, T.TileType(dt.reduce_dtype(op, v.type.dtype), shape)))

    def _load(self, call: ast.Call) -> V:
        kw = self._no_kwargs(call, ("pad",))
        self._arity(call, 1, "load(A[i, k]) or load(A[i, k], pad=0.0)")
        tensor, index, shape = self._tensor_index(call.args[0], "load")
        if tensor.is_output:
            self.fail(f"cannot load from output {tensor.name!r}; outputs are write-only",
                      call.args[0].span, "pass the values in as an input parameter")
        pad = 0.0
        if "pad" in kw:
            p = kw["pad"]
            if not isinstance(p, (ast.IntLit, ast.FloatLit)):
                self.fail("pad= takes a number, e.g. pad=-inf", p.span)
            pad = float(p.value)
            if tensor.dtype == "i32" and not (pad.is_integer() and -2**31 <= pad < 2**31):
                self.fail(f"pad={_source_text(self.source, p.span)} is not an i32 value, and "
                          f"{tensor.name} is {tensor.dtype}", p.span,
                          "pad an i32 tensor with an integer")
            if tensor.dtype == "bool" and pad not in (0.0, 1.0):
                self.fail(f"pad={_source_text(self.source, p.span)} is not a bool value, and "
                          f"{tensor.name} is bool", p.span, "pad a bool tensor with 0 or 1")
        return V(T.Load(tensor.name, index, pad, T.TileType(tensor.dtype, shape)))

    def _fill(self, call: ast.Call) -> V:
        self._no_kwargs(call)
        if call.func == "zeros":
            self._arity(call, 1, "zeros(f32[BM, BN])")
        else:
            self._arity(call, 2, "full(f32[BM], -inf)")
        ty = self._type_arg(call.args[0])
        if call.func == "zeros":
            value = V(T.Const(0, T.TileType("i32")), weak=True)
        else:
            value = self.expr(call.args[1])
            if value.type.rank != 0:
                self.fail(f"full() takes a scalar value, not {value.type}", call.args[1].span)
        value = self._as_dtype(value, ty.dtype)
        return V(T.Fill(value.expr, ty))

    def _type_arg(self, e: ast.Expr) -> T.TileType:
        usage = "write a tile type such as f32[BM, BN]"
        if isinstance(e, ast.Name):
            dtype = self._dtype(e.id, e.span)
            if dtype is None:
                raise _Bad()
            return T.TileType(dtype)
        if not (isinstance(e, ast.Subscript) and isinstance(e.base, ast.Name)):
            self.fail("expected a tile type", e.span, usage)
        dtype = self._dtype(e.base.id, e.base.span)
        if dtype is None:
            raise _Bad()
        shape: list[T.Extent] = []
        for item in e.items:
            if isinstance(item, ast.IntLit) and item.value > 0:
                shape.append(item.value)
            elif isinstance(item, ast.Name) and item.id in self.tiles:
                shape.append(item.id)
            elif isinstance(item, ast.Name) and item.id in self.dims:
                self._need_static(item.id, item.span)
                shape.append(item.id)
            elif isinstance(item, ast.Name) and item.id in self.poisoned:
                raise _Bad()
            elif isinstance(item, ast.Name):
                self.fail(f"unknown tile extent {item.id!r}", item.span,
                          _suggest(item.id, list(self.tiles) + list(self.dims)) or
                          "extents are tile sizes, compile-time dims or positive integers")
            else:
                self.fail("a tile extent is a tile size, a dim or a positive integer",
                          item.span)
        return T.TileType(dtype, tuple(shape))


def _assigned_names(stmts) -> set[str]:
    names: set[str] = set()
    for s in stmts:
        if isinstance(s, ast.Assign):
            names.add(s.name)
        elif isinstance(s, (ast.Parallel, ast.For)):
            names |= _assigned_names(s.body)
    return names


def _store_targets(stmts) -> set[str]:
    """Tensors named as the target of a store/atomic_add anywhere (even a misplaced or
    ill-typed one), so that an error in that store does not also report them unwritten."""
    names: set[str] = set()

    def visit(e) -> None:
        if isinstance(e, ast.Call):
            if (e.func in ("store", "atomic_add") and e.args
                    and isinstance(e.args[0], ast.Subscript)
                    and isinstance(e.args[0].base, ast.Name)):
                names.add(e.args[0].base.id)
            for a in e.args:
                visit(a)
            for kw in e.kwargs:
                visit(kw.value)
        elif isinstance(e, ast.Binary):
            visit(e.lhs)
            visit(e.rhs)
        elif isinstance(e, (ast.Unary, ast.Cast)):
            visit(e.operand)
        elif isinstance(e, (ast.Subscript, ast.Attribute)):
            visit(e.base)

    for s in stmts:
        if isinstance(s, ast.ExprStmt):
            visit(s.expr)
        elif isinstance(s, ast.Assign):
            visit(s.value)
        elif isinstance(s, (ast.Parallel, ast.For)):
            names |= _store_targets(s.body)
    return names


def _an(dtype: str) -> str:
    """`a bf16` / `an f32`: the article for a dtype name."""
    return ("an " if dtype[0] in "fi" else "a ") + dtype


def _source_text(source: str, span: Span) -> str:
    lines = source.splitlines()
    if span.line != span.end_line or not 1 <= span.line <= len(lines):
        return "..."
    return lines[span.line - 1][span.col - 1:span.end_col - 1]
