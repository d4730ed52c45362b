"""The plan verifier: prove a plan safe before it is rendered (DESIGN §3).

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
   within the device's per-block limit and consistent with the launch; threads within
   the block limit and consistent with the roles; each role's registers per thread within
   the device's limit and all roles' registers within the EU's register file.

Reachability is computed with Python int bitsets over a topological order; a plan of the
search verifies in a few milliseconds.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from ..devices import Device
from ..diagnostics import CompileError, Diagnostic
from ..stask.graph import Edge, STaskGraph
from ..stask.propagate import DTYPE_BYTES
from .plan import LoopBlock, Plan, Role, Step, walk_steps
from .unroll import Exec, Trips, fixed_trips, unroll

SYNC_TASK = "sync"
SYNC_UNIT = "barrier"
MBARRIER_BYTES = 8
UNIT_FITS = {"copy": ("copy",), "mma": ("mma",), "simt": ("simt", "sfu")}

Process = tuple[str, int]


def verify(plan: Plan, graph: STaskGraph, device: Device) -> None:
    found = problems(plan, graph, device)
    if found:
        raise CompileError([Diagnostic(f"plan for {plan.kernel} on {device.name}: {m}",
                                       hint=_HINT) for m in found])


_HINT = "the plan is unsafe; rebuild it with ptc.sched.construct or fix its waits and buffers"


def problems(plan: Plan, graph: STaskGraph, device: Device) -> list[str]:
    out = _Problems()
    structure_ok = _check_structure(plan, graph, device, out)
    _check_resources(plan, graph, device, out)
    if structure_ok:
        for trips in verification_trips(plan, graph):
            before = len(out.items)
            _check_order(plan, graph, device, fixed_trips(trips), out)
            if len(out.items) > before:
                break
    return out.items


class _Problems:
    def __init__(self) -> None:
        self.items: list[str] = []
        self.keys: set = set()

    def add(self, message: str, key=None) -> None:
        key = key if key is not None else message
        if key not in self.keys:
            self.keys.add(key)
            self.items.append(message)


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


# ---- 1. structure ---------------------------------------------------------------------
def loop_paths(graph: STaskGraph) -> dict[str, tuple[str, ...]]:
    """Each task's enclosing loops, outermost first."""
    out: dict[str, tuple[str, ...]] = {}

    def walk(region, path):
        for item in region.items:
            if isinstance(item, str):
                out[item] = path
            else:
                walk(item, path + (item.name,))

    walk(graph.root, ())
    return out


def _step_paths(items, path=()) -> list[tuple[Step, tuple[str, ...]]]:
    out = []
    for it in items:
        if isinstance(it, Step):
            out.append((it, path))
        else:
            out.extend(_step_paths(it.body, path + (it.var,)))
    return out


STYLES = ("warp_specialized", "multistage", "sequential", "custom")
LAYOUTS = ("swizzle128", "row")


