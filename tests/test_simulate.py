"""The plan simulator: a safe plan, executed in NumPy in the order its barriers allow with
real ring buffers, reproduces the reference interpreter bit for bit; a plan with a missing
wait (which the verifier rejects) gives wrong numbers -- the simulator sees ordering bugs.
"""
from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

import formulas as F
from ptc.devices import get_device
from ptc.driver import check_file
from ptc.interp import run_kernel
from ptc.sched.construct import Choice, Unfit, construct
from ptc.sched.plan import LoopBlock
from ptc.sched.simulate import SimulationError, simulate, simulate_and_compare
from ptc.sched.verify import problems
from ptc.stask import build_graphs, propagate

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
TARGETS = ["sm80", "sm90", "gfx90a", "gfx942"]
ORDERS = ["producer_first", "consumer_first"]
CHOICES = [Choice("warp_specialized", 2, 1), Choice("multistage", 3, warps=4),
           Choice("multistage", 2, warps=4), Choice("sequential", 1, warps=4),
           Choice("sequential", 1, warps=8)]


def read_smoke() -> dict[str, tuple[dict, dict]]:
    def pairs(text):
        return {k: int(v) for k, v in (item.split("=") for item in text.split(",") if item)}

    out = {}
    for line in (SAMPLES / "SMOKE").read_text().splitlines():
        if line.strip():
            file, shapes, tiles = (line.split() + [""])[:3]     # a sample may have no tiles
            out[Path(file).stem] = (pairs(shapes), pairs(tiles))
    return out


SMOKE = read_smoke()
# a second, smaller shape per sample with ragged edge tiles (from tests/test_samples.py)
EDGE = {
    "gemm": dict(M=7, N=200, K=33),
    "matmul_sum": dict(M=9, N=300, K=40),
    "flash_attn": dict(B=2, H=1, S=64, T=130, D=32),
    "flash_attn_causal": dict(B=2, H=1, S=130, D=32),
    "mamba2_chunk_state": dict(B=1, NC=2, L=50, H=4, G=2, P=20, N=24),
    "mamba2_chunk_scan": dict(B=1, NC=2, L=50, H=4, G=2, P=20, N=24),
    "gemm_chain": dict(M=64, N=300, K=16, L=128),
    "rmsnorm": dict(M=7, N=64),
    "softmax": dict(M=33, N=1000),
    "w8a8_gemm": dict(M=7, N=200, K=40),
    "w4a16_gemm": dict(M=7, N=200, P=8, KP=128, KG=1),
    "fp8_gemm": dict(M=7, N=200, K=40),
    "fp8_blockscaled_gemm": dict(M=7, N=200, K=40, KB=1, NB=2),
    "fp8_flash_attn": dict(B=2, H=1, S=64, T=130, D=32),
    "causal_conv1d": dict(B=1, L=37, C=40, W=4),
    "conv2d": dict(N=1, H=7, W=13, C=20, CO=36, R=3, S=3, OH=5, OW=11),          # dilation 2
    "conv2d_stride2": dict(N=1, H=8, W=15, C=20, CO=36, R=3, S=3, OH=3, OW=7),   # dilation 2
    "depthwise_conv2d": dict(N=1, H=7, W=13, C=20, R=3, S=3, OH=5, OW=11),       # dilation 2
    "moe_gemm": dict(T=37, K=40, N=72, E=3, C=45, R=74),
    "paged_decode": dict(B=2, HK=1, G=8, D=64, NP=9, PAGE=16, MP=4),
}


@lru_cache(maxsize=None)
def setup(name, shapes: tuple, tiles: tuple):
    shapes, tiles = dict(shapes), dict(tiles)
    kernel = check_file(SAMPLES / f"{name}.pt", shapes).kernels[0]
    (g,) = build_graphs(kernel)
    g = propagate(g, tiles)
    inputs = F.make_inputs(name, shapes, np.random.default_rng(1))
    return kernel, g, inputs


