"""The two-level schedule search (docs/architecture.md), ranked by the analytic cost model.

Inter-EU: every combination of the kernel's tile candidates (propagated through the
sTask-graph), its grid, and a persistent or one-CTA-per-tile launch.
Intra-EU: every Choice the device supports (warp specialization with 1-2 consumer
warpgroups, multistage pipelines of 2-4 stages with 4 or 8 warps, interleaved loads with one
buffer each, the sequential baseline),
pruned by the device's resource limits, each plan verified, then timed on the model.
"""
from __future__ import annotations

import itertools
from collections import Counter
import math
import sys
import time
from dataclasses import dataclass, replace
from typing import Callable, Mapping

from ..devices import Device
from ..diagnostics import CompileError, Diagnostic
from ..sema import typed as T
from ..sema.tiles import satisfied
from ..stask import build_graph, propagate
from ..stask.graph import STaskGraph
from .construct import Choice, Unfit, construct
from .cost import estimate, persistent_estimate
from .plan import Estimate, Plan, Style

MAX_TILE_COMBINATIONS = 48


@dataclass(frozen=True)
class Candidate:
    tiles: tuple[tuple[str, int], ...]
    choice: Choice
    plan: Plan
    graph: STaskGraph

    @property
    def estimate(self) -> Estimate:
        return self.plan.estimate

    def label(self) -> str:
        tiles = " ".join(f"{k}={v}" for k, v in self.tiles)
        launch = ", persistent" if self.plan.launch.persistent else ""
        return f"{tiles}; {self.choice.describe()}{launch}"


class Unbuildable(Exception):
    """The target's renderer cannot build this plan (the message says why)."""


@dataclass(frozen=True)
class Rejected:
    tiles: tuple[tuple[str, int], ...]
    choice: Choice
    reason: str


@dataclass(frozen=True)
class SearchResult:
    kernel: T.TypedKernel
    device: Device
    dims: tuple[tuple[str, int], ...]
    ranked: tuple[Candidate, ...]
    rejected: tuple[Rejected, ...]
    seconds: float            # how long the search took
    cached: bool = False      # taken from the stage cache (the search ran earlier)

    @property
    def best(self) -> Candidate:
        return self.ranked[0]


@dataclass(frozen=True)
class SearchRecord:
    """A SearchResult as plain data, for the stage cache (ptc.stage_cache): the plans and
    their choices, without the kernel, the device and the graphs, which `result` takes
    from the caller and rebuilds (one propagation per tile combination)."""

    dims: tuple[tuple[str, int], ...]
    ranked: tuple[tuple[tuple[tuple[str, int], ...], Choice, Plan], ...]
    rejected: tuple[Rejected, ...]
    seconds: float

    @classmethod
    def of(cls, result: SearchResult) -> "SearchRecord":
        return cls(result.dims, tuple((c.tiles, c.choice, c.plan) for c in result.ranked),
                   result.rejected, result.seconds)

    def result(self, kernel: T.TypedKernel, device: Device, grid_index: int = 0) -> SearchResult:
        base = build_graph(kernel, kernel.body[grid_index])
        graphs: dict[tuple, STaskGraph] = {}
        ranked = []
        for tiles, choice, plan in self.ranked:
            if tiles not in graphs:
                graphs[tiles] = propagate(base, dict(tiles))
            ranked.append(Candidate(tiles, choice, plan, graphs[tiles]))
        return SearchResult(kernel, device, self.dims, tuple(ranked), self.rejected,
                            self.seconds, cached=True)


def choices_for(device: Device, has_loop: bool) -> list[Choice]:
    out: list[Choice] = []
    if has_loop:
        for consumers, pingpong, overlap in ((1, False, False), (2, False, False),
                                             (2, True, False), (1, False, True),
                                             (2, True, True)):
            for stages in (2, 3, 4):
                out.append(Choice(Style.WARP_SPECIALIZED, stages, consumers, pingpong=pingpong,
                                  overlap=overlap))
        for warps in (4, 8):
            for stages in (2, 3, 4):
                out.append(Choice(Style.MULTISTAGE, stages, warps=warps))
            out.append(Choice(Style.INTERLEAVED, 1, warps=warps))
    for warps in (4, 8):
        out.append(Choice(Style.SEQUENTIAL, 1, warps=warps))
    return out


def tile_candidates(t: T.TileSize, device: Device | None,
                    dims: Mapping[str, int]) -> tuple[int, ...]:
    """A tile size's candidates on `device` at the problem size `dims`: declared ones as
    written; an implicit one's (ptc.sema.tiles) narrowed to multiples of the device's
    matrix-instruction extent for its role and to at most the power of two that covers
    the dim it tiles (always at least its smallest candidate)."""
    if not t.implicit:
        return t.choices
    keep = list(t.choices)
    if t.role and device is not None:
        from ..lower.atoms import atoms_for
        steps = [getattr(a, t.role) for a in atoms_for(device.features)]
        if steps:
            keep = [c for c in keep if any(c % step == 0 for step in steps)]
    size = dims.get(t.dim) if t.dim else None
    if size:
        cover = 1 << max(0, (size - 1).bit_length())
        keep = [c for c in keep if c <= cover]
    return tuple(keep) or (min(t.choices),)


def tile_combinations(kernel: T.TypedKernel, fixed: Mapping[str, int],
                      device: Device | None = None,
                      dims: Mapping[str, int] | None = None) -> list[dict[str, int]]:
    names = [t.name for t in kernel.tiles]
    options = [(fixed[t.name],) if t.name in fixed else tile_candidates(t, device, dims or {})
               for t in kernel.tiles]
    combos = [dict(zip(names, c)) for c in itertools.product(*options)]
    # the kernel's `tile A divides B` lines, at the problem size
    combos = [c for c in combos if satisfied(kernel, {**(dims or {}), **c})]
    return combos[:MAX_TILE_COMBINATIONS]


