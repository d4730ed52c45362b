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
from ptc.render.emulate import (EmulationError, backend_of,
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
def test_a_wgmma_operand_read_outside_shared_memory_is_caught():
    """A descriptor whose rows run past the block's shared memory: the warpgroup's operand
    is decoded once for all its threads (the emulator's DecodedOperand), and the first row
    outside is an error, not a value."""
    with pytest.raises(EmulationError, match=r"wgmma reads shared offset \d+, outside the"):
        run(("SBO_A=65536",), dict(M=256, N=128, K=256), {})


DESCRIPTOR_PROGRAM = backend_of("cuda").runtime + r"""
#include "wgmma.cuh"
#include <cstdio>
using ptc::emu::decode_desc;
using ptc::emu::operand_address;
// CuTe's Swizzle<B, 4, 3> on a byte address: the 16-byte chunk bits [4, 4 + B) XOR the bits
// [7, 7 + B)
static unsigned swz(unsigned a, int b) { return a ^ ((a >> 3) & (((1u << b) - 1) << 4)); }
static int failures = 0;
static void expect(const char* what, unsigned long long got, unsigned long long want) {
  if (got != want) {
    ++failures;
    printf("FAIL %s: %llx, not %llx\n", what, got, want);
  }
}
// the descriptor of a 16-bit operand at `start`: element (mn, k) of the PTX ISA's worked
// example `exact` (its "Exact layout", in bytes before the swizzle) is where the emulator
// reads it
template <class Exact>
static void example(const char* what, uint64_t desc, bool mn_major, int mns, int ks, int b,
                    Exact exact) {
  const unsigned start = (desc & 0x3fff) << 4;
  for (int mn = 0; mn < mns; ++mn)
    for (int k = 0; k < ks; ++k) {
      char w[96];
      snprintf(w, sizeof w, "%s (%d, %d)", what, mn, k);
      expect(w, operand_address(decode_desc(desc), mn, k, mn_major), swz(start + exact(mn, k), b));
    }
}
// SmemOperand's descriptor of the tile TMA writes (column panels of PANEL bytes, rows of
// SPAN bytes swizzled over it), decoded after the PTX ISA: every element of every m64 (or
// n) block and k-step is where TMA put it
template <bool MN, int SPAN, int PANEL>
static void round_trip(const char* what, unsigned base, int mns, int kmax) {
  const ptc::SmemOperand<MN, SPAN, PANEL> op{base, 0};
  const int b = SPAN == 128 ? 3 : SPAN == 64 ? 2 : SPAN == 32 ? 1 : 0;
  for (int mb = 0; mb < mns; mb += 64)
    for (int ks = 0; ks < kmax; ks += 16)
      for (int mn = 0; mn < 64 && mb + mn < mns; ++mn)
        for (int k = 0; k < 16; ++k) {
          char w[96];
          snprintf(w, sizeof w, "%s (%d, %d)", what, mb + mn, ks + k);
          expect(w, operand_address(decode_desc(op.desc(mb, ks)), mn, k, MN),
                 swz(base + op.offset(mb + mn, ks + k), b));
        }
  printf("%s %llx\n", what, (unsigned long long)op.desc(0, 0));
}
int main() {
  // docs/sm90.md's worked examples (CUTLASS's make_gmma_desc evaluated on the host)
  for (int ks = 0; ks < 4; ++ks) {
    expect("K-major 128B k-step", ptc::wgmma_desc(0x400 + 32 * ks, 16, 1024),
           0x4000004000010040ull + 2 * ks);
    expect("MN-major 128B k-step", ptc::wgmma_desc(0x2000 + 2048 * ks, 8192, 1024),
           0x4000004002000200ull + 0x80 * ks);
  }
  // PTX ISA 9.7.15.5.1.2.1.3 "Canonical Layouts", its examples ("Exact layout" strides in
  // elements; the tf32 ones read as pairs of 16-bit elements: K-major tf32 k is 16-bit 2k)
  example("K-major none tf32", ptc::wgmma_desc<16>(0x400, 64 * 4, 32 * 4), false, 16, 32, 0,
          [](int mn, int k) { const int t = k / 2;   // ((8,2),(4,4)):((4,32),(1,64))
            return 4 * ((mn % 8) * 4 + (mn / 8) * 32 + (t % 4) + (t / 4) * 64) + 2 * (k % 2); });
  example("K-major 32B tf32", ptc::wgmma_desc<32>(0x400, 16, 64 * 4), false, 16, 16, 1,
          [](int mn, int k) { const int t = k / 2;   // ((8,2),(4,2)):((8,64),(1,4))
            return 4 * ((mn % 8) * 8 + (mn / 8) * 64 + (t % 4) + (t / 4) * 4) + 2 * (k % 2); });
  example("MN-major none bf16", ptc::wgmma_desc<16>(0x400, 128 * 2, 64 * 2), true, 16, 16, 0,
          [](int mn, int k) {                        // ((8,1,2),(8,2)):((1,8,64),(8,128))
            return 2 * ((mn % 8) + (mn / 8) * 64 + (k % 8) * 8 + (k / 8) * 128); });
  example("MN-major 32B bf16", ptc::wgmma_desc<32>(0x800, 128 * 2, 256 * 2), true, 32, 16, 1,
          [](int mn, int k) {                        // ((8,2,2),(8,2)):((1,8,128),(16,256))
            return 2 * ((mn % 8) + ((mn / 8) % 2) * 8 + (mn / 16) * 128 + (k % 8) * 16 +
                        (k / 8) * 256); });
  example("MN-major 64B bf16", ptc::wgmma_desc<64>(0x800, 256 * 2, 512 * 2), true, 64, 16, 2,
          [](int mn, int k) {                        // ((8,4,2),(8,2)):((1,8,256),(32,512))
            return 2 * ((mn % 8) + ((mn / 8) % 4) * 8 + (mn / 32) * 256 + (k % 8) * 32 +
                        (k / 8) * 512); });
  // every swizzle mode x major-ness, in the layouts TMA writes (64 rows or k; 128 mn)
  round_trip<false, 128, 64 * 128>("K-major 128B", 0x400, 128, 64);
  round_trip<false, 64, 128 * 64>("K-major 64B", 0x400, 128, 32);
  round_trip<false, 32, 128 * 32>("K-major 32B", 0x400, 128, 16);
  round_trip<false, 16, 128 * 16>("K-major none", 0x400, 128, 64);
  round_trip<true, 128, 64 * 128>("MN-major 128B", 0x2000, 128, 64);
  round_trip<true, 64, 64 * 64>("MN-major 64B", 0x2000, 32, 64);
  round_trip<true, 32, 64 * 32>("MN-major 32B", 0x2000, 16, 64);
  round_trip<true, 16, 64 * 16>("MN-major none", 0x2000, 8, 64);
  round_trip<true, 16, 64 * 16>("MN-major none, 16 wide", 0x2000, 16, 64);
  return failures != 0;
}
"""


@needs_cxx
def test_descriptors_encode_the_worked_examples(tmp_path):
    """The descriptors SmemOperand builds and the emulator's reading of them, for every
    swizzle mode and major-ness, against the PTX ISA ("Matrix Descriptor Format",
    "Canonical Layouts" and their worked examples; docs/sm90.md): the emulator reads the
    examples' elements where their exact layouts put them, and each operand tile in the
    layout TMA writes is read back element for element through SmemOperand's descriptors.
    The descriptors themselves, with LBO and SBO by the PTX ISA's definitions: swizzled,
    K-major SBO = 8 rows (LBO unused: 1), MN-major LBO = a panel and SBO = 8 k rows; without
    a swizzle, K-major LBO = a panel (the next 8 k) and SBO = 8 rows of 16 bytes, MN-major
    LBO = 8 k rows of 16 bytes and SBO = a panel (the next 8 mn)."""
    src = tmp_path / "desc.cpp"
    src.write_text(DESCRIPTOR_PROGRAM)
    exe = tmp_path / "desc"
    subprocess.run(["g++", "-std=c++20", "-DPTC_EMULATE",
                    *(f"-I{d}" for d in backend_of("cuda").include_dirs()), "-w", str(src),
                    "-o", str(exe)], check=True)
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:]
    descs = dict(line.rsplit(" ", 1) for line in run.stdout.splitlines())
    #             type   SBO >> 4     LBO >> 4     start >> 4
    assert descs == {
        "K-major 128B": "4000004000010040",      # 1: 128B, SBO 1024, LBO 16 (unused)
        "K-major 64B": "8000002000010040",       # 2: 64B, SBO 512
        "K-major 32B": "c000001000010040",       # 3: 32B, SBO 256
        "K-major none": "800800040",             # 0, SBO 128, LBO 2048 (a panel)
        "MN-major 128B": "4000004002000200",     # LBO 8192 (a panel), SBO 1024
        "MN-major 64B": "8000002001000200",      # LBO 4096, SBO 512
        "MN-major 32B": "c000001000800200",      # LBO 2048, SBO 256
        "MN-major none": "4000080200",           # SBO 1024 (a panel), LBO 128
        "MN-major none, 16 wide": "4000080200",
    }


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
