"""`ptc explain`: what the schedule search chose, and why, in numbers and in words.

    from ptc.explain import explain, render_text, to_json, to_svg
    expl = explain(search(kernel, device, dims))      # an Explanation: plain frozen data
    render_text(expl, Console())                       # tables, a Gantt chart, the reasons
    to_json(expl); to_svg(expl)                        # the same data; the chart as an SVG

An Explanation holds the winner's sTask-graph, tiles and plan, its estimate against the
device's peak, a window of its simulated timeline (a few steady-state iterations of the
pipelined loop, one lane per (process, sEU)), the runners-up, the rejected candidates
grouped by reason, and the reasons the winner won. Every reason compares the winner with the
nearest candidate that differs in one respect (pipeline stages, consumer warpgroups, warps,
tiles, style, no pipelining at all) and quotes the cost model's numbers for both.
"""
from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Callable, Iterable

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .sched.construct import pipelined_loop
from .sched.cost import SIM_ITERATIONS, _mma_dtype, estimate, executions, loop_trips, occupancy
from .sched.search import Candidate, Rejected, SearchResult
from .stask import print_graph
from .stask.graph import STaskGraph

TIMELINE_ITERATIONS = 3     # steady-state iterations of the pipelined loop shown
RUNNERS_UP = 5
IDLE = "·"


# ---- the data -------------------------------------------------------------------------
@dataclass(frozen=True)
class TaskRow:
    name: str
    kind: str                   # copy | mma | simt
    op: str
    loop: str                   # the enclosing loop's index, "" in the grid body
    shape: tuple[int, ...]
    dtype: str
    bytes: int                  # per execution
    mma_flops: int
    simt_ops: int
    sfu_ops: int
    runs: float                 # executions per output tile


@dataclass(frozen=True)
class RoleRow:
    name: str
    warps: int
    threads: int
    registers: int              # per thread
    instances: int
    steps: tuple[str, ...]      # "task@unit" in program order


@dataclass(frozen=True)
class BufferRow:
    name: str
    value: str
    producer: str
    consumers: tuple[str, ...]
    space: str
    stages: int
    slot_bytes: int
    bytes: int                  # all stages
    dtype: str
    shape: tuple[int, ...]
    layout: str


@dataclass(frozen=True)
class PlanSummary:
    description: str            # e.g. "warp-specialized, 2 stages, 2 consumer warpgroup(s)"
    style: str
    stages: int
    pipelined: str              # the pipelined loop, "" when none
    roles: tuple[RoleRow, ...]
    buffers: tuple[BufferRow, ...]
    grid: tuple[str, ...]
    threads: int
    smem_bytes: int
    raster: str
    persistent: bool


@dataclass(frozen=True)
class Performance:
    seconds: float
    cycles_per_tile: float
    tiles: int
    waves: float
    bound: str                  # a unit name, or "dram"
    unit_busy: tuple[tuple[str, float], ...]
    flops: float                # mma FLOPs of the whole kernel
    bytes: float                # unique DRAM bytes
    mma_dtype: str              # "" without mma work
    flops_per_s: float
    peak_flops_per_s: float
    flops_pct: float            # of the mma peak for mma_dtype (0 without mma work)
    bytes_per_s: float
    peak_bytes_per_s: float
    bytes_pct: float            # of the DRAM bandwidth
    memory_bound: bool


@dataclass(frozen=True)
class Span:
    process: str                # role, or role + instance ("consumer1")
    unit: str
    task: str
    start: float                # cycles
    end: float


@dataclass(frozen=True)
class Lane:
    process: str
    unit: str
    busy: float                 # fraction of the window this lane's unit works for it

    @property
    def label(self) -> str:
        return f"{self.process} {self.unit}"


@dataclass(frozen=True)
class LegendEntry:
    task: str
    letter: str
    colour: str
    kind: str


@dataclass(frozen=True)
class TimelineView:
    cycles: float               # the whole tile's cycles (extrapolated for long loops)
    simulated: float            # cycles actually simulated (where the spans end)
    ctas: int                   # CTAs simulated side by side on one EU (they share units)
    loop: str                   # the loop whose iterations mark the window
    iterations: int             # how many of them the window shows (0: everything)
    first_iteration: int
    start: float                # the window, in cycles
    end: float
    lanes: tuple[Lane, ...]
    legend: tuple[LegendEntry, ...]
    spans: tuple[Span, ...]     # every recorded span, window or not

    def visible(self) -> list[Span]:
        """The spans that overlap the window (they are drawn clipped to it)."""
        return [s for s in self.spans if s.end > self.start and s.start < self.end]

    def entry(self, task: str) -> LegendEntry:
        for e in self.legend:
            if e.task == task:
                return e
        raise KeyError(task)


@dataclass(frozen=True)
class RunnerUp:
    rank: int                   # 2 for the runner-up
    tiles: str
    plan: str
    seconds: float
    ratio: float                # seconds / the winner's
    bound: str


