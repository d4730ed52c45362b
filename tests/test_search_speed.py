"""What makes the schedule search fast changes none of its results (issue 19, part 3).

The search lowers every plan it ranks; the lowering memoizes layout assignment
(ptc.lower.assign), picks each mma's tiling by branch and bound (ptc.lower.tiling_choice)
and counts bank conflicts in numpy (ptc.lower.swizzle.word_conflicts). Each is checked here
against what it replaces, on real searches: the memoized layouts against a fresh solve,
the chosen tilings against trying every combination, the vectorized count against the
per-lane one. No test here times anything: the speed is measured by hand (the commit
messages and benchmarks say how), the behaviour is what must not change.

A W4A16 GEMM (tests/kernels/w4a16.pt: eight mmas, one per nibble, unpacked with `//` and
`%`) used to take (tilings per mma)^8 layout assignments per lowering; it plans on every
target here, and its emulated sm80 kernel matches the interpreter on negative packed words
(where floor division and C's truncating division differ).
"""
from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest

import ptc.lower.lowering as lowering_module
from ptc.devices import get_device
from ptc.driver import build_options, check_file, grids, problem_dims
from ptc.lower.assign import assign_layouts, solve_layouts
from ptc.lower.atoms import all_atoms, tilings
from ptc.lower.swizzle import bank_conflicts, word_conflicts
from ptc.lower.tiling_choice import NOTHING, score, tiling_cost
from ptc.sched.search import search

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"
W4A16 = ROOT / "tests" / "kernels" / "w4a16.pt"
TARGETS = ("sm80", "sm90", "gfx90a", "gfx942")


def searched(path: Path, target: str, shapes: dict | None = None) -> list:
    """The search of every grid of the kernel of `path`, as `ptc compile` runs it (not
    from the driver's stage cache: the lowering must run)."""
    kernel = check_file(path, shapes).kernels[0]
    device = get_device(target)
    return [search(part, device, problem_dims(part, shapes), **build_options(device))
            for part in grids(kernel)]


def as_compared(solution) -> tuple:
    """A Solution with its layouts' notes, which Layout equality leaves out."""
    def noted(layouts):
        return tuple((k, v, v.note) for k, v in layouts.items())
    return (noted(solution.layouts), solution.shared, solution.conversions,
            solution.defaults, noted(solution.reduce_sources))


# ---- layout assignment: the memo returns what a fresh solve gives ----------------------------
@pytest.mark.parametrize("name, target", [("flash_attn", "sm90"), ("flash_attn", "gfx942"),
                                          ("gemm_chain", "sm80"),
                                          ("mamba2_chunk_scan", "gfx90a"),
                                          ("matmul_sum", "sm90")])
def test_memoized_layout_assignment_is_a_fresh_solve_for_every_lowering(name, target,
                                                                       monkeypatch):
    asked = []

    def checked(problem):
        memoized = assign_layouts(problem)
        assert as_compared(memoized) == as_compared(solve_layouts(problem))
        asked.append(problem)
        return memoized

    monkeypatch.setattr(lowering_module, "assign_layouts", checked)
    searched(SAMPLES / f"{name}.pt", target)
    assert len(asked) > len(set(asked)), "the search asks for some layouts more than once"


# ---- tilings: branch and bound finds what trying every combination finds ---------------------
def exhaustive(costs, layout_cost) -> tuple[int, ...] | None:
    """The first combination in product order with the least score, trying them all."""
    if not costs or any(not c for c in costs):
        return None
    best = None
    for picks in itertools.product(*(range(len(c)) for c in costs)):
        own = NOTHING
        for i, p in enumerate(picks):
            own = own.plus(costs[i][p])
        s = score(layout_cost(picks), own)
        if best is None or s < best[0]:
            best = (s, picks)
    return best[1]


THREE_NIBBLES = """
kernel w4a16_3(A: f16[P, M, KP], W: i32[KP, N]) -> (C: f32[M, N]) {
  dims M = 1024, N = 1024, KP = 256, P = 3
  tile BM in [64, 128], BN in [64, 128], BK in [32, 64]
  parallel i: BM of M, j: BN of N {
    acc = zeros(f32[BM, BN])
    for k: BK of KP {
      w = load(W[k, j])
      acc += load(A[0, i, k]) @ ((w % 16 - 8) as f16)
      acc += load(A[1, i, k]) @ ((w // 16 % 16 - 8) as f16)
      acc += load(A[2, i, k]) @ ((w // 256 % 16 - 8) as f16)
    }
    store(C[i, j], acc)
  }
}
"""


@pytest.mark.parametrize("name, target", [("flash_attn", "sm80"), ("flash_attn", "gfx90a"),
                                          ("gemm_chain", "gfx942"), ("gemm_chain", "sm90"),
                                          ("three_nibbles", "sm80"),
                                          ("three_nibbles", "gfx942")])
