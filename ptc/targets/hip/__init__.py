"""The HIP backend (gfx90a CDNA2, gfx942 CDNA3): kernel.hip built by hipcc or clang -x hip.

render.py and body.py print the lowered kernel (templates/kernel.hip.j2 and the device
headers beside it: register-staged and buffer copies, MFMA, DPP and LDS exchanges);
toolchain.py builds it (prelude.py: the checks' precompiled HIP headers) and reads the
kernel's device assembly (isa.py); emulation.py and templates/emulate/ run it on the CPU.
"""
from pathlib import Path

from ptc.targets import Backend

BACKEND = Backend(
    name="hip", vendor="amd", arch=r"gfx[0-9a-f]+", arch_example="gfxNNN, e.g. gfx942",
    # mfma_i8: v_mfma_i32_{32x32x8,16x16x16}i8 (CDNA1/2); mfma_i8_k8: CDNA3's
    # v_mfma_i32_{32x32x16,16x16x32}_i8, eight i8 per lane; mfma_f8: CDNA3's
    # v_mfma_f32_{32x32x16,16x16x32}_{fp8,bf8}_{fp8,bf8}, FNUZ operands (ptc/lower/atoms.py)
    features=("mfma", "mfma_bf16_1k", "mfma_xf32", "mfma_f8", "mfma_i8", "mfma_i8_k8", "lds",
              "s_waitcnt", "buffer_load", "buffer_load_lds", "dpp", "s_setprio"),
    templates=Path(__file__).resolve().parent / "templates")
