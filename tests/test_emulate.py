"""The rendered CUDA kernels, run on the CPU (ptc.render.emulate), against the reference
interpreter: every sample, a few sm80 and sm90 plans each, at small shapes with ragged edge
tiles.

The emulation compiles the very kernel.cu that nvcc builds, with the host compiler and
-DPTC_EMULATE: ldmatrix and mma.sync are emulated register by register after the PTX
fragment layouts, so the checks below see a wrong layout, a missing barrier or cp.async
wait, an out-of-bounds access or a deadlock -- each one is shown by a broken variant. The
sm90 warp-specialized kernels run their mbarriers, TMA loads (swizzled, zero-filled past
the edges) and wgmma on the same emulator (tests/test_sm90.py shows it seeing their slips).
"""
from __future__ import annotations

import ctypes
import functools
import os
import re
import subprocess
from functools import lru_cache
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import formulas as F
from conftest import Builds, in_groups, selected_groups
from ptc.devices import get_device
from ptc.driver import check_file, schedule
from ptc.interp import run_kernel
from ptc.render import RenderError, can_render, render_kernel
from ptc import targets
from ptc.render.emulate import (EmulationError, backend_of,
                                build_emulated, build_emulated_many)
from ptc.sched.construct import Choice, Unfit, construct
from ptc.stask import build_graphs, propagate
from test_simulate import EDGE, SMOKE

CUDA_TEMPLATES = targets.backend("cuda").templates

pytestmark = pytest.mark.cxx

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
DEVICE = get_device("sm80")
SM90 = get_device("sm90")
# (device, plan, shape): best is the search's first renderable plan at the SMOKE shape; the
# others are built from the SMOKE tile sizes at the SMOKE shape (aligned: TMA and cp.async
# run) or the EDGE shape (sizes that are not multiples of anything: the element-wise paths)
VARIANTS = {
    "best": (DEVICE, None, "smoke"),
    "sequential": (DEVICE, Choice("sequential", 1, warps=4), "edge"),
    "multistage3": (DEVICE, Choice("multistage", 3, warps=4), "edge"),
    "interleaved": (DEVICE, Choice("interleaved", 1, warps=4), "edge"),
    "sm90-best": (SM90, None, "smoke"),
    "sm90-ws": (SM90, Choice("warp_specialized", 2, 1), "edge"),
    "sm90-ws-tma": (SM90, Choice("warp_specialized", 3, 1), "smoke"),
    "sm90-ws-2consumers": (SM90, Choice("warp_specialized", 2, 2), "smoke"),
    "sm90-pingpong": (SM90, Choice("warp_specialized", 2, 2, pingpong=True), "edge"),
    "sm90-overlap": (SM90, Choice("warp_specialized", 2, 1, overlap=True), "edge"),
    "sm90-pingpong-overlap": (SM90, Choice("warp_specialized", 2, 2, pingpong=True,
                                           overlap=True), "smoke"),
    # the plan the search builds at the benchmark shape (its tiles and style), at small
    # shapes: what `ptc compile --target sm90` emits, on the emulator
    "sm90-bench-plan": (SM90, "bench", "smoke"),
    "sm90-bench-plan-edge": (SM90, "bench", "edge"),
}
# two consumer warpgroups divide 128 rows
ROWS_128 = {"gemm": "BM", "matmul_sum": "BM", "flash_attn": "BM", "flash_attn_causal": "BM",
            "gemm_chain": "BM", "mamba2_chunk_state": "BP", "mamba2_chunk_scan": "BM",
            "w8a8_gemm": "BM", "w4a16_gemm": "BM", "fp8_gemm": "BM",
            "fp8_blockscaled_gemm": "BM", "fp8_flash_attn": "BM", "conv2d": "BQ",
            "conv2d_stride2": "BQ", "moe_gemm": "BM"}
# ... at shapes where both have rows to compute
SHAPES_128 = {"mamba2_chunk_state": dict(P=160), "mamba2_chunk_scan": dict(L=160)}
# a consumer warpgroup multiplies 64 rows (the SMOKE tiles of the mamba2 kernels have 32)
WS_TILES = {"mamba2_chunk_state": dict(BP=64), "mamba2_chunk_scan": dict(BM=64),
            "causal_conv1d": dict(BL=64), "conv2d_stride2": dict(BQ=64),
            "depthwise_conv2d": dict(BQ=64)}
# how the emulator schedules threads and copies: in thread order with cp.async copies
# deferred to their wait, in reverse with eager copies, and shuffled
CONFIGS = [dict(), dict(order="reverse", eager_cp_async=True), dict(order="random", seed=7)]
TOLERANCE = {"f16": 1e-2, "bf16": 1e-2, "f32": 1e-4}


