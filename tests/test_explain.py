"""`ptc explain`'s engine (ptc/explain/): the data, the reasons, and the three renderings."""
from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

import pytest
from rich.console import Console

from ptc.devices import get_device
from ptc.driver import build_options, check_file, schedule
from ptc.explain import (Explanation, Lane, LegendEntry, Span, TimelineView, explain,
                         gantt_cells, render_text, slower, to_json, to_svg, why)
from ptc.interp import bind_dims
from ptc.sched.cost import executions
from ptc.sched.search import SearchResult, search

ROOT = Path(__file__).resolve().parent.parent
SVG = "{http://www.w3.org/2000/svg}"

try:  # the verifier lands separately; search with it once it imports
    import ptc.sched.verify  # noqa: F401
    VERIFY = True
except ImportError:
    VERIFY = False

CASES = [("flash_attn", "sm90"), ("flash_attn", "sm80"), ("gemm", "sm90"), ("gemm", "sm80")]


@lru_cache(maxsize=None)
def result(sample: str, target: str, tiles: tuple = ()) -> SearchResult:
    kernel = check_file(str(ROOT / "samples" / f"{sample}.pt")).kernels[0]
    device = get_device(target)     # ranked as built: the lowering refuses what does not fit
    return search(kernel, device, bind_dims(kernel, {}, {}), fixed_tiles=dict(tiles),
                  verify_plans=VERIFY, **build_options(device))


@lru_cache(maxsize=None)
def explained(sample: str, target: str) -> Explanation:
    return explain(result(sample, target))


def text_of(expl: Explanation, width: int = 100, colour: bool = False) -> str:
    out = io.StringIO()
    console = (Console(file=out, width=width, force_terminal=True, color_system="truecolor")
               if colour else Console(file=out, width=width, no_color=True, color_system=None))
    render_text(expl, console)
    return out.getvalue()


# ---- the text -------------------------------------------------------------------------
@pytest.mark.parametrize("sample,target", CASES)
def test_text_has_every_part(sample, target):
    expl = explained(sample, target)
    text = text_of(expl)
    assert f"ptc explain {sample} on {target}" in text
    assert expl.tiles_text in text
    for heading in ("Estimate", "Why this plan", "Timeline", "Plan", "sTask graph",
                    "Runners-up", "Rejected"):
        assert heading in text
    # the plan: roles, buffers, launch
    for role in expl.plan.roles:
        assert role.name in text
    for buf in expl.plan.buffers:
        assert buf.name in text
    assert f"{expl.plan.threads} threads" in text
    # every task of the graph, and every lane of the Gantt chart with its letters
    for task in expl.tasks:
        assert task.name in text
    for lane in expl.timeline.lanes:
        row = next(line for line in text.splitlines() if line.strip().startswith(lane.label))
        assert re.search(r"\d+%$", row.rstrip())
    # the estimate against the peak
    assert re.search(r"\d+ TFLOP/s = \d+% of the (f16|bf16) mma peak", text)
    assert re.search(r"GB/s = \d+% of DRAM bandwidth", text)
    # runners-up with their ratio to the winner
    assert expl.runners_up
    for r in expl.runners_up:
        assert f"{r.ratio:.3f}x" in text
    # a reason with a number in it, and the rejected counts
    assert any(re.search(r"\d+(\.\d+)?(%|x)", r.text) for r in expl.why[1:])
    assert "•" in text
    assert f"Rejected ({expl.rejected_total})" in text


@pytest.mark.parametrize("sample,target", CASES)
def test_text_fits_width_and_colours(sample, target):
    expl = explained(sample, target)
    plain = text_of(expl, width=100)
    assert "\x1b[" not in plain
    assert max(len(line) for line in plain.splitlines()) <= 100
    narrow = text_of(expl, width=80)
    assert max(len(line) for line in narrow.splitlines()) <= 80
    coloured = text_of(expl, colour=True)
    assert "\x1b[" in coloured


@pytest.mark.parametrize("sample,target", CASES)
def test_gantt_rows_use_the_legend_letters(sample, target):
    expl = explained(sample, target)
    text = text_of(expl)
    letters = {e.letter for e in expl.timeline.legend}
    mma = next(e for e in expl.timeline.legend if e.kind == "mma")
    lane = next(lane for lane in expl.timeline.lanes if lane.unit == "tensor_core"
                and any(s.process == lane.process and s.unit == lane.unit
                        for s in expl.timeline.visible()))
    row = next(line for line in text.splitlines() if line.strip().startswith(lane.label))
    bar = row.split(lane.label, 1)[1].rsplit(" ", 1)[0].strip()
    assert set(bar) <= letters | {"·"}
    assert mma.letter in bar
    assert f" {mma.letter}  {mma.task}" in text          # the legend entry