def _check_fields(plan: Plan, graph: STaskGraph, tasks, out: _Problems) -> None:
    """Fields a hand-edited plan could get wrong that the renderer relies on: each must
    agree with what the graph says or name something that exists."""
    from .primitives import grid_extents

    if plan.style not in STYLES:
        out.add(f"style {plan.style!r} is not one of {', '.join(STYLES)}")
    if plan.stages < 1:
        out.add(f"stages must be at least 1, not {plan.stages}")
    loops = {r.name for r in graph.loop_regions()}
    if plan.pipelined and plan.pipelined not in loops:
        out.add(f"pipelined names {plan.pipelined!r}, which is not a loop of the kernel "
                f"(loops: {', '.join(sorted(loops)) or 'none'})")
    if graph.tiles is not None and tuple(plan.launch.grid) != grid_extents(graph):
        out.add(f"launch.grid is {list(plan.launch.grid)}, but the kernel's grid is "
                f"{list(grid_extents(graph))}")
    for b in plan.buffers:
        t = tasks.get(b.producer)
        if b.stages < 1:
            out.add(f"buffer {b.name} needs at least 1 stage, not {b.stages}")
        if b.layout not in LAYOUTS:
            out.add(f"buffer {b.name} has layout {b.layout!r}; layouts: {', '.join(LAYOUTS)}")
        if t is not None and (b.dtype != t.dtype or tuple(b.shape) != tuple(t.shape)):
            out.add(f"buffer {b.name} holds {b.dtype}{list(b.shape)}, but {t.name} writes "
                    f"{t.dtype}{list(t.shape)}")
        if t is not None and b.value not in t.defines:
            out.add(f"buffer {b.name} holds {b.value!r}, which {t.name} does not define")
    for bar in plan.barriers:
        prefix = bar.name.split(":", 1)[0]
        if bar.kind not in ("full", "empty") or prefix != bar.kind:
            out.add(f"barrier {bar.name} has kind {bar.kind!r}; a {prefix}: barrier is "
                    f"kind {prefix!r}")