class Case:
    """A sample rendered for one of `variants` (VARIANTS: the CUDA ones) with its inputs."""

    def __init__(self, name: str, variant: str, variants: dict = VARIANTS):
        self.name, self.variant = name, variant
        device, choice, shape = variants[variant]
        self.device = device
        tiles = dict(SMOKE[name][1])
        bench = choice == "bench"
        if bench:
            tiles, choice = bench_plan(name, device)
        if not bench and choice is not None and choice.style == "warp_specialized":
            tiles.update(WS_TILES.get(name, {}))
        if not bench and choice is not None and choice.consumers > 1:
            if name not in ROWS_128:
                self.skip = f"{name} has no 128-row tile for two consumer warpgroups"
                return
            tiles[ROWS_128[name]] = 128
        self.shapes = dict(SMOKE[name][0] if shape == "smoke" else EDGE[name])
        if choice is not None and choice.consumers > 1:
            self.shapes.update(SHAPES_128.get(name, {}))
        self.kernel = check_file(SAMPLES / f"{name}.pt", self.shapes).kernels[0]
        self.skip = None
        if choice is None:
            self.plan, self.source = best_renderable(self.kernel, self.shapes, device)
        else:
            (g,) = build_graphs(self.kernel)
            g = propagate(g, tiles)
            try:
                self.plan = construct(g, device, choice)
                self.source = render_kernel(self.kernel, self.plan, g, device)
            except Unfit as exc:
                self.skip = f"{choice.describe()} does not apply: {exc}"
                return
            except RenderError as exc:   # its staging leaves the device's shared memory
                if "bytes of shared memory" not in str(exc):
                    raise
                self.skip = f"{choice.describe()} does not apply: {exc}"
                return
        self.tiles = dict(self.plan.tiles)
        self.inputs = F.make_inputs(name, self.shapes, np.random.default_rng(1))
        self.dims = {d.name: self.shapes[d.name] for d in self.kernel.dims}


@lru_cache(maxsize=None)
def bench_plan(name: str, device) -> tuple[dict, Choice]:
    """(tiles, choice) of the plan built for `name` at its benchmark shape."""
    kernel = check_file(SAMPLES / f"{name}.pt").kernels[0]
    result = schedule(kernel, device.name)
    for cand in result.ranked:
        if can_render(cand.plan, device) is None:
            return dict(cand.tiles), cand.choice
    pytest.fail(f"no renderable {device.name} plan for {name}")


def best_renderable(kernel, shapes, device=DEVICE):
    result = schedule(kernel, device.name, shapes=shapes)
    for cand in result.ranked:
        if can_render(cand.plan, device) is None:
            try:
                return cand.plan, render_kernel(kernel, cand.plan, cand.graph, device)
            except RenderError:
                continue
    pytest.fail(f"no renderable {device.name} plan for {kernel.name}")


@lru_cache(maxsize=None)
def case(name: str, variant: str) -> Case:
    return Case(name, variant)


@lru_cache(maxsize=None)
def reference(name: str, variant: str) -> dict:
    c = case(name, variant)
    return run_kernel(c.kernel, c.inputs, shapes=c.shapes, tiles=c.tiles)


CASES = [(n, v) for n in sorted(SMOKE) for v in VARIANTS]
UNIT = 12     # cases whose kernels one worker builds together (conftest.in_groups)


def build_cases(case_of, keys) -> dict:
    """The kernels of the cases `keys` built for the CPU together, a unit per backend
    (cached on disk by content): per key the EmulatedKernel, the exception that stopped its
    case or build, or None where the case is skipped."""
    cases, out = {}, {}
    for key in keys:
        try:
            cases[key] = case_of(*key)
        except (Exception, pytest.fail.Exception) as exc:   # raised again by its own test
            out[key] = exc
    live = [k for k, c in cases.items() if not c.skip]
    out.update(zip(live, build_emulated_many([cases[k].source for k in live],
                                             backend=[cases[k].device.backend for k in live])))
    return {key: out.get(key) for key in keys}


def case_builds(request, test, case_of) -> Builds:
    """The builds of the cases of `test` that this session selected, a group at a time."""
    groups = selected_groups(request, test, lambda p: (p["name"], p["variant"]))
    return Builds(functools.partial(build_cases, case_of), groups, request)


@pytest.fixture(scope="module")
def builds(request):
    """The selected cases' kernels built for the CPU."""
    made = case_builds(request, test_the_emulated_kernel_matches_the_interpreter, case)
    yield made
    made.close()


def matches_the_interpreter(c: "Case", kernel, ref: dict, configs) -> None:
    """The built kernel of case `c` computes `ref` within tolerance in each of `configs`."""
    if c.skip:
        pytest.skip(c.skip)
    if isinstance(kernel, Exception):
        raise kernel
    for config in configs:
        got = kernel(c.kernel, c.inputs, c.dims, **config)
        errors = compare(c, got, ref)
        assert within_tolerance(c, errors), (c.name, c.variant, c.tiles, config, errors)


