"""The analytic cost model: a timeline simulation of one EU running a plan.

Every role instance of every resident CTA is a sequential process; every sEU is a server
that runs one step at a time. A step starts when its process reaches it, its waits' phases
are complete and its unit is free. Its unit is busy for

    issue_latency + work / throughput        (work split over the role's instances)

and its result (and its arrives) land `latency` cycles after that. The issuing process
moves on after the issue latency when the unit is async, after completion when it is not.

Numbers: throughputs and latencies from the device YAML; copy throughput is also capped by
the EU's share of L2 bandwidth (tiles are re-read from L2 by neighbouring CTAs); the whole
kernel cannot beat its unique DRAM traffic at the device's DRAM bandwidth. Long loops are
simulated for a few iterations and extrapolated linearly from the steady state.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Mapping

from ..devices import Device, UnitKind
from ..stask.graph import STask, STaskGraph, TaskKind, TaskOp
from ..sema import typed as T
from ..sema.dtypes import DTYPE_BYTES
from ..lower.atoms import rate_dtype
from .plan import Estimate, Plan, walk_steps
from .results import Dependences, awaited, dependences, result_key
from .turns import timed
from .unroll import Exec, unroll

SIM_ITERATIONS = 16   # iterations of the longest loop simulated before extrapolating


@dataclass
class Timeline:
    cycles: float
    busy: dict[str, float]                     # unit -> busy cycles
    spans: list[tuple[str, str, str, float, float]] = field(default_factory=list)
    # (process, unit, task, start, end) for the Gantt chart
    deadlock: str | None = None
    ctas: int = 1                              # CTAs simulated side by side on one EU


# a gathered row is a request of its own: its position read from the index tensor and its
# first sector fetched apart from its neighbours' (no coalescing across rows)
SECTOR_BYTES = 32


def gathered_bytes(task: STask) -> int:
    """The extra bytes a gathered (scattered) copy costs: a sector per row for its
    position and one per row for the row's own request."""
    if task.gathered is None or not task.shape or not isinstance(task.shape[0], int):
        return 0
    return 2 * SECTOR_BYTES * task.shape[0]


def step_cycles(task: STask, unit, device: Device, instances: int, issue=None,
                warps: int = 0) -> float:
    """Cycles `unit` is busy running one execution of `task` (one instance's share).
    `issue`: what the built kernel issues per warp for it (Plan.issue), over `warps`
    warps -- then the count is timed, not guessed from the task's work."""
    if issue is not None and warps and task.kind != TaskKind.COPY:
        return _issued_cycles(task, unit, device, issue, warps, instances)
    w = task.work
    if task.kind == TaskKind.COPY:
        rate = unit.throughput.get("bytes", 0) or 1.0
        rate = min(rate, device.l2_bytes_per_cycle_per_eu)
        # the built copy's bytes where the lowering counted them (TMA's are the task's)
        moved = issue.copy_bytes if issue is not None and issue.copy_bytes else w.bytes
        nbytes = moved + gathered_bytes(task)
        shares = instances if task.op != TaskOp.LOAD else 1
        issued = _issued_copy_cycles(device, unit, issue, warps) / shares \
            if issue is not None and warps else 0.0
        return unit.issue_latency_cycles + max(nbytes / rate / shares, issued)
    if task.kind == TaskKind.MMA and unit.kind != UnitKind.MMA:
        # on CUDA cores: one f32 FMA (2 FLOPs) per lane and result, whatever the inputs
        rate = unit.throughput.get("f32") or max(unit.throughput.values())
        return unit.issue_latency_cycles + w.mma_flops / 2 / rate / instances
    if task.kind == TaskKind.MMA:
        # the YAML's own rate where it has one (sm90's FP8 is wgmma's), else the widened one
        rate = unit.throughput.get(task.mma_dtype) or \
            unit.throughput.get(rate_dtype(device, task.mma_dtype))
        return unit.issue_latency_cycles + w.mma_flops / rate / instances
    simt = unit.throughput.get("f32") or max(unit.throughput.values())
    cycles = w.simt_ops / simt
    sfu = device.units_of(UnitKind.SFU)
    if sfu and w.sfu_ops:
        rate = sfu[0].throughput.get("f32") or max(sfu[0].throughput.values())
        cycles = max(cycles, w.sfu_ops / rate)
    return unit.issue_latency_cycles + cycles / instances


