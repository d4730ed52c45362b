"""Checking the built-in calls: load, store/atomic_add, zeros/full and their tile-type
argument, index, the unary math functions, reductions, max/min and where.
"""
from __future__ import annotations

from .. import ast
from .. import ops
from . import dtypes as dt
from . import typed as T
from .shapes import broadcast_shapes
from .support import Abandon, V, source_text, suggest, with_article

UNARY_MATH = ops.UNARY_FUNCTIONS   # exp, exp2, log, sqrt, rsqrt, abs
ROW_REDUCE = {"rowsum": "sum", "rowmax": "max", "rowmin": "min"}
KNOWN_FUNCS = (UNARY_MATH + tuple(ROW_REDUCE) +
               ("load", "store", "atomic_add", "zeros", "full", "index", "arange", "where", "max",
                "min", "sum", "rows"))


class CallChecker:
    """The built-in-call part of KernelChecker (mixed into it; uses its state)."""

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
            return self._index_call(call)
        if f == "arange":
            return self._arange_call(call)
        if f in UNARY_MATH:
            return self._unary_math(call)
        if f in ROW_REDUCE:
            return self._row_reduce(call)
        if f in ("max", "min", "sum"):
            kw = self._no_kwargs(call, ("axis",))
            if "axis" in kw:
                return self._axis_reduce(call, kw["axis"])
            if f == "sum":
                self.fail("sum needs an axis: sum(x, axis=1)", call.span)
            return self._extremum(call)
        if f == "where":
            return self._where(call)
        if f == "rows":
            return self._rows(call)
        hint = suggest(f, KNOWN_FUNCS)
        self.fail(f"unknown function {f!r}", call.func_span, hint)

    def _index_call(self, call: ast.Call) -> V:
        """`index(i)`: the positions of a tile or grid index, as an i32 value."""
        self._no_kwargs(call)
        self._arity(call, 1, "index(i)")
        arg = call.args[0]
        if not (isinstance(arg, ast.Name) and arg.id in self.indices):
            self.fail("index() takes a tile or grid index, e.g. index(n)", arg.span)
        axis = self.indices[arg.id]
        shape = (axis.size,) if axis.size is not None else ()
        return V(T.IndexVec(axis.var, axis.size, T.TileType("i32", shape)))

    def _arange_call(self, call: ast.Call) -> V:
        """`arange(E)`: the i32 positions 0 .. E - 1, E a tile size, a compile-time dim or a
        positive integer (a page's tokens: `p * PAGE + arange(PAGE)`)."""
        self._no_kwargs(call)
        self._arity(call, 1, "arange(BN)")
        extent = self._extent(call.args[0])
        return V(T.IndexVec(None, extent, T.TileType("i32", (extent,))))

    def _one_operand(self, call: ast.Call) -> V:
        """The checked operand of `f(x)`: one positional argument, no keywords, not tf32."""
        self._no_kwargs(call)
        self._arity(call, 1, f"{call.func}(x)")
        v = self.expr(call.args[0])
        self._no_tf32(v, call.args[0].span, f"{call.func}()")
        return v

    def _unary_math(self, call: ast.Call) -> V:
        """`exp(x)` and the other unary math functions, elementwise."""
        f = call.func
        v = self._one_operand(call)
        if v.type.dtype == "bool":
            self.fail(f"{f} does not apply to bool values", call.args[0].span)
        v = self._widen(v)
        spec = ops.ELEMENTWISE[f]
        if spec.rule == "same":
            return V(T.Elementwise(f, (v.expr,), v.type), v.weak)
        dtype = spec.result_dtype(v.type.dtype)
        if dtype != v.type.dtype:
            v = self._as_dtype(v, dtype)
        return V(T.Elementwise(f, (v.expr,), v.type))

    def _row_reduce(self, call: ast.Call) -> V:
        """`rowsum(x)`, `rowmax(x)`, `rowmin(x)`: a 2-D tile (or one of rank 3) reduced
        along its last axis."""
        f = call.func
        v = self._one_operand(call)
        if v.type.rank not in (2, 3):
            op = ROW_REDUCE[f]
            self.fail(f"{f} reduces the rows of a 2-D tile; this one is {v.type}",
                      call.args[0].span,
                      f"reduce a 1-D tile with {op}(x, axis=0)" if v.type.rank == 1 else
                      f"for other ranks use {op}(x, axis=...)")
        return self._reduce(ROW_REDUCE[f], v, v.type.rank - 1, call)

    def _rows(self, call: ast.Call) -> V:
        """`rows(x)`: a tile of rank 3 `[A, R, C]` as the 2-D tile of its rows, `[A*R, C]`
        (a product over them sums over both axes: `rows(p).T @ rows(do)`)."""
        v = self._one_operand(call)
        if v.type.rank != 3:
            self.fail(f"rows() takes a tile of rank 3; this one is {v.type}", call.args[0].span,
                      "a 2-D tile is its rows already")
        a, r, c = v.type.shape
        return V(T.Rows(v.expr, T.TileType(v.type.dtype, (T.rows_extent(a, r), c))))

    def _axis_reduce(self, call: ast.Call, axis_ast: ast.Expr) -> V:
        """`max(x, axis=1)`, `min(...)`, `sum(...)`: x reduced along one axis."""
        f = call.func
        self._arity(call, 1, f"{f}(x, axis=1)")
        if not isinstance(axis_ast, ast.IntLit):
            self.fail("axis= takes an integer literal", axis_ast.span)
        v = self.expr(call.args[0])
        self._no_tf32(v, call.args[0].span, f"{call.func}()")
        axis = axis_ast.value
        if not -v.type.rank <= axis < max(v.type.rank, 1) or v.type.rank == 0:
            self.fail(f"axis {axis} is out of range for {v.type}", axis_ast.span,
                      f"its axes are 0..{v.type.rank - 1} (or -{v.type.rank}..-1)"
                      if v.type.rank else "a scalar has no axis to reduce")
        return self._reduce(f, v, axis % v.type.rank, call)

    def _extremum(self, call: ast.Call) -> V:
        """`max(a, b)` or `min(a, b)`: elementwise, broadcast."""
        f = call.func
        self._arity(call, 2, f"{f}(a, b), or {f}(x, axis=1) to reduce")
        a, b = self.expr(call.args[0]), self.expr(call.args[1])
        for x, node in ((a, call.args[0]), (b, call.args[1])):
            self._no_tf32(x, node.span, f"{call.func}()")
        if "bool" in (a.type.dtype, b.type.dtype):
            self.fail(f"{f} does not apply to bool values", call.span)
        a, b, dtype = self._unify(self._widen(a), self._widen(b), call.span, f"{f}()")
        shape = self._broadcast([a.type, b.type], call.span)
        return V(T.Elementwise(f, (a.expr, b.expr), T.TileType(dtype, shape)),
                 a.weak and b.weak)

    def _where(self, call: ast.Call) -> V:
        """`where(cond, a, b)`: a where cond holds, else b, broadcast."""
        self._no_kwargs(call)
        self._arity(call, 3, "where(cond, a, b)")
        c = self.expr(call.args[0])
        self._no_tf32(c, call.args[0].span, f"{call.func}()")
        if c.type.dtype != "bool":
            self.fail(f"where's condition must be bool, not {c.type.dtype}",
                      call.args[0].span, "compare, e.g. where(x > 0, x, 0.0)")
        a, b = self.expr(call.args[1]), self.expr(call.args[2])
        for x, node in ((a, call.args[1]), (b, call.args[2])):
            self._no_tf32(x, node.span, f"{call.func}()")
        if "bool" in (a.type.dtype, b.type.dtype) and a.type.dtype != b.type.dtype:
            self.fail("where mixes bool and numeric values", call.span)
        a, b, dtype = self._unify(self._widen(a), self._widen(b), call.span, "where()")
        shape = self._broadcast([c.type, a.type, b.type], call.span)
        return V(T.Elementwise("where", (c.expr, a.expr, b.expr), T.TileType(dtype, shape)),
                 a.weak and b.weak)

    def _reduce(self, op: str, v: V, axis: int, call: ast.Call) -> V:
        if v.type.dtype == "bool":
            self.fail(f"{call.func} does not apply to bool values", call.span)
        v = self._widen(v)
        shape = v.type.shape[:axis] + v.type.shape[axis + 1:]
        dtype = ops.REDUCTIONS[op].result_dtype(v.type.dtype)
        return V(T.Reduce(op, v.expr, axis, T.TileType(dtype, shape)))

    def _load(self, call: ast.Call) -> V:
        kw = self._no_kwargs(call, ("pad",))
        self._arity(call, 1, "load(A[i, k]) or load(A[i, k], pad=0.0)")
        tensor, index, shape = self._tensor_index(call.args[0], "load")
        if tensor.is_output:     # what earlier grids wrote (StmtChecker checks the grid)
            self.output_loads.append((tensor.name, call.args[0].span))
        pad = 0.0
        if "pad" in kw:
            p = kw["pad"]
            if not isinstance(p, (ast.IntLit, ast.FloatLit)):
                self.fail("pad= takes a number, e.g. pad=-inf", p.span)
            pad = float(p.value)
            if tensor.dtype in dt.INT_RANGES and (
                    not pad.is_integer() or dt.literal_problem(pad, tensor.dtype)):
                lo, hi = dt.INT_RANGES[tensor.dtype]
                self.fail(f"pad={source_text(self.source, p.span)} is not "
                          f"{with_article(tensor.dtype)} value, and {tensor.name} is "
                          f"{tensor.dtype}", p.span,
                          f"pad {with_article(tensor.dtype)} tensor with an integer"
                          + (f" in {lo}..{hi}" if tensor.dtype in dt.NARROW_INTS else ""))
            problem = dt.literal_problem(pad, tensor.dtype) if tensor.dtype in dt.FP8 else None
            if problem:
                top = dt.FP8_MAX[tensor.dtype]
                self.fail(f"pad={source_text(self.source, p.span)} is not "
                          f"{with_article(tensor.dtype)} value ({tensor.name} is "
                          f"{tensor.dtype}): it {problem}", p.span,
                          f"{tensor.dtype} values lie in {-top:g}..{top:g}"
                          + (f": pad with -{top:g}, the lowest" if pad < 0 else ""))
            if tensor.dtype == "bool" and pad not in (0.0, 1.0):
                self.fail(f"pad={source_text(self.source, p.span)} is not a bool value, and "
                          f"{tensor.name} is bool", p.span, "pad a bool tensor with 0 or 1")
        return V(T.Load(tensor.name, index, pad, T.TileType(tensor.dtype, shape)))

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
        self._no_tf32(value, value_ast.span, f"{call.func}()")
        if value.weak:
            value = self._as_dtype(value, tensor.dtype)
        if atomic and tensor.dtype not in dt.ATOMIC_DTYPES:
            self.fail(f"atomic_add needs a f16, bf16, f32 or i32 output, not {tensor.dtype}",
                      target.span)
        if not dt.widens_to(value.type.dtype, tensor.dtype):
            hint = f"convert it: `{self._operand_text(value_ast, '...')} as {tensor.dtype}`"
            change = ("narrow it" if dt.widens_to(tensor.dtype, value.type.dtype)
                      else "change its format")
            self.fail(f"{call.func} of {with_article(value.type.dtype)} value into "
                      f"{tensor.dtype} output {tensor.name!r} would {change} silently",
                      value_ast.span, hint)
        target_type = T.TileType(tensor.dtype, shape)
        if broadcast_shapes(value.type.shape, shape) != shape:
            self.fail(f"{call.func} of {with_article(str(value.type))} value into the "
                      f"{target_type} tile {source_text(self.source, target.span)}: shapes "
                      "differ", value_ast.span)
        self.written.add(tensor.name)
        expr = value.expr
        if value.type.dtype != tensor.dtype or value.type.shape != shape:
            # the output's dtype, and the tile's shape: a value of extent 1 along an axis is
            # stored into every position along it (NumPy's broadcast), made explicit here
            # so that every back end stores a whole tile
            expr = T.Convert(expr, target_type)
        return T.Store(tensor.name, index, expr, atomic, call.span)

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
            self._no_tf32(value, call.args[1].span, f"{call.func}()")
            if value.type.rank != 0:
                self.fail(f"full() takes a scalar value, not {value.type}", call.args[1].span)
        value = self._as_dtype(value, ty.dtype)
        return V(T.Fill(value.expr, ty))

    def _type_arg(self, e: ast.Expr) -> T.TileType:
        usage = "write a tile type such as f32[BM, BN]"
        if isinstance(e, ast.Name):
            dtype = self._dtype(e.id, e.span)
            if dtype is None:
                raise Abandon()
            return T.TileType(dtype)
        if not (isinstance(e, ast.Subscript) and isinstance(e.base, ast.Name)):
            self.fail("expected a tile type", e.span, usage)
        dtype = self._dtype(e.base.id, e.base.span)
        if dtype is None:
            raise Abandon()
        return T.TileType(dtype, tuple(self._extent(item) for item in e.items))

    def _extent(self, item: ast.Expr) -> T.Extent:
        """A tile extent: a tile size, a compile-time dim or a positive integer."""
        if isinstance(item, ast.IntLit) and item.value > 0:
            return item.value
        if isinstance(item, ast.Name) and (item.id in self.tiles or
                                           self._implicit_tile(item.id, item.span)):
            return item.id
        if isinstance(item, ast.Name) and item.id in self.dims:
            self._need_static(item.id, item.span)
            return item.id
        if isinstance(item, ast.Name) and item.id in self.poisoned:
            raise Abandon()
        if isinstance(item, ast.Name):
            self.fail(f"unknown tile extent {item.id!r}", item.span,
                      suggest(item.id, list(self.tiles) + list(self.dims)) or
                      "extents are tile sizes, compile-time dims or positive integers")
        self.fail("a tile extent is a tile size, a dim or a positive integer", item.span)
