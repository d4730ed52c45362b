"""The plan simulator: run a plan in NumPy, in one order its barriers allow
(docs/architecture.md).

`simulate(plan, graph, kernel, inputs, shapes, tiles)` executes the plan tile by tile (the
grid's points in row-major order, as the reference interpreter does). Within a tile, the
loops' trip counts are the tile's own (each `until` is evaluated, so causal loops vary per
tile); every role instance's program is unrolled (ptc.sched.unroll) and its issue /
completion events are run in ONE linearization of the happens-before order the verifier
uses (ptc.sched.events.build_events):

- order="producer_first": the roles that fill buffers for other roles run as far ahead as
  the barriers allow, and buffer writes land as early as possible while async reads finish
  as late as possible -- an early slot reuse (a missing `empty` wait) shows up;
- order="consumer_first": the consumers run as early as allowed and buffer writes land as
  late as possible -- a read before its producer completes (a missing `full` wait) shows up.

Ring buffers are real slot arrays: write k of a buffer stores the producer's value in
slot k % stages at the producer's completion; a read takes whatever the slot holds when the
reader issues (at first: NaN), and if the slot is overwritten before the reader completes
its result is NaN. Values a process keeps in registers are kept per producing execution.

Each step evaluates its sTask's typed statements with the interpreter's machinery
(ptc.interp.Machine): loads read the inputs with the interpreter's edge padding, stores and
atomic adds write the outputs as the interpreter does. A role with several instances (the
consumer warpgroups of a warp-specialized plan) runs every step of the whole tile in every
instance; each instance stores its share of the rows of the stored tile (the first tiled
axis, split evenly), so every instance's results reach the output. The same operations run
on the same values in the same order as in the interpreter, so a safe plan's outputs are
bitwise equal to `ptc.interp.run_kernel`'s.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from ..devices import Device, get_device
from ..interp import FLOAT_ARRAYS, NUMPY_DTYPES, Machine, tile_count, prepare, run_kernel
from ..sema import typed as T
from ..stask.graph import STaskGraph
from .plan import Plan
from .events import Events, build_events, order as topo_order

ORDERS = ("producer_first", "consumer_first")
_F32 = np.dtype(np.float32)


class SimulationError(Exception):
    """The plan cannot run (a deadlock) or does not match the graph."""


def simulate(plan: Plan | Sequence[Plan], graph: STaskGraph | Sequence[STaskGraph],
             kernel: T.TypedKernel, inputs: Mapping[str, object],
             shapes: Mapping[str, int] | None = None, tiles: Mapping[str, int] | None = None,
             order: str = "producer_first", *, device: Device | None = None,
             seed: int = 0) -> dict[str, np.ndarray]:
    """The kernel's outputs when every grid runs its plan. `plan` and `graph` may be lists,
    one per parallel grid of the kernel."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {', '.join(ORDERS)}, not {order!r}")
    plans = list(plan) if isinstance(plan, (list, tuple)) else [plan]
    graphs = list(graph) if isinstance(graph, (list, tuple)) else [graph]
    if len(plans) != len(kernel.body) or len(graphs) != len(kernel.body):
        raise SimulationError(f"kernel {kernel.name} has {len(kernel.body)} grid(s); give one "
                              f"plan and one graph for each")
    tiles = dict(tiles) if tiles is not None else dict(plans[0].tiles)
    machine = prepare(kernel, inputs, shapes=shapes, tiles=tiles, seed=seed)
    for p, g in zip(plans, graphs):
        if g.tiles is not None:
            wrong = {k: v for k, v in g.tiles.items() if machine.tiles.get(k) != v}
            if wrong:
                raise SimulationError(f"the graph was propagated for tiles {dict(g.tiles)}, "
                                      f"but the call uses {machine.tiles}")
        dev = device or get_device(p.device)
        with np.errstate(all="ignore"):
            _GridRun(p, g, dev, machine, order).run()
    return {o.name: machine.arrays[o.name] for o in kernel.outputs}