# ---- the data ------------------------------------------------------------------------
@pytest.mark.parametrize("sample,target", CASES)
def test_performance_numbers(sample, target):
    expl = explained(sample, target)
    p = expl.performance
    best = result(sample, target).best
    assert p.seconds == best.estimate.seconds
    dtype = {"flash_attn": "bf16", "gemm": "f16"}[sample]
    assert p.mma_dtype == dtype
    assert p.peak_flops_per_s == get_device(target).peak_flops(dtype)
    assert p.flops_pct == pytest.approx(100 * p.flops / p.seconds / p.peak_flops_per_s)
    assert 0 < p.flops_pct <= 100
    assert 0 < p.bytes_pct <= 100


@pytest.mark.parametrize("sample,target", CASES)
def test_timeline_window_shows_steady_state_iterations(sample, target):
    r = result(sample, target)
    v = explained(sample, target).timeline
    assert v.iterations == 3 and v.first_iteration >= 1
    assert 0 < v.start < v.end <= v.simulated
    marker = max((t for t in r.best.graph.tasks if t.region == v.loop),
                 key=lambda t: (t.work.mma_flops, t.work.simt_ops, t.work.bytes))
    starts = [s.start for s in v.spans if s.task == marker.name]
    per_iteration = len(starts) // executions(
        r.best.graph, {reg.name: 16 for reg in r.best.graph.loop_regions()})[marker.name]
    inside = [t for t in starts if v.start <= t < v.end]
    assert len(inside) == 3 * max(1, per_iteration)
    # every lane the plan uses is there, and the busy fractions are fractions
    units = {s.unit for _, s in r.best.plan.steps() if s.task != "sync"}
    assert units <= {lane.unit for lane in v.lanes}
    assert all(0 <= lane.busy <= 1.0001 for lane in v.lanes)


def test_runners_up_are_the_next_five():
    r = result("gemm", "sm90")
    expl = explained("gemm", "sm90")
    assert [x.rank for x in expl.runners_up] == [2, 3, 4, 5, 6]
    for x, c in zip(expl.runners_up, r.ranked[1:6]):
        assert x.seconds == c.estimate.seconds
        assert x.ratio == pytest.approx(c.estimate.seconds / r.best.estimate.seconds)
        assert x.ratio >= 1


def test_rejected_groups_count_everything():
    r = result("flash_attn", "sm80")
    expl = explained("flash_attn", "sm80")
    assert sum(g.count for g in expl.rejected) == len(r.rejected) == expl.rejected_total
    counts = [g.count for g in expl.rejected]
    assert counts == sorted(counts, reverse=True)
    assert any("TMA" in g.reason for g in expl.rejected)


# ---- JSON and SVG ---------------------------------------------------------------------
@pytest.mark.parametrize("sample,target", CASES)
def test_json_round_trips(sample, target):
    expl = explained(sample, target)
    data = json.loads(to_json(expl))
    assert {"kernel", "device", "dims", "tiles", "graph_text", "tasks", "plan", "performance",
            "timeline", "runners_up", "why", "rejected", "candidates", "rejected_total",
            "search_seconds"} <= set(data)
    assert data["kernel"] == sample and data["device"] == target
    assert dict(data["tiles"]) == dict(expl.tiles)
    assert {"style", "stages", "roles", "buffers", "grid", "threads", "smem_bytes",
            "persistent"} <= set(data["plan"])
    assert {"seconds", "flops_pct", "bytes_pct", "bound", "unit_busy"} <= set(data["performance"])
    t = data["timeline"]
    assert {"start", "end", "lanes", "legend", "spans", "visible"} <= set(t)
    assert len(t["spans"]) == len(expl.timeline.spans)
    assert t["visible"] == len(expl.timeline.visible())
    assert all({"aspect", "text"} <= set(w) for w in data["why"])
    assert data["graph_text"].startswith(f"stask-graph {sample}")


@pytest.mark.parametrize("sample,target", CASES)
def test_svg_has_one_rect_per_span(sample, target):
    expl = explained(sample, target)
    root = ET.fromstring(to_svg(expl).encode())
    assert root.tag == f"{SVG}svg"
    rects = [r for r in root.iter(f"{SVG}rect") if r.get("class") == "span"]
    assert len(rects) == len(expl.timeline.visible()) > 0
    for r in rects:
        assert r.find(f"{SVG}title") is not None
        assert float(r.get("width")) > 0
    texts = [t.text or "" for t in root.iter(f"{SVG}text")]
    for lane in expl.timeline.lanes:
        assert lane.label in texts
    for e in expl.timeline.legend:
        assert e.task in texts
    assert "cycles" in texts
    legend = [r for r in root.iter(f"{SVG}rect") if r.get("class") == "legend"]
    assert len(legend) == len(expl.timeline.legend)


