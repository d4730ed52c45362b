"""Source text -> `ptc.ast.Module`, or a `CompileError` with a located syntax diagnostic."""
from __future__ import annotations

import functools
from collections import deque
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
    "MINUS": "'-'", "BANG": "'!'", "VBAR": "'|'", "AMPERSAND": "'&'", "CIRCUMFLEX": "'^'",
    "SHIFTOP": "'<<' or '>>'", "$END": "end of file",
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
        cache=True,      # the LALR tables in the temp folder, keyed by grammar and options:
    )                    # building them took 0.27 s of every process's start


def decode_source(data: bytes, filename: str) -> str:
    """UTF-8 text (a leading byte-order mark dropped), or a diagnostic pointing at the
    first byte that is not UTF-8."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        line = before.count(b"\n") + 1
        # a column counts characters, not bytes (the line may hold other non-ASCII text)
        col = len(before[before.rfind(b"\n") + 1:].decode("utf-8")) + 1
        raise CompileError(Diagnostic(
            f"the file is not UTF-8 text (byte 0x{data[exc.start]:02x})",
            Span(line, col, line, col + 1),
            hint="save the file as UTF-8",
        )) from None
    return text.removeprefix("\ufeff")    # a byte-order mark is not part of the program


# Deeper trees than this are refused before any stage recurses over them: each stage
# spends a few Python frames per level, and ~200 levels is what every stage down to the
# renderer and the emulator takes (a sum of 205 terms builds; real kernels nest a dozen).
MAX_DEPTH = 215


def parse(source: str, filename: str = "<input>") -> Module:
    """The AST of `source` (frozen, so one parse per text and name serves every caller in
    the process: the search, the renderer and the tests check the same files again)."""
    return _parsed(source, filename)


@functools.lru_cache(maxsize=256)
def _parsed(source: str, filename: str) -> Module:
    try:
        tree = _parser().parse(source)
    except UnexpectedInput as exc:
        raise CompileError(_syntax_diagnostic(exc, source)) from None
    except RecursionError:
        raise CompileError(_too_deep(Span(1, 1, 1, 2))) from None
    _check_depth(tree)
    try:
        kernels = BuildAst().transform(tree)
    except lark.exceptions.VisitError as exc:
        if isinstance(exc.orig_exc, CompileError):
            raise exc.orig_exc from None
        if isinstance(exc.orig_exc, RecursionError):
            raise CompileError(_too_deep(Span(1, 1, 1, 2))) from None
        raise
    except RecursionError:
        raise CompileError(_too_deep(Span(1, 1, 1, 2))) from None
    return Module(tuple(kernels), filename, source)


def _too_deep(span: Span) -> Diagnostic:
    return Diagnostic(f"expression nested too deeply (more than {MAX_DEPTH} levels)", span,
                      hint="name intermediate values: `t = ...` on lines of their own")


def _check_depth(tree: lark.Tree) -> None:
    """Refuse a tree deeper than MAX_DEPTH, at the leftmost node past it (walked breadth
    first without recursion, so that the check itself cannot overflow)."""
    queue = deque([(tree, 0)])
    while queue:
        node, depth = queue.popleft()
        if depth > MAX_DEPTH:
            meta = node.meta
            line, col = (meta.line, meta.column) if not meta.empty else (1, 1)
            raise CompileError(_too_deep(Span(line, col, line, col + 1)))
        queue.extend((c, depth + 1) for c in node.children if isinstance(c, lark.Tree))


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
        prev, open_bracket = _context(source, tok)
        special = _special_diagnostic(tok, prev)
        if special is not None:
            return special
        if str(tok) in _RESERVED and tok.type != "NAME" and "NAME" in exc.expected:
            return Diagnostic(f"syntax error: {str(tok)!r} is a reserved word, not a name",
                              span, "choose another name")
        expected = _expected(set(exc.expected))
        msg = f"syntax error: unexpected {_describe(tok)}"
        if expected:
            msg += f"; {expected}"
        return Diagnostic(msg, span, _hint_for(tok, exc.expected, open_bracket))
    if isinstance(exc, UnexpectedEOF):
        line, col = _end_position(source)
        return Diagnostic("syntax error: unexpected end of file", Span(line, col, line, col + 1),
                          hint="is a '}' or ')' missing?")
    line, col = getattr(exc, "line", 1), getattr(exc, "column", 1)
    return Diagnostic("syntax error", Span(line, col, line, col + 1))


_CLOSE = {"(": ")", "[": "]", "{": "}"}


def _hint_for(tok: Token, expected, open_bracket: Token | None = None) -> str | None:
    if tok.type == "$END":
        if open_bracket is not None:
            return (f"the {open_bracket.value!r} at line {open_bracket.line}, column "
                    f"{open_bracket.column} is never closed; is a "
                    f"{_CLOSE[open_bracket.value]!r} missing?")
        return "is a '}' or ')' missing?"
    if open_bracket is not None and tok.value in (")", "]"):
        want = ")" if open_bracket.value == "(" else "]"
        if tok.value != want:
            return (f"the innermost open bracket is the {open_bracket.value!r} at line "
                    f"{open_bracket.line}, column {open_bracket.column}; close it with {want!r}")
    if open_bracket is not None and open_bracket.line < (tok.line or 0):
        # Newlines inside brackets are skipped, so an unclosed bracket shows up only here.
        close = ")" if open_bracket.value == "(" else "]"
        return (f"the {open_bracket.value!r} at line {open_bracket.line}, column "
                f"{open_bracket.column} is still open here; is a {close!r} missing?")
    if open_bracket is not None:  # inside brackets no statement can end
        return None
    if "RBRACE" in expected and "_NL" in expected:
        return "put one statement per line, or separate statements with ';'"
    if tok.type == "_NL" and ("RPAR" in expected or "RSQB" in expected):
        return "an opening bracket on this line is not closed"
    return None


# Words from other languages that a kernel engineer may reach for, and what .pt has instead.
_FOREIGN_STATEMENTS = {
    "if": "select values with where(cond, a, b), or mask loads and stores by the tensor edge",
    "elif": "select values with where(cond, a, b)",
    "else": "select values with where(cond, a, b)",
    "while": "loops are tile loops: `for k: BK of K { ... }` (with `until E` to stop early)",
    "return": "a kernel writes its outputs with store(O[...], value)",
    "def": "a kernel starts with `kernel NAME(...) -> (...) { ... }`",
}
_RESERVED = {"kernel", "dims", "tile", "parallel", "for", "until", "of", "in", "divides", "as",
             "inf", "None"}


def _context(source: str, tok: Token) -> tuple[Token | None, Token | None]:
    """The token before `tok`, and the innermost bracket still open at `tok`: a `(` or `[`,
    or at the end of the file also a `{`."""
    prev: Token | None = None
    stack: list[Token] = []
    opening = {"(": "", "[": "", "{": ""} if tok.type == "$END" else {"(": "", "[": ""}
    if tok.type == "$END":
        target = (float("inf"), float("inf"))
    else:
        target = (tok.line or 0, tok.column or 0)
    try:
        for t in _parser().lex(source):
            if (t.line, t.column) >= target:
                break
            if t.type == "_NL":
                continue
            if t.value in opening:
                stack.append(t)
            elif t.value in (")", "]", "}") and stack and (t.value != "}" or "{" in opening):
                stack.pop()
            prev = t
    except UnexpectedInput:
        pass
    return prev, (stack[-1] if stack else None)


def _special_diagnostic(tok: Token, prev: Token | None) -> Diagnostic | None:
    """Clearer words for a few mistakes that the grammar alone reports poorly."""
    if prev is None or tok.type in ("$END", "_NL"):
        return None
    word = str(prev)
    if prev.type == "NAME" and word in _FOREIGN_STATEMENTS:
        return Diagnostic(f"syntax error: .pt has no `{word}` statement", _tspan(prev),
                          _FOREIGN_STATEMENTS[word])
    if word in _RESERVED and prev.type != "NAME" and tok.value in ("=", "+=", "-=", "*=", "/="):
        return Diagnostic(f"syntax error: {word!r} is a reserved word, not a variable name",
                          _tspan(prev), "choose another name")
    adjacent = prev.line == tok.line and prev.end_column == tok.column
    if word == "*" and tok.value == "*" and adjacent:
        return Diagnostic("syntax error: `**` is not an operator",
                          Span(prev.line, prev.column, tok.line, tok.column + 1),
                          "multiply out small powers (x * x); .pt has no power operator")
    return None


def _tspan(tok: Token) -> Span:
    return Span(tok.line, tok.column, tok.end_line or tok.line,
                tok.end_column or tok.column + 1)


def _end_position(source: str) -> tuple[int, int]:
    lines = source.splitlines() or [""]
    return len(lines), len(lines[-1]) + 1
