"""The small problem `ptc tune` checks every plan on against the reference interpreter.

Each dim is shrunk so that the check is quick but still crosses tile edges: a dim that a
tile of extent E covers (a grid axis `m: BM of S` or a loop `for n: BN of T`) becomes
2.5 tiles (2E + E/2: two whole tiles and a partial one), a dim that only indexes the grid
(`b of B`) becomes 2, and a dim no axis tiles (a head dim loaded whole) keeps its size.
No dim grows.
"""
from __future__ import annotations

from typing import Mapping


def check_dims(graphs, dims: Mapping[str, int]) -> dict[str, int]:
    """The check problem for a kernel whose grids' (propagated) sTask-graphs are `graphs`,
    from its problem dims `dims`."""
    from ..stask.propagate import extent_of

    tiled: dict[str, int] = {}
    indexed: set[str] = set()

    def cover(dim: str, extent: int) -> None:
        tiled[dim] = max(tiled.get(dim, 0), extent)

    for graph in graphs:
        for axis in graph.grid.axes:
            if axis.size is None:
                indexed.add(axis.dim)
            else:
                cover(axis.dim, extent_of(graph.kernel, graph.tiles, axis.size))
        for region in graph.loop_regions():
            axis = region.loop.axis
            if axis.size is not None:
                cover(axis.dim, extent_of(graph.kernel, graph.tiles, axis.size))
    out = {}
    for name, size in dims.items():
        if name in tiled:
            extent = tiled[name]
            out[name] = min(size, 2 * extent + max(1, extent // 2))
        elif name in indexed:
            out[name] = min(size, 2)
        else:
            out[name] = size
    return out
