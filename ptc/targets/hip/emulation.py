"""How the CPU emulator builds kernel.hip (ptc.render.emulate): templates/emulate/
ptc_emulate_hip.h, which ptc_types.h includes under PTC_EMULATE, stands in for HIP's
keywords and the clang AMDGPU builtins the device headers call (ids, s_barrier, DPP,
ds_swizzle, ds_bpermute, the MFMA instructions after AMD's layouts), over the runtime every
backend shares (templates/emulate_core)."""
from ptc.render.emulate import Emulation, runtime_source, system_includes
from ptc.render.emulate_cache import CORE_HEADERS
from ptc.targets.hip import BACKEND

# the C++ library is most of what a HIP build parses (a third of its time): the prelude
EMULATION = Emulation(
    "hip", ("lds", "sts"), prelude=system_includes(BACKEND.emulate_headers, CORE_HEADERS),
    runtime=runtime_source('"ptc_types.h"', '"ptc_emulate_core.cc"'))
