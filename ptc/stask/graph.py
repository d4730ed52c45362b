"""sTasks and the sTask-graph (docs/architecture.md).

An sTask is one tile-level task: the typed statements it computes, the kind of execution
unit it needs (copy / mma / simt), its tile shape, the bytes it moves and the work it does.
Tasks live in regions: the grid body (`prologue` / `epilogue` around loops) and each tile
loop. Edges carry an iteration distance inside a loop: 0 within one iteration, 1 for a
loop-carried value (`acc`, `mx`).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Mapping

from ..sema import typed as T


class TaskKind(StrEnum):
    """The kind of execution unit an sTask needs (a StrEnum: it equals, prints and writes
    to JSON as its value)."""

    COPY = "copy"
    MMA = "mma"
    SIMT = "simt"


class TaskOp(StrEnum):
    """What an sTask does: its statements' operation."""

    LOAD = "load"
    STORE = "store"
    ATOMIC_ADD = "atomic_add"
    MMA = "mma"
    SIMT = "simt"


@dataclass(frozen=True)
class Work:
    """What a task does, in numbers: memory bytes, tensor-core FLOPs, CUDA-core elementwise
    operations, and transcendental (SFU) operations."""

    bytes: int = 0
    mma_flops: int = 0
    simt_ops: int = 0
    sfu_ops: int = 0

    def __add__(self, other: "Work") -> "Work":
        return Work(self.bytes + other.bytes, self.mma_flops + other.mma_flops,
                    self.simt_ops + other.simt_ops, self.sfu_ops + other.sfu_ops)


@dataclass(frozen=True)
class STask:
    name: str                  # unique, after the program: load_A, mma_acc, simt_p, store_C
    kind: TaskKind
    op: TaskOp
    region: str                # "" for the grid body, else the loop's index (k, n, ...)
    stmts: tuple[T.TStmt, ...] # Let / Store statements, in program order
    defines: tuple[str, ...]   # values it produces
    uses: tuple[str, ...]      # values it reads (produced by other tasks or carried)
    shape: tuple[T.Extent, ...]  # its output tile (symbolic until propagated)
    dtype: str
    tensor: str | None = None  # the tensor a copy task moves
    work: Work = field(default_factory=Work)

    @property
    def gathered(self) -> str | None:
        """The index tensor whose positions a copy task's rows are gathered (or scattered)
        by, None for a copy of consecutive rows."""
        for st in self.stmts:
            value = st.value if isinstance(st, T.Let) else None
            index = st.index if isinstance(st, T.Store) else \
                value.index if isinstance(value, T.Load) else ()
            for item in index:
                if isinstance(item, T.Gather):
                    return item.index.tensor
        return None

    @property
    def mma(self) -> T.MmaAccumulate:
        """What an mma task computes: its one statement's multiply-accumulate."""
        assert self.kind == TaskKind.MMA, self.name
        (s,) = self.stmts
        return s.value

    @property
    def mma_dtype(self) -> str:
        """The input dtype of an mma task's operands (f16, bf16, f32, tf32, i8; for FP8 the
        A operand's format: B's may be the other one)."""
        return self.mma.a.type.dtype


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    value: str
    distance: int              # 0: same iteration; 1: from the previous iteration


@dataclass(frozen=True)
class Region:
    """A grid body or a tile loop; `items` are task names and nested regions in order."""

    name: str                  # "" for the grid, else the loop index
    loop: T.Loop | None
    items: tuple[str | "Region", ...]
    parent: str | None


@dataclass(frozen=True)
class STaskGraph:
    kernel: T.TypedKernel
    grid: T.Grid
    tasks: tuple[STask, ...]
    edges: tuple[Edge, ...]
    root: Region
    tiles: Mapping[str, int] | None = None   # set by propagate(): concrete tile sizes

    def task(self, name: str) -> STask:
        for t in self.tasks:
            if t.name == name:
                return t
        raise KeyError(name)

    def regions(self) -> list[Region]:
        out, todo = [], [self.root]
        while todo:
            r = todo.pop(0)
            out.append(r)
            todo.extend(i for i in r.items if isinstance(i, Region))
        return out

    def loop_regions(self) -> list[Region]:
        return [r for r in self.regions() if r.loop is not None]

    def region_path(self, region: str) -> tuple[str, ...]:
        """The loops from the grid down to `region`, outermost first (() for the grid)."""
        return self.region_paths[region]

    @functools.cached_property
    def region_paths(self) -> dict[str, tuple[str, ...]]:
        """Every region's region_path, by name: walked once per graph (the plan
        construction and the cost model ask tens of thousands of times a search)."""
        parents = {r.name: r.parent for r in self.regions()}
        out = {}
        for name in parents:
            path, region = [], name
            while region:
                path.append(region)
                region = parents[region]
            out[name] = tuple(reversed(path))
        return out

    def innermost_loops(self) -> list[Region]:
        return [r for r in self.loop_regions()
                if not any(isinstance(i, Region) for i in r.items)]

    def preds(self, name: str) -> list[Edge]:
        return [e for e in self.edges if e.dst == name]

    def succs(self, name: str) -> list[Edge]:
        return [e for e in self.edges if e.src == name]

    def total_work(self) -> Work:
        total = Work()
        for t in self.tasks:
            total = total + t.work
        return total


def replace_tasks(graph: STaskGraph, tasks, tiles) -> STaskGraph:
    return replace(graph, tasks=tuple(tasks), tiles=dict(tiles))