def compare(c: Case, got: dict, ref: dict) -> dict[str, float]:
    errors = {}
    for name, want in ref.items():
        assert got[name].dtype == want.dtype, name
        assert got[name].shape == want.shape, name
        errors[name] = F.rel_l2(got[name], want)
    return errors


def within_tolerance(c: Case, errors: dict[str, float]) -> bool:
    dtypes = {p.name: p.dtype for p in c.kernel.outputs}
    return all(e <= TOLERANCE[dtypes[n]] for n, e in errors.items())


@pytest.mark.parametrize("name, variant", in_groups(CASES, UNIT, "emulate"))
def test_the_emulated_kernel_matches_the_interpreter(builds, name, variant):
    c = case(name, variant)
    matches_the_interpreter(c, builds[(name, variant)], None if c.skip else
                            reference(name, variant), CONFIGS)


# ---- the emulation sees bugs ------------------------------------------------------------
def gemm_case() -> Case:
    return case("gemm", "best")   # the SMOKE shape: aligned, so the cp.async path runs


def run(c: Case, source: str, **config) -> dict[str, float]:
    return compare(c, build_emulated(source)(c.kernel, c.inputs, c.dims, **config),
                   reference(c.name, c.variant))


def mutate(source: str, pattern: str, replacement: str, count: int = 0) -> str:
    new, n = re.subn(pattern, replacement, source, count=count)
    assert n, f"the mutation {pattern!r} no longer applies to the rendered kernel"
    return new


def test_a_wrong_mma_fragment_layout_gives_wrong_numbers():
    c = gemm_case()
    assert within_tolerance(c, run(c, c.source))
    errors = run(c, c.source, break_layout=True)   # the emulated mma swaps a1 and a2
    assert all(e > 0.5 for e in errors.values()), errors


def test_a_wrong_ldmatrix_address_in_the_header_gives_wrong_numbers():
    """The ldmatrix header with the A tile's 8x8 matrices 1 and 2 swapped (a plausible
    slip), and with B read as if stored [N][K] (no .trans) instead of [K][N]."""
    c = gemm_case()
    name = "shared_to_register_ldmatrix.cuh"
    header = (CUDA_TEMPLATES / name).read_text()
    good = "ldmatrix<4, false>(a, t.at(m0 + (lane & 15), k0 + (lane >> 4) * 8, lane));"
    assert good in header
    bad = header.replace(good, "ldmatrix<4, false>(a, t.at(m0 + (lane & 7) + (lane >> 4) * 8, "
                               "k0 + ((lane >> 3) & 1) * 8, lane));")
    kernel = build_emulated(c.source, header_overrides={name: bad})
    errors = compare(c, kernel(c.kernel, c.inputs, c.dims), reference(c.name, c.variant))
    assert all(e > 0.5 for e in errors.values()), errors
    good_b = "ldmatrix<NB * 2, true>(b, t.at("
    assert good_b in header
    bad = header.replace(good_b, "ldmatrix<NB * 2, false>(b, t.at(")
    kernel = build_emulated(c.source, header_overrides={name: bad})
    errors = compare(c, kernel(c.kernel, c.inputs, c.dims), reference(c.name, c.variant))
    assert all(e > 0.5 for e in errors.values()), errors


def test_a_column_of_row_scales_is_copied_by_sm90s_producer_at_its_stride():
    """DeepSeek-V3's activation scales SA [M, K/128]: `load(SA[i, g])` is a column of
    stride K/128 that no TMA box takes, so the producer warpgroup copies it one cp.async per
    element and the plan stays warp-specialized (wgmma FP8). The copy at stride 1 (a
    plausible slip) reads the wrong scales."""
    c = case("fp8_blockscaled_gemm", "sm90-bench-plan")
    assert c.plan.style == "warp_specialized"
    assert "ptc::copy_tile_async_strided<float, 1, 128," in c.source
    name = "global_to_shared.cuh"
    header = (CUDA_TEMPLATES / name).read_text()
    good = "g + (r * row_stride + c * col_stride) : g;\n    cp_async<sizeof(T)>"
    assert good in header
    bad = header.replace(good, good.replace("c * col_stride", "c"))
    kernel = build_emulated(c.source, header_overrides={name: bad})
    errors = compare(c, kernel(c.kernel, c.inputs, c.dims), reference(c.name, c.variant))
    assert not within_tolerance(c, errors), errors


def test_a_missing_barrier_after_the_cp_async_wait_gives_wrong_numbers():
    c = gemm_case()
    bad = mutate(c.source, r"(ptc::cp_async_wait<\d+>\(\);[^\n]*\n)\s*__syncthreads\(\);[^\n]*\n",
                 r"\1")
    errors = run(c, bad)
    assert not within_tolerance(c, errors), errors


