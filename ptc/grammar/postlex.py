"""Makes newlines statement separators only where a statement can end.

Newlines inside ( ) and [ ], outside any kernel body, and just before '{' or '->' are
dropped, so signatures and argument lists may span lines and '{' may open on the next line.
"""
from __future__ import annotations

from typing import Iterator

from lark import Token


class NewlinePostLex:
    always_accept = ("_NL",)

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        brackets = 0   # open ( and [
        braces = 0     # open {
        pending: Token | None = None
        for tok in stream:
            if tok.type == "_NL":
                if brackets == 0 and braces > 0 and pending is None:
                    pending = tok
                continue
            if pending is not None:
                if tok.value not in ("{", "->"):
                    yield pending
                pending = None
            if tok.value in ("(", "["):
                brackets += 1
            elif tok.value in (")", "]"):
                brackets = max(brackets - 1, 0)
            elif tok.value == "{":
                braces += 1
            elif tok.value == "}":
                braces = max(braces - 1, 0)
            yield tok
        if pending is not None:
            yield pending
