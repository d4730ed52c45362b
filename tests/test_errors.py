"""The error corpus: every tests/errors/NAME.pt is a bad program; NAME.expected beside it is
exactly what ptc reports for it (each diagnostic as `format_plain` renders it, in order,
separated by blank lines), in the style of LLVM lit / bril's golden tests.

The file name in the diagnostics is the bare `NAME.pt`, so the corpus does not depend on
where the repository lives.

To (re)generate the .expected files after a deliberate change to a message, run

    PTC_UPDATE_GOLDENS=1 .venv/bin/pytest -q tests/test_errors.py

and review the diff (`git diff tests/errors`) before committing: a golden file is a claim
that the diagnostic is right, not just what the compiler happens to say.

To add a case: write tests/errors/NAME.pt (one realistic kernel with one mistake, or a few
independent ones), run the command above, and read NAME.expected critically: is the caret
under the culprit, is the hint right?
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from ptc.diagnostics import CompileError, format_plain
from ptc.driver import read_source
from ptc.grammar import parse
from ptc.sema import check

ERRORS = Path(__file__).parent / "errors"
CASES = sorted(ERRORS.glob("*.pt"))
UPDATE = os.environ.get("PTC_UPDATE_GOLDENS") == "1"
MIN_CASES = 40


def diagnose(path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """What ptc reports for `path`, read through the same functions the CLI uses.

    It runs from the corpus directory so that every filename in a message is `NAME.pt`.
    """
    monkeypatch.chdir(path.parent)
    name = path.name
    source = path.read_bytes().decode("utf-8", errors="replace")  # for the caret lines
    try:
        filename, source = read_source(name)
        check(parse(source, filename), {})
    except CompileError as exc:
        assert exc.diagnostics, "a CompileError must carry at least one diagnostic"
        return "\n\n".join(format_plain(d, name, source) for d in exc.diagnostics) + "\n"
    pytest.fail(f"{name} compiled without an error, but every file in tests/errors must be "
                "rejected (move a good program to samples/ or tests/)")


def test_corpus_is_not_empty():
    assert len(CASES) >= MIN_CASES, (
        f"tests/errors holds {len(CASES)} cases; at least {MIN_CASES} are expected")


def test_every_expected_has_a_case():
    orphans = [p.name for p in ERRORS.glob("*.expected") if not p.with_suffix(".pt").exists()]
    assert not orphans, f"expected files without a .pt beside them: {orphans}"


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_error_case(path: Path, monkeypatch: pytest.MonkeyPatch):
    got = diagnose(path, monkeypatch)
    expected_path = path.with_suffix(".expected")
    if UPDATE:
        expected_path.write_text(got, encoding="utf-8")
        return
    if not expected_path.exists():
        pytest.fail(f"{expected_path.name} is missing; create it with\n"
                    f"    PTC_UPDATE_GOLDENS=1 .venv/bin/pytest -q tests/test_errors.py "
                    f"-k {path.stem}\nand check what it says. ptc reported:\n\n{got}")
    expected = expected_path.read_text(encoding="utf-8")
    assert got == expected, (
        f"the diagnostics for {path.name} changed; if the change is intended, run "
        f"PTC_UPDATE_GOLDENS=1 .venv/bin/pytest -q tests/test_errors.py -k {path.stem}")


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_error_case_is_located(path: Path, monkeypatch: pytest.MonkeyPatch):
    """Every diagnostic about a non-empty file points into it, at a line that exists."""
    monkeypatch.chdir(path.parent)
    lines = path.read_bytes().decode("utf-8", errors="replace").splitlines()
    with pytest.raises(CompileError) as info:
        filename, source = read_source(path.name)
        check(parse(source, filename), {})
    for d in info.value.diagnostics:
        if not lines:
            continue
        assert 1 <= d.span.line <= len(lines), f"{d.message!r} is not located in the file"
        assert 1 <= d.span.col <= len(lines[d.span.line - 1]) + 1, (
            f"{d.message!r} points past the end of its line")
