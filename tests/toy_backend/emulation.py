"""The toy's kernels are CUDA source: the emulator builds them as it builds CUDA's, with
the base's emulation headers (ptc.targets.Backend.emulate_folders)."""
from ptc.render.emulate import ACCESS_KINDS, Emulation, runtime_source

EMULATION = Emulation(
    "toy", ACCESS_KINDS, prelude="#include <cuda_runtime.h>\n",
    runtime=runtime_source("<cuda_runtime.h>", '"ptc_emulate_core.cc"', '"ptc_emulate.cc"'))
