"""Generated programs (ptc.fuzz) against the interpreter, emulated on every target:

  the corpus   every reduced reproducer in tests/generated/ (written by `make fuzz`) on
               sm80, sm90, gfx90a and gfx942: it must build and match the interpreter;
  a bounded    a fixed set of seeds, generated and checked afresh (`make fuzz` runs the
  run          same for longer, from any seed).

A reproducer of a bug not fixed yet is listed in OPEN with what goes wrong; the marks are
strict, so a fix turns its test red until the entry goes.
"""
from __future__ import annotations

import functools
from pathlib import Path

import pytest

from conftest import Builds, in_groups, selected_groups
from ptc.fuzz.check import TARGETS, Check, check_program, check_programs, load_reproducer
from ptc.fuzz.generate import generate

CORPUS = Path(__file__).resolve().parent / "generated"
FILES = sorted(p.name for p in CORPUS.glob("*.pt"))
pytestmark = pytest.mark.cxx

# (file, target) -> what goes wrong today
OPEN: dict[tuple[str, str], str] = {}
# seeds checked in every run: two of each skeleton (two grids, rows, elementwise, loop,
# chain, quant: 8-bit products, indexed: indices read from tensors, rank3: tiles of rank
# 3), a few seconds of compiles each when the build cache is cold
SEEDS = (0, 24, 1, 18, 2, 14, 3, 4, 7, 16, 9, 11, 17, 29, 5, 6)
OPEN_SEEDS: dict[int, str] = {}


def test_the_corpus_is_not_empty_and_every_file_says_its_shapes():
    assert FILES
    for name in FILES:
        load_reproducer(CORPUS / name)


UNIT = 12     # checks whose kernels one worker builds together (conftest.in_groups)
REPRODUCERS = [(name, target) for name in FILES for target in TARGETS]


def findings_of(make_check, keys) -> dict:
    """{key: its findings (or the exception that stopped its check)}, the kernels of every
    key's check compiled together (ptc.fuzz.check.check_programs)."""
    out, checks = {}, {}
    for key in keys:
        try:
            checks[key] = make_check(*key)
        except Exception as exc:   # noqa: BLE001 -- raised again by its own test
            out[key] = exc
    out.update(zip(checks, check_programs(list(checks.values()))))
    return out


def reproducer_check(name: str, target: str) -> Check:
    return Check(load_reproducer(CORPUS / name), (target,))


def seed_check(seed: int) -> Check:
    return Check(generate(seed), TARGETS, seed)


def grouped_findings(request, test, key, make_check):
    groups = selected_groups(request, test, key)
    return Builds(functools.partial(findings_of, make_check), groups, request)


@pytest.fixture(scope="module")
def reproducer_findings(request):
    made = grouped_findings(request, test_reproducer_matches_the_interpreter,
                            lambda p: (p["name"], p["target"]), reproducer_check)
    yield made
    made.close()


@pytest.fixture(scope="module")
def seed_findings(request):
    made = grouped_findings(request, test_generated_program_matches_the_interpreter,
                            lambda p: (p["seed"],), seed_check)
    yield made
    made.close()


def found(findings):
    if isinstance(findings, Exception):
        raise findings
    return findings


@pytest.mark.parametrize("name,target", in_groups(REPRODUCERS, UNIT, "generated"))
def test_reproducer_matches_the_interpreter(name, target, request, reproducer_findings):
    if (name, target) in OPEN:
        request.applymarker(pytest.mark.xfail(strict=True, reason=OPEN[(name, target)]))
    findings = found(reproducer_findings[(name, target)])
    assert not findings, findings[0].line()


@pytest.mark.parametrize("seed", in_groups([(s,) for s in SEEDS], UNIT // len(TARGETS),
                                           "generated-seeds"))
def test_generated_program_matches_the_interpreter(seed, request, seed_findings):
    if seed in OPEN_SEEDS:
        request.applymarker(pytest.mark.xfail(strict=True, reason=OPEN_SEEDS[seed]))
    findings = found(seed_findings[(seed,)])
    assert not findings, "\n".join(f.line() for f in findings) + "\n" + generate(seed).text


def test_a_batch_of_checks_finds_what_each_check_finds_alone():
    """check_programs compiles the kernels of several programs together, yet each check's
    findings are its own, in order: a program that no gfx942 plan fits (the capacity
    refusal below) is found in its check only, and the programs around it pass."""
    import random
    from ptc.fuzz.generate import loop_grid
    over = loop_grid(random.Random(102723 * 1000), 102723)
    checks = [Check(generate(0), ("sm80", "gfx90a"), 0), Check(over, ("gfx942",), 102723),
              Check(generate(1), ("gfx942", "sm90"), 1)]
    batch = check_programs(checks)
    assert [[f.kind for f in findings] for findings in batch] == [[], ["build"], []]
    assert batch == [check_program(c.program, c.targets, seed=c.seed) for c in checks]


