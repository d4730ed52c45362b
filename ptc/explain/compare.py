"""The winner's neighbours: candidates that differ from it in one respect, and the numbers
a reason quotes when it compares them."""
from __future__ import annotations

from ..devices.model import UnitKind
from ..sched.search import Candidate, Rejected, SearchResult
from .wording import percent, short_plan, tiles_text

ASPECTS = ("tiles", "style", "stages", "consumers", "pingpong", "overlap", "warps")


def _aspects(c: Candidate) -> dict:
    ch = c.choice
    return {"tiles": c.tiles, "style": ch.style, "stages": ch.stages,
            "consumers": ch.consumers, "pingpong": ch.pingpong, "overlap": ch.overlap,
            "warps": ch.warps}


def _rejected_aspects(r: Rejected) -> dict:
    ch = r.choice
    return {"tiles": r.tiles, "style": ch.style, "stages": ch.stages,
            "consumers": ch.consumers, "pingpong": ch.pingpong, "overlap": ch.overlap,
            "warps": ch.warps}


def _differs_only(a: dict, b: dict, vary: set[str]) -> bool:
    return (all(a[k] == b[k] for k in ASPECTS if k not in vary)
            and any(a[k] != b[k] for k in vary))


def peers(result: SearchResult, vary: set[str]) -> list[Candidate]:
    """Ranked candidates that differ from the winner only in `vary`, fastest first."""
    w = _aspects(result.best)
    return [c for c in result.ranked[1:] if _differs_only(_aspects(c), w, vary)]


def rejected_peers(result: SearchResult, vary: set[str]) -> list[Rejected]:
    w = _aspects(result.best)
    return [r for r in result.rejected if _differs_only(_rejected_aspects(r), w, vary)]


class Context:
    """What the reasons need: the winner, the unit to watch, formatting of tiles."""

    def __init__(self, result: SearchResult) -> None:
        self.result = result
        self.best = result.best
        self.dims = dict(result.dims)
        self.order = [t.name for t in result.kernel.tiles]
        self.terms = result.device.terms
        mma = result.device.units_of(UnitKind.MMA)
        has_mma = self.best.graph.total_work().mma_flops > 0
        bound = self.best.estimate.bound
        busiest = self.best.estimate.unit_busy[0][0] if self.best.estimate.unit_busy else ""
        self.unit = mma[0].name if has_mma and mma else (bound if bound != "dram" else busiest)

    def tiles(self, c) -> str:
        return tiles_text(c.tiles, self.order)

    def plan(self, c: Candidate) -> str:
        return short_plan(c, self.terms)

    def label(self, c: Candidate) -> str:
        """A candidate's tiles and plan, as a reason names the one it compares with."""
        return self.tiles(c) + "; " + self.plan(c)

    def ratio(self, c: Candidate) -> float:
        return c.estimate.seconds / self.best.estimate.seconds


def busy(c: Candidate, unit: str) -> float:
    return dict(c.estimate.unit_busy).get(unit, 0.0)


def busy_clause(o: Candidate, w: Candidate, unit: str, form: str = "busy") -> str:
    """'the tensor_core idles 31% of the time (vs 9%)' when `o` keeps `unit` less busy than
    the winner; "" when the numbers do not show that (then they explain nothing)."""
    bo, bw = busy(o, unit), busy(w, unit)
    if not unit or bo >= bw - 0.005:
        return ""
    if form == "idle":
        return f"the {unit} idles {percent(1 - bo)} of the time (vs {percent(1 - bw)})"
    return f"the {unit} is busy {percent(bo)} of the time (vs {percent(bw)})"


def bound_phrase(c: Candidate) -> str:
    b = c.estimate.bound
    if b == "dram":
        return "DRAM-bound"
    return f"bound by {b} ({percent(busy(c, b))} busy)"
