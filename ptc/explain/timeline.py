"""The winner's simulated timeline: the window shown, its lanes and legend, Gantt cells."""
from __future__ import annotations

import math
from collections import Counter

from ..sched.construct import pipelined_loop
from ..sched.cost import SIM_ITERATIONS, estimate, executions, loop_trips
from ..sched.search import Candidate, SearchResult
from ..stask.graph import STaskGraph, TaskKind
from .model import Lane, LegendEntry, Span, TimelineView

PALETTE = {
    TaskKind.COPY: ("#8ecae6", "#5fa8d3", "#bde0fe", "#48cae4", "#a9def9"),
    TaskKind.MMA: ("#ffb703", "#fb8500", "#ffd166", "#f4a261"),
    TaskKind.SIMT: ("#90be6d", "#b5e48c", "#76c893", "#d9ed92", "#52b788"),
}
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def timeline_view(c: Candidate, result: SearchResult, iterations: int) -> TimelineView:
    dims = dict(result.dims)
    _, tl = estimate(c.plan, c.graph, result.device, dims, record=True)
    spans = tuple(Span(*s) for s in tl.spans)
    simulated = max((s.end for s in spans), default=0.0)
    loop = c.plan.pipelined or pipelined_loop(c.graph)
    first, shown, start, end = _window(spans, c, dims, loop, iterations, simulated)
    legend = _legend(c.graph)
    lanes = tuple(Lane(p, u, _lane_busy(spans, p, u, start, end))
                  for p, u in _lane_order(c, result.device, spans))
    return TimelineView(tl.cycles, simulated, tl.ctas, loop, shown, first, start, end, lanes,
                        legend, spans)


def _legend(graph: STaskGraph) -> tuple[LegendEntry, ...]:
    used: Counter = Counter()
    out = []
    for i, t in enumerate(graph.tasks):
        shades = PALETTE.get(t.kind, ("#cccccc",))
        out.append(LegendEntry(t.name, LETTERS[i % len(LETTERS)],
                               shades[used[t.kind] % len(shades)], t.kind))
        used[t.kind] += 1
    return tuple(out)


def _processes(plan) -> list[tuple[str, str]]:
    """(process name as the cost model records it, role name), in the plan's role order."""
    out = []
    for r in plan.roles:
        names = [r.name] if r.instances == 1 else [f"{r.name}{i}" for i in range(r.instances)]
        out.extend((n, r.name) for n in names)
    return out


def _lane_order(c: Candidate, device, spans) -> list[tuple[str, str]]:
    """Every (process, unit) pair the plan uses, by role then by the device's unit order."""
    unit_rank = {u.name: i for i, u in enumerate(device.units)}
    lanes = []
    for process, role in _processes(c.plan):
        units = {s.unit for r, s in c.plan.steps() if r.name == role and not s.is_sync}
        lanes.extend((process, u) for u in sorted(units, key=lambda u: unit_rank.get(u, 99)))
    seen = set(lanes)
    lanes.extend(sorted({(s.process, s.unit) for s in spans} - seen))
    return lanes


def _lane_busy(spans, process, unit, start, end) -> float:
    if end <= start:
        return 0.0
    work = sum(max(0.0, min(s.end, end) - max(s.start, start))
               for s in spans if s.process == process and s.unit == unit)
    return work / (end - start)


def _window(spans, c: Candidate, dims, loop: str, iterations: int, simulated: float):
    """(first iteration, iterations shown, start, end): `iterations` steady-state iterations
    of `loop`, marked by the starts of its heaviest task; everything when the loop is short."""
    marker = _marker_task(c.graph, loop)
    starts = sorted(s.start for s in spans if s.task == marker)
    if not marker or not starts or iterations <= 0:
        return 0, 0, 0.0, simulated
    trips = _simulated_trips(c.graph, dims)
    runs = executions(c.graph, trips)[marker]
    per_iteration = max(1, round(len(starts) / runs))   # CTAs x instances
    total = len(starts) // per_iteration
    if total <= iterations + 1:
        return 0, 0, 0.0, simulated
    first = min(2, total - iterations - 1)
    start = starts[first * per_iteration]
    end = starts[(first + iterations) * per_iteration]
    return first, iterations, start, end


def _marker_task(graph: STaskGraph, loop: str) -> str:
    tasks = [t for t in graph.tasks if t.region == loop and loop]
    if not tasks:
        return ""
    return max(tasks, key=lambda t: (t.work.mma_flops, t.work.simt_ops, t.work.bytes)).name


def _simulated_trips(graph: STaskGraph, dims) -> dict[str, int]:
    """The trip counts the cost model simulated (it caps the longest loop, then extrapolates)."""
    trips = loop_trips(graph, dims)
    sim = {k: max(1, round(v)) for k, v in trips.items()}
    longest = max(trips, key=lambda k: trips[k], default=None)
    if longest is not None and sim[longest] > SIM_ITERATIONS:
        sim[longest] = SIM_ITERATIONS
    return sim


def gantt_cells(view: TimelineView, lane: Lane, width: int) -> list[str | None]:
    """The task drawn in each of `width` cells of a lane (None: idle). A cell shows the task
    covering most of it when tasks cover at least a third of it; a span too short to win
    any cell still marks the idle cell where it starts."""
    start, end = view.start, view.end
    dt = (end - start) / width if end > start else 1.0
    cover: list[Counter] = [Counter() for _ in range(width)]
    mine = [s for s in view.visible() if s.process == lane.process and s.unit == lane.unit]
    for s in mine:
        a, b = max(s.start, start), min(s.end, end)
        for i in range(int((a - start) / dt), min(width, int(math.ceil((b - start) / dt)))):
            lo, hi = start + i * dt, start + (i + 1) * dt
            cover[i][s.task] += max(0.0, min(b, hi) - max(a, lo))
    cells: list[str | None] = [None] * width
    for i, c in enumerate(cover):
        if c and sum(c.values()) >= dt / 3:
            cells[i] = c.most_common(1)[0][0]
    shown = set(cells)
    for s in mine:
        i = min(width - 1, int((max(s.start, start) - start) / dt))
        if s.task not in shown and cells[i] is None:
            cells[i] = s.task
            shown.add(s.task)
    return cells


def axis_ticks(start: float, end: float, count: int = 5) -> list[float]:
    """Round cycle numbers for about `count` ticks over [start, end]."""
    span = end - start
    if span <= 0:
        return [start]
    raw = span / count
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 5, 10)), key=lambda s: abs(s - raw))
    first = math.ceil(start / step) * step
    out, t = [], first
    while t <= end + 1e-9:
        out.append(t)
        t += step
    return out
