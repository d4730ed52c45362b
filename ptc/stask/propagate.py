"""Propagate(graph, tile_shape): every task's concrete tile shape and work.

The symbolic shapes come from sema's shape inference, which already related every tile to
the output tile and the loop tiles; propagating a tile choice substitutes the sizes and
counts bytes and operations per task (one execution of the task, one tile).
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Mapping

from ..ops import ELEMENTWISE
from ..sema import typed as T
from ..sema.tiles import pinned_tiles
from ..sema.dtypes import DTYPE_BYTES  # noqa: F401  (re-exported; ptc.render reads it here)
from .graph import STask, STaskGraph, TaskKind, Work, replace_tasks


def resolve_tiles(kernel: T.TypedKernel, tile_shape: Mapping[str, int], *,
                  declared: bool = True, dims: Mapping[str, int] | None = None) -> dict[str, int]:
    """The pinned tile sizes checked (ptc.sema.tiles.pinned_tiles), every other at its first
    candidate that keeps the kernel's `tile A divides B` lines (at `dims`)."""
    return pinned_tiles(kernel, tile_shape, declared=declared, dims=dims)


def extent_of(kernel: T.TypedKernel, tiles: Mapping[str, int], e: T.Extent) -> int:
    if len(T.extent_factors(e)) > 1:
        return math.prod(extent_of(kernel, tiles, f) for f in T.extent_factors(e))
    if isinstance(e, int):
        return e
    if e in tiles:
        return tiles[e]
    static = kernel.dim(e).static
    assert static is not None, f"dim {e} used as an extent is not static"
    return static


def propagate(graph: STaskGraph, tile_shape: Mapping[str, int]) -> STaskGraph:
    tiles = resolve_tiles(graph.kernel, tile_shape, declared=False)

    def ext(shape) -> tuple[int, ...]:
        return tuple(extent_of(graph.kernel, tiles, e) for e in shape)

    def task(t: STask) -> STask:
        shape = ext(t.shape)
        return replace(t, shape=shape, work=_work(t, shape, ext))

    return replace_tasks(graph, (task(t) for t in graph.tasks), tiles)


def statement_works(graph: STaskGraph, t: STask) -> list[Work]:
    """The work of each of a propagated task's statements, in program order."""
    if graph.tiles is None:
        raise ValueError("propagate the graph first")

    def ext(shape) -> tuple[int, ...]:
        return tuple(extent_of(graph.kernel, graph.tiles, e) for e in shape)
    return [_expr_work(s.value, ext) for s in t.stmts]


def _work(t: STask, shape: tuple[int, ...], ext) -> Work:
    if t.kind == TaskKind.COPY:
        return Work(bytes=math.prod(shape) * DTYPE_BYTES[t.dtype])
    work = Work()
    for s in t.stmts:
        work = work + _expr_work(s.value, ext)
    return work


def _expr_work(e: T.TExpr, ext) -> Work:
    w = Work()
    if isinstance(e, T.MmaAccumulate):    # the tensor core adds the accumulator
        m, k = ext(e.a.type.shape)
        n = ext(e.b.type.shape)[1]
        w = Work(mma_flops=2 * m * n * k)
    elif isinstance(e, T.Elementwise):
        n, op = math.prod(ext(e.type.shape)), ELEMENTWISE[e.op]
        w = Work(simt_ops=n * op.simt_ops, sfu_ops=n if op.sfu else 0)
    elif isinstance(e, (T.Convert, T.Fill)):
        w = Work(simt_ops=math.prod(ext(e.type.shape)))
    elif isinstance(e, T.Reduce):
        w = Work(simt_ops=math.prod(ext(e.arg.type.shape)))
    for child in T.children(e):
        w = w + _expr_work(child, ext)
    return w
