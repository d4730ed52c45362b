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
from typing import Mapping

from ..diagnostics import Diagnostic, FlagError
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


def pinned_tiles(kernel: T.TypedKernel, pinned: Mapping[str, int], *,
                 declared: bool = True) -> dict[str, int]:
    """Every tile size of `kernel`: the pinned ones (`--tile`, `tiles=`), the others at their
    first candidate. A pinned size must be a tile size of the kernel, positive, and -- where
    a `tile` line declares its candidates -- one of them (an undeclared one takes any).
    `declared=False` skips that last rule: for a plan built by hand (its graph, the
    interpreter run it is checked against); the driver holds a user's pins to it."""
    known = {t.name: t for t in kernel.tiles}
    for name, value in pinned.items():
        if name not in known:
            raise FlagError(Diagnostic(f"kernel {kernel.name} has no tile size {name}",
                                       hint="tile sizes: " + (", ".join(known) or "none")))
        if value <= 0:
            raise FlagError(Diagnostic(f"tile size {name} must be positive, not {value}"))
        t = known[name]
        if declared and not t.implicit and value not in t.choices:
            listed = ", ".join(map(str, t.choices))
            raise FlagError(Diagnostic(
                f"{name}={value} is not one of the sizes kernel {kernel.name} declares for "
                f"{name} ({listed})",
                hint=f"pick one of them, or declare it: tile {name} in [{listed}, {value}]"))
    return {name: int(pinned.get(name, t.choices[0])) for name, t in known.items()}


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
