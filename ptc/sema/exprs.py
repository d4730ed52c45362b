"""Checking expressions: names and literals, dtype unification and broadcasting, binary
and unary operators, `@`, casts, `.T`, and `:`/`None` subscripts of tile values.
"""
from __future__ import annotations

from .. import ast
from .. import ops
from ..diagnostics import Span
from . import dtypes as dt
from . import typed as T
from .shapes import broadcast_shapes, same_extent
from .support import Abandon, V, source_text, suggest, with_article

# the register layouts of the back ends (ptc.lower.layout) are 1-D and 2-D: a tile of rank 3
# is computed as rows of its first two axes (ptc.sema.batched)
MAX_TILE_RANK = 3


class ExprChecker:
    """The expression part of KernelChecker (mixed into it; uses its state)."""

    def expr(self, e: ast.Expr) -> V:
        v = self._expr(e)
        if v.type.rank > MAX_TILE_RANK:
            self.fail(f"a tile has at most {MAX_TILE_RANK} axes; this one is {v.type}", e.span,
                      "select one element of the other dims (a single index, `b of B`, or "
                      "an integer) or walk their tiles with a `for` loop")
        return v

    def _expr(self, e: ast.Expr) -> V:
        if isinstance(e, ast.IntLit):
            return V(T.Const(e.value, T.TileType("i32")), weak=True, span=e.span)
        if isinstance(e, ast.FloatLit):
            return V(T.Const(e.value, T.TileType("f32")), weak=True, span=e.span)
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
            if e.dtype in dt.OPERAND_DTYPES:
                return self._as_tf32(v, e)
            dtype = self._dtype(e.dtype, e.dtype_span)
            if dtype is None:
                raise Abandon()
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
                if v.type.rank == 3:
                    text = self._operand_text(e.base, "x")
                    hint = (f"rows({text}).T is the transpose of its {v.type.shape[0]} x "
                            f"{v.type.shape[1]} rows (a product with it sums over both axes)")
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

    def _as_tf32(self, v: V, e: ast.Cast) -> V:
        if v.weak or v.type.dtype != "f32":
            what = "a literal" if v.weak else f"{v.type.dtype} values"
            self.fail(f"`as tf32` rounds f32 values for a TF32 matmul, not {what}", e.span,
                      "tf32 is an mma operand format: `(a as tf32) @ (b as tf32)` with f32 a, b"
                      + ("; f16 and bf16 tiles multiply on tensor cores as they are"
                         if v.type.dtype in ("f16", "bf16") else ""))
        return V(T.Convert(v.expr, T.TileType("tf32", v.type.shape)))

    def _no_tf32(self, v: V, span: Span, what: str) -> None:
        if v.type.dtype in dt.OPERAND_DTYPES:
            self.fail(f"{what} takes no tf32 values: tf32 only feeds `@`", span,
                      "apply it to the f32 value before `as tf32`")

    def _unknown_name(self, name: str, span: Span):
        if name in self.poisoned:
            raise Abandon()
        if name in self.expired:
            where = self.expired[name]
            if name in self.expired_indices:
                self.fail(f"index {name!r} exists only inside its block at line {where.line}",
                          span, "an index is bound by its `for` or `parallel` and ends "
                                "with that block's closing brace")
            self.fail(f"{name!r} is defined only inside the block at line {where.line}", span,
                      f"assign {name} before that block to use it after it")
        if name in self.assigned_anywhere:
            self.fail(f"{name!r} is used before it is assigned", span,
                      f"assign {name} first (a value a loop updates is created before the loop)")
        visible = [n for sc in self.scopes for n in sc.vars] + list(self.kernel_names)
        self.fail(f"unknown name {name!r}", span, suggest(name, visible))

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
            return V(T.Scalar(self.indices[e.id].var, "index", T.TileType("i32")))
        if e.id in self.tensors:
            self.fail(f"{e.id!r} is a tensor; read a tile of it with load({e.id}[...])", e.span)
        if e.id in dt.DTYPES:
            self.fail(f"{e.id!r} is a dtype, not a value", e.span)
        self._unknown_name(e.id, e.span)

    def _as_dtype(self, v: V, dtype: str) -> V:
        """Give a weak literal (or any value) the dtype `dtype`."""
        if v.weak and v.span is not None:
            self._check_literal(v, dtype)
        if v.type.dtype == dtype:
            return V(v.expr)
        if isinstance(v.expr, T.Const):
            value = v.expr.value
            if dtype == "i32":
                value = int(value) if float(value).is_integer() else value
            elif dtype in dt.FLOATS or dtype in dt.FP8:
                value = float(value)
            return V(T.Const(value, T.TileType(dtype, v.type.shape)))
        return V(T.Convert(v.expr, T.TileType(dtype, v.type.shape)))

    def _check_literal(self, v: V, dtype: str) -> None:
        """A literal that becomes 0 or overflows in the dtype it meets is an error, not a
        silent 0 or inf (`s * 1e-8` with `s: f16`)."""
        value = dt.literal_value(v.expr)
        if value is None or dtype not in dt.DTYPES or dtype == "bool":
            return
        problem = dt.literal_problem(value, dtype)
        if problem:
            self.fail(f"the literal {source_text(self.source, v.span)} takes the dtype "
                      f"{dtype} of the value it meets, and {problem}", v.span,
                      dt.fp8_range(dtype) if dtype in dt.FP8 else
                      "compute in f32: convert the other operand first (`x as f32`)"
                      if dtype != "i32" else "use a float literal (`3e9`), or a smaller value")

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

    def _widen(self, v: V) -> V:
        """An i8 or u8 operand as i32, an f8e4m3 or f8e5m2 one as f32: every operation on
        the storage dtypes computes on the wider one (rules 8 and 9 of docs/language.md), so
        a sum of bytes cannot wrap at 8 bits nor a sum of FP8 values round at 3 bits."""
        if v.type.dtype in dt.WIDENED:
            return V(T.Convert(v.expr, T.TileType(dt.WIDENED[v.type.dtype], v.type.shape)))
        return v

    def _binary(self, op: str, a: V, b: V, span: Span, op_span: Span, operands=None) -> V:
        if op == "@":
            return self._matmul(a, b, span, op_span)
        for v in (a, b):
            self._no_tf32(v, op_span, f"`{op}`")
        a, b = self._widen(a), self._widen(b)
        if op in ops.LOGIC_OPERATORS or op == "^":
            op_span = self._find_op(op_span, op)  # the parser gives the gap between operands
        if op in ops.LOGIC_OPERATORS and "bool" in (a.type.dtype, b.type.dtype):
            return self._logic(ops.LOGIC_OPERATORS[op], a, b, span, op_span, operands)
        spec = ops.BINARY_OPERATORS[op]
        if spec.rule in ("bitwise", "shift"):
            return self._bits(spec, a, b, span, op_span, operands)
        for v in (a, b):
            if v.type.dtype == "bool":
                self.fail(f"`{op}` does not apply to bool values", op_span,
                          "use where(cond, a, b) to choose between values")
        if spec.rule == "integer":
            for v in (a, b):
                if v.type.dtype != "i32":
                    self.fail(f"`{op}` needs integer operands, not {v.type.dtype}", op_span,
                              "use `/` for floats" if op == "//" else None)
        a, b, dtype = self._unify(a, b, op_span, f"`{op}`")
        shape = self._broadcast([a.type, b.type], span, operands)
        result = spec.result_dtype(dtype, dtype)
        if spec.rule == "compare":
            return V(T.Elementwise(spec.name, (a.expr, b.expr), T.TileType(result, shape)))
        if result != dtype:  # `/` of i32 values divides them as f32
            a, b, dtype = self._as_dtype(a, result), self._as_dtype(b, result), result
        return V(T.Elementwise(spec.name, (a.expr, b.expr), T.TileType(dtype, shape)),
                 a.weak and b.weak)

    # comparisons bind tighter than `&`, `^` and `|`, as in C: `x & 1 == 0` is `x & (1 == 0)`
    PRECEDENCE_HINT = ("`&`, `^` and `|` bind looser than comparisons (as in C): "
                       "parenthesize, e.g. `(x & 1) == 0`")

    def _logic(self, spec: ops.Op, a: V, b: V, span: Span, op_span: Span, operands) -> V:
        """`&` or `|` of bools: logical."""
        op = spec.spelling
        for v in (a, b):
            if v.type.dtype != "bool":
                self.fail(f"`{op}` of a bool and {with_article(v.type.dtype)} value", op_span,
                          self.PRECEDENCE_HINT if v.type.dtype == "i32" else
                          "compare first, e.g. (x > 0) & (y > 0)")
        a, b, dtype = self._unify(a, b, op_span, f"`{op}`")
        shape = self._broadcast([a.type, b.type], span, operands)
        return V(T.Elementwise(spec.name, (a.expr, b.expr), T.TileType(dtype, shape)),
                 a.weak and b.weak)

    def _bits(self, spec: ops.Op, a: V, b: V, span: Span, op_span: Span, operands) -> V:
        """`& | ^ << >>` of integers, bit by bit on i32; `^` of two bools is their
        inequality (logical exclusive or)."""
        op = spec.spelling
        if op == "^" and a.type.dtype == b.type.dtype == "bool":
            shape = self._broadcast([a.type, b.type], span, operands)
            return V(T.Elementwise("ne", (a.expr, b.expr), T.TileType("bool", shape)))
        if "bool" not in (a.type.dtype, b.type.dtype):
            a, b, _ = self._unify(a, b, op_span, f"`{op}`")   # a literal takes i32
        for v in (a, b):
            if v.type.dtype != "i32":
                self.fail(f"`{op}` needs integer operands"
                          + (" (or two bools)" if op in ("&", "|", "^") else "")
                          + f", not {v.type.dtype}", op_span,
                          self.PRECEDENCE_HINT if v.type.dtype == "bool" and op in "&|^"
                          else "`^` is the bitwise exclusive or, not a power: write `x * x`"
                          if op == "^" else
                          "convert it first: `x as i32`" + (" (floats round toward zero)"
                                                            if v.type.dtype != "bool" else ""))
        shape = self._broadcast([a.type, b.type], span, operands)
        return V(T.Elementwise(spec.name, (a.expr, b.expr), T.TileType("i32", shape)),
                 a.weak and b.weak)

    def _matmul(self, a: V, b: V, span: Span, op_span: Span, operands=None) -> V:
        lhs, rhs = operands or (None, None)
        lt, rt = self._operand_text(lhs, "a"), self._operand_text(rhs, "b")
        self._matmul_ranks(a, b, lhs, rhs, span)
        self._matmul_narrow_ints(a, b, lhs, rhs, lt, rt, op_span)
        self._matmul_fp8(a, b, lhs, rhs, lt, rt, op_span)
        self._matmul_dtypes(a, b, lt, rt, op_span)
        *batch, m, k1 = a.type.shape
        k2, n = b.type.shape
        if not same_extent(k1, k2):
            hint = None
            if same_extent(k1, n):
                hint = f"transpose the right operand: `{lt} @ {rt}.T`"
            elif same_extent(m, k2):
                hint = f"transpose the left operand: `{lt}.T @ {rt}`"
            self.fail(f"`@` inner dims differ: {a.type} @ {b.type} ({k1} vs {k2})", op_span, hint)
        result = dt.MMA_RESULT.get(a.type.dtype, "f32")
        return V(T.MatMul(a.expr, b.expr, T.TileType(result, (*batch, m, n))))

    def _matmul_ranks(self, a: V, b: V, lhs, rhs, span: Span) -> None:
        """Both `@` operands are 2-D tiles, or the left one a tile of rank 3 (a batch of
        row blocks against one right operand: `[G, BM, D] @ [D, BN]`)."""
        if not a.weak and a.type.rank == 3 and not b.weak and b.type.rank == 3:
            self.fail(f"`@` of two tiles of rank 3 ({a.type} @ {b.type}) is not supported",
                      rhs.span if rhs is not None else span,
                      "a tile of rank 3 multiplies a 2-D right operand: [A, R, K] @ [K, N]")
        for v, side, node in ((a, "left", lhs), (b, "right", rhs)):
            if side == "left" and not v.weak and v.type.rank == 3:
                continue
            if v.weak or v.type.rank != 2:
                hint = None
                if v.type.rank == 1:
                    text = self._operand_text(node, "x")
                    hint = (f"make it 2-D: `{text}[None, :]` is [1, {v.type.shape[0]}]"
                            if side == "left" else
                            f"make it 2-D: `{text}[:, None]` is [{v.type.shape[0]}, 1]")
                self.fail(f"`@` needs 2-D tiles; the {side} operand is {v.type}",
                          node.span if node is not None else span, hint)

    def _matmul_narrow_ints(self, a: V, b: V, lhs, rhs, lt: str, rt: str,
                            op_span: Span) -> None:
        """An i8 or u8 `@` operand is multiplied by an i8 one only."""
        for v, other, node in ((a, b, lhs), (b, a, rhs)):
            if v.type.dtype in dt.NARROW_INTS and (v.type.dtype, other.type.dtype) != ("i8", "i8"):
                # the integer tensor cores multiply i8 by i8 (s32 sums); u8, and i8 against
                # another dtype, are converted exactly to a float format first
                if (v.type.dtype, other.type.dtype) == ("i8", "i32"):
                    self._matmul_i32_from_i8(a, b, lhs, rhs, lt, rt, op_span)
                if v.type.dtype == "i8":
                    message = (f"`@` of i8 and {other.type.dtype} tiles: the integer tensor "
                               "cores multiply i8 by i8")
                else:
                    message = (f"`@` of {v.type.dtype} tiles is not supported: the integer "
                               "tensor cores take i8 (signed) operands")
                if other.type.dtype in ("f16", "bf16", "f32"):
                    fixed = (f"({lt} as {other.type.dtype}) @ {rt}" if v is a
                             else f"{lt} @ ({rt} as {other.type.dtype})")
                    hint = (f"convert the {v.type.dtype} side: `{fixed}` (exact for "
                            f"{v.type.dtype} values)")
                else:
                    hint = (f"convert both operands, e.g. `({lt} as f16) @ ({rt} as f16)` "
                            f"(exact for {v.type.dtype} values; the products add in f32)")
                self.fail(message, node.span if node is not None else op_span, hint)

    def _matmul_i32_from_i8(self, a: V, b: V, lhs, rhs, lt: str, rt: str,
                            op_span: Span) -> None:
        """An i32 `@` operand against an i8 one, typically i8 arithmetic (a shift, a sum):
        the i32 side is the one to narrow."""
        left = a.type.dtype == "i32"
        node, side = (lhs, "left") if left else (rhs, "right")
        fixed = f"({lt} as i8) @ {rt}" if left else f"{lt} @ ({rt} as i8)"
        self.fail(f"`@` of {a.type.dtype} and {b.type.dtype} tiles: the integer tensor cores "
                  f"multiply i8 by i8, and the {side} operand is i32 (arithmetic on i8 "
                  "values gives i32)", node.span if node is not None else op_span,
                  f"narrow it: `{fixed}` (saturating outside -128..127), or convert both "
                  "operands to f16")

    def _matmul_fp8(self, a: V, b: V, lhs, rhs, lt: str, rt: str, op_span: Span) -> None:
        """An FP8 `@` operand is multiplied by an FP8 one only."""
        for v, other, node in ((a, b, lhs), (b, a, rhs)):
            if v.type.dtype in dt.FP8 and other.type.dtype not in dt.FP8:
                # FP8 multiplies FP8 (e4m3 and e5m2 mix: products exact in f32); against
                # another dtype the FP8 side is converted exactly to that format first
                to = other.type.dtype if other.type.dtype in ("f16", "bf16", "f32") else "f16"
                fixed = [f"({t} as {to})" if x.type.dtype in dt.FP8 or to == "f16"
                         and x.type.dtype != "f16" else t for t, x in ((lt, a), (rt, b))]
                self.fail(f"`@` of {v.type.dtype} and {other.type.dtype} tiles: FP8 "
                          "multiplies FP8 (f8e4m3 or f8e5m2)",
                          node.span if node is not None else op_span,
                          f"convert the FP8 side: `{fixed[0]} @ {fixed[1]}` (exact for "
                          f"{v.type.dtype} values; the products add in f32)")

    def _matmul_dtypes(self, a: V, b: V, lt: str, rt: str, op_span: Span) -> None:
        """The `@` operands share a dtype the tensor cores multiply (FP8 formats mix)."""
        if a.type.dtype != b.type.dtype and not {a.type.dtype, b.type.dtype} <= set(dt.FP8):
            # convert the wider side (mma inputs are usually half precision)
            if dt.widens_to(b.type.dtype, a.type.dtype):
                example = f"`({lt} as {b.type.dtype}) @ {rt}`"
            else:
                example = f"`{lt} @ ({rt} as {a.type.dtype})`"
            self.fail(f"`@` operands differ in dtype: {a.type} @ {b.type}", op_span,
                      f"convert one side, e.g. {example}")
        if a.type.dtype not in dt.MMA_DTYPES:
            self.fail(f"`@` multiplies f16, bf16, f32, tf32, i8 or FP8 tiles, not {a.type.dtype}",
                      op_span)

    def _unary(self, e: ast.Unary) -> V:
        v = self.expr(e.operand)
        self._no_tf32(v, e.span, f"`{e.op}`")
        if e.op == "-" and v.type.dtype in dt.WIDENED:
            v = self._widen(v)
            return V(T.Elementwise("neg", (v.expr,), v.type))
        if e.op == "-":
            if v.type.dtype == "bool":
                self.fail("unary `-` does not apply to bool values", e.span, "use `!`")
            return V(T.Elementwise("neg", (v.expr,), v.type), v.weak,
                     e.span if v.span is not None else None)
        if v.type.dtype != "bool":
            self.fail(f"`!` needs a bool operand, not {v.type.dtype}", e.span,
                      "negate numbers with `-`")
        return V(T.Elementwise("not", (v.expr,), v.type))

    def _value_subscript(self, e: ast.Subscript) -> V:
        if isinstance(e.base, ast.Name) and e.base.id in self.tensors:
            self.fail(f"read a tile of tensor {e.base.id!r} with load({source_text(self.source, e.span)})", e.span)
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
