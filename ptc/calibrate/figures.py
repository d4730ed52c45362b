"""The figures of a device description that carry an estimate tag (`[EST]` in their line's
comment): where they are in the YAML text, and how to put other values into a Device.

A figure's path names it as the YAML nests it: ("memory", "l2_bandwidth_gbs"),
("eu", "units", "tma", "latency_cycles") -- a unit by its `name`. Only plain numbers are figures
(a flow mapping such as `throughput: {bytes: 128}` is not).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Mapping

_KEY = re.compile(r"(?P<key>[A-Za-z_][A-Za-z_0-9]*)\s*:\s*(?P<value>[^#]*?)\s*(?:#(?P<comment>.*))?$")
_NUMBER = re.compile(r"[+-]?(\d[\d_]*)(\.\d+)?([eE][+-]?\d+)?")
TAG = "[EST"


@dataclass(frozen=True)
class Figure:
    path: tuple[str, ...]
    line: int               # 0-based line of the YAML text
    value: float
    is_int: bool
    comment: str            # the line's comment, without '#'

    @property
    def name(self) -> str:
        return ".".join(self.path)

    @property
    def estimated(self) -> bool:
        return TAG in self.comment


def scan(text: str) -> tuple[Figure, ...]:
    """Every scalar numeric figure of a device YAML, with its path and comment."""
    out = []
    stack: list[tuple[int, str]] = []       # (indent, name) of the enclosing keys / items
    for n, raw in enumerate(text.splitlines()):
        body = raw.split("#", 1)[0]
        if not body.strip():
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        content = raw.strip()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if content.startswith("- "):
            item = content[2:]
            m = _KEY.match(item)
            name = m.group("value") if m and m.group("key") == "name" else str(n)
            stack.append((indent, name))
            indent += 2
            content = item
            if m and m.group("key") == "name":
                continue
        m = _KEY.match(content)
        if not m:
            continue
        key, value = m.group("key"), m.group("value")
        if not value:
            stack.append((indent, key))
            continue
        if _NUMBER.fullmatch(value):
            number = float(value.replace("_", ""))
            is_int = re.fullmatch(r"[+-]?[\d_]+", value) is not None
            out.append(Figure(tuple(name for _, name in stack) + (key,), n, number, is_int,
                              (m.group("comment") or "").strip()))
    return tuple(out)


def estimated(text: str) -> tuple[Figure, ...]:
    """The figures tagged [EST] that the cost model reads through a Device."""
    return tuple(f for f in scan(text) if f.estimated and settable(f.path))


def settable(path: tuple[str, ...]) -> bool:
    if len(path) == 2 and path[0] == "memory":
        return True
    if len(path) == 4 and path[:2] == ("eu", "units") and path[3] in (
            "issue_latency_cycles", "latency_cycles"):
        return True
    return len(path) == 1 and path[0] in ("clock_ghz",)


def with_values(device, values: Mapping[tuple[str, ...], float]):
    """`device` with the figures at `values`' paths set to them."""
    memory, units, top = {}, {}, {}
    for path, value in values.items():
        if path[0] == "memory":
            memory[path[1]] = value
        elif path[:2] == ("eu", "units"):
            units.setdefault(path[2], {})[path[3]] = value
        else:
            top[path[0]] = value
    out = device
    if memory:
        out = replace(out, memory=replace(out.memory, **memory))
    if units:
        out = replace(out, units=tuple(replace(u, **units[u.name]) if u.name in units else u
                                       for u in out.units))
    if top:
        out = replace(out, **top)
    return out