def search(kernel: T.TypedKernel, device: Device, dims: Mapping[str, int], *,
           fixed_tiles: Mapping[str, int] | None = None, grid_index: int = 0,
           verify_plans: bool = True,
           progress: Callable[[int, int], None] | None = None,
           buildable: Callable[[Plan, STaskGraph], Plan] | None = None,
           persistent: bool = True, made: dict | None = None,
           atoms: frozenset[str] | None = None) -> SearchResult:
    """Rank every plan for `kernel` on `device`. `buildable` (from the driver: the target's
    renderer and the lowering) turns a plan into the one that gets built -- its shared
    memory and registers as the lowered kernel has them -- or raises Unbuildable, so the
    search only ranks plans the renderer builds, with the resources they really use;
    `persistent`: whether it builds persistent launches (else none is proposed); `atoms`:
    the matrix instructions it prints (ptc.sched.construct.mma_unit). `made`:
    the candidates of earlier searches of this kernel with the same device and options,
    (tiles, choice) -> the plan as built or why none, which this search reuses and adds
    to: making a plan reads no dims, only the estimate does."""
    started = time.perf_counter()
    base = build_graph(kernel, kernel.body[grid_index])
    combos = tile_combinations(kernel, fixed_tiles or {}, device, dims)
    ranked: list[Candidate] = []
    rejected: list[Rejected] = []
    has_loop = bool(base.loop_regions())
    choices = choices_for(device, has_loop)
    total = len(combos) * len(choices)
    done = 0
    for tiles in combos:
        graph = propagate(base, tiles)
        tkey = tuple(sorted(tiles.items()))
        for choice in choices:
            done += 1
            if progress:
                progress(done, total)
            plan = made.get((tkey, choice)) if made is not None else None
            if plan is None:
                plan = _made(graph, device, choice, verify_plans, buildable, atoms)
                if made is not None:
                    made[(tkey, choice)] = plan
            if isinstance(plan, str):
                rejected.append(Rejected(tkey, choice, plan))
                continue
            est, _ = estimate(plan, graph, device, dims)
            if not math.isfinite(est.seconds):
                rejected.append(Rejected(tkey, choice, est.bound))
                continue
            plan = replace(plan, estimate=est)
            if persistent:
                plan = _launch(plan, device)
            ranked.append(Candidate(tkey, choice, plan, graph))
    ranked.sort(key=lambda c: (c.plan.estimate.seconds, c.tiles, _choice_key(c.choice)))
    if not ranked:
        raise CompileError(Diagnostic(f"no plan for kernel {kernel.name} fits {device.name}",
                                      hint=why_none(rejected)))
    return SearchResult(kernel, device, tuple(sorted(dims.items())), tuple(ranked),
                        tuple(rejected), time.perf_counter() - started)


def _made(graph: STaskGraph, device: Device, choice: Choice, verify_plans: bool,
          buildable: Callable[[Plan, STaskGraph], Plan] | None,
          atoms: frozenset[str] | None = None) -> Plan | str:
    """The plan of `choice` as built, or why there is none."""
    try:
        plan = construct(graph, device, choice, atoms)
    except Unfit as why:
        return str(why)
    if verify_plans:
        from .verify import problems
        issues = problems(plan, graph, device)
        if issues:
            return "unsafe: " + issues[0]
    if buildable is not None:
        try:
            plan = buildable(plan, graph)
        except Unbuildable as why:
            return str(why)
    return plan


def why_none(rejected) -> str:
    """Why no plan fits, one reason per style from the simplest: the most frequent refusal
    of each (what stops the plain sequential plan is usually what the user must change)."""
    out = []
    for style in (Style.SEQUENTIAL, Style.MULTISTAGE, Style.INTERLEAVED,
                  Style.WARP_SPECIALIZED):
        mine = Counter(r.reason for r in rejected if r.choice.style == style)
        if mine:
            reason = mine.most_common(1)[0][0]
            if all(reason != text for _, text in out):
                out.append((style.replace("_", "-"), reason))
    return "; ".join(f"{style}: {reason}" for style, reason in out)


def _choice_key(c: Choice) -> tuple:
    return ({Style.WARP_SPECIALIZED: 0, Style.MULTISTAGE: 1, Style.INTERLEAVED: 2,
             Style.SEQUENTIAL: 3}[c.style],
            c.stages,
            c.consumers, c.pingpong, c.overlap, c.warps)


def _launch(plan: Plan, device: Device) -> Plan:
    """Persistent CTAs when the last wave would be mostly idle: the grid's tiles are spread
    over exactly the resident CTAs instead of launching one CTA per tile."""
    waves = plan.estimate.waves
    if waves > 1 and (math.ceil(waves) - waves) / math.ceil(waves) > 0.1:
        return replace(plan, estimate=persistent_estimate(plan.estimate, device),
                       launch=replace(plan.launch, persistent=True))
    return plan


def search_for_cli(kernel: T.TypedKernel, device: Device, dims: Mapping[str, int],
                   fixed_tiles: Mapping[str, int] | None = None, **options) -> SearchResult:
    """`search` with a rich progress bar on a terminal when it takes more than a moment."""
    if not sys.stderr.isatty():
        return search(kernel, device, dims, fixed_tiles=fixed_tiles, **options)
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        job = bar.add_task(f"scheduling {kernel.name} for {device.name}", total=None)

        def tick(done: int, total: int) -> None:
            bar.update(job, completed=done, total=total)

        return search(kernel, device, dims, fixed_tiles=fixed_tiles, progress=tick, **options)
