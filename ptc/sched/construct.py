"""Intra-EU plan construction: one plan per (graph, device, Choice), using the primitives.

Styles:
- warp_specialized: a producer warpgroup issues every load, on the TMA unit where a box
  takes the tile (ptc.lower.tma; else its threads copy it, on the per-thread copy unit);
  consumer warpgroups (1 or 2, splitting the tile's rows) run mma and simt tasks and the
  epilogue, storing by TMA where a box takes their rows of the tile; two consumers either
  run free (the cost model times them in lockstep) or take turns at the tensor cores
  (ping-pong, ptc.sched.turns). Needs an async bulk-copy unit (`tma`) and warpgroups with
  register reallocation.
- multistage: one role does everything; loads of the pipelined loop are issued
  `stages - 1` iterations ahead into a ring of `stages` slots (cp.async / global->LDS).
- interleaved: one role and one buffer per loaded tile, each load issued just before the
  reader that precedes its own first reader (a loop with two or more readers of loaded
  tiles, e.g. attention's QK^T and PV): the load overlaps the other reader's work, and the
  barrier that publishes one tile also frees the other's buffer. FlashAttention-2's
  schedule: V(n) is issued once K(n) has landed, K(n + 1) once V(n) has.
- sequential: the same single role without prefetch (one stage) — the unpipelined baseline.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..devices import Device, Unit, UnitKind
from ..devices.model import Terms
from ..lower.atoms import mma_atom, why_no_atom, why_no_wgmma, why_not_k_major, wgmma_k
from ..lower.swizzle import tma_layout
from ..lower.tma import GATHERED, STRIDED, copy_rules, per_thread_copy, tma_box, tma_store_box
from ..sema import typed as T
from ..stask.graph import STaskGraph, TaskKind, TaskOp
from ..sema import dtypes as dt
from ..stask.propagate import extent_of
from .plan import Plan, Style
from .primitives import PlanBuilder
from .rotate import rotated
from .turns import turns
from .verify_resources import barrier_bytes

# wgmma multiplies 64 rows per warpgroup; a consumer warpgroup needs at least that many.
MIN_ROWS_PER_CONSUMER = 64
PRODUCER_REGISTERS = 40


@dataclass(frozen=True)
class Choice:
    style: Style
    stages: int
    consumers: int = 1   # consumer warpgroups (warp_specialized)
    warps: int = 4       # warps of the single role (multistage / sequential)
    pingpong: bool = False   # the consumers take turns at the tensor cores (ptc.sched.turns)
    overlap: bool = False    # the loop rotated: softmax(n + 1) under PV(n) (ptc.sched.rotate)

    def describe(self, terms: Terms = Terms()) -> str:
        """In the device's words (`terms`: warps or waves)."""
        if self.style == Style.WARP_SPECIALIZED:
            return (f"warp-specialized, {self.stages} stages, {self.consumers} consumer "
                    f"warpgroup(s){' in ping-pong' if self.pingpong else ''}"
                    f"{', intra-warpgroup overlap' if self.overlap else ''}")
        if self.style == Style.MULTISTAGE:
            return f"multistage, {self.stages} stages, {terms.warps(self.warps)}"
        if self.style == Style.INTERLEAVED:
            return f"interleaved loads (one buffer each), {terms.warps(self.warps)}"
        return f"sequential (no pipelining), {terms.warps(self.warps)}"


class Unfit(Exception):
    """The choice does not apply to this device or graph; the message says why."""


def pipelined_loop(graph: STaskGraph) -> str:
    """The innermost loop doing the most mma work (else the most bytes); "" without loops."""
    best, key = "", None
    for r in graph.innermost_loops():
        tasks = [graph.task(i) for i in r.items if isinstance(i, str)]
        k = (sum(t.work.mma_flops for t in tasks), sum(t.work.bytes for t in tasks))
        if key is None or k > key:
            best, key = r.name, k
    return best


def copy_unit(device: Device, style: Style) -> Unit:
    units = device.units_of(UnitKind.COPY)
    if style == Style.WARP_SPECIALIZED:
        bulk = [u for u in units if u.is_async and u.is_bulk_tensor_copy]
        if not bulk or device.resources.warpgroup_size <= 1:
            raise Unfit(f"{device.name} has no TMA unit and warpgroups for warp specialization")
        return bulk[0]
    # prefer an async per-thread copy (cp.async, buffer loads) over bulk tensor copies
    ranked = sorted(units, key=lambda u: (u.is_bulk_tensor_copy, not u.is_async))
    return ranked[0]


