"""Copies are timed from the lowered copy ops (issue 24): the bytes the built copy moves,
its threads' instructions and, where it goes through registers (CDNA's register-staged
copies, a synchronous copy's loads and stores), its stores to shared memory. A copy step
takes the larger of its bytes' time and its instructions' time."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ptc.devices import get_device
from ptc.driver import check_file, lowered_plan
from ptc.lower import ir
from ptc.sched.construct import Choice, construct
from ptc.sched.cost import plan_estimate, step_cycles
from ptc.stask import build_graph, propagate
from ptc.stask.graph import TaskKind

ROOT = Path(__file__).resolve().parent.parent
GEMM = check_file(ROOT / "samples" / "gemm.pt").kernels[0]
DIMS = {"M": 1024, "N": 1024, "K": 1024}
TILES = {"BM": 64, "BN": 128, "BK": 32}


def built(target: str):
    device = get_device(target)
    graph = propagate(build_graph(GEMM, GEMM.body[0]), TILES)
    plan = construct(graph, device, Choice("multistage", 2, warps=4))
    low, plan = lowered_plan(plan, graph, device)
    return low, plan, graph, device


def copy_ops(low) -> dict[str, ir.CopyTile]:
    return {op.task: op for op in ir.walk(low.body) if isinstance(op, ir.CopyTile)}


def test_the_plan_carries_the_bytes_the_built_copies_move():
    low, plan, graph, _ = built("sm80")
    for task, op in copy_ops(low).items():
        t = op.tile
        assert plan.issue_of(task).copy_bytes == t.rows * t.cols * 2, task   # f16 tiles
        assert plan.issue_of(task).copy_bytes == graph.task(task).work.bytes


def test_register_staged_copies_count_their_stores_to_shared_memory():
    """gfx942's copies go global -> registers -> LDS: each chunk a thread loads it also
    stores; sm80's cp.async stores nothing from registers."""
    low, plan, _, _ = built("gfx942")
    staged = {task for task, op in copy_ops(low).items() if op.staged}
    assert staged, "gfx942's multistage gemm stages its copies in registers"
    for task in staged:
        assert plan.issue_of(task).shared > 0, task
    low80, plan80, _, _ = built("sm80")
    for task in copy_ops(low80):
        assert plan80.issue_of(task).shared == 0, task


def test_a_copy_that_issues_more_than_its_bytes_take_is_timed_by_its_instructions():
    low, plan, graph, device = built("gfx942")
    task = next(iter(copy_ops(low)))
    stask = graph.task(task)
    assert stask.kind == TaskKind.COPY
    step = next(s for _, s in plan.steps() if s.task == task)
    unit = device.unit(step.unit)
    warps = plan.roles[0].warps
    issue = plan.issue_of(task)
    as_built = step_cycles(stask, unit, device, 1, issue, warps)
    by_bytes = step_cycles(stask, unit, device, 1, None, warps)
    assert as_built >= by_bytes
    heavy = replace(issue, simt=issue.simt * 100)
    assert step_cycles(stask, unit, device, 1, heavy, warps) > 10 * as_built
    # and the plan's estimate follows
    slower = replace(plan, issue=tuple(heavy if i.task == task else i for i in plan.issue))
    assert plan_estimate(slower, graph, device, DIMS).seconds > \
        plan_estimate(plan, graph, device, DIMS).seconds