def simulate_and_compare(plan, graph, kernel: T.TypedKernel, inputs: Mapping[str, object],
                         shapes: Mapping[str, int] | None = None,
                         tiles: Mapping[str, int] | None = None,
                         order: str = "producer_first", *, device: Device | None = None,
                         seed: int = 0) -> float:
    """The largest relative error of the simulated outputs against the reference
    interpreter's: max |sim - ref| / max |ref| over every output (inf where the simulation
    produced a NaN the interpreter did not; 0.0 when bitwise equal)."""
    first = plan[0] if isinstance(plan, (list, tuple)) else plan
    tiles = dict(tiles) if tiles is not None else dict(first.tiles)
    got = simulate(plan, graph, kernel, inputs, shapes, tiles, order, device=device, seed=seed)
    ref = run_kernel(kernel, inputs, shapes=shapes, tiles=tiles, seed=seed)
    return max((relative_error(got[k], ref[k]) for k in ref), default=0.0)


def relative_error(got: np.ndarray, ref: np.ndarray) -> float:
    a = np.asarray(got).astype(np.float64)
    b = np.asarray(ref).astype(np.float64)
    if a.shape != b.shape:
        return float("inf")
    if np.array_equal(a, b, equal_nan=True):
        return 0.0
    if np.any(np.isnan(a) & ~np.isnan(b)):
        return float("inf")
    finite = np.isfinite(b)
    diff = np.abs(np.where(finite, a - b, np.where(a == b, 0.0, np.inf)))
    scale = np.max(np.abs(np.where(finite, b, 0.0)), initial=0.0)
    return float(np.max(diff) / scale) if scale > 0 else float(np.max(diff))


# ---- one grid ---------------------------------------------------------------------------
@dataclass
class _Schedule:
    ev: Events
    events: list[int]        # the linearization