def unit_for(device: Device, kind: UnitKind) -> Unit:
    units = device.units_of(kind)
    if not units:
        raise Unfit(f"{device.name} has no {kind} unit")
    return units[0]


def construct(graph: STaskGraph, device: Device, choice: Choice,
              atoms: frozenset[str] | None = None) -> Plan:
    """The plan of `choice`. `atoms`: the matrix instructions the target's renderer prints
    (its capabilities; None: every one the device offers), which decide whether an mma
    goes to the tensor cores or to CUDA cores."""
    loop = pipelined_loop(graph)
    if choice.style != Style.SEQUENTIAL and not loop:
        raise Unfit("no tile loop to pipeline")
    if choice.style == Style.WARP_SPECIALIZED:
        return _warp_specialized(graph, device, choice, loop)
    return _single_role(graph, device, choice, loop, atoms)


def _threads_copy(graph: STaskGraph, t, why: str, rules) -> str:
    """A tile no TMA box takes (`why`: its rows are gathered, or strided) that the
    producer's threads copy row by row, in 16-byte chunks, into the layout TMA would write
    (where wgmma reads it): `why` back, for the per-thread unit, or why they cannot."""
    load = t.stmts[0].value
    if len(load.type.shape) != 2:
        return f"{why}, and the threads copy 2-D tiles into the layout wgmma reads"
    rows, cols = (extent_of(graph.kernel, graph.tiles, e) for e in load.type.shape)
    lay = tma_layout(rows, cols, load.type.dtype)
    if lay is None or lay.swizzle != "tma":
        return f"{why}, and no layout wgmma reads takes a {rows} x {cols} tile"
    return per_thread_copy(graph.kernel, load, rules) or why


def _mma_dtype_ok(graph: STaskGraph, device: Device) -> None:
    """Warp specialization runs every mma on wgmma (or, where its shape does not tile, on
    CUDA cores): wgmma must take its dtype (f32 is never multiplied as TF32 unless the
    program says `as tf32`, and TF32 wgmma is not issued here)."""
    for t in graph.tasks:
        if t.kind == TaskKind.MMA:
            dtype = t.mma_dtype
            why = why_no_wgmma(dtype, 64, 8, wgmma_k(dtype))
            if why and dtype in dt.FP8:     # say why FP8 takes the mma.sync plans
                raise Unfit(why)
            if all(dtype not in u.throughput for u in device.units_of(UnitKind.MMA)):
                raise Unfit(f"{device.name}'s mma units do not multiply {dtype}")
            if why:
                raise Unfit(why)


def mma_unit(graph: STaskGraph, device: Device, task, warps: int,
             atoms: frozenset[str] | None = None) -> Unit:
    """Tensor cores when one of the device's matrix instructions that the renderer prints
    (`atoms`; None: any) tiles this mma over `warps` warps (ptc.lower.atoms.mma_atom, which
    the lowering tiles it by), else CUDA cores: the plan says which, and the renderer
    builds exactly that."""
    if mma_atom(device, task.mma_dtype, *mma_extents(graph, task), warps, atoms) is not None:
        return unit_for(device, UnitKind.MMA)
    return unit_for(device, UnitKind.SIMT)


def mma_extents(graph: STaskGraph, task) -> tuple[int, int, int]:
    """(m, n, k) of an mma task at the graph's tiles."""
    mm = task.mma
    m, k = (extent_of(graph.kernel, graph.tiles, e) for e in mm.a.type.shape)
    n = extent_of(graph.kernel, graph.tiles, mm.b.type.shape[1])
    return m, n, k


def why_on_cuda_cores(graph: STaskGraph, device: Device, task, warps: int,
                      atoms: frozenset[str] | None = None) -> str:
    """Why mma_unit puts `task` on CUDA cores (for explain)."""
    return why_no_atom(device, task.mma_dtype, *mma_extents(graph, task), warps, atoms)


