"""Symbolic tile shapes: extents are names (tile sizes, compile-time dims) or ints."""
from __future__ import annotations

from .typed import Extent


def same_extent(a: Extent, b: Extent) -> bool:
    return a == b


def broadcast_shapes(*shapes: tuple[Extent, ...]) -> tuple[Extent, ...] | None:
    """NumPy broadcasting over symbolic extents; None when the shapes do not broadcast."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[Extent] = []
    for pos in range(rank):
        extent: Extent = 1
        for s in shapes:
            k = pos - (rank - len(s))
            if k < 0:
                continue
            e = s[k]
            if e == 1:
                continue
            if extent == 1:
                extent = e
            elif not same_extent(extent, e):
                return None
        out.append(extent)
    return tuple(out)