class _GridRun:
    def __init__(self, plan: Plan, graph: STaskGraph, device: Device, machine: Machine,
                 order: str) -> None:
        self.plan, self.graph, self.device, self.m, self.order = plan, graph, device, machine, order
        self.tasks = {t.name: t for t in graph.tasks}
        self.loops = {r.name: r.loop for r in graph.loop_regions()}
        self.roles = {r.name: r for r in plan.roles}
        self.cache: dict[tuple, _Schedule] = {}
        self.var_types = {t.name: _var_types(t.stmts) for t in graph.tasks}

    def run(self) -> None:
        for _ in self.m.grid_points(self.graph.grid):
            self.tile()

    # trip counts of this tile's loops, for every iteration of the loops around them
    def trip_table(self) -> dict[tuple, int]:
        table: dict[tuple, int] = {}
        m = self.m

        def walk(region, outer: dict[str, int]) -> None:
            for item in region.items:
                if isinstance(item, str):
                    continue
                loop = item.loop
                for v, k in outer.items():
                    m.scalars[v] = np.int32(k)
                extent = m.dims[loop.axis.dim]
                if loop.until is not None:
                    extent = min(extent, int(m.eval(loop.until)))
                n = tile_count(extent, m.extent(loop.axis.size))
                table[(item.name, tuple(outer.items()))] = n
                for i in range(n):
                    walk(item, {**outer, item.name: i})

        walk(self.graph.root, {})
        return table

    def schedule(self, table: dict[tuple, int]) -> _Schedule:
        key = tuple(sorted(table.items()))
        if key in self.cache:
            return self.cache[key]
        trips = lambda var, outer: table[(var, tuple(outer.items()))]  # noqa: E731
        ev = build_events(self.plan, self.graph, self.device, trips)
        if ev.deadlocks:
            raise SimulationError("deadlock: " + ev.deadlocks[0][0])
        topo, left = topo_order(ev)
        if topo is None:
            raise SimulationError("deadlock: the plan's waits form a cycle")
        sched = _Schedule(ev, self.linearize(ev))
        self.cache[key] = sched
        return sched

    def linearize(self, ev: Events) -> list[int]:
        """A topological order of the events, choosing among the ready ones by `order`.

        Events are eager or late. Eager ones run in the order (class, process, program
        position); late ones run only when no eager event is ready, and then the one closest
        to unblocking another event first (one nothing waits for comes last).
        producer_first: buffer writes land first, then the roles that fill buffers for
        other roles run ahead, the rest follows, and async reads complete late.
        consumer_first: the roles that read buffers run first, the feeding roles next, and
        buffer writes land late."""
        return _ready_order(ev, _event_classes(self.plan, ev, self.order))

    # ---- one tile ---------------------------------------------------------------------
    def tile(self) -> None:
        m = self.m
        grid_scalars = {a.var: m.scalars[a.var] for a in self.graph.grid.axes}
        sched = self.schedule(self.trip_table())
        ev = sched.ev
        buffers = {b.name: b for b in self.plan.buffers}
        slots: dict[str, list] = {b.name: [None] * b.stages for b in self.plan.buffers}
        regs: dict[tuple, np.ndarray] = {}         # (process, value, producing exec) -> array
        pending: dict[int, tuple] = {}             # exec -> (results, stores, slot reads)
        produces = {b.producer: [] for b in self.plan.buffers}
        for b in self.plan.buffers:
            produces[b.producer].append(b)
        for x in sched.events:
            i = x // 2
            e = ev.execs[i]
            if e.step.is_sync:
                continue
            if x % 2 == 0:
                m.scalars.update(grid_scalars)
                pending[i] = self.issue(ev, i, slots, regs, buffers)
                continue
            env, stores, read_slots = pending.pop(i)
            task = self.tasks[e.step.task]
            stale = any(slots[b][s] is None or slots[b][s][0] != k for b, s, k in read_slots)
            if stale:
                env = {k: _poison_like(v) for k, v in env.items()}
                stores = [(s, _poison_like(v), r, ts) for s, v, r, ts in stores]
            for v in task.defines:
                if v in env:
                    regs[(e.process, v, i)] = env[v]
            for b in produces.get(task.name, []):
                k = ev.write_number[i]
                slots[b.name][k % b.stages] = (k, env[b.value] if b.value else None)
            role = self.roles[e.role]
            for s, value, region, tile_shape in stores:
                self.store(s, value, region, tile_shape, e.instance, role.instances)

    def issue(self, ev: Events, i: int, slots, regs, buffers):
        """Read the inputs and compute the step; results are committed at completion."""
        m = self.m
        e = ev.execs[i]
        task = self.tasks[e.step.task]
        for v, k in e.iters:
            m.scalars[v] = np.int32(k)
        env: dict[str, np.ndarray] = {}
        read_slots = []
        for src in ev.reads[i]:
            s0 = src.srcs[0]
            if src.buffer is not None:
                b = src.buffer
                k = ev.write_number[s0]
                held = slots[b.name][k % b.stages]
                read_slots.append((b.name, k % b.stages, k))
                value = held[1] if held is not None else None
            else:
                value = regs.get((ev.execs[s0].process, src.value, s0))
            if value is None:
                value = self.poison(task.name, src.value)
            env[src.value] = value
        m.env = env
        stores = []
        for s in task.stmts:
            if isinstance(s, T.Let):
                env[s.name] = m.eval(s.value)
            elif isinstance(s, T.Store):
                out = m.arrays[s.tensor]
                region, tile_shape = m._region(s.index, out.shape)
                stores.append((s, m.eval(s.value), region, tile_shape))
            else:
                raise SimulationError(f"{task.name} holds a {type(s).__name__}")
        return env, stores, read_slots

    def store(self, s: T.Store, value, region, tile_shape, part: int, parts: int) -> None:
        """The interpreter's store, limited to this instance's share of the rows."""
        if region is None:
            return
        out = self.m.arrays[s.tensor]
        src, dst = region
        if parts > 1 and dst:
            rows = tile_shape[0]
            lo, hi = part * rows // parts, (part + 1) * rows // parts
            d0 = dst[0]
            a, b = max(d0.start, lo), min(d0.stop, hi)
            if b <= a:
                return
            axis = next(j for j, item in enumerate(s.index) if not isinstance(item, T.Point))
            s0 = src[axis]
            src = src[:axis] + (slice(s0.start + a - d0.start, s0.start + b - d0.start),) \
                + src[axis + 1:]
            dst = (slice(a, b),) + dst[1:]
        tile = np.broadcast_to(value, tile_shape)[dst]
        if s.atomic:
            acc = out[src].astype(_F32 if out.dtype != np.int32 else np.int32) + tile
            out[src] = acc.astype(out.dtype)
        else:
            out[src] = tile

    def poison(self, task: str, value: str) -> np.ndarray:
        t = self.var_types[task].get(value)
        if t is None:
            raise SimulationError(f"{task} reads {value}, whose type is unknown")
        shape = tuple(self.m.extent(x) for x in t.shape)
        return _poison(NUMPY_DTYPES[t.dtype], shape)