def _check_structure(plan: Plan, graph: STaskGraph, device: Device, out: _Problems) -> bool:
    n0 = len(out.items)
    tasks = {t.name: t for t in graph.tasks}
    paths = loop_paths(graph)
    barriers = {}
    for b in plan.barriers:
        if b.name in barriers:
            out.add(f"barrier {b.name} is declared twice")
        barriers[b.name] = b
    buffers = {}
    for b in plan.buffers:
        if b.name in buffers:
            out.add(f"buffer {b.name} is declared twice")
        buffers[b.name] = b
    roles = [r.name for r in plan.roles]
    for name in set(roles):
        if roles.count(name) > 1:
            out.add(f"role {name} is declared twice")

    if plan.device != device.name:
        out.add(f"the plan was made for {plan.device}, not {device.name}")
    _check_fields(plan, graph, tasks, out)
    if graph.tiles is not None and dict(plan.tiles) != dict(graph.tiles):
        out.add(f"the plan's tiles {dict(plan.tiles)} are not the graph's {dict(graph.tiles)}")

    placed: dict[str, list[str]] = defaultdict(list)
    users: dict[str, set[str]] = defaultdict(set)      # barrier -> roles that use it
    for role in plan.roles:
        if role.warps < 1 or role.instances < 1 or role.registers < 1:
            out.add(f"role {role.name} needs at least one warp, one instance and one register "
                    f"(it has warps={role.warps}, instances={role.instances}, "
                    f"registers={role.registers})")
        for step, path in _step_paths(role.body):
            for name in step.waits + step.arrives:
                users[name].add(role.name)
                if name not in barriers:
                    out.add(f"{step.task} in {role.name} uses barrier {name}, which the plan "
                            f"does not declare")
            if step.task == SYNC_TASK:
                if step.unit != SYNC_UNIT:
                    out.add(f"a sync step in {role.name} must be on unit {SYNC_UNIT!r}, "
                            f"not {step.unit!r}")
                if step.offset:
                    out.add(f"a sync step in {role.name} has offset {step.offset}; "
                            "barrier operations run at the role's own iteration")
                continue
            task = tasks.get(step.task)
            if task is None:
                out.add(f"role {role.name} runs {step.task}, which is not an sTask of "
                        f"{graph.kernel.name}")
                continue
            placed[step.task].append(role.name)
            if step.offset < 0 or (step.offset and not path):
                out.add(f"{step.task} in {role.name} has offset {step.offset}: offsets are "
                        "non-negative and only apply inside a loop")
            if path != paths[step.task]:
                where = " / ".join(paths[step.task]) or "no loop"
                out.add(f"{step.task} sits in loops ({' / '.join(path) or 'none'}) of "
                        f"{role.name}, but its sTask belongs to {where}")
            try:
                unit = device.unit(step.unit)
            except KeyError:
                out.add(f"{step.task} in {role.name} runs on unit {step.unit!r}, which "
                        f"{device.name} does not have")
                continue
            if unit.kind not in UNIT_FITS[task.kind]:
                out.add(f"{step.task} is a {task.kind} task but runs on {unit.name}, a "
                        f"{unit.kind} unit")
            elif task.kind == "mma":
                dtype = _mma_dtype(task)
                if dtype and dtype not in unit.throughput:
                    out.add(f"{step.task} multiplies {dtype}, which {unit.name} does not")
    for t in graph.tasks:
        where = placed.get(t.name, [])
        if not where:
            out.add(f"sTask {t.name} is not placed on any role")
        elif len(where) > 1:
            out.add(f"sTask {t.name} is placed {len(where)} times (in {', '.join(where)})")

    for b in plan.buffers:
        if b.producer not in tasks:
            out.add(f"buffer {b.name} is written by {b.producer}, which is not an sTask")
        elif b.value and b.value not in tasks[b.producer].defines:
            out.add(f"buffer {b.name} holds {b.value}, which {b.producer} does not define")
        for c in b.consumers:
            if c not in tasks:
                out.add(f"buffer {b.name} is read by {c}, which is not an sTask")
        if b.stages < 1:
            out.add(f"buffer {b.name} has {b.stages} stages")
        if b.space not in ("smem", "lds"):
            out.add(f"buffer {b.name} is in {b.space!r}; buffers live in smem or lds")
        elif b.space != ("lds" if device.vendor == "amd" else "smem"):
            out.add(f"buffer {b.name} is in {b.space}, which {device.name} does not have")
    for b in plan.barriers:
        if b.buffer not in buffers:
            out.add(f"barrier {b.name} guards buffer {b.buffer}, which the plan does not "
                    "declare")
        if b.kind not in ("full", "empty"):
            out.add(f"barrier {b.name} has kind {b.kind!r} (expected full or empty)")
        if b.arrivals < 1 or b.initial < 0:
            out.add(f"barrier {b.name} needs arrivals >= 1 and initial >= 0 (it has "
                    f"arrivals={b.arrivals}, initial={b.initial})")

    if "mbarrier" not in device.features:
        instances = {r.name: r.instances for r in plan.roles}
        for name, rs in sorted(users.items()):
            if len(rs) > 1 or any(instances[r] > 1 for r in rs):
                out.add(f"barrier {name} synchronises {' and '.join(sorted(rs))}, but "
                        f"{device.name} has no mbarriers to do that with")

    # a value that crosses roles must travel in a buffer
    role_of = {t: rs[0] for t, rs in placed.items() if len(rs) == 1}
    for e in graph.edges:
        rs, rd = role_of.get(e.src), role_of.get(e.dst)
        if rs and rd and rs != rd and _buffer_for(plan, e.src, e.dst, e.value) is None:
            out.add(f"{e.dst} in {rd} reads {e.value} from {e.src} in {rs}, but no buffer "
                    "carries it between the roles")
    return len(out.items) == n0


def _mma_dtype(task) -> str | None:
    from ..sema import typed as T
    for s in task.stmts:
        v = s.value
        mm = v if isinstance(v, T.MatMul) else (v.args[1] if isinstance(v, T.Elementwise)
                                                 and len(v.args) > 1 else None)
        if isinstance(mm, T.MatMul):
            return mm.lhs.type.dtype
    return None


def _buffer_for(plan: Plan, src: str, dst: str, value: str):
    for b in plan.buffers:
        if b.producer == src and dst in b.consumers and (not b.value or b.value == value):
            return b
    return None


