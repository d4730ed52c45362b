"""The sm90 device headers and their emulation, before anything is rendered with them:
tests/sm90/ws_gemm.cu is a hand-written warp-specialized GEMM over mbarrier.cuh,
global_to_shared_tma.cuh, wgmma.cuh and warpgroup.cuh (a producer warpgroup issuing TMA
loads into a 3-slot ring, two consumer warpgroups on wgmma). On the CPU emulator it must
compute A @ B, and each deliberate slip (a tensor map without the swizzle wgmma reads, a
wrong descriptor stride, a producer that does not wait for its slot to be free, a consumer
that releases a slot before its wgmma finished) must give wrong numbers or an error. nvcc
must build it for sm_90a with the instructions docs/sm90.md names, and no serialization."""
from __future__ import annotations

import re
import subprocess
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from ptc.driver import check_file
from ptc.render.emulate import (CORE_HEADERS, CUDA_TEMPLATES, EMULATE_HEADERS, EmulationError,
                                build_emulated)

ROOT = Path(__file__).resolve().parent.parent
WS_GEMM = (ROOT / "tests" / "sm90" / "ws_gemm.cu").read_text()
CONFIGS = [dict(), dict(order="reverse", eager_cp_async=True), dict(order="random", seed=5)]
needs_cxx = pytest.mark.cxx


@lru_cache(maxsize=None)
def gemm_kernel():
    return check_file(ROOT / "samples" / "gemm.pt").kernels[0]


def run(defines: tuple[str, ...], shapes: dict, config: dict, seed: int = 0) -> float:
    """The largest error of the emulated C against NumPy, relative to the largest |C|."""
    m, n, k = shapes["M"], shapes["N"], shapes["K"]
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    out = build_emulated(WS_GEMM, defines=defines)(gemm_kernel(), {"A": a, "B": b}, shapes,
                                                    **config)
    want = a.astype(np.float32) @ b.astype(np.float32)
    return float(np.abs(out["C"].astype(np.float32) - want).max() / np.abs(want).max())


@needs_cxx
@pytest.mark.parametrize("shapes", [dict(M=256, N=128, K=256), dict(M=200, N=136, K=200)],
                         ids=["tiles", "edges"])
def test_the_warp_specialized_gemm_computes_a_at_b(shapes):
    for config in CONFIGS:
        assert run((), shapes, config) < 1e-3, config


@needs_cxx
@pytest.mark.parametrize("defines", [
    ("SWIZZLE_MAP=CU_TENSOR_MAP_SWIZZLE_NONE",),   # TMA writes rows wgmma reads swizzled
    ("SBO_A=2048",),                               # the A descriptor's 8-row stride
    ("WAIT_WGMMA=0",),                             # the slot released before wgmma is done
])
def test_a_slip_in_layout_or_ordering_gives_wrong_numbers(defines):
    errors = [run(defines, dict(M=256, N=128, K=256), config) for config in CONFIGS]
    assert all(e > 0.1 for e in errors), errors


@needs_cxx
def test_a_producer_that_does_not_wait_for_a_free_slot_is_caught():
    with pytest.raises(EmulationError, match="more arrivals than its 1|deadlock"):
        run(("WAIT_EMPTY=0",), dict(M=256, N=128, K=512), {})


@needs_cxx
def test_descriptors_encode_the_worked_examples(tmp_path):
    """docs/sm90.md: CUTLASS's make_gmma_desc gives these for a K-major 64x64 bf16 tile at
    0x400 and a MN-major 64x128 one at 0x2000 (two 64-column panels)."""
    src = tmp_path / "desc.cpp"
    src.write_text('#include "cuda_runtime.h"\n#include "wgmma.cuh"\n#include <cstdio>\n'
                   "int main() {\n"
                   "  for (int ks = 0; ks < 4; ++ks)\n"
                   '    printf("%llx %llx\\n", (unsigned long long)ptc::wgmma_desc(0x400 + 32 * ks, 16, 1024),\n'
                   "           (unsigned long long)ptc::wgmma_desc(0x2000 + 2048 * ks, 8192, 1024));\n}\n")
    exe = tmp_path / "desc"
    subprocess.run(["g++", "-std=c++20", "-DPTC_EMULATE", f"-I{EMULATE_HEADERS}",
                    f"-I{CUDA_TEMPLATES}", f"-I{CORE_HEADERS}", "-w", str(src), "-o", str(exe)],
                   check=True)
    lines = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split("\n")
    k_major = [int(line.split()[0], 16) for line in lines if line]
    mn_major = [int(line.split()[1], 16) for line in lines if line]
    assert k_major == [0x4000004000010040, 0x4000004000010042, 0x4000004000010044,
                       0x4000004000010046]
    assert mn_major == [0x4000004002000200, 0x4000004002000280, 0x4000004002000300,
                        0x4000004002000380]


@pytest.mark.nvcc
def test_nvcc_builds_it_for_sm90a_with_the_hopper_instructions(tmp_path):
    import importlib
    B = importlib.import_module("ptc.runtime.build")   # (ptc.runtime.build is also a function)

    folder = tmp_path / "ws"
    from ptc.runtime.signature import signature_of
    B.write_build_dir(folder, kernel_source=WS_GEMM, signature=signature_of(gemm_kernel()),
                      arch="sm_90a", target="sm90")
    result = B.build(folder, "sm_90a")
    assert result.ptxas.spills == 0, result.ptxas.text
    assert not re.search(r"C75\d\d", result.ptxas.text), result.ptxas.text
    sass = B.sass(folder)
    for opcode in ("HGMMA.64x64x16.F32", "UTMALDG.2D", "SYNCS.PHASECHK.TRANS64.TRYWAIT",
                   "SYNCS.ARRIVE.TRANS64", "USETMAXREG.DEALLOC", "USETMAXREG.TRY_ALLOC",
                   "WARPGROUP.ARRIVE"):
        assert opcode in sass, opcode