def good_plan(g, device, choices=CHOICES):
    for choice in choices:
        try:
            plan = construct(g, device, choice)
        except Unfit:
            continue
        assert problems(plan, g, device) == []
        return plan
    pytest.fail(f"no plan for {g.kernel.name} on {device.name}")


def assert_bitwise(plan, kernel, g, inputs, shapes, tiles, order):
    got = simulate(plan, g, kernel, inputs, shapes, tiles, order)
    ref = run_kernel(kernel, inputs, shapes=shapes, tiles=tiles)
    for name in ref:
        assert got[name].dtype == ref[name].dtype
        assert np.array_equal(got[name], ref[name], equal_nan=True), (name, order)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", sorted(SMOKE))
def test_a_safe_plan_reproduces_the_interpreter_bitwise(name, target):
    device = get_device(target)
    for shapes in (SMOKE[name][0], EDGE[name]):
        tiles = SMOKE[name][1]
        kernel, g, inputs = setup(name, tuple(shapes.items()), tuple(tiles.items()))
        plan = good_plan(g, device)
        for order in ORDERS:
            assert_bitwise(plan, kernel, g, inputs, shapes, tiles, order)


@pytest.mark.parametrize("name, tiles", [
    ("gemm", dict(BM=128, BN=64, BK=32)),
    ("matmul_sum", dict(BM=128, BN=64, BK=32)),
    ("flash_attn_causal", dict(BM=128, BN=64)),
])
def test_two_consumer_warpgroups_each_store_their_rows(name, tiles):
    shapes = EDGE[name] if name != "flash_attn_causal" else dict(B=1, H=1, S=300, D=32)
    kernel, g, inputs = setup(name, tuple(shapes.items()), tuple(tiles.items()))
    device = get_device("sm90")
    plan = construct(g, device, Choice("warp_specialized", 3, 2))
    assert problems(plan, g, device) == []
    assert next(r for r in plan.roles if r.name == "consumer").instances == 2
    for order in ORDERS:
        assert_bitwise(plan, kernel, g, inputs, shapes, tiles, order)


@pytest.mark.parametrize("target", ["sm80", "sm90"])
def test_every_style_of_gemm_reproduces_the_interpreter(target):
    shapes, tiles = dict(M=70, N=72, K=300), dict(BM=64, BN=64, BK=32)   # 10 k-steps
    kernel, g, inputs = setup("gemm", tuple(shapes.items()), tuple(tiles.items()))
    device = get_device(target)
    ran = 0
    for choice in [Choice("warp_specialized", s, 1) for s in (2, 3, 4)] + \
                  [Choice("multistage", s, warps=w) for s in (2, 3, 4) for w in (4, 8)] + \
                  [Choice("sequential", 1, warps=4)]:
        try:
            plan = construct(g, device, choice)
        except Unfit:
            continue
        assert problems(plan, g, device) == [], choice
        for order in ORDERS:
            assert simulate_and_compare(plan, g, kernel, inputs, shapes, tiles, order) == 0.0
        ran += 1
    assert ran >= 4


# ---- broken plans: the simulator sees the ordering bug ---------------------------------
def edit_steps(plan, role, fn):
    def walk(items):
        return tuple(replace(it, body=walk(it.body)) if isinstance(it, LoopBlock) else fn(it)
                     for it in items)

    return replace(plan, roles=tuple(replace(r, body=walk(r.body)) if r.name == role else r
                                     for r in plan.roles))


def drop_waits(plan, role, prefix):
    return edit_steps(plan, role, lambda s: replace(
        s, waits=tuple(w for w in s.waits if not w.startswith(prefix))))


BROKEN_CASES = {
    # name: (shapes with several more loop trips than stages, tiles)
    "gemm": (dict(M=100, N=72, K=200), dict(BM=64, BN=64, BK=32)),
    "flash_attn": (dict(B=1, H=1, S=70, T=300, D=64), dict(BM=64, BN=64)),
}


def is_wrong(err: float) -> bool:
    return not np.isfinite(err) or err > 0.1


