"""The CPU emulation runtime (ptc/targets/cuda/templates/emulate, ptc.render.emulate) on small
hand-written CUDA kernels: warp shuffles and votes, __syncwarp, the math intrinsics,
cp.async of 4, 8 and 16 bytes, and the shared-memory bank-conflict counts; and
`ptc run --emulate` against the reference interpreter.

The kernels are strings compiled by build_emulated, each with the kernel ABI
(`ptc_kernel_name`, `ptc_launch`), and run with EmulatedKernel.launch on NumPy arrays.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import formulas as F
from ptc.render.emulate import EmulationError, build_emulated
from test_cli import GEMM, GEMM_SHAPE, ptc

pytestmark = pytest.mark.cxx

FULL = "0xffffffffu"


def source(body: str, params: str = "float* x, float* y", args: str = "(float*)t[0], (float*)t[1]",
           *, threads: int = 32, blocks: int = 1, smem: int = 0, prelude: str = "") -> str:
    """A kernel.cu with one kernel `k(params)` whose body is `body`, launched on `blocks`
    blocks of `threads` threads with `smem` bytes of shared memory."""
    return f"""
#include <cuda_runtime.h>
#include "shared_access.cuh"
{prelude}
extern "C" __global__ void k({params}) {{
  extern __shared__ __align__(128) unsigned char ptc_smem[];
  const int tid = threadIdx.x, lane = tid % 32;
  (void)lane;
{body}
}}
{kernel_abi(args, blocks=blocks, threads=threads, smem=smem)}"""


def kernel_abi(args: str, *, blocks: int, threads: int, smem: int) -> str:
    """The kernel ABI of a hand-written kernel `k`: its name, and ptc_launch running it on
    the emulator with `args` (built from the tensor pointers t)."""
    return f"""extern "C" const char* ptc_kernel_name(void) {{ return "k"; }}
