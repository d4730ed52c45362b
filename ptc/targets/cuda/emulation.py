"""How the CPU emulator builds kernel.cu (ptc.render.emulate): templates/emulate/ stands in
for the CUDA headers (cuda_runtime.h, cuda_fp16.h, ...) and for the inline PTX the device
headers issue (ptc_emulate.h: ldmatrix, mma.sync, cp.async; ptc_emulate_sm90.h: mbarriers,
TMA, wgmma), over the runtime every backend shares (templates/emulate_core)."""
from ptc.render.emulate import ACCESS_KINDS, Emulation, runtime_source

EMULATION = Emulation(
    "cuda", ACCESS_KINDS, prelude="#include <cuda_runtime.h>\n",
    runtime=runtime_source("<cuda_runtime.h>", '"ptc_emulate_core.cc"', '"ptc_emulate.cc"'))