def test_waiting_for_too_few_cp_async_groups_gives_wrong_numbers():
    c = gemm_case()
    bad = mutate(c.source, r"cp_async_wait<(\d+)>",
                 lambda m: f"cp_async_wait<{int(m.group(1)) + 1}>")
    errors = run(c, bad)   # the copies are deferred to their wait: the tiles are stale
    assert not within_tolerance(c, errors), errors


def test_reading_past_a_tensor_is_reported():
    c = gemm_case()
    # the A tile loader told that A has 64 more rows than it has
    bad = mutate(c.source, r"\(long long\)\(d_M\)", "(long long)(d_M + 64)")
    with pytest.raises(EmulationError, match="outside every tensor|inside a tensor"):
        build_emulated(bad)(c.kernel, c.inputs, c.dims)


def test_a_tma_store_epilogue_that_does_not_wait_is_caught():
    c = case("gemm", "sm90-bench-plan")     # a TMA-store epilogue, aligned shapes
    assert "ptc::tma_store<" in c.source
    ref = reference(c.name, c.variant)
    # no wait for the bulk store to read shared memory: reported at the block's end
    bad = mutate(c.source, r"ptc::bulk_wait_group_read<0>\(\);", "")
    with pytest.raises(EmulationError, match="not waited for"):
        build_emulated(bad)(c.kernel, c.inputs, c.dims)
    # the staging tile rewritten (zeroed) after the store is issued, before its wait: the
    # store reads the new bytes
    src = re.search(r"ptc::tma_store<\d>\(&\w+, ([^,]+),", c.source).group(1)
    bad = mutate(c.source, r"(ptc::bulk_commit_group\(\);)",
                 r"\1 for (int z = 0; z < 1024; z += 4) ptc::st_shared<float>(" + src +
                 " + z, 0.0f);")
    got = build_emulated(bad)(c.kernel, c.inputs, c.dims)
    assert not within_tolerance(c, compare(c, got, ref))


def test_stmatrix_staging_with_a_wrong_row_or_register_gives_wrong_numbers():
    c = case("gemm", "sm90-bench-plan")
    assert "ptc::stmatrix_x4(" in c.source
    ref = reference(c.name, c.variant)
    assert within_tolerance(c, compare(c, build_emulated(c.source)(c.kernel, c.inputs, c.dims),
                                       ref))
    # rows 8-15 of each block given the addresses of rows 0-7: half the rows overwritten
    bad = mutate(c.source, r"ptc::stmatrix_row\(lane\)", "(lane & 7)")
    got = build_emulated(bad)(c.kernel, c.inputs, c.dims)
    assert not within_tolerance(c, compare(c, got, ref))
    # each block stored from the next block's registers
    bad = mutate(c.source, r"&t_C\[4 \* b\]", "&t_C[(4 * b + 4) % 32]")
    got = build_emulated(bad)(c.kernel, c.inputs, c.dims)
    assert not within_tolerance(c, compare(c, got, ref))


def test_a_rotated_loop_that_reads_a_wgmma_in_flight_is_caught():
    """Intra-warpgroup overlap: QK^T(n + 1) and PV(n) are in flight together; the softmax
    of n + 1 waits for the first (wait_group 1), its rescale of O for the second."""
    c = case("flash_attn", "sm90-overlap")
    assert c.skip is None, c.skip
    assert c.source.count("ptc::wgmma_wait<1>();") == 1
    ref = reference(c.name, c.variant)
    assert within_tolerance(c, compare(c, build_emulated(c.source)(c.kernel, c.inputs, c.dims),
                                       ref))
    # S read before QK^T(n + 1) completes: the accumulators of a wgmma in flight (which the
    # emulator fills with a marker until the wait) reach the softmax's shuffles
    bad = mutate(c.source, r"ptc::wgmma_wait<1>\(\);", "")
    with pytest.raises(EmulationError, match="in flight.*9.7.15.7.3"):
        build_emulated(bad)(c.kernel, c.inputs, c.dims)
    # O rescaled and P overwritten before PV(n) completes: the loop's wait 0 dropped
    head, tail = c.source.split("ptc::wgmma_wait<1>();", 1)
    assert "ptc::wgmma_wait<0>();" in tail
    bad = head + "ptc::wgmma_wait<1>();" + tail.replace("ptc::wgmma_wait<0>();", "", 1)
    with pytest.raises(EmulationError, match="in flight.*9.7.15.7.3"):
        build_emulated(bad)(c.kernel, c.inputs, c.dims)