# ---- 3. resources ---------------------------------------------------------------------
def _check_resources(plan: Plan, graph: STaskGraph, device: Device, out: _Problems) -> None:
    res = device.resources
    used = sum(b.stages * b.slot_bytes for b in plan.buffers)
    stages = {b.name: b.stages for b in plan.buffers}
    mbar = (MBARRIER_BYTES * sum(stages.get(b.buffer, 1) for b in plan.barriers)
            if "mbarrier" in device.features else 0)
    detail = ", ".join(f"{b.name} {b.stages} x {b.slot_bytes}" for b in plan.buffers)
    if used + mbar > res.shared_memory_bytes:
        out.add(f"shared memory: the buffers need {used} bytes ({detail})"
                + (f" plus {mbar} for barriers" if mbar else "")
                + f", over {device.name}'s {res.shared_memory_bytes} per block")
    if plan.launch.dynamic_smem < used:
        out.add(f"launch.dynamic_smem is {plan.launch.dynamic_smem} bytes, less than the "
                f"{used} the buffers need ({detail})")
    elif plan.launch.dynamic_smem > res.shared_memory_bytes:
        out.add(f"launch.dynamic_smem is {plan.launch.dynamic_smem} bytes, over "
                f"{device.name}'s {res.shared_memory_bytes} per block")
    tasks = {t.name: t for t in graph.tasks}
    for b in plan.buffers:
        t = tasks.get(b.producer)
        if t is not None and all(isinstance(x, int) for x in t.shape) and t.dtype in DTYPE_BYTES:
            need = DTYPE_BYTES[t.dtype]
            for x in t.shape:
                need *= x
            if b.slot_bytes < need:
                out.add(f"buffer {b.name} has {b.slot_bytes}-byte slots, but {b.producer} "
                        f"writes {need} bytes")

    threads = sum(r.warps * r.instances for r in plan.roles) * res.warp_size
    if threads != plan.launch.threads:
        out.add(f"launch.threads is {plan.launch.threads}, but the roles have {threads} "
                "threads")
    if threads > res.max_threads_per_block:
        out.add(f"the roles need {threads} threads, over {device.name}'s "
                f"{res.max_threads_per_block} per block")
    total = 0
    for r in plan.roles:
        if r.registers > res.max_registers_per_thread:
            out.add(f"role {r.name} asks for {r.registers} registers per thread, over "
                    f"{device.name}'s {res.max_registers_per_thread}")
        total += r.warps * r.instances * res.warp_size * r.registers
    if total > res.registers:
        parts = ", ".join(f"{r.name} {r.warps * r.instances * res.warp_size} x {r.registers}"
                          for r in plan.roles)
        out.add(f"registers: the roles need {total} ({parts}), over {device.name}'s "
                f"{res.registers} per EU")