def _issued_copy_cycles(device: Device, unit, issue, warps: int) -> float:
    """What the built copy issues, timed: its threads' address and predicate instructions
    and, where the copy goes through registers (CDNA's register-staged copies, a
    synchronous copy's loads and stores), its stores to shared memory. The bytes bound it
    too (step_cycles takes the larger)."""
    cycles = issue.simt * warps * device.resources.warp_size / _simt_rate(device, unit)
    return max(cycles, _shared_cycles(device, issue, warps))


def _simt_rate(device: Device, unit) -> float:
    """Lane operations per cycle of the CUDA cores that issue for `unit`'s steps."""
    simt_unit = unit if unit.kind == UnitKind.SIMT else \
        (device.units_of(UnitKind.SIMT) or [unit])[0]
    return simt_unit.throughput.get("f32") or max(simt_unit.throughput.values())


def _shared_cycles(device: Device, issue, warps: int) -> float:
    """Cycles `warps` warps' shared-memory traffic holds the pipe: a warp's 4-byte shared
    access, and its fragment loads (a 2-byte read of a strided MFMA operand is timed as a
    fragment load too: it takes the LDS's passes all the same), and its shuffles."""
    res = device.resources
    return (issue.shuffles / res.exchanges_per_cycle
            + (issue.shared * res.warp_size * 4 + issue.fragment_loads * res.fragment_load_bytes)
            / res.shared_bytes_per_cycle) * warps


def _issued_cycles(task: STask, unit, device: Device, issue, warps: int,
                   instances: int) -> float:
    lanes = device.resources.warp_size
    shared = _shared_cycles(device, issue, warps)
    if task.kind == TaskKind.MMA and unit.kind == UnitKind.MMA:
        # the YAML's own rate where it has one (sm90's FP8 is wgmma's), else the widened one
        rate = unit.throughput.get(task.mma_dtype) or \
            unit.throughput.get(rate_dtype(device, task.mma_dtype))
        # a tiling with copies (atoms.Tiling.replicas) runs each atom on several warps
        flops = task.work.mma_flops * issue.mma_copies
        return unit.issue_latency_cycles + max(flops / rate / instances, shared)
    cycles = issue.simt * warps * lanes / _simt_rate(device, unit)
    sfu = device.units_of(UnitKind.SFU)
    if sfu and issue.sfu:
        srate = sfu[0].throughput.get("f32") or max(sfu[0].throughput.values())
        cycles = max(cycles, issue.sfu * warps * lanes / srate)
    return unit.issue_latency_cycles + max(cycles, shared)


def role_dependences(plan: Plan, graph: STaskGraph, device: Device) -> dict[str, Dependences]:
    """Each role's Dependences (ptc.sched.results), by role name."""
    placed = {r.name: {s.task: s.unit for s in walk_steps(r.body) if not s.is_sync}
              for r in plan.roles}
    return {r: dependences(graph, device, units) for r, units in placed.items()}


def simulate_timeline(plan: Plan, graph: STaskGraph, device: Device,
                      trips: Mapping[str, int], ctas: int = 1, record: bool = False,
                      deps: Mapping[str, Dependences] | None = None) -> Timeline:
    """`deps`: role_dependences(plan, graph, device), where the caller has them."""
    return _TimelineRun(plan, graph, device, trips, ctas, record, deps).run()


class _Fact:
    """What the simulation reads of one execution, computed once per unrolled process
    (the CTAs share them): its step, unit (None for a sync step), duration, the keys of
    the async results it waits for with their leads, and the key it records its own
    under. (A plain class with slots: tens of thousands are made per search.)"""

    __slots__ = ("step", "unit", "cycles", "needs", "key")

    def __init__(self, step, unit, cycles: float, needs: tuple, key: tuple) -> None:
        self.step, self.unit, self.cycles, self.needs, self.key = step, unit, cycles, needs, key