def test_chosen_tilings_are_the_exhaustive_searchs(name, target, monkeypatch, tmp_path):
    if name == "three_nibbles":
        path = tmp_path / "w4a16_3.pt"
        path.write_text(THREE_NIBBLES)
    else:
        path = SAMPLES / f"{name}.pt"
    chosen = lowering_module.cheapest_tilings
    combinations = []

    def checked(costs, layout_cost):
        picks = chosen(costs, layout_cost)
        assert picks == exhaustive(costs, layout_cost)
        combinations.append(math.prod(len(c) for c in costs))
        return picks

    monkeypatch.setattr(lowering_module, "cheapest_tilings", checked)
    searched(path, target)
    assert max(combinations) > 1, "some lowering had tilings to choose from"


def test_a_tilings_own_cost_is_the_float_formula_it_replaces():
    """loads and instructions per multiply-add, as the lowering scored them in floats."""
    for atom in all_atoms():
        for m, n, k in itertools.product((16, 32, 64, 128), (8, 16, 32, 64, 128), (16, 32, 64)):
            for warps in (4, 8):
                for t in tilings(atom, m, n, k, warps) + tilings(atom, m, n, k, warps, True):
                    per_mac = 2048 / (t.atom.m * t.atom.n * t.atom.k)
                    cost = tiling_cost(t)
                    assert float(cost.loads) == (t.mi + t.ni / 2) / (t.mi * t.ni) * per_mac
                    assert float(cost.instructions) == per_mac
                    assert cost.registers == t.mi * t.ni * 4


# ---- bank conflicts, all accesses at once ------------------------------------------------------
@pytest.mark.parametrize("lanes, vector", [(32, 1), (32, 2), (32, 4), (64, 1), (64, 2),
                                           (64, 4)])
def test_word_conflicts_counts_what_bank_conflicts_counts(lanes, vector):
    rng = np.random.default_rng(lanes * 10 + vector)
    for _ in range(200):
        words = rng.integers(0, rng.choice([64, 600, 5000]), size=(lanes, rng.integers(1, 9)))
        want = sum(bank_conflicts([4 * int(w) for w in words[:, a]], 4 * vector)
                   for a in range(words.shape[1]))
        assert word_conflicts(words, vector) == want


# ---- the W4A16 kernel ----------------------------------------------------------------------------
@pytest.mark.parametrize("target", TARGETS)
def test_w4a16_plans_on_every_target(target):
    (result,) = searched(W4A16, target)
    mmas = [t for t in result.best.graph.tasks if t.kind == "mma"]
    assert len(mmas) == 8
    assert result.best.plan.device == target


@pytest.mark.cxx
def test_w4a16_emulated_on_sm80_matches_the_interpreter_on_negative_words():
    from ptc.interp import run_kernel
    from ptc.render.emulate import build_emulated
    from ptc.runtime import prepare

    shapes = dict(P=8, M=100, N=72, KP=40)
    rng = np.random.default_rng(19)
    inputs = {"A": (rng.standard_normal((8, 100, 40)) * 0.1).astype(np.float16),
              "W": rng.integers(-2 ** 31, 2 ** 31, size=(40, 72)).astype(np.int32),
              "S": (rng.random(72) + 0.5).astype(np.float16)}
    assert (inputs["W"] < 0).mean() > 0.4
    kernel = check_file(W4A16, shapes).kernels[0]
    want = run_kernel(kernel, inputs, shapes=shapes)["C"].astype(np.float64)
    emulated = build_emulated(prepare(W4A16, "sm80", shapes=shapes).source)
    got = emulated(kernel, inputs, shapes)["C"].astype(np.float64)
    # truncating division would unpack a negative word's nibbles differently: far off
    assert np.linalg.norm(got - want) <= 1e-3 * np.linalg.norm(want)


@pytest.mark.parametrize("name,target", [("gemm", "sm90"), ("gemm_chain", "gfx942"),
                                         ("conv2d", "sm80"), ("mamba2_chunk_state", "gfx90a")])
def test_a_search_at_other_dims_reusing_the_plans_made_ranks_what_a_fresh_one_does(name,
                                                                                   target):
    """Making a candidate's plan (construct, verify, lower) reads no dims: the driver keeps
    what one search made for the next search of the kernel (ptc.driver.candidates_made),
    which only times them again at its dims."""
    from test_simulate import EDGE
    kernel = check_file(SAMPLES / f"{name}.pt").kernels[0]
    device = get_device(target)
    options = build_options(device)

    def run(shapes, made):
        return search(kernel, device, problem_dims(kernel, shapes), made=made, **options)

    made: dict = {}
    run(None, made)
    before = set(made)
    reused = run(EDGE[name], made)
    fresh = run(EDGE[name], {})
    assert before & {(c.tiles, c.choice) for c in fresh.ranked}, "nothing was reused"
    assert [(c.tiles, c.choice, c.plan) for c in reused.ranked] == \
        [(c.tiles, c.choice, c.plan) for c in fresh.ranked]
    assert reused.rejected == fresh.rejected
