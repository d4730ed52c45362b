"""A tiny declarative schema walker for YAML data.

A schema is a tree of checks (`Record`, `ListOf`, `MapOf`, `Int`, `Num`, `Str`, `Choice`,
`Pattern`, `Bool`). `Walk.check(schema, data)` walks data and schema together, collects one
diagnostic per problem -- naming the file and the key path (`eu.units[2].throughput`), with
the span of the offending YAML node -- and returns the data with every invalid leaf replaced
by `INVALID`, so later checks can skip what is already reported.
"""
from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass, field
from typing import Any

from ptc.diagnostics import NOWHERE, Diagnostic, Span

KeyPath = tuple  # of str keys and int indices
INVALID: Any = type("Invalid", (), {"__repr__": lambda self: "INVALID"})()


def render_path(path: KeyPath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def describe(value: Any) -> str:
    """How an error message names a value the user wrote."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, (int, float)):
        return f"{value:g}" if isinstance(value, float) else str(value)
    if isinstance(value, str):
        return f"the string {value!r}" if value else "an empty string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__}"


def closest(word: Any, options: list[str] | tuple[str, ...]) -> str | None:
    if not isinstance(word, str):
        return None
    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return close[0] if close else None


def did_you_mean(word: Any, options: list[str] | tuple[str, ...]) -> str | None:
    close = closest(word, options)
    return f"did you mean {close!r}?" if close else None


def _number_hint(value: Any) -> str | None:
    """A hint for a number YAML read as a string."""
    if not isinstance(value, str):
        return None
    try:
        float(value.replace("_", ""))
    except ValueError:
        return None
    if "e" in value.lower():
        return (f"YAML 1.1 reads {value} as a string: write the exponent with a '.' and a "
                f"sign (e.g. 1.0e+9) or the number in full")
    return "remove the quotes to make it a number"


@dataclass
class Walk:
    """One validation run over one file."""

    filename: str
    spans: dict[KeyPath, Span] = field(default_factory=dict)  # path -> span of the value
    key_spans: dict[KeyPath, Span] = field(default_factory=dict)  # path -> span of its key
    diagnostics: list[Diagnostic] = field(default_factory=list)
    _active: set[int] = field(default_factory=set)  # containers being walked (alias loops)

    def span(self, path: KeyPath, key: bool = False) -> Span:
        if key and path in self.key_spans:
            return self.key_spans[path]
        while path:
            if path in self.spans:
                return self.spans[path]
            path = path[:-1]
        return NOWHERE  # the file as a whole: no caret

    def error(self, path: KeyPath, message: str, hint: str | None = None, at_key: Any = None,
              span: Span | None = None) -> Any:
        """Report a problem with the value at `path` (or, given `at_key`, with that key of it)."""
        where = render_path(path)
        text = f"{self.filename}: {where}: {message}" if where else f"{self.filename}: {message}"
        if span is None:
            span = self.span(path + (at_key,), key=True) if at_key is not None else self.span(path)
        self.diagnostics.append(Diagnostic(text, span, hint))
        return INVALID

    def check(self, schema: "Check", value: Any, path: KeyPath = ()) -> Any:
        return schema(value, path, self)


class Check:
    expected = "a value"

    def __call__(self, value: Any, path: KeyPath, walk: Walk) -> Any:
        raise NotImplementedError

    def wrong(self, value: Any, path: KeyPath, walk: Walk, hint: str | None = None) -> Any:
        return walk.error(path, f"expected {self.expected}, got {describe(value)}", hint)


class Int(Check):
    def __init__(self, min: int = 0):
        self.min = min
        self.expected = {0: "a non-negative integer", 1: "a positive integer"}.get(
            min, f"an integer >= {min}")

    def __call__(self, value, path, walk):
        if isinstance(value, bool) or not isinstance(value, int) or value < self.min:
            return self.wrong(value, path, walk, _number_hint(value))
        return value


class Num(Check):
    """A positive, finite number (int or float); returned as float."""

    expected = "a positive number"

    def __call__(self, value, path, walk):
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or not math.isfinite(value) or value <= 0):
            return self.wrong(value, path, walk, _number_hint(value))
        return float(value)


class Bool(Check):
    expected = "true or false"

    def __call__(self, value, path, walk):
        return value if isinstance(value, bool) else self.wrong(value, path, walk)


class Str(Check):
    expected = "a non-empty string"

    def __call__(self, value, path, walk):
        return value if isinstance(value, str) and value else self.wrong(value, path, walk)


class Pattern(Check):
    def __init__(self, regex: str, expected: str):
        self.regex = re.compile(regex)
        self.expected = expected

    def __call__(self, value, path, walk):
        if isinstance(value, str) and self.regex.fullmatch(value):
            return value
        return self.wrong(value, path, walk)


class Choice(Check):
    def __init__(self, *options: str):
        self.options = options
        self.expected = "one of " + ", ".join(repr(o) for o in options)

    def __call__(self, value, path, walk):
        if isinstance(value, str) and value in self.options:
            return value
        return self.wrong(value, path, walk, did_you_mean(value, self.options))


class ListOf(Check):
    def __init__(self, item: Check, min_len: int = 0):
        self.item = item
        self.min_len = min_len
        self.expected = "a list"

    def __call__(self, value, path, walk):
        if not isinstance(value, list):
            return self.wrong(value, path, walk)
        if len(value) < self.min_len:
            return walk.error(path, f"expected at least {self.min_len} "
                                    f"entr{'y' if self.min_len == 1 else 'ies'}, got none")
        if id(value) in walk._active:
            return walk.error(path, "the value contains itself (a recursive YAML alias)")
        walk._active.add(id(value))
        try:
            return [self.item(v, path + (i,), walk) for i, v in enumerate(value)]
        finally:
            walk._active.discard(id(value))


class MapOf(Check):
    """A mapping from keys drawn from `keys` to values checked by `value`."""

    def __init__(self, keys: tuple[str, ...], value: Check, expected: str, key_what: str):
        self.keys = keys
        self.value = value
        self.expected = expected
        self.key_what = key_what

    def __call__(self, value, path, walk):
        if not isinstance(value, dict):
            return self.wrong(value, path, walk)
        if not value:
            return walk.error(path, f"expected {self.expected}, got an empty mapping")
        out = {}
        for k, v in value.items():
            if k not in self.keys:
                walk.error(path, f"unknown {self.key_what} {k!r}", at_key=k,
                           hint=did_you_mean(k, self.keys)
                           or f"expected one of: {', '.join(self.keys)}")
                out[k] = INVALID
            else:
                out[k] = self.value(v, path + (k,), walk)
        return out


@dataclass(frozen=True)
class Optional:
    """A Record field that may be left out (then `default`)."""

    check: Check
    default: Any = None


class Record(Check):
    """A mapping with a fixed set of keys, each with its own check."""

    expected = "a mapping"

    def __init__(self, fields: dict[str, Check | Optional]):
        self.fields = fields

    def __call__(self, value, path, walk):
        if not isinstance(value, dict):
            return self.wrong(value, path, walk)
        if id(value) in walk._active:
            return walk.error(path, "the value contains itself (a recursive YAML alias)")
        out: dict[str, Any] = {}
        names = list(self.fields)
        misspelt: set[str] = set()  # missing keys already explained by an unknown key's hint
        for k in value:
            if k not in self.fields:
                close = closest(k, [n for n in names if n not in value])
                if close:
                    misspelt.add(close)
                hint = (f"did you mean {close!r}?" if close
                        else f"expected one of: {', '.join(names)}")
                walk.error(path, f"unknown key {k!r}", hint, at_key=k)
        walk._active.add(id(value))
        try:
            for name, spec in self.fields.items():
                check = spec.check if isinstance(spec, Optional) else spec
                if name in value:
                    out[name] = check(value[name], path + (name,), walk)
                elif isinstance(spec, Optional):
                    out[name] = spec.default
                elif name in misspelt:
                    out[name] = INVALID
                else:
                    out[name] = walk.error(path, f"missing key {name!r}; expected {check.expected}")
        finally:
            walk._active.discard(id(value))
        return out


def valid(*values: Any) -> bool:
    """True when none of `values` (nor anything inside them) was reported invalid."""
    def ok(v: Any) -> bool:
        if v is INVALID:
            return False
        if isinstance(v, dict):
            return all(ok(x) for x in v.values())
        if isinstance(v, list):
            return all(ok(x) for x in v)
        return True
    return all(ok(v) for v in values)