@dataclass(frozen=True)
class Reason:
    aspect: str     # bound | stages | consumers | warps | style | pipelining | tiles | launch
    text: str
    other: str = ""             # the candidate it compares with ("" when none)
    ratio: float | None = None  # the other's time / the winner's


@dataclass(frozen=True)
class RejectedGroup:
    reason: str
    count: int


@dataclass(frozen=True)
class Explanation:
    kernel: str
    device: str
    device_description: str
    dims: tuple[tuple[str, int], ...]
    tiles: tuple[tuple[str, int], ...]      # in the kernel's declaration order
    graph_text: str                          # print_graph of the winner's propagated graph
    tasks: tuple[TaskRow, ...]
    plan: PlanSummary
    performance: Performance
    timeline: TimelineView
    runners_up: tuple[RunnerUp, ...]
    why: tuple[Reason, ...]
    rejected: tuple[RejectedGroup, ...]
    candidates: int                          # plans ranked
    rejected_total: int
    search_seconds: float

    @property
    def tiles_text(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.tiles)


# ---- gathering ------------------------------------------------------------------------
def explain(result: SearchResult, iterations: int = TIMELINE_ITERATIONS) -> Explanation:
    best = result.best
    order = [t.name for t in result.kernel.tiles]
    return Explanation(
        kernel=result.kernel.name,
        device=result.device.name,
        device_description=result.device.description,
        dims=tuple(result.dims),
        tiles=_ordered(best.tiles, order),
        graph_text=print_graph(best.graph),
        tasks=_task_rows(best.graph, dict(result.dims)),
        plan=_plan_summary(best),
        performance=_performance(best, result.device),
        timeline=_timeline(best, result, iterations),
        runners_up=_runners_up(result, order),
        why=why(result),
        rejected=_rejected_groups(result.rejected),
        candidates=len(result.ranked),
        rejected_total=len(result.rejected),
        search_seconds=result.seconds,
    )


def _ordered(tiles, order: list[str]) -> tuple[tuple[str, int], ...]:
    d = dict(tiles)
    return tuple((k, d[k]) for k in order if k in d) + tuple(
        (k, v) for k, v in tiles if k not in order)


def tiles_text(tiles, order: list[str] | None = None) -> str:
    return " ".join(f"{k}={v}" for k, v in _ordered(tiles, order or []))


def _task_rows(graph: STaskGraph, dims) -> tuple[TaskRow, ...]:
    runs = executions(graph, loop_trips(graph, dims))
    return tuple(TaskRow(t.name, t.kind, t.op, t.region, tuple(int(e) for e in t.shape),
                         t.dtype, t.work.bytes, t.work.mma_flops, t.work.simt_ops,
                         t.work.sfu_ops, runs[t.name])
                 for t in graph.tasks)


def _plan_summary(c: Candidate) -> PlanSummary:
    p = c.plan
    roles = []
    for role in p.roles:
        steps = tuple(f"{s.task}@{s.unit}" for r, s in p.steps()
                      if r.name == role.name and s.task != "sync")
        threads = role.warps * role.instances * _warp_size(p)
        roles.append(RoleRow(role.name, role.warps, threads, role.registers, role.instances,
                             steps))
    buffers = tuple(BufferRow(b.name, b.value, b.producer, b.consumers, b.space, b.stages,
                              b.slot_bytes, b.slot_bytes * b.stages, b.dtype, b.shape, b.layout)
                    for b in p.buffers)
    return PlanSummary(short_plan(c), p.style, p.stages, p.pipelined, tuple(roles),
                       buffers, p.launch.grid, p.launch.threads, p.launch.dynamic_smem,
                       p.launch.raster, p.launch.persistent)


def _warp_size(plan) -> int:
    warps = sum(r.warps * r.instances for r in plan.roles)
    return plan.launch.threads // warps if warps else 32


def mma_dtype(graph: STaskGraph) -> str:
    """The input dtype of the kernel's mma work ("" when it has none)."""
    for t in graph.tasks:
        if t.kind == "mma":
            return _mma_dtype(t)
    return ""


def _performance(c: Candidate, device) -> Performance:
    est = c.plan.estimate
    dtype = mma_dtype(c.graph) if est.flops else ""
    peak_flops = device.peak_flops(dtype) if dtype in device.mma_dtypes() else 0.0
    flops_per_s = est.flops / est.seconds
    bytes_per_s = est.bytes / est.seconds
    peak_bytes = device.peak_dram_bytes_per_s()
    return Performance(
        est.seconds, est.cycles_per_tile, est.tiles, est.waves, est.bound, est.unit_busy,
        est.flops, est.bytes, dtype, flops_per_s, peak_flops,
        100 * flops_per_s / peak_flops if peak_flops else 0.0,
        bytes_per_s, peak_bytes, 100 * bytes_per_s / peak_bytes,
        est.bound == "dram" or not est.flops)