class _TimelineRun:
    """One simulate_timeline: every process (cta, role, instance) at its next step, the
    units' and barriers' state, and the steps' start times."""

    def __init__(self, plan: Plan, graph: STaskGraph, device: Device,
                 trips: Mapping[str, int], ctas: int, record: bool,
                 deps: Mapping[str, Dependences] | None) -> None:
        self.plan, self.device, self.ctas, self.record = plan, device, ctas, record
        self.tasks = {t.name: t for t in graph.tasks}
        self.roles = {r.name: r for r in plan.roles}
        self.unrolled = timed(plan, unroll(plan, lambda v, outer: trips[v]),
                              lambda unit: device.unit(unit).kind)
        self.barriers = self.unrolled.barriers
        deps = deps if deps is not None else role_dependences(plan, graph, device)
        self.cost_cache: dict[tuple, float] = {}
        facts = {key: [self.fact(key[0], e, deps[key[0]]) for e in execs]
                 for key, execs in self.unrolled.procs.items()}
        self.procs: dict[tuple, list[_Fact]] = {}
        for cta in range(ctas):
            for (role, inst), execs in facts.items():
                self.procs[(cta, role, inst)] = execs
        self.pos = {p: 0 for p in self.procs}
        self.ready = {p: 0.0 for p in self.procs}
        self.unit_free: dict[str, float] = {}
        self.busy: dict[str, float] = {}
        self.arrive_count: dict[tuple, int] = {}     # (cta, barrier, process) -> arrives so far
        self.phase_arrivals: dict[tuple, list[float]] = {}  # (cta, barrier, phase) -> times
        self.wait_count: dict[tuple, int] = {}       # (cta, barrier, process) -> waits so far
        self.spans: list[tuple[str, str, str, float, float]] = []
        self.done = {p: {} for p in self.procs}      # a process's async results' times

    def fact(self, role: str, e: Exec, deps: Dependences) -> _Fact:
        step = e.step
        if step.is_sync:
            return _Fact(step, None, 0.0, (), ())
        return _Fact(step, self.device.unit(step.unit), self.cycles(role, step),
                     awaited(deps, e), result_key(e))

    def run(self) -> Timeline:
        """Start, again and again, the step that can start first (the first process in
        order on a tie) until every process is done or none can start."""
        procs, start_time = self.procs, self.start_time
        live = sorted(p for p in procs if procs[p])
        while live:
            best, best_t = None, None
            for p in live:
                t = start_time(p)
                if t is not None and (best_t is None or t < best_t):
                    best, best_t = p, t
            if best is None:
                stuck = live[0]
                f = procs[stuck][self.pos[stuck]]
                return Timeline(math.inf, self.busy, self.spans,
                                deadlock=f"{stuck[1]} blocks at {f.step.task} waiting on "
                                         f"{', '.join(f.step.waits)}", ctas=self.ctas)
            if self.start(best, best_t):
                live.remove(best)
        end = max(self.ready.values(), default=0.0)
        end = max([end] + [s[4] for s in self.spans])
        return Timeline(end, self.busy, self.spans, ctas=self.ctas)

    def phase_time(self, cta, bname, phase) -> float | None:
        """When barrier `bname`'s `phase` completes in `cta` (None: not yet)."""
        b = self.barriers[bname]
        if phase < b.initial:
            return 0.0
        times = self.phase_arrivals.get((cta, bname, phase), ())
        return max(times) if len(times) >= b.arrivals else None

    def cycles(self, role: str, step) -> float:
        """Cycles a process of `role` keeps its unit busy with `step` (step_cycles, once
        per task, unit and role)."""
        key = (step.task, step.unit, role)
        cost_cache = self.cost_cache
        if key not in cost_cache:
            share = self.unrolled.share[role]     # lockstep instances: one process, all warps
            r = self.roles[role]
            cost_cache[key] = step_cycles(self.tasks[step.task], self.device.unit(step.unit),
                                          self.device, share, self.plan.issue_of(step.task),
                                          r.warps * r.instances // share)
        return cost_cache[key]

    def start_time(self, p) -> float | None:
        """When process p's next step can start (None: a wait's phase is not complete)."""
        f = self.procs[p][self.pos[p]]
        t = self.ready[p]
        cta = p[0]
        for w in f.step.waits:
            pt = self.phase_time(cta, w, self.wait_count.get((cta, w, p), 0))
            if pt is None:
                return None
            if pt > t:
                t = pt
        if f.unit is not None:
            free = self.unit_free.get(f.step.unit, 0.0)
            if free > t:
                t = free
            done = self.done[p]
            for key, lead in f.needs:
                at = done.get(key)
                if at is not None and at - lead * f.cycles > t:
                    t = at - lead * f.cycles
        return t

    def start(self, p, start: float) -> bool:
        """Run process p's next step from `start`: its waits, its unit's work, its
        arrives. True after its last step."""
        f = self.procs[p][self.pos[p]]
        cta = p[0]
        for w in f.step.waits:
            self.wait_count[(cta, w, p)] = self.wait_count.get((cta, w, p), 0) + 1
        if f.unit is None:
            done = start
            self.ready[p] = start
        else:
            done = self.issue(p, f, start)
        for a in f.step.arrives:
            self.arrive(p, f, a, start, done)
        self.pos[p] += 1
        if self.pos[p] >= len(self.procs[p]):
            self.ready[p] = max(self.ready[p], done)
            return True
        return False

    def issue(self, p, f: _Fact, start: float) -> float:
        """Occupy f's unit from `start`; when p may go on and when f's result lands (the
        time returned)."""
        unit, dur = f.unit, f.cycles
        end = start + dur
        done = end + unit.latency_cycles
        self.unit_free[f.step.unit] = end
        self.busy[f.step.unit] = self.busy.get(f.step.unit, 0.0) + dur
        self.ready[p] = start + unit.issue_latency_cycles if unit.is_async else done
        if unit.is_async:
            self.done[p][f.key] = done
        if self.record:
            self.spans.append((f"{p[1]}{p[2]}" if self.unrolled.share[p[1]] > 1 else p[1],
                               f.step.unit, f.step.task, start, end))
        return done

    def arrive(self, p, f: _Fact, a: str, start: float, done: float) -> None:
        """Process p arrives on barrier `a`: a turn as soon as f is issued, others when f's
        result lands (a lockstep process arrives for all its instances)."""
        cta = p[0]
        k = self.arrive_count.get((cta, a, p), 0)
        self.arrive_count[(cta, a, p)] = k + 1
        b = self.barriers[a]
        phase = k + (b.initial if b.kind in ("empty", "turn") else 0)
        unit = f.unit or self.device.unit(f.step.unit)
        at = start + unit.issue_latency_cycles if b.kind == "turn" else done
        self.phase_arrivals.setdefault((cta, a, phase), []).extend(
            [at] * self.unrolled.weight[p[1]])


# ---- the whole kernel ------------------------------------------------------------------
def loop_trips(graph: STaskGraph, dims: Mapping[str, int]) -> dict[str, float]:
    """Average trip count of every loop over the grid (causal `until` bounds included)."""
    from ..interp import tile_count
    out: dict[str, float] = {}
    for r in graph.loop_regions():
        loop = r.loop
        size = _extent(graph, loop.axis.size)
        full = tile_count(dims[loop.axis.dim], size)
        bound = known_bound(loop.until)
        if bound is None:
            # no bound, or one read from a tensor (a sequence's length) is data: planned
            # as the dim's whole trip count, the most it can be
            out[r.name] = full
            continue
        # evaluate `until` over the grid's tile indices (the loop bound depends on them)
        out[r.name] = _average_until(graph, replace(loop, until=bound), dims, size, full)
    return out


def known_bound(until):
    """The part of an `until` bound known without reading memory: the bound, or where it is
    min(...) of a read and other terms, the min of the others (the most it can be: a split
    of flash-decoding walks at most its share of the pages); None where there is none."""
    if until is None or not T.reads_memory(until):
        return until
    if isinstance(until, T.Elementwise) and until.op == "min":
        known = [a for a in until.args if not T.reads_memory(a)]
        if len(known) == 1:
            return known[0]
        if known:
            return replace(until, args=tuple(known))
    return None


def _extent(graph: STaskGraph, e) -> int:
    from ..stask.propagate import extent_of
    return extent_of(graph.kernel, graph.tiles, e)


def _average_until(graph, loop, dims, size, full) -> float:
    from ..interp import Machine, tile_count
    import itertools
    import numpy as np
    axes = graph.grid.axes
    tile_axes = [(a, tile_count(dims[a.dim], _extent(graph, a.size)) if a.size is not None else 1)
                 for a in axes]
    scalars = {k: np.int32(v) for k, v in {**dims, **graph.tiles}.items()}
    m = Machine({}, scalars, dims, graph.tiles)
    counts = []
    varying = [(a, n) for a, n in tile_axes if a.size is not None]
    for point in itertools.product(*(_spread(n) for _, n in varying)):
        for (a, _), idx in zip(varying, point):
            m.scalars[a.var] = np.int32(idx)
        for a, n in tile_axes:
            if a.size is None:
                m.scalars[a.var] = np.int32(0)
        bound = min(dims[loop.axis.dim], int(m.eval(loop.until)))
        counts.append(tile_count(bound, size))
    return sum(counts) / max(len(counts), 1)


SAMPLED_TILES = 64   # tile indices per grid axis at which an `until` bound is evaluated


def _spread(n: int) -> range | list[int]:
    """The tile indices of an axis of n tiles at which a loop's `until` bound is evaluated:
    all of them, or the middles of SAMPLED_TILES equal strata. (The first 64 alone made a
    causal loop over 256 query tiles look a quarter as long as it is, so the search took
    BM=32 tiles 2.6x slower on an H200 than the BM=128 ones it rated slower.)"""
    if n <= SAMPLED_TILES:
        return range(n)
    return [(2 * i + 1) * n // (2 * SAMPLED_TILES) for i in range(SAMPLED_TILES)]


def grid_tiles(graph: STaskGraph, dims: Mapping[str, int]) -> int:
    from ..interp import tile_count
    n = 1
    for a in graph.grid.axes:
        n *= tile_count(dims[a.dim], _extent(graph, a.size)) if a.size is not None else dims[a.dim]
    return n


def occupancy(plan: Plan, device: Device) -> int:
    """Blocks of the plan resident on one EU: its roles' registers, its threads and its
    shared memory (a plan as built carries the lowered kernel's), by the device's one
    formula (Resources.resident_blocks)."""
    res = device.resources
    regs = sum(r.registers * r.warps * r.instances * res.warp_size for r in plan.roles)
    return res.resident_blocks(plan.launch.threads, max(regs, 1), plan.launch.dynamic_smem)


def executions(graph: STaskGraph, trips: Mapping[str, float]) -> dict[str, float]:
    """How many times each task runs per tile."""
    return {t.name: math.prod((trips[r] for r in graph.region_path(t.region)), start=1.0)
            for t in graph.tasks}


def estimate(plan: Plan, graph: STaskGraph, device: Device, dims: Mapping[str, int],
             record: bool = False) -> tuple[Estimate, Timeline]:
    trips = loop_trips(graph, dims)
    occ = occupancy(plan, device)
    if occ == 0:
        return Estimate(math.inf, 0, 0, math.inf, 0, 0, (), "does not fit"), Timeline(math.inf, {})
    tiles = grid_tiles(graph, dims)
    # the block scheduler spreads a small grid over the EUs before it stacks blocks on one
    resident = max(1, min(occ, math.ceil(tiles / device.eu_count)))
    ctas = min(resident, 2)
    longest = max(trips, key=lambda k: trips[k], default=None)
    sim_trips = {k: max(1, round(v)) for k, v in trips.items()}
    if longest is not None and sim_trips[longest] > SIM_ITERATIONS:
        n = sim_trips[longest]
        lo, hi = SIM_ITERATIONS // 2, SIM_ITERATIONS
        deps = role_dependences(plan, graph, device)     # the same for both runs
        t_lo = simulate_timeline(plan, graph, device, {**sim_trips, longest: lo}, ctas,
                                 deps=deps)
        t_hi = simulate_timeline(plan, graph, device, {**sim_trips, longest: hi}, ctas, record,
                                 deps=deps)
        slope = (t_hi.cycles - t_lo.cycles) / (hi - lo)
        cycles = t_hi.cycles + (n - hi) * slope
        scale = cycles / t_hi.cycles if t_hi.cycles else 1.0
        timeline = Timeline(cycles, {u: b * scale for u, b in t_hi.busy.items()}, t_hi.spans,
                            t_hi.deadlock, ctas)
    else:
        timeline = simulate_timeline(plan, graph, device, sim_trips, ctas, record)
    if timeline.deadlock:
        return Estimate(math.inf, 0, 0, math.inf, 0, 0, (), "deadlock"), timeline
    waves = tiles / (device.eu_count * occ)
    # ctas CTAs were simulated side by side; more resident CTAs share the same units
    wave_cycles = timeline.cycles * max(1.0, resident / ctas)
    per_cta = wave_cycles / resident
    # non-persistent launch: a partial last wave costs a whole one
    cycles_total = math.ceil(waves) * wave_cycles
    seconds = cycles_total / device.clock_hz
    execs = executions(graph, trips)
    flops = sum(t.work.mma_flops * execs[t.name] for t in graph.tasks) * tiles
    unique = _unique_bytes(graph, dims, execs, tiles)
    dram_seconds = unique / device.peak_dram_bytes_per_s()
    bound = "dram" if dram_seconds > seconds else _busiest(timeline)
    seconds = max(seconds, dram_seconds)
    busy = tuple(sorted(((u, b / timeline.cycles) for u, b in timeline.busy.items()),
                        key=lambda x: -x[1])) if timeline.cycles else ()
    return Estimate(per_cta, tiles, waves, seconds, float(flops), float(unique), busy,
                    bound), timeline


def persistent_estimate(est: Estimate, device: Device) -> Estimate:
    """`est` for a persistent launch: the grid's tiles spread over exactly the resident
    CTAs, so a partial last wave costs its share instead of a whole wave (never less than
    the unique DRAM traffic takes)."""
    if not (est.waves > 1 and math.isfinite(est.seconds)):
        return est
    seconds = est.seconds * est.waves / math.ceil(est.waves)
    return replace(est, seconds=max(seconds, est.bytes / device.peak_dram_bytes_per_s()))


def plan_estimate(plan: Plan, graph: STaskGraph, device: Device,
                  dims: Mapping[str, int]) -> Estimate:
    """The model's estimate of `plan` as it launches: `estimate`, and for a persistent
    launch `persistent_estimate` (what the search ranked it by)."""
    est, _ = estimate(plan, graph, device, dims)
    return persistent_estimate(est, device) if plan.launch.persistent else est


def _busiest(t: Timeline) -> str:
    return max(t.busy, key=t.busy.get) if t.busy else ""


def _unique_bytes(graph: STaskGraph, dims: Mapping[str, int], execs: Mapping[str, float],
                  tiles: int) -> float:
    """The DRAM bytes the launch cannot avoid: each tensor its copies move once, or what
    they move where that is less (a paged KV cache's pages that no request's table names are
    never read). A tensor no copy of this grid moves is not counted: another grid's (a grid
    keeps its kernel's whole signature), or an index table read element by element."""
    moved: dict[str, float] = {}
    for t in graph.tasks:
        if t.tensor is not None:
            moved[t.tensor] = moved.get(t.tensor, 0.0) + t.work.bytes * execs[t.name] * tiles
    total = 0.0
    k = graph.kernel
    for p in k.inputs + k.outputs:
        if hasattr(p, "dims"):
            size = math.prod(p.shape_in(dims)) * DTYPE_BYTES[p.dtype]
            total += min(size, moved.get(p.name, 0.0))
    return total
