"""Which plans `ptc tune` measures: the K plans the cost model ranks best, and the tile
neighbours of its first choice that it can hardly tell apart from it.

A kernel with several grids is one launch per grid, timed together, so a trial is one plan
per grid: the K trials are the K best combinations of the grids' ranked plans by the sum
of their estimates.
"""
from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass

NEIGHBOUR_MARGIN = 0.25     # a tile neighbour is measured if within 25 % of the best estimate


@dataclass(frozen=True)
class Trial:
    """One set of plans to build and measure (one per grid, in launch order)."""

    rank: int                      # 1: the model's first choice
    plans: tuple                   # ptc.sched.plan.Plan per grid
    graphs: tuple                  # their sTask-graphs
    labels: tuple[str, ...]        # per grid: tiles and pipeline style
    model_seconds: float           # the model's estimate, all grids together
    why: str                       # "ranked 2" / "tile neighbour of the first choice (BK)"

    @property
    def label(self) -> str:
        return " | ".join(self.labels)

    @property
    def plan_json(self) -> str:
        from ..sched.plan import plans_to_json

        return plans_to_json(self.plans)


def _identity(c) -> tuple:
    return (c.tiles, c.choice, c.plan.launch.persistent)


def select_trials(results, top: int, neighbours: bool = True,
                  margin: float = NEIGHBOUR_MARGIN) -> tuple[Trial, ...]:
    """The trials for the searches `results` (one SearchResult per grid): the `top` best
    combinations, then (with `neighbours`) the first choice with one grid's one tile size
    moved to the nearest smaller or larger candidate of the same pipeline style, where the
    model puts it within `margin` of the first choice."""
    if top < 1:
        raise ValueError("top must be at least 1")
    ranked = [r.ranked for r in results]
    combos = _best_combinations(ranked, top)
    trials = []
    for n, combo in enumerate(combos):
        cands = [ranked[g][i] for g, i in enumerate(combo)]
        trials.append(_trial(n + 1, cands, "the model's first choice" if n == 0
                             else f"ranked {n + 1} by the model"))
    if not neighbours:
        return tuple(trials)
    seen = {tuple(_identity(ranked[g][i]) for g, i in enumerate(c)) for c in combos}
    best = trials[0].model_seconds
    first = [ranked[g][0] for g in range(len(ranked))]
    extra = []
    for g, grid in enumerate(ranked):
        for name, index in _tile_neighbours(grid):
            cands = list(first)
            cands[g] = grid[index]
            ident = tuple(_identity(c) for c in cands)
            if ident in seen:
                continue
            seen.add(ident)
            trial = _trial(0, cands, f"tile neighbour of the first choice ({name}"
                           + (f", grid {g + 1}" if len(ranked) > 1 else "") + ")")
            if trial.model_seconds <= best * (1 + margin):
                extra.append(trial)
    # a neighbour's rank is where the model puts it among all combinations
    order = sorted(extra, key=lambda t: t.model_seconds)
    return tuple(trials) + tuple(_with_rank(t, _rank_of(t, ranked)) for t in order)


def _trial(rank: int, cands, why: str) -> Trial:
    return Trial(rank, tuple(c.plan for c in cands), tuple(c.graph for c in cands),
                 tuple(c.label() for c in cands),
                 sum(c.plan.estimate.seconds for c in cands), why)


def _with_rank(t: Trial, rank: int) -> Trial:
    from dataclasses import replace

    return replace(t, rank=rank)


def _rank_of(t: Trial, ranked) -> int:
    """1 + how many combinations the model estimates faster than `t` (with several grids,
    counted over the combinations that change one grid's plan from the first choice)."""
    best = [grid[0].plan.estimate.seconds for grid in ranked]
    faster = set()
    for g, grid in enumerate(ranked):
        rest = sum(best) - best[g]
        faster |= {tuple(i if h == g else 0 for h in range(len(ranked)))
                   for i, c in enumerate(grid) if rest + c.plan.estimate.seconds < t.model_seconds}
    return len(faster) + 1


def _best_combinations(ranked, top: int) -> list[tuple[int, ...]]:
    """The `top` index tuples (one index per grid) with the smallest summed estimate."""
    if len(ranked) == 1:
        return [(i,) for i in range(min(top, len(ranked[0])))]
    lists = [[c.plan.estimate.seconds for c in grid[:top]] for grid in ranked]
    pool = itertools.product(*(range(len(values)) for values in lists))
    return heapq.nsmallest(top, pool, key=lambda idx: (sum(v[i] for v, i in zip(lists, idx)),
                                                       idx))


def _tile_neighbours(grid) -> list[tuple[str, int]]:
    """(tile name, index in `grid`) of the first choice's nearest tile neighbours: the same
    pipeline choice with one tile size the next smaller or larger candidate."""
    first = grid[0]
    tiles = dict(first.tiles)
    out = []
    for name, size in tiles.items():
        below, above = None, None
        for i, c in enumerate(grid):
            other = dict(c.tiles)
            if (c.choice != first.choice or any(other[k] != v for k, v in tiles.items() if k != name)):
                continue
            v = other[name]
            if v < size and (below is None or v > dict(grid[below].tiles)[name]):
                below = i
            if v > size and (above is None or v < dict(grid[above].tiles)[name]):
                above = i
        out += [(name, i) for i in (below, above) if i is not None]
    return out
