"""Rendering a verified plan to source code, one renderer per backend (docs/architecture.md).

    render_kernel(kernel, plan, graph, device) -> str      # kernel.cu / kernel.hip

The backend comes from the device description (`device.backend`); adding one means a
renderer module, its templates folder and one line in RENDERERS.
"""
from __future__ import annotations

from pathlib import Path

import jinja2

from ..devices import Device
from ..sched.plan import Plan
from ..sema.typed import TypedKernel
from ..stask.graph import STaskGraph
from .cuda import CudaRenderer, RenderError

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"

# backend -> (renderer class, template folder, kernel template, source suffix)
RENDERERS = {
    "cuda": (CudaRenderer, "cuda", "kernel.cu.j2", ".cu"),
}


def _environment(folder: str) -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES / folder),
                              trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                              undefined=jinja2.StrictUndefined)


def can_render(plan: Plan, device: Device) -> str | None:
    """None when `device`'s renderer takes `plan`, else the reason it does not."""
    entry = RENDERERS.get(device.backend)
    if entry is None:
        return f"no renderer for the {device.backend} backend yet"
    renderer = entry[0]
    if plan.style not in renderer_styles(renderer):
        return f"the {device.backend} renderer does not take {plan.style} plans yet"
    return None


def renderer_styles(renderer) -> tuple[str, ...]:
    from .cuda import SUPPORTED_STYLES
    return SUPPORTED_STYLES


def render_kernel(kernel: TypedKernel, plan: Plan, graph: STaskGraph, device: Device) -> str:
    why = can_render(plan, device)
    if why:
        raise RenderError(why)
    renderer, folder, template, _ = RENDERERS[device.backend]
    context = renderer(kernel, plan, graph, device).render()
    return _environment(folder).get_template(template).render(c=context)


def headers(device: Device) -> list[Path]:
    """The device headers a rendered kernel includes (copied beside it)."""
    folder = TEMPLATES / RENDERERS[device.backend][1]
    return sorted(p for p in folder.iterdir() if p.suffix in (".cuh", ".h", ".hpp"))


__all__ = ["render_kernel", "can_render", "headers", "RenderError", "RENDERERS"]
