"""The schedule search: plans for every sample and device, in seconds, ranked for reasons."""
from pathlib import Path

import pytest

from ptc.devices import get_device
from ptc.driver import build_options, check_file, schedule
from ptc.interp import bind_dims
from ptc.sched.construct import Choice, Unfit, construct
from ptc.sched.cost import estimate
from ptc.sched.plan import LoopBlock, from_json, to_json, walk_steps
from ptc.sched.results import dependences
from ptc.sched.search import search
from ptc.stask import build_graphs, propagate

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
TARGETS = ["sm80", "sm90", "gfx90a", "gfx942"]
NAMES = sorted(p.stem for p in SAMPLES.glob("*.pt"))


def kernel(name):
    return check_file(SAMPLES / f"{name}.pt").kernels[0]


def run_search(k, target, **kw):
    device = get_device(target)     # ranked as built: the lowering refuses what does not fit
    return search(k, device, bind_dims(k, {}, {}), **{**build_options(device), **kw})


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", NAMES)
def test_every_sample_gets_a_verified_plan(name, target):
    """The driver's search (the one users get, memoized by ptc.stage_cache): how long it
    takes is benchmarks/search_time.py's table, not an assertion here."""
    result = schedule(kernel(name), target)
    best = result.best.plan
    assert best.estimate.seconds > 0
    assert best.device == target
    placed = [s.task for _, s in best.steps() if s.task != "sync"]
    assert sorted(placed) == sorted(t.name for t in result.best.graph.tasks)


def role_of(plan, task):
    for role, step in plan.steps():
        if step.task == task:
            return role.name, step.unit


def test_flash_attention_on_sm90_is_warp_specialized_and_pipelined():
    result = run_search(kernel("flash_attn"), "sm90")
    plan = result.best.plan
    assert plan.style == "warp_specialized" and plan.stages >= 2
    assert role_of(plan, "load_K") == ("producer", "tma")
    assert role_of(plan, "load_V") == ("producer", "tma")
    assert role_of(plan, "mma_s") == ("consumer", "tensor_core")
    assert role_of(plan, "mma_o") == ("consumer", "tensor_core")
    assert role_of(plan, "simt_s")[0] == "consumer"
    assert plan.buffer("k_smem").stages == plan.stages


def gemm_plans(target, tiles):
    k = kernel("gemm")
    (g,) = build_graphs(k)
    g = propagate(g, tiles)
    device = get_device(target)
    dims = bind_dims(k, {}, {})
    out = {}
    for choice in (Choice("multistage", 3, warps=8), Choice("sequential", 1, warps=8)):
        plan = construct(g, device, choice)
        out[choice.style] = estimate(plan, g, device, dims)[0]
    return out


@pytest.mark.parametrize("target", ["sm80", "sm90"])
def test_the_model_prefers_a_pipelined_gemm(target):
    est = gemm_plans(target, {"BM": 128, "BN": 128, "BK": 32})
    assert est["multistage"].seconds < 0.8 * est["sequential"].seconds
    # the reason: without prefetch the tensor core waits on every load
    busy = dict(est["sequential"].unit_busy)["tensor_core"]
    assert busy < dict(est["multistage"].unit_busy)["tensor_core"]


def test_the_model_prefers_128_wide_tiles_over_16_wide(tmp_path):
    src = (SAMPLES / "gemm.pt").read_text().replace(
        "tile BM in [128, 64, 256], BN in [128, 64, 256], BK in [64, 32]",
        "tile BM in [16, 128], BN in [16, 128], BK in [32]")
    path = tmp_path / "gemm16.pt"
    path.write_text(src)
    k = check_file(path).kernels[0]
    result = run_search(k, "sm90")
    assert dict(result.best.tiles) == {"BM": 128, "BN": 128, "BK": 32}
    small = [c for c in result.ranked if dict(c.tiles)["BM"] == 16 and dict(c.tiles)["BN"] == 16]
    assert small, "the 16x16 candidates were not ranked"
    # why: a 16-wide tile moves 8x the bytes per FLOP through the copies for the same
    # unique DRAM traffic
    best16 = small[0].plan.estimate
    assert best16.seconds > 2 * result.best.plan.estimate.seconds
    assert best16.bytes == result.best.plan.estimate.bytes


def test_search_is_deterministic():
    a = run_search(kernel("flash_attn"), "sm80")
    b = run_search(kernel("flash_attn"), "sm80")
    assert [c.label() for c in a.ranked] == [c.label() for c in b.ranked]
    assert to_json(a.best.plan) == to_json(b.best.plan)


@pytest.mark.parametrize("name", ["gemm", "flash_attn_causal", "gemm_chain"])
def test_plan_json_round_trips(name):
    plan = schedule(kernel(name), "sm90").best.plan     # the driver's (memoized) search
    assert from_json(to_json(plan)) == plan