def test_ping_pong_turns_that_do_not_balance_are_caught():
    c = case("flash_attn", "sm90-pingpong")
    assert c.skip is None, c.skip
    assert "ptc::named_barrier_arrive(3 + (part + 1) % 2, 256)" in c.source
    # warpgroup 0 never gets the first turn: both wait for each other
    bad = mutate(c.source, r"if \(part == 1\) ptc::named_barrier_arrive\(3 \+ \(part \+ 1\) % 2, "
                           r"256\);", "")
    with pytest.raises(EmulationError, match="deadlock"):
        build_emulated(bad)(c.kernel, c.inputs, c.dims)
    # the last hand-over is never taken: the barrier is left half counted
    bad = mutate(c.source, r"if \(part == 0\) ptc::named_barrier\(3 \+ part, 256\);", "")
    with pytest.raises(EmulationError, match="named barrier 3: the block ended"):
        build_emulated(bad)(c.kernel, c.inputs, c.dims)


def test_a_barrier_that_only_some_threads_reach_is_reported():
    c = gemm_case()
    bad = mutate(c.source, r"(long long block = blockIdx.x;\n)",
                 r"\1  if (threadIdx.x < 32) __syncthreads();\n", count=1)
    with pytest.raises(EmulationError, match="deadlock"):
        build_emulated(bad)(c.kernel, c.inputs, c.dims)


# ---- the emulated half-precision conversions are CUDA's (round to nearest even) ---------
CONVERSIONS = r"""
#include "cuda_bf16.h"
extern "C" void to_f16(const float* x, unsigned short* y, long n) {
  for (long i = 0; i < n; ++i) y[i] = __half_as_ushort(__float2half_rn(x[i]));
}
extern "C" void from_f16(const unsigned short* x, float* y, long n) {
  for (long i = 0; i < n; ++i) y[i] = __half2float(__ushort_as_half(x[i]));
}
extern "C" void to_bf16(const float* x, unsigned short* y, long n) {
  for (long i = 0; i < n; ++i) y[i] = __float2bfloat16_rn(x[i]).__x;
}
extern "C" void from_bf16(const unsigned short* x, float* y, long n) {
  for (long i = 0; i < n; ++i) { __nv_bfloat16 b; b.__x = x[i]; y[i] = __bfloat162float(b); }
}
"""


@pytest.fixture(scope="module")
def conversions(tmp_path_factory):
    d = tmp_path_factory.mktemp("conversions")
    (d / "conv.cpp").write_text(CONVERSIONS)
    subprocess.run([os.environ.get("CXX", "g++"), "-std=c++20", "-O1", "-fPIC", "-shared",
                    "-DPTC_EMULATE", *(f"-I{d}" for d in backend_of("cuda").include_dirs()),
                    str(d / "conv.cpp"), "-o", str(d / "conv.so")], check=True)
    lib = ctypes.CDLL(str(d / "conv.so"))

    def call(fn, x, out_dtype):
        x = np.ascontiguousarray(x)
        y = np.empty(x.shape, out_dtype)
        getattr(lib, fn)(x.ctypes.data_as(ctypes.c_void_p), y.ctypes.data_as(ctypes.c_void_p),
                         ctypes.c_long(x.size))
        return y
    return call


def float_samples() -> np.ndarray:
    rng = np.random.default_rng(0)
    every_half = np.arange(65536, dtype=np.uint16).view(np.float16).astype(np.float32)
    every_half = every_half[np.isfinite(every_half)]
    nexts = np.nextafter(every_half, np.float32(np.inf))
    prevs = np.nextafter(every_half, np.float32(-np.inf))
    f16 = every_half.astype(np.float64)
    mids = ((f16[:-1] + f16[1:]) / 2).astype(np.float32)      # exact ties of f16
    bits = rng.integers(0, 2**32, 400000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, 65504, 65519.99, 65520, 65536, 1e-8,
                        5.96e-8, 2.98e-8, 2.99e-8, 3.4e38, -3.4e38], np.float32)
    return np.concatenate([every_half, nexts, prevs, mids, bits, special]).astype(np.float32)


def test_half_conversions_round_to_nearest_even(conversions):
    x = float_samples()
    nan = np.isnan(x)
    got = conversions("to_f16", x, np.uint16)
    with np.errstate(all="ignore"):
        want = x.astype(np.float16).view(np.uint16)
    assert np.array_equal(got[~nan], want[~nan])
    assert np.all(np.isnan(got[nan].view(np.float16)))
    every = np.arange(65536, dtype=np.uint16)
    back = conversions("from_f16", every, np.float32)
    want = every.view(np.float16).astype(np.float32)
    assert np.array_equal(back, want, equal_nan=True)
    assert np.array_equal(back.view(np.uint32)[~np.isnan(back)], want.view(np.uint32)[~np.isnan(want)])


