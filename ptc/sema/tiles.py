"""Tile sizes a kernel uses without declaring them (`tile` lines are optional): their role
and their default candidates.

A tile size that is an mma's row or column extent takes (64, 128, 32), its k extent
(32, 64); any other (rows of a softmax, say) takes (16, 32, 64, 128, 8, 4). The first
candidate is what the interpreter runs with when nothing else picks one (`ptc run`); the
search narrows the candidates to the target device's matrix instructions and the problem
size (ptc.sched.search.tile_candidates).
"""
from __future__ import annotations

from dataclasses import fields, is_dataclass

from . import typed as T

CANDIDATES = {"m": (64, 128, 32), "n": (64, 128, 32), "k": (32, 64),
              "": (16, 32, 64, 128, 8, 4)}
ROLE_ORDER = ("k", "m", "n")     # a size with two roles takes the tighter (k) one


def implicit_tiles(names: dict[str, str], grids) -> tuple[T.TileSize, ...]:
    """TileSizes for the undeclared tile sizes `names` (name -> the dim an axis tiles with
    it, or ""), from their roles in the checked `grids`."""
    roles: dict[str, set[str]] = {n: set() for n in names}
    for node in _nodes(grids):
        if isinstance(node, (T.MatMul, T.MmaAccumulate)):
            a, b = (node.lhs, node.rhs) if isinstance(node, T.MatMul) else (node.a, node.b)
            if len(a.type.shape) == 2 and len(b.type.shape) == 2:
                (m, k), n = a.type.shape, b.type.shape[1]
                for role, extent in (("m", m), ("k", k), ("n", n)):
                    if extent in roles:
                        roles[extent].add(role)
    out = []
    for name, dim in names.items():
        role = next((r for r in ROLE_ORDER if r in roles[name]), "")
        out.append(T.TileSize(name, CANDIDATES[role], implicit=True, role=role, dim=dim))
    return tuple(out)


def _nodes(root):
    """Every dataclass node under `root`, without recursion."""
    stack = [root]
    while stack:
        x = stack.pop()
        if isinstance(x, (tuple, list)):
            stack.extend(x)
        elif is_dataclass(x) and not isinstance(x, type):
            yield x
            stack.extend(getattr(x, f.name) for f in fields(x))


__all__ = ["CANDIDATES", "implicit_tiles"]
