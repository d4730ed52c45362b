"""When a role may use what its own asynchronous steps compute (for the cost model).

A step on an async unit (wgmma) returns before its result is in the registers; the kernel
waits for it (wgmma.wait_group, placed by the lowering) before the first use. So a step
that reads a value an earlier async step of the same process computes starts once that
step has completed -- unless both run on the same in-order unit (chained wgmmas into one
accumulator queue on the tensor cores and need no wait). Values that cross roles or come
from copies travel through buffers and their barriers instead.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..devices import Device
from ..stask.graph import STaskGraph
from .unroll import Exec


@dataclass(frozen=True)
class Producer:
    task: str
    distance: int          # 0: the same iteration; 1: the previous one of `loop`
    loop: str              # the innermost loop around both ("" at the grid level)


class Results:
    """Completion times of a process's async steps and what each step must wait for."""

    def __init__(self, graph: STaskGraph, device: Device, placed: dict[str, str]):
        """`placed`: task -> unit, for the tasks of this role."""
        self.loops = {t.name: graph.region_path(t.region) for t in graph.tasks}
        self.device = device
        self.producers: dict[str, list[Producer]] = {}
        for e in graph.edges:
            if e.src not in placed or e.dst not in placed or e.src == e.dst:
                continue
            src, dst = device.unit(placed[e.src]), device.unit(placed[e.dst])
            if not src.is_async or (src.name == dst.name and src.in_order):
                continue
            if graph.task(e.src).op == "load":
                continue    # loaded tiles: the buffer's full barrier says when
            common = [v for v in self.loops[e.src] if v in self.loops[e.dst]]
            self.producers.setdefault(e.dst, []).append(
                Producer(e.src, e.distance, common[-1] if common else ""))
        self.done: dict[tuple, float] = {}

    def ready(self, e: Exec) -> float:
        """The earliest time `e` may start: its async producers' results are in."""
        t = 0.0
        iters = dict(e.iters)
        for p in self.producers.get(e.step.task, ()):
            at = {v: iters[v] for v in self.loops[p.task] if v in iters}
            if p.distance:
                if p.loop not in at or at[p.loop] == 0:
                    continue            # the first iteration reads the initial value
                at[p.loop] -= p.distance
            done = self.done.get((p.task, tuple(sorted(at.items()))))
            if done is not None:
                t = max(t, done)
        return t

    def record(self, e: Exec, done: float) -> None:
        iters = tuple(sorted(dict(e.iters).items()))
        self.done[(e.step.task, iters)] = done
