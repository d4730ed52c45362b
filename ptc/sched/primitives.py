"""The scheduling primitives of PipeThreader, as a small Python API.

    from ptc.sched.primitives import PlanBuilder
    b = PlanBuilder(graph, device)                    # graph: a propagated STaskGraph
    b.role("producer", warps=4, registers=40)
    b.role("consumer", warps=4, registers=232)
    b.Append("load_A", ("producer", "tma"))          # task on (role, sEU), in program order
    b.Append("load_B", ("producer", "tma"))
    b.Append("simt_acc", ("consumer", "cuda_core"))
    b.Append("mma_acc", ("consumer", "tensor_core"))
    b.Wait("mma_acc", ["load_A", "load_B"])           # mma waits for both loads
    b.After("load_V", ["load_K"])                     # issue V only once K has landed
    ...
    plan = b.build(stages=3)

`Propagate` (ptc.stask.propagate) fixes the tile shapes before a builder is made. `build`
turns the waits into ring buffers and full/empty barriers: a value crossing roles, or made
by an async unit, gets a buffer; its consumer waits `full:X`, and — when the buffer is
rewritten and read by another role, or by its own role on an async unit (wgmma) — each such
consumer role's last reader of an iteration arrives `empty:X`, on which the producer waits
before overwriting the slot. `After` orders a step behind a value's arrival without reading
it: when it comes before the value's first reader in the role, the role's wait on `full:X`
moves to a sync step just before it (FlashAttention-2 issues V once K has landed, so one
barrier both publishes K and frees V's buffer).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..devices import Device
from ..stask.graph import STaskGraph, TaskKind, TaskOp
from .plan import Barrier, Buffer, Launch, LoopBlock, Plan, Role, Step, Style


@dataclass
class _RoleSpec:
    name: str
    warps: int
    registers: int
    instances: int
    pingpong: bool = False
    steps: list[tuple[str, str, int]] = field(default_factory=list)  # (task, unit, offset)


@dataclass
class _Syncs:
    """Where build puts the barriers' waits and arrives: on the steps themselves, or on
    sync steps of their own."""
    waits: dict[str, list[str]] = field(default_factory=dict)     # task -> waits
    arrives: dict[str, list[str]] = field(default_factory=dict)   # task -> arrives
    # (role, first task of loop) -> waits
    before: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    # (role, last task of loop) -> arrives
    after: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    # (role, task) -> waits just before it
    at: dict[tuple[str, str], list[str]] = field(default_factory=dict)


def Propagate(graph: STaskGraph, tile_shape) -> STaskGraph:
    """Derive every task's tile shape from the chosen tiles (see ptc.stask.propagate)."""
    from ..stask.propagate import propagate
    return propagate(graph, tile_shape)


