"""The sm90 emulator is as strict as the hardware (issue 20): each rule the PTX ISA sets for
wgmma, TMA, mbarriers, setmaxnreg and named barriers -- where a slip is undefined
behaviour on the GPU, often silent -- is an error in the emulator that names the rule and
its PTX ISA section. Each test plants one slip in a rendered kernel (or a device header)
and checks the emulator reports it; before these checks each of them passed unnoticed or
gave plausible numbers.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from ptc import targets
from ptc.render.emulate import EmulationError, build_emulated
from test_emulate import case, compare, mutate, reference, within_tolerance

CUDA_TEMPLATES = targets.backend("cuda").templates

pytestmark = pytest.mark.cxx


def emulate(c, source: str, header_overrides=None, **config):
    return build_emulated(source, header_overrides=header_overrides)(c.kernel, c.inputs, c.dims,
                                                                     **config)


def assert_good(c, **config) -> None:
    assert within_tolerance(c, compare(c, emulate(c, c.source, **config),
                                       reference(c.name, c.variant)))


def header_with(name: str, good: str, bad: str) -> dict[str, str]:
    text = (CUDA_TEMPLATES / name).read_text()
    assert good in text, f"{good!r} is no longer in {name}"
    return {name: text.replace(good, bad, 1)}


# ---- wgmma: registers in flight ------------------------------------------------------------
def test_a_fragments_written_before_the_wait_are_an_error():
    """flash attention's PV wgmma reads P from registers (RS). Writing P before the
    wgmma.wait_group that retires it is undefined (PTX ISA 9.7.15.7.3); the emulator took
    a copy of A at issue and never noticed."""
    c = case("flash_attn", "sm90-ws-2consumers")
    assert c.skip is None, c.skip
    call = re.search(r"ptc::wgmma_tile<[^;]*RegOperand<\d+>\{(t_\w+)\}[^;]*;", c.source)
    assert call, "no register-sourced wgmma in the kernel"
    bad = mutate(c.source, re.escape(call.group(0)),
                 lambda m: m.group(0) + f" {call.group(1)}[0] ^= 0x00010001u;", count=1)
    with pytest.raises(EmulationError, match=r"wrote A fragment register 0 of a "
                                             r"wgmma.mma_async in flight.*9\.7\.15\.7\.3"):
        emulate(c, bad)


def test_accumulators_written_while_a_wgmma_is_in_flight_are_an_error():
    c = case("gemm", "sm90-bench-plan")
    call = re.search(r"ptc::wgmma_tile<[^;]*\((v_\w+), [^;]*;", c.source)
    bad = mutate(c.source, re.escape(call.group(0)),
                 lambda m: m.group(0) + f" {call.group(1)}[3] = 1.0f;", count=1)
    with pytest.raises(EmulationError, match=r"wrote accumulator register 3 of a "
                                             r"wgmma.mma_async in flight.*9\.7\.15\.7\.3"):
        emulate(c, bad)


def test_accumulators_read_while_a_wgmma_is_in_flight_are_an_error():
    """The GEMM's epilogue converting acc before the wgmma.wait_group that retires the last
    k-step: the registers hold the emulator's marker, whose conversion is reported (the
    numbers would have been plausible: the accumulators one k-step short)."""
    c = case("gemm", "sm90-bench-plan")
    assert_good(c)
    bad = mutate(c.source, r"(\n\s*)ptc::wgmma_wait<0>\(\);", r"\1", count=1)
    with pytest.raises(EmulationError, match=r"conversion to 16 bits reads a register of a "
                                             r"wgmma.mma_async in flight.*9\.7\.15\.7\.3"):
        emulate(c, bad)


def test_an_f32_tile_read_from_accumulators_in_flight_is_an_error():
    """An f32 output (no conversion on the way) staged in shared memory for its TMA store
    before the last wgmma.wait_group: the marker reaching the shared-memory store is
    reported."""
    from test_sm90_descriptors import SHAPES, SM90_DIR, Case

    c = Case(SM90_DIR / "gemm_operands.pt", "gemm_nn", dict(BM=64, BN=64, BK=64), SHAPES)
    bad = mutate(c.source, r"(\n\s*)ptc::wgmma_wait<0>\(\);", r"\1", count=1)
    assert all(e < 1e-5 for e in c.errors().values())
    with pytest.raises(EmulationError, match=r"a shared-memory store reads a register of a "
                                             r"wgmma.mma_async in flight.*9\.7\.15\.7\.3"):
        c.errors(bad)


def wgmma_kernel(tail: str) -> str:
    """One warpgroup issuing one wgmma m64n8k16 (operands in the NaN-filled shared memory),
    then `tail`; y (f32, 128) its output."""
    return f"""