def test_plan_json_errors_name_the_key():
    from ptc.diagnostics import CompileError
    plan = run_search(kernel("gemm"), "sm80").best.plan
    import json
    data = json.loads(to_json(plan))
    data["roles"][0]["warps"] = "four"
    with pytest.raises(CompileError, match=r"p.json: roles\[0\].warps: expected int, got str"):
        from_json(json.dumps(data), "p.json")
    with pytest.raises(CompileError, match="p.json is not valid JSON"):
        from_json("{", "p.json")
    data["roles"][0]["warps"] = 4
    del data["launch"]
    with pytest.raises(CompileError, match="missing key 'launch'"):
        from_json(json.dumps(data), "p.json")


def test_multistage_plans_prefetch_stages_minus_one_iterations_ahead():
    k = kernel("gemm")
    (g,) = build_graphs(k)
    g = propagate(g, {"BM": 64, "BN": 64, "BK": 32})
    plan = construct(g, get_device("sm80"), Choice("multistage", 4, warps=4))
    (role,) = plan.roles
    loop = next(i for i in role.body if isinstance(i, LoopBlock))
    offsets = {s.task: s.offset for s in walk_steps(loop.body)}
    assert offsets == {"load_A": 3, "load_B": 3, "mma_acc": 0}
    assert plan.buffer("A_smem").stages == 4


def test_amd_targets_use_lds_and_matrix_cores():
    plan = run_search(kernel("gemm"), "gfx942").best.plan
    assert {b.space for b in plan.buffers} == {"lds"}
    assert role_of(plan, "mma_acc")[1] == "matrix_core"


def flash_attention_plans(**tiles):
    """The 2-consumer sm90 plans of flash attention, free-running and in ping-pong, as
    built (with what the lowered kernel issues), with their estimates and timelines."""
    from ptc.driver import built_plan
    k = kernel("flash_attn")
    (g,) = build_graphs(k)
    g = propagate(g, {"BM": 128, "BN": 128, **tiles})
    device = get_device("sm90")
    dims = bind_dims(k, {}, {})
    out = {}
    for pingpong in (False, True):
        plan = built_plan(construct(g, device, Choice("warp_specialized", 2, 2,
                                                      pingpong=pingpong)), g, device)
        out[pingpong] = (plan, *estimate(plan, g, device, dims, record=True))
    return out


def test_flash_attention_consumers_in_ping_pong_hide_their_softmax_under_gemms():
    plans = flash_attention_plans()
    free, turns = plans[False][1], plans[True][1]
    # free-running consumers reach the softmax together (timed in lockstep): the tensor
    # cores idle through it; in turns, one's softmax runs under the other's GEMMs
    assert turns.seconds < 0.8 * free.seconds
    busy = dict(turns.unit_busy)
    assert busy["tensor_core"] > dict(free.unit_busy)["tensor_core"] + 0.1
    # both do the same tensor-core work: each instance multiplies its half of the rows
    assert plans[True][2].busy["tensor_core"] == pytest.approx(
        plans[False][2].busy["tensor_core"], rel=0.05)


def test_ping_pong_consumers_issue_their_gemms_in_turn():
    plan, _, timeline = flash_attention_plans()[True]
    assert [r.pingpong for r in plan.roles] == [False, True]
    starts = sorted((start, proc) for proc, unit, task, start, _ in timeline.spans
                    if task == "mma_s")
    procs = [p for _, p in starts]
    assert set(procs) == {"consumer0", "consumer1"}
    assert all(a != b for a, b in zip(procs, procs[1:])), procs   # strictly alternating
    assert procs[0] == "consumer0"                                 # 0 holds the first turn
    # consumer1's QK^T runs while consumer0 computes its softmax
    s0 = next(s for s in timeline.spans if s[0] == "consumer0" and s[2] == "simt_s")
    m1 = next(s for s in timeline.spans if s[0] == "consumer1" and s[2] == "mma_s")
    assert m1[3] < s0[4] and s0[3] < m1[4]


def test_ping_pong_needs_cuda_core_work_between_gemms():
    k = kernel("gemm")
    (g,) = build_graphs(k)
    g = propagate(g, {"BM": 128, "BN": 128, "BK": 64})
    with pytest.raises(Unfit, match="nothing for the other warpgroup's GEMMs to hide"):
        construct(g, get_device("sm90"), Choice("warp_specialized", 2, 2, pingpong=True))
    (g,) = build_graphs(kernel("flash_attn"))
    g = propagate(g, {"BM": 64, "BN": 128})
    with pytest.raises(Unfit, match="cannot feed 2 consumer warpgroups"):
        construct(g, get_device("sm90"), Choice("warp_specialized", 2, 2, pingpong=True))


def test_ping_pong_round_trips_through_plan_json():
    plan = flash_attention_plans()[True][0]
    assert from_json(to_json(plan)) == plan
    assert '"pingpong": true' in to_json(plan)