class PlanBuilder:
    def __init__(self, graph: STaskGraph, device: Device) -> None:
        if graph.tiles is None:
            raise ValueError("Propagate the graph before scheduling it")
        self.graph = graph
        self.device = device
        self.roles: dict[str, _RoleSpec] = {}
        self.placed: dict[str, tuple[str, str]] = {}
        self.waits: dict[str, list[str]] = {}
        self.after: dict[str, list[str]] = {}
        self.stage_override: dict[str, int] = {}

    # ---- the primitives ----------------------------------------------------------------
    def role(self, name: str, warps: int, registers: int, instances: int = 1,
             pingpong: bool = False) -> None:
        self.roles[name] = _RoleSpec(name, warps, registers, instances, pingpong)

    def Append(self, stask: str, where: tuple[str, str], offset: int = 0) -> None:
        role, unit = where
        self.graph.task(stask)  # KeyError for an unknown task
        if role not in self.roles:
            raise KeyError(f"no role {role!r}; declare it with role()")
        self.device.unit(unit)
        if stask in self.placed:
            raise ValueError(f"{stask} is already placed on {self.placed[stask]}")
        self.roles[role].steps.append((stask, unit, offset))
        self.placed[stask] = (role, unit)

    def Wait(self, stask: str, on: list[str]) -> None:
        self.waits.setdefault(stask, [])
        for s in on:
            if s not in self.waits[stask]:
                self.waits[stask].append(s)

    def After(self, stask: str, on: list[str]) -> None:
        """Issue `stask` only once the values of `on` have arrived (an ordering wait: it
        does not read them)."""
        self.graph.task(stask)
        for s in on:
            self.graph.task(s)
            if s not in self.after.setdefault(stask, []):
                self.after[stask].append(s)

    def stages(self, stask: str, n: int) -> None:
        """Ring depth of the buffer that `stask` writes (default: see build)."""
        self.stage_override[stask] = n

    # ---- derived ---------------------------------------------------------------------
    def _is_async(self, task: str) -> bool:
        return self.device.unit(self.placed[task][1]).is_async

    def _crossing(self, src: str, dst: str) -> bool:
        """Does the value from src to dst live in a buffer? Loaded tiles always do (shared
        memory / LDS on every backend); other values when they cross roles."""
        return self.graph.task(src).op == TaskOp.LOAD or self.placed[src][0] != self.placed[dst][0]

    def _needs_full(self, src: str, consumer_roles) -> bool:
        """Must consumers wait for the write? When it is async or made by another role."""
        return self._is_async(src) or any(r != self.placed[src][0] for r in consumer_roles)

    def build(self, stages: int = 1, pipelined: str = "", style: Style = Style.CUSTOM,
              launch: Launch | None = None, notes: tuple[str, ...] = ()) -> Plan:
        g = self.graph
        missing = [t.name for t in g.tasks if t.name not in self.placed]
        if missing:
            raise ValueError(f"tasks not placed: {', '.join(missing)}")
        buffers = self._buffers(stages, pipelined)
        barriers, syncs = self._barriers(buffers)
        roles = [self._built_role(spec, syncs) for spec in self.roles.values()]
        threads = sum(r.warps * r.instances for r in self.roles.values()) * self.device.resources.warp_size
        smem = sum(b.stages * b.slot_bytes for b in buffers.values())
        launch = launch or Launch(grid_extents(g), threads, smem)
        return Plan(g.kernel.name, self.device.name, tuple(sorted(g.tiles.items())), pipelined,
                    stages, style, tuple(roles), tuple(buffers.values()), tuple(barriers),
                    launch, None, tuple(notes))

    def _buffers(self, stages: int, pipelined: str) -> dict[str, Buffer]:
        """One buffer per producer task whose value crosses to a waiting consumer, by
        producer, read by those consumers."""
        buffers: dict[str, Buffer] = {}
        readers: dict[str, list[str]] = {}
        for dst, srcs in self.waits.items():
            for src in srcs:
                if not self._crossing(src, dst):
                    continue
                readers.setdefault(src, []).append(dst)
                if src not in buffers:
                    buffers[src] = self._buffer(src, stages, pipelined)
        for src, rs in readers.items():
            b = buffers[src]
            buffers[src] = Buffer(b.name, b.value, b.producer, tuple(rs), b.space, b.stages,
                                  b.slot_bytes, b.dtype, b.shape, b.layout)
        return buffers

    def _buffer(self, src: str, stages: int, pipelined: str) -> Buffer:
        """The buffer `src` writes (no consumers yet): `stages` deep in the pipelined loop,
        double-buffered in another loop when it crosses roles (unless overridden)."""
        t = self.graph.task(src)
        in_loop = bool(t.region)
        cross = any(self.placed[d][0] != self.placed[src][0]
                    for d, on in self.waits.items() if src in on)
        default = (stages if pipelined and t.region == pipelined
                   else 2 if in_loop and cross else 1)
        depth = self.stage_override.get(src, default)
        size = math.prod(t.shape) * _bytes(t.dtype)
        layout = "swizzle128" if t.kind == TaskKind.COPY else "row"
        return Buffer(f"{t.defines[0].lstrip('%')}_{self.device.shared_space}"
                      if t.defines else src,
                      t.defines[0] if t.defines else "", src, (),
                      self.device.shared_space, depth, size, t.dtype,
                      tuple(t.shape), layout)

    def _barriers(self, buffers: dict[str, Buffer]) -> tuple[list[Barrier], _Syncs]:
        """Each buffer's full barrier (when consumers must wait for the write) and empty
        barrier (when a slot is rewritten after another role, or an async unit, read it),
        and where their waits and arrives go."""
        region_of = {t.name: t.region for t in self.graph.tasks}
        barriers: list[Barrier] = []
        syncs = _Syncs()
        for src, b in buffers.items():
            prod_role = self.placed[src][0]
            region = region_of[src]
            consumer_roles = sorted({self.placed[r][0] for r in b.consumers},
                                    key=list(self.roles).index)
            full = f"full:{b.name}" if self._needs_full(src, consumer_roles) else None
            if full:
                barriers.append(Barrier(full, b.name, "full", 1))
                syncs.arrives.setdefault(src, []).append(full)
            rewritten = bool(region)
            # roles that must release a slot before it is rewritten: the other roles, and the
            # producer's own role when it reads the slot on an async unit (wgmma reads
            # shared memory after it is issued, so program order does not free the slot)
            releasing = [r for r in consumer_roles if r != prod_role or any(
                self._is_async(c) for c in b.consumers if self.placed[c][0] == r)]
            needs_empty = rewritten and bool(releasing)
            if needs_empty:
                empty = f"empty:{b.name}"
                arrivals = sum(self.roles[r].instances for r in releasing)
                barriers.append(Barrier(empty, b.name, "empty", arrivals, initial=b.stages))
                syncs.waits.setdefault(src, []).insert(0, empty)
            for role in consumer_roles:
                self._consumer_syncs(role, src, b, region, full,
                                     needs_empty and role in releasing, syncs)
        return barriers, syncs

    def _consumer_syncs(self, role: str, src: str, b: Buffer, region: str, full: str | None,
                        releases: bool, syncs: _Syncs) -> None:
        """Where consumer `role` waits on `full` (on its first reader of b, on a sync step
        before the loop around it, or before a step ordered After the value) and, when it
        `releases` the slot, where it arrives on b's empty barrier (its last reader, or a
        sync step after the loop around it)."""
        g = self.graph
        order = [s[0] for s in self.roles[role].steps]
        mine = [r for r in order if r in b.consumers]
        first, last = mine[0], mine[-1]
        first_item = _item_at_level(g, first, region)
        last_item = _item_at_level(g, last, region)
        ordered = [t for t in order if src in self.after.get(t, ())
                   and order.index(t) < order.index(first)
                   and _item_at_level(g, t, region) == t]
        if full and ordered:
            syncs.at.setdefault((role, ordered[0]), []).append(full)
        elif full and first_item == first:
            syncs.waits.setdefault(first, []).append(full)
        elif full:
            syncs.before.setdefault((role, first_item), []).append(full)
        if releases:
            arrive = f"empty:{b.name}"
            if last_item == last:
                syncs.arrives.setdefault(last, []).append(arrive)
            else:
                syncs.after.setdefault((role, last_item), []).append(arrive)

    def _built_role(self, spec: _RoleSpec, syncs: _Syncs) -> Role:
        """The role's steps in program order, with their waits and arrives and the sync
        steps around them, nested into the graph's loops."""
        steps: list[tuple[Step, str]] = []       # (step, the task whose region it sits in)
        for t, u, off in spec.steps:
            if (spec.name, t) in syncs.at:
                steps.append((Step.sync(waits=syncs.at[spec.name, t]), t))
            steps.append((Step(t, u, off, tuple(syncs.waits.get(t, ())),
                               tuple(syncs.arrives.get(t, ()))), t))
        body = _nest(self.graph, spec.name, steps, syncs.before, syncs.after)
        return Role(spec.name, spec.warps, spec.registers, tuple(body), spec.instances,
                    spec.pingpong)