extern "C" int ptc_launch(void* const* t, const double* s, const long long* d, void* stream) {{
  (void)s; (void)d; (void)stream;
  return ptc::emu::launch({blocks}, {threads}, {smem}, [&] {{ k({args}); }});
}}
"""


def run(src: str, *arrays: np.ndarray, **config):
    kernel = build_emulated(src)
    kernel.launch(list(arrays), **config)
    return kernel


ORDERS = [dict(), dict(order="reverse"), dict(order="random", seed=3)]
LANES = np.arange(32)


# ---- shuffles -----------------------------------------------------------------------------
@pytest.mark.parametrize("config", ORDERS)
@pytest.mark.parametrize("ctype, dtype", [("float", np.float32), ("int", np.int32),
                                          ("unsigned", np.uint32)])
def test_a_xor_butterfly_sums_the_warp_on_every_lane(ctype, dtype, config):
    src = source(f"""
  {ctype} v = x[tid];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync({FULL}, v, offset);
  y[tid] = v;""", f"{ctype}* x, {ctype}* y", f"({ctype}*)t[0], ({ctype}*)t[1]", threads=64)
    x = (np.arange(64) * 3 + 1).astype(dtype)
    y = np.zeros(64, dtype)
    run(src, x, y, **config)
    want = np.repeat([x[:32].sum(), x[32:].sum()], 32).astype(dtype)
    assert np.array_equal(y, want)


def test_a_wrong_shuffle_pattern_gives_wrong_numbers():
    x = np.arange(32, dtype=np.float32) + 1
    # the butterfly without its last step: lanes hold sums of pairs' halves, not the total
    y = np.zeros(32, np.float32)
    run(source(f"""
  float v = x[tid];
  for (int offset = 16; offset > 1; offset /= 2) v += __shfl_xor_sync({FULL}, v, offset);
  y[tid] = v;"""), x, y)
    assert not np.any(y == x.sum())
    # a shfl.down reduction has the total on lane 0 only
    y = np.zeros(32, np.float32)
    run(source(f"""
  float v = x[tid];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync({FULL}, v, offset);
  y[tid] = v;"""), x, y)
    assert y[0] == x.sum() and not np.any(y[1:] == x.sum())


def test_shfl_broadcasts_a_lane_and_wraps_the_source_lane_in_its_width_segment():
    src = source(f"""
  const float v = x[tid];
  y[tid] = __shfl_sync({FULL}, v, 5);
  y[32 + tid] = __shfl_sync({FULL}, v, 3, 8);      // lane 3 of each group of 8
  y[64 + tid] = __shfl_sync({FULL}, v, 13, 8);     // 13 mod 8 = 5
  y[96 + tid] = __shfl_sync({FULL}, v, -1, 16);    // the last lane of each half""")
    x = np.arange(32, dtype=np.float32) * 2 + 1
    y = np.zeros(128, np.float32)
    run(src, x, y)
    assert np.array_equal(y[:32], np.full(32, x[5]))
    assert np.array_equal(y[32:64], x[(LANES // 8) * 8 + 3])
    assert np.array_equal(y[64:96], x[(LANES // 8) * 8 + 5])
    assert np.array_equal(y[96:], x[(LANES // 16) * 16 + 15])


def cuda_source_lane(mode: str, lane: int, b: int, width: int) -> int:
    """The CUDA programming guide's shuffle semantics, lane by lane."""
    start = lane // width * width
    if mode == "up":
        return lane - b if lane - start >= b else lane
    if mode == "down":
        return lane + b if lane - start + b < width else lane
    if mode == "xor":   # later segments are out of reach, earlier ones are not
        j = lane ^ b
        return j if j < start + width else lane
    return start + b % width


@pytest.mark.parametrize("width", [32, 16, 8, 4, 2, 1])
def test_shuffles_follow_cudas_width_semantics(width):
    modes = {"up": "__shfl_up_sync", "down": "__shfl_down_sync", "xor": "__shfl_xor_sync",
             "idx": "__shfl_sync"}
    offsets = [0, 1, 3, 5, 16, 31]
    lines = []
    for m, (mode, fn) in enumerate(modes.items()):
        for o, b in enumerate(offsets):
            lines.append(f"  y[{(m * len(offsets) + o) * 32} + tid] = "
                         f"{fn}({FULL}, tid * 10, {b}, {width});")
    y = np.full(len(modes) * len(offsets) * 32, -1, np.int32)
    run(source("\n".join(lines), "int* x, int* y", "(int*)t[0], (int*)t[1]"),
        np.zeros(1, np.int32), y)
    for m, mode in enumerate(modes):
        for o, b in enumerate(offsets):
            got = y[(m * len(offsets) + o) * 32:][:32]
            want = [10 * cuda_source_lane(mode, lane, b, width) for lane in range(32)]
            assert list(got) == want, (mode, b, width)


def test_shuffles_take_any_type_of_up_to_8_bytes():
    src = source(f"""
  struct Pair {{ short a, b; }};
  const Pair p{{(short)tid, (short)(100 + tid)}};
  const Pair q = __shfl_xor_sync({FULL}, p, 1);
  const double d = __shfl_down_sync({FULL}, (double)tid + 0.5, 2);
  const __half h = __shfl_up_sync({FULL}, __float2half_rn((float)tid), 1);
  y[tid] = q.a; y[32 + tid] = q.b; y[64 + tid] = (float)d; y[96 + tid] = __half2float(h);""")
    y = np.zeros(128, np.float32)
    run(src, np.zeros(1, np.float32), y)
    assert np.array_equal(y[:32], LANES ^ 1)
    assert np.array_equal(y[32:64], 100 + (LANES ^ 1))
    assert np.array_equal(y[64:96], np.where(LANES < 30, LANES + 2, LANES) + 0.5)
    assert np.array_equal(y[96:], np.where(LANES >= 1, LANES - 1, LANES))


def test_a_partial_mask_is_reported():
    x, y = np.zeros(32, np.float32), np.zeros(32, np.float32)
    with pytest.raises(EmulationError, match=r"__shfl_xor_sync with mask 0x0000ffff"):
        run(source("y[tid] = __shfl_xor_sync(0x0000ffffu, x[tid], 1);"), x, y)
    with pytest.raises(EmulationError, match=r"__shfl_sync with mask 0x0000ffff"):
        run(source("if (lane < 16) y[tid] = __shfl_sync(0x0000ffffu, x[tid], 0);"), x, y)


def test_a_shuffle_that_part_of_the_warp_skips_is_a_deadlock():
    x, y = np.zeros(32, np.float32), np.zeros(32, np.float32)
    with pytest.raises(EmulationError, match=r"deadlock.*at a warp-collective instruction: "
                                             r"__shfl_down_sync"):
        run(source(f"if (lane < 16) y[tid] = __shfl_down_sync({FULL}, x[tid], 1);"), x, y)


def test_a_bad_width_is_reported():
    x, y = np.zeros(32, np.float32), np.zeros(32, np.float32)
    with pytest.raises(EmulationError, match=r"width 12: the width must be a power of 2"):
        run(source(f"y[tid] = __shfl_sync({FULL}, x[tid], 0, 12);"), x, y)


def test_votes():
    src = source(f"""
  const unsigned b = __ballot_sync({FULL}, x[tid] > 0.0f);
  y[tid] = (float)__popc(b);
  y[32 + tid] = (float)__all_sync({FULL}, x[tid] > -1.0f);
  y[64 + tid] = (float)__any_sync({FULL}, x[tid] > 100.0f);
  y[96 + tid] = (float)((b >> lane) & 1u);""")
    x = np.where(LANES % 3 == 0, 1.0, -0.5).astype(np.float32)
    y = np.zeros(128, np.float32)
    run(src, x, y)
    assert np.all(y[:32] == np.sum(x > 0))
    assert np.all(y[32:64] == 1) and np.all(y[64:96] == 0)
    assert np.array_equal(y[96:], (x > 0).astype(np.float32))


@pytest.mark.parametrize("sync", [True, False])
def test_syncwarp_orders_shared_memory_within_a_warp(sync):
    src = source(f"""
  float* s = reinterpret_cast<float*>(ptc_smem);
  s[tid] = x[tid];
  {"__syncwarp();" if sync else ""}
  y[tid] = s[(lane + 1) % 32 + tid / 32 * 32];""", threads=64, smem=256)
    x = np.arange(64, dtype=np.float32)
    y = np.zeros(64, np.float32)
    run(src, x, y)
    want = np.concatenate([x[:32][(LANES + 1) % 32], x[32:][(LANES + 1) % 32]])
    assert np.array_equal(y, want) == sync


def test_math_intrinsics():
    src = source("""
  const float v = x[tid];
  y[tid] = __expf(v); y[32 + tid] = exp2f(v); y[64 + tid] = __fdividef(v, 3.0f);
  y[96 + tid] = __saturatef(v); y[128 + tid] = rsqrtf(fabsf(v) + 1.0f);
  y[160 + tid] = __int_as_float(__float_as_int(v)); y[192 + tid] = __logf(fabsf(v) + 1.0f);
  y[224 + tid] = __fmaf_rn(v, 2.0f, 1.0f);""")
    x = np.linspace(-2, 2, 32).astype(np.float32)
    x[0] = np.nan
    y = np.zeros(256, np.float32)
    run(src, x, y)
    f = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(y[:32][1:], np.exp(f)[1:], rtol=1e-6)
        np.testing.assert_allclose(y[32:64][1:], np.exp2(f)[1:], rtol=1e-6)
        np.testing.assert_allclose(y[64:96][1:], (f / 3)[1:], rtol=1e-6)
        assert y[96] == 0.0     # __saturatef(NaN) is 0
        np.testing.assert_array_equal(y[97:128], np.clip(x[1:], 0, 1))
        np.testing.assert_allclose(y[128:160][1:], (1 / np.sqrt(np.abs(f) + 1))[1:], rtol=1e-6)
        assert np.isnan(y[160]) and np.array_equal(y[161:192], x[1:])
        np.testing.assert_allclose(y[192:224][1:], np.log(np.abs(f) + 1)[1:], rtol=1e-6)
        np.testing.assert_allclose(y[224:][1:], (2 * f + 1)[1:], rtol=1e-6)


# ---- cp.async -----------------------------------------------------------------------------
CP_ASYNC = """
  constexpr int N = {bytes} / 4;                 // floats per copy
  float* s = reinterpret_cast<float*>(ptc_smem);
  ptc::emu::cp_async<{bytes}>(s + tid * N, x + tid * N, tid % 3 != 0);
  ptc::emu::cp_async_commit();
  for (int i = 0; i < N; ++i) y[tid * N + i] = s[tid * N + i];            // before the wait
  ptc::emu::cp_async_wait(0);
  __syncthreads();
  for (int i = 0; i < N; ++i) y[64 * N + tid * N + i] = s[(63 - tid) * N + i];  // after
"""


@pytest.mark.parametrize("eager", [False, True])
@pytest.mark.parametrize("nbytes", [4, 8, 16])
def test_cp_async_copies_4_8_or_16_bytes_and_zero_fills_invalid_sources(nbytes, eager):
    n = nbytes // 4
    x = np.arange(64 * n, dtype=np.float32) + 1
    y = np.zeros(2 * 64 * n, np.float32)
    run(source(CP_ASYNC.format(bytes=nbytes), threads=64, smem=64 * nbytes), x, y,
        eager_cp_async=eager)
    valid = np.repeat(np.arange(64) % 3 != 0, n)
    want = np.where(valid, x, 0)
    before, after = y[:64 * n], y[64 * n:]
    assert np.array_equal(after, want.reshape(64, n)[::-1].ravel())
    if eager:   # copied when issued
        assert np.array_equal(before, want)
    else:       # deferred to the wait: the shared memory still holds its fill (NaN)
        assert np.all(np.isnan(before))


@pytest.mark.parametrize("call, needle", [
    ("ptc::emu::cp_async<8>(ptc_smem + 4, x, true);",
     r"destination .* \(shared offset 4\) is not 8 bytes inside shared memory of 64 bytes, "
     r"8-byte aligned"),
    ("ptc::emu::cp_async<16>(ptc_smem + 16, x + 1, true);",
     r"source .* is misaligned or not 16 bytes inside a tensor"),
    ("ptc::emu::cp_async<4>(ptc_smem + 64, x, true);", r"not 4 bytes inside shared memory"),
    ("ptc::emu::cp_async<16>(ptc_smem, x + 8, true);", r"not 16 bytes inside a tensor"),
])
def test_cp_async_checks_its_addresses(call, needle):
    x, y = np.zeros(8, np.float32), np.zeros(1, np.float32)
    with pytest.raises(EmulationError, match=needle):
        run(source(f"if (tid == 0) {{ {call} }}", smem=64), x, y)


def test_an_invalid_cp_async_source_is_not_read():
    """src-size 0: the source address may lie anywhere."""
    x, y = np.zeros(4, np.float32), np.zeros(4, np.float32)
    run(source("""
  if (tid == 0) ptc::emu::cp_async<16>(ptc_smem, x + 1000, false);
  ptc::emu::cp_async_commit();
  ptc::emu::cp_async_wait(0);
  if (tid == 0) for (int i = 0; i < 4; ++i) y[i] = reinterpret_cast<float*>(ptc_smem)[i] + 7;
""", smem=16), x, y)
    assert np.array_equal(y, np.full(4, 7, np.float32))


# ---- shared-memory bank conflicts -----------------------------------------------------------
def conflicts(body: str, *, threads: int = 32, blocks: int = 1, smem: int = 8192, **config):
    """The last_run of a kernel whose body reads and writes shared memory `s` (floats, all
    zero) and adds what it reads to `acc`, stored to y[tid]."""
    src = source(f"""
  float* s = reinterpret_cast<float*>(ptc_smem);
  for (int i = tid; i < {smem // 4}; i += {threads}) s[i] = 0.0f;
  __syncthreads();
  float acc = 0.0f;
{body}
  y[blockIdx.x * {threads} + tid] = acc;""", threads=threads, blocks=blocks, smem=smem)
    kernel = run(src, np.zeros(64, np.float32), np.ones(threads * blocks, np.float32), **config)
    return kernel.last_run


def kinds(last_run) -> dict[str, int]:
    return {k: v for k, v in last_run.bank_conflicts.items() if v}


@pytest.mark.parametrize("body, expected", [
    ("acc += ptc::lds(s + lane);", 0),                                 # 32 consecutive words
    ("acc += ptc::lds(s + 31 - lane);", 0),
    ("acc += ptc::lds(s + lane * 32);", 31),                          # one bank, 32 words
    ("acc += ptc::lds(s + lane * 2);", 1),                            # 2-way
    ("acc += ptc::lds(s + (lane % 4) * 32);", 3),                     # 4 words, 8 lanes each
    ("acc += ptc::lds(s + 7);", 0),                                    # broadcast
    ("acc += ptc::lds(s + lane / 2);", 0),                             # pairs share a word
    ("acc += ptc::lds(reinterpret_cast<const float2*>(s) + lane).x;", 0),     # 8 B, 2 phases
    ("acc += ptc::lds(reinterpret_cast<const float2*>(s) + 2 * lane).x;", 2),
    ("acc += ptc::lds(reinterpret_cast<const float4*>(s) + lane).x;", 0),     # 16 B, 4 phases
    ("acc += ptc::lds(reinterpret_cast<const float4*>(s) + 2 * lane).x;", 4),
    ("acc += ptc::lds(reinterpret_cast<const float4*>(s) + (lane ^ 1)).y;", 0),
    ("acc += ptc::lds(reinterpret_cast<const __half*>(s) + lane);", 0),      # 2 B
    ("acc += ptc::lds(reinterpret_cast<const __half*>(s) + 64 * lane);", 31),
    ("if (lane < 16) acc += ptc::lds(s + lane * 32);", 15),            # idle lanes take no part
    ("if (lane % 2) acc += ptc::lds(s + lane * 32);", 15),
])
def test_lds_bank_conflicts(body, expected):
    last = conflicts(body)
    assert last.bank_conflicts["lds"] == expected
    assert last.bank_conflicts["total"] == expected
    (site,) = last.sites
    assert (site.kind, site.file, site.instructions, site.conflicts) == ("lds", "kernel.cu", 1,
                                                                         expected)
    assert site.wavefronts == expected + {4: 1, 8: 2, 16: 4}.get(
        16 if "float4" in body else 8 if "float2" in body else 4)


def test_sts_bank_conflicts_are_counted_apart_from_lds():
    last = conflicts("""
  ptc::sts(s + lane * 32, 1.0f);
  ptc::sts(s + 1024 + lane, 2.0f);
  __syncwarp();
  acc += ptc::lds(s + lane * 2);""")
    assert kinds(last) == {"sts": 31, "lds": 1, "total": 32}
    assert [(x.kind, x.conflicts) for x in last.sites] == [("sts", 31), ("sts", 0), ("lds", 1)]
    assert last.sites[0].line + 1 == last.sites[1].line


def test_counts_add_up_over_warps_blocks_and_loop_iterations_and_restart_per_launch():
    body = """
  for (int i = 0; i < 3; ++i) acc += ptc::lds(s + lane * 32 + i);
  ptc::sts(s + lane, acc);"""
    for _ in range(2):
        last = conflicts(body, threads=128, blocks=3)
        assert kinds(last) == {"lds": 3 * 4 * 3 * 31, "total": 3 * 4 * 3 * 31}
        assert [x.instructions for x in last.sites] == [36, 12]


def test_lanes_that_take_a_loop_more_often_match_up_by_their_kth_execution():
    # lanes < 16 run the loop twice, the others once: the second instruction has 16 lanes
    last = conflicts("""
  for (int i = 0; i < (lane < 16 ? 2 : 1); ++i) acc += ptc::lds(s + lane * 32 + i);""")
    (site,) = last.sites
    assert (site.instructions, site.conflicts) == (2, 31 + 15)


@pytest.mark.parametrize("config", ORDERS)
def test_divergent_lanes_match_up_again_after_the_warp_converges(config):
    """Lanes 0..15 execute the site once more before a __syncwarp; after it the counts
    restart, so the next loop's instructions have all 32 lanes again."""
    last = conflicts("""
  if (lane < 16) acc += ptc::lds(s + lane);
  __syncwarp();
  for (int i = 0; i < 2; ++i) acc += ptc::lds(s + lane * 32);""", **config)
    assert [(x.instructions, x.conflicts) for x in last.sites] == [(1, 0), (2, 62)]


def test_shared_accesses_are_checked():
    with pytest.raises(EmulationError, match=r"lds of 4 bytes .* \(shared offset 8192\) is not "
                                             r"inside shared memory of 8192 bytes"):
        conflicts("acc += ptc::lds(s + 2048 + lane);")
    with pytest.raises(EmulationError, match=r"sts of 8 bytes .* \(shared offset 4\) .* 8-byte "
                                             r"aligned"):
        conflicts("ptc::sts(reinterpret_cast<double*>(ptc_smem + 4), 1.0);")


LDMATRIX = """
  // a 16 x 64 f16 tile, rows of 128 bytes; lane L gives row L % 16, 16-byte chunk L / 16
  const int row = lane % 16, offset = row * 128 + (lane / 16) * 16;
  const int swizzled = offset ^ (((offset >> 7) & 7) << 4);
  unsigned r[4];
  ptc::emu::ldmatrix<{num}, false>(r, ptc_smem + ({swizzle} ? swizzled : offset));
  acc += (float)(r[0] & 1u);"""


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("swizzle", [False, True])
def test_ldmatrix_bank_conflicts(num, swizzle):
    last = conflicts(LDMATRIX.format(num=num, swizzle=int(swizzle)), threads=64)
    # unswizzled, the 8 rows of a matrix start in the same bank: 8 wavefronts, 7 conflicts
    want = 0 if swizzle else 7 * num * 2      # per matrix, in each of 2 warps
    assert kinds(last) == ({"ldmatrix": want, "total": want} if want else {})
    (site,) = last.sites
    assert (site.kind, site.instructions, site.wavefronts) == ("ldmatrix", 2, 2 * num + want)


@pytest.mark.parametrize("stride, want", [(16, 0), (32, 4), (128, 28)])
def test_cp_async_destination_bank_conflicts(stride, want):
    """Lane L copies 16 bytes to L * stride: 8 consecutive 16-byte chunks per phase are
    conflict-free."""
    last = conflicts(f"""
  ptc::emu::cp_async<16>(ptc_smem + lane * {stride}, x, false);   // zero fill: writes too
  ptc::emu::cp_async_commit();
  ptc::emu::cp_async_wait(0);""")
    assert kinds(last) == ({"cp.async": want, "total": want} if want else {})
    (site,) = last.sites
    assert (site.kind, site.instructions, site.wavefronts) == ("cp.async", 1, 4 + want)


@pytest.mark.parametrize("nbytes, want", [(4, 0), (8, 0), (4, 31), (8, 2 * 15)])
def test_cp_async_4_and_8_byte_destinations(nbytes, want):
    stride = nbytes if want == 0 else 128
    last = conflicts(f"""
  ptc::emu::cp_async<{nbytes}>(ptc_smem + lane * {stride}, x, lane == 0);""")
    assert last.bank_conflicts["cp.async"] == want


# ---- ptc run --emulate --------------------------------------------------------------------
BANK_LINE = re.compile(r"emulated (\w+): (\d+) shared-memory bank conflicts \(ldmatrix (\d+), "
                       r"cp\.async (\d+), lds (\d+), sts (\d+)\)")


def bank_line(stderr: str, target: str = "sm80") -> list[int]:
    (line,) = [x for x in stderr.splitlines() if x.startswith("emulated ")]
    m = BANK_LINE.fullmatch(line)
    assert m and m.group(1) == target, line
    total, *per_kind = map(int, m.groups()[1:])
    assert total == sum(per_kind)
    return per_kind


def saved(path) -> dict:
    with np.load(path) as z:
        return {name: z[name] for name in z.files}


@pytest.mark.parametrize("seed, extra", [(0, []), (3, ["--order", "random", "--eager"])])
def test_ptc_run_emulate_matches_the_interpreter(tmp_path, seed, extra):
    args = ["run", GEMM, *GEMM_SHAPE, "--seed", seed]
    ptc(*args, "-o", tmp_path / "ref.npz")
    result = ptc(*args, "--target", "sm80", "--emulate", *extra, "-o", tmp_path / "emu.npz")
    assert f"gemm: wrote C to {tmp_path / 'emu.npz'} in " in result.stdout
    bank_line(result.stderr)
    ref, got = saved(tmp_path / "ref.npz"), saved(tmp_path / "emu.npz")
    assert list(got) == ["C"] and got["C"].dtype == np.float16 and got["C"].shape == (200, 136)
    assert F.rel_l2(got["C"], ref["C"]) <= 1e-2


def test_ptc_run_emulate_takes_inputs_and_their_shapes_and_prints_the_table(tmp_path):
    rng = np.random.default_rng(4)
    a = rng.standard_normal((70, 40)).astype(np.float16)
    b = rng.standard_normal((40, 50)).astype(np.float16)
    np.savez(tmp_path / "in.npz", A=a, B=b)
    result = ptc("run", GEMM, "--inputs", tmp_path / "in.npz", "-t", "sm90", "--emulate")
    assert re.search(r"time: [0-9.]+ s \(emulated on the CPU for sm90\)", result.stdout)
    assert "[70, 50]" in result.stdout
    bank_line(result.stderr, "sm90")
    ptc("run", GEMM, "--inputs", tmp_path / "in.npz", "-t", "sm80", "--emulate",
        "-o", tmp_path / "out.npz")
    c = saved(tmp_path / "out.npz")["C"].astype(np.float32)
    ref = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c, ref, rtol=2e-2, atol=2e-2)


def one_error(result) -> str:
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ptc: error: "), result.stderr
    return lines[0]


def test_ptc_run_emulate_errors_are_one_line(monkeypatch):
    import ptc.render as R
    import ptc.render.emulate as E

    args = ["run", GEMM, "--shape", "M=64,N=64,K=64", "--emulate"]
    with monkeypatch.context() as m:    # a backend without a renderer
        m.setattr(R, "renderer", lambda backend: None)
        line = one_error(ptc(*args, "-t", "gfx90a", expect=1))
    assert "no renderer for hip targets such as gfx90a" in line
    line = one_error(ptc(*args, "-t", "sm80", expect=1, env={"CXX": "/no/such/g++"}))
    assert "the host C++ compiler CXX=/no/such/g++ is not found" in line
    # a failed host build, and a failed emulation (less shared memory than the kernel takes)
    monkeypatch.setattr(E, "CXX_FLAGS", E.CXX_FLAGS + ("-include", "/no/such/header.h"))
    line = one_error(ptc(*args, "-t", "sm80", expect=1))
    assert "the host build of the kernel failed" in line and "header.h" in line
    monkeypatch.setattr(E, "CXX_FLAGS", E.CXX_FLAGS[:-2] + ("-DPTC_EMU_SMEM_CAPACITY=1024",))
    line = one_error(ptc(*args, "-t", "sm80", expect=1))
    assert re.search(r"the emulated kernel gemm failed \(code 1\): \d+ bytes of shared "
                     r"memory, over the emulator's 1024", line)


@pytest.mark.parametrize("args, needle", [
    (["-t", "sm80"], "--target applies with --emulate"),
    (["--order", "reverse"], "--order applies with --emulate"),
    (["--eager"], "--eager applies with --emulate"),
    (["--emulate"], "--emulate needs --target"),
])
def test_ptc_run_emulate_usage(args, needle):
    assert needle in ptc("run", GEMM, *args, expect=2).stderr


def test_ptc_run_help_documents_emulate():
    out = " ".join(ptc("run", "--help").stdout.split())
    for option in ("--emulate", "--target", "--order [forward|reverse|random]", "--eager"):
        assert option in out


@pytest.mark.parametrize("backend", ["cuda", "hip"])
def test_each_backends_emulation_prelude_precompiles(backend, tmp_path, monkeypatch):
    """Every emulated build reads its backend's prelude from a precompiled header; HIP's
    once named a header that cannot compile alone, so each HIP build tried (and failed)
    to precompile it first, 2 s apiece."""
    from ptc.render import emulate as E

    monkeypatch.setenv("PTC_EMULATE_CACHE", str(tmp_path))
    monkeypatch.delenv("PTC_EMULATE_RUNTIME_CACHE", raising=False)  # the runtime beside it
    back = E.backend_of(backend)
    flags = E.precompiled_prelude(back, E.compiler(), list(E.CXX_FLAGS))
    failed = [p.read_text() for p in tmp_path.glob(f"prelude-*/{E.PRELUDE_FAILED}")]
    assert flags and Path(flags[-1] + ".gch").exists(), failed


def test_a_prelude_that_does_not_precompile_is_tried_once(tmp_path, monkeypatch):
    from dataclasses import replace

    from ptc.render import emulate as E

    monkeypatch.setenv("PTC_EMULATE_CACHE", str(tmp_path))
    monkeypatch.delenv("PTC_EMULATE_RUNTIME_CACHE", raising=False)  # the runtime beside it
    back = replace(E.backend_of("cuda"), prelude='#include "no_such_header.h"\n')
    ran = []
    real = E.subprocess.run
    monkeypatch.setattr(E.subprocess, "run", lambda *a, **k: ran.append(a) or real(*a, **k))
    for _ in range(2):
        assert E.precompiled_prelude(back, E.compiler(), list(E.CXX_FLAGS)) == []
    assert len(ran) == 1
    assert "no_such_header.h" in next(tmp_path.glob(f"prelude-*/{E.PRELUDE_FAILED}")).read_text()


def test_one_plan_rendered_at_two_shapes_is_built_once(monkeypatch):
    """The emulated build's key ignores comment-only lines (the header's estimate). In the
    shared cache: a fresh one would precompile the prelude and the runtime first (10 s)."""
    from ptc import driver
    from ptc.render import emulate as E

    path = Path(__file__).resolve().parent.parent / "samples" / "softmax.pt"
    kernel = driver.check_file(path).kernels[0]
    a, b = (driver.render(kernel, "sm80", shapes=dict(M=m), tiles=dict(BM=4))[0]
            for m in (100, 4096))
    assert a != b
    E.build_emulated(a)
    ran = []
    real = E.subprocess.run
    monkeypatch.setattr(E.subprocess, "run", lambda *x, **k: ran.append(x) or real(*x, **k))
    small = driver.check_file(path, shapes=dict(M=7)).kernels[0]
    got = E.build_emulated(b)(small, {"X": np.ones((7, 4096), np.float16)}, {"M": 7, "N": 4096})
    assert ran == [] and np.allclose(got["Y"], 1 / 4096)


def test_an_emulated_kernel_is_linked_by_the_fast_linker_where_installed():
    """gold links a kernel in a third of ld.bfd's time; it leaves its version note in the
    library (a section of its own). Without it, the default linker."""
    import shutil

    from ptc.render import emulate as E

    kernel = run(source("  y[tid] = x[tid] + 1.0f;"), np.zeros(32, np.float32),
                 np.zeros(32, np.float32))
    linked_by_gold = b".note.gnu.gold-version" in kernel.path.read_bytes()
    assert linked_by_gold == bool(shutil.which("ld.gold"))
    assert E.linker_flags() == (("-fuse-ld=gold",) if shutil.which("ld.gold") else ())


def test_two_workers_that_need_the_runtime_at_once_compile_it_once(tmp_path, monkeypatch):
    """A cold suite's two pytest workers both start with an emulated kernel: the second
    waits for the first one's runtime object and precompiled prelude (5 s of compiles)."""
    import threading

    from ptc.render import emulate as E

    monkeypatch.setenv("PTC_EMULATE_CACHE", str(tmp_path))
    monkeypatch.delenv("PTC_EMULATE_RUNTIME_CACHE", raising=False)  # the runtime beside it
    ran = []
    real = E.subprocess.run
    monkeypatch.setattr(E.subprocess, "run", lambda *a, **k: ran.append(a[0][-1]) or real(*a, **k))
    back, flags = E.backend_of("cuda"), list(E.CXX_FLAGS)
    got = []

    def worker():
        got.append((E.precompiled_prelude(back, E.compiler(), flags),
                    E.runtime_object(back, E.compiler(), flags)))

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 2 and got[0] == got[1] and got[0][0] and got[0][1].exists()
    assert sorted(Path(r).name for r in ran) == ["ptc_prelude.h.gch", "runtime.o"]


def test_a_kernels_own_macros_reuse_the_shared_runtime(tmp_path, monkeypatch):
    """`defines` are the kernel's knobs (tests/test_sm90.py's slips): a build with them
    compiles the kernel alone, not another precompiled prelude and runtime object."""
    from ptc.render import emulate as E

    # the shared runtime and prelude (what a suite's kernels use), the kernel in a new folder
    monkeypatch.setenv("PTC_EMULATE_RUNTIME_CACHE", str(E.runtime_cache_dir()))
    monkeypatch.setenv("PTC_EMULATE_CACHE", str(tmp_path))
    body = "#ifdef PLUS\n  y[tid] = x[tid] + PLUS;\n#else\n  y[tid] = x[tid];\n#endif"
    x = np.arange(32, dtype=np.float32)
    run(source(body), x, np.zeros(32, np.float32))      # the shared runtime, if not yet built
    ran = []
    real = E.subprocess.run
    monkeypatch.setattr(E.subprocess, "run", lambda cmd, *a, **k: ran.append(cmd) or
                        real(cmd, *a, **k))
    y = np.zeros(32, np.float32)
    E.build_emulated(source(body), defines=("PLUS=2.0f",)).launch([x, y])
    assert np.array_equal(y, x + 2) and len(ran) == 1 and "-DPLUS=2.0f" in ran[0]