@pytest.mark.parametrize("name", sorted(BROKEN_CASES))
def test_a_missing_empty_wait_gives_wrong_numbers(name):
    shapes, tiles = BROKEN_CASES[name]
    kernel, g, inputs = setup(name, tuple(shapes.items()), tuple(tiles.items()))
    device = get_device("sm90")
    plan = construct(g, device, Choice("warp_specialized", 2, 1))
    assert simulate_and_compare(plan, g, kernel, inputs, shapes, tiles, "producer_first") == 0.0
    broken = drop_waits(plan, "producer", "empty:")
    assert any("ring slot" in m for m in problems(broken, g, device))
    err = simulate_and_compare(broken, g, kernel, inputs, shapes, tiles, "producer_first")
    assert is_wrong(err), err


@pytest.mark.parametrize("name", sorted(BROKEN_CASES))
def test_a_missing_full_wait_gives_wrong_numbers(name):
    shapes, tiles = BROKEN_CASES[name]
    kernel, g, inputs = setup(name, tuple(shapes.items()), tuple(tiles.items()))
    device = get_device("sm90")
    plan = construct(g, device, Choice("warp_specialized", 2, 1))
    assert simulate_and_compare(plan, g, kernel, inputs, shapes, tiles, "consumer_first") == 0.0
    broken = drop_waits(plan, "consumer", "full:")
    assert any("before its producer completes" in m for m in problems(broken, g, device))
    err = simulate_and_compare(broken, g, kernel, inputs, shapes, tiles, "consumer_first")
    assert is_wrong(err), err


def test_a_missing_full_wait_in_a_single_role_pipeline_gives_wrong_numbers():
    shapes, tiles = BROKEN_CASES["gemm"]
    kernel, g, inputs = setup("gemm", tuple(shapes.items()), tuple(tiles.items()))
    device = get_device("sm80")
    plan = construct(g, device, Choice("multistage", 3, warps=4))
    broken = drop_waits(plan, "main", "full:")
    assert problems(broken, g, device)
    assert is_wrong(simulate_and_compare(broken, g, kernel, inputs, shapes, tiles,
                                         "consumer_first"))


def test_wgmma_reading_a_slot_must_release_it_in_a_single_role_pipeline():
    # on sm90 the mma is async (wgmma reads shared memory after it is issued): the same
    # role's next loads must wait for it (empty barrier), else they overwrite its operands
    shapes, tiles = BROKEN_CASES["gemm"]
    kernel, g, inputs = setup("gemm", tuple(shapes.items()), tuple(tiles.items()))
    device = get_device("sm90")
    plan = construct(g, device, Choice("multistage", 3, warps=4))
    assert any(b.kind == "empty" for b in plan.barriers)
    assert simulate_and_compare(plan, g, kernel, inputs, shapes, tiles, "producer_first") == 0.0
    broken = drop_waits(plan, "main", "empty:")
    assert any("ring slot" in m for m in problems(broken, g, device))
    assert is_wrong(simulate_and_compare(broken, g, kernel, inputs, shapes, tiles,
                                         "producer_first"))


def test_a_deadlocked_plan_cannot_be_simulated():
    shapes, tiles = BROKEN_CASES["gemm"]
    kernel, g, inputs = setup("gemm", tuple(shapes.items()), tuple(tiles.items()))
    plan = construct(g, get_device("sm90"), Choice("warp_specialized", 2, 1))
    broken = edit_steps(plan, "consumer", lambda s: replace(s, arrives=()))
    with pytest.raises(SimulationError, match="deadlock: wait on empty:A_smem by load_A"):
        simulate(broken, g, kernel, inputs, shapes, tiles)