def test_bfloat16_conversions_round_to_nearest_even(conversions):
    x = float_samples()
    bf = ml_dtypes.bfloat16
    every_bf = np.arange(65536, dtype=np.uint16).view(bf).astype(np.float32)
    every_bf = every_bf[np.isfinite(every_bf)]
    mids = ((every_bf[:-1].astype(np.float64) + every_bf[1:]) / 2).astype(np.float32)
    x = np.concatenate([x, every_bf, mids[np.isfinite(mids)]])
    got = conversions("to_bf16", x, np.uint16)
    with np.errstate(all="ignore"):
        want = x.astype(bf).view(np.uint16)
    nan = np.isnan(x)
    assert np.array_equal(got[~nan], want[~nan])
    assert np.all(np.isnan(got[nan].view(bf).astype(np.float32)))
    every = np.arange(65536, dtype=np.uint16)
    back = conversions("from_bf16", every, np.float32)
    assert np.array_equal(back, every.view(bf).astype(np.float32), equal_nan=True)


# ---- renderer bugs the emulation found (regressions) ------------------------------------
REGRESSIONS = {
    # values stored to memory were not live until their store: t_Q and t_R were given the
    # bytes of x, and t_R overwrote t_Q before store(Q) ran
    "store_liveness": """
kernel store_liveness(X: i32[M, N], F: f16[M, N], s: i32) -> (Q: i32[M, N], R: i32[M, N], B: f32[M, N]) {
  dims M = 40, N = 96
  tile BM in [16], BN in [32]
  parallel i: BM of M, j: BN of N {
    x = load(X[i, j]) - 7
    store(Q[i, j], x // (s - 9))
    store(R[i, j], (x % 5) * index(j)[None, :] + index(i)[:, None])
    f = load(F[i, j])
    store(B[i, j], where((x > 2) & !(f < 0.0), abs(x) as f32 + sqrt(abs(f) as f32), exp2(f as f32)))
  }
}
""",
    # a value never read took the bytes of an operand still read later (x), clobbering it
    "dead_value": """
kernel dead_value(X: f16[M, N]) -> (Y: f32[M, N]) {
  dims M = 40, N = 64
  tile BM in [16]
  parallel i: BM of M {
    x = load(X[i, :]) as f32
    junk = x * 2.0
    y = x + 1.0
    store(Y[i, :], y + x)
  }
}
""",
}


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_renderer_regressions_match_the_interpreter(tmp_path, name):
    from ptc.interp import prepare
    from ptc.sema import typed as T
    path = tmp_path / f"{name}.pt"
    path.write_text(REGRESSIONS[name])
    kernel = check_file(path).kernels[0]
    shapes = {d.name: d.default for d in kernel.dims}
    plan, source = best_renderable(kernel, shapes)
    tiles = dict(plan.tiles)
    machine = prepare(kernel, {}, shapes=shapes, tiles=tiles, seed=3)
    inputs = {p.name: machine.arrays[p.name] if isinstance(p, T.TensorParam)
              else machine.scalars[p.name] for p in kernel.inputs}
    ref = run_kernel(kernel, inputs, shapes=shapes, tiles=tiles)
    got = build_emulated(source)(kernel, inputs, shapes)
    for out, want in ref.items():
        assert F.rel_l2(got[out], want) <= 1e-5, out


