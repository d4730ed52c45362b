"""`ast.Module` -> canonical .pt text (`ptc compile --emit ast`).

One canonical form: two-space indentation, one statement per line, a blank line between
kernels, spaces around binary operators and after commas, and only the parentheses that the
operator precedence of `pt.lark` needs. Comments are not part of the AST and are not printed.
Parsing the printed text gives back the same AST (spans aside), and printing is idempotent.
"""
from __future__ import annotations

import math

from .. import ast

INDENT = "  "

# Binding strength, loosest first, following the rule nesting of pt.lark.
OR, XOR, AND, CMP, SHIFT, SUM, TERM, UNARY, CAST, POSTFIX, ATOM = range(1, 12)

_BINARY_LEVEL = {
    "|": OR, "^": XOR, "&": AND,
    "<": CMP, "<=": CMP, ">": CMP, ">=": CMP, "==": CMP, "!=": CMP,
    "<<": SHIFT, ">>": SHIFT,
    "+": SUM, "-": SUM,
    "*": TERM, "/": TERM, "//": TERM, "%": TERM, "@": TERM,
}


def print_module(module: ast.Module) -> str:
    """The canonical text of a module; empty for a module without kernels."""
    return "\n".join(print_kernel(k) for k in module.kernels)


def print_kernel(kernel: ast.Kernel) -> str:
    params = ", ".join(_param(p) for p in kernel.params)
    outputs = ", ".join(_param(p) for p in kernel.outputs)
    head = f"kernel {kernel.name}({params}) -> ({outputs})"
    return "\n".join(_block(head, kernel.body, 0)) + "\n"


def print_stmt(stmt: ast.Stmt, depth: int = 0) -> str:
    """One statement (with its nested block, if any) at `depth` levels of indentation."""
    return "\n".join(_stmt(stmt, depth))


def print_expr(expr: ast.Expr) -> str:
    """An expression with minimal parentheses."""
    return _expr(expr, 0)


# ---- signature -----------------------------------------------------------------------
def _param(p: ast.Param) -> str:
    return f"{p.name}: {_type(p.type)}"


def _type(t: ast.ScalarType | ast.TensorType) -> str:
    if isinstance(t, ast.ScalarType):
        return t.dtype
    return f"{t.dtype}[{', '.join(str(d.name) for d in t.dims)}]"


# ---- statements ----------------------------------------------------------------------
def _block(head: str, body: tuple[ast.Stmt, ...], depth: int) -> list[str]:
    pad = INDENT * depth
    if not body:
        return [f"{pad}{head} {{}}"]
    lines = [f"{pad}{head} {{"]
    for stmt in body:
        lines.extend(_stmt(stmt, depth + 1))
    lines.append(f"{pad}}}")
    return lines


def _stmt(s: ast.Stmt, depth: int) -> list[str]:
    pad = INDENT * depth
    if isinstance(s, ast.Assign):
        op = "=" if s.op is None else f"{s.op}="
        return [f"{pad}{s.name} {op} {_expr(s.value, 0)}"]
    if isinstance(s, ast.ExprStmt):
        return [f"{pad}{_expr(s.expr, 0)}"]
    if isinstance(s, ast.DimsDecl):
        return [f"{pad}dims " + ", ".join(f"{d.name} = {d.value}" for d in s.items)]
    if isinstance(s, ast.TileDecl):
        return [f"{pad}tile " + ", ".join(_tile_item(t) for t in s.items)]
    if isinstance(s, ast.Parallel):
        return _block("parallel " + ", ".join(_axis(a) for a in s.axes), s.body, depth)
    if isinstance(s, ast.For):
        head = f"for {_axis(s.axis)}"
        if s.until is not None:
            head += f" until {_expr(s.until, 0)}"
        return _block(head, s.body, depth)
    raise TypeError(f"not a statement: {type(s).__name__}")


def _tile_item(t: ast.TileChoice | ast.TileDivides) -> str:
    if isinstance(t, ast.TileDivides):
        return f"{t.tile} divides {t.of}"
    if len(t.choices) == 1:
        return f"{t.name} = {t.choices[0]}"
    return f"{t.name} in [{', '.join(str(c) for c in t.choices)}]"


def _axis(a: ast.Axis) -> str:
    if a.tile is None:
        return f"{a.var} of {a.dim}"
    return f"{a.var}: {a.tile} of {a.dim}"


# ---- expressions ---------------------------------------------------------------------
def _expr(e, context: int) -> str:
    """`e` printed to sit where the grammar wants a binding level of at least `context`.

    One stack frame per level of nesting, fewer than the parser needs, so that whatever
    parses also prints.
    """
    if isinstance(e, ast.IntLit):
        level, text = (UNARY if e.value < 0 else ATOM), str(e.value)
    elif isinstance(e, ast.FloatLit):
        level, text = (UNARY if math.copysign(1.0, e.value) < 0 else ATOM), _float(e.value)
    elif isinstance(e, ast.Name):
        level, text = ATOM, e.id
    elif isinstance(e, ast.Call):
        args = [_expr(a, 0) for a in e.args]
        args += [f"{k.name}={_expr(k.value, 0)}" for k in e.kwargs]
        level, text = ATOM, f"{e.func}({', '.join(args)})"
    elif isinstance(e, ast.Subscript):
        items = ", ".join(_subscript_item(i) for i in e.items)
        level, text = POSTFIX, f"{_expr(e.base, POSTFIX)}[{items}]"
    elif isinstance(e, ast.Attribute):
        # `1.T` would lex as the number `1.` and a name: an integer base needs parentheses.
        base = _expr(e.base, ATOM + 1 if isinstance(e.base, ast.IntLit) else POSTFIX)
        level, text = POSTFIX, f"{base}.{e.name}"
    elif isinstance(e, ast.Cast):
        level, text = CAST, f"{_expr(e.operand, CAST)} as {e.dtype}"
    elif isinstance(e, ast.Unary):
        level, text = UNARY, f"{e.op}{_expr(e.operand, UNARY)}"
    elif isinstance(e, ast.Binary):
        level = _BINARY_LEVEL[e.op]
        # Left-associative levels take their own level on the left and the next one on
        # the right; comparisons do not chain, so both sides must bind tighter.
        left = level + 1 if level == CMP else level
        text = f"{_expr(e.lhs, left)} {e.op} {_expr(e.rhs, level + 1)}"
    else:
        raise TypeError(f"not an expression: {type(e).__name__}")
    return f"({text})" if level < context else text


def _subscript_item(item) -> str:
    if isinstance(item, ast.Full):
        return ":"
    if isinstance(item, ast.NewAxis):
        return "None"
    return _expr(item, 0)


def _float(value: float) -> str:
    """A float literal that reads back as exactly `value` and never as an integer."""
    if math.isnan(value):
        raise ValueError(".pt has no literal for NaN")
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    text = repr(value)  # shortest exact form: '0.5', '1e-05', '1.5e+20', '4.0'
    if "e" in text:
        mantissa, exponent = text.split("e")
        sign = "-" if exponent.startswith("-") else ""
        text = f"{mantissa}e{sign}{exponent.lstrip('+-').lstrip('0') or '0'}"
    return text
