"""The plan unrolled into an event graph (issue and completion of each execution) with
its happens-before edges, as ptc.sched.verify describes; the verifier's ordering checks
(verify_order) and the simulator (simulate) both run on it.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from ..devices import Device
from ..stask.graph import Edge, STaskGraph
from .plan import Plan, Role, walk_steps
from .unroll import Exec, Trips, unroll
from .verify_structure import loop_paths

Process = tuple[str, int]


@dataclass
class Source:
    """Where one read of an execution gets its value."""

    value: str
    edge: Edge
    srcs: tuple[int, ...]          # exec ids (one per instance of the producing role)
    buffer: object | None          # the plan Buffer carrying it, if any


@dataclass
class Events:
    """The unrolled plan as an event graph: node 2n is the issue of execution n, node
    2n + 1 its completion."""

    plan: Plan
    procs: dict[Process, list[int]]                # process -> exec ids in program order
    execs: list[Exec]
    position: list[int]                            # exec id -> index in its process
    is_async: list[bool]
    succ: list[list[int]]
    index: dict[tuple, int]                        # (process, task, iters) -> exec id
    by_task: dict[str, list[int]]                  # task -> exec ids (all processes)
    reads: list[list[Source]] = field(default_factory=list)
    write_number: dict[int, int] = field(default_factory=dict)   # producer exec -> k
    deadlocks: list[tuple[str, tuple]] = field(default_factory=list)

    def add(self, a: int, b: int) -> None:
        self.succ[a].append(b)

    def process_name(self, n: int) -> str:
        e = self.execs[n]
        return e.role + (f"#{e.instance}" if self.plan_role(e.role).instances > 1 else "")

    def describe(self, n: int) -> str:
        e = self.execs[n]
        it = ", ".join(f"{v}={k}" for v, k in e.iters)
        return f"{e.step.task} ({self.process_name(n)}" + (f", {it})" if it else ")")

    def plan_role(self, name: str) -> Role:
        for r in self.plan.roles:
            if r.name == name:
                return r
        raise KeyError(name)


def build_events(plan: Plan, graph: STaskGraph, device: Device, trips: Trips) -> Events:
    """The plan unrolled at `trips` into its event graph: program order, barrier phases
    (a wait no arrive can complete is recorded in Events.deadlocks) and value reads."""
    execs, procs, position = _number_execs(unroll(plan, trips))
    async_units = {u.name for u in device.units if u.is_async}
    is_async = [not e.step.is_sync and e.step.unit in async_units for e in execs]
    ev = Events(plan, procs, execs, position, is_async, [[] for _ in range(2 * len(execs))],
                {}, defaultdict(list))
    _program_order(ev, device)
    _barrier_phases(ev, plan)
    _value_reads(ev, plan, graph, trips)
    for b in plan.buffers:
        for ids in group_by_process(ev, ev.by_task.get(b.producer, [])):
            for k, i in enumerate(ids):
                ev.write_number[i] = k
    return ev


def _number_execs(procs_execs: Mapping[Process, list[Exec]]
                  ) -> tuple[list[Exec], dict[Process, list[int]], list[int]]:
    """Every process's executions numbered in one list: (execs, process -> exec ids,
    exec id -> index in its process)."""
    execs: list[Exec] = []
    procs: dict[Process, list[int]] = {}
    position: list[int] = []
    for p, seq in procs_execs.items():
        ids = []
        for i, e in enumerate(seq):
            ids.append(len(execs))
            execs.append(e)
            position.append(i)
        procs[p] = ids
    return execs, procs, position


def _program_order(ev: Events, device: Device) -> None:
    """Index the executions, and add each one's issue -> completion edge and each
    process's program order (the next step issues once an async one has issued, a
    synchronous one has completed)."""
    execs, is_async = ev.execs, ev.is_async
    for i, e in enumerate(execs):
        ev.add(2 * i, 2 * i + 1)
        if not e.step.is_sync:
            ev.index[(e.process, e.step.task, e.iters)] = i
            ev.by_task[e.step.task].append(i)
    in_order = {u.name for u in device.units if u.is_async and u.in_order}
    for ids in ev.procs.values():
        for a, b in zip(ids, ids[1:]):
            ev.add(2 * a if is_async[a] else 2 * a + 1, 2 * b)
        # an in-order unit completes one thread's operations in the order it issued them
        last: dict[str, int] = {}
        for i in ids:
            unit = execs[i].step.unit
            if is_async[i] and unit in in_order:
                if unit in last:
                    ev.add(2 * last[unit] + 1, 2 * i + 1)
                last[unit] = i


def _barrier_phases(ev: Events, plan: Plan) -> None:
    """Per-process arrive / wait counting: each wait follows the arrives that complete
    its phase; too many arrives for a phase, or too few, is a deadlock."""
    barriers = {b.name: b for b in plan.barriers}
    arrivers: dict[tuple[str, int], list[int]] = defaultdict(list)
    waiters: list[tuple[str, int, int]] = []
    for ids in ev.procs.values():
        arrive_count: dict[str, int] = defaultdict(int)
        wait_count: dict[str, int] = defaultdict(int)
        for i in ids:
            step = ev.execs[i].step
            for w in step.waits:
                waiters.append((w, wait_count[w], i))
                wait_count[w] += 1
            for a in step.arrives:
                arrivers[(a, arrive_count[a] + barriers[a].initial)].append(i)
                arrive_count[a] += 1
    for (name, phase), ids in arrivers.items():
        b = barriers[name]
        if len(ids) > b.arrivals:
            who = sorted({ev.process_name(i) for i in ids})
            ev.deadlocks.append((
                f"barrier {name} gets {len(ids)} arrives for phase {phase} but completes a "
                f"phase with {b.arrivals} (from {', '.join(who)}): the extra arrives run into "
                "the next phase", ("over", name)))
    for name, phase, i in waiters:
        b = barriers[name]
        if phase < b.initial:
            continue
        ids = arrivers.get((name, phase), [])
        if len(ids) < b.arrivals:
            ev.deadlocks.append(_unmatched_wait(ev, b, phase, i, len(ids), arrivers, waiters))
            continue
        for a in ids:
            ev.add(2 * a + 1, 2 * i)


def _unmatched_wait(ev: Events, b, phase: int, i: int, got: int,
                    arrivers: Mapping[tuple[str, int], list[int]],
                    waiters: list[tuple[str, int, int]]) -> tuple[str, tuple]:
    """The deadlock of execution i waiting on barrier b's `phase`, which gets only `got`
    arrives: what it says, with who waits and arrives how often, and its key."""
    name = b.name
    me = ev.execs[i].process
    waits = sum(1 for w, _, j in waiters if w == name and ev.execs[j].process == me)
    arrives: dict[str, int] = defaultdict(int)
    for (nm, _), v in arrivers.items():
        if nm == name:
            for a in v:
                arrives[ev.process_name(a)] += 1
    counts = ", ".join(f"{p} arrives {k} times" for p, k in sorted(arrives.items()))
    return (f"wait on {name} by {ev.describe(i)} has no matching arrive: it waits for "
            f"phase {phase}, which gets {got} of its {b.arrivals} arrives ({name}: "
            f"{ev.process_name(i)} waits {waits} times, "
            + (counts or "nobody arrives") + f"; {b.initial} phases complete at the start)",
            ("wait", name, me[0], ev.execs[i].step.task))


def _value_reads(ev: Events, plan: Plan, graph: STaskGraph, trips: Trips) -> None:
    """Where each read comes from (Events.reads); a value kept in the reader's own
    registers is an implicit wait on its producer's completion."""
    execs, position = ev.execs, ev.position
    role_of: dict[str, Role] = {}
    for r in plan.roles:
        for s in walk_steps(r.body):
            role_of[s.task] = r
    paths = loop_paths(graph)
    preds: dict[str, list[Edge]] = defaultdict(list)
    for e in graph.edges:
        preds[e.dst].append(e)
    ev.reads = [[] for _ in range(len(execs))]
    for i, e in enumerate(execs):
        if e.step.is_sync:
            continue
        for value, edge, iters in resolve_sources(preds[e.step.task], paths, e.iters, trips):
            src_role = role_of[edge.src]
            if src_role.name == e.role:
                procs_src = [e.process]
            else:
                procs_src = [(src_role.name, k) for k in range(src_role.instances)]
            srcs = tuple(ev.index[key] for key in
                         ((p, edge.src, iters) for p in procs_src) if key in ev.index)
            if not srcs:
                continue
            buf = plan.buffer_for(edge.src, e.step.task, value)
            ev.reads[i].append(Source(value, edge, srcs, buf))
            if buf is None:
                for s in srcs:
                    if execs[s].process == e.process and position[s] < position[i]:
                        ev.add(2 * s + 1, 2 * i)


