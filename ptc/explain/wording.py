"""How tiles, plans, ratios and quantities are put into words (shared by every rendering)."""
from __future__ import annotations

from ..devices.model import Terms
from ..sched.plan import Style
from ..sched.search import Candidate


def ordered_tiles(tiles, order: list[str]) -> tuple[tuple[str, int], ...]:
    d = dict(tiles)
    return tuple((k, d[k]) for k in order if k in d) + tuple(
        (k, v) for k, v in tiles if k not in order)


def tiles_text(tiles, order: list[str] | None = None) -> str:
    return " ".join(f"{k}={v}" for k, v in ordered_tiles(tiles, order or []))


def slower(ratio: float) -> str:
    """How much longer a plan takes than the winner, in words."""
    if ratio >= 1.095:
        return f"{ratio:.1f}x as long"
    if ratio > 1.0005:
        return f"{(ratio - 1) * 100:.1f}% longer"
    if ratio >= 0.9995:
        return "the same time"
    return f"{(1 - ratio) * 100:.1f}% less time"


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def short_plan(c: Candidate, terms: Terms) -> str:
    """A compact description of a candidate's Choice and launch, in the device's words."""
    return choice_text(c.choice, terms) + (", persistent" if c.plan.launch.persistent else "")


def choice_text(ch, terms: Terms) -> str:
    """A compact description of a Choice (ptc.sched.construct), in the device's words."""
    if ch.style == Style.WARP_SPECIALIZED:
        text = (f"warp-specialized, {plural(ch.stages, 'stage')}, "
                f"{plural(ch.consumers, 'consumer warpgroup')}"
                + (" in ping-pong" if ch.pingpong else "")
                + (", intra-warpgroup overlap" if ch.overlap else ""))
    elif ch.style == Style.MULTISTAGE:
        text = f"multistage, {plural(ch.stages, 'stage')}, {terms.warps(ch.warps)}"
    elif ch.style == Style.INTERLEAVED:
        text = f"interleaved loads, {terms.warps(ch.warps)}"
    else:
        text = f"sequential, {terms.warps(ch.warps)}"
    return text


def percent(x: float) -> str:
    return f"{x * 100:.0f}%"


def fmt_seconds(s: float) -> str:
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.1f} µs"


def fmt_bytes(n: float) -> str:
    for unit, size in (("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            v = n / size
            return f"{v:.0f} {unit}" if v == int(v) or v >= 100 else f"{v:.1f} {unit}"
    return f"{n:.0f} B"


def fmt_count(n: float) -> str:
    if not n:
        return ""
    for suffix, size in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.3g}{suffix}"
    return f"{n:g}"


def ctas_text(ctas: int, terms: Terms) -> str:
    """How many blocks share an EU in the timeline, in the device's words."""
    per = f"{terms.blocks(ctas)} per {terms.eu}"
    return per if ctas == 1 else per + " share the units"