def grid_extents(g: STaskGraph) -> tuple[str, ...]:
    out = []
    for a in g.grid.axes:
        out.append(a.dim if a.size is None else f"ceil({a.dim}/{g.tiles[a.size] if isinstance(a.size, str) else a.size})")
    return tuple(out)


def _bytes(dtype: str) -> int:
    from ..sema.dtypes import DTYPE_BYTES
    return DTYPE_BYTES[dtype]


def _item_at_level(g: STaskGraph, task: str, region: str) -> str:
    """The item of `region` that holds `task`: the task itself, or the loop around it."""
    path = g.region_path(g.task(task).region)
    level = g.region_path(region)
    if len(path) == len(level):
        return task
    return "loop:" + path[len(level)]


def _nest(g: STaskGraph, role: str, steps: list[tuple[Step, str]], sync_before,
          sync_after) -> list:
    """Arrange a role's steps into loop blocks following the graph's regions."""
    root: list = []
    stack: list[tuple[str, list]] = [("", root)]
    for step, task in steps:
        path = g.region_path(g.task(task).region)
        # close loops not on this step's path
        while len(stack) - 1 > len(path) or any(
                stack[i + 1][0] != path[i] for i in range(len(stack) - 1)):
            name, body = stack.pop()
            stack[-1][1].append(LoopBlock(name, tuple(body)))
            for a in sync_after.get((role, "loop:" + name), ()):
                stack[-1][1].append(Step.sync(arrives=(a,)))
        while len(stack) - 1 < len(path):
            name = path[len(stack) - 1]
            for w in sync_before.get((role, "loop:" + name), ()):
                stack[-1][1].append(Step.sync(waits=(w,)))
            stack.append((name, []))
        stack[-1][1].append(step)
    while len(stack) > 1:
        name, body = stack.pop()
        stack[-1][1].append(LoopBlock(name, tuple(body)))
        for a in sync_after.get((role, "loop:" + name), ()):
            stack[-1][1].append(Step.sync(arrives=(a,)))
    return root
