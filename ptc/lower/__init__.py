"""The lowering stage: plan + sTask-graph + device -> LoweredKernel (docs/lowering.md).

    from ptc.lower import lower, print_lowered
    lowered = lower(plan, graph, device, capabilities)

See ptc.lower.lowering (single-role plans) and ptc.lower.specialized (warp-specialized
ones) for what is decided here, ptc.lower.ir for the IR, and
docs/lowering.md for how the fragment layouts of each target map onto it.
"""
from .ir import LoweredKernel
from .atoms import mma_atom
from .capabilities import Capabilities, LoweringError
from .stage import lower
from .printer import print_lowered

__all__ = ["lower", "print_lowered", "LoweredKernel", "LoweringError", "Capabilities",
           "mma_atom"]