# ---- why ------------------------------------------------------------------------------
def _with_estimate(c, seconds, busy, bound="tensor_core"):
    est = replace(c.plan.estimate, seconds=seconds, unit_busy=tuple(busy), bound=bound)
    return replace(c, plan=replace(c.plan, estimate=est))


def test_why_stages_on_a_known_difference():
    """Two candidates that differ only in stages, with made-up numbers: the sentence quotes
    the slower one's idle tensor core and the ratio."""
    r = result("gemm", "sm80", (("BM", 64), ("BN", 128), ("BK", 32)))
    by_stages = {c.choice.stages: c for c in r.ranked
                 if c.choice.style == "multistage" and c.choice.warps == 4}
    three = _with_estimate(by_stages[3], 1e-3, [("tensor_core", 0.91), ("cp_async", 0.5)])
    two = _with_estimate(by_stages[2], 1.5e-3, [("cp_async", 0.8), ("tensor_core", 0.69)],
                         bound="cp_async")
    fake = replace(r, ranked=(three, two), rejected=())
    reasons = why(fake)
    assert reasons[0].aspect == "bound"
    assert reasons[0].text.startswith("bound by tensor_core: busy 91% of the time")
    stages = [x for x in reasons if x.aspect == "stages"]
    assert [x.text for x in stages] == [
        "3 stages: with 2 the tensor_core idles 31% of the time (vs 9%) and the plan takes "
        "1.5x as long"]
    assert stages[0].ratio == pytest.approx(1.5)


def test_why_stages_from_the_search():
    """Tiles fixed: the winner's stage count against its neighbour, numbers from the model."""
    r = result("gemm", "sm80", (("BM", 64), ("BN", 128), ("BK", 64)))
    w = r.best
    assert w.choice.style == "multistage" and w.choice.stages == 2
    other = next(c for c in r.ranked if c.choice.style == "multistage"
                 and c.choice.stages == 3 and c.choice.warps == w.choice.warps)
    ratio = other.estimate.seconds / w.estimate.seconds
    assert ratio > 1
    reason = next(x for x in why(r) if x.aspect == "stages")
    assert reason.text.startswith(f"2 stages: 3 stages take {slower(ratio)}")
    smem = (other.plan.launch.dynamic_smem - w.plan.launch.dynamic_smem) // 1024
    assert f"they need {smem} KB more shared memory" in reason.text
    assert reason.ratio == pytest.approx(ratio)


def test_why_pipelining_and_style():
    r = result("flash_attn", "sm90")
    reasons = {x.aspect: x for x in why(r)}
    seq = next(c for c in r.ranked if c.tiles == r.best.tiles and c.choice.style == "sequential")
    ratio = seq.estimate.seconds / r.best.estimate.seconds
    assert reasons["pipelining"].text.startswith(
        f"pipelining: the unpipelined plan (sequential, {seq.choice.warps} warps) takes "
        f"{slower(ratio)}")
    styles = [x.text for x in why(r) if x.aspect == "style"]
    assert any(t.startswith("warp-specialized: the best multistage plan") for t in styles)
    assert any(t.startswith("warp-specialized: the best interleaved plan with these tiles "
                            "(interleaved loads, 8 warps)") for t in styles), styles
    # on sm80 warp specialization could not be built, and the reason says why
    sm80 = [x.text for x in why(result("flash_attn", "sm80")) if x.aspect == "style"]
    assert any("warp-specialized is not possible" in t and "TMA" in t for t in sm80), sm80


def test_why_tiles_quotes_bytes_per_flop():
    """gemm, BK fixed, on sm90: two consumer warpgroups of 128 rows (256 x 128, as
    CUTLASS's); 128 x 128 tiles load 1.3x the bytes per FLOP ((1/128 + 1/128) / (1/256 +
    1/128)), 256 x 64 ones 1.7x."""
    r = result("gemm", "sm90", (("BK", 64),))
    assert dict(r.best.tiles)["BM"] == 256 and dict(r.best.tiles)["BN"] == 128
    tiles = [x.text for x in why(r) if x.aspect == "tiles"]
    assert any("BM=128 BN=128 BK=64 tiles move 1.3x the bytes per FLOP" in t for t in tiles)
    assert any("BM=256 BN=64 BK=64 tiles move 1.7x the bytes per FLOP" in t for t in tiles)