def group_by_process(ev: Events, ids: Iterable[int]) -> list[list[int]]:
    groups: dict[Process, list[int]] = defaultdict(list)
    for i in ids:
        groups[ev.execs[i].process].append(i)
    return [sorted(g, key=lambda i: ev.position[i]) for g in groups.values()]


def resolve_sources(edges: list[Edge], paths: Mapping[str, tuple[str, ...]],
                    iters: tuple[tuple[str, int], ...], trips: Trips):
    """For an execution of a task at `iters`, each value it reads from another task:
    (value, edge, the producing execution's iters). A distance-1 edge applies from the
    second iteration of the reader's loop on, and in nested loops (a convolution's taps
    `for r { for s { acc += ... } }`) also at the first iteration of the inner loop in a
    later iteration of an outer one entered after the value's initialisation; otherwise the
    value comes from the distance-0 edge that initialises it (from outside the loops)."""
    it = dict(iters)
    by_value: dict[str, list[Edge]] = defaultdict(list)
    for e in edges:
        by_value[e.value].append(e)
    out = []
    for value, es in by_value.items():
        inits = [e for e in es if e.distance == 0]
        chosen = []
        for e in (e for e in es if e.distance == 1):
            loop = _carried_loop(e, inits, paths, it)
            if loop is not None:
                chosen.append((e, loop))
        if not chosen:
            chosen = [(e, None) for e in inits]
        for e, loop in chosen:
            src = _source_iters(e, paths, it, trips, loop)
            if src is not None:
                out.append((value, e, src))
    return out


