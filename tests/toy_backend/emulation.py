"""The toy's kernels are CUDA source: the emulator builds them as it builds CUDA's (the
same prelude and runtime), with the base's emulation headers
(ptc.targets.Backend.emulate_folders)."""
from dataclasses import replace

from ptc.targets.cuda.emulation import EMULATION as CUDA

EMULATION = replace(CUDA, name="toy")
