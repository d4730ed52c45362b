"""Source text -> `ptc.ast.Module`, or a `CompileError` with a located syntax diagnostic."""
from __future__ import annotations

import functools
from pathlib import Path

import lark
from lark import Lark, Token
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from ..ast import Module
from ..diagnostics import CompileError, Diagnostic, Span
from .build import BuildAst
from .postlex import NewlinePostLex

_GRAMMAR = Path(__file__).with_name("pt.lark")

# Friendly names for the grammar's terminals, used in "expected ..." messages.
_TERMINAL_NAMES = {
    "NAME": "a name", "INT": "an integer", "FLOAT": "a number", "_NL": "a newline",
    "LPAR": "'('", "RPAR": "')'", "LSQB": "'['", "RSQB": "']'", "LBRACE": "'{'", "RBRACE": "'}'",
    "COMMA": "','", "COLON": "':'", "SEMICOLON": "';'", "EQUAL": "'='", "DOT": "'.'",
    "CMPOP": "a comparison", "ADDOP": "'+' or '-'", "MULOP": "an operator", "AUGOP": "'+='",
    "MINUS": "'-'", "BANG": "'!'", "VBAR": "'|'", "AMPERSAND": "'&'", "$END": "end of file",
}


@functools.lru_cache(maxsize=1)
def _parser() -> Lark:
    return Lark(
        _GRAMMAR.read_text(),
        parser="lalr",
        lexer="basic",
        propagate_positions=True,
        postlex=NewlinePostLex(),
        maybe_placeholders=True,
    )


def decode_source(data: bytes, filename: str) -> str:
    """UTF-8 text, or a diagnostic pointing at the first byte that is not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        line = before.count(b"\n") + 1
        col = exc.start - (before.rfind(b"\n") + 1) + 1
        raise CompileError(Diagnostic(
            f"{filename} is not UTF-8 text (byte 0x{data[exc.start]:02x})",
            Span(line, col, line, col + 1),
            hint="save the file as UTF-8",
        )) from None


def parse(source: str, filename: str = "<input>") -> Module:
    try:
        tree = _parser().parse(source)
    except UnexpectedInput as exc:
        raise CompileError(_syntax_diagnostic(exc, source)) from None
    except RecursionError:
        raise CompileError(Diagnostic("expression nested too deeply", Span(1, 1, 1, 2))) from None
    try:
        kernels = BuildAst().transform(tree)
    except lark.exceptions.VisitError as exc:
        if isinstance(exc.orig_exc, CompileError):
            raise exc.orig_exc from None
        if isinstance(exc.orig_exc, RecursionError):
            raise CompileError(Diagnostic("expression nested too deeply", Span(1, 1, 1, 2))) from None
        raise
    except RecursionError:
        raise CompileError(Diagnostic("expression nested too deeply", Span(1, 1, 1, 2))) from None
    return Module(tuple(kernels), filename, source)


def _describe(token: Token) -> str:
    if token.type == "$END":
        return "end of file"
    if token.type == "_NL":
        return "end of line"
    return repr(str(token))


def _expected(names: set[str]) -> str:
    words = sorted({_TERMINAL_NAMES.get(n, _quoted_keyword(n)) for n in names})
    if len(words) > 6:
        return ""
    return "expected " + (words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1])


def _quoted_keyword(terminal: str) -> str:
    for t in _parser().terminals:
        if t.name == terminal and t.pattern.type == "str":
            return repr(t.pattern.value)
    return terminal.lower()


def _syntax_diagnostic(exc: UnexpectedInput, source: str) -> Diagnostic:
    if isinstance(exc, UnexpectedCharacters):
        ch = source[exc.pos_in_stream] if exc.pos_in_stream < len(source) else "?"
        span = Span(exc.line, exc.column, exc.line, exc.column + 1)
        hint = None
        if ch == "'" or ch == '"':
            hint = ".pt has no strings"
        return Diagnostic(f"unexpected character {ch!r}", span, hint)
    if isinstance(exc, UnexpectedToken):
        tok = exc.token
        if tok.type == "$END":
            line, col = _end_position(source)
            span = Span(line, col, line, col + 1)
        else:
            span = Span(tok.line, tok.column, tok.end_line or tok.line,
                        tok.end_column or tok.column + 1)
            if tok.type == "_NL":  # point at the end of the line, not at the next one
                span = Span(tok.line, tok.column, tok.line, tok.column + 1)
        expected = _expected(set(exc.expected))
        msg = f"syntax error: unexpected {_describe(tok)}"
        if expected:
            msg += f"; {expected}"
        return Diagnostic(msg, span, _hint_for(tok, exc.expected))
    if isinstance(exc, UnexpectedEOF):
        line, col = _end_position(source)
        return Diagnostic("syntax error: unexpected end of file", Span(line, col, line, col + 1),
                          hint="is a '}' or ')' missing?")
    line, col = getattr(exc, "line", 1), getattr(exc, "column", 1)
    return Diagnostic("syntax error", Span(line, col, line, col + 1))


def _hint_for(tok: Token, expected) -> str | None:
    if tok.type == "$END":
        return "is a '}' or ')' missing?"
    if "RBRACE" in expected and "_NL" in expected:
        return "put one statement per line, or separate statements with ';'"
    if tok.type == "_NL" and ("RPAR" in expected or "RSQB" in expected):
        return "an opening bracket on this line is not closed"
    return None


def _end_position(source: str) -> tuple[int, int]:
    lines = source.splitlines() or [""]
    return len(lines), len(lines[-1]) + 1