def _warp_specialized(graph, device, choice, loop) -> Plan:
    tma = copy_unit(device, Style.WARP_SPECIALIZED)     # (no TMA: the first reason to give)
    _mma_dtype_ok(graph, device)
    _k_major_ok(graph, {t.name for t in graph.tasks if t.kind == TaskKind.MMA})
    rows = _tile_rows(graph)
    if rows % choice.consumers or rows // choice.consumers < MIN_ROWS_PER_CONSUMER:
        raise Unfit(f"{rows} rows cannot feed {choice.consumers} consumer warpgroups "
                    f"of >= {MIN_ROWS_PER_CONSUMER} rows")
    budget = _consumer_budget(device, choice)
    wg = device.resources.warpgroup_size
    b = PlanBuilder(graph, device)
    b.role("producer", warps=wg, registers=PRODUCER_REGISTERS)
    b.role("consumer", warps=wg, registers=budget, instances=choice.consumers,
           pingpong=choice.pingpong)
    mma, simt = unit_for(device, UnitKind.MMA), unit_for(device, UnitKind.SIMT)
    per_thread = copy_unit(device, Style.MULTISTAGE)
    on_wgmma = _wgmma_mmas(graph, choice, rows)
    operands = _mma_operand_loads(graph, on_wgmma)
    for t in program_order(graph, lambda t: t.name in on_wgmma):
        if t.op == TaskOp.LOAD:
            box = _producer_box(graph, t, t.name in operands, copy_rules(device))
            b.Append(t.name, ("producer", (per_thread if isinstance(box, str) else tma).name))
        elif t.kind == TaskKind.MMA:
            b.Append(t.name, ("consumer", (mma if t.name in on_wgmma else simt).name))
        elif t.op in (TaskOp.STORE, TaskOp.ATOMIC_ADD):
            # a tile TMA stores goes through shared memory and one thread's bulk copy;
            # others (atomic adds, odd rows) the consumers store from their registers
            (store,) = [s for s in t.stmts if isinstance(s, T.Store)]
            box = tma_store_box(graph.kernel, graph.tiles, store, copy_rules(device),
                                choice.consumers)
            b.Append(t.name, ("consumer", (per_thread if isinstance(box, str) else tma).name))
        else:
            b.Append(t.name, ("consumer", simt.name))
    _wait_on_edges(b, graph)
    plan = b.build(stages=choice.stages, pipelined=loop, style=choice.style,
                   notes=(choice.describe(device.terms),))
    kind = lambda unit: device.unit(unit).kind       # noqa: E731
    if choice.overlap:
        plan = rotated(plan, "consumer", kind)
        if isinstance(plan, str):
            raise Unfit(plan)
    if choice.pingpong:
        (consumer,) = [r for r in plan.roles if r.name == "consumer"]
        where = turns(consumer, loop, kind)
        if isinstance(where, str):
            raise Unfit(where)
    return _fits(plan, device)


