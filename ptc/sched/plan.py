"""The plan (sProgram): what runs where, in which order, with which waits and buffers.

A plan has one or more roles (a TMA producer warp, consumer warpgroups; or one role that
does everything, as on sm80). A role's body is a program of steps and loops, mirroring the
sTask-graph's regions. A step runs one sTask on one sEU; `offset` > 0 runs the task for
iteration n + offset while the role is at iteration n (software pipelining).

Synchronisation is by barriers with phase counting, as mbarriers work: the j-th time a role
instance waits on barrier B it waits for B's j-th phase, which completes when B has
received `arrivals` arrives for that phase. An `empty` barrier starts with `stages` phases
already complete (every slot starts free). A step on an async unit performs its arrives
when it completes (TMA's complete_tx), not when it is issued.

Ring buffers hold the values that cross roles or come from async copies: write number k of
a buffer goes to slot k % stages.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Union

from ..diagnostics import CompileError, Diagnostic


class Style(StrEnum):
    """How a plan arranges its work (ptc.sched.construct describes each). A StrEnum: a
    style equals, prints and writes to JSON as its value."""

    WARP_SPECIALIZED = "warp_specialized"
    MULTISTAGE = "multistage"
    INTERLEAVED = "interleaved"
    SEQUENTIAL = "sequential"
    CUSTOM = "custom"           # built with ptc.sched.primitives, not by the search


# the styles whose plan has one role that does everything
SINGLE_ROLE_STYLES = (Style.MULTISTAGE, Style.INTERLEAVED, Style.SEQUENTIAL)

# a step that runs no sTask, only waits and arrives: its task and unit names
SYNC_TASK = "sync"
SYNC_UNIT = "barrier"


@dataclass(frozen=True)
class Step:
    task: str
    unit: str
    offset: int = 0
    waits: tuple[str, ...] = ()
    arrives: tuple[str, ...] = ()

    @classmethod
    def sync(cls, waits=(), arrives=()) -> "Step":
        """A step that only waits on `waits` and arrives on `arrives`."""
        return cls(SYNC_TASK, SYNC_UNIT, 0, tuple(waits), tuple(arrives))

    @property
    def is_sync(self) -> bool:
        return self.task == SYNC_TASK


@dataclass(frozen=True)
class LoopBlock:
    var: str
    body: tuple[Union[Step, "LoopBlock"], ...]


Item = Union[Step, LoopBlock]


@dataclass(frozen=True)
class Role:
    name: str
    warps: int
    registers: int          # per-thread register budget (setmaxnreg on sm90)
    body: tuple[Item, ...]
    instances: int = 1      # warpgroups running this same program on parts of the tile
    pingpong: bool = False  # the instances take turns at the tensor cores (ptc.sched.turns)


@dataclass(frozen=True)
class Buffer:
    name: str
    value: str              # the sTask value it holds
    producer: str           # the task that writes it
    consumers: tuple[str, ...]
    space: str              # smem | lds
    stages: int
    slot_bytes: int
    dtype: str
    shape: tuple[int, ...]
    layout: str             # e.g. swizzle128, row
    # the layout the lowering built it in (rows, xor128, tma128, transposed_k8, ...): set
    # on the plan as built (driver.finalized), read by explain; "" before lowering
    built_layout: str = ""


@dataclass(frozen=True)
class Barrier:
    name: str               # full:X / empty:X
    buffer: str
    kind: str               # full | empty
    arrivals: int           # arrives that complete one phase
    initial: int = 0        # phases complete at the start (stages, for empty barriers)


@dataclass(frozen=True)
class Launch:
    grid: tuple[str, ...]   # one entry per grid axis: "ceil(M/128)" or "B"
    threads: int
    dynamic_smem: int
    raster: str = "row"     # row | column | swizzle
    persistent: bool = False


@dataclass(frozen=True)
class Estimate:
    cycles_per_tile: float
    tiles: int
    waves: float
    seconds: float
    flops: float
    bytes: float
    unit_busy: tuple[tuple[str, float], ...] = ()   # fraction of the tile's time per sEU
    bound: str = ""                                  # what limits it: mma | copy | simt | ...


@dataclass(frozen=True)
class TaskIssue:
    """What one execution of a task issues, per warp, in the kernel that gets built (the
    lowering's count, ptc.lower.costs). The cost model times these where a plan has them."""

    task: str
    mma: int = 0                 # tensor-core instructions
    fragment_loads: int = 0      # ldmatrix (or the equivalent shared reads)
    simt: int = 0                # FP32 / integer pipe
    sfu: int = 0                 # MUFU
    shuffles: int = 0
    shared: int = 0              # other shared-memory loads and stores
    mma_copies: int = 1          # warps that compute each atom (ptc.lower.atoms.Tiling)
    copy_bytes: int = 0          # a copy's bytes as the built copy moves them (per block)


@dataclass(frozen=True)
class Plan:
    kernel: str
    device: str
    tiles: tuple[tuple[str, int], ...]
    pipelined: str                  # the loop that is pipelined ("" when none)
    stages: int
    style: Style                    # (a str where a plan JSON names no Style: see _Reader.style)
    roles: tuple[Role, ...]
    buffers: tuple[Buffer, ...]
    barriers: tuple[Barrier, ...]
    launch: Launch
    estimate: Estimate | None = None
    notes: tuple[str, ...] = field(default=())
    issue: tuple[TaskIssue, ...] = field(default=())   # from the lowering (empty: none yet)

    def issue_of(self, task: str) -> TaskIssue | None:
        for t in self.issue:
            if t.task == task:
                return t
        return None

    @property
    def tile_sizes(self) -> dict[str, int]:
        return dict(self.tiles)

    def buffer(self, name: str) -> Buffer:
        for b in self.buffers:
            if b.name == name:
                return b
        raise KeyError(name)

    def barrier(self, name: str) -> Barrier:
        for b in self.barriers:
            if b.name == name:
                return b
        raise KeyError(name)

    def buffer_for(self, src: str, dst: str, value: str) -> Buffer | None:
        """The buffer that carries `value` from task `src` to task `dst`, if any."""
        for b in self.buffers:
            if b.producer == src and dst in b.consumers and (not b.value or b.value == value):
                return b
        return None

    def steps(self) -> list[tuple[Role, Step]]:
        out = []
        for role in self.roles:
            for step in walk_steps(role.body):
                out.append((role, step))
        return out


def walk_steps(items) -> list[Step]:
    out: list[Step] = []
    for it in items:
        if isinstance(it, Step):
            out.append(it)
        else:
            out.extend(walk_steps(it.body))
    return out


# ---- JSON ----------------------------------------------------------------------------
def to_json(plan: Plan) -> str:
    return json.dumps(_encode(plan), indent=2) + "\n"


def _encode(obj):
    if isinstance(obj, LoopBlock):
        return {"loop": obj.var, "body": [_encode(i) for i in obj.body]}
    if isinstance(obj, Step):
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(obj).items()}
    if isinstance(obj, Role):
        return {"name": obj.name, "warps": obj.warps, "registers": obj.registers,
                "instances": obj.instances,
                **({"pingpong": True} if obj.pingpong else {}),
                "body": [_encode(i) for i in obj.body]}
    if isinstance(obj, Plan):
        return {
            "kernel": obj.kernel, "device": obj.device, "tiles": dict(obj.tiles),
            "pipelined": obj.pipelined, "stages": obj.stages, "style": obj.style,
            "roles": [_encode(r) for r in obj.roles],
            "buffers": [asdict(b) for b in obj.buffers],
            "barriers": [asdict(b) for b in obj.barriers],
            "launch": asdict(obj.launch),
            "estimate": asdict(obj.estimate) if obj.estimate else None,
            "notes": list(obj.notes),
            "issue": {t.task: {k: v for k, v in asdict(t).items() if k != "task"}
                      for t in obj.issue},
        }
    raise TypeError(obj)


