"""Which tiling each tensor-core mma gets: the cheapest combination, found by branch and
bound instead of by trying every combination.

    picks = cheapest_tilings([[tiling_cost(t) for t in ts] for ts in options], layout_cost)

A combination's score is (layout conversions, cross-warp reduction steps, lane exchanges
in reductions, fragment loads per multiply-add, matrix instructions per multiply-add,
accumulator registers), compared in that order. The first three come from the layouts the
whole combination leads to (`layout_cost`: layout assignment, the expensive part); the
last three are sums and a maximum of what each tiling costs on its own (`TilingCost`).
The result is the first combination, in `itertools.product` order, with the least
score -- what trying them all gives -- but a kernel with many mmas (a W4A16 GEMM has one
per nibble) no longer costs (tilings per mma) ** (mmas) layout assignments: the
combination of each mma's cheapest tiling is scored first, and a partial combination is
dropped as soon as the least score any completion of it could have is no better.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Sequence

from .atoms import Tiling


@dataclass(frozen=True)
class TilingCost:
    """What one tiling costs on its own: fragment loads and matrix instructions per
    multiply-add, in units of mma.sync m16n8k16's 2048, and accumulator registers. Exact
    fractions, so that a bound summed in another order is exactly the score it bounds
    (the atoms' extents are powers of two: as floats these sums were exact too)."""

    loads: Fraction
    instructions: Fraction
    registers: int

    def plus(self, other: "TilingCost") -> "TilingCost":
        """Both together: the sums, and the larger register count."""
        return TilingCost(self.loads + other.loads, self.instructions + other.instructions,
                          max(self.registers, other.registers))


NOTHING = TilingCost(Fraction(0), Fraction(0), 0)


def tiling_cost(t: Tiling) -> TilingCost:
    per_mac = Fraction(2048, t.atom.m * t.atom.n * t.atom.k)
    return TilingCost((t.mi + Fraction(t.ni, 2)) / (t.mi * t.ni) * per_mac, per_mac,
                      t.mi * t.ni * 4)


def score(layout: tuple[int, int, int], own: TilingCost) -> tuple:
    """A combination's score from its layout cost and its tilings' costs together."""
    return (*layout, round(own.loads, 4), own.instructions, own.registers)


def cheapest_tilings(costs: Sequence[Sequence[TilingCost]],
                     layout_cost: Callable[[tuple[int, ...]], tuple[int, int, int]]
                     ) -> tuple[int, ...] | None:
    """The first combination in product order with the least score, as the index of its
    tiling for each mma (`costs[i][p]`: the cost of mma i's tiling p); None when some mma
    has none. `layout_cost(picks)` is the combination's (conversions, cross-warp steps,
    lane exchanges)."""
    if not costs or any(not c for c in costs):
        return None
    n = len(costs)
    # cheapest[d]: mmas d.. each at its cheapest, together (a lower bound of their cost)
    cheapest = [NOTHING] * (n + 1)
    for d in range(n - 1, -1, -1):
        alone = TilingCost(min(c.loads for c in costs[d]),
                           min(c.instructions for c in costs[d]),
                           min(c.registers for c in costs[d]))
        cheapest[d] = alone.plus(cheapest[d + 1])

    def own_cost(picks: tuple[int, ...]) -> TilingCost:
        total = NOTHING
        for i, p in enumerate(picks):
            total = total.plus(costs[i][p])
        return total

    # a good first bound: each mma's cheapest tiling on its own (the first of equals)
    seed = tuple(min(range(len(c)), key=lambda p, c=c: (c[p].loads, c[p].instructions,
                                                        c[p].registers)) for c in costs)
    best = (score(layout_cost(seed), own_cost(seed)), seed)

    def visit(picks: tuple[int, ...], own: TilingCost) -> None:
        nonlocal best
        depth = len(picks)
        if depth == n:
            if picks != seed:
                best = min(best, (score(layout_cost(picks), own), picks))
            return
        for p, cost in enumerate(costs[depth]):
            below = picks + (p,)
            mine = own.plus(cost)
            # every combination below scores at least `bound` and comes at or after
            # `first` in product order: unless this beats `best`, none of them does
            bound = score((0, 0, 0), mine.plus(cheapest[depth + 1]))
            first = below + (0,) * (n - depth - 1)
            if (bound, first) < best:
                visit(below, mine)

    visit((), NOTHING)
    return best[1]