# ---- 2. ordering ----------------------------------------------------------------------
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
    procs_execs = unroll(plan, trips)
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
    n = len(execs)
    async_units = {u.name for u in device.units if u.is_async}
    is_async = [e.step.task != SYNC_TASK and e.step.unit in async_units for e in execs]
    ev = Events(plan, procs, execs, position, is_async, [[] for _ in range(2 * n)], {},
                defaultdict(list))
    for i, e in enumerate(execs):
        ev.add(2 * i, 2 * i + 1)
        if e.step.task != SYNC_TASK:
            ev.index[(e.process, e.step.task, e.iters)] = i
            ev.by_task[e.step.task].append(i)
    for ids in procs.values():
        for a, b in zip(ids, ids[1:]):
            ev.add(2 * a if is_async[a] else 2 * a + 1, 2 * b)

    # barriers: per-process arrive / wait counting
    barriers = {b.name: b for b in plan.barriers}
    arrivers: dict[tuple[str, int], list[int]] = defaultdict(list)
    waiters: list[tuple[str, int, int]] = []
    for ids in procs.values():
        arrive_count: dict[str, int] = defaultdict(int)
        wait_count: dict[str, int] = defaultdict(int)
        for i in ids:
            step = execs[i].step
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
            me = execs[i].process
            waits = sum(1 for w, _, j in waiters if w == name and execs[j].process == me)
            arrives: dict[str, int] = defaultdict(int)
            for (nm, _), v in arrivers.items():
                if nm == name:
                    for a in v:
                        arrives[ev.process_name(a)] += 1
            counts = ", ".join(f"{p} arrives {k} times" for p, k in sorted(arrives.items()))
            ev.deadlocks.append((
                f"wait on {name} by {ev.describe(i)} has no matching arrive: it waits for "
                f"phase {phase}, which gets {len(ids)} of its {b.arrivals} arrives ({name}: "
                f"{ev.process_name(i)} waits {waits} times, "
                + (counts or "nobody arrives") + f"; {b.initial} phases complete at the start)",
                ("wait", name, execs[i].process[0], execs[i].step.task)))
            continue
        for a in ids:
            ev.add(2 * a + 1, 2 * i)

    # values: where each read comes from; implicit waits on own register values
    role_of: dict[str, Role] = {}
    for r in plan.roles:
        for s in walk_steps(r.body):
            role_of[s.task] = r
    paths = loop_paths(graph)
    preds: dict[str, list[Edge]] = defaultdict(list)
    for e in graph.edges:
        preds[e.dst].append(e)
    ev.reads = [[] for _ in range(n)]
    for i, e in enumerate(execs):
        if e.step.task == SYNC_TASK:
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
            buf = _buffer_for(plan, edge.src, e.step.task, value)
            ev.reads[i].append(Source(value, edge, srcs, buf))
            if buf is None:
                for s in srcs:
                    if execs[s].process == e.process and position[s] < position[i]:
                        ev.add(2 * s + 1, 2 * i)
    for b in plan.buffers:
        for ids in _group_by_process(ev, ev.by_task.get(b.producer, [])):
            for k, i in enumerate(ids):
                ev.write_number[i] = k
    return ev


def _group_by_process(ev: Events, ids: Iterable[int]) -> list[list[int]]:
    groups: dict[Process, list[int]] = defaultdict(list)
    for i in ids:
        groups[ev.execs[i].process].append(i)
    return [sorted(g, key=lambda i: ev.position[i]) for g in groups.values()]


def resolve_sources(edges: list[Edge], paths: Mapping[str, tuple[str, ...]],
                    iters: tuple[tuple[str, int], ...], trips: Trips):
    """For an execution of a task at `iters`, each value it reads from another task:
    (value, edge, the producing execution's iters). A distance-1 edge applies from the
    second iteration of the reader's loop on; before that the value comes from the
    distance-0 edge that initialises it (from outside the loop)."""
    it = dict(iters)
    by_value: dict[str, list[Edge]] = defaultdict(list)
    for e in edges:
        by_value[e.value].append(e)
    out = []
    for value, es in by_value.items():
        chosen = []
        carried = [e for e in es if e.distance == 1]
        for e in carried:
            loop = paths[e.dst][-1]
            if it.get(loop, 0) > 0:
                chosen.append(e)
        if not chosen:
            chosen = [e for e in es if e.distance == 0]
        for e in chosen:
            src = _source_iters(e, paths, it, trips)
            if src is not None:
                out.append((value, e, src))
    return out


def _source_iters(e: Edge, paths, it: dict[str, int], trips: Trips):
    sp, dp = paths[e.src], paths[e.dst]
    common = 0
    while common < min(len(sp), len(dp)) and sp[common] == dp[common]:
        common += 1
    src: dict[str, int] = {}
    for v in sp[:common]:
        src[v] = it[v]
    if e.distance == 1:
        loop = dp[-1]
        if loop not in src:
            return None
        src[loop] -= 1
        if src[loop] < 0:
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


def _check_order(plan: Plan, graph: STaskGraph, device: Device, trips: Trips,
                 out: _Problems) -> None:
    ev = build_events(plan, graph, device, trips)
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
        for ids in _group_by_process(ev, ev.by_task.get(b.producer, [])):
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
