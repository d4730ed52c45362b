"""The plan verifier: every plan the constructor makes is proven safe, and hand-broken plans
(one per class of bug) are rejected with messages that name the tasks, buffers and barriers.
"""
from __future__ import annotations

import time
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

import pytest

from ptc.devices import get_device
from ptc.diagnostics import CompileError
from ptc.driver import check_file
from ptc.sched.construct import Choice, Unfit, construct
from ptc.sched.plan import Barrier, LoopBlock, Step
from ptc.sched.verify import problems, verify
from ptc.stask import build_graphs, propagate

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
NAMES = sorted(p.stem for p in SAMPLES.glob("*.pt"))
TARGETS = ["sm80", "sm90", "gfx90a", "gfx942"]
CHOICES = [Choice("warp_specialized", 2, 1), Choice("warp_specialized", 3, 2),
           Choice("warp_specialized", 4, 1), Choice("multistage", 2, warps=4),
           Choice("multistage", 3, warps=8), Choice("multistage", 4, warps=4),
           Choice("sequential", 1, warps=4), Choice("sequential", 1, warps=8)]


@lru_cache(maxsize=None)
def kernel(name):
    return check_file(SAMPLES / f"{name}.pt").kernels[0]


@lru_cache(maxsize=None)
def graph(name, tiles=()):
    (g,) = build_graphs(kernel(name))
    return propagate(g, dict(tiles))


def smallest_tiles(name):
    return tuple((t.name, min(t.choices)) for t in kernel(name).tiles)


# ---- every constructed plan is safe ------------------------------------------------------
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", NAMES)
def test_every_constructed_plan_verifies_clean(name, target):
    device = get_device(target)
    made = 0
    for tiles in ((), smallest_tiles(name)):
        g = graph(name, tiles)
        for choice in CHOICES:
            try:
                plan = construct(g, device, choice)
            except Unfit:
                continue
            made += 1
            assert problems(plan, g, device) == [], (tiles, choice)
            verify(plan, g, device)
    assert made, f"no plan for {name} on {target}"


def test_verify_is_fast():
    """The search verifies every plan it makes: well under 50 ms each."""
    plans = []
    for name in NAMES:
        for target in TARGETS:
            device = get_device(target)
            g = graph(name)
            for choice in CHOICES:
                try:
                    plans.append((construct(g, device, choice), g, device))
                except Unfit:
                    pass
    started = time.perf_counter()
    for plan, g, device in plans:
        problems(plan, g, device)
    per_plan = (time.perf_counter() - started) / len(plans)
    assert per_plan < 0.05, f"{per_plan * 1000:.1f} ms per plan"


def test_a_structure_is_unrolled_once_and_a_change_to_it_again(monkeypatch):
    """The ordering checks read no tile size: a second tile combination of one choice is
    not unrolled again and has the first's problems (none); a plan that drops a wait is
    another structure, checked afresh."""
    from ptc.sched import verify_order
    unrolled = []
    real = verify_order.build_events
    monkeypatch.setattr(verify_order, "build_events",
                        lambda *args: unrolled.append(args[0]) or real(*args))
    monkeypatch.setattr(verify_order, "_CHECKED", {})
    choice = Choice("warp_specialized", 3, 1)
    big, g_big, device = plan_for("gemm", "sm90", choice, (("BM", 128), ("BN", 64), ("BK", 64)))
    small, g_small, _ = plan_for("gemm", "sm90", choice, (("BM", 64), ("BN", 64), ("BK", 32)))
    assert big.tiles != small.tiles and big.buffers != small.buffers
    assert problems(big, g_big, device) == []
    first = len(unrolled)
    assert first == 2                      # every loop once, then 2 * stages + 2 times
    assert problems(small, g_small, device) == [] and len(unrolled) == first
    broken = drop(small, "consumer", "waits", "full:A_smem")
    assert any("before its producer completes" in m for m in problems(broken, g_small, device))
    assert len(unrolled) > first


# ---- broken plans ----------------------------------------------------------------------------
def plan_for(name, target, choice, tiles=()):
    g = graph(name, tiles)
    device = get_device(target)
    return construct(g, device, choice), g, device


def gemm_ws(stages=3, consumers=2):
    return plan_for("gemm", "sm90", Choice("warp_specialized", stages, consumers))