def test_why_ties_and_impossible_counts():
    """Equal times for 4 and 8 warps: the tie is named as one; a count that could not be
    built quotes the reason it was rejected."""
    r = result("gemm", "sm80", (("BM", 64), ("BN", 128), ("BK", 64)))
    pair = {c.choice.warps: c for c in r.ranked
            if c.choice.style == "multistage" and c.choice.stages == 2}
    busy = [("cp_async", 0.9), ("tensor_core", 0.8)]
    fake = replace(r, ranked=(_with_estimate(pair[4], 1e-3, busy, "cp_async"),
                              _with_estimate(pair[8], 1e-3, busy, "cp_async")), rejected=())
    reasons = {x.aspect: x.text for x in why(fake)}
    assert reasons["warps"] == ("4 warps: 8 warps take the same time; ties go to the smaller "
                                "configuration")
    assert reasons["bound"] == "bound by cp_async: busy 90% of the time; tensor_core 80%"
    fa = result("flash_attn", "sm90")
    one = [x for x in fa.rejected if x.tiles == fa.best.tiles and x.choice.consumers == 1
           and x.choice.style == "warp_specialized" and x.choice.stages == fa.best.choice.stages]
    if fa.best.choice.consumers == 2 and one:
        text = next(x.text for x in why(fa) if x.aspect == "consumers")
        assert text == f"2 consumer warpgroups: 1 is not possible: {one[0].reason}"


def test_why_ping_pong():
    """flash attention on sm90: two consumers in turns, against the same plan free-running."""
    r = result("flash_attn", "sm90")
    assert r.best.choice.pingpong and r.best.choice.consumers == 2
    # (two consumers rotate their loop only in turns: free-running, they run it in order)
    free = next(c for c in r.ranked if c.tiles == r.best.tiles and not c.choice.pingpong
                and c.choice.consumers == 2 and c.choice.stages == r.best.choice.stages
                and not c.choice.overlap)
    text = next(x.text for x in why(r) if x.aspect == "pingpong")
    ratio = free.estimate.seconds / r.best.estimate.seconds
    assert text.startswith(f"ping-pong: free-running consumers take {slower(ratio)}; one "
                           "warpgroup's CUDA-core work runs under the other's tensor-core "
                           "steps"), text
    gemm = result("gemm", "sm90")
    if gemm.best.choice.consumers == 2:
        text = next(x.text for x in why(gemm) if x.aspect == "pingpong")
        assert text.startswith("free-running consumers: ping-pong is not possible: no "
                               "CUDA-core work follows"), text


def test_why_intra_warpgroup_overlap():
    """The search as `ptc explain` runs it (plans as built): flash attention on sm90
    rotates its loop."""
    r = schedule(check_file(str(ROOT / "samples" / "flash_attn.pt")).kernels[0], "sm90")
    assert r.best.choice.overlap
    text = next(x.text for x in why(r) if x.aspect == "overlap")
    assert text.startswith("intra-warpgroup overlap: the loop in order takes "), text
    assert "the CUDA-core work of iteration n + 1 runs under the last tensor-core step" in text


def test_slower_wording():
    assert slower(1.7) == "1.7x as long"
    assert slower(1.026) == "2.6% longer"
    assert slower(1.0001) == "the same time"


def test_gantt_cells_on_a_made_up_timeline():
    legend = (LegendEntry("a", "A", "#ffffff", "copy"), LegendEntry("b", "B", "#000000", "mma"))
    spans = (Span("p", "u", "a", 0, 50), Span("p", "u", "b", 50, 51), Span("p", "v", "b", 0, 100))
    lanes = (Lane("p", "u", 0.51), Lane("p", "v", 1.0))
    v = TimelineView(100, 100, 1, "", 0, 0, 0.0, 100.0, lanes, legend, spans)
    u = gantt_cells(v, lanes[0], 10)
    assert u[:5] == ["a"] * 5
    assert u[5] == "b"                    # too short to win a cell, still marked
    assert u[6:] == [None] * 4
    assert gantt_cells(v, lanes[1], 10) == ["b"] * 10


