"""Tile sizes a kernel uses without declaring them (`tile` lines are optional): their role
and their default candidates.

A tile size that is an mma's row or column extent takes (64, 128, 32), its k extent
(32, 64); any other (rows of a softmax, say) takes (16, 32, 64, 128, 8, 4). The first
candidate is what the interpreter runs with when nothing else picks one (`ptc run`); the
search narrows the candidates to the target device's matrix instructions and the problem
size (ptc.sched.search.tile_candidates).
"""
from __future__ import annotations

import itertools
from dataclasses import fields, is_dataclass
from typing import Mapping

from ..diagnostics import CompileError, Diagnostic, FlagError
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
                 declared: bool = True, dims: Mapping[str, int] | None = None) -> dict[str, int]:
    """Every tile size of `kernel`: the pinned ones (`--tile`, `tiles=`), the others at the
    first of their candidates that keeps the kernel's `tile A divides B` lines true (at the
    `dims` where given). A pinned size must be a tile size of the kernel, positive, and --
    where a `tile` line declares its candidates -- one of them (an undeclared one takes any).
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
    dims = dict(dims or {})
    for c in kernel.divides:
        if c.holds({**dims, **pinned}) is False:
            of = dims.get(c.of, pinned.get(c.of, c.of))
            raise FlagError(Diagnostic(
                f"{c.tile}={pinned[c.tile]} does not divide {c.of}"
                + (f"={of}" if of != c.of else "")
                + f": kernel {kernel.name} declares `{c}` (line {c.span.line})",
                hint=f"pick a {c.tile} that divides {of}"))
    options = [(int(pinned[n]),) if n in pinned else t.choices for n, t in known.items()]
    for combo in itertools.product(*options):
        values = dict(zip(known, combo))
        if all(c.holds({**dims, **values}) is not False for c in kernel.divides):
            return values
    (c,) = [c for c in kernel.divides if c.tile not in pinned][:1] or kernel.divides[:1]
    of = dims.get(c.of, c.of)
    raise CompileError(Diagnostic(
        f"no candidate of {c.tile} ({', '.join(map(str, known[c.tile].choices))}) divides "
        f"{c.of}" + (f" = {of}" if of != c.of else ""), c.span,
        f"declare a size of {c.tile} that divides {of}"))


def satisfied(kernel: T.TypedKernel, values: Mapping[str, int]) -> bool:
    """Whether the tile sizes and dims in `values` break none of the kernel's `tile A
    divides B` lines (one whose sizes are not all there is not broken)."""
    return all(c.holds(values) is not False for c in kernel.divides)


def dim_multiples(kernel: T.TypedKernel, tile_sizes) -> tuple[tuple[str, str, int, str], ...]:
    """(dim, tile, size, line) for every `tile A divides D` line whose D is a dim, given the
    tile sizes of each grid's build (`tile_sizes`: one mapping per grid): the dims a call
    must give as multiples of the built tile sizes, once each."""
    names = {d.name for d in kernel.dims}
    out: list[tuple[str, str, int, str]] = []
    for sizes in tile_sizes:
        for c in kernel.divides:
            entry = (c.of, c.tile, sizes.get(c.tile), str(c))
            if c.of in names and entry[2] is not None and entry not in out:
                out.append(entry)
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


__all__ = ["CANDIDATES", "implicit_tiles", "pinned_tiles", "satisfied"]
