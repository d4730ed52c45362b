"""The plan verifier: prove a plan safe before it is rendered (docs/architecture.md).

`problems(plan, graph, device)` lists what is wrong, one sentence each, naming the sTasks,
buffers and barriers involved; `verify` raises them as one `CompileError`. Three groups:

1. Structure: every sTask placed exactly once over all roles, in the loops of its region;
   each unit exists on the device and fits the task (copy on copy, mma on mma, simt on
   simt or sfu; `sync` steps on the pseudo-unit `barrier` are pure barrier operations);
   every barrier / buffer name exists; a buffer's producer and consumers are placed tasks;
   a value crossing roles travels in a buffer.

2. Ordering, over the plan unrolled for small trip counts (every loop once, then every
   loop 2 * stages + 2 times, so each ring wraps around at least twice). Events: the
   issue and the completion of each execution. Happens-before edges:
   - issue -> completion of the same execution;
   - program order within a process (a role instance): after a step on a synchronous unit
     (and after a `sync` step) its completion precedes the next issue; after a step on an
     asynchronous unit only its issue does;
   - barriers: arrives happen at completion. The m-th arrive of a process on barrier B
     counts toward phase m + B.initial; the j-th wait of a process on B waits for phase j;
     phases below B.initial are complete at the start (`empty` barriers: every slot starts
     free); phase p completes with its B.arrivals-th arrive (edges from all of them);
   - a value a process keeps in its own registers (not in a plan buffer) is read after the
     step that made it completes: the renderer waits for it (wgmma.wait_group /
     s_waitcnt on the register result). Values in buffers get no such implicit wait: their
     readers must wait on a barrier.
   Checks: a wait on a phase that never gets B.arrivals arrives (or gets more), and any
   cycle, is a deadlock; for every graph edge src -> dst (distance 0: the same iteration,
   or the last iteration of src's inner loops; distance 1: the previous iteration of
   dst's loop) the completion of the matching src execution precedes the issue of dst
   (RAW); for every ring buffer, write k starts only after every read of write k - stages
   has completed (WAR: slot k % stages is free again).

3. Resources: shared memory (buffers' stages * slot bytes, plus 8 bytes per mbarrier slot)
   within the device's per-block limit (the lowered kernel's placement of the buffers, and
   the launch's bytes, are ptc.lower.verify's, checked at every lowering); threads within
   the block limit and consistent with the roles; each role's registers per thread within
   the device's limit and all roles' registers within the EU's register file.

Reachability is computed with Python int bitsets over a topological order; a plan of the
search verifies in a few milliseconds.

Layout: this module holds the entry points; the groups live in verify_structure (1),
verify_order (2, over the event graph of events) and verify_resources (3), and add what
they find to one `Problems` (problems.py).
"""
from __future__ import annotations

from collections import defaultdict

from ..devices import Device
from ..diagnostics import CompileError, Diagnostic
from ..stask.graph import STaskGraph
from .events import Events, Process, Source, build_events, order, reach, resolve_sources
from .plan import SYNC_TASK, SYNC_UNIT, LoopBlock, Plan, Style
from .problems import Problems
from .verify_order import check_order
from .verify_resources import MBARRIER_BYTES, check_resources
from .verify_structure import LAYOUTS, UNIT_FITS, check_structure, loop_paths

__all__ = ["verify", "problems", "verification_trips", "loop_paths", "Events", "Source",
           "Process", "build_events", "resolve_sources", "order", "reach", "SYNC_TASK",
           "SYNC_UNIT", "MBARRIER_BYTES", "UNIT_FITS", "Style", "LAYOUTS"]


def verify(plan: Plan, graph: STaskGraph, device: Device) -> None:
    found = problems(plan, graph, device)
    if found:
        raise CompileError([Diagnostic(f"plan for {plan.kernel} on {device.name}: {m}",
                                       hint=_HINT) for m in found])


_HINT = "the plan is unsafe; rebuild it with ptc.sched.construct or fix its waits and buffers"


def problems(plan: Plan, graph: STaskGraph, device: Device) -> list[str]:
    out = Problems()
    structure_ok = check_structure(plan, graph, device, out)
    check_resources(plan, graph, device, out)
    if structure_ok:
        for trips in verification_trips(plan, graph):
            before = len(out.items)
            check_order(plan, graph, device, trips, out)
            if len(out.items) > before:
                break
    return out.items


def verification_trips(plan: Plan, graph: STaskGraph) -> list[dict[str, int]]:
    """Trip counts the ordering is checked for: every loop once, then every loop
    2 * stages + 2 times (stages: the deepest ring written directly in that loop)."""
    region = {t.name: t.region for t in graph.tasks}
    deepest: dict[str, int] = defaultdict(lambda: 1)
    for b in plan.buffers:
        r = region.get(b.producer, "")
        deepest[r] = max(deepest[r], b.stages)
    loops = [r.name for r in graph.loop_regions()]
    loops += [b.var for role in plan.roles for b in _blocks(role.body) if b.var not in loops]
    return [{v: 1 for v in loops}, {v: 2 * deepest[v] + 2 for v in loops}]


def _blocks(items) -> list[LoopBlock]:
    out = []
    for it in items:
        if isinstance(it, LoopBlock):
            out.append(it)
            out.extend(_blocks(it.body))
    return out