def test_a_kernel_with_two_grids_launches_both_in_order(tmp_path):
    """Column sums then row maxes: each grid gets its own plan and kernel, and ptc_launch
    runs both (it once took the first grid's plan and dropped the second)."""
    from ptc.driver import render, schedule_grids

    path = tmp_path / "two.pt"
    path.write_text("""
kernel two(X: f32[M, N]) -> (S: f32[N], R: f32[M]) {
  dims M = 1024, N = 1024
  tile BM in [64], BN in [64, 32]
  parallel j: BN of N {
    s = zeros(f32[BN])
    for i: BM of M {
      s += sum(load(X[i, j]), axis=0)
    }
    store(S[j], s)
  }
  parallel i: BM of M {
    m = full(f32[BM], -inf)
    for j: BN of N {
      m = max(m, rowmax(load(X[i, j])))
    }
    store(R[i], m)
  }
}
""")
    shapes = dict(M=130, N=200)
    kernel = check_file(path, shapes).kernels[0]
    results = schedule_grids(kernel, "sm80", shapes=shapes)
    assert len(results) == 2 and all(r.best for r in results)
    source, plans, _, _, _ = render(kernel, "sm80", shapes=shapes)
    assert len(plans) == 2 and source.count("__global__") == 2
    x = np.random.default_rng(2).standard_normal((130, 200)).astype(np.float32)
    got = build_emulated(source)(kernel, {"X": x}, shapes, order="random", seed=3)
    np.testing.assert_allclose(got["S"], x.sum(axis=0), rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(got["R"], x.max(axis=1))


@pytest.mark.parametrize("name, shapes, tiles", [
    ("flash_attn", {"B": 1, "H": 1, "S": 128, "T": 256, "D": 128}, {"BM": 64, "BN": 128}),
    ("flash_attn_causal", {"B": 1, "H": 1, "S": 128, "D": 128}, {"BM": 64, "BN": 64}),
    ("gemm", {"M": 128, "N": 256, "K": 128}, {"BM": 64, "BN": 128, "BK": 64}),
])
def test_swizzled_tiles_and_padded_scratch_have_no_bank_conflicts(name, shapes, tiles):
    """Counted by the emulator lane by lane with NVIDIA's bank rule: the XOR-swizzled
    operand tiles (ldmatrix, cp.async) and the padded conversion scratch conflict nowhere."""
    kernel = check_file(SAMPLES / f"{name}.pt", shapes).kernels[0]
    from ptc.driver import render
    source = render(kernel, "sm80", shapes=shapes, tiles=tiles)[0]
    inputs = F.make_inputs(name, shapes, np.random.default_rng(2))
    dims = {d.name: shapes.get(d.name, d.default) for d in kernel.dims}
    built = build_emulated(source)
    got = built(kernel, inputs, dims)
    want = run_kernel(kernel, inputs, shapes=shapes, tiles=tiles)
    assert all(F.rel_l2(got[n], want[n]) < 1e-2 for n in want)
    assert built.last_run.bank_conflicts["total"] == 0, built.last_run.bank_conflicts


def test_loads_prefetched_at_different_distances_compute_the_same():
    """A verified plan whose loads run 3 and 1 iterations ahead in a 4-slot ring: the
    lowering fills each load's own distance ahead and waits for each by its own count
    (7 k-iterations, the last tiles ragged)."""
    from dataclasses import replace
    from ptc.sched.plan import LoopBlock
    from ptc.sched.verify import problems

    shapes = dict(M=70, N=72, K=200)
    tiles = SMOKE["gemm"][1]
    kernel = check_file(SAMPLES / "gemm.pt", shapes).kernels[0]
    (g,) = build_graphs(kernel)
    g = propagate(g, tiles)
    plan = construct(g, DEVICE, Choice("multistage", 4, warps=4))

    def offsets(items):
        return tuple(replace(i, body=offsets(i.body)) if isinstance(i, LoopBlock) else
                     replace(i, offset={"load_A": 3, "load_B": 1}.get(i.task, i.offset))
                     for i in items)
    role = plan.roles[0]
    uneven = replace(plan, roles=(replace(role, body=offsets(role.body)),))
    assert problems(uneven, g, DEVICE) == []
    source = render_kernel(kernel, uneven, g, DEVICE)
    assert "// load_A: A[64x32] -> A_smem, 3 iteration(s) ahead" in source
    assert "// load_B: B[32x64] -> B_smem, 1 iteration(s) ahead" in source
    inputs = F.make_inputs("gemm", shapes, np.random.default_rng(3))
    ref = run_kernel(kernel, inputs, shapes=shapes, tiles=tiles)
    dims = {d.name: shapes[d.name] for d in kernel.dims}
    emulated = build_emulated(source)
    for config in CONFIGS:
        got = emulated(kernel, inputs, dims, **config)
        assert F.rel_l2(got["C"], ref["C"]) <= TOLERANCE["f16"], config


def test_tiles_no_matrix_instruction_takes_run_on_cuda_cores_and_compute_the_same(tmp_path):
    """100 x 60 x 20 tiles: the plan puts the matmul on CUDA cores; the padded register
    layout (104 x 64) masks what lies past the tile, at ragged edges too."""
    path = tmp_path / "odd.pt"
    path.write_text((SAMPLES / "gemm.pt").read_text().split("kernel")[0] + """
kernel odd(A: f16[M, K], B: f16[K, N]) -> (C: f16[M, N]) {
  tile BM = 100, BN = 60, BK = 20
  parallel i: BM of M, j: BN of N {
    acc = zeros(f32[BM, BN])
    for k: BK of K {
      acc += load(A[i, k]) @ load(B[k, j])
    }
    store(C[i, j], acc as f16)
  }
}
""")
    shapes = dict(M=230, N=130, K=50)
    kernel = check_file(path, shapes).kernels[0]
    plan, source = best_renderable(kernel, shapes)
    units = {s.task: s.unit for _, s in plan.steps()}
    assert units["mma_acc"] == "cuda_core"
    inputs = F.make_inputs("gemm", shapes, np.random.default_rng(5))
    ref = run_kernel(kernel, inputs, shapes=shapes, tiles=dict(plan.tiles))
    dims = {d.name: shapes[d.name] for d in kernel.dims}
    emulated = build_emulated(source)
    for config in CONFIGS:
        got = emulated(kernel, inputs, dims, **config)
        assert F.rel_l2(got["C"], ref["C"]) <= TOLERANCE["f16"], config


TF32_GEMM = """
kernel g(A: f32[M, K], B: f32[K, N]) -> (C: f32[M, N]) {
  tile BM in [64], BN in [64], BK in [32]
  parallel i: BM of M, j: BN of N {
    acc = zeros(f32[BM, BN])
    for k: BK of K {
      acc += (load(A[i, k]) as tf32) @ (load(B[k, j]) as tf32)
    }
    store(C[i, j], acc)
  }
}
"""


def test_tf32_on_tensor_cores_is_the_product_of_the_rounded_operands(tmp_path):
    """`as tf32` opts into mma.sync m16n8k8.tf32: the emulated kernel (which reads only the
    TF32 bits of its operands) matches NumPy on operands rounded to 10 mantissa bits, far
    closer than to the f32 product; a wrong A fragment layout is seen."""
    from ptc.interp import to_tf32

    path = tmp_path / "g.pt"
    path.write_text(TF32_GEMM)
    shapes = dict(M=70, N=72, K=100)
    kernel = check_file(path, shapes).kernels[0]
    plan, source = best_renderable(kernel, shapes)
    assert {s.unit for _, s in plan.steps() if s.task == "mma_acc"} == {"tensor_core"}
    assert "ptc::Mma1688Tf32" in source
    rng = np.random.default_rng(4)
    a = rng.standard_normal((70, 100)).astype(np.float32)
    b = rng.standard_normal((100, 72)).astype(np.float32)
    want = to_tf32(a).astype(np.float64) @ to_tf32(b).astype(np.float64)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    dims = {d.name: shapes[d.name] for d in kernel.dims}
    emulated = build_emulated(source)
    for config in CONFIGS:
        got = emulated(kernel, {"A": a, "B": b}, dims, **config)["C"]
        assert np.abs(got - want).max() < 1e-4, config
    assert np.abs(want - exact).max() > 1e-3          # the rounding is visible
    ref = run_kernel(kernel, {"A": a, "B": b}, shapes=shapes, tiles=dict(plan.tiles))
    assert np.abs(ref["C"] - want).max() < 1e-4
    broken = emulated(kernel, {"A": a, "B": b}, dims, break_layout=True)["C"]
    assert np.abs(broken - want).max() > 1.0


def test_to_tf32_rounds_to_nearest_ties_away():
    from ptc.interp import to_tf32

    one = np.float32(1.0)
    ulp = np.float32(2.0 ** -10)
    x = np.array([one + ulp / 2, one + ulp / 2 - np.float32(2 ** -23), -(one + ulp / 2),
                  np.inf, -np.inf, 3.0], np.float32)
    got = to_tf32(x)
    np.testing.assert_array_equal(got[:3], [one + ulp, one, -(one + ulp)])
    assert np.isinf(got[3]) and np.isinf(got[4]) and got[5] == 3.0
    assert np.isnan(to_tf32(np.array([np.nan], np.float32)))[0]


def test_two_consumer_warpgroups_convert_through_their_own_scratch(tmp_path):
    """A layout conversion in the consumers of a warp-specialized plan (the row maxima of
    a loaded tile added to the product): each consumer warpgroup has its copy of the
    scratch, and the spill, the fill and the cross-warp partials address it; they used the
    first copy, so the two warpgroups overwrote each other's rows (issue 20)."""
    path = tmp_path / "rowbias.pt"
    path.write_text("""
kernel gemm_rowbias(A: f16[M, K], B: f16[K, N], R: f32[M, N]) -> (C: f32[M, N]) {
  tile BM = 128, BN = 128, BK = 64
  parallel i: BM of M, j: BN of N {
    acc = zeros(f32[BM, BN])
    for k: BK of K {
      acc += load(A[i, k]) @ load(B[k, j])
    }
    m = rowmax(load(R[i, j]))
    store(C[i, j], acc + m[:, None])
  }
}
""")
    shapes = dict(M=256, N=128, K=64)
    kernel = check_file(path, shapes).kernels[0]
    (g,) = build_graphs(kernel)
    g = propagate(g, dict(BM=128, BN=128, BK=64))
    plan = construct(g, SM90, Choice("warp_specialized", 2, 2))
    source = render_kernel(kernel, plan, g, SM90)
    assert "spill m" in source
    rng = np.random.default_rng(5)
    inputs = {"A": rng.standard_normal((256, 64)).astype(np.float16),
              "B": rng.standard_normal((64, 128)).astype(np.float16),
              "R": rng.standard_normal((256, 128)).astype(np.float32)}
    want = run_kernel(kernel, inputs, shapes=shapes, tiles=dict(plan.tiles))["C"]
    emulated = build_emulated(source, backend=SM90)
    for config in CONFIGS:
        got = emulated(kernel, inputs, shapes, **config)["C"]
        assert np.abs(got - want).max() < 1e-2, config
