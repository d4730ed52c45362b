"""The Explanation: plain frozen data, and its JSON form."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from ..devices.model import Terms
from ..sched.plan import Style
from ..stask.graph import TaskKind, TaskOp


@dataclass(frozen=True)
class TaskRow:
    name: str
    kind: TaskKind
    op: TaskOp
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
    layout: str                 # as built (the lowering's), else the plan's request


@dataclass(frozen=True)
class PlanSummary:
    description: str            # e.g. "warp-specialized, 2 stages, 2 consumer warpgroup(s)"
    style: Style
    stages: int
    pipelined: str              # the pipelined loop, "" when none
    roles: tuple[RoleRow, ...]
    buffers: tuple[BufferRow, ...]
    grid: tuple[str, ...]
    threads: int
    smem_bytes: int
    raster: str
    persistent: bool
    # what each task issues per warp in the built kernel (the lowering's count; empty
    # where the target has no renderer yet): (task, mma, ldmatrix, simt, sfu, shuffles,
    # shared)
    issue: tuple[tuple[str, int, int, int, int, int, int], ...] = ()


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
    peak_label: str             # what flops_pct is a share of ("bf16 mma peak", ...)
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
    kind: TaskKind


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
    aspect: str     # bound | unit | lowering | stages | consumers | pingpong | warps | style |
                    # pipelining | tiles | launch
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
    terms: Terms                             # the device's words (warp/wave, CTA/workgroup, ...)
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
    search_cached: bool = False              # the search ran earlier (ptc.stage_cache)

    @property
    def tiles_text(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.tiles)


def to_dict(expl: Explanation) -> dict:
    d = asdict(expl)
    d["timeline"]["visible"] = len(expl.timeline.visible())
    return d


def to_json(expl: Explanation) -> str:
    return json.dumps(to_dict(expl), indent=2) + "\n"


def grids_to_json(expls) -> str:
    """A kernel with several grids: {"kernel", "grids": [explanation, ...],
    "seconds": their sum} (the grids run one after the other)."""
    expls = list(expls)
    return json.dumps({"kernel": expls[0].kernel, "device": expls[0].device,
                       "grids": [to_dict(e) for e in expls],
                       "seconds": sum(e.performance.seconds for e in expls)}, indent=2) + "\n"
