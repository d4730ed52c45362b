"""Diagnostics on the terminal: `ptc.diagnostics.format_plain`, in colour where it helps.

Colour is used only on a terminal and never when NO_COLOR is set (FORCE_COLOR forces it);
otherwise the output is exactly `format_plain` per diagnostic, a blank line between two,
which is what the tests and tests/errors/*.expected compare against.
"""
from __future__ import annotations

import os
import sys
from typing import TextIO

from rich.console import Console
from rich.text import Text

from .diagnostics import CompileError, Diagnostic, caret_lines, format_plain

_SEVERITY_STYLE = {"error": "bold red", "warning": "bold magenta", "note": "bold cyan"}


def use_color(stream: TextIO) -> bool:
    """Colour on a terminal, unless NO_COLOR (or TERM=dumb); FORCE_COLOR turns it on."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    if os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (ValueError, OSError):  # a closed or odd stream
        return False


def styled(diag: Diagnostic, filename: str, source: str) -> Text:
    """The coloured form of `format_plain(diag, filename, source)` (same characters)."""
    where = f"{filename}:{diag.span.line}:{diag.span.col}" if diag.span.line else filename
    text = Text()
    text.append(f"{where}: ", style="bold")
    text.append(f"{diag.severity}:", style=_SEVERITY_STYLE.get(diag.severity, "bold"))
    text.append(f" {diag.message}", style="bold")
    shown = caret_lines(source, diag.span) if diag.span.line else None
    if shown:
        line, caret = shown
        text.append("\n" + line)
        text.append("\n" + caret, style="bold green")
    if diag.hint:
        text.append("\nhint:", style="bold cyan")
        text.append(f" {diag.hint}")
    return text


def render(diag: Diagnostic, filename: str, source: str = "", *,
           file: TextIO | None = None, color: bool | None = None) -> None:
    """Write one diagnostic (and a newline) to `file` (default: stderr)."""
    stream = file if file is not None else sys.stderr
    if color is None:
        color = use_color(stream)
    if not color:
        stream.write(format_plain(diag, filename, source) + "\n")
        stream.flush()
        return
    console = Console(file=stream, force_terminal=True, highlight=False, markup=False,
                      emoji=False, soft_wrap=True)
    console.print(styled(diag, filename, source), soft_wrap=True)


def render_error(error: CompileError, filename: str, source: str = "", *,
                 file: TextIO | None = None, color: bool | None = None,
                 unlocated: str | None = None) -> None:
    """Write every diagnostic of `error`, in order, with a blank line between two.

    Diagnostics without a span are headed `unlocated` (say `ptc`) if given, else `filename`.
    """
    stream = file if file is not None else sys.stderr
    for n, diag in enumerate(error.diagnostics):
        if n:
            stream.write("\n")
        where = filename if diag.span.line or unlocated is None else unlocated
        render(diag, where, source, file=stream, color=color)
