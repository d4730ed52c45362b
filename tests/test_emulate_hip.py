"""The CPU emulation of HIP (targets/hip/templates/emulate/ptc_emulate_hip.h over the shared
runtime, ptc.render.emulate with backend "hip") on small hand-written kernels that call the
device headers (ptc_types.h, cross_lane.h, mfma.h) and the clang AMDGPU builtins: the four
MFMA instructions against NumPy with the operand and accumulator layouts taken from
ptc/lower/atoms.py (the lowering's data, not the emulator's formulas); DPP, ds_swizzle,
ds_bpermute and ptc::lane_xor against the lane permutations AMD documents; and the checks
a GPU would not forgive -- a wave that skips a barrier or a collective, LDS out of bounds, a
missing barrier between waves -- in the three thread orders.

The kernels are strings compiled by build_emulated(..., backend="hip"), each with the
kernel ABI (`ptc_kernel_name`, `ptc_launch`), run with EmulatedKernel.launch.
"""
from __future__ import annotations

import re
from functools import lru_cache

import ml_dtypes
import numpy as np
import pytest

import formulas as F
from ptc.devices import get_device
from ptc.interp import run_kernel
from ptc.targets.hip.atoms import MFMA_16x16x16, MFMA_32x32x8
from ptc.lower.layout import Layout
from ptc.render import RenderError
from ptc import targets
from ptc.render.emulate import EmulationError, build_emulated
from ptc.sched.construct import Choice
from conftest import in_groups
from test_emulate import (UNIT, Case, case_builds, compare, matches_the_interpreter, mutate,
                          within_tolerance)
from test_emulate_runtime import kernel_abi
from test_simulate import SMOKE

HIP_TEMPLATES = targets.backend("hip").templates

pytestmark = pytest.mark.cxx

ORDERS = [dict(), dict(order="reverse"), dict(order="random", seed=3)]
LANES = np.arange(64)


def source(body: str, params: str = "int* x, int* y", args: str = "(int*)t[0], (int*)t[1]",
           *, threads: int = 64, blocks: int = 1, smem: int = 0, prelude: str = "") -> str:
    """A kernel.hip with one kernel `k(params)` whose body is `body`, launched on `blocks`
    workgroups of `threads` threads with `smem` bytes of LDS."""
    return f"""
#include "ptc_types.h"
#include "cross_lane.h"
#include "mfma.h"
{prelude}
extern "C" __global__ PTC_BOUNDS({threads}, 1) void k({params}) {{
  const int tid = ptc::thread_id(), lane = ptc::lane_id(), wave = tid / 64;
  (void)lane; (void)wave;
{body}
}}
{kernel_abi(args, blocks=blocks, threads=threads, smem=smem)}"""


def run(src: str, *arrays: np.ndarray, **config):
    kernel = build_emulated(src, backend="hip")
    kernel.launch(list(arrays), **config)
    return kernel


# ---- MFMA ---------------------------------------------------------------------------------
def table(atom, part: str) -> np.ndarray:
    """[lane, register] -> (row, col) of the atom's fragment `part` (a, b or c), from the
    lowering's layout data."""
    frag = getattr(atom, part)
    shape = {"a": (atom.m, atom.k), "b": (atom.k, atom.n), "c": (atom.m, atom.n)}[part]
    return Layout(f"{atom.name}.{part}", shape, frag.regs, frag.lanes, ()).table[0]


def bits(x: np.ndarray, dtype) -> np.ndarray:
    return x.astype(dtype).view(np.uint16)


MFMA = r"""
  // wave w multiplies its own operands: A and B fragments as 4 16-bit values per lane
  const uint32_t* a = reinterpret_cast<const uint32_t*>(ab) + 2 * tid;
  const uint32_t* b = reinterpret_cast<const uint32_t*>(bb) + 2 * tid;
  float d[REGS];
  for (int r = 0; r < REGS; ++r) d[r] = c[tid * REGS + r];
  ptc::Mfma<M, M, K, BF16>::mma(d, a, b);
  for (int r = 0; r < REGS; ++r) out[tid * REGS + r] = d[r];
"""


def mfma_source(atom, bf16: bool) -> str:
    regs = atom.m * atom.n // 64
    return source(MFMA.replace("REGS", str(regs)).replace("M, M, K, BF16",
                                                          f"{atom.m}, {atom.n}, {atom.k}, "
                                                          f"{str(bf16).lower()}"),
                  "const uint16_t* ab, const uint16_t* bb, const float* c, float* out",
                  "(const uint16_t*)t[0], (const uint16_t*)t[1], (const float*)t[2], "
                  "(float*)t[3]", threads=128)