def _runners_up(result: SearchResult, order) -> tuple[RunnerUp, ...]:
    best = result.best.estimate.seconds
    return tuple(RunnerUp(i + 2, tiles_text(c.tiles, order), short_plan(c), c.estimate.seconds,
                          c.estimate.seconds / best, c.estimate.bound)
                 for i, c in enumerate(result.ranked[1:1 + RUNNERS_UP]))


def _rejected_groups(rejected: Iterable[Rejected]) -> tuple[RejectedGroup, ...]:
    counts = Counter(r.reason for r in rejected)
    return tuple(RejectedGroup(reason, n)
                 for reason, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


# ---- the timeline ---------------------------------------------------------------------
PALETTE = {
    "copy": ("#8ecae6", "#5fa8d3", "#bde0fe", "#48cae4", "#a9def9"),
    "mma": ("#ffb703", "#fb8500", "#ffd166", "#f4a261"),
    "simt": ("#90be6d", "#b5e48c", "#76c893", "#d9ed92", "#52b788"),
}
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def _timeline(c: Candidate, result: SearchResult, iterations: int) -> TimelineView:
    dims = dict(result.dims)
    _, tl = estimate(c.plan, c.graph, result.device, dims, record=True)
    spans = tuple(Span(*s) for s in tl.spans)
    simulated = max((s.end for s in spans), default=0.0)
    loop = c.plan.pipelined or pipelined_loop(c.graph)
    first, shown, start, end = _window(spans, c, dims, loop, iterations, simulated)
    legend = _legend(c.graph)
    lanes = tuple(Lane(p, u, _lane_busy(spans, p, u, start, end))
                  for p, u in _lane_order(c, result.device, spans))
    ctas = max(1, min(occupancy(c.plan, result.device), 2))
    return TimelineView(tl.cycles, simulated, ctas, loop, shown, first, start, end, lanes,
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
        units = {s.unit for r, s in c.plan.steps() if r.name == role and s.task != "sync"}
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


# ---- why the winner won ---------------------------------------------------------------
ASPECTS = ("tiles", "style", "stages", "consumers", "warps")


def _aspects(c: Candidate) -> dict:
    ch = c.choice
    return {"tiles": c.tiles, "style": ch.style, "stages": ch.stages,
            "consumers": ch.consumers, "warps": ch.warps}


def _rejected_aspects(r: Rejected) -> dict:
    ch = r.choice
    return {"tiles": r.tiles, "style": ch.style, "stages": ch.stages,
            "consumers": ch.consumers, "warps": ch.warps}


def _differs_only(a: dict, b: dict, vary: set[str]) -> bool:
    return (all(a[k] == b[k] for k in ASPECTS if k not in vary)
            and any(a[k] != b[k] for k in vary))


def peers(result: SearchResult, vary: set[str]) -> list[Candidate]:
    """Ranked candidates that differ from the winner only in `vary`, fastest first."""
    w = _aspects(result.best)
    return [c for c in result.ranked[1:] if _differs_only(_aspects(c), w, vary)]


def rejected_peers(result: SearchResult, vary: set[str]) -> list[Rejected]:
    w = _aspects(result.best)
    return [r for r in result.rejected if _differs_only(_rejected_aspects(r), w, vary)]


class _Ctx:
    """What the reasons need: the winner, the unit to watch, formatting of tiles."""

    def __init__(self, result: SearchResult) -> None:
        self.result = result
        self.best = result.best
        self.dims = dict(result.dims)
        self.order = [t.name for t in result.kernel.tiles]
        mma = result.device.units_of("mma")
        has_mma = self.best.graph.total_work().mma_flops > 0
        bound = self.best.estimate.bound
        busiest = self.best.estimate.unit_busy[0][0] if self.best.estimate.unit_busy else ""
        self.unit = mma[0].name if has_mma and mma else (bound if bound != "dram" else busiest)

    def tiles(self, c) -> str:
        return tiles_text(c.tiles, self.order)

    def ratio(self, c: Candidate) -> float:
        return c.estimate.seconds / self.best.estimate.seconds


def busy(c: Candidate, unit: str) -> float:
    return dict(c.estimate.unit_busy).get(unit, 0.0)


def slower(ratio: float) -> str:
    """How much longer a plan takes than the winner, in words."""
    if ratio >= 1.095:
        return f"{ratio:.1f}x as long"
    if ratio > 1.0005:
        return f"{(ratio - 1) * 100:.1f}% longer"
    if ratio >= 0.9995:
        return "the same time"
    return f"{(1 - ratio) * 100:.1f}% less time"


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def short_plan(c: Candidate) -> str:
    """A compact description of a candidate's Choice and launch."""
    ch = c.choice
    if ch.style == "warp_specialized":
        text = (f"warp-specialized, {plural(ch.stages, 'stage')}, "
                f"{plural(ch.consumers, 'consumer warpgroup')}")
    elif ch.style == "multistage":
        text = f"multistage, {plural(ch.stages, 'stage')}, {ch.warps} warps"
    else:
        text = f"sequential, {ch.warps} warps"
    return text + (", persistent" if c.plan.launch.persistent else "")


def _pct(x: float) -> str:
    return f"{x * 100:.0f}%"


def busy_clause(o: Candidate, w: Candidate, unit: str, form: str = "busy") -> str:
    """'the tensor_core idles 31% of the time (vs 9%)' when `o` keeps `unit` less busy than
    the winner; "" when the numbers do not show that (then they explain nothing)."""
    bo, bw = busy(o, unit), busy(w, unit)
    if not unit or bo >= bw - 0.005:
        return ""
    if form == "idle":
        return f"the {unit} idles {_pct(1 - bo)} of the time (vs {_pct(1 - bw)})"
    return f"the {unit} is busy {_pct(bo)} of the time (vs {_pct(bw)})"


def bound_phrase(c: Candidate) -> str:
    b = c.estimate.bound
    if b == "dram":
        return "DRAM-bound"
    return f"bound by {b} ({_pct(busy(c, b))} busy)"


def why(result: SearchResult) -> tuple[Reason, ...]:
    """Why the winner won: its bottleneck, then one comparison per respect in which a
    nearby candidate differs (or why that candidate could not be built)."""
    ctx = _Ctx(result)
    out: list[Reason] = [_bound_reason(ctx)]
    for rule in RULES:
        out.extend(rule(ctx))
    return tuple(out)


def _bound_reason(ctx: _Ctx) -> Reason:
    w = ctx.best
    est = w.estimate
    others = ", ".join(f"{u} {_pct(b)}" for u, b in est.unit_busy if u != est.bound)
    if est.bound == "dram":
        device = ctx.result.device
        pct = est.bytes / est.seconds / device.peak_dram_bytes_per_s()
        text = (f"bound by DRAM bandwidth: it moves {est.bytes / 1e6:.1f} MB at "
                f"{_pct(pct)} of the peak; units: {others or 'idle'}")
    else:
        text = f"bound by {est.bound}: busy {_pct(busy(w, est.bound))} of the time"
        if others:
            text += f"; {others}"
    return Reason("bound", text)


def _stages_reasons(ctx: _Ctx) -> list[Reason]:
    w = ctx.best
    s = w.choice.stages
    if w.choice.style == "sequential":
        return []
    out = []
    ranked = peers(ctx.result, {"stages"})
    fewer = [c for c in ranked if c.choice.stages < s]
    if fewer:
        o = max(fewer, key=lambda c: (c.choice.stages, -c.estimate.seconds))
        r = ctx.ratio(o)
        u = ctx.unit
        if r > 1.0005:
            idle = busy_clause(o, w, u, "idle")
            text = (f"{plural(s, 'stage')}: with {o.choice.stages} "
                    + (f"{idle} and " if idle else "") + f"the plan takes {slower(r)}")
        else:
            text = (f"{plural(s, 'stage')}: {o.choice.stages} stages take {slower(r)}; "
                    f"the tie is broken by the ranking order")
        out.append(Reason("stages", text, ctx.tiles(o) + "; " + short_plan(o), r))
    more = [c for c in ranked if c.choice.stages > s]
    if more:
        o = min(more, key=lambda c: (c.choice.stages, c.estimate.seconds))
        r = ctx.ratio(o)
        extra = o.plan.launch.dynamic_smem - w.plan.launch.dynamic_smem
        text = f"{plural(s, 'stage')}: {o.choice.stages} stages take {slower(r)}"
        clause = busy_clause(o, w, ctx.unit)
        if clause:
            text += f": {clause}"
        if extra > 0:
            text += f"; they need {extra // 1024} KB more shared memory"
        out.append(Reason("stages", text, ctx.tiles(o) + "; " + short_plan(o), r))
    else:
        unfit = [x for x in rejected_peers(ctx.result, {"stages"}) if x.choice.stages > s]
        if unfit:
            x = min(unfit, key=lambda x: x.choice.stages)
            out.append(Reason("stages", f"{plural(s, 'stage')}: {x.choice.stages} stages are not "
                                        f"possible: {x.reason}", x.choice.describe()))
    return out


def _count_reason(ctx: _Ctx, aspect: str, noun: str) -> list[Reason]:
    """Consumer warpgroups (warp-specialized) or warps (one role): the nearest other count."""
    w = ctx.best
    mine = getattr(w.choice, aspect)
    ranked = peers(ctx.result, {aspect})
    if ranked:
        o = min(ranked, key=lambda c: (abs(getattr(c.choice, aspect) - mine), c.estimate.seconds))
        n, r = getattr(o.choice, aspect), ctx.ratio(o)
        if r > 1.0005:
            clause = busy_clause(o, w, ctx.unit)
            text = (f"{plural(mine, noun)}: with {n} the plan takes {slower(r)}"
                    + (f", {clause}" if clause else ""))
        else:
            text = (f"{plural(mine, noun)}: {plural(n, noun)} take {slower(r)}; "
                    f"ties go to the smaller configuration")
        return [Reason(aspect, text, ctx.tiles(o) + "; " + short_plan(o), r)]
    unfit = rejected_peers(ctx.result, {aspect})
    if unfit:
        x = unfit[0]
        return [Reason(aspect, f"{plural(mine, noun)}: {getattr(x.choice, aspect)} is not "
                               f"possible: {x.reason}", x.choice.describe())]
    return []


def _consumers_reasons(ctx: _Ctx) -> list[Reason]:
    if ctx.best.choice.style != "warp_specialized":
        return []
    return _count_reason(ctx, "consumers", "consumer warpgroup")


def _warps_reasons(ctx: _Ctx) -> list[Reason]:
    if ctx.best.choice.style == "warp_specialized":
        return []
    return _count_reason(ctx, "warps", "warp")


STYLE_NAMES = {"warp_specialized": "warp-specialized", "multistage": "multistage",
               "sequential": "sequential"}


def _same_tiles(ctx: _Ctx, style: str) -> list[Candidate]:
    return [c for c in ctx.result.ranked[1:]
            if c.tiles == ctx.best.tiles and c.choice.style == style]


def _style_reasons(ctx: _Ctx) -> list[Reason]:
    w = ctx.best
    if w.choice.style == "sequential":
        return []
    out = []
    for style in ("warp_specialized", "multistage"):
        if style == w.choice.style:
            continue
        same = _same_tiles(ctx, style)
        mine = STYLE_NAMES[w.choice.style]
        if same:
            o = same[0]
            r = ctx.ratio(o)
            text = (f"{mine}: the best {STYLE_NAMES[style]} plan with these tiles "
                    f"({short_plan(o)}) takes {slower(r)} and is {bound_phrase(o)}")
            out.append(Reason("style", text, ctx.tiles(o) + "; " + short_plan(o), r))
            continue
        unfit = [x for x in ctx.result.rejected if x.choice.style == style]
        if unfit:
            x = next((x for x in unfit if x.tiles == w.tiles), unfit[0])
            out.append(Reason("style", f"{mine}: {STYLE_NAMES[style]} is not possible: "
                                       f"{x.reason}", x.choice.describe()))
    return out


def _pipeline(ch) -> str:
    if ch.style == "warp_specialized":
        return (f"{ch.stages}-stage warp-specialized pipeline "
                f"({plural(ch.consumers, 'consumer warpgroup')})")
    return f"{ch.stages}-stage multistage pipeline ({ch.warps} warps)"


def _pipelining_reasons(ctx: _Ctx) -> list[Reason]:
    w = ctx.best
    if w.choice.style == "sequential":
        pipelined = [c for c in ctx.result.ranked[1:]
                     if c.tiles == w.tiles and c.choice.style != "sequential"]
        if pipelined:
            o = pipelined[0]
            return [Reason("pipelining", f"no pipelining: the best pipelined plan with these "
                                         f"tiles ({short_plan(o)}) takes {slower(ctx.ratio(o))}",
                           ctx.tiles(o) + "; " + short_plan(o), ctx.ratio(o))]
        unfit = sorted((x for x in ctx.result.rejected if x.choice.style != "sequential"),
                       key=lambda x: (x.tiles != w.tiles, x.choice.style != "multistage",
                                      x.choice.stages, x.choice.warps != w.choice.warps))
        if unfit:
            x = unfit[0]
            these = "with these tiles " if x.tiles == w.tiles else f"({ctx.tiles(x)}) "
            return [Reason("pipelining", f"no pipelining: a {_pipeline(x.choice)} {these}"
                                         f"is not possible: {x.reason}", x.choice.describe())]
        return []
    same = _same_tiles(ctx, "sequential")
    if not same:
        return []
    o = same[0]
    r = ctx.ratio(o)
    u = ctx.unit
    clause = busy_clause(o, w, u)
    return [Reason("pipelining",
                   f"pipelining: the unpipelined plan ({short_plan(o)}) takes {slower(r)}"
                   + (f"; {clause}" if clause else ""),
                   ctx.tiles(o) + "; " + short_plan(o), r)]


def tile_traffic(c: Candidate, dims) -> tuple[float, float]:
    """(bytes loaded, mma FLOPs) per output tile."""
    runs = executions(c.graph, loop_trips(c.graph, dims))
    loaded = sum(t.work.bytes * runs[t.name] for t in c.graph.tasks if t.op == "load")
    flops = sum(t.work.mma_flops * runs[t.name] for t in c.graph.tasks)
    return float(loaded), float(flops)


def _tile_distance(a, b) -> int:
    da, db = dict(a), dict(b)
    return sum(da[k] != db.get(k) for k in da)


def _tiles_reasons(ctx: _Ctx, most: int = 4) -> list[Reason]:
    """Per tile size: the fastest candidate that changes only that size, else (for a larger
    size) why it could not be built."""
    w = ctx.best
    mine = dict(w.tiles)
    ranked = peers(ctx.result, {"tiles"})
    unfit = rejected_peers(ctx.result, {"tiles"})
    compared, impossible = [], []
    for name in [n for n in ctx.order if n in mine]:
        alts = [c for c in ranked if _only_tile(c.tiles, mine, name)]
        if alts:
            compared.append(_tile_comparison(ctx, alts[0]))
            continue
        bigger = [x for x in unfit if _only_tile(x.tiles, mine, name)
                  and dict(x.tiles)[name] > mine[name]]
        if bigger:
            x = bigger[0]
            impossible.append(Reason("tiles", f"{ctx.tiles(w)}: {ctx.tiles(x)} is not "
                                              f"possible: {x.reason}", ctx.tiles(x)))
    if not compared and ranked:
        o = min(ranked, key=lambda c: (_tile_distance(c.tiles, w.tiles), c.estimate.seconds))
        compared.append(_tile_comparison(ctx, o))
    return (compared + impossible)[:most]


def _only_tile(tiles, mine: dict, name: str) -> bool:
    d = dict(tiles)
    return d[name] != mine[name] and all(d[k] == v for k, v in mine.items() if k != name)


def _waves(w: float) -> str:
    return f"{w:.1f}" if w >= 10 else f"{w:.2g}"


def _tile_comparison(ctx: _Ctx, o: Candidate) -> Reason:
    w = ctx.best
    r = ctx.ratio(o)
    wb, wf = tile_traffic(w, ctx.dims)
    ob, of = tile_traffic(o, ctx.dims)
    parts = []
    if wf and of and wb:
        intensity = (ob / of) / (wb / wf)
        if abs(intensity - 1) > 0.05:
            parts.append(f"move {intensity:.1f}x the bytes per FLOP")
    ow, ww = _waves(o.estimate.waves), _waves(w.estimate.waves)
    if abs(o.estimate.waves - w.estimate.waves) > 0.05 * w.estimate.waves and ow != ww:
        parts.append(f"run {ow} waves instead of {ww}")
    if o.estimate.bound != w.estimate.bound:
        parts.append(f"are {bound_phrase(o)}")
    elif busy_clause(o, w, ctx.unit):
        u = ctx.unit
        parts.append(f"keep the {u} busy only {_pct(busy(o, u))} of the time "
                     f"(vs {_pct(busy(w, u))})")
    else:
        parts.append(f"are {bound_phrase(o)} too")
    text = (f"{ctx.tiles(w)}: {ctx.tiles(o)} tiles " + ", ".join(parts[:-1])
            + (" and " if len(parts) > 1 else "") + parts[-1] + f"; they take {slower(r)}")
    return Reason("tiles", text, ctx.tiles(o) + "; " + short_plan(o), r)


def _launch_reasons(ctx: _Ctx) -> list[Reason]:
    w = ctx.best
    if not w.plan.launch.persistent:
        return []
    waves = w.estimate.waves
    last_wave_empty = 1 - (waves - math.floor(waves))
    saved = (math.ceil(waves) - waves) / math.ceil(waves)
    return [Reason("launch", f"persistent CTAs: {waves:.2f} waves of one CTA per tile would "
                             f"leave the last wave {_pct(last_wave_empty)} empty; looping over "
                             f"the tiles in resident CTAs saves up to {_pct(saved)}")]


RULES: tuple[Callable[[_Ctx], list[Reason]], ...] = (
    _stages_reasons, _consumers_reasons, _warps_reasons, _style_reasons,
    _pipelining_reasons, _tiles_reasons, _launch_reasons)


# ---- JSON -----------------------------------------------------------------------------
def to_dict(expl: Explanation) -> dict:
    d = asdict(expl)
    d["timeline"]["visible"] = len(expl.timeline.visible())
    return d


def to_json(expl: Explanation) -> str:
    return json.dumps(to_dict(expl), indent=2) + "\n"


def to_svg(expl: Explanation) -> str:
    from .explain_svg import gantt_svg
    return gantt_svg(expl)


# ---- text -----------------------------------------------------------------------------
def fmt_seconds(s: float) -> str:
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.1f} µs"


def fmt_bytes(n: float) -> str:
    for unit, size in (("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            v = n / size
            return f"{v:.0f} {unit}" if v == int(v) or v >= 100 else f"{v:.1f} {unit}"
    return f"{n:.0f} B"


def fmt_count(n: float) -> str:
    if not n:
        return ""
    for suffix, size in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.3g}{suffix}"
    return f"{n:g}"


def render_text(expl: Explanation, console: Console, full_graph: bool = False) -> None:
    """The whole explanation on `console` (readable without colour, from 80 columns)."""
    for part in (_header, _estimate_section, _why_section, _timeline_section,
                 _plan_section, _graph_section, _runners_section, _rejected_section):
        if part is _graph_section:
            part(expl, console, full_graph)
        else:
            part(expl, console)


def ctas_text(ctas: int) -> str:
    return "1 CTA per EU" if ctas == 1 else f"{ctas} CTAs per EU share the units"


def _heading(console: Console, title: str) -> None:
    console.print()
    console.rule(Text(title, style="bold"), align="left")


def _header(expl: Explanation, console: Console) -> None:
    dims = " ".join(f"{k}={v}" for k, v in expl.dims)
    _para(console, Text.assemble(("ptc explain ", "bold"), (expl.kernel, "bold cyan"),
                                 f" on {expl.device}: {expl.device_description}"), indent=0)
    _para(console, f"dims {dims}", indent=0)
    _para(console, f"searched {plural(expl.candidates + expl.rejected_total, 'plan')} in "
                   f"{expl.search_seconds:.2f} s: {expl.candidates} ranked, "
                   f"{expl.rejected_total} rejected", indent=0)
    _para(console, Text.assemble(("winner ", "bold"), (expl.tiles_text, "bold green"), "; ",
                                 expl.plan.description), indent=0)
    if expl.runners_up:
        r = expl.runners_up[0]
        _para(console, f"runner-up {r.tiles}; {r.plan}: {r.ratio:.3f}x the winner's time",
              indent=0)


def _estimate_section(expl: Explanation, console: Console) -> None:
    p = expl.performance
    _heading(console, "Estimate")
    console.print(Text.assemble(("  time      ", "bold"), (fmt_seconds(p.seconds), "bold"),
                                f"  ({p.tiles} tiles, {p.waves:.2f} waves, "
                                f"{p.cycles_per_tile:,.0f} cycles per tile)"))
    if p.mma_dtype and p.peak_flops_per_s:
        console.print(Text.assemble(
            ("  compute   ", "bold"), (f"{p.flops_per_s / 1e12:,.0f} TFLOP/s", "bold"),
            f" = {p.flops_pct:.0f}% of the {p.mma_dtype} mma peak "
            f"({p.peak_flops_per_s / 1e12:,.0f} TFLOP/s)"))
    mark = " (the bound)" if p.bound == "dram" else ""
    console.print(Text.assemble(
        ("  memory    ", "bold"), (f"{p.bytes_per_s / 1e9:,.0f} GB/s", "bold"),
        f" = {p.bytes_pct:.0f}% of DRAM bandwidth ({p.peak_bytes_per_s / 1e9:,.0f} GB/s){mark}"))
    busy = ", ".join(f"{u} {_pct(b)}" for u, b in p.unit_busy)
    console.print(Text(f"  units     {busy}  (bound: {p.bound})"))


def _why_section(expl: Explanation, console: Console) -> None:
    _heading(console, "Why this plan")
    for r in expl.why:
        _para(console, r.text, bullet="•")


def _para(console: Console, text: str | Text, bullet: str = "", indent: int = 2) -> None:
    """A paragraph indented by `indent` columns (plus a bullet), wrapped with a hanging
    indent so that continuation lines line up under the text."""
    first = " " * indent + (f"{bullet} " if bullet else "")
    hang = " " * max(len(first), 2)
    body = text if isinstance(text, Text) else Text(text)
    lines = body.wrap(console, max(20, console.width - len(hang)), justify="default")
    for i, line in enumerate(lines):
        line.rstrip()
        console.print(Text(first if i == 0 else hang) + line)


def _timeline_section(expl: Explanation, console: Console) -> None:
    v = expl.timeline
    _heading(console, "Timeline of one EU (cycles)")
    if v.iterations:
        what = (f"iterations {v.first_iteration + 1}-{v.first_iteration + v.iterations} "
                f"of loop {v.loop} (steady state)")
    else:
        what = "the whole tile"
    _para(console, f"cycles {v.start:,.0f}-{v.end:,.0f} of {v.cycles:,.0f}: {what}; "
                   f"{ctas_text(v.ctas)}")
    label_w = min(26, max(len(lane.label) for lane in v.lanes)) if v.lanes else 10
    width = max(20, console.width - label_w - 2 - 6)
    for lane in v.lanes:
        console.print(_gantt_row(v, lane, label_w, width), no_wrap=True, crop=True)
    for line in _axis_lines(v, label_w, width):
        console.print(Text(line), no_wrap=True, crop=True)
    console.print(_legend_text(v, console.width))


def _gantt_row(v: TimelineView, lane: Lane, label_w: int, width: int) -> Text:
    row = Text("  " + lane.label[:label_w].ljust(label_w) + " ")
    cells = gantt_cells(v, lane, width)
    i = 0
    while i < width:
        j = i
        while j < width and cells[j] == cells[i]:
            j += 1
        if cells[i] is None:
            row.append(IDLE * (j - i), style="dim")
        else:
            e = v.entry(cells[i])
            row.append(e.letter * (j - i), style=f"bold black on {e.colour}")
        i = j
    row.append(f" {lane.busy * 100:3.0f}%")
    return row


def _axis_lines(v: TimelineView, label_w: int, width: int) -> list[str]:
    pad = " " * (2 + label_w + 1)
    rule = ["─"] * width
    labels = [" "] * (width + 12)
    span = (v.end - v.start) or 1.0
    free = 0
    for t in axis_ticks(v.start, v.end):
        i = min(width - 1, int((t - v.start) / span * width))
        rule[i] = "┬"
        text = f"{t:,.0f}"
        if i >= free:
            labels[i:i + len(text)] = text
            free = i + len(text) + 1
    return [pad + "".join(rule), pad + "".join(labels).rstrip()]


def _legend_text(v: TimelineView, width: int) -> Text:
    out = Text("  ")
    col = 2
    for e in v.legend:
        item = len(e.task) + 4
        if col + item > width:
            out.append("\n  ")
            col = 2
        out.append(f" {e.letter} ", style=f"bold black on {e.colour}")
        out.append(f" {e.task}  ")
        col += item + 2
    out.append(IDLE, style="dim")
    out.append(" idle")
    return out


def _table(*columns: str, right: Iterable[str] = ()) -> Table:
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, padding=(0, 1))
    right = set(right)
    for c in columns:
        t.add_column(c, justify="right" if c in right else "left", no_wrap=c != "steps")
    return t


def _row(table: Table, *cells) -> None:
    table.add_row(*(Text(str(c)) for c in cells))


def _plan_section(expl: Explanation, console: Console) -> None:
    p = expl.plan
    _heading(console, "Plan")
    loop = f"loop {p.pipelined} pipelined" if p.pipelined else "no loop pipelined"
    _para(console, f"{p.description}; {loop}")
    launch = "persistent CTAs" if p.persistent else "one CTA per tile"
    _para(console, f"launch grid ({', '.join(p.grid)}), {p.threads} threads, "
                   f"{fmt_bytes(p.smem_bytes)} shared memory, {p.raster} raster, {launch}")
    roles = _table("role", "warps", "threads", "regs/thread", "instances", "steps",
                   right=("warps", "threads", "regs/thread", "instances"))
    for r in p.roles:
        _row(roles, r.name, r.warps, r.threads, r.registers, r.instances, " ".join(r.steps))
    console.print(roles)
    if p.buffers:
        bufs = _table("buffer", "holds", "space", "dtype", "shape", "stages", "slot", "total",
                      "layout", right=("stages", "slot", "total"))
        for b in p.buffers:
            _row(bufs, b.name, b.value, b.space, b.dtype, _shape(b.shape), b.stages,
                 fmt_bytes(b.slot_bytes), fmt_bytes(b.bytes), b.layout)
        console.print(bufs)


def _shape(shape) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _graph_section(expl: Explanation, console: Console, full: bool) -> None:
    _heading(console, f"sTask graph ({expl.tiles_text})")
    if full:
        console.print(Text(expl.graph_text.rstrip()), no_wrap=True, crop=True)
        return
    t = _table("task", "kind", "loop", "tile", "bytes", "mma flops", "simt ops", "sfu ops",
               "runs/tile", right=("bytes", "mma flops", "simt ops", "sfu ops", "runs/tile"))
    for r in expl.tasks:
        _row(t, r.name, r.kind, r.loop or "-", f"{r.dtype}{_shape(r.shape)}",
             fmt_bytes(r.bytes) if r.bytes else "", fmt_count(r.mma_flops),
             fmt_count(r.simt_ops), fmt_count(r.sfu_ops), f"{r.runs:g}")
    console.print(t)


def _runners_section(expl: Explanation, console: Console) -> None:
    _heading(console, "Runners-up")
    if not expl.runners_up:
        console.print(Text("  none: only one plan was possible"))
        return
    t = _table("#", "tiles", "plan", "time", "ratio", "bound", right=("#", "time", "ratio"))
    t.columns[2].no_wrap = False
    for r in expl.runners_up:
        _row(t, r.rank, r.tiles, r.plan, fmt_seconds(r.seconds), f"{r.ratio:.3f}x", r.bound)
    console.print(t)


def _rejected_section(expl: Explanation, console: Console, shown: int = 5) -> None:
    _heading(console, f"Rejected ({expl.rejected_total})")
    if not expl.rejected:
        console.print(Text("  none"))
        return
    for g in expl.rejected[:shown]:
        console.print(Text(f"  {g.count:4d} × {g.reason}"))
    rest = expl.rejected[shown:]
    if rest:
        console.print(Text(f"  ...and {sum(g.count for g in rest)} more for "
                           f"{plural(len(rest), 'other reason')}"))
