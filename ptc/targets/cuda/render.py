"""The CUDA renderer: prints a lowered kernel (ptc.lower) as kernel.cu for sm80 and later.

Python here only spells what the lowering decided; `targets/cuda/templates/kernel.cu.j2` prints
the frame, and the device headers beside it hold the instructions, named by what moves
where: global_to_shared.cuh (cp.async tile copies), shared_to_register_ldmatrix.cuh,
mma_sync.cuh (warp tiles of mma.sync m16n8k16), ptc_types.cuh (dtypes, 16-bit register
pairs, shared addresses).
"""
from __future__ import annotations

from ptc.lower import Capabilities, LoweredKernel, ir
from ptc.sched.plan import Style
from ptc.render.c_source import CSourceRenderer
from .body import BodyPrinter, RenderError
from .specialized import tensor_map_setup

CAPABILITIES = Capabilities(
    backend="cuda",
    styles=frozenset({Style.MULTISTAGE, Style.INTERLEAVED, Style.SEQUENTIAL,
                      Style.WARP_SPECIALIZED}),
    atoms=frozenset({"mma.sync.m16n8k16", "mma.sync.m16n8k8", "mma.sync.m16n8k32"}),
    copy_units=frozenset({"cp_async", "tma"}),
    persistent=False,
    native16=frozenset({"f16", "bf16"}),     # HADD2 / HMUL2 / HFMA2.BF16, the .rn forms
    packed16=frozenset({"f16", "bf16"}),     # two at a time: HADD2 / HMUL2, PRMT (ptc_types.cuh)
    hoisted_copies=True,                     # c_tiles.hoist_copies
)

# what a warp-specialized grid's ops are spelled with (docs/sm90.md)
SPECIALIZED_HEADERS = ("mbarrier.cuh", "global_to_shared_tma.cuh", "shared_to_global_tma.cuh",
                       "register_to_shared_stmatrix.cuh", "wgmma.cuh", "warpgroup.cuh")


def _specialized(low: LoweredKernel) -> bool:
    return any(isinstance(op, ir.Specialized) for op in low.body)


class CudaRenderer(CSourceRenderer):
    capabilities = CAPABILITIES
    template = "kernel.cu.j2"
    suffix = ".cu"
    printer = BodyPrinter
    # how the IR's choices are spelled (ptc.coverage names the instruction forms by these):
    # shared mma operands by ldmatrix(.trans) .x4 / .x2 (shared_to_register_ldmatrix.cuh);
    # lane exchanges, by the largest xor mask each instruction serves
    operand_reads = "ldmatrix"
    lane_exchanges = ((16, "shfl.sync.bfly"),)

    def includes(self) -> tuple[str, ...]:
        return SPECIALIZED_HEADERS if any(_specialized(low) for low in self.lows) else ()

    def constants(self, low: LoweredKernel) -> list[tuple[str, int]]:
        planned = [("PLAN_BLOCKS", low.launch.blocks_per_eu)]   # a retry's (ptc.runtime.build)
        return planned + ([("LAUNCH_REGISTERS", low.launch.registers)] if _specialized(low)
                          else [])

    def map_setup(self, m: ir.TensorMap, tensor_index: int, scalar_expr) -> list[str]:
        return tensor_map_setup(m, tensor_index, scalar_expr)


RENDERER = CudaRenderer

__all__ = ["CudaRenderer", "CAPABILITIES", "RENDERER", "RenderError"]
