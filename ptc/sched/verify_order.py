"""Plan verifier, group 2: ordering (see ptc.sched.verify).

Over the event graph of one unrolling: deadlocks (unmatched waits, over-full phases,
cycles), reads before their producer completes (RAW) and ring slots overwritten before
their readers release them (WAR).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from typing import Mapping

from ..devices import Device
from ..stask.graph import STaskGraph
from .events import Events, group_by_process, build_events, order, reach
from .plan import Plan
from .problems import Problems
from .unroll import fixed_trips
from .verify_structure import loop_paths

# structure -> the problems found (message, key): a search checks each structure once
_CHECKED: dict[tuple, tuple[tuple[str, object], ...]] = {}
_CHECKED_MAX = 4096


def check_order(plan: Plan, graph: STaskGraph, device: Device, trips: Mapping[str, int],
                out: Problems) -> None:
    """The ordering problems of `plan` with each loop run `trips[loop]` times. Plans of
    one structure (a search's tile combinations for one choice) have the same problems,
    so each structure is unrolled and checked once per process."""
    key = _structure(plan, graph, device, trips)
    found = _CHECKED.get(key)
    if found is None:
        mine = Problems()
        _check(plan, graph, device, trips, mine)
        found = tuple(zip(mine.items, mine.item_keys))
        if len(_CHECKED) >= _CHECKED_MAX:
            _CHECKED.clear()
        _CHECKED[key] = found
    for message, why in found:
        out.add(message, why)


def forget_checked() -> None:
    """Drop what check_order remembers (a benchmark timing each search as a new process)."""
    _CHECKED.clear()


def _structure(plan: Plan, graph: STaskGraph, device: Device,
               trips: Mapping[str, int]) -> tuple:
    """Everything the ordering checks read: the plan's roles (not their register budgets),
    its buffers' names, values, producers, consumers and depths, its barriers; the graph's
    edges and loops; which units are asynchronous and in order; the trips. Not the tile
    sizes, the layouts or the bytes."""
    return (tuple(replace(r, registers=0) for r in plan.roles),
            tuple((b.name, b.value, b.producer, b.consumers, b.stages) for b in plan.buffers),
            plan.barriers,
            tuple((u.name, u.is_async, u.in_order) for u in device.units),
            graph.edges, tuple(sorted(loop_paths(graph).items())),
            tuple(sorted(trips.items())))


def _check(plan: Plan, graph: STaskGraph, device: Device, trips: Mapping[str, int],
           out: Problems) -> None:
    ev = build_events(plan, graph, device, fixed_trips(trips))
    if ev.deadlocks:
        for message, key in ev.deadlocks:
            out.add("deadlock: " + message, key)
        return
    topo, left = order(ev)
    if topo is None:
        out.add("deadlock: " + _cycle(ev, left), ("cycle",))
        return
    r = reach(ev, topo)

    def before(a: int, b: int) -> bool:
        return bool((r[a] >> b) & 1)

    readers: dict[int, list[int]] = defaultdict(list)   # producer exec -> reader execs
    for i, sources in enumerate(ev.reads):
        for s in sources:
            for src in s.srcs:
                if s.buffer is not None:
                    readers[src].append(i)
                if not before(2 * src + 1, 2 * i):
                    e = ev.execs[i]
                    how = (f"in buffer {s.buffer.name}" if s.buffer is not None
                           else "in registers")
                    out.add(f"a read that can run before its producer completes: "
                            f"{ev.describe(i)} reads {s.value} from {ev.describe(src)} ({how}); "
                            f"no wait orders {s.edge.src}'s completion before {e.step.task}",
                            ("raw", s.edge.src, e.step.task, s.value))
    for b in plan.buffers:
        for ids in group_by_process(ev, ev.by_task.get(b.producer, [])):
            for k in range(b.stages, len(ids)):
                w = ids[k]
                for rd in readers.get(ids[k - b.stages], []):
                    if not before(2 * rd + 1, 2 * w):
                        out.add(f"ring slot {k % b.stages} of {b.name} can be overwritten by "
                                f"{b.producer} (write {k}, {ev.describe(w)}) before "
                                f"{ev.execs[rd].step.task} released it (read of write "
                                f"{k - b.stages}, {ev.describe(rd)})",
                                ("war", b.name, ev.execs[rd].step.task))


def _cycle(ev: Events, left: list[int]) -> str:
    """Name the steps on one cycle among the events that never become ready."""
    alive = set(left)
    preds: dict[int, list[int]] = defaultdict(list)
    for a in left:
        for b in ev.succ[a]:
            if b in alive:
                preds[b].append(a)
    node, seen = left[0], {}
    path: list[int] = []
    while node not in seen:
        seen[node] = len(path)
        path.append(node)
        node = preds[node][0]
    cycle = list(reversed(path[seen[node]:]))
    names: list[str] = []
    for x in cycle:
        what = ("issue of " if x % 2 == 0 else "completion of ") + ev.describe(x // 2)
        step = ev.execs[x // 2].step
        if x % 2 == 0 and step.waits:
            what += f" [waits {', '.join(step.waits)}]"
        names.append(what)
    return "a cycle of waits: " + " -> ".join(names) + " -> back to the start"