def test_a_role_waits_for_what_its_own_wgmma_computes():
    """wgmma is asynchronous: the softmax reads S once the QK^T that computes it has
    completed, while wgmmas chained into one accumulator queue on the tensor cores."""
    _, _, timeline = flash_attention_plans()[True]
    device = get_device("sm90")
    latency = device.unit("tensor_core").latency_cycles
    for proc in ("consumer0", "consumer1"):
        mmas = [s for s in timeline.spans if s[0] == proc and s[2] == "mma_s"]
        softmax = [s for s in timeline.spans if s[0] == proc and s[2] == "simt_s"]
        assert len(mmas) == len(softmax) > 2
        for m, f in zip(mmas, softmax):
            assert f[3] >= m[4] + latency
    # what it waits for: S from this iteration's QK^T, o from the last iteration's PV
    (g,) = build_graphs(kernel("flash_attn"))
    g = propagate(g, {"BM": 128, "BN": 128})
    units = {"mma_s": "tensor_core", "mma_o": "tensor_core", "simt_s": "cuda_core",
             "simt_o": "cuda_core", "simt_O": "cuda_core"}
    deps = dependences(g, device, units).producers
    assert {(p.task, p.distance, p.loop) for p in deps["simt_s"]} == {("mma_s", 0, "n"),
                                                                      ("mma_o", 1, "n")}
    assert {p.task for p in deps["simt_O"]} == {"mma_o"}
    assert "mma_o" not in deps      # it reads what CUDA cores computed: program order


def test_the_rotated_loop_issues_the_next_qk_with_this_pv():
    from ptc.sched.rotate import rotated
    (g,) = build_graphs(kernel("flash_attn"))
    g = propagate(g, {"BM": 128, "BN": 64})
    device = get_device("sm90")
    plan = construct(g, device, Choice("warp_specialized", 3, 2, pingpong=True, overlap=True))
    (consumer,) = [r for r in plan.roles if r.name == "consumer"]
    (loop,) = [i for i in consumer.body if isinstance(i, LoopBlock)]
    assert [(s.task, s.offset) for s in loop.body] == [("mma_s", 1), ("mma_o", 0),
                                                       ("simt_s", 1)]
    assert from_json(to_json(plan)) == plan
    # the model: the softmax of n + 1 runs (mostly) under PV(n), so the loop in order is
    # slower (with 3 stages: the rotated loop wants K(n + 1) an iteration earlier)
    from ptc.driver import built_plan
    dims = bind_dims(kernel("flash_attn"), {}, {})
    in_order = built_plan(construct(g, device, Choice("warp_specialized", 3, 2,
                                                      pingpong=True)), g, device)
    e_in, _ = estimate(in_order, g, device, dims)
    e_ov, t_ov = estimate(built_plan(plan, g, device), g, device, dims, record=True)
    assert e_ov.seconds < e_in.seconds
    under = [(s, x) for s in t_ov.spans if s[2] == "simt_s"
             for x in t_ov.spans if x[0] == s[0] and x[2] == "mma_o" and x[3] < s[3] < x[4]]
    assert under, "no softmax starts while its own PV of the iteration before runs"
    # gemm has nothing to rotate
    (gg,) = build_graphs(kernel("gemm"))
    gg = propagate(gg, {"BM": 128, "BN": 128, "BK": 64})
    with pytest.raises(Unfit, match="needs tensor-core steps, CUDA-core work"):
        construct(gg, device, Choice("warp_specialized", 3, 2, overlap=True))
    assert rotated(plan, "consumer", lambda u: device.unit(u).kind) == \
        "loop n is pipelined already"


# ---- the register estimate the plan construction checks ----------------------------------
def _w4a16_graph(planes: int, tiles: dict):
    """The W4A16 sample keeping its first `planes` planes (each two lines of the loop)."""
    from ptc.driver import stask_graph
    from ptc.grammar import parse
    from ptc.sema.check import check
    lines = (SAMPLES / "w4a16_gemm.pt").read_text().splitlines()
    kept = [line for n, line in enumerate(lines)
            if not any(f"A[i, {p}, k]" in line for p in range(planes, 8))
            and not (n and any(f"A[i, {p}, k]" in lines[n - 1] for p in range(planes, 8)))]
    kernel = check(parse("\n".join(kept) + "\n", "w4a16_gemm.pt"), {}).kernels[0]
    return stask_graph(kernel, tiles)


def test_operands_read_right_away_count_once_in_the_register_estimate():
    """Eight dequantized planes, each read by the next mma only, are never live together:
    the lowering's estimate (the one the search reads: ptc.lower.registers) adds far less
    than seven more planes' registers to the estimate of one. Summing every value of the
    loop (as the plan construction's estimate once did) refused every sm80 plan of the
    W4A16 sample with '~800 registers per thread'."""
    from ptc.driver import lowered_plan
    from ptc.sched.construct import Choice, construct
    sm80 = get_device("sm80")
    tiles = {"BM": 64, "BN": 64, "BK": 32}
    estimate = {}
    for planes in (1, 8):
        graph = _w4a16_graph(planes, tiles)
        assert sum(t.kind == "mma" for t in graph.tasks) == planes
        low, _ = lowered_plan(construct(graph, sm80, Choice("multistage", 2, warps=4)), graph,
                              sm80)
        estimate[planes] = low.launch.registers
    plane = 64 * 64 // 2 // 128          # a dequantized f16 plane: words per thread
    assert estimate[1] < estimate[8] < estimate[1] + 7 * plane // 2, estimate