def mfma_case(atom, dtype, seed: int = 0):
    """Two waves' operands (multiples of 1/4: the products and sums are exact in f32), laid
    out per lane after atoms.py, and the D = A @ B + C each wave must compute."""
    rng = np.random.default_rng(seed)
    ta, tb, tc = table(atom, "a"), table(atom, "b"), table(atom, "c")
    regs = tc.shape[1]
    a = rng.integers(-8, 8, (2, atom.m, atom.k)) / 4
    b = rng.integers(-8, 8, (2, atom.k, atom.n)) / 4
    c = rng.integers(-64, 64, (2, atom.m, atom.n)) / 4
    lanes_a = np.stack([bits(a[w][ta[..., 0], ta[..., 1]], dtype) for w in range(2)])
    lanes_b = np.stack([bits(b[w][tb[..., 0], tb[..., 1]], dtype) for w in range(2)])
    lanes_c = np.stack([c[w][tc[..., 0], tc[..., 1]] for w in range(2)]).astype(np.float32)
    want = a @ b + c
    out = np.zeros((2, 64, regs), np.float32)
    return [lanes_a, lanes_b, lanes_c, out], want, tc


def gathered(out: np.ndarray, tc: np.ndarray, m: int, n: int) -> np.ndarray:
    d = np.full((2, m, n), np.nan)
    for w in range(2):
        d[w][tc[..., 0], tc[..., 1]] = out[w]
    return d


@pytest.mark.parametrize("config", ORDERS)
@pytest.mark.parametrize("atom", [MFMA_16x16x16, MFMA_32x32x8], ids=lambda a: a.name)
@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16], ids=["bf16", "f16"])
def test_mfma_computes_a_times_b_plus_c_in_amds_layouts(atom, dtype, config):
    arrays, want, tc = mfma_case(atom, dtype)
    run(mfma_source(atom, dtype is ml_dtypes.bfloat16), *arrays, **config)
    got = gathered(arrays[3], tc, atom.m, atom.n)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("atom", [MFMA_16x16x16, MFMA_32x32x8], ids=lambda a: a.name)
def test_mfma_rounds_nothing_but_the_f32_sums(atom):
    """Operands that are not small dyadics: the emulated products are exact in f32 (bf16 and
    f16 values multiply exactly), so D equals the f64 product within f32 summation error."""
    rng = np.random.default_rng(5)
    ta, tb, tc = table(atom, "a"), table(atom, "b"), table(atom, "c")
    for dtype in (np.float16, ml_dtypes.bfloat16):
        a = rng.standard_normal((2, atom.m, atom.k)).astype(dtype)
        b = rng.standard_normal((2, atom.k, atom.n)).astype(dtype)
        arrays = [np.stack([a[w][ta[..., 0], ta[..., 1]].view(np.uint16) for w in range(2)]),
                  np.stack([b[w][tb[..., 0], tb[..., 1]].view(np.uint16) for w in range(2)]),
                  np.zeros((2, 64, tc.shape[1]), np.float32),
                  np.zeros((2, 64, tc.shape[1]), np.float32)]
        run(mfma_source(atom, dtype is ml_dtypes.bfloat16), *arrays)
        want = a.astype(np.float64) @ b.astype(np.float64)
        got = gathered(arrays[3], tc, atom.m, atom.n)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())


def swapped_fragments_header() -> str:
    """mfma.h with lanes 0 and 1 trading their A fragments before the instruction: what a
    wrong lane formula in a fragment loader amounts to."""
    header = (HIP_TEMPLATES / "mfma.h").read_text()
    good = ("const uint64_t a64 = static_cast<uint64_t>(a[0]) | "
            "(static_cast<uint64_t>(a[1]) << 32);")
    assert good in header
    return header.replace(good, good.replace("const uint64_t a64", "uint64_t a64") + """
    {
      const int from = 4 * ((::ptc::thread_id() % 64) ^ ((::ptc::thread_id() % 64) < 2));
      const uint32_t lo = __builtin_amdgcn_ds_bpermute(from, static_cast<int>(a64));
      const uint32_t hi = __builtin_amdgcn_ds_bpermute(from, static_cast<int>(a64 >> 32));
      a64 = lo | static_cast<uint64_t>(hi) << 32;
    }""")


@pytest.mark.parametrize("atom", [MFMA_16x16x16, MFMA_32x32x8], ids=lambda a: a.name)
def test_a_wrong_mfma_layout_gives_wrong_numbers(atom):
    """The emulator's self-test layout (A's values 1 and 2 swapped), and an mfma.h whose
    operands reach the instruction from the wrong lanes (two lanes' A fragments swapped)."""
    arrays, want, tc = mfma_case(atom, ml_dtypes.bfloat16, seed=1)
    src = mfma_source(atom, True)
    run(src, *arrays, break_layout=True)
    assert not np.array_equal(gathered(arrays[3], tc, atom.m, atom.n), want)
    bad = swapped_fragments_header()
    out = arrays[3]
    out[:] = 0
    kernel = build_emulated(src, backend="hip", header_overrides={"mfma.h": bad})
    kernel.launch(arrays)
    got = gathered(out, tc, atom.m, atom.n)
    assert not np.array_equal(got, want)
    # rows 0 and 1 of A traded places in the K-block of lanes 0 and 1: D's rows 0 and 1 wrong
    wrong = np.argwhere(np.any(got != want, axis=2))
    assert {int(i) for i in wrong[:, 1]} <= {0, 1}, wrong


