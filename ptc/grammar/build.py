"""Lark parse tree -> `ptc.ast` nodes with spans."""
from __future__ import annotations

import math

from lark import Token, Transformer, v_args

from .. import ast
from ..diagnostics import CompileError, Diagnostic, Span


def _span(meta) -> Span:
    return Span(meta.line, meta.column, meta.end_line, meta.end_column)


def _tspan(tok: Token) -> Span:
    return Span(tok.line, tok.column, tok.end_line, tok.end_column)


def _int(tok: Token) -> int:
    """An INT token's value; one too long for Python's int() is a diagnostic."""
    try:
        return int(tok)
    except ValueError:
        raise CompileError(Diagnostic(f"integer literal {str(tok)[:12]}... is too long "
                                      f"({len(tok)} digits)", _tspan(tok))) from None


def _node_span(node) -> Span:
    return node.span if hasattr(node, "span") else _tspan(node)


@v_args(meta=True)
class BuildAst(Transformer):
    # ---- module and kernels ----------------------------------------------------------
    def start(self, meta, kernels):
        return list(kernels)

    def kernel(self, meta, c):
        name, params, outputs, body = c
        return ast.Kernel(str(name), tuple(params or ()), tuple(outputs or ()), tuple(body),
                          _span(meta), _tspan(name))

    def params(self, meta, c):
        return list(c)

    def param(self, meta, c):
        name, ty = c
        return ast.Param(str(name), ty, _span(meta))

    def scalar_type(self, meta, c):
        return ast.ScalarType(str(c[0]), _span(meta))

    def tensor_type(self, meta, c):
        dtype, dims = c
        return ast.TensorType(str(dtype), tuple(dims), _span(meta), _tspan(dtype))

    def dim_list(self, meta, c):
        return list(c)

    def dim_item(self, meta, c):
        tok = c[0]
        value = _int(tok) if tok.type == "INT" else str(tok)
        return ast.DimRef(value, _tspan(tok))

    # ---- statements ------------------------------------------------------------------
    def block(self, meta, c):
        return [s for s in c if s is not None]

    def dims_decl(self, meta, c):
        return ast.DimsDecl(tuple(c), _span(meta))

    def dim_default(self, meta, c):
        name, value = c
        return ast.DimDefault(str(name), _int(value), _span(meta))

    def tile_decl(self, meta, c):
        return ast.TileDecl(tuple(c), _span(meta))

    def tile_choices(self, meta, c):
        name, *values = c
        return ast.TileChoice(str(name), tuple(_int(v) for v in values), _span(meta))

    def tile_fixed(self, meta, c):
        name, value = c
        return ast.TileChoice(str(name), (_int(value),), _span(meta))

    def tile_divides(self, meta, c):
        name, of = c
        return ast.TileDivides(str(name), _int(of) if of.type == "INT" else str(of),
                               _span(meta))

    def parallel(self, meta, c):
        *axes, body = c
        return ast.Parallel(tuple(axes), tuple(body), _span(meta))

    def for_loop(self, meta, c):
        axis, until, body = c
        return ast.For(axis, until, tuple(body), _span(meta))

    def until(self, meta, c):
        return c[0]

    def tiled_axis(self, meta, c):
        var, tile, dim = c
        tile_value = _int(tile) if tile.type == "INT" else str(tile)
        return ast.Axis(str(var), tile_value, str(dim), _span(meta), _tspan(var), _tspan(dim),
                        _tspan(tile))

    def single_axis(self, meta, c):
        var, dim = c
        return ast.Axis(str(var), None, str(dim), _span(meta), _tspan(var), _tspan(dim), None)

    def tile_size(self, meta, c):
        return c[0]

    def assign(self, meta, c):
        name, value = c
        return ast.Assign(str(name), None, value, _span(meta), _tspan(name))

    def aug_assign(self, meta, c):
        name, op, value = c
        return ast.Assign(str(name), str(op)[0], value, _span(meta), _tspan(name))

    def expr_stmt(self, meta, c):
        return ast.ExprStmt(c[0], _span(meta))

    # ---- expressions -----------------------------------------------------------------
    def int_lit(self, meta, c):
        return ast.IntLit(_int(c[0]), _tspan(c[0]))

    def float_lit(self, meta, c):
        return ast.FloatLit(float(c[0]), _tspan(c[0]))

    def inf_lit(self, meta, c):
        return ast.FloatLit(math.inf, _span(meta))

    def name(self, meta, c):
        return ast.Name(str(c[0]), _tspan(c[0]))

    def call(self, meta, c):
        func, args = c
        args = args or []
        pos = tuple(a for a in args if not isinstance(a, ast.Keyword))
        kws = tuple(a for a in args if isinstance(a, ast.Keyword))
        return ast.Call(str(func), pos, kws, _span(meta), _tspan(func))

    def args(self, meta, c):
        return list(c)

    def pos_arg(self, meta, c):
        return c[0]

    def kw_arg(self, meta, c):
        name, value = c
        return ast.Keyword(str(name), value, _span(meta))

    def binop(self, meta, c):
        lhs, op, rhs = c
        return ast.Binary(str(op), lhs, rhs, _span(meta), _tspan(op))

    def compare(self, meta, c):
        return self.binop(meta, c)

    def _logic(self, meta, c, op):
        lhs, rhs = c
        between = Span(lhs.span.end_line, lhs.span.end_col, rhs.span.line, rhs.span.col)
        return ast.Binary(op, lhs, rhs, _span(meta), between)

    def or_(self, meta, c):
        return self._logic(meta, c, "|")

    def and_(self, meta, c):
        return self._logic(meta, c, "&")

    def xor_(self, meta, c):
        return self._logic(meta, c, "^")

    def neg(self, meta, c):
        operand = c[0]
        if isinstance(operand, (ast.IntLit, ast.FloatLit)):  # fold -1, -inf into literals
            return type(operand)(-operand.value, _span(meta))
        return ast.Unary("-", operand, _span(meta))

    def not_(self, meta, c):
        return ast.Unary("!", c[0], _span(meta))

    def cast(self, meta, c):
        operand, dtype = c
        return ast.Cast(operand, str(dtype), _span(meta), _tspan(dtype))

    def subscript(self, meta, c):
        base, items = c
        return ast.Subscript(base, tuple(items), _span(meta))

    def subscripts(self, meta, c):
        return list(c)

    def sub_expr(self, meta, c):
        return c[0]

    def sub_full(self, meta, c):
        return ast.Full(_span(meta))

    def sub_none(self, meta, c):
        return ast.NewAxis(_span(meta))

    def attribute(self, meta, c):
        base, name = c
        return ast.Attribute(base, str(name), _span(meta))
