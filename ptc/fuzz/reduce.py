"""Reduce a program with a finding to a small one with the same finding (the same target
and kind), greedily, as C-Reduce does with its passes:

1. pin the tile sizes to those the finding was built with (the search then has one
   candidate per size, and the finding does not move to another plan);
2. remove body lines one at a time (a `for` block as a whole), keeping each removal after
   which the program still checks and still has the finding;
3. replace the right-hand side of an assignment by one of the names it reads;
4. make each dim smaller.
Each pass repeats until nothing changes. Only the finding's target is run.
"""
from __future__ import annotations

import re
from dataclasses import replace
from typing import Callable, Iterator

from ..sema.calls import KNOWN_FUNCS
from .check import Finding, check_program, typed_kernel
from .program import Program


def still_fails(finding: Finding, seed: int) -> Callable[[Program], bool]:
    def test(candidate: Program) -> bool:
        try:
            typed_kernel(candidate)
        except ValueError:
            return False
        found = check_program(candidate, (finding.target,), seed=seed)
        return any(f.same_bug(finding) for f in found)
    return test


def pin_tiles(program: Program, tiles: tuple[tuple[str, int], ...]) -> Program:
    if not tiles:
        return program
    declared = [d for d in program.decls if not d.startswith("tile ")]
    line = "tile " + ", ".join(f"{k} = {v}" for k, v in tiles)
    return replace(program, decls=tuple(declared) + (line,))


def blocks(body: tuple[str, ...]) -> list[tuple[int, int]]:
    """(start, end) line ranges removable as a unit: a line, or a `for` line to its `}`."""
    out, i = [], 0
    while i < len(body):
        if body[i].startswith("for ") and body[i].endswith("{"):
            j = i + 1
            while j < len(body) and body[j] != "}":
                j += 1
            out.append((i, j + 1))
            for k in range(i + 1, j):
                out.append((k, k + 1))
            i = j + 1
        else:
            out.append((i, i + 1))
            i += 1
    return out


def greedy(program: Program, candidates: Callable[[Program], Iterator[Program]],
           test) -> Program:
    """Take the first candidate that still fails, again and again, until none does."""
    while True:
        for candidate in candidates(program):
            if test(candidate):
                program = candidate
                break
        else:
            return program


def without_lines(program: Program) -> Iterator[Program]:
    """The program less one line (or one `for` block), the last ones first."""
    for g, (_, body, _) in enumerate(program.grids):
        for start, end in reversed(blocks(body)):
            yield program.with_body(g, body[:start] + body[end:])


ASSIGN = re.compile(r"^(\s*)(\w+) = (.+)$")
# names that are not values: the built-in functions (ptc.sema.calls) and keywords
_FUNCTIONS = set(KNOWN_FUNCS) | {"as", "pad", "axis", "inf", "until"}


def simpler_assignments(program: Program) -> Iterator[Program]:
    """The program with one assignment's right-hand side replaced by a name it reads."""
    for g, (_, body, _) in enumerate(program.grids):
        for n, line in enumerate(body):
            m = ASSIGN.match(line)
            if not m:
                continue
            indent, name, expr = m.groups()
            for read in dict.fromkeys(re.findall(r"\b[a-z_]\w*\b", expr)):
                if read not in (name, expr) and read not in _FUNCTIONS:
                    yield program.with_body(
                        g, body[:n] + (f"{indent}{name} = {read}",) + body[n + 1:])


def smaller_dims(program: Program) -> Iterator[Program]:
    """The program run at one dim smaller (1, 2, half, one less)."""
    for name, size in program.shapes:
        for smaller in sorted({1, 2, size // 2, size - 1}):
            if 1 <= smaller < size:
                yield program.with_shapes({**program.shape_dict, name: smaller})


def reduce(program: Program, finding: Finding, seed: int = 0) -> Program:
    """The smallest program found that still has `finding` (on its target)."""
    test = still_fails(finding, seed)
    pinned = pin_tiles(program, finding.tiles)
    if test(pinned):
        program = pinned
    for candidates in (without_lines, simpler_assignments, without_lines, smaller_dims):
        program = greedy(program, candidates, test)
    return program
