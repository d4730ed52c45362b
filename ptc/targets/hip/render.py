"""The HIP renderer: prints a lowered kernel (ptc.lower) as kernel.hip for gfx90a (CDNA2)
and gfx942 (CDNA3), built by hipcc or clang -x hip (docs/hip.md).

Python here only spells what the lowering decided; `targets/hip/templates/kernel.hip.j2` prints
the frame, and the device headers beside it hold the instructions, named by what moves
where: global_to_shared.h (register-staged tile copies), mfma.h (wave tiles of MFMA with
their LDS fragment reads), cross_lane.h (DPP, ds_swizzle, ds_bpermute), ptc_types.h
(dtypes, 16-bit register pairs, ids, the barrier, LDS addresses). Device code calls clang
builtins only, so it builds without HIP's device library.
"""
from __future__ import annotations

from ptc.lower import Capabilities, LoweredKernel
from ptc.sched.plan import Style
from ptc.render.c_source import CSourceRenderer
from .body import HipBodyPrinter, RenderError
from .buffers import buffer_rule

CAPABILITIES = Capabilities(
    backend="hip",
    styles=frozenset({Style.MULTISTAGE, Style.INTERLEAVED, Style.SEQUENTIAL}),
    atoms=frozenset({"mfma.f32.16x16x16", "mfma.f32.32x32x8", "mfma.i32.16x16x16i8",
                     "mfma.i32.32x32x8i8", "mfma.i32.16x16x32i8", "mfma.i32.32x32x16i8",
                     "mfma.f32.16x16x32f8", "mfma.f32.32x32x16f8"}),
    copy_units=frozenset({"vmem"}),
    persistent=False,
    staged_copies=True,
    transposed_operands=True,
    swapped_operands=True,
    buffer_rule=buffer_rule,
    native16=frozenset({"f16"}),     # v_add_f16 / v_mul_f16; CDNA2/3 have no bf16 arithmetic
    packed16=frozenset({"f16"}),     # v_pk_add_f16 / v_pk_mul_f16, v_perm_b32 (ptc_types.h)
    hoisted_copies=True,             # c_tiles.hoist_copies (the copies' frame is shared)
)

def waves_per_simd(blocks: int, threads: int, res) -> int:
    """The waves per SIMD `blocks` resident blocks of `threads` threads make on a CU of
    `res` (ptc.devices.Resources: its waves spread over schedulers_per_eu SIMDs): the
    occupancy amdgpu_waves_per_eu asks the register allocator to leave room for."""
    waves = blocks * (threads // res.warp_size)
    return max(1, -(-waves // res.schedulers_per_eu))


class HipRenderer(CSourceRenderer):
    capabilities = CAPABILITIES
    template = "kernel.hip.j2"
    suffix = ".hip"
    printer = HipBodyPrinter
    # how the IR's choices are spelled (ptc.coverage names the instruction forms by these):
    # shared mma operands by LDS reads, 8 bytes where k is contiguous, else four 2-byte
    # reads (mfma.h); lane exchanges by the largest xor mask each serves (cross_lane.h)
    operand_reads = "lds"
    lane_exchanges = ((2, "dpp.quad_perm"), (16, "ds_swizzle"), (32, "ds_bpermute"))

    def constants(self, low: LoweredKernel) -> list[tuple[str, int]]:
        res = self.device.resources
        return [("WAVES_PER_SIMD", waves_per_simd(low.launch.min_blocks, low.launch.threads, res)),
                ("WAVES_PER_SIMD_ELEMENTWISE",
                 waves_per_simd(low.launch.min_blocks_elementwise, low.launch.threads, res))]


RENDERER = HipRenderer

__all__ = ["HipRenderer", "CAPABILITIES", "RENDERER", "RenderError"]
