"""The canonical text form of an sTask-graph (`ptc compile --emit stask`) and Graphviz DOT."""
from __future__ import annotations

from ..sema import printer as typed_printer
from ..sema import typed as T
from .graph import Region, STaskGraph, TaskKind


def _shape(shape) -> str:
    return "[" + ", ".join(str(e) for e in shape) + "]"


def print_graph(g: STaskGraph) -> str:
    lines = [f"stask-graph {g.kernel.name}"]
    if g.tiles:
        lines.append("  tiles " + ", ".join(f"{k}={v}" for k, v in g.tiles.items()))
    axes = ", ".join(f"{a.var}: {a.size} of {a.dim}" if a.size is not None else f"{a.var} of {a.dim}"
                     for a in g.grid.axes)
    lines.append(f"  parallel {axes}")
    _region(g, g.root, 2, lines)
    lines.append("  edges")
    for e in g.edges:
        dist = f"  (distance {e.distance})" if e.distance else ""
        lines.append(f"    {e.src} -> {e.dst} [{e.value}]{dist}")
    return "\n".join(lines) + "\n"


def _region(g: STaskGraph, r: Region, depth: int, out: list[str]) -> None:
    pad = "  " * depth
    for item in r.items:
        if isinstance(item, Region):
            loop = item.loop
            head = f"{pad}for {loop.axis.var}: {loop.axis.size} of {loop.axis.dim}"
            if loop.until is not None:
                head += f" until {typed_printer.expr(loop.until)}"
            out.append(head)
            _region(g, item, depth + 1, out)
            continue
        t = g.task(item)
        work = []
        if g.tiles is not None:
            w = t.work
            for label, v in (("bytes", w.bytes), ("mma_flops", w.mma_flops),
                             ("simt_ops", w.simt_ops), ("sfu_ops", w.sfu_ops)):
                if v:
                    work.append(f"{label}={v}")
        suffix = f"  {' '.join(work)}" if work else ""
        out.append(f"{pad}{t.name}: {t.kind} {t.dtype}{_shape(t.shape)}{suffix}")
        for s in t.stmts:
            if isinstance(s, T.Let):
                out.append(f"{pad}  {s.name} = {typed_printer.expr(s.value)}")
            else:
                verb = "atomic_add" if s.atomic else "store"
                out.append(f"{pad}  {verb} {s.tensor} <- {typed_printer.expr(s.value)}")


_COLORS = {TaskKind.COPY: "#8ecae6", TaskKind.MMA: "#ffb703", TaskKind.SIMT: "#90be6d"}


def to_dot(g: STaskGraph) -> str:
    lines = [f'digraph "{g.kernel.name}" {{', "  rankdir=TB;", '  node [shape=box, style=filled];']

    def emit(r: Region, depth: int) -> None:
        pad = "  " * depth
        for item in r.items:
            if isinstance(item, Region):
                lines.append(f'{pad}subgraph "cluster_{item.name}" {{')
                lines.append(f'{pad}  label="for {item.name}";')
                emit(item, depth + 1)
                lines.append(f"{pad}}}")
            else:
                t = g.task(item)
                label = f"{t.name}\\n{t.kind} {t.dtype}{_shape(t.shape)}"
                lines.append(f'{pad}"{t.name}" [label="{label}", fillcolor="{_COLORS[t.kind]}"];')

    emit(g.root, 1)
    for e in g.edges:
        style = ', style=dashed, label="d=1"' if e.distance else ""
        lines.append(f'  "{e.src}" -> "{e.dst}" [tooltip="{e.value}"{style}];')
    lines.append("}")
    return "\n".join(lines) + "\n"
