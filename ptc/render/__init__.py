"""Rendering a lowered kernel to source code, one renderer per backend (docs/architecture.md).

    source = render(lowered_grids, kernel, plans, device)     # kernel.cu / kernel.hip
    source = render_kernel(kernel, plan, graph, device)       # one grid: lower, render

The backend comes from the device description (`device.backend`): its package in
ptc.targets holds the renderer, with its `capabilities` (what plans it can build), and its
templates folder. Renderers only print: every decision is in the lowered kernel.
"""
from __future__ import annotations

import functools

from pathlib import Path
from typing import Sequence

import jinja2

from ..device_headers import device_headers
from ..devices import Device
from ..lower import Capabilities, LoweredKernel, LoweringError, lower
from ..sched.plan import Plan
from ..sema.typed import TypedKernel
from ..stask.graph import STaskGraph
from .. import targets
from .errors import RenderError


def renderer(backend: str):
    """The renderer class of `backend` (None: ptc has no such backend)."""
    try:
        return targets.renderer(backend)
    except targets.UnknownBackend:
        return None


@functools.lru_cache(maxsize=None)
def _environment(folders: tuple[Path, ...]) -> jinja2.Environment:
    """One per folder and process: an Environment keeps its compiled templates (compiling
    the kernel template took 70 ms, as long as lowering a kernel)."""
    return jinja2.Environment(loader=jinja2.FileSystemLoader(list(folders)),
                              trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                              undefined=jinja2.StrictUndefined)


def capabilities(device: Device) -> Capabilities | None:
    """What the device's renderer can build (None: there is no renderer for it yet)."""
    found = renderer(device.backend)
    return found.capabilities if found is not None else None


def can_render(plan: Plan, device: Device) -> str | None:
    """None when `device`'s renderer takes `plan`, else the reason it does not."""
    caps = capabilities(device)
    if caps is None:
        return f"no renderer for the {device.backend} backend yet"
    return caps.refuses(plan, device)


def render(lows: Sequence[LoweredKernel], kernel: TypedKernel, plans: Sequence[Plan],
           device: Device) -> str:
    """The source of `kernel`: one lowered kernel and plan per grid, launched in order."""
    found = renderer(device.backend)
    if found is None:
        raise RenderError(f"no renderer for the {device.backend} backend yet")
    context = found(lows, kernel, plans, device).context()
    folders = targets.backend(device.backend).template_folders()
    return _environment(folders).get_template(found.template).render(c=context)


def render_kernel(kernel: TypedKernel, plan: Plan, graph: STaskGraph, device: Device) -> str:
    """Lower and render a one-grid kernel's plan."""
    if len(kernel.body) != 1:
        raise RenderError(f"kernel {kernel.name} has {len(kernel.body)} grids: lower each "
                          "grid's plan and render them together (ptc.driver.render)")
    why = can_render(plan, device)
    if why:
        raise RenderError(why)
    try:
        low = lower(plan, graph, device, capabilities(device))
    except LoweringError as exc:
        raise RenderError(str(exc)) from None
    return render([low], kernel, [plan], device)


def headers(device: Device) -> list[Path]:
    """The device headers a rendered kernel includes (copied beside it)."""
    return backend_headers(device.backend)


def backend_headers(backend: str) -> list[Path]:
    """The device headers of a backend's renderer: its templates folder's and the ones every
    backend shares (ptc.device_headers)."""
    return device_headers(targets.backend(backend).template_folders())


__all__ = ["render", "render_kernel", "can_render", "capabilities", "headers", "RenderError",
           "renderer"]