# ---- the verifier and the simulator agree ------------------------------------------------
MUTANT_CASES = [
    ("gemm", dict(M=100, N=72, K=200), dict(BM=64, BN=64, BK=32)),
    ("gemm", dict(M=130, N=72, K=200), dict(BM=128, BN=64, BK=32)),
    ("flash_attn_causal", dict(B=1, H=1, S=300, D=32), dict(BM=128, BN=64)),
    ("mamba2_chunk_scan", dict(B=1, NC=1, L=128, H=1, G=1, P=32, N=32),
     dict(BM=64, BP=32, BS=32)),
    ("gemm_chain", dict(M=64, N=200, K=100, L=130), dict(BM=64, BL=64, BN=64, BK=32)),
]
MUTANT_CHOICES = [Choice("warp_specialized", 2, 1), Choice("warp_specialized", 3, 2),
                  Choice("multistage", 2, warps=4), Choice("multistage", 3, warps=4),
                  Choice("sequential", 1, warps=4)]


def _steps_with_paths(items, path=()):
    for i, it in enumerate(items):
        if isinstance(it, LoopBlock):
            yield from _steps_with_paths(it.body, path + (i,))
        else:
            yield path + (i,), it


def _put(items, path, new):
    items = list(items)
    if len(path) == 1:
        items[path[0]] = new
    else:
        items[path[0]] = replace(items[path[0]], body=_put(items[path[0]].body, path[1:], new))
    return tuple(items)


def mutant(plan, rng):
    """The plan with one random change to its synchronisation, or None."""
    kind = rng.choice(["drop_wait", "drop_arrive", "arrivals", "initial", "stages", "offset"])
    ri = rng.randrange(len(plan.roles))
    role = plan.roles[ri]
    path, step = rng.choice(list(_steps_with_paths(role.body)))

    def with_step(new):
        body = _put(role.body, path, new)
        return replace(plan, roles=plan.roles[:ri] + (replace(role, body=body),)
                       + plan.roles[ri + 1:])

    if kind == "drop_wait" and step.waits:
        w = rng.choice(step.waits)
        return with_step(replace(step, waits=tuple(x for x in step.waits if x != w)))
    if kind == "drop_arrive" and step.arrives:
        a = rng.choice(step.arrives)
        return with_step(replace(step, arrives=tuple(x for x in step.arrives if x != a)))
    if kind == "offset" and len(path) > 1:
        return with_step(replace(step, offset=step.offset + 1))
    if kind in ("arrivals", "initial") and plan.barriers:
        i = rng.randrange(len(plan.barriers))
        b = plan.barriers[i]
        b = (replace(b, arrivals=b.arrivals + 1) if kind == "arrivals"
             else replace(b, initial=max(0, b.initial + rng.choice([-1, 1]))))
        return replace(plan, barriers=plan.barriers[:i] + (b,) + plan.barriers[i + 1:])
    if kind == "stages" and plan.buffers:
        i = rng.randrange(len(plan.buffers))
        b = plan.buffers[i]
        if b.stages > 1:
            return replace(plan, buffers=plan.buffers[:i] + (replace(b, stages=b.stages - 1),)
                           + plan.buffers[i + 1:])
    return None


def test_the_verifier_and_the_simulator_agree_on_random_mutants():
    """A mutant the verifier accepts reproduces the interpreter in both orders; one it
    rejects deadlocks or gives wrong numbers in at least one order (the shapes run every
    loop more times than any ring has stages)."""
    import random
    rng = random.Random(5)
    flagged = 0
    for _ in range(150):
        name, shapes, tiles = rng.choice(MUTANT_CASES)
        kernel, g, inputs = setup(name, tuple(shapes.items()), tuple(tiles.items()))
        device = get_device(rng.choice(["sm80", "sm90", "gfx942"]))
        try:
            plan = construct(g, device, rng.choice(MUTANT_CHOICES))
        except Unfit:
            continue
        broken = mutant(plan, rng)
        if broken is None:
            continue
        issues = problems(broken, g, device)
        errors = []
        for order in ORDERS:
            try:
                errors.append(simulate_and_compare(broken, g, kernel, inputs, shapes, tiles,
                                                   order))
            except SimulationError:
                errors.append(float("inf"))
        if issues:
            flagged += 1
            assert any(e != 0.0 for e in errors), (name, device.name, issues)
        else:
            assert errors == [0.0, 0.0], (name, device.name, broken)
    assert flagged >= 30
