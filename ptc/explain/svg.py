"""The Gantt chart of an Explanation's timeline window as a standalone SVG.

One row per (process, sEU) lane, one <rect class="span"> per span in the window (clipped
to it) with a <title> tooltip, an axis in cycles and a legend. Plain string building.
"""
from __future__ import annotations

from xml.sax.saxutils import escape

from .model import Explanation, Lane, TimelineView
from .timeline import axis_ticks
from .wording import ctas_text, fmt_seconds

CHART_W = 960        # pixels for the time axis
LANE_H = 22
LANE_GAP = 4
CHAR_W = 7.2         # approximate width of one 12px monospace character
TOP = 56
FONT = "font-family='ui-monospace, Menlo, Consolas, monospace' font-size='12'"


def gantt_svg(expl: Explanation) -> str:
    v = expl.timeline
    label_w = int(max((len(lane.label) for lane in v.lanes), default=10) * CHAR_W) + 16
    left = label_w
    lanes_h = len(v.lanes) * (LANE_H + LANE_GAP)
    axis_y = TOP + lanes_h + 4
    legend_y = axis_y + 40
    legend_rows = _legend_rows(expl, left + CHART_W + 60)
    height = legend_y + len(legend_rows) * 20 + 12
    width = left + CHART_W + 60
    parts = [
        "<?xml version='1.0' encoding='UTF-8'?>",
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}' {FONT}>",
        f"<rect class='background' x='0' y='0' width='{width}' height='{height}' fill='white'/>",
        *_title(expl, left),
        *_lanes(v, left),
        *_axis(v, left, axis_y),
        *_legend(expl, legend_rows, legend_y),
        "</svg>",
    ]
    return "\n".join(parts) + "\n"


def _x(v: TimelineView, left: int, t: float) -> float:
    span = (v.end - v.start) or 1.0
    return left + (min(max(t, v.start), v.end) - v.start) / span * CHART_W


def _title(expl: Explanation, left: int) -> list[str]:
    v = expl.timeline
    what = (f"iterations {v.first_iteration + 1}-{v.first_iteration + v.iterations} of loop "
            f"{v.loop}" if v.iterations else "the whole tile")
    head = (f"{expl.kernel} on {expl.device}: {expl.tiles_text}; {expl.plan.description} "
            f"- {fmt_seconds(expl.performance.seconds)}")
    sub = (f"cycles {v.start:,.0f}-{v.end:,.0f} of {v.cycles:,.0f} ({what}); "
           f"{ctas_text(v.ctas, expl.terms)}")
    return [f"<text x='8' y='20' font-weight='bold'>{escape(head)}</text>",
            f"<text x='8' y='38' fill='#555'>{escape(sub)}</text>"]


def _lanes(v: TimelineView, left: int) -> list[str]:
    out = []
    for i, lane in enumerate(v.lanes):
        y = TOP + i * (LANE_H + LANE_GAP)
        out.append(f"<text x='8' y='{y + 15}'>{escape(lane.label)}</text>")
        out.append(f"<rect class='lane' x='{left}' y='{y}' width='{CHART_W}' "
                   f"height='{LANE_H}' fill='#f4f4f4'/>")
        out.append(f"<text x='{left + CHART_W + 6}' y='{y + 15}' fill='#555'>"
                   f"{lane.busy * 100:.0f}%</text>")
        out.extend(_spans(v, lane, left, y))
    return out


def _spans(v: TimelineView, lane: Lane, left: int, y: int) -> list[str]:
    out = []
    for s in v.visible():
        if s.process != lane.process or s.unit != lane.unit:
            continue
        e = v.entry(s.task)
        x0, x1 = _x(v, left, s.start), _x(v, left, s.end)
        w = max(x1 - x0, 0.5)
        tip = (f"{s.task} on {s.unit} ({s.process}): cycles {s.start:,.0f}-{s.end:,.0f} "
               f"({s.end - s.start:,.0f} cycles)")
        rect = (f"<rect class='span' x='{x0:.2f}' y='{y + 1}' width='{w:.2f}' "
                f"height='{LANE_H - 2}' fill='{e.colour}' stroke='#333' stroke-width='0.5'>"
                f"<title>{escape(tip)}</title></rect>")
        out.append(rect)
        if w >= 12:
            out.append(f"<text x='{x0 + w / 2:.2f}' y='{y + 15}' text-anchor='middle' "
                       f"pointer-events='none'>{escape(e.letter)}</text>")
    return out


def _axis(v: TimelineView, left: int, y: int) -> list[str]:
    out = [f"<line x1='{left}' y1='{y}' x2='{left + CHART_W}' y2='{y}' stroke='#333'/>"]
    for t in axis_ticks(v.start, v.end, 8):
        x = _x(v, left, t)
        out.append(f"<line x1='{x:.2f}' y1='{y}' x2='{x:.2f}' y2='{y + 5}' stroke='#333'/>")
        out.append(f"<text x='{x:.2f}' y='{y + 18}' text-anchor='middle'>{t:,.0f}</text>")
    out.append(f"<text x='{left + CHART_W}' y='{y + 32}' text-anchor='end' fill='#555'>"
               f"cycles</text>")
    return out


def _legend_rows(expl: Explanation, width: int) -> list[list]:
    rows: list[list] = [[]]
    x = 8
    for e in expl.timeline.legend:
        item = 24 + len(e.task) * CHAR_W + 16
        if x + item > width and rows[-1]:
            rows.append([])
            x = 8
        rows[-1].append((x, e))
        x += item
    return rows


def _legend(expl: Explanation, rows: list[list], y0: int) -> list[str]:
    out = []
    for r, row in enumerate(rows):
        y = y0 + r * 20
        for x, e in row:
            out.append(f"<rect class='legend' x='{x}' y='{y}' width='18' height='14' "
                       f"fill='{e.colour}' stroke='#333' stroke-width='0.5'>"
                       f"<title>{escape(e.kind)}</title></rect>")
            out.append(f"<text x='{x + 9}' y='{y + 11}' text-anchor='middle'>"
                       f"{escape(e.letter)}</text>")
            out.append(f"<text x='{x + 24}' y='{y + 11}'>{escape(e.task)}</text>")
    return out


def to_svg(expl: Explanation) -> str:
    return gantt_svg(expl)


__all__ = ["gantt_svg", "to_svg"]