def test_mfma_modifiers_other_than_zero_are_reported():
    src = source("""
  ptc::f32x4 c = {0, 0, 0, 0};
  ptc::i16x4 a = {0, 0, 0, 0};
  c = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a, a, c, 1, 0, 0);
  y[tid] = (int)c[0];""")
    with pytest.raises(EmulationError, match=r"v_mfma_f32_16x16x16bf16_1k with cbsz 1, abid 0, "
                                             r"blgp 0: the emulator takes 0, 0, 0"):
        run(src, np.zeros(64, np.int32), np.zeros(64, np.int32))


# ---- cross-lane operations ------------------------------------------------------------------
def values() -> np.ndarray:
    """128 lanes' values: 1000 * wave + lane + 1 (never 0)."""
    return (1000 * (np.arange(128) // 64) + np.arange(128) % 64 + 1).astype(np.int32)


def exchanged(calls: list[str], **config) -> np.ndarray:
    """y[i][tid] = calls[i] evaluated with v = x[tid], on two waves."""
    body = "  const int v = x[tid];\n" + "\n".join(
        f"  y[{i} * 128 + tid] = {call};" for i, call in enumerate(calls))
    x, y = values(), np.zeros(128 * len(calls), np.int32)
    run(source(body, threads=128), x, y, **config)
    return y.reshape(len(calls), 128)


def from_lanes(src: list[int | None], old: np.ndarray | None = None) -> np.ndarray:
    """What each lane of both waves gets when lane l reads lane src[l] (None: `old`, or 0)."""
    x = values().reshape(2, 64)
    out = np.zeros((2, 64), np.int32)
    for w in range(2):
        for lane, s in enumerate(src):
            out[w, lane] = x[w, s] if s is not None else (0 if old is None else old[w, lane])
    return out.ravel()


def row_lanes(f) -> list[int | None]:
    """Lane l (row r = l // 16, i = l % 16) reads r * 16 + f(i), or nothing where f is None or
    outside the row."""
    out = []
    for lane in range(64):
        j = f(lane % 16)
        out.append(None if j is None or not 0 <= j < 16 else lane // 16 * 16 + j)
    return out


QUAD = [(1, 0, 3, 2), (2, 3, 0, 1), (3, 2, 1, 0), (0, 0, 0, 0), (3, 3, 1, 2)]


@pytest.mark.parametrize("config", ORDERS)
def test_dpp_quad_perm_rows_and_wave_shifts(config):
    cases = {}   # call -> the lane each lane reads (None: out of range)
    for p in QUAD:
        ctrl = p[0] | p[1] << 2 | p[2] << 4 | p[3] << 6
        cases[f"__builtin_amdgcn_mov_dpp(v, {ctrl:#x}, 0xF, 0xF, true)"] = \
            [lane // 4 * 4 + p[lane % 4] for lane in range(64)]
    for n in (1, 4, 15):
        cases[f"__builtin_amdgcn_mov_dpp(v, {0x100 + n:#x}, 0xF, 0xF, true)"] = \
            row_lanes(lambda i, n=n: i + n)                                     # row_shl
        cases[f"__builtin_amdgcn_mov_dpp(v, {0x110 + n:#x}, 0xF, 0xF, true)"] = \
            row_lanes(lambda i, n=n: i - n)                                     # row_shr
        cases[f"__builtin_amdgcn_mov_dpp(v, {0x120 + n:#x}, 0xF, 0xF, true)"] = \
            row_lanes(lambda i, n=n: (i - n) % 16)                              # row_ror
    cases["__builtin_amdgcn_mov_dpp(v, 0x140, 0xF, 0xF, true)"] = row_lanes(lambda i: 15 - i)
    cases["__builtin_amdgcn_mov_dpp(v, 0x141, 0xF, 0xF, true)"] = \
        row_lanes(lambda i: i // 8 * 8 + 7 - i % 8)                             # half mirror
    cases["__builtin_amdgcn_mov_dpp(v, 0x130, 0xF, 0xF, true)"] = \
        [lane + 1 if lane < 63 else None for lane in range(64)]                 # wave_shl:1
    cases["__builtin_amdgcn_mov_dpp(v, 0x134, 0xF, 0xF, true)"] = [(lane + 1) % 64 for lane in range(64)]
    cases["__builtin_amdgcn_mov_dpp(v, 0x138, 0xF, 0xF, true)"] = \
        [lane - 1 if lane > 0 else None for lane in range(64)]                  # wave_shr:1
    cases["__builtin_amdgcn_mov_dpp(v, 0x13C, 0xF, 0xF, true)"] = [(lane - 1) % 64 for lane in range(64)]
    # the broadcasts of LLVM's GFX9 scans: the last lane of the previous row to rows 1 and 3,
    # lane 31 to rows 2 and 3
    cases["__builtin_amdgcn_mov_dpp(v, 0x142, 0xA, 0xF, false)"] = \
        [lane // 16 * 16 - 1 if lane // 16 in (1, 3) else lane for lane in range(64)]
    cases["__builtin_amdgcn_mov_dpp(v, 0x143, 0xC, 0xF, false)"] = \
        [31 if lane >= 32 else lane for lane in range(64)]
    got = exchanged(list(cases), **config)
    for row, (call, src) in zip(got, cases.items()):
        assert np.array_equal(row, from_lanes(src)), call


def test_dpp_masks_and_bound_ctrl_keep_the_old_value():
    own = values().reshape(2, 64)
    old = -values().reshape(2, 64)
    calls = [
        # row_shl:4 without bound_ctrl: out-of-row lanes keep their own value (mov_dpp's old
        # is its source register)
        "__builtin_amdgcn_mov_dpp(v, 0x104, 0xF, 0xF, false)",
        # rows 0 and 2 only, banks 1 and 2 only: the others keep their value
        "__builtin_amdgcn_mov_dpp(v, 0xB1, 0x5, 0x6, true)",
        # update_dpp writes `old` where nothing is written, 0 where the source is out of range
        "__builtin_amdgcn_update_dpp(-v, v, 0x104, 0xF, 0xF, false)",
        "__builtin_amdgcn_update_dpp(-v, v, 0x104, 0xF, 0xF, true)",
        "__builtin_amdgcn_update_dpp(-v, v, 0x104, 0x3, 0xF, true)",
        # row_bcast:15 reaching row 0 (no row before it): out of range
        "__builtin_amdgcn_mov_dpp(v, 0x142, 0xF, 0xF, true)",
    ]
    got = exchanged(calls)
    shl4 = row_lanes(lambda i: i + 4)
    assert np.array_equal(got[0], from_lanes(shl4, own))
    enabled = [(lane // 16) in (0, 2) and (lane % 16) // 4 in (1, 2) for lane in range(64)]
    quad = [lane ^ 1 if on else None for lane, on in enumerate(enabled)]
    assert np.array_equal(got[1], from_lanes(quad, own))
    assert np.array_equal(got[2], from_lanes(shl4, old))
    assert np.array_equal(got[3], from_lanes(shl4))
    rows01 = [s if lane < 32 else None for lane, s in enumerate(shl4)]
    want = from_lanes(rows01).reshape(2, 64)
    want[:, 32:] = old[:, 32:]
    assert np.array_equal(got[4], want.ravel())
    bcast = [lane // 16 * 16 - 1 if lane >= 16 else None for lane in range(64)]
    assert np.array_equal(got[5], from_lanes(bcast))


def test_ds_swizzle_bit_and_quad_modes():
    cases = {}
    for m in (1, 2, 4, 8, 16):       # xor m within 32 lanes
        cases[f"__builtin_amdgcn_ds_swizzle(v, {m << 10 | 0x1F:#x})"] = \
            [lane ^ m for lane in range(64)]
    # and 0x18, or 3: lane l of each half reads (l & 0x18) | 3; and 0, or 5: lane 5 of each half
    cases[f"__builtin_amdgcn_ds_swizzle(v, {3 << 5 | 0x18:#x})"] = \
        [lane // 32 * 32 + ((lane % 32) & 0x18 | 3) for lane in range(64)]
    cases[f"__builtin_amdgcn_ds_swizzle(v, {5 << 5:#x})"] = [lane // 32 * 32 + 5 for lane in range(64)]
    for p in QUAD:
        sel = p[0] | p[1] << 2 | p[2] << 4 | p[3] << 6
        cases[f"__builtin_amdgcn_ds_swizzle(v, {0x8000 | sel:#x})"] = \
            [lane // 4 * 4 + p[lane % 4] for lane in range(64)]
    got = exchanged(list(cases))
    for row, (call, src) in zip(got, cases.items()):
        assert np.array_equal(row, from_lanes(src)), call


def test_ds_bpermute_reads_the_lane_its_byte_address_names():
    perm = np.random.default_rng(2).permutation(64)
    # addresses past 256 bytes wrap: lane (addr / 4) mod 64
    calls = [f"__builtin_amdgcn_ds_bpermute(4 * perm[lane] + 256 * (lane % 3), v)"]
    prelude = "static const int perm[64] = {" + ", ".join(map(str, perm)) + "};"
    body = "  const int v = x[tid];\n" + f"  y[tid] = {calls[0]};"
    x, y = values(), np.zeros(128, np.int32)
    run(source(body, threads=128, prelude=prelude), x, y)
    assert np.array_equal(y, from_lanes(list(perm)))


@pytest.mark.parametrize("config", ORDERS)
def test_lane_xor_exchanges_every_mask_for_ints_and_floats(config):
    masks = (1, 2, 4, 8, 16, 32)
    got = exchanged([f"ptc::lane_xor<{m}>(v)" for m in masks] +
                    [f"(int)ptc::lane_xor<{m}>((float)v + 0.5f)" for m in masks], **config)
    for i, m in enumerate(masks):
        assert np.array_equal(got[i], from_lanes([lane ^ m for lane in range(64)])), m
        assert np.array_equal(got[6 + i], from_lanes([lane ^ m for lane in range(64)])), m


def test_a_lane_xor_butterfly_reduces_the_wave():
    body = """
  float v = (float)x[tid];
  v += ptc::lane_xor<1>(v); v += ptc::lane_xor<2>(v); v += ptc::lane_xor<4>(v);
  v += ptc::lane_xor<8>(v); v += ptc::lane_xor<16>(v); v += ptc::lane_xor<32>(v);
  y[tid] = (int)v;"""
    x, y = values(), np.zeros(128, np.int32)
    run(source(body, threads=128), x, y, order="random", seed=9)
    assert np.array_equal(y, np.repeat([x[:64].sum(), x[64:].sum()], 64))


def test_readfirstlane_readlane_and_mbcnt():
    got = exchanged(["__builtin_amdgcn_readfirstlane(v)", "__builtin_amdgcn_readlane(v, 37)",
                     "(int)__builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0))",
                     "(int)__builtin_amdgcn_mbcnt_hi(0xF0u, __builtin_amdgcn_mbcnt_lo(0x3u, 7))"])
    assert np.array_equal(got[0], from_lanes([0] * 64))
    assert np.array_equal(got[1], from_lanes([37] * 64))
    assert np.array_equal(got[2], np.tile(LANES, 2))
    below = [7 + min(lane, 2) + (bin(0xF0 & ((1 << (lane - 32)) - 1)).count("1") if lane > 32
                                 else 0) for lane in range(64)]
    assert np.array_equal(got[3], np.tile(below, 2))


# ---- what the emulation reports -------------------------------------------------------------
def test_a_wave_that_skips_the_barrier_is_a_deadlock():
    src = source("""
  if (wave == 1) ptc::syncthreads();
  y[tid] = x[tid];""", threads=128)
    with pytest.raises(EmulationError, match=r"deadlock: 64 thread\(s\) at s_barrier, 0 at a "
                                             r"wave-collective instruction, 64 finished"):
        run(src, np.zeros(128, np.int32), np.zeros(128, np.int32))


def test_a_collective_that_part_of_the_wave_skips_is_a_deadlock():
    src = source("if (lane < 32) y[tid] = ptc::lane_xor<1>(x[tid]);")
    with pytest.raises(EmulationError, match=r"deadlock.*at a wave-collective instruction: DPP"):
        run(src, np.zeros(64, np.int32), np.zeros(64, np.int32))


def test_lanes_at_different_collectives_or_controls_are_reported():
    # a diverged wave: half at one swizzle, half at another (the emulator pairs them up)
    src = source("y[tid] = lane < 32 ? ptc::lane_xor<4>(x[tid]) : ptc::lane_xor<8>(x[tid]);")
    with pytest.raises(EmulationError, match=r"ds_swizzle: lane \d+ of the wave gives 0x"):
        run(src, np.zeros(64, np.int32), np.zeros(64, np.int32))
    src = source("y[tid] = lane < 32 ? ptc::lane_xor<1>(x[tid]) : ptc::lane_xor<32>(x[tid]);")
    with pytest.raises(EmulationError, match=r"lane \d+ of the wave executes a different "
                                             r"wave-collective instruction"):
        run(src, np.zeros(64, np.int32), np.zeros(64, np.int32))


def test_lds_accesses_are_checked():
    x, y = np.zeros(64, np.int32), np.zeros(64, np.int32)
    with pytest.raises(EmulationError, match=r"lds of 4 bytes .* \(shared offset 1024\) is not "
                                             r"inside LDS of 1024 bytes"):
        run(source("y[tid] = ptc::ld_shared<int>(4 * tid + 772);", smem=1024), x, y)
    with pytest.raises(EmulationError, match=r"sts of 16 bytes .* \(shared offset 8\) is not "
                                             r"inside LDS of 1024 bytes, 16-byte aligned"):
        run(source("ptc::st_shared<ptc::u32x4>(8, ptc::u32x4{});", smem=1024), x, y)
    with pytest.raises(EmulationError, match=r"65540 bytes of LDS, over the emulator's 65536"):
        run(source("y[tid] = 0;", smem=65540), x, y)
    run(source("y[tid] = 0;", smem=65536), x, y)


def test_global_accesses_through_ptc_global_are_checked():
    with pytest.raises(EmulationError, match="outside every tensor"):
        run(source("y[tid] = *PTC_GLOBAL(x + 64 + tid);"), np.zeros(64, np.int32),
            np.zeros(64, np.int32))


BUFFER = '#include "global_to_shared.h"'


def test_buffer_loads_read_zeros_at_or_past_the_range_as_the_isa_does():
    """A raw buffer load (global_to_shared.h: buffer_load): inside the range it reads the
    tensor; at or past it, zeros (MUBUF range checking); a chunk outside the tile is read
    at BUFFER_RANGE."""
    x, y = np.arange(64, dtype=np.int32) + 1, np.zeros(64, np.int32)
    body = ("const ptc::i32x4 r = ptc::buffer_resource(x, 40 * 4);\n"
            "y[tid] = ptc::buffer_load<uint32_t>(r, 4u * tid, tid % 5 != 0);")
    run(source(body, prelude=BUFFER), x, y)
    want = np.where((LANES < 40) & (LANES % 5 != 0), x, 0)
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("body, message", [
    # a 16-byte load from 4 bytes before the end: chipset-dependent, refused
    ("ptc::buffer_load<ptc::u32x4>(ptc::buffer_resource(x, 64 * 4), 60 * 4 + 4, true);",
     r"buffer_load_dwordx4 of 16 bytes at offset 244 crosses the buffer's range of 256"),
    # a resource that is not gfx9's raw one
    ("ptc::i32x4 r = ptc::buffer_resource(x, 256); r[3] = 0; "
     "ptc::raw_buffer_load_b32(r, 0, 0, 0);", r"not gfx9's raw one"),
    # whether the scalar offset counts in the range check decides the answer
    ("ptc::raw_buffer_load_b32(ptc::buffer_resource(x, 256), 0, 256, 0);",
     r"counts the scalar offset in its range check"),
    # a buffered copy whose rows would overlap (tile_buffer)
    ("ptc::tile_buffer(x, x, 2, 4, 8);", r"a buffered copy's rows overlap"),
])
def test_buffer_loads_the_chip_may_read_otherwise_are_errors(body, message):
    x, y = np.arange(64, dtype=np.int32), np.zeros(64, np.int32)
    with pytest.raises(EmulationError, match=message):
        run(source(body, prelude=BUFFER), x, y)


def test_lds_starts_as_nan():
    y = np.zeros(64, np.float32)
    run(source("y[tid] = ptc::ld_shared<float>(4 * tid);", "float* y", "(float*)t[0]",
               smem=256), y)
    assert np.all(np.isnan(y))


# one wave writes LDS, the other reads it reversed: without the barrier the reader may run
# first and read the fill
CROSS_WAVE = """
  if (wave == 0) ptc::st_shared<int>(4 * lane, x[tid]);
  {sync}
  if (wave == 1) y[tid] = ptc::ld_shared<int>(4 * (63 - lane));"""


def test_a_missing_barrier_between_waves_is_caught_in_some_order():
    x = values()
    want = x[:64][::-1]
    for config in ORDERS:
        y = np.zeros(128, np.int32)
        run(source(CROSS_WAVE.format(sync="ptc::syncthreads();"), threads=128, smem=256), x, y,
            **config)
        assert np.array_equal(y[64:], want), config
    right = []
    for config in ORDERS + [dict(order="random", seed=s) for s in range(4, 8)]:
        y = np.zeros(128, np.int32)
        run(source(CROSS_WAVE.format(sync=""), threads=128, smem=256), x, y, **config)
        right.append(np.array_equal(y[64:], want))
    assert right[0] and not right[1] and not all(right[2:]), right


def test_the_orders_run_waves_in_turn_forward_reversed_or_shuffled():
    """Each thread takes a ticket from an LDS counter (the fibers share one OS thread, so
    the read-modify-write is atomic): the tickets show the order the threads ran in."""
    src = source("""
  if (tid == 0) ptc::st_shared<int>(0, 0);
  ptc::syncthreads();
  const int n = ptc::ld_shared<int>(0);
  ptc::st_shared<int>(0, n + 1);
  y[tid] = n;""", threads=256, smem=64)
    seen = {}
    for name, config in (("forward", dict()), ("reverse", dict(order="reverse")),
                         ("random", dict(order="random", seed=4))):
        y = np.zeros(256, np.int32)
        run(src, np.zeros(1, np.int32), y, **config)
        assert sorted(y) == list(range(256))
        seen[name] = y
    for name, y in seen.items():   # a wave runs as a whole between barriers
        assert all(len(set(w)) == 1 for w in y.reshape(4, 64) // 64), name
    steps = {name: np.diff(y.reshape(4, 64), axis=1) for name, y in seen.items()}
    assert np.all(steps["forward"] == 1)      # lanes in order
    assert np.all(steps["reverse"] == -1)     # lanes in reverse
    assert not np.all(np.abs(steps["random"]) == 1)   # lanes shuffled


# ---- LDS bank conflicts ----------------------------------------------------------------------
def conflicts(body: str):
    src = source(f"""
  int acc = 0;
{body}
  y[tid] = acc;""", smem=8192)
    kernel = run(src, np.zeros(1, np.int32), np.zeros(64, np.int32))
    return kernel.last_run


# lanes 0-15 in banks 0-15, lanes 16-31 in banks 16-31, each quad of lanes in its own 128 bytes
QUADS = "16 * (lane % 4) + 64 * ((lane / 16) % 2) + 128 * ((lane / 4) % 4) + 1024 * (lane / 32)"


@pytest.mark.parametrize("body, lds, sts", [
    ("acc += ptc::ld_shared<int>(4 * lane);", 0, 0),                  # half-waves of 32 words
    ("acc += ptc::ld_shared<int>(8 * lane);", 2, 0),                  # 2-way in each half
    ("acc += ptc::ld_shared<int>(128 * lane);", 62, 0),               # one bank
    ("acc += ptc::ld_shared<int>(4 * (lane % 8));", 0, 0),            # broadcasts
    ("acc += (int)ptc::ld_shared<ptc::u32x4>(16 * lane).x;", 0, 0),   # ds_read_b128
    ("ptc::st_shared<ptc::u32x4>(16 * lane, ptc::u32x4{});", 0, 0),   # ds_write_b128
    # the read phases pair quads 0 and 5, 1 and 4, ...; the write phases quads 0 and 1, ...
    (f"acc += (int)ptc::ld_shared<ptc::u32x4>({QUADS}).x;", 0, 0),
    (f"ptc::st_shared<ptc::u32x4>({QUADS}, ptc::u32x4{{}});", 0, 8),
    ("acc += (int)ptc::ld_shared<ptc::u32x2>(8 * lane).x;", 0, 0),    # quarter-waves
    ("acc += (int)ptc::ld_shared<ptc::u32x2>(16 * lane).x;", 4, 0),
])
def test_lds_bank_conflicts_follow_amds_phases(body, lds, sts):
    last = conflicts(body)
    assert last.bank_conflicts == {"lds": lds, "sts": sts, "total": lds + sts}, body


# ---- the host compiler's conversions are the device's ------------------------------------------
def test_bf16_and_f16_rounding_match_numpy():
    rng = np.random.default_rng(8)
    x = np.concatenate([rng.standard_normal(4000).astype(np.float32) * 10.0 ** rng.integers(
        -8, 6, 4000), np.array([0.0, -0.0, np.inf, -np.inf, 65520, 65519, 1e-8, 3e38],
                               np.float32)]).astype(np.float32)
    x = np.resize(x, 4096)
    bf, hf = np.zeros(4096, np.uint16), np.zeros(4096, np.uint16)
    back = np.zeros((2, 4096), np.float32)
    run(source("""
  for (int i = tid; i < 4096; i += 64) {
    bf[i] = ptc::bf16_bits(x[i]); hf[i] = ptc::f16_bits(x[i]);
    back[i] = ptc::round_bf16(x[i]); back[4096 + i] = ptc::round_f16(x[i]);
  }""", "const float* x, uint16_t* bf, uint16_t* hf, float* back",
               "(const float*)t[0], (uint16_t*)t[1], (uint16_t*)t[2], (float*)t[3]"),
        x, bf, hf, back)
    with np.errstate(all="ignore"):
        assert np.array_equal(bf, x.astype(ml_dtypes.bfloat16).view(np.uint16))
        assert np.array_equal(hf, x.astype(np.float16).view(np.uint16))
        assert np.array_equal(back[0], x.astype(ml_dtypes.bfloat16).astype(np.float32))
        assert np.array_equal(back[1], x.astype(np.float16).astype(np.float32))


# ---- every sample's kernel.hip against the reference interpreter ----------------------------
# (device, plan, shape) as test_emulate.VARIANTS: the search's first renderable plan at the
# SMOKE shape; the plan built at the benchmark shape (its tiles and style) at the SMOKE shape
# and at the EDGE shape (sizes that are not multiples of anything: the element-wise copies);
# and the staged-copy pipelines from the SMOKE tiles at the EDGE shape
GFX90A, GFX942 = get_device("gfx90a"), get_device("gfx942")
HIP_VARIANTS = {
    "gfx90a-best": (GFX90A, None, "smoke"),
    "gfx90a-bench-plan": (GFX90A, "bench", "smoke"),
    "gfx90a-bench-plan-edge": (GFX90A, "bench", "edge"),
    "gfx90a-sequential": (GFX90A, Choice("sequential", 1, warps=4), "edge"),
    "gfx90a-multistage2": (GFX90A, Choice("multistage", 2, warps=4), "edge"),
    "gfx942-best": (GFX942, None, "smoke"),
    "gfx942-bench-plan": (GFX942, "bench", "smoke"),
    "gfx942-bench-plan-edge": (GFX942, "bench", "edge"),
}
# in thread order, in reverse, and shuffled
HIP_CONFIGS = [dict(), dict(order="reverse"), dict(order="random", seed=7)]
HIP_CASES = [(n, v) for n in sorted(SMOKE) for v in HIP_VARIANTS]


class Refused:
    """A fixed pipeline the lowering does not build for this sample."""

    def __init__(self, why: str):
        self.skip = why


@lru_cache(maxsize=None)
def hip_case(name: str, variant: str) -> Case | Refused:
    try:
        return Case(name, variant, HIP_VARIANTS)
    except RenderError as exc:
        if not isinstance(HIP_VARIANTS[variant][1], Choice):
            raise           # the search's plans must render
        return Refused(f"{HIP_VARIANTS[variant][1].describe()} is not built: {exc}")


@lru_cache(maxsize=None)
def hip_reference(name: str, variant: str) -> dict:
    c = hip_case(name, variant)
    return run_kernel(c.kernel, c.inputs, shapes=c.shapes, tiles=c.tiles)


@pytest.fixture(scope="module")
def hip_builds(request):
    """The selected cases' kernel.hip built for the CPU."""
    made = case_builds(request, test_the_emulated_hip_kernel_matches_the_interpreter, hip_case)
    yield made
    made.close()


@pytest.mark.parametrize("name, variant", in_groups(HIP_CASES, UNIT, "emulate-hip"))
def test_the_emulated_hip_kernel_matches_the_interpreter(hip_builds, name, variant):
    c = hip_case(name, variant)
    matches_the_interpreter(c, hip_builds[(name, variant)], None if c.skip else
                            hip_reference(name, variant), HIP_CONFIGS)


# ---- the emulation sees bugs in rendered kernels ----------------------------------------------
def hip_gemm() -> Case:
    c = hip_case("gemm", "gfx90a-bench-plan")   # aligned: the staged copies run
    assert ".land(tid);" in c.source and "ptc::Mfma<" in c.source
    return c


def hip_run(c: Case, source: str, header_overrides=None, **config) -> dict[str, float]:
    kernel = build_emulated(source, backend=c.device, header_overrides=header_overrides)
    return compare(c, kernel(c.kernel, c.inputs, c.dims, **config),
                   hip_reference(c.name, c.variant))


def test_a_wrong_mfma_layout_in_a_rendered_kernel_gives_wrong_numbers():
    c = hip_gemm()
    assert within_tolerance(c, hip_run(c, c.source))
    errors = hip_run(c, c.source, break_layout=True)    # A's values 1 and 2 swapped
    assert all(e > 0.1 for e in errors.values()), errors
    bad = swapped_fragments_header()      # lanes 0 and 1 trade A fragments
    errors = hip_run(c, c.source, header_overrides={"mfma.h": bad})
    assert not within_tolerance(c, errors), errors


def test_a_missing_landing_of_a_staged_copy_gives_wrong_numbers():
    """The wait of a register-staged copy is its `land`: without it the LDS slot keeps its
    fill (NaN); landed after the barrier, other waves read the slot before it is written."""
    c = hip_gemm()
    bad = mutate(c.source, r"\n\s*staged_load_A\.land\(tid\);", "")
    errors = hip_run(c, bad)
    assert not within_tolerance(c, errors), errors
    late = mutate(c.source, r"(\n\s*staged_load_B\.land\(tid\);)(\n\s*ptc::syncthreads\(\);[^\n]*)",
                  r"\2\1", count=1)
    assert late != c.source
    caught = []
    for config in HIP_CONFIGS:
        caught.append(not within_tolerance(c, hip_run(c, late, **config)))
    assert any(caught), caught


def test_a_missing_barrier_in_a_rendered_kernel_is_caught():
    c = hip_gemm()
    bad = mutate(c.source, r"(staged_load_B\.land\(tid\);)\n\s*ptc::syncthreads\(\);[^\n]*",
                 r"\1", count=1)
    caught = [not within_tolerance(c, hip_run(c, bad, **config)) for config in HIP_CONFIGS]
    assert any(caught), caught


def test_a_rendered_barrier_that_one_wave_skips_is_a_deadlock():
    c = hip_gemm()
    bad = mutate(c.source, r"(long long block = ptc::block_id\(\);\n)",
                 r"\1  if (ptc::thread_id() < 64) ptc::syncthreads();\n", count=1)
    with pytest.raises(EmulationError, match="deadlock"):
        build_emulated(bad, backend=c.device)(c.kernel, c.inputs, c.dims)


def test_reading_past_a_tensor_in_a_rendered_kernel_is_reported():
    c = hip_case("gemm", "gfx90a-bench-plan-edge")   # the element-wise store checks its edge
    bad = mutate(c.source, r"if \(!\(c0 < rows_left && c1 < cols_left\)\) continue;", "")
    with pytest.raises(EmulationError, match="outside every tensor"):
        build_emulated(bad, backend=c.device)(c.kernel, c.inputs, c.dims)


# ---- ptc run --emulate -------------------------------------------------------------------------
@pytest.mark.parametrize("target", ["gfx90a", "gfx942"])
def test_ptc_run_emulate_runs_the_hip_kernel(tmp_path, target):
    from test_cli import GEMM, GEMM_SHAPE, ptc
    from test_emulate_runtime import saved
    args = ["run", GEMM, *GEMM_SHAPE, "--seed", 2]
    ptc(*args, "-o", tmp_path / "ref.npz")
    result = ptc(*args, "--target", target, "--emulate", "--order", "random",
                 "-o", tmp_path / "emu.npz")
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("emulated ")]
    assert re.fullmatch(rf"emulated {target}: \d+ shared-memory bank conflicts \(lds \d+, "
                        r"sts \d+\)", line), line
    ref, got = saved(tmp_path / "ref.npz"), saved(tmp_path / "emu.npz")
    assert got["C"].dtype == np.float16 and got["C"].shape == (200, 136)
    assert F.rel_l2(got["C"], ref["C"]) <= 1e-2
