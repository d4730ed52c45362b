"""When a role may use what its own asynchronous steps compute (for the cost model).

A step on an async unit (wgmma) returns before its result is in the registers; the kernel
waits for it (wgmma.wait_group, placed by the lowering) before the first use. So a step
that reads a value an earlier async step of the same process computes starts once that
step has completed -- unless both run on the same in-order unit (chained wgmmas into one
accumulator queue on the tensor cores and need no wait). Values that cross roles or come
from copies travel through buffers and their barriers instead.

The wait sits before the first statement that touches the registers in flight, so a
CUDA-core step may run its statements before that one under the async step (`lead`, the
share of its work they are): a rotated loop's softmax runs under PV until it rescales O.
Touching includes overwriting registers the async step still reads (its register
operands, P): a later iteration of the step that wrote them must wait too.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..devices import Device
from ..stask.build import reads, writes
from ..stask.graph import STaskGraph, TaskOp
from ..stask.propagate import statement_works
from .unroll import Exec


@dataclass(frozen=True)
class Producer:
    task: str
    distance: int          # 0: the same iteration; 1: the previous one of `loop`
    loop: str              # the innermost loop around both ("" at the grid level)
    lead: float = 0.0      # share of the waiting step's work it may run before the wait


@dataclass(frozen=True)
class Dependences:
    """What each step of a role waits for before it may use an async step's result."""

    loops: dict[str, tuple[str, ...]]            # task -> its loops, outermost first
    producers: dict[str, tuple[Producer, ...]]   # task -> the async steps it waits for


def dependences(graph: STaskGraph, device: Device, placed: dict[str, str]) -> Dependences:
    """`placed`: task -> unit, for the tasks of one role."""
    loops = {t.name: graph.region_path(t.region) for t in graph.tasks}
    found: dict[tuple[str, str, int, str], float] = {}   # (task, producer, distance, loop)
    works: dict[str, list[int]] = {}    # task -> its statements' work, once per task

    def lead(task: str, touches) -> float:
        t = graph.task(task)
        if task not in works:
            works[task] = [w.simt_ops + w.sfu_ops for w in statement_works(graph, t)]
        return _lead(t, works[task], touches)

    def add(task: str, p: Producer) -> None:
        key = (task, p.task, p.distance, p.loop)
        found[key] = min(p.lead, found.get(key, p.lead))

    for e in graph.edges:
        if e.src not in placed or e.dst not in placed or e.src == e.dst:
            continue
        if graph.task(e.src).op == TaskOp.LOAD or graph.task(e.dst).op == TaskOp.LOAD:
            continue    # loaded tiles: the buffers' barriers say when
        src, dst = device.unit(placed[e.src]), device.unit(placed[e.dst])
        common = [v for v in loops[e.src] if v in loops[e.dst]]
        loop = common[-1] if common else ""
        if src.is_async and not (src.name == dst.name and src.in_order):
            share = lead(e.dst, lambda s: e.value in reads(s)) if not dst.is_async else 0.0
            add(e.dst, Producer(e.src, e.distance, loop, share))
        if dst.is_async and not src.is_async and e.distance == 0 and loop:
            # the next iteration of src overwrites what the async dst may still read
            add(e.src, Producer(e.dst, 1, loop, lead(e.src, lambda s: e.value in writes(s))))
    producers: dict[str, tuple[Producer, ...]] = {}
    for (task, src, distance, loop), lead in found.items():
        producers[task] = producers.get(task, ()) + (Producer(src, distance, loop, lead),)
    return Dependences(loops, producers)


def result_key(e: Exec) -> tuple:
    """The key an async step's result is recorded under: its task and iterations."""
    return (e.step.task, tuple(sorted(e.iters)))


def awaited(deps: Dependences, e: Exec) -> tuple[tuple[tuple, float], ...]:
    """The results `e` waits for before it may start, as (their result_key, the share of
    e's work it may run before the wait): each async producer's execution of the same
    iterations (of the previous one, for a distance of 1; none in the first)."""
    iters = dict(e.iters)
    out = []
    for p in deps.producers.get(e.step.task, ()):
        at = {v: iters[v] for v in deps.loops[p.task] if v in iters}
        if p.distance:
            if p.loop not in at or at[p.loop] == 0:
                continue            # the first iteration reads the initial value
            at[p.loop] -= p.distance
        out.append(((p.task, tuple(sorted(at.items()))), p.lead))
    return tuple(out)


def _lead(t, works: list[int], touches) -> float:
    """The share of task `t`'s work (`works`: its statements') done before its first
    statement that `touches`."""
    total = sum(works)
    first = next((i for i, s in enumerate(t.stmts) if touches(s)), len(t.stmts))
    return sum(works[:first]) / total if total else 0.0
