"""Generated programs (ptc.fuzz) against the interpreter, emulated on every target:

  the corpus   every reduced reproducer in tests/generated/ (written by `make fuzz`) on
               sm80, sm90, gfx90a and gfx942: it must build and match the interpreter;
  a bounded    a fixed set of seeds, generated and checked afresh (`make fuzz` runs the
  run          same for longer, from any seed).

A reproducer of a bug not fixed yet is listed in OPEN with what goes wrong; the marks are
strict, so a fix turns its test red until the entry goes.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from ptc.fuzz.check import TARGETS, check_program, load_reproducer
from ptc.fuzz.generate import generate

CORPUS = Path(__file__).resolve().parent / "generated"
FILES = sorted(p.name for p in CORPUS.glob("*.pt"))
pytestmark = pytest.mark.cxx

# (file, target) -> what goes wrong today
OPEN: dict[tuple[str, str], str] = {}
# seeds checked in every run (about 15 s each on 2 cores)
SEEDS = ()
OPEN_SEEDS: dict[int, str] = {}


def test_the_corpus_is_not_empty_and_every_file_says_its_shapes():
    assert FILES
    for name in FILES:
        load_reproducer(CORPUS / name)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", FILES)
def test_reproducer_matches_the_interpreter(name, target, request):
    if (name, target) in OPEN:
        request.applymarker(pytest.mark.xfail(strict=True, reason=OPEN[(name, target)]))
    source = load_reproducer(CORPUS / name)
    findings = check_program(source, (target,))
    assert not findings, findings[0].line()


@pytest.mark.parametrize("seed", SEEDS)
def test_generated_program_matches_the_interpreter(seed, request):
    if seed in OPEN_SEEDS:
        request.applymarker(pytest.mark.xfail(strict=True, reason=OPEN_SEEDS[seed]))
    program = generate(seed)
    findings = check_program(program, seed=seed)
    assert not findings, "\n".join(f.line() for f in findings) + "\n" + program.text


def test_the_generator_is_deterministic_and_checks():
    from ptc.fuzz.check import typed_kernel
    for seed in range(40):
        program = generate(seed)
        assert generate(seed).text == program.text
        typed_kernel(program)         # every generated program checks