#include <cuda_runtime.h>
#include "wgmma.cuh"
extern "C" __global__ void k(float* y) {{
  float acc[4] = {{0.0f, 0.0f, 0.0f, 0.0f}};
  ptc::wgmma_fence();
  ptc::wgmma_ss<8, false, 0, 1>(acc, ptc::wgmma_desc<128>(0, 16, 1024),
                                ptc::wgmma_desc<16>(8192, 128, 1024), 0);
  ptc::wgmma_commit();
  {tail}
}}
extern "C" const char* ptc_kernel_name(void) {{ return "k"; }}
extern "C" int ptc_launch(void* const* t, const double* s, const long long* d, void* stream) {{
  (void)s; (void)d; (void)stream;
  return ptc::emu::launch(1, 128, 16384, [&] {{ k((float*)t[0]); }});
}}
"""


def test_an_output_read_from_accumulators_in_flight_is_an_error():
    """An accumulator stored straight to an f32 output before the wait: the marker in the
    output is reported after the launch."""
    y = np.zeros(128, np.float32)
    build_emulated(wgmma_kernel("ptc::wgmma_wait<0>(); y[threadIdx.x] = 1.0f + 0.0f * acc[0];"
                                )).launch([y])
    with pytest.raises(EmulationError, match=r"stored a value read from the accumulator "
                                             r"registers of a wgmma.mma_async in flight.*"
                                             r"9\.7\.15\.7\.3"):
        build_emulated(wgmma_kernel("y[threadIdx.x] = acc[0]; ptc::wgmma_wait<0>();")).launch([y])


def test_a_wgmma_never_waited_for_is_an_error():
    """A block that ends with a wgmma in flight (PTX ISA 9.7.15.7.3: its accumulators are
    undefined until a wgmma.wait_group retires it, and it may still read shared memory)."""
    y = np.zeros(128, np.float32)
    with pytest.raises(EmulationError, match=r"ended with 1 wgmma.mma_async not retired.*"
                                             r"9\.7\.15\.7\.3"):
        build_emulated(wgmma_kernel("y[threadIdx.x] = 1.0f;")).launch([y])


# ---- wgmma.fence ---------------------------------------------------------------------------
def test_a_wgmma_without_a_wgmma_fence_is_an_error():
    c = case("gemm", "sm90-bench-plan")
    bad = header_with("wgmma.cuh", "  wgmma_fence();\n#pragma unroll\n  for (int ks",
                      "#pragma unroll\n  for (int ks")
    with pytest.raises(EmulationError, match=r"no wgmma.fence before it.*9\.7\.15\.7\.1"):
        emulate(c, c.source, header_overrides=bad)


def test_accumulators_written_after_the_wgmma_fence_are_an_error():
    """A register write between the wgmma.fence and the wgmma that reads the register
    needs a fence of its own (PTX ISA 9.7.15.7.1)."""
    c = case("gemm", "sm90-bench-plan")
    bad = header_with("wgmma.cuh", "  wgmma_fence();\n#pragma unroll\n  for (int ks",
                      "  wgmma_fence();\n  acc[1] += 1.0f;\n#pragma unroll\n  for (int ks")
    with pytest.raises(EmulationError, match=r"wrote accumulator register 1 after its last "
                                             r"wgmma.fence.*9\.7\.15\.7\.1"):
        emulate(c, c.source, header_overrides=bad)


# ---- the async proxy -----------------------------------------------------------------------
def test_a_tma_store_of_generic_writes_without_fence_proxy_async_is_an_error():
    """The TMA-store epilogue writes the tile with st.shared / stmatrix (generic proxy);
    the TMA store reads it through the async proxy: fence.proxy.async in between."""
    c = case("gemm", "sm90-bench-plan")
    bad = mutate(c.source, r"ptc::fence_proxy_async\(\);  // generic stores, read by the "
                           r"async proxy", "")
    with pytest.raises(EmulationError, match=r"TMA store.*did not follow with "
                                             r"fence.proxy.async.*9\.7\.15\.4"):
        emulate(c, bad)


def test_a_wgmma_operand_of_generic_writes_without_fence_proxy_async_is_an_error():
    """Unaligned shapes: the producer copies tiles element by element into the layout TMA
    would write (generic stores) for wgmma to read (async proxy)."""
    c = case("gemm", "sm90-ws")           # the EDGE shape: no tensor maps
    assert_good(c)
    bad = mutate(c.source, r"ptc::fence_proxy_async\(\);  // generic stores, read by the "
                           r"tensor cores", "")
    with pytest.raises(EmulationError, match=r"wgmma.mma_async \(a shared operand\).*"
                                             r"fence.proxy.async.*9\.7\.15\.4"):
        emulate(c, bad)


# ---- mbarrier.init -------------------------------------------------------------------------
def test_an_mbarrier_init_without_its_fence_is_an_error():
    c = case("gemm", "sm90-bench-plan")
    bad = mutate(c.source, r"ptc::mbarrier_init_fence\(\);", "")
    with pytest.raises(EmulationError, match=r"before the init was fenced.*9\.7\.13\.15\.9"):
        emulate(c, bad)


def test_an_mbarrier_used_before_the_block_meets_is_an_error():
    c = case("gemm", "sm90-bench-plan")
    bad = mutate(c.source, r"__syncthreads\(\);  // the mbarriers are set up", "")
    with pytest.raises(EmulationError, match=r"before the block met at a barrier after the "
                                             r"init's fence.*9\.7\.13\.15\.9"):
        emulate(c, bad)


# ---- setmaxnreg ----------------------------------------------------------------------------
def test_setmaxnreg_beyond_the_ctas_pool_is_a_deadlock():
    """Launched with 160 registers per thread (384 threads: a pool of 61440), the producer
    gives back 120 per thread and the consumers ask for 232: 64512 registers, which an SM
    has (65536) but the CTA's pool does not (PTX ISA 9.7.19.5: the pool is per CTA)."""
    c = case("gemm", "sm90-bench-plan")
    assert "constexpr int LAUNCH_REGISTERS = 168;" in c.source
    assert "ptc::setmaxnreg_inc<232, LAUNCH_REGISTERS>();" in c.source
    bad = mutate(c.source, r"constexpr int LAUNCH_REGISTERS = 168;",
                 "constexpr int LAUNCH_REGISTERS = 160;")
    with pytest.raises(EmulationError, match=r"deadlock: .* at setmaxnreg.inc, waiting for "
                                             r"registers the CTA's pool does not have.*"
                                             r"9\.7\.19\.5"):
        emulate(c, bad)