def edit_steps(plan, role, fn):
    """A copy of `plan` whose steps in `role` are mapped by fn(step) -> step | list | None."""
    def walk(items):
        out = []
        for it in items:
            if isinstance(it, LoopBlock):
                out.append(replace(it, body=walk(it.body)))
                continue
            new = fn(it)
            if new is None:
                continue
            out.extend(new if isinstance(new, list) else [new])
        return tuple(out)

    roles = tuple(replace(r, body=walk(r.body)) if r.name == role else r for r in plan.roles)
    return replace(plan, roles=roles)


def drop(plan, role, field, name):
    return edit_steps(plan, role, lambda s: replace(
        s, **{field: tuple(x for x in getattr(s, field) if x != name)}))


def edit_barrier(plan, name, **changes):
    return replace(plan, barriers=tuple(replace(b, **changes) if b.name == name else b
                                        for b in plan.barriers))


def found(plan, g, device, *words):
    """The problems; asserts one of them mentions every word."""
    issues = problems(plan, g, device)
    assert any(all(w in m for w in words) for m in issues), (words, issues)
    with pytest.raises(CompileError) as info:
        verify(plan, g, device)
    assert len(info.value.diagnostics) == len(issues)
    return issues


def test_missing_full_wait_is_a_raw_hazard():
    plan, g, device = gemm_ws()
    broken = drop(plan, "consumer", "waits", "full:A_smem")
    issues = found(broken, g, device, "a read that can run before its producer completes",
                   "mma_acc", "%A", "load_A", "A_smem")
    assert not any("B_smem" in m for m in issues)


def test_missing_full_wait_in_a_single_role_pipeline_is_a_raw_hazard():
    plan, g, device = plan_for("gemm", "sm80", Choice("multistage", 3, warps=8))
    broken = drop(plan, "main", "waits", "full:B_smem")
    found(broken, g, device, "before its producer completes", "mma_acc", "%B", "load_B")


def test_missing_full_wait_before_a_loop_is_a_raw_hazard():
    # flash attention's consumer waits for q once, in a sync step before the n loop
    plan, g, device = plan_for("flash_attn", "sm90", Choice("warp_specialized", 2, 2))
    assert any(s.task == "sync" and "full:q_smem" in s.waits for _, s in plan.steps())
    broken = drop(plan, "consumer", "waits", "full:q_smem")
    found(broken, g, device, "before its producer completes", "mma_s", "load_Q", "q")


def test_missing_empty_wait_lets_a_slot_be_overwritten():
    plan, g, device = gemm_ws()
    broken = drop(plan, "producer", "waits", "empty:A_smem")
    found(broken, g, device, "ring slot 0 of A_smem can be overwritten by load_A (write 3",
          "before mma_acc released it (read of write 0")


def test_a_wait_that_is_implied_by_another_is_not_a_hazard():
    # load_B comes after load_A in the producer's program, and load_A already waits for
    # the consumers to release the same iteration: dropping B's own wait stays safe
    plan, g, device = gemm_ws()
    assert problems(drop(plan, "producer", "waits", "empty:B_smem"), g, device) == []


def test_missing_empty_wait_in_a_single_role_sm90_pipeline():
    # wgmma reads shared memory asynchronously: program order does not free the slot
    plan, g, device = plan_for("gemm", "sm90", Choice("multistage", 3, warps=8))
    broken = drop(plan, "main", "waits", "empty:A_smem")
    found(broken, g, device, "ring slot", "A_smem", "load_A", "mma_acc")


def test_missing_empty_arrive_deadlocks():
    plan, g, device = gemm_ws()
    broken = drop(plan, "consumer", "arrives", "empty:A_smem")
    found(broken, g, device, "deadlock", "wait on empty:A_smem by load_A",
          "no matching arrive", "phase 3")


def test_too_many_arrivals_needed_deadlocks():
    plan, g, device = gemm_ws()
    broken = edit_barrier(plan, "empty:A_smem", arrivals=3)
    found(broken, g, device, "deadlock", "empty:A_smem", "load_A", "no matching arrive")


def test_too_few_arrivals_is_an_over_arrive():
    plan, g, device = gemm_ws()
    broken = edit_barrier(plan, "empty:A_smem", arrivals=1)
    found(broken, g, device, "empty:A_smem gets 2 arrives", "consumer#0", "consumer#1")