def _carried_loop(e: Edge, inits: list[Edge], paths, it: dict[str, int]) -> str | None:
    """The loop whose previous iteration carried edge `e` reads from: the innermost loop
    around the reader, inside every loop around the value's initialisation, that is past
    its first iteration (None: the first iteration of all of them reads the initial
    value)."""
    dp = paths[e.dst]
    depth = max((_common(paths[i.src], dp) for i in inits), default=len(dp) - 1)
    for loop in reversed(dp[depth:]):
        if it.get(loop, 0) > 0:
            return loop
    return None


def _common(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _source_iters(e: Edge, paths, it: dict[str, int], trips: Trips, carried: str | None):
    """The producing execution's iters: the reader's in the loops both are in, the previous
    iteration of loop `carried` (a distance-1 edge), the last iteration of the loops inside."""
    sp, dp = paths[e.src], paths[e.dst]
    common = _common(sp, dp)
    if carried is not None:
        if carried not in sp[:common]:
            return None
        common = sp.index(carried) + 1
    src: dict[str, int] = {}
    for v in sp[:common]:
        src[v] = it[v]
    if carried is not None:
        src[carried] -= 1
        if src[carried] < 0:
            return None
    for v in sp[common:]:
        n = trips(v, dict(src))
        if n <= 0:
            return None
        src[v] = n - 1
    return tuple(src.items())


def order(ev: Events) -> tuple[list[int] | None, list[int]]:
    """A topological order of the events (None if there is a cycle) and the nodes left."""
    n = len(ev.succ)
    indeg = [0] * n
    for s in ev.succ:
        for b in s:
            indeg[b] += 1
    todo = [i for i in range(n) if indeg[i] == 0]
    out = []
    while todo:
        a = todo.pop()
        out.append(a)
        for b in ev.succ[a]:
            indeg[b] -= 1
            if indeg[b] == 0:
                todo.append(b)
    if len(out) < n:
        return None, [i for i in range(n) if indeg[i] > 0]
    return out, []


def reach(ev: Events, topo: list[int]) -> list[int]:
    """reach[a] has bit b set when event a happens before event b (or a == b)."""
    r = [0] * len(ev.succ)
    for a in reversed(topo):
        bits = 1 << a
        for b in ev.succ[a]:
            bits |= r[b]
        r[a] = bits
    return r
