"""Diagnostics: `file:line:col: error: message`, the source line, a caret, a hint.

Every stage reports problems in the user's program by raising `CompileError` with one or
more `Diagnostic`s; the CLI renders them and exits 1. Nothing else may escape to a user.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Span:
    """1-based line and column; end is exclusive (the column after the last character)."""

    line: int
    col: int
    end_line: int
    end_col: int

    def __str__(self) -> str:
        return f"{self.line}:{self.col}"

    def join(self, other: "Span") -> "Span":
        first = min(self, other, key=lambda s: (s.line, s.col))
        last = max(self, other, key=lambda s: (s.end_line, s.end_col))
        return Span(first.line, first.col, last.end_line, last.end_col)


NOWHERE = Span(0, 0, 0, 0)


@dataclass(frozen=True)
class Diagnostic:
    message: str
    span: Span = NOWHERE
    hint: str | None = None
    severity: str = "error"

    def headline(self, filename: str) -> str:
        where = f"{filename}:{self.span.line}:{self.span.col}" if self.span.line else filename
        return f"{where}: {self.severity}: {self.message}"


class CompileError(Exception):
    """One or more diagnostics about the user's input."""

    def __init__(self, diagnostics: list[Diagnostic] | Diagnostic):
        if isinstance(diagnostics, Diagnostic):
            diagnostics = [diagnostics]
        self.diagnostics = list(diagnostics)
        super().__init__("; ".join(d.message for d in self.diagnostics))


class FlagError(CompileError):
    """A command-line flag (--shape, --tile) names what the program does not have or gives
    it an impossible value: a usage error (the CLI exits 2)."""


class Collector:
    """Gathers independent diagnostics so one run can report several errors."""

    def __init__(self) -> None:
        self.diagnostics: list[Diagnostic] = []

    def error(self, message: str, span: Span = NOWHERE, hint: str | None = None) -> None:
        self.diagnostics.append(Diagnostic(message, span, hint))

    def raise_if_any(self) -> None:
        if self.diagnostics:
            raise CompileError(sorted(self.diagnostics, key=lambda d: (d.span.line, d.span.col)))


def caret_lines(source: str, span: Span) -> tuple[str, str] | None:
    """The source line of `span` and a caret line under it (tabs kept so carets align)."""
    lines = source.splitlines()
    if not (1 <= span.line <= len(lines)):
        return None
    text = lines[span.line - 1]
    start = max(span.col - 1, 0)
    end = span.end_col - 1 if span.end_line == span.line else len(text)
    width = max(end - start, 1)
    pad = "".join(ch if ch == "\t" else " " for ch in text[:start])
    return text, pad + "^" + "~" * (width - 1)


def format_plain(diag: Diagnostic, filename: str, source: str) -> str:
    """The canonical text form (what tests/errors/*.expected hold and what --no-color prints)."""
    out = [diag.headline(filename)]
    shown = caret_lines(source, diag.span) if diag.span.line else None
    if shown:
        out.extend(shown)
    if diag.hint:
        out.append(f"hint: {diag.hint}")
    return "\n".join(out)
