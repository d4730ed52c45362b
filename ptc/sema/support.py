"""What the checker modules share: the checked value `V`, the `Abandon` bail-out, name
suggestions, and the source-text helpers that place spans and quote code in hints.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from .. import ast
from ..diagnostics import Span
from . import typed as T


class Abandon(Exception):
    """An error already reported (or a poisoned name): abandon this statement."""


@dataclass(frozen=True)
class V:
    """A checked expression; `weak` marks an untyped literal that adopts its partner's dtype."""

    expr: T.TExpr
    weak: bool = False
    span: Span | None = None     # where a literal is written (for errors about its value)

    @property
    def type(self) -> T.TileType:
        return self.expr.type


def suggest(name: str, candidates) -> str | None:
    candidates = list(candidates)
    for c in candidates:  # a difference of case only (BT for Bt) is the likeliest slip
        if c.lower() == name.lower() and c != name:
            return f"did you mean {c!r}?"
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else None


def with_article(dtype: str) -> str:
    """`a bf16` / `an f32`: the article for a dtype name."""
    return ("an " if dtype[0] in "fi" else "a ") + dtype     # "a u8": you-eight


def source_text(source: str, span: Span) -> str:
    lines = source.splitlines()
    if span.line != span.end_line or not 1 <= span.line <= len(lines):
        return "..."
    return lines[span.line - 1][span.col - 1:span.end_col - 1]


class SourceText:
    """Spans and snippets found in the kernel's source text (mixed into KernelChecker)."""

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

    def _operand_text(self, node, fallback: str) -> str:
        """Source text of an operand for a hint, parenthesized unless it is a postfix form."""
        if node is None:
            return fallback
        text = source_text(self.source, node.span)
        if text == "..." or len(text) > 40:
            return fallback
        if isinstance(node, (ast.Name, ast.Call, ast.Subscript, ast.Attribute, ast.IntLit,
                             ast.FloatLit)):
            return text
        return f"({text})"


def store_targets(stmts) -> set[str]:
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
            names |= store_targets(s.body)
    return names
