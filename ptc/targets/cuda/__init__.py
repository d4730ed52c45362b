"""The CUDA backend (sm80, sm90): kernel.cu built by nvcc, run on NVIDIA GPUs.

render.py and body.py / specialized.py print the lowered kernel (templates/kernel.cu.j2 and
the device headers beside it: cp.async, ldmatrix, mma.sync, TMA, mbarrier, wgmma);
toolchain.py builds it with nvcc and reads ptxas's report (ptxas.py); emulation.py and
templates/emulate/ run it on the CPU.
"""
from pathlib import Path

from ptc.targets import Backend

BACKEND = Backend(
    name="cuda", vendor="nvidia", arch=r"sm_\d+[af]?", arch_example="sm_NN, e.g. sm_90a",
    # what a device may state; the templates test `feature in device.features`. Add a name
    # here when a template learns a new instruction family.
    features=("cp_async", "ldmatrix", "stmatrix", "mma_sync", "mbarrier", "named_barrier",
              "tma", "wgmma", "setmaxnreg", "cluster",
              # cvt_fp8: cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 (sm89+; LoweredKernel.fp8_cvt)
              "cvt_fp8"),
    templates=Path(__file__).resolve().parent / "templates")