def test_the_generator_is_deterministic_and_checks():
    from ptc.fuzz.check import typed_kernel
    for seed in range(40):
        program = generate(seed)
        assert generate(seed).text == program.text
        typed_kernel(program)         # every generated program checks


def test_the_interpreter_runs_at_the_tiles_the_kernel_was_built_with():
    """A pad that enters a reduction makes the result depend on the tile sizes; unpinned,
    the search picks BN = 16 where the interpreter took the first candidate, 32: every
    row sum differed by 16 pads (seeds 1020 and 1038 of the first long run)."""
    from ptc.fuzz.check import Source, pinned_tiles, typed_kernel
    program = Source("pad_rowsum", """
kernel pad_rowsum(X: f32[M, N]) -> (R: f32[M]) {
  tile BM = 1, BN in [32, 16]
  parallel i: BM of M, j: BN of N {
    atomic_add(R[i], rowsum(load(X[i, j], pad=-2.0)))
  }
}
""", (("M", 25), ("N", 45)))
    seed = 1
    assert pinned_tiles(program, typed_kernel(program), seed) == {}    # the search picks
    findings = check_program(program, ("sm80",), seed=seed)
    assert not findings, findings[0].line()


def test_a_refusal_over_capacity_is_listed_not_found():
    """Seed 102723 declares BN = 128, BK = 64 for f32 operands computed in registers
    (`a * 0.5`, `abs(b)`): their staging beside the loaded tiles is over gfx942's 64 KiB of
    LDS at every BM, the located error a user gets. The fuzzer lists it for review, at the
    pinned tiles and at the search's; without `refusals` it stays a finding."""
    import random
    from ptc.fuzz.check import pinned_tiles, typed_kernel
    from ptc.fuzz.generate import loop_grid
    # the loop program generate(102723) gave before the indexed skeleton was added
    program = loop_grid(random.Random(102723 * 1000), 102723)
    pinned = {"BM": 128, "BN": 128, "BK": 64}
    assert pinned_tiles(program, typed_kernel(program), 102723) == pinned
    refusals: list = []
    assert check_program(program, ("gfx942",), seed=102723, refusals=refusals) == []
    assert [(r.target, dict(r.tiles)) for r in refusals] == [("gfx942", pinned),
                                                            ("gfx942", {})]
    assert all(r.message.startswith("no plan for kernel gen102723 fits gfx942 (hint: "
                                    "sequential: ") for r in refusals)
    [strict] = check_program(program, ("gfx942",), seed=102723)
    assert strict.kind == "build" and "no plan" in strict.message


def test_the_reducer_keeps_the_property_and_drops_the_rest():
    """ptc.fuzz.reduce's passes, with a property in place of a finding: the program must
    still check and still compute a row minimum of the loaded tile."""
    from ptc.fuzz.check import typed_kernel
    from ptc.fuzz.reduce import greedy, simpler_assignments, smaller_dims, without_lines

    def keeps(candidate) -> bool:
        try:
            typed_kernel(candidate)
        except ValueError:
            return False
        return any("rowmin(x1)" in line for _, body, _ in candidate.grids for line in body)

    program = generate(66)
    assert keeps(program)
    small = program
    for candidates in (without_lines, simpler_assignments, without_lines, smaller_dims):
        small = greedy(small, candidates, keeps)
    assert keeps(small)
    lines = [line for _, body, _ in small.grids for line in body]
    before = [line for _, body, _ in program.grids for line in body]
    assert len(lines) < len(before) and len(lines) <= 5, lines
    assert all(v == 1 for v in small.shape_dict.values())


def test_the_fuzz_command_counts_what_it_checked_and_leaves_no_build_folder(
        tmp_path, monkeypatch, capsys):
    import tempfile

    from ptc.fuzz.__main__ import main
    from ptc.render.emulate import cache_dir
    from ptc.grammar import parse
    # the kernels in a new folder; the precompiled prelude and runtime from the shared cache
    monkeypatch.setenv("PTC_EMULATE_RUNTIME_CACHE", str(cache_dir()))
    parse("")         # lark's tables cached in the real temp folder (when run alone)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    # two workers: each cleans its own build folder after a program (one shared folder let
    # a worker remove the kernel the other had just built: OSError at its dlopen)
    status = main(["--count", "2", "--seed", "2", "--jobs", "2", "--targets", "sm80",
                   "--corpus", ""])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "2 programs (elementwise 1, loop 1) x 1 targets = 2 kernels, seeds 2..3" in out
    assert "no findings" in out
    assert list(tmp_path.iterdir()) == []