# ---- shared memory per block ---------------------------------------------------------------
def test_shared_memory_beyond_the_devices_limit_is_an_error():
    """sm90.yaml: 232448 bytes (227 KB) per block; the emulator's own array holds 256 KB,
    which it used to accept."""
    c = case("gemm", "sm90-bench-plan")
    bad = mutate(c.source, r"constexpr int SMEM_BYTES = \d+;", "constexpr int SMEM_BYTES = 240000;")
    with pytest.raises(EmulationError, match=r"240000 bytes of shared memory per block, over "
                                             r"the 232448 a block of sm90 may have"):
        emulate(c, bad)
    ok = mutate(c.source, r"constexpr int SMEM_BYTES = \d+;", "constexpr int SMEM_BYTES = 232448;")
    assert within_tolerance(c, compare(c, emulate(c, ok), reference(c.name, c.variant)))


# ---- TMA stores ----------------------------------------------------------------------------
def test_a_tma_store_at_negative_coordinates_is_an_error():
    """PTX ISA 9.7.9.25.5.1: a shared-to-global box starts at non-negative coordinates
    (the emulator used to skip the elements before 0, as it does those past the end)."""
    c = case("gemm", "sm90-bench-plan")
    bad = mutate(c.source, r"(ptc::tma_store<2>\(&map_store_C, [^{]*\{)\(int\)", r"\1-8 + (int)",
                 count=1)
    with pytest.raises(EmulationError, match=r"TMA store at coordinate -8 of dim 0.*non-negative"
                                             r".*9\.7\.9\.25\.5\.1"):
        emulate(c, bad)


# ---- named barriers ------------------------------------------------------------------------
def test_a_second_arrival_at_a_named_barrier_in_one_phase_is_an_error():
    """Ping-pong: warpgroup 1 hands warpgroup 0 the first turn with bar.arrive; arriving
    twice counts it in twice before the barrier completes (PTX ISA 9.7.13.1)."""
    c = case("flash_attn", "sm90-pingpong")
    assert c.skip is None, c.skip
    first = "if (part == 1) ptc::named_barrier_arrive(3 + (part + 1) % 2, 256);"
    assert first in c.source
    bad = c.source.replace(first, first + " " + first, 1)
    with pytest.raises(EmulationError, match=r"bar.arrive 3, 256: thread 256 \(warp 8\) counts "
                                             r"in a second time.*9\.7\.13\.1"):
        emulate(c, bad)


# ---- descriptors ---------------------------------------------------------------------------
def test_a_descriptor_with_a_base_offset_is_an_error():
    c = case("gemm", "sm90-bench-plan")
    bad = header_with("wgmma.cuh", "(TYPE << 62);", "(TYPE << 62) | (1ull << 49);")
    with pytest.raises(EmulationError, match=r"base offset 1.*9\.7\.15\.5\.1\.2\.2"):
        emulate(c, c.source, header_overrides=bad)