# a late event's class: it runs only when no eager event is ready
LATE = 9


def _event_classes(plan: Plan, ev: Events, order: str) -> list[int]:
    """Each event's class for `order` (see _GridRun.linearize): eager classes run lowest
    first, LATE ones last."""
    writers = {b.producer for b in plan.buffers}
    readers = {c for b in plan.buffers for c in b.consumers}
    role_of_task = {s.task: r.name for r in plan.roles for s in _steps(r.body)}
    feeding = {role_of_task.get(b.producer) for b in plan.buffers
               if any(role_of_task.get(c) != role_of_task.get(b.producer)
                      for c in b.consumers)}
    n = len(ev.succ)
    cls = [0] * n
    for x in range(n):
        e = ev.execs[x // 2]
        done = x % 2 == 1
        writes = e.step.task in writers
        if order == "producer_first":
            if done and writes:
                c = 0
            elif e.role in feeding:
                c = 1
            elif done and ev.is_async[x // 2] and e.step.task in readers:
                c = LATE
            else:
                c = 2
        else:
            if done and writes:
                c = LATE
            elif e.role in feeding:
                c = 1
            else:
                c = 0
        cls[x] = c
    return cls


def _ready_order(ev: Events, cls: list[int]) -> list[int]:
    """A topological order of the events: the ready eager event first by (class, process,
    program position), else the late one closest to unblocking another."""
    proc_rank = {p: i for i, p in enumerate(ev.procs)}
    n = len(ev.succ)
    indeg = [0] * n
    for s in ev.succ:
        for b in s:
            indeg[b] += 1

    def key(x: int):
        i = x // 2
        return (cls[x], proc_rank[ev.execs[i].process], ev.position[i], x % 2, x)

    eager: list = []
    late: list = []

    def ready(x: int) -> None:
        if cls[x] == LATE:
            late.append(key(x))
        else:
            heapq.heappush(eager, key(x))

    for x in range(n):
        if indeg[x] == 0:
            ready(x)
    out = []
    while eager or late:
        if eager:
            x = heapq.heappop(eager)[-1]
        else:
            # the late event closest to unblocking another (needed ones before unneeded)
            k = min(late, key=lambda k: (min((indeg[b] for b in ev.succ[k[-1]]),
                                             default=n + 1), k))
            late.remove(k)
            x = k[-1]
        out.append(x)
        for b in ev.succ[x]:
            indeg[b] -= 1
            if indeg[b] == 0:
                ready(b)
    return out


def _steps(items):
    from .plan import walk_steps
    return walk_steps(items)


def _poison(dtype: np.dtype, shape) -> np.ndarray:
    if dtype.kind == "f" or dtype in FLOAT_ARRAYS:    # f16, bf16, f32, FP8: NaN
        return np.full(shape, np.nan, dtype=_F32).astype(dtype)
    if dtype == np.bool_:
        return np.ones(shape, dtype=np.bool_)
    return np.full(shape, np.iinfo(dtype).min, dtype=dtype)   # i32, i8 or u8


def _poison_like(a) -> np.ndarray:
    a = np.asarray(a)
    return _poison(a.dtype, a.shape)


def _var_types(stmts) -> dict[str, T.TileType]:
    """The type of every local variable the statements read or define."""
    out: dict[str, T.TileType] = {}

    def expr(e) -> None:
        if isinstance(e, T.Var):
            out[e.name] = e.type
        for child in T.children(e):
            expr(child)

    for s in stmts:
        if isinstance(s, T.Let):
            out[s.name] = s.value.type
        else:
            for item in s.index:
                if isinstance(item, T.Point):
                    expr(item.index)
        expr(s.value)
    return out
