"""The Explanation on a rich Console: tables, a Gantt chart of the timeline, the reasons
(readable without colour, from 80 columns)."""
from __future__ import annotations

from typing import Iterable

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .model import Explanation, Lane, TimelineView
from .timeline import axis_ticks, gantt_cells
from .wording import ctas_text, fmt_bytes, fmt_count, fmt_seconds, percent, plural

IDLE = "·"


def render_text(expl: Explanation, console: Console, full_graph: bool = False) -> None:
    """The whole explanation on `console` (readable without colour, from 80 columns)."""
    for part in (_header, _estimate_section, _why_section, _timeline_section,
                 _plan_section, _graph_section, _runners_section, _rejected_section):
        if part is _graph_section:
            part(expl, console, full_graph)
        else:
            part(expl, console)


def _heading(console: Console, title: str) -> None:
    console.print()
    console.rule(Text(title, style="bold"), align="left")


def _header(expl: Explanation, console: Console) -> None:
    dims = " ".join(f"{k}={v}" for k, v in expl.dims)
    _para(console, Text.assemble(("ptc explain ", "bold"), (expl.kernel, "bold cyan"),
                                 f" on {expl.device}: {expl.device_description}"), indent=0)
    _para(console, f"dims {dims}", indent=0)
    _para(console, f"searched {plural(expl.candidates + expl.rejected_total, 'plan')} in "
                   f"{expl.search_seconds:.2f} s"
                   f"{' (earlier: taken from the cache)' if expl.search_cached else ''}: "
                   f"{expl.candidates} ranked, "
                   f"{expl.rejected_total} rejected", indent=0)
    _para(console, Text.assemble(("winner ", "bold"), (expl.tiles_text, "bold green"), "; ",
                                 expl.plan.description), indent=0)
    if expl.runners_up:
        r = expl.runners_up[0]
        _para(console, f"runner-up {r.tiles}; {r.plan}: {r.ratio:.3f}x the winner's time",
              indent=0)


def _estimate_section(expl: Explanation, console: Console) -> None:
    p = expl.performance
    _heading(console, "Estimate")
    console.print(Text.assemble(("  time      ", "bold"), (fmt_seconds(p.seconds), "bold"),
                                f"  ({p.tiles} tiles, {p.waves:.2f} waves, "
                                f"{p.cycles_per_tile:,.0f} cycles per tile)"))
    if p.mma_dtype and p.peak_flops_per_s:
        unit = "TOPS" if p.mma_dtype == "i8" else "TFLOP/s"     # integer operations
        console.print(Text.assemble(
            ("  compute   ", "bold"), (f"{p.flops_per_s / 1e12:,.0f} {unit}", "bold"),
            f" = {p.flops_pct:.0f}% of the {p.peak_label} "
            f"({p.peak_flops_per_s / 1e12:,.0f} {unit})"))
    mark = " (the bound)" if p.bound == "dram" else ""
    console.print(Text.assemble(
        ("  memory    ", "bold"), (f"{p.bytes_per_s / 1e9:,.0f} GB/s", "bold"),
        f" = {p.bytes_pct:.0f}% of DRAM bandwidth ({p.peak_bytes_per_s / 1e9:,.0f} GB/s){mark}"))
    busy = ", ".join(f"{u} {percent(b)}" for u, b in p.unit_busy)
    console.print(Text(f"  units     {busy}  (bound: {p.bound})"))


def _why_section(expl: Explanation, console: Console) -> None:
    _heading(console, "Why this plan")
    for r in expl.why:
        _para(console, r.text, bullet="•")


def _para(console: Console, text: str | Text, bullet: str = "", indent: int = 2) -> None:
    """A paragraph indented by `indent` columns (plus a bullet), wrapped with a hanging
    indent so that continuation lines line up under the text."""
    first = " " * indent + (f"{bullet} " if bullet else "")
    hang = " " * max(len(first), 2)
    body = text if isinstance(text, Text) else Text(text)
    lines = body.wrap(console, max(20, console.width - len(hang)), justify="default")
    for i, line in enumerate(lines):
        line.rstrip()
        console.print(Text(first if i == 0 else hang) + line)


def _timeline_section(expl: Explanation, console: Console) -> None:
    v = expl.timeline
    _heading(console, f"Timeline of one {expl.terms.eu} (cycles)")
    if v.iterations:
        what = (f"iterations {v.first_iteration + 1}-{v.first_iteration + v.iterations} "
                f"of loop {v.loop} (steady state)")
    else:
        what = "the whole tile"
    _para(console, f"cycles {v.start:,.0f}-{v.end:,.0f} of {v.cycles:,.0f}: {what}; "
                   f"{ctas_text(v.ctas, expl.terms)}")
    label_w = min(26, max(len(lane.label) for lane in v.lanes)) if v.lanes else 10
    width = max(20, console.width - label_w - 2 - 6)
    for lane in v.lanes:
        console.print(_gantt_row(v, lane, label_w, width), no_wrap=True, crop=True)
    for line in _axis_lines(v, label_w, width):
        console.print(Text(line), no_wrap=True, crop=True)
    console.print(_legend_text(v, console.width))


