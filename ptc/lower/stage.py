"""The lowering stage's entry point: a plan goes to the single-role lowering
(ptc.lower.lowering) or, warp-specialized, to ptc.lower.specialized."""
from __future__ import annotations

from ..devices import Device
from ..sched.plan import Plan
from ..stask.graph import STaskGraph
from . import ir
from .capabilities import Capabilities, LoweringError
from .lowering import Lowering
from .specialized import lower_specialized


def lower(plan: Plan, graph: STaskGraph, device: Device,
          caps: Capabilities | None = None) -> ir.LoweredKernel:
    if len(graph.kernel.body) != 1:
        # the plan and graph are those of one grid: the others would be dropped silently
        raise LoweringError(f"kernel {graph.kernel.name} has {len(graph.kernel.body)} "
                            "parallel grids; lower each grid's kernel (ptc.sema.grids)")
    if caps is not None:
        why = caps.refuses(plan, device)
        if why:
            raise LoweringError(why)
    if plan.style == "warp_specialized":
        return lower_specialized(plan, graph, device, caps)
    if len(plan.roles) != 1:
        raise LoweringError(f"{plan.style} plans have {len(plan.roles)} roles; the lowering "
                            "takes single-role plans, or warp-specialized ones")
    return Lowering(plan, graph, device, caps).run()