class _Reader:
    """Decodes a plan JSON with errors that name the file and the key."""

    def __init__(self, filename: str, prefix: str = "") -> None:
        self.filename, self.prefix = filename, prefix    # prefix: "grids[1]." in a list

    def fail(self, where: str, message: str):
        raise CompileError(Diagnostic(f"{self.filename}: {self.prefix}{where}: {message}",
                                      hint="write a plan with `ptc compile --emit plan`"))

    def get(self, obj, key: str, kind, where: str):
        if not isinstance(obj, dict):
            self.fail(where, f"expected an object, got {type(obj).__name__}")
        if key not in obj:
            self.fail(where, f"missing key {key!r}")
        value = obj[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if bool in kinds and isinstance(value, bool):
            return value
        if isinstance(value, bool) or not isinstance(value, kinds):
            names = " or ".join(k.__name__ for k in kinds)
            self.fail(f"{where}.{key}", f"expected {names}, got {type(value).__name__}")
        return value

    def strings(self, obj, key, where) -> tuple[str, ...]:
        values = self.get(obj, key, list, where)
        for i, v in enumerate(values):
            if not isinstance(v, str):
                self.fail(f"{where}.{key}[{i}]", "expected a string")
        return tuple(values)

    def ints(self, obj, key, where) -> tuple[int, ...]:
        values = self.get(obj, key, list, where)
        for i, v in enumerate(values):
            if not isinstance(v, int) or isinstance(v, bool):
                self.fail(f"{where}.{key}[{i}]", "expected an integer")
        return tuple(values)

    def style(self, obj, where: str) -> Style | str:
        """The plan's style; a name that is no Style stays the string it was, for the
        verifier to report with the plan's other problems."""
        value = self.get(obj, "style", str, where)
        try:
            return Style(value)
        except ValueError:
            return value

    def item(self, obj, where: str) -> Item:
        if isinstance(obj, dict) and "loop" in obj:
            body = self.get(obj, "body", list, where)
            return LoopBlock(self.get(obj, "loop", str, where),
                             tuple(self.item(b, f"{where}.body[{i}]") for i, b in enumerate(body)))
        return Step(self.get(obj, "task", str, where), self.get(obj, "unit", str, where),
                    self.get(obj, "offset", int, where), self.strings(obj, "waits", where),
                    self.strings(obj, "arrives", where))

    def plan(self, data) -> Plan:
        w = "plan"
        roles = []
        for i, r in enumerate(self.get(data, "roles", list, w)):
            rw = f"roles[{i}]"
            body = self.get(r, "body", list, rw)
            roles.append(Role(self.get(r, "name", str, rw), self.get(r, "warps", int, rw),
                              self.get(r, "registers", int, rw),
                              tuple(self.item(b, f"{rw}.body[{j}]") for j, b in enumerate(body)),
                              self.get(r, "instances", int, rw),
                              self.get(r, "pingpong", bool, rw) if "pingpong" in r else False))
        buffers = []
        for i, b in enumerate(self.get(data, "buffers", list, w)):
            bw = f"buffers[{i}]"
            buffers.append(Buffer(
                self.get(b, "name", str, bw), self.get(b, "value", str, bw),
                self.get(b, "producer", str, bw), self.strings(b, "consumers", bw),
                self.get(b, "space", str, bw), self.get(b, "stages", int, bw),
                self.get(b, "slot_bytes", int, bw), self.get(b, "dtype", str, bw),
                self.ints(b, "shape", bw), self.get(b, "layout", str, bw),
                self.get(b, "built_layout", str, bw) if "built_layout" in b else ""))
        barriers = []
        for i, b in enumerate(self.get(data, "barriers", list, w)):
            bw = f"barriers[{i}]"
            barriers.append(Barrier(self.get(b, "name", str, bw), self.get(b, "buffer", str, bw),
                                    self.get(b, "kind", str, bw), self.get(b, "arrivals", int, bw),
                                    self.get(b, "initial", int, bw)))
        lw = "launch"
        launch_d = self.get(data, "launch", dict, w)
        launch = Launch(self.strings(launch_d, "grid", lw), self.get(launch_d, "threads", int, lw),
                        self.get(launch_d, "dynamic_smem", int, lw),
                        self.get(launch_d, "raster", str, lw),
                        self.get(launch_d, "persistent", bool, lw))
        tiles_d = self.get(data, "tiles", dict, w)
        for k, v in tiles_d.items():
            if not isinstance(v, int) or isinstance(v, bool):
                self.fail(f"tiles.{k}", "expected an integer")
        est = data.get("estimate") if isinstance(data, dict) else None
        estimate = None
        if est is not None:
            ew = "estimate"
            num = (int, float)
            estimate = Estimate(
                self.get(est, "cycles_per_tile", num, ew), self.get(est, "tiles", int, ew),
                self.get(est, "waves", num, ew), self.get(est, "seconds", num, ew),
                self.get(est, "flops", num, ew), self.get(est, "bytes", num, ew),
                tuple((str(a), float(b)) for a, b in self.get(est, "unit_busy", list, ew)),
                self.get(est, "bound", str, ew))
        issue = [self.issue(task, counts) for task, counts in (data.get("issue") or {}).items()]
        return Plan(self.get(data, "kernel", str, w), self.get(data, "device", str, w),
                    tuple(tiles_d.items()), self.get(data, "pipelined", str, w),
                    self.get(data, "stages", int, w), self.style(data, w),
                    tuple(roles), tuple(buffers), tuple(barriers), launch, estimate,
                    self.strings(data, "notes", w), tuple(issue))

    def issue(self, task: str, counts) -> TaskIssue:
        iw = f"issue.{task}"
        return TaskIssue(task, *(self.get(counts, k, int, iw) for k in
                                 ("mma", "fragment_loads", "simt", "sfu", "shuffles", "shared")),
                         mma_copies=self.get(counts, "mma_copies", int, iw)
                         if "mma_copies" in counts else 1,
                         copy_bytes=self.get(counts, "copy_bytes", int, iw)
                         if "copy_bytes" in counts else 0)


def from_json(text: str, filename: str = "plan.json") -> Plan:
    return _Reader(filename).plan(_decode(text, filename))


def _decode(text: str, filename: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        # the position is in the plan file, not in the .pt the CLI shows: keep it in the text
        raise CompileError(Diagnostic(f"{filename}:{exc.lineno}:{exc.colno}: {filename} is not "
                                      f"valid JSON: {exc.msg}")) from None


# A kernel with several grids has one plan per grid, launched in order; its JSON is
# {"kernel", "device", "grids": [plan, ...]}. A one-grid kernel's JSON is its plan.
def plans_to_json(plans) -> str:
    plans = tuple(plans)
    if len(plans) == 1:
        return to_json(plans[0])
    return json.dumps({"kernel": plans[0].kernel, "device": plans[0].device,
                       "grids": [_encode(p) for p in plans]}, indent=2) + "\n"


def plans_from_json(text: str, filename: str = "plan.json") -> tuple[Plan, ...]:
    data = _decode(text, filename)
    if not (isinstance(data, dict) and "grids" in data):
        return (_Reader(filename).plan(data),)
    grids = _Reader(filename).get(data, "grids", list, "plan")
    return tuple(_Reader(filename, f"grids[{i}].").plan(g) for i, g in enumerate(grids))
