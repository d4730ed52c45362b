"""From a SearchResult to an Explanation: the winner's tasks, plan, estimate and timeline,
the runners-up, the rejected candidates and the reasons."""
from __future__ import annotations

from collections import Counter
from typing import Iterable

from ..sched.cost import executions, loop_trips
from ..sched.search import Candidate, Rejected, SearchResult
from ..stask import print_graph
from ..devices.model import UnitKind
from ..stask.graph import STaskGraph, TaskKind
from .model import (BufferRow, Explanation, Performance, PlanSummary, RejectedGroup, RoleRow,
                    RunnerUp, TaskRow)
from .reasons import why
from .timeline import timeline_view
from .wording import ordered_tiles, short_plan, tiles_text

TIMELINE_ITERATIONS = 3     # steady-state iterations of the pipelined loop shown
RUNNERS_UP = 5


def explain(result: SearchResult, iterations: int = TIMELINE_ITERATIONS) -> Explanation:
    best = result.best
    order = [t.name for t in result.kernel.tiles]
    return Explanation(
        kernel=result.kernel.name,
        device=result.device.name,
        device_description=result.device.description,
        terms=result.device.terms,
        dims=tuple(result.dims),
        tiles=ordered_tiles(best.tiles, order),
        graph_text=print_graph(best.graph),
        tasks=_task_rows(best.graph, dict(result.dims)),
        plan=_plan_summary(best, result.device.terms),
        performance=_performance(best, result.device),
        timeline=timeline_view(best, result, iterations),
        runners_up=_runners_up(result, order),
        why=why(result),
        rejected=_rejected_groups(result.rejected),
        candidates=len(result.ranked),
        rejected_total=len(result.rejected),
        search_seconds=result.seconds,
        search_cached=result.cached,
    )


def _task_rows(graph: STaskGraph, dims) -> tuple[TaskRow, ...]:
    runs = executions(graph, loop_trips(graph, dims))
    return tuple(TaskRow(t.name, t.kind, t.op, t.region, tuple(int(e) for e in t.shape),
                         t.dtype, t.work.bytes, t.work.mma_flops, t.work.simt_ops,
                         t.work.sfu_ops, runs[t.name])
                 for t in graph.tasks)


def _plan_summary(c: Candidate, terms) -> PlanSummary:
    p = c.plan
    roles = []
    for role in p.roles:
        # a step at offset k runs iteration n + k (prefetch, a rotated loop)
        steps = tuple(f"{s.task}@{s.unit}" + (f"({p.pipelined}+{s.offset})" if s.offset else "")
                      + _gathered(c.graph, s.task)
                      for r, s in p.steps() if r.name == role.name and not s.is_sync)
        threads = role.warps * role.instances * _warp_size(p)
        roles.append(RoleRow(role.name, role.warps, threads, role.registers, role.instances,
                             steps))
    buffers = tuple(BufferRow(b.name, b.value, b.producer, b.consumers, b.space, b.stages,
                              b.slot_bytes, b.slot_bytes * b.stages, b.dtype, b.shape,
                              b.built_layout or b.layout)
                    for b in p.buffers)
    issue = tuple((t.task, t.mma, t.fragment_loads, t.simt, t.sfu, t.shuffles, t.shared)
                  for t in p.issue)
    return PlanSummary(short_plan(c, terms), p.style, p.stages, p.pipelined, tuple(roles),
                       buffers, p.launch.grid, p.launch.threads, p.launch.dynamic_smem,
                       p.launch.raster, p.launch.persistent, issue)


def _gathered(graph: STaskGraph, task: str) -> str:
    """`[gathered by idx]` after a copy step whose rows' positions it loads (a row per
    request, timed as such: ptc.sched.cost.gathered_bytes)."""
    index = next((t.gathered for t in graph.tasks if t.name == task), None)
    return f"[gathered by {index}]" if index else ""


def _warp_size(plan) -> int:
    warps = sum(r.warps * r.instances for r in plan.roles)
    return plan.launch.threads // warps if warps else 32


def mma_dtype(graph: STaskGraph) -> str:
    """The input dtype of the kernel's mma work ("" when it has none)."""
    for t in graph.tasks:
        if t.kind == TaskKind.MMA:
            return t.mma_dtype
    return ""


def on_tensor_cores(c: Candidate, device) -> bool:
    """Whether the plan runs any of its mma tasks on a matrix unit (else on CUDA cores)."""
    return any(c.graph.task(s.task).kind == TaskKind.MMA
               and device.unit(s.unit).kind == UnitKind.MMA
               for _, s in c.plan.steps() if not s.is_sync)


def _performance(c: Candidate, device) -> Performance:
    est = c.plan.estimate
    dtype = mma_dtype(c.graph) if est.flops else ""
    if dtype and not on_tensor_cores(c, device):
        # FFMA in f32 on CUDA cores: 2 FLOPs per lane and clock
        simt = next(u for u in device.units if u.kind == UnitKind.SIMT)
        peak_flops = 2 * simt.throughput.get("f32") * device.clock_hz * device.eu_count
        peak_label = "f32 CUDA-core FMA peak"
    else:
        peak_flops = device.peak_flops(dtype) if dtype in device.mma_dtypes() else 0.0
        peak_label = f"{dtype} mma peak"
    flops_per_s = est.flops / est.seconds
    bytes_per_s = est.bytes / est.seconds
    peak_bytes = device.peak_dram_bytes_per_s()
    return Performance(
        est.seconds, est.cycles_per_tile, est.tiles, est.waves, est.bound, est.unit_busy,
        est.flops, est.bytes, dtype, peak_label, flops_per_s, peak_flops,
        100 * flops_per_s / peak_flops if peak_flops else 0.0,
        bytes_per_s, peak_bytes, 100 * bytes_per_s / peak_bytes,
        est.bound == "dram" or not est.flops)


def _runners_up(result: SearchResult, order) -> tuple[RunnerUp, ...]:
    best = result.best.estimate.seconds
    return tuple(RunnerUp(i + 2, tiles_text(c.tiles, order), short_plan(c, result.device.terms),
                          c.estimate.seconds,
                          c.estimate.seconds / best, c.estimate.bound)
                 for i, c in enumerate(result.ranked[1:1 + RUNNERS_UP]))


def _rejected_groups(rejected: Iterable[Rejected]) -> tuple[RejectedGroup, ...]:
    counts = Counter(r.reason for r in rejected)
    return tuple(RejectedGroup(reason, n)
                 for reason, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
