"""`ptc explain`: what the schedule search chose, and why, in numbers and in words.

    from ptc.explain import explain, render_text, to_json, to_svg
    expl = explain(search(kernel, device, dims))      # an Explanation: plain frozen data
    render_text(expl, Console())                       # tables, a Gantt chart, the reasons
    to_json(expl); to_svg(expl)                        # the same data; the chart as an SVG

An Explanation holds the winner's sTask-graph, tiles and plan, its estimate against the
device's peak, a window of its simulated timeline (a few steady-state iterations of the
pipelined loop, one lane per (process, sEU)), the runners-up, the rejected candidates
grouped by reason, and the reasons the winner won. Every reason compares the winner with the
nearest candidate that differs in one respect (pipeline stages, consumer warpgroups, warps,
tiles, style, no pipelining at all) and quotes the cost model's numbers for both.

    model.py         the frozen dataclasses, to_dict / to_json
    gather.py        explain(): SearchResult -> Explanation
    timeline.py      the timeline window, lanes, legend, Gantt cells, axis ticks
    compare.py       the winner's neighbours (peers) and the numbers reasons quote
    reasons.py       why(): the bottleneck and one reason per respect
    tile_reasons.py  the reasons for the tile sizes
    wording.py       tiles, plans, ratios, times and sizes in words
    text.py          render_text(): the rich Console rendering
    svg.py           to_svg(): the Gantt chart as a standalone SVG
"""
from .compare import ASPECTS, Context, bound_phrase, busy, busy_clause, peers, rejected_peers
from .gather import RUNNERS_UP, TIMELINE_ITERATIONS, explain, mma_dtype
from .model import (BufferRow, Explanation, Lane, LegendEntry, Performance, PlanSummary,
                    Reason, RejectedGroup, RoleRow, RunnerUp, Span, TaskRow, TimelineView,
                    grids_to_json, to_dict, to_json)
from .reasons import RULES, STYLE_NAMES, why
from .svg import gantt_svg, to_svg
from .text import IDLE, render_text
from .tile_reasons import tile_traffic
from .timeline import LETTERS, PALETTE, axis_ticks, gantt_cells
from .wording import (ctas_text, fmt_bytes, fmt_count, fmt_seconds, plural, short_plan, slower,
                      tiles_text)

__all__ = [
    "explain", "render_text", "to_json", "grids_to_json", "to_dict", "to_svg", "gantt_svg",
    "Explanation", "TaskRow", "RoleRow", "BufferRow", "PlanSummary", "Performance", "Span",
    "Lane", "LegendEntry", "TimelineView", "RunnerUp", "Reason", "RejectedGroup",
    "why", "peers", "rejected_peers", "busy", "busy_clause", "bound_phrase", "tile_traffic",
    "Context", "ASPECTS", "RULES", "STYLE_NAMES",
    "gantt_cells", "axis_ticks", "PALETTE", "LETTERS", "IDLE",
    "TIMELINE_ITERATIONS", "RUNNERS_UP", "mma_dtype",
    "tiles_text", "short_plan", "slower", "plural", "ctas_text",
    "fmt_seconds", "fmt_bytes", "fmt_count",
]
