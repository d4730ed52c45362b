"""Why the winner's tile sizes: the nearest candidates with other tiles, and their traffic."""
from __future__ import annotations

from ..sched.cost import executions, loop_trips
from ..sched.search import Candidate
from ..stask.graph import TaskOp
from .compare import Context, bound_phrase, busy, busy_clause, peers, rejected_peers
from .model import Reason
from .wording import percent, slower


def tile_traffic(c: Candidate, dims) -> tuple[float, float]:
    """(bytes loaded, mma FLOPs) per output tile."""
    runs = executions(c.graph, loop_trips(c.graph, dims))
    loaded = sum(t.work.bytes * runs[t.name] for t in c.graph.tasks if t.op == TaskOp.LOAD)
    flops = sum(t.work.mma_flops * runs[t.name] for t in c.graph.tasks)
    return float(loaded), float(flops)


def _tile_distance(a, b) -> int:
    da, db = dict(a), dict(b)
    return sum(da[k] != db.get(k) for k in da)


def tiles_reasons(ctx: Context, most: int = 4) -> list[Reason]:
    """Per tile size: the fastest candidate that changes only that size, else (for a larger
    size) why it could not be built."""
    w = ctx.best
    mine = dict(w.tiles)
    ranked = peers(ctx.result, {"tiles"})
    unfit = rejected_peers(ctx.result, {"tiles"})
    compared, impossible = [], []
    for name in [n for n in ctx.order if n in mine]:
        alts = [c for c in ranked if _only_tile(c.tiles, mine, name)]
        if alts:
            compared.append(_tile_comparison(ctx, alts[0]))
            continue
        bigger = [x for x in unfit if _only_tile(x.tiles, mine, name)
                  and dict(x.tiles)[name] > mine[name]]
        if bigger:
            x = bigger[0]
            impossible.append(Reason("tiles", f"{ctx.tiles(w)}: {ctx.tiles(x)} is not "
                                              f"possible: {x.reason}", ctx.tiles(x)))
    if not compared and ranked:
        o = min(ranked, key=lambda c: (_tile_distance(c.tiles, w.tiles), c.estimate.seconds))
        compared.append(_tile_comparison(ctx, o))
    return (compared + impossible)[:most]


def _only_tile(tiles, mine: dict, name: str) -> bool:
    d = dict(tiles)
    return d[name] != mine[name] and all(d[k] == v for k, v in mine.items() if k != name)


def _waves(w: float) -> str:
    return f"{w:.1f}" if w >= 10 else f"{w:.2g}"


def _tile_comparison(ctx: Context, o: Candidate) -> Reason:
    w = ctx.best
    r = ctx.ratio(o)
    wb, wf = tile_traffic(w, ctx.dims)
    ob, of = tile_traffic(o, ctx.dims)
    parts = []
    if wf and of and wb:
        intensity = (ob / of) / (wb / wf)
        if abs(intensity - 1) > 0.05:
            parts.append(f"move {intensity:.1f}x the bytes per FLOP")
    ow, ww = _waves(o.estimate.waves), _waves(w.estimate.waves)
    if abs(o.estimate.waves - w.estimate.waves) > 0.05 * w.estimate.waves and ow != ww:
        parts.append(f"run {ow} waves instead of {ww}")
    if o.estimate.bound != w.estimate.bound:
        parts.append(f"are {bound_phrase(o)}")
    elif busy_clause(o, w, ctx.unit):
        u = ctx.unit
        parts.append(f"keep the {u} busy only {percent(busy(o, u))} of the time "
                     f"(vs {percent(busy(w, u))})")
    else:
        parts.append(f"are {bound_phrase(o)} too")
    text = (f"{ctx.tiles(w)}: {ctx.tiles(o)} tiles " + ", ".join(parts[:-1])
            + (" and " if len(parts) > 1 else "") + parts[-1] + f"; they take {slower(r)}")
    return Reason("tiles", text, ctx.label(o), r)