def test_a_wait_nobody_arrives_on_deadlocks():
    plan, g, device = gemm_ws()
    plan = replace(plan, barriers=plan.barriers + (Barrier("full:ghost", "A_smem", "full", 1),))
    broken = edit_steps(plan, "consumer", lambda s: replace(s, waits=s.waits + ("full:ghost",))
                        if s.task == "simt_C" else s)
    found(broken, g, device, "deadlock", "wait on full:ghost by simt_C", "no matching arrive")


def test_waiting_twice_per_iteration_is_a_phase_mismatch():
    plan, g, device = gemm_ws()
    broken = edit_steps(plan, "consumer", lambda s: replace(s, waits=s.waits + ("full:A_smem",))
                        if s.task == "mma_acc" else s)
    found(broken, g, device, "deadlock", "wait on full:A_smem by mma_acc",
          "no matching arrive")


def test_waits_in_a_cycle_deadlock():
    # load_A waits for load_B's arrive, but load_B comes after it in the producer's program
    plan, g, device = gemm_ws()
    broken = edit_steps(plan, "producer", lambda s: replace(s, waits=s.waits + ("full:B_smem",))
                        if s.task == "load_A" else s)
    issues = found(broken, g, device, "deadlock", "cycle", "load_A", "load_B")
    assert len(issues) == 1


def test_reordered_steps_read_before_the_write():
    # simt_C moved in front of the k loop: it reads acc before the mma made it
    plan, g, device = gemm_ws()
    consumer = next(r for r in plan.roles if r.name == "consumer")
    simt_c = next(s for s in consumer.body if isinstance(s, Step) and s.task == "simt_C")
    body = (simt_c,) + tuple(i for i in consumer.body if i is not simt_c)
    broken = replace(plan, roles=tuple(replace(r, body=body) if r.name == "consumer" else r
                                       for r in plan.roles))
    found(broken, g, device, "before its producer completes", "simt_C", "acc", "mma_acc")


def test_shared_memory_over_the_limit():
    plan, g, device = gemm_ws()
    broken = replace(plan, buffers=tuple(replace(b, stages=40) for b in plan.buffers))
    found(broken, g, device, "shared memory", "A_smem 40 x 16384", "232448")
    # the launch's bytes against the device; against the buffers' placement it is the
    # lowered kernel's check (tests/test_lowered_verify.py)
    launch = replace(plan, launch=replace(plan.launch, dynamic_smem=300000))
    found(launch, g, device, "launch.dynamic_smem is 300000 bytes, over sm90's 232448")


def test_registers_over_the_limit():
    plan, g, device = gemm_ws()
    per_thread = replace(plan, roles=tuple(replace(r, registers=300) if r.name == "consumer"
                                           else r for r in plan.roles))
    found(per_thread, g, device, "role consumer asks for 300 registers", "255")
    total = replace(plan, roles=tuple(replace(r, registers=248) if r.name == "producer"
                                      else r for r in plan.roles))
    found(total, g, device, "registers: the roles need", "65536")


def test_threads_over_the_limit():
    plan, g, device = gemm_ws()
    broken = replace(plan, roles=tuple(replace(r, instances=8) if r.name == "consumer" else r
                                       for r in plan.roles))
    found(broken, g, device, "threads, over sm90's 1024")


def test_a_task_placed_twice():
    plan, g, device = gemm_ws()
    broken = edit_steps(plan, "consumer", lambda s: [s, s] if s.task == "simt_C" else s)
    found(broken, g, device, "sTask simt_C is placed 2 times")


def test_a_task_not_placed():
    plan, g, device = gemm_ws()
    broken = edit_steps(plan, "consumer", lambda s: None if s.task == "simt_C" else s)
    found(broken, g, device, "sTask simt_C is not placed on any role")


def test_an_mma_on_a_copy_unit():
    plan, g, device = gemm_ws()
    broken = edit_steps(plan, "consumer", lambda s: replace(s, unit="tma")
                        if s.task == "mma_acc" else s)
    found(broken, g, device, "mma_acc is a mma task but runs on tma, a copy unit")


def test_a_unit_the_device_lacks():
    plan, g, device = plan_for("gemm", "sm80", Choice("multistage", 3, warps=8))
    broken = edit_steps(plan, "main", lambda s: replace(s, unit="tma")
                        if s.task == "load_A" else s)
    found(broken, g, device, "load_A", "'tma'", "sm80 does not have")


