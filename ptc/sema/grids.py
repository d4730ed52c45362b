"""A kernel with several `parallel` grids, as one single-grid kernel per grid.

Inputs are read-only, and a grid reads only the outputs it does not write (docs/language.md:
what the grids before it wrote), so each grid is scheduled, lowered and rendered on its
own, and they are launched one after the other in program order (one launch each). A grid's kernel keeps the whole
signature and only the tile sizes its grid uses, so the search does not enumerate the
others' candidates.
"""
from __future__ import annotations

from dataclasses import fields, is_dataclass, replace

from . import typed as T
from .batched import flatten


def grid_kernels(kernel: T.TypedKernel) -> tuple[T.TypedKernel, ...]:
    """One kernel per grid of `kernel`, in launch order (`kernel` itself when it has one),
    with its tiles of rank 3 computed as rows (ptc.sema.batched): what the back end builds."""
    kernel = flatten(kernel)
    if len(kernel.body) <= 1:
        return (kernel,)
    names = {t.name for t in kernel.tiles}
    out = []
    for grid in kernel.body:
        used = _names_in(grid) & names
        out.append(replace(kernel, body=(grid,),
                           tiles=tuple(t for t in kernel.tiles if t.name in used),
                           divides=tuple(c for c in kernel.divides if c.tile in used and
                                         (c.of not in names or c.of in used))))
    return tuple(out)


def _names_in(node) -> set[str]:
    """Every string held anywhere in a typed tree (tile-size names are among them; no
    variable or index may share a tile size's name, so nothing else matches them)."""
    found: set[str] = set()
    stack = [node]
    while stack:
        x = stack.pop()
        if isinstance(x, str):
            found.add(x)
        elif isinstance(x, (tuple, list)):
            stack.extend(x)
        elif is_dataclass(x) and not isinstance(x, type):
            stack.extend(getattr(x, f.name) for f in fields(x))
    return found