def test_explain_shows_what_the_built_kernel_issues():
    """The plan explain shows is the built one: per task, the instructions its lowered
    ops issue (tensor-core and ldmatrix for mma tasks, SFU for the softmax's exp)."""
    import io
    from rich.console import Console
    from ptc.driver import check_file, schedule
    from ptc.explain import explain, render_text
    k = check_file(Path(__file__).resolve().parent.parent / "samples" / "flash_attn.pt").kernels[0]
    expl = explain(schedule(k, "sm80"))
    issue = {row[0]: row[1:] for row in expl.plan.issue}
    assert issue["mma_s"][0] > 0 and issue["mma_o"][0] > 0
    assert issue["simt_s"][3] > 0                     # exp on the SFU
    out = io.StringIO()
    render_text(expl, Console(file=out, width=140))
    assert "issues per warp in the built kernel" in out.getvalue()


ODD_GEMM = """
kernel odd(A: {dt}[M, K], B: {dt}[K, N]) -> (C: f32[M, N]) {{
  dims M = 1000, N = 600, K = 400
  tile BM = {bm}, BN = {bn}, BK = {bk}
  parallel i: BM of M, j: BN of N {{
    acc = zeros(f32[BM, BN])
    for k: BK of K {{
      acc += load(A[i, k]) @ load(B[k, j])
    }}
    store(C[i, j], acc)
  }}
}}
"""


@pytest.mark.parametrize("dt, tiles, words", [
    ("f16", (100, 60, 20), "no matrix instruction tiles 100x60x20 "),
    ("f16", (8, 64, 32), "no matrix instruction tiles 8x64x32 (mma.sync.m16n8k16 needs m a "
                         "multiple of 16, n of 8 and k of 16); its transpose (64x8) fits: "
                         "write the product as b.T @ a.T"),
    ("f32", (64, 64, 32), "the tensor cores take bf16, f16, f8e4m3, f8e5m2, i8, tf32 inputs, "
                          "not f32; f32 @ f32 is computed in f32, never silently as TF32 (write "
                          "`(a as tf32) @ (b as tf32)` to ask for it)"),
])
def test_an_mma_on_cuda_cores_is_explained_as_such(tmp_path, dt, tiles, words):
    path = tmp_path / "odd.pt"
    bm, bn, bk = tiles
    path.write_text(ODD_GEMM.format(dt=dt, bm=bm, bn=bn, bk=bk))
    k = check_file(path).kernels[0]
    device = get_device("sm80")
    expl = explain(schedule(k, "sm80"))       # as `ptc explain` searches: built plans
    unit = [r.text for r in expl.why if r.aspect == "unit"]
    assert unit and unit[0].startswith("mma_acc runs on CUDA cores (f32 FMA): " + words), unit
    p = expl.performance
    simt = next(u for u in device.units if u.kind == "simt")
    assert p.peak_label == "f32 CUDA-core FMA peak"
    assert p.peak_flops_per_s == 2 * simt.throughput.get("f32") * device.clock_hz * 108
    assert p.flops_pct < 100


def test_a_tf32_matmul_says_its_numerics(tmp_path):
    path = tmp_path / "g.pt"
    path.write_text(ODD_GEMM.format(dt="f32", bm=64, bn=64, bk=32).replace(
        "load(A[i, k]) @ load(B[k, j])", "(load(A[i, k]) as tf32) @ (load(B[k, j]) as tf32)"))
    expl = explain(schedule(check_file(path).kernels[0], "sm80"))
    unit = [r.text for r in expl.why if r.aspect == "unit"]
    assert unit == ["mma_acc runs on tensor cores in TF32, as the program asks (`as tf32`): "
                    "operands rounded to 10 mantissa bits, products summed in f32"]
    assert expl.performance.peak_label == "tf32 mma peak"


def test_why_says_what_the_lowering_decided_beyond_the_plan():
    """The winner's lowered kernel's notes are reasons too (aspect "lowering"): sm90's
    W4A16 multiplies its planes swapped, gfx942's flash attention asks the register
    allocator for 2 blocks per CU; a kernel whose lowering notes nothing has none."""
    w4a16 = [r.text for r in explained("w4a16_gemm", "sm90").why if r.aspect == "lowering"]
    assert w4a16 == ["mma_acc, mma_acc2, mma_acc3, mma_acc4, mma_acc5, mma_acc6, mma_acc7, "
                     "mma_acc8 (B computed in registers, A loaded): wgmma multiplies "
                     "out^T = b^T a^T, b^T from registers, nothing staged in shared memory"]
    attention = [r.text for r in explained("flash_attn", "gfx942").why
                 if r.aspect == "lowering"]
    assert len(attention) == 1 and "for the register allocator" in attention[0]
    assert not [r for r in explained("gemm", "sm80").why if r.aspect == "lowering"]