def test_unknown_barrier_and_buffer_names():
    plan, g, device = gemm_ws()
    broken = edit_steps(plan, "consumer", lambda s: replace(s, waits=("full:nope",))
                        if s.task == "mma_acc" else s)
    found(broken, g, device, "mma_acc", "barrier full:nope", "does not declare")
    broken = edit_barrier(plan, "full:A_smem", buffer="nope")
    found(broken, g, device, "barrier full:A_smem guards buffer nope")


def test_a_step_outside_its_loop():
    plan, g, device = gemm_ws()
    consumer = next(r for r in plan.roles if r.name == "consumer")
    loop = next(i for i in consumer.body if isinstance(i, LoopBlock))
    body = tuple(loop.body) + tuple(i for i in consumer.body if i is not loop)
    broken = replace(plan, roles=tuple(replace(r, body=body) if r.name == "consumer" else r
                                       for r in plan.roles))
    found(broken, g, device, "mma_acc sits in loops (none)", "belongs to k")


def test_a_value_crossing_roles_needs_a_buffer():
    plan, g, device = gemm_ws()
    broken = replace(plan, buffers=tuple(replace(b, consumers=()) if b.name == "A_smem" else b
                                         for b in plan.buffers))
    found(broken, g, device, "mma_acc in consumer reads %A from load_A in producer",
          "no buffer")


def test_a_plan_checked_against_another_device():
    plan, g, _ = gemm_ws()
    issues = problems(plan, g, get_device("gfx942"))
    for words in (["made for sm90, not gfx942"], ["load_A", "'tma'", "gfx942 does not have"],
                  ["barrier full:A_smem synchronises consumer and producer", "no mbarriers"],
                  ["buffer A_smem is in smem", "gfx942"]):
        assert any(all(w in m for w in words) for m in issues), (words, issues)


# ---- a loaded tile read by two async mma's (SwiGLU) -----------------------------------------
SWIGLU = """
kernel swiglu(A: f16[M, K], B1: f16[K, N], B2: f16[K, N]) -> (C: f16[M, N]) {
  tile BM in [128], BN in [128], BK in [64]
  parallel i: BM of M, j: BN of N {
    g = zeros(f32[BM, BN]); u = zeros(f32[BM, BN])
    for k: BK of K {
      a = load(A[i, k])
      g += a @ load(B1[k, j])
      u += a @ load(B2[k, j])
    }
    store(C[i, j], (g / (1.0 + exp(-g)) * u) as f16)
  }
}
"""


def swiglu_graph(tmp_path):
    path = tmp_path / "swiglu.pt"
    path.write_text(SWIGLU)
    (g,) = build_graphs(check_file(path).kernels[0])
    return propagate(g, {"BM": 128, "BN": 128, "BK": 64})


@pytest.mark.parametrize("choice", [Choice("warp_specialized", 3, 2),
                                    Choice("multistage", 3, warps=8)])
def test_a_tile_read_by_two_wgmmas_is_released_after_the_second(tmp_path, choice):
    """On sm90 the tensor core reads shared memory asynchronously (wgmma): the slot of `a`
    is released when mma_u -- its last reader -- completes, which (wgmma groups complete
    in order) also covers mma_g. Releasing it at mma_g instead is caught."""
    g = swiglu_graph(tmp_path)
    device = get_device("sm90")
    plan = construct(g, device, choice)
    assert problems(plan, g, device) == []

    def move(items):      # the empty:a_smem arrive from mma_u to mma_g
        out = []
        for it in items:
            if isinstance(it, LoopBlock):
                out.append(replace(it, body=tuple(move(it.body))))
            elif it.task == "mma_u" and "empty:a_smem" in it.arrives:
                out.append(replace(it, arrives=tuple(a for a in it.arrives
                                                     if a != "empty:a_smem")))
            elif it.task == "mma_g":
                out.append(replace(it, arrives=it.arrives + ("empty:a_smem",)))
            else:
                out.append(it)
        return out
    roles = tuple(replace(r, body=tuple(move(r.body))) for r in plan.roles)
    early = replace(plan, roles=roles)
    assert any("ring slot" in p and "a_smem" in p and "mma_u" in p
               for p in problems(early, g, device)), problems(early, g, device)