def _gantt_row(v: TimelineView, lane: Lane, label_w: int, width: int) -> Text:
    row = Text("  " + lane.label[:label_w].ljust(label_w) + " ")
    cells = gantt_cells(v, lane, width)
    i = 0
    while i < width:
        j = i
        while j < width and cells[j] == cells[i]:
            j += 1
        if cells[i] is None:
            row.append(IDLE * (j - i), style="dim")
        else:
            e = v.entry(cells[i])
            row.append(e.letter * (j - i), style=f"bold black on {e.colour}")
        i = j
    row.append(f" {lane.busy * 100:3.0f}%")
    return row


def _axis_lines(v: TimelineView, label_w: int, width: int) -> list[str]:
    pad = " " * (2 + label_w + 1)
    rule = ["─"] * width
    labels = [" "] * (width + 12)
    span = (v.end - v.start) or 1.0
    free = 0
    for t in axis_ticks(v.start, v.end):
        i = min(width - 1, int((t - v.start) / span * width))
        rule[i] = "┬"
        text = f"{t:,.0f}"
        if i >= free:
            labels[i:i + len(text)] = text
            free = i + len(text) + 1
    return [pad + "".join(rule), pad + "".join(labels).rstrip()]


def _legend_text(v: TimelineView, width: int) -> Text:
    out = Text("  ")
    col = 2
    for e in v.legend:
        item = len(e.task) + 4
        if col + item > width:
            out.append("\n  ")
            col = 2
        out.append(f" {e.letter} ", style=f"bold black on {e.colour}")
        out.append(f" {e.task}  ")
        col += item + 2
    out.append(IDLE, style="dim")
    out.append(" idle")
    return out


def _table(*columns: str, right: Iterable[str] = ()) -> Table:
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, padding=(0, 1))
    right = set(right)
    for c in columns:
        t.add_column(c, justify="right" if c in right else "left", no_wrap=c != "steps")
    return t


def _row(table: Table, *cells) -> None:
    table.add_row(*(Text(str(c)) for c in cells))


def _plan_section(expl: Explanation, console: Console) -> None:
    p = expl.plan
    _heading(console, "Plan")
    loop = f"loop {p.pipelined} pipelined" if p.pipelined else "no loop pipelined"
    _para(console, f"{p.description}; {loop}")
    words = expl.terms
    launch = f"persistent {words.block}s" if p.persistent else f"one {words.block} per tile"
    _para(console, f"launch grid ({', '.join(p.grid)}), {p.threads} threads, "
                   f"{fmt_bytes(p.smem_bytes)} {words.shared}, {p.raster} raster, {launch}")
    warps = f"{words.warp}s"
    roles = _table("role", warps, "threads", "regs/thread", "instances", "steps",
                   right=(warps, "threads", "regs/thread", "instances"))
    for r in p.roles:
        _row(roles, r.name, r.warps, r.threads, r.registers, r.instances, " ".join(r.steps))
    console.print(roles)
    if p.buffers:
        bufs = _table("buffer", "holds", "space", "dtype", "shape", "stages", "slot", "total",
                      "layout", right=("stages", "slot", "total"))
        for b in p.buffers:
            _row(bufs, b.name, b.value, b.space, b.dtype, _shape(b.shape), b.stages,
                 fmt_bytes(b.slot_bytes), fmt_bytes(b.bytes), b.layout)
        console.print(bufs)
    if p.issue:
        _para(console, f"what each run of a task issues per {words.warp} in the built kernel "
                       "(`ptc compile --emit lowered` shows its ops):")
        counts = ("mma", words.fragment_load, "simt", "sfu", "shuffles", "shared")
        issued = _table("task", *counts, right=counts)
        for row in p.issue:
            _row(issued, *row)
        console.print(issued)


def _shape(shape) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _graph_section(expl: Explanation, console: Console, full: bool) -> None:
    _heading(console, f"sTask graph ({expl.tiles_text})")
    if full:
        console.print(Text(expl.graph_text.rstrip()), no_wrap=True, crop=True)
        return
    t = _table("task", "kind", "loop", "tile", "bytes", "mma flops", "simt ops", "sfu ops",
               "runs/tile", right=("bytes", "mma flops", "simt ops", "sfu ops", "runs/tile"))
    for r in expl.tasks:
        _row(t, r.name, r.kind, r.loop or "-", f"{r.dtype}{_shape(r.shape)}",
             fmt_bytes(r.bytes) if r.bytes else "", fmt_count(r.mma_flops),
             fmt_count(r.simt_ops), fmt_count(r.sfu_ops), f"{r.runs:g}")
    console.print(t)


def _runners_section(expl: Explanation, console: Console) -> None:
    _heading(console, "Runners-up")
    if not expl.runners_up:
        console.print(Text("  none: only one plan was possible"))
        return
    t = _table("#", "tiles", "plan", "time", "ratio", "bound", right=("#", "time", "ratio"))
    t.columns[2].no_wrap = False
    for r in expl.runners_up:
        _row(t, r.rank, r.tiles, r.plan, fmt_seconds(r.seconds), f"{r.ratio:.3f}x", r.bound)
    console.print(t)


def _rejected_section(expl: Explanation, console: Console, shown: int = 5) -> None:
    _heading(console, f"Rejected ({expl.rejected_total})")
    if not expl.rejected:
        console.print(Text("  none"))
        return
    for g in expl.rejected[:shown]:
        console.print(Text(f"  {g.count:4d} × {g.reason}"))
    rest = expl.rejected[shown:]
    if rest:
        console.print(Text(f"  ...and {sum(g.count for g in rest)} more for "
                           f"{plural(len(rest), 'other reason')}"))