def _consumer_budget(device: Device, choice: Choice) -> int:
    """Registers per thread each consumer warpgroup gets beside the producer's (a
    multiple of 8): setmaxnreg's counts. Whether the consumers' values fit in them is the
    lowering's register estimate's to say (ptc.lower.registers: one estimate, read off
    the lowered ops), which refuses the plan when they do not."""
    res = device.resources
    wg = res.warpgroup_size
    budget = (res.registers // (wg * res.warp_size) - PRODUCER_REGISTERS) // choice.consumers
    return min(res.max_registers_per_thread, budget - budget % 8)


def _wgmma_mmas(graph: STaskGraph, choice: Choice, rows: int) -> set[str]:
    """The mma tasks wgmma takes at each consumer's share of the rows (the others run on
    CUDA cores)."""
    on_wgmma = set()
    for t in graph.tasks:
        if t.kind == TaskKind.MMA:
            m, n, k = mma_extents(graph, t)
            if m == rows:
                m //= choice.consumers       # the consumers divide the rows
            if why_no_wgmma(t.mma_dtype, m, n, k) is None:
                on_wgmma.add(t.name)
    return on_wgmma


def _producer_box(graph: STaskGraph, t, wgmma_operand: bool, rules):
    """The TMA box the producer loads task `t` with, or (a str) why none takes it and its
    threads copy it; Unfit when neither can, or a wgmma operand would not land in the
    layout wgmma reads."""
    box = tma_box(graph.kernel, graph.tiles, t.stmts[0].value, rules)
    if box == STRIDED or box == GATHERED and wgmma_operand:
        why = _threads_copy(graph, t, box, rules)
        if why == box:
            return box
        if not wgmma_operand:      # strided rows go only into the layout TMA would write
            raise Unfit(f"the producer cannot load {t.name}: {why}")
        box = why
    if wgmma_operand and (isinstance(box, str) or box.layout.swizzle != "tma"):
        why = box if isinstance(box, str) else "TMA would store it densely"
        raise Unfit(f"{t.name} feeds wgmma from shared memory in a layout TMA "
                    f"writes, but {why}")
    if isinstance(box, str):
        why = per_thread_copy(graph.kernel, t.stmts[0].value, rules)
        if why:
            raise Unfit(f"the producer cannot load {t.name}: no TMA box takes it "
                        f"({box}), and {why}")
    return box


def program_order(graph: STaskGraph, on_async_unit) -> list:
    """The graph's tasks in the order a role issues them: program order, except that a
    task on a synchronous unit that reads a loaded tile an earlier asynchronous task (a
    wgmma) also reads moves up to just before that reader, when it neither depends on
    nor feeds any task it passes. The slot is released after its last reader; a wgmma
    still reads it after a later CUDA-core reader is done, so with the CUDA-core reader
    last no release was safe and no plan was verified (`acc += a @ b; mx = max(mx,
    rowmax(a))` on sm90). `on_async_unit(task)`: where the construction places it."""
    order = list(graph.tasks)
    loads = {t.name for t in graph.tasks if t.op == TaskOp.LOAD}
    tiles_read = {t.name: set() for t in graph.tasks}
    linked: dict[str, set[str]] = {t.name: set() for t in graph.tasks}
    for e in graph.edges:
        linked[e.src].add(e.dst)
        linked[e.dst].add(e.src)
        if e.src in loads and e.distance == 0:
            tiles_read[e.dst].add(e.src)
    for task in list(order):
        if task.op == TaskOp.LOAD or on_async_unit(task) or not tiles_read[task.name]:
            continue
        at = order.index(task)
        first = next((i for i, t in enumerate(order[:at]) if t.region == task.region
                      and on_async_unit(t) and tiles_read[t.name] & tiles_read[task.name]),
                     None)
        if first is None:
            continue
        passed = order[first:at]
        if any(t.name in linked[task.name] or set(t.defines) & set(task.defines)
               for t in passed):
            continue
        order.insert(first, order.pop(at))
    return order


def _mma_operand_loads(graph: STaskGraph, mmas: set[str]) -> set[str]:
    """The loads whose tiles these mmas read (wgmma reads them from shared memory in the
    layout TMA writes)."""
    loaded = {t.stmts[0].name: t.name for t in graph.tasks if t.op == TaskOp.LOAD}
    out = set()
    for t in graph.tasks:
        if t.name in mmas:
            for operand in (t.mma.a, t.mma.b):
                out.update(loaded[n] for n in _vars(operand) if n in loaded)
    return out


def _k_major_ok(graph: STaskGraph, mmas: set[str]) -> None:
    """8-bit wgmma reads K-major operands only: A stored [m][k] (not read transposed), B
    [n][k] (read as `.T`). Either way round a B tile has k along its rows."""
    loaded = {t.stmts[0].name: t.name for t in graph.tasks if t.op == TaskOp.LOAD}
    for t in graph.tasks:
        if t.name not in mmas:
            continue
        for which, operand in (("a", t.mma.a), ("b", t.mma.b)):
            flips = 0
            while isinstance(operand, T.Transpose):
                operand, flips = operand.arg, flips + 1
            if (flips % 2 == 1) == (which == "a"):      # A transposed, or B not
                name = next((loaded[n] for n in _vars(operand) if n in loaded), t.name)
                why = why_not_k_major(t.mma_dtype, which, name)
                if why:
                    raise Unfit(f"{t.name}: {why}")


def _vars(e: T.TExpr) -> set[str]:
    if isinstance(e, T.Var):
        return {e.name}
    return set().union(*(_vars(c) for c in T.children(e)))


def _single_role(graph, device, choice, loop, atoms=None) -> Plan:
    copy = copy_unit(device, choice.style)
    res = device.resources
    threads = choice.warps * res.warp_size
    if threads > res.max_threads_per_block:
        raise Unfit(f"{threads} threads exceed the block limit {res.max_threads_per_block}")
    # what a thread may hold at one block per EU: the lowering estimates what it needs
    # (ptc.lower.registers) and the built plan carries that (driver.finalized)
    limit = min(res.max_registers_per_thread, res.registers // threads)
    stages = choice.stages if choice.style == Style.MULTISTAGE else 1
    if stages > 1 and not _loop_loads(graph, loop):
        raise Unfit(f"loop {loop or '-'} loads nothing to pipeline")
    prefetching = stages > 1 or choice.style == Style.INTERLEAVED
    if prefetching and not copy.is_async:
        raise Unfit(f"{copy.name} is synchronous: prefetching would stall the role")
    issue_before = interleaving(graph, loop) if choice.style == Style.INTERLEAVED else {}
    b = PlanBuilder(graph, device)
    b.role("main", warps=choice.warps, registers=limit - limit % 8)
    simt = unit_for(device, UnitKind.SIMT)

    def place(t) -> None:
        if t.op == TaskOp.LOAD:
            offset = stages - 1 if t.region == loop else 0
            if t.name in issue_before:
                offset = issue_before[t.name][1]
            b.Append(t.name, ("main", copy.name), offset=offset)
        elif t.kind == TaskKind.MMA:
            b.Append(t.name, ("main", mma_unit(graph, device, t, choice.warps, atoms).name))
        elif t.op in (TaskOp.STORE, TaskOp.ATOMIC_ADD):
            b.Append(t.name, ("main", copy.name))
        else:
            b.Append(t.name, ("main", simt.name))

    def on_async_unit(t) -> bool:
        return t.kind == TaskKind.MMA and \
            mma_unit(graph, device, t, choice.warps, atoms).is_async

    for t in program_order(graph, on_async_unit):
        if t.name in issue_before:
            continue
        for load, (reader, _) in issue_before.items():
            if reader == t.name:
                place(graph.task(load))
                b.After(load, _loads_read_by(graph, loop, reader))
        place(t)
    _wait_on_edges(b, graph)
    return _fits(b.build(stages=stages, pipelined=loop if prefetching else "",
                         style=choice.style, notes=(choice.describe(device.terms),)), device)


def _loop_loads(graph: STaskGraph, loop: str) -> list[str]:
    return [t.name for t in graph.tasks if t.op == TaskOp.LOAD and t.region == loop]


def _loads_read_by(graph: STaskGraph, loop: str, reader: str) -> list[str]:
    loads = set(_loop_loads(graph, loop))
    return [e.src for e in graph.edges if e.dst == reader and e.src in loads and e.distance == 0]


def interleaving(graph: STaskGraph, loop: str) -> dict[str, tuple[str, int]]:
    """For the interleaved style: each load of the pipelined loop -> (the task it is issued
    just before, iterations ahead). The readers are the tasks that first read some loaded
    tile, in program order; a load is issued before the reader preceding its own first
    reader, cyclically -- one iteration ahead when that wraps to the previous iteration's
    last reader."""
    loads = _loop_loads(graph, loop)
    first: dict[str, str] = {}
    for t in graph.tasks:
        for src in _loads_read_by(graph, loop, t.name):
            if src in first:
                # issued before the reader preceding its first one, the load would overwrite
                # the tile its other reader still needs
                raise Unfit(f"interleaving needs each loaded tile read by one task; {src} is "
                            f"read by {first[src]} and {t.name}")
            first[src] = t.name
    readers = [t.name for t in graph.tasks if t.name in set(first.values())]
    if len(readers) < 2:
        raise Unfit(f"interleaving needs two readers of loaded tiles in loop {loop or '-'}; "
                    f"it has {len(readers)}")
    out = {}
    for load in loads:
        if load not in first:
            continue
        j = readers.index(first[load])
        out[load] = (readers[j - 1], 1 if j == 0 else 0)
    return out


def _fits(plan: Plan, device: Device) -> Plan:
    """The plan, if its buffers and their barriers fit a block's shared memory (counted as
    the verifier counts them)."""
    limit = device.resources.shared_memory_bytes
    need = plan.launch.dynamic_smem + barrier_bytes(plan, device)
    if need > limit:
        raise Unfit(f"needs {need} bytes of {device.terms.shared} (buffers and barriers), over the "
                    f"{limit} a block may use")
    return plan


def _wait_on_edges(b: PlanBuilder, graph: STaskGraph) -> None:
    for e in graph.edges:
        if e.distance == 0:
            b.Wait(e.dst, [e.src])


def _tile_rows(graph: STaskGraph) -> int:
    """Rows of the tile the consumers split: the first dim of the mma outputs."""
    for t in graph.tasks:
        if t.kind == TaskKind.MMA:
            return t.shape[0]
    return max((t.shape[0] for t in graph.tasks if t.shape), default=1)
