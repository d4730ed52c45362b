"""The lowering stage's entry point: a plan goes to the single-role lowering
(ptc.lower.lowering) or, warp-specialized, to ptc.lower.specialized."""
from __future__ import annotations

from ..devices import Device
from ..sched.plan import Plan, Style
from ..stask.graph import STaskGraph
from . import ir
from .capabilities import Capabilities, LoweringError
from .lowering import Lowering
from .passes import PassTrace
from .specialized import lower_specialized
from .verify import resource_problems


def lower(plan: Plan, graph: STaskGraph, device: Device,
          caps: Capabilities | None = None, after: str | None = None) -> ir.LoweredKernel:
    """The lowered kernel of `plan`; with `after`, its ops as that pass left them
    (ptc.lower.passes)."""
    trace = PassTrace(after)
    if len(graph.kernel.body) != 1:
        # the plan and graph are those of one grid: the others would be dropped silently
        raise LoweringError(f"kernel {graph.kernel.name} has {len(graph.kernel.body)} "
                            "parallel grids; lower each grid's kernel (ptc.sema.grids)")
    if caps is not None:
        why = caps.refuses(plan, device)
        if why:
            raise LoweringError(why)
    if plan.style == Style.WARP_SPECIALIZED:
        low = lower_specialized(plan, graph, device, caps, trace)
    elif len(plan.roles) != 1:
        raise LoweringError(f"{plan.style} plans have {len(plan.roles)} roles; the lowering "
                            "takes single-role plans, or warp-specialized ones")
    else:
        low = Lowering(plan, graph, device, caps, trace).run()
    problems = resource_problems(low, device)
    if problems:
        raise LoweringError("the lowered kernel's resources: " + "; ".join(problems))
    return trace.kernel(low, "consumer" if plan.style == Style.WARP_SPECIALIZED else None)
