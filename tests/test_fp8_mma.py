"""Issue 21, part 3b: FP8 matrix products. `a @ b` of f8e4m3 / f8e5m2 tiles (the two
formats mixed too) gives f32: exact products (every FP8 value and every product of two is
an f32 value) summed in f32, as f16 products are.

The truth is a formula written here from ml_dtypes' decoding of the codes, in float64
(exact products; sums within the f32 rounding of K terms of the interpreter's order).
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from ptc.diagnostics import CompileError
from ptc.grammar import parse
from ptc.interp import run_kernel
from ptc.sema import check
from ptc.sema import typed as T

EVEN = {"M": 128, "N": 128, "K": 128}
EDGE = {"M": 72, "N": 40, "K": 96}          # ragged tiles along M and N
FORMATS = {"f8e4m3": ml_dtypes.float8_e4m3fn, "f8e5m2": ml_dtypes.float8_e5m2}

GEMM = """
kernel gemm(A: {a}[M, K], B: {b}[K, N]) -> (C: f32[M, N]) {{
  dims M = 512, N = 512, K = 512
  tile BM in [128, 64], BN in [128, 64], BK in [64, 32]
  parallel i: BM of M, j: BN of N {{
    acc = zeros(f32[BM, BN])
    for k: BK of K {{
      acc += load(A[i, k]) @ load(B[k, j])
    }}
    store(C[i, j], acc)
  }}
}}
"""
# per-tensor scales (one-element tensors), the usual FP8 GEMM's dequantization
SCALED = """
kernel scaled(A: {a}[M, K], B: {b}[N, K], sa: f32[1], sb: f32[1]) -> (C: f32[M, N]) {{
  dims M = 512, N = 512, K = 512
  tile BM in [128, 64], BN in [128, 64], BK in [64, 32]
  parallel i: BM of M, j: BN of N {{
    acc = zeros(f32[BM, BN])
    for k: BK of K {{
      acc += load(A[i, k]) @ load(B[j, k]).T
    }}
    store(C[i, j], (acc * load(sa[0])) * load(sb[0]))
  }}
}}
"""
PAIRS = [("f8e4m3", "f8e4m3"), ("f8e5m2", "f8e5m2"), ("f8e4m3", "f8e5m2"),
         ("f8e5m2", "f8e4m3")]


def typed(text: str, shapes: dict) -> T.TypedKernel:
    return check(parse(text, "k.pt"), shapes).kernels[0]


def finite_codes(dtype: str, shape, rng) -> np.ndarray:
    """Random finite codes of an FP8 format, every exponent and both signs."""
    codes = rng.integers(0, 256, shape).astype(np.uint8)
    special = 0x7F if dtype == "f8e4m3" else 0x7C          # NaN (and e5m2 inf) exponents
    codes[(codes & special) == special] ^= 0x40             # a finite code instead
    return codes.view(FORMATS[dtype])


def inputs_for(name: str, a: str, b: str, shapes: dict, seed: int = 21) -> dict:
    rng = np.random.default_rng(seed)
    M, N, K = shapes["M"], shapes["N"], shapes["K"]
    out = {"A": finite_codes(a, (M, K), rng),
           "B": finite_codes(b, (N, K) if name == "scaled" else (K, N), rng)}
    if name == "scaled":
        out["sa"] = np.array([0.0625], np.float32)
        out["sb"] = np.array([3.0], np.float32)
    return out


def formula(name: str, inputs: dict) -> np.ndarray:
    A = inputs["A"].astype(np.float64)          # ml_dtypes decodes each code exactly
    B = inputs["B"].astype(np.float64)
    if name == "scaled":
        B = B.T
    C = A @ B
    if name == "scaled":
        C = C * float(inputs["sa"][0]) * float(inputs["sb"][0])
    return C


def close(got: np.ndarray, want: np.ndarray, inputs: dict) -> None:
    """Within the f32 rounding of a K-term sum: K * 2^-24 of the sum of |products|."""
    A = np.abs(inputs["A"].astype(np.float64))
    B = np.abs(inputs["B"].astype(np.float64))
    mags = A @ (B.T if A.shape[1] != B.shape[0] else B)
    scale = float(inputs["sa"][0] * inputs["sb"][0]) if "sa" in inputs else 1.0
    bound = A.shape[1] * 2.0 ** -24 * mags * scale + 1e-30
    err = np.abs(got.astype(np.float64) - want)
    assert (err <= bound).all(), f"max error {err.max()} (bound there {bound.flat[err.argmax()]})"
    assert not np.array_equal(want, 0 * want)


# ---- the language and the interpreter ----------------------------------------------------------
@pytest.mark.parametrize("a, b", PAIRS)
def test_a_product_of_fp8_tiles_is_an_f32_tile(a, b):
    kernel = typed(GEMM.format(a=a, b=b), EDGE)
    (loop,) = [s for s in kernel.body[0].body if isinstance(s, T.Loop)]
    (let,) = loop.body
    assert isinstance(let.value, T.MmaAccumulate)
    assert let.value.type.dtype == "f32"
    assert (let.value.a.type.dtype, let.value.b.type.dtype) == (a, b)


@pytest.mark.parametrize("name", ["gemm", "scaled"])
@pytest.mark.parametrize("a, b", PAIRS)
def test_the_interpreter_sums_the_exact_products_in_f32(name, a, b):
    text = (GEMM if name == "gemm" else SCALED).format(a=a, b=b)
    kernel = typed(text, EDGE)
    inputs = inputs_for(name, a, b, EDGE)
    got = run_kernel(kernel, inputs, shapes=EDGE)["C"]
    assert got.dtype == np.float32
    close(got, formula(name, inputs), inputs)


def test_products_of_fp8_extremes_are_exact_in_the_interpreter():
    """448 * 57344 and 2^-9 * 2^-16 (the smallest subnormals) are f32 values: one product
    per output, nothing to round."""
    kernel = typed(GEMM.format(a="f8e4m3", b="f8e5m2"), {"M": 2, "N": 2, "K": 1})
    A = np.array([[448.0], [2.0 ** -9]]).astype(ml_dtypes.float8_e4m3fn)
    B = np.array([[57344.0, -2.0 ** -16]]).astype(ml_dtypes.float8_e5m2)
    got = run_kernel(kernel, {"A": A, "B": B}, shapes={"M": 2, "N": 2, "K": 1})["C"]
    np.testing.assert_array_equal(got, np.array(
        [[448.0 * 57344.0, -448.0 * 2.0 ** -16], [2.0 ** -9 * 57344.0, -2.0 ** -25]],
        np.float32))


@pytest.mark.parametrize("other", ["f16", "bf16", "f32"])
def test_an_fp8_operand_against_a_float_is_a_located_error_with_a_hint(other):
    text = GEMM.format(a="f8e4m3", b=other)
    with pytest.raises(CompileError) as info:
        typed(text, EDGE)
    (d,) = info.value.diagnostics
    assert f"`@` of f8e4m3 and {other} tiles: FP8 multiplies FP8" in d.message, d.message
    assert (d.span.line, d.span.col) == (8, 14), d.span     # at the FP8 operand
    fixed = f"(load(A[i, k]) as {other}) @ load(B[k, j])"
    assert fixed in d.hint, d.hint
    typed(text.replace("load(A[i, k]) @ load(B[k, j])", fixed), EDGE)   # the fix checks


def test_sm90_takes_fp8_on_wgmma_where_the_shape_tiles():
    """wgmma m64nNk32 .e4m3/.e5m2 (issue 21, part 3c; tests/test_wgmma8.py): K-major
    operands, k a multiple of 32."""
    from ptc.lower.atoms import why_no_wgmma

    for dtype in FORMATS:
        assert why_no_wgmma(dtype, 128, 128, 64) is None
        assert "k a multiple of 32" in why_no_wgmma(dtype, 128, 128, 16)


# ---- emulated on every target ------------------------------------------------------------------
def emulated_cases():
    out = [("gemm", "f8e4m3", "f8e5m2", t, s) for t in ("sm80", "sm90", "gfx90a", "gfx942")
           for s in ("even", "edge")]
    out += [("scaled", "f8e5m2", "f8e4m3", t, s) for t in ("sm80", "sm90", "gfx90a", "gfx942")
            for s in ("even", "edge")]
    out += [("gemm", f, f, t, "edge") for f in FORMATS for t in ("sm80", "gfx942")]
    out += [("gemm", "f8e4m3", "f8e4m3", "gfx942", "even")]     # v_mfma_*_fp8_fp8
    return out


# what each target's source issues for an FP8 product
INSTRUCTIONS = {"sm80": "ptc::Mma16832F8<", "sm90": "ptc::Mma16832F8<",
                "gfx90a": "ptc::MfmaF8<", "gfx942": "ptc::MfmaFnuz<"}


@lru_cache(maxsize=None)
def rendered(text: str, target: str, shapes: tuple, tiles: tuple = ()):
    from ptc import driver

    kernel = typed(text, dict(shapes))
    source, plans, _, device, _ = driver.render(kernel, target, shapes=dict(shapes),
                                                tiles=dict(tiles) or None)
    return kernel, source, plans, device


@lru_cache(maxsize=None)
def emulated(source: str, device, overrides: tuple = ()):
    from ptc.render.emulate import build_emulated

    return build_emulated(source, backend=device, header_overrides=dict(overrides) or None)


@pytest.mark.cxx
@pytest.mark.parametrize("name, a, b, target, shape", emulated_cases(),
                         ids=["-".join(c) for c in emulated_cases()])
def test_fp8_gemms_on_every_target(name, a, b, target, shape):
    shapes = EVEN if shape == "even" else EDGE
    text = (GEMM if name == "gemm" else SCALED).format(a=a, b=b)
    kernel, source, plans, device = rendered(text, target, tuple(shapes.items()))
    if "wgmma" in source:           # sm90, K-major operands: wgmma FP8 (part 3c)
        assert (name, target) == ("scaled", "sm90")
    elif target in INSTRUCTIONS:    # on the matrix unit, not CUDA cores
        assert INSTRUCTIONS[target] in source
        assert all(device.unit(s.unit).kind == "mma" for p in plans for _, s in p.steps()
                   if s.task.startswith("mma"))
    run = emulated(source, device)
    inputs = inputs_for(name, a, b, shapes)
    want = formula(name, inputs)
    for config in (dict(), dict(order="reverse"), dict(order="random", seed=5)):
        close(run(kernel, inputs, shapes, **config)["C"], want, inputs)


def decoded(codes: np.ndarray, dtype: str) -> np.ndarray:
    return codes.astype(np.uint8).view(FORMATS[dtype]).astype(np.float32)


def code_run(target: str, dtype: str, side: str, other: str, codes: np.ndarray,
             overrides: tuple = ()):
    """The 256 `codes` of `dtype` in A's column 0 (B's row 0), times 1.0 of `other`: C's
    column 0 (row 0), and what it must be."""
    a, b = (dtype, other) if side == "A" else (other, dtype)
    shapes = {"M": 256, "N": 8, "K": 32} if side == "A" else {"M": 16, "N": 256, "K": 32}
    kernel, source, _, device = rendered(GEMM.format(a=a, b=b), target,
                                         tuple(shapes.items()))
    assert INSTRUCTIONS[target] in source
    one = {"f8e4m3": 0x38, "f8e5m2": 0x3C}          # 1.0
    A = np.zeros((shapes["M"], shapes["K"]), np.uint8)
    B = np.zeros((shapes["K"], shapes["N"]), np.uint8)
    if side == "A":
        A[:, 0] = codes
        B[0, 0] = one[b]
    else:
        B[0, :] = codes
        A[0, 0] = one[a]
    inputs = {"A": A.view(FORMATS[a]), "B": B.view(FORMATS[b])}
    assert all(decoded(np.array([one[f]]), f)[0] == 1.0 for f in FORMATS)
    got = emulated(source, device, overrides)(kernel, inputs, shapes)["C"]
    got = got[:, 0] if side == "A" else got[0, :]
    return got, decoded(codes, dtype) + np.float32(0.0)           # -0 + 0 = +0


def same_values(got: np.ndarray, want: np.ndarray) -> bool:
    """Equal, NaN where NaN."""
    ok = ~np.isnan(want)
    return np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(got[ok], want[ok])


@pytest.mark.cxx
@pytest.mark.parametrize("target", sorted(INSTRUCTIONS))
@pytest.mark.parametrize("dtype", sorted(FORMATS))
@pytest.mark.parametrize("side", ["A", "B"])
def test_every_fp8_code_reaches_the_matrix_unit_exactly(target, dtype, side):
    """All 256 codes of a format in A's column 0 (B's row 0), times 1: C's column 0 (row 0)
    is each code's value -- NaN for NaN codes, +-inf for e5m2's, subnormals and -0 (which
    adds to the +0 accumulator as +0) exact. The in-register widening to f16 on sm80/sm90
    must be exact for every code; on gfx942 the e5m2 infinities send their k-step through
    f16 (mfma.h, MfmaFnuz)."""
    other = "f8e4m3" if dtype == "f8e5m2" else "f8e5m2"
    codes = np.arange(256, dtype=np.uint8)
    got, want = code_run(target, dtype, side, other, codes)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_array_equal(got[ok], want[ok])
    assert np.isinf(want).any() == (dtype == "f8e5m2")


# the FNUZ fix-ups of mfma.h (fragment, slip, the formats whose codes then come out wrong)
FNUZ_FIXUPS = [
    ("const uint32_t keep = (nonzero | 0x7f7f7f7fu)", "const uint32_t keep = (0xffffffffu)",
     FORMATS),                                          # -0 stays 0x80: FNUZ's NaN
    ("(E5M2 ? 0x03030303u : 0x01010101u)", "(E5M2 ? 0x03030303u : 0x00000000u)",
     ("f8e4m3",)),                                      # e4m3's NaN codes read as +-240
    ("(E5M2 ? 0x03030303u : 0x01010101u)", "(E5M2 ? 0x02020202u : 0x01010101u)",
     ("f8e5m2",)),                                      # 0x7d, 0xfd read as finite
]


@pytest.mark.cxx
@pytest.mark.parametrize("dtype", sorted(FORMATS))
@pytest.mark.parametrize("side", ["A", "B"])
@pytest.mark.parametrize("other", sorted(FORMATS))
def test_every_finite_fp8_code_reaches_gfx942s_fp8_unit_as_fnuz_exactly(dtype, side, other):
    """The native path (no e5m2 infinity in the wave: the two are made 0 here): each OCP code
    rebiased to FNUZ in registers, the product kept in quarter units, is its value again --
    -0, every NaN code, subnormals, the largest -- for each of the four instructions
    (fp8/bf8 x fp8/bf8). Each fix-up undone gives wrong values for its formats."""
    codes = np.arange(256, dtype=np.uint8)
    if dtype == "f8e5m2":
        codes[[0x7C, 0xFC]] = 0
    got, want = code_run("gfx942", dtype, side, other, codes)
    assert same_values(got, want), (got, want)
    assert np.isnan(want).sum() == (2 if dtype == "f8e4m3" else 6)
    if (side, other) != ("A", "f8e5m2"):
        return                  # the slips once per format (each is a build)
    path = HEADERS / "hip" / "templates" / "mfma.h"
    text = path.read_text()
    for good, bad, formats in FNUZ_FIXUPS:
        assert good in text
        if dtype in formats:
            got, _ = code_run("gfx942", dtype, side, other, codes,
                              (("mfma.h", text.replace(good, bad)),))
            assert not same_values(got, want), bad


def with_infinities(inputs: dict) -> dict:
    """A few e5m2 infinities (and a NaN) among finite codes: an infinity in A's row 3 and one
    in B's column 2 (of the other sign), an infinity times a zero, a NaN in A's row 9."""
    A, B = inputs["A"].copy(), inputs["B"].copy()
    A[3, 5] = np.float32("inf")
    B[7, 2] = -np.float32("inf")
    A[11, 0] = np.float32("inf")
    B[0, :] = 0
    A[9, 20] = np.float32("nan")
    return {"A": A, "B": B}


@pytest.mark.cxx
def test_e5m2_infinities_on_gfx942_give_what_the_interpreter_gives():
    """e5m2's infinities have no FNUZ code: their k-steps run through f16, where they are
    infinities, and the other rows and columns stay exact. A slip in that path (its words
    paired wrongly) gives wrong numbers."""
    a, b = "f8e5m2", "f8e5m2"
    kernel, source, _, device = rendered(GEMM.format(a=a, b=b), "gfx942", tuple(EDGE.items()))
    inputs = with_infinities(inputs_for("gemm", a, b, EDGE))
    want = run_kernel(kernel, inputs, shapes=EDGE)["C"]          # the interpreter
    assert np.isinf(want).any() and np.isnan(want).any()
    finite = np.isfinite(want)
    A = np.abs(inputs["A"].astype(np.float64))
    B = np.abs(inputs["B"].astype(np.float64))
    with np.errstate(invalid="ignore"):
        bound = EDGE["K"] * 2.0 ** -24 * (A @ B) + 1e-30

    def check(got):
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_array_equal(got[~finite], want[~finite])
        assert (np.abs(got[finite] - want[finite]) <= bound[finite]).all()

    for config in (dict(), dict(order="reverse"), dict(order="random", seed=5)):
        check(emulated(source, device)(kernel, inputs, EDGE, **config)["C"])
    path = HEADERS / "hip" / "templates" / "mfma.h"
    text = path.read_text()
    good = "bf[ni][h] = fp8x2_to_f16x2<B_E5M2>(b[ni][w], h);"
    assert good in text
    slip = (("mfma.h", text.replace(good, "bf[ni][h] = fp8x2_to_f16x2<B_E5M2>(b[ni][1 - w], h);")),)
    with pytest.raises(AssertionError):
        check(emulated(source, device, slip)(kernel, inputs, EDGE)["C"])
    slip = (("mfma.h", text.replace("const _Float16 q = static_cast<_Float16>(0.25f);",
                                    "const _Float16 q = static_cast<_Float16>(1.0f);")),)
    with pytest.raises(AssertionError):
        check(emulated(source, device, slip)(kernel, inputs, EDGE)["C"])
    slip = (("mfma.h", text.replace("0x7c7c7c7cu", "0x7d7d7d7du")),)   # infinities unseen
    with pytest.raises(AssertionError):
        check(emulated(source, device, slip)(kernel, inputs, EDGE)["C"])


# both operands quantized in registers: the atom's register layouts (not the LDS reads) place
# each code, packed four to a word on the way to the instruction
REGS = """
kernel regs(A: f32[M, K], B: f32[K, N]) -> (C: f32[M, N]) {
  dims M = 512, N = 512, K = 512
  tile BM in [64], BN in [64], BK in [32]
  parallel i: BM of M, j: BN of N {
    acc = zeros(f32[BM, BN])
    for k: BK of K {
      acc += ((load(A[i, k]) / 2) as f8e5m2) @ ((load(B[k, j]) / 2) as f8e4m3)
    }
    store(C[i, j], acc)
  }
}
"""


@pytest.mark.cxx
def test_fp8_operands_quantized_in_registers_reach_gfx942s_fp8_unit():
    kernel, source, _, device = rendered(REGS, "gfx942", tuple(EDGE.items()))
    assert "ptc::MfmaFnuz<32, 32, 16, true, false>" in source
    rng = np.random.default_rng(3)
    inputs = {"A": rng.normal(0, 50, (EDGE["M"], EDGE["K"])).astype(np.float32),
              "B": rng.normal(0, 2, (EDGE["K"], EDGE["N"])).astype(np.float32)}
    want = run_kernel(kernel, inputs, shapes=EDGE)["C"]
    qa = (inputs["A"] / 2).astype(ml_dtypes.float8_e5m2)
    qb = (inputs["B"] / 2).astype(ml_dtypes.float8_e4m3fn)
    close(want, formula("gemm", {"A": qa, "B": qb}), {"A": qa, "B": qb})
    for config in (dict(), dict(order="reverse"), dict(order="random", seed=5)):
        close(emulated(source, device)(kernel, inputs, EDGE, **config)["C"], want.astype(np.float64),
              {"A": qa, "B": qb})


# ---- the emulation sees wrong layouts ---------------------------------------------------------
HEADERS = Path(__file__).resolve().parent.parent / "ptc" / "targets"
# (header, a fragment of the FP8 path, the same with a slip), per backend
SLIPS = {
    "sm80": [("mma_sync.cuh",     # A's bytes {2,3} of register 0 paired with k' of register 1
              "fp8x2_to_f16x2<A_E5M2>(a[2 * s], 1),\n",
              "fp8x2_to_f16x2<A_E5M2>(a[2 * s + 1], 1),\n"),
             ("mma_sync.cuh",     # B's halves of k in the wrong order
              "fp8x2_to_f16x2<B_E5M2>(b[s], 0), fp8x2_to_f16x2<B_E5M2>(b[s], 1)",
              "fp8x2_to_f16x2<B_E5M2>(b[s], 1), fp8x2_to_f16x2<B_E5M2>(b[s], 0)"),
             ("mma_sync.cuh",     # e4m3 without the times 256
              "const uint32_t v = f16x2_times_256(bits);", "const uint32_t v = bits;")],
    "gfx90a": [("mfma.h",            # B's halves of k in the wrong order
             "fp8x2_to_f16x2<B_E5M2>(b[0], 0), fp8x2_to_f16x2<B_E5M2>(b[0], 1)",
             "fp8x2_to_f16x2<B_E5M2>(b[0], 1), fp8x2_to_f16x2<B_E5M2>(b[0], 0)"),
            ("mfma.h",            # e4m3's second byte shifted one bit too far
             "f16_times_256((y & 0x7f00u) >> 1)", "f16_times_256((y & 0x7f00u) >> 2)")],
    "gfx942": [("mfma.h",         # the accumulator scaled back by 2, not 4
                "I::template scale<MI * NI * I::CREGS>(c, 4.0f);",
                "I::template scale<MI * NI * I::CREGS>(c, 2.0f);"),
               ("mfma.h",         # a lane's two words of k swapped in A's 64-bit operand
                "const long x = word_pair(a), y = word_pair(b);",
                "const uint32_t swapped[2] = {a[1], a[0]};\n"
                "const long x = word_pair(swapped), y = word_pair(b);")],
}
SLIPS["sm90"] = SLIPS["sm80"]


@pytest.mark.cxx
@pytest.mark.parametrize("target", sorted(INSTRUCTIONS))
def test_a_wrong_layout_gives_wrong_numbers(target):
    kernel, source, _, device = rendered(GEMM.format(a="f8e4m3", b="f8e5m2"), target,
                                         tuple(EDGE.items()))
    inputs = inputs_for("gemm", "f8e4m3", "f8e5m2", EDGE)
    want = formula("gemm", inputs)
    run = emulated(source, device)
    close(run(kernel, inputs, EDGE)["C"], want, inputs)
    broken = run(kernel, inputs, EDGE, break_layout=True)["C"]     # the instruction's a1, a2
    assert (np.abs(broken - want) > 1e-3 * np.abs(want)).mean() > 0.5
    for header, good, bad in SLIPS[target]:
        text = (HEADERS / device.backend / "templates" / header).read_text()
        assert good in text, f"{header} no longer holds {good!r}"
        got = emulated(source, device, ((header, text.replace(good, bad)),))(
            kernel, inputs, EDGE)["C"]
        assert (np.abs(got - want) > 1e-3 * np.abs(want)).mean() > 0.25, (header, bad)


# ---- real builds ------------------------------------------------------------------------------
def prepared_file(tmp_path, text: str, target: str):
    from ptc.runtime import prepare

    path = tmp_path / "fp8.pt"
    path.write_text(text)
    return prepare(path, target, shapes={"M": 1024, "N": 1024, "K": 1024})


@pytest.mark.nvcc
@pytest.mark.parametrize("target", ["sm80", "sm90"])
@pytest.mark.parametrize("name", ["gemm", "scaled"])
def test_the_fp8_gemm_builds_with_hmma_and_no_spills(name, target, tmp_path):
    import importlib

    from ptc.runtime.mainloop import mainloop_reports
    from ptc.runtime.symbols import kernel_name

    build = importlib.import_module("ptc.runtime.build")
    text = (GEMM if name == "gemm" else SCALED).format(a="f8e4m3", b="f8e5m2")
    prepared = prepared_file(tmp_path, text, target)
    if name == "scaled" and target == "sm90":     # K-major operands: wgmma FP8 (part 3c)
        pytest.skip("sm90 takes wgmma FP8 for K-major operands (tests/test_wgmma_fp8*)")
    assert INSTRUCTIONS[target] in prepared.source
    folder = tmp_path / "build"
    build.write_build_dir(folder, kernel_source=prepared.source, signature=prepared.signature,
                          arch=prepared.device.arch, target=target,
                          plan_json=prepared.plan_json)
    result = build.build(folder, prepared.device.arch, report_only=True)
    assert result.ptxas.spills == 0, result.ptxas.text
    sass = build.sass(folder)
    (loop,) = [r for r in mainloop_reports(sass) if kernel_name(r.kernel).endswith("<true>")]
    mnemonics = dict(loop.mnemonics)
    hmma = sum(n for op, n in mnemonics.items() if op.startswith("HMMA.16816.F32"))
    assert hmma > 0 and hmma % 2 == 0, mnemonics
    assert not any(op.startswith(("IMMA", "HGMMA")) for op in mnemonics), mnemonics
    print(target, name, loop.instructions if hasattr(loop, "instructions") else "", mnemonics)


# ---- the plan: atoms, cost model, explain -----------------------------------------------------
@pytest.mark.parametrize("target", ["sm80", "sm90"])
def test_the_cost_model_counts_the_widening_instructions(target):
    """The mma step of an FP8 product on sm80/sm90's mma.sync issues, per warp and k-step,
    the conversions of its operand registers (a 4-byte A register per atom row and k-step
    is 4 words, a B one 2): e4m3 A and e5m2 B at their per-word counts, nothing for f16."""
    from ptc import driver
    from ptc.lower.costs import WIDEN_INSTRUCTIONS_PER_WORD as PER

    tiles = (("BM", 64), ("BN", 64), ("BK", 64))
    simt = {}
    for a, b in (("f8e4m3", "f8e5m2"), ("f16", "f16")):
        kernel = typed(GEMM.format(a=a, b=b), EVEN)
        kernels, _, _, _ = driver.lowered(kernel, target, shapes=EVEN, tiles=dict(tiles))
        (low,) = kernels
        (mma,) = [op for op in _walk(low) if type(op).__name__ == "Mma"]
        (cost,) = [c for c in low.costs if c.task == mma.task]
        simt[a] = cost.simt_instructions
        if a == "f8e4m3":
            assert mma.atom.widens_to == "f16"
            want = (4 * mma.mi * PER["f8e4m3"] + 2 * mma.ni * PER["f8e5m2"]) * mma.ks
    assert simt["f8e4m3"] - simt["f16"] == want > 0


def test_gfx942_times_fp8_at_its_fp8_rate_and_counts_the_fnuz_fixups():
    """gfx942's FP8 MFMAs run at the YAML's FP8 rate (twice f16's), and the mma step issues,
    per wave and k-step, the fix-up of each operand register (two per atom row or column:
    eight bytes a lane) and, per tile, the accumulator's two scalings."""
    from ptc import driver
    from ptc.devices import get_device
    from ptc.lower.atoms import rate_dtype
    from ptc.lower.costs import FNUZ_FIXUP_INSTRUCTIONS_PER_WORD as PER
    from ptc.lower.costs import FNUZ_SCALE_INSTRUCTIONS_PER_REGISTER as SCALE

    device = get_device("gfx942")
    (unit,) = [u for u in device.units if u.kind == "mma"]
    for f in FORMATS:
        assert rate_dtype(device, f) == f
        assert unit.throughput[f] == 2 * unit.throughput["f16"]
    tiles = {"BM": 64, "BN": 64, "BK": 64}
    simt = {}
    for a, b in (("f8e4m3", "f8e5m2"), ("f16", "f16")):
        kernel = typed(GEMM.format(a=a, b=b), EVEN)
        (low,), _, _, _ = driver.lowered(kernel, "gfx942", shapes=EVEN, tiles=tiles)
        (mma,) = [op for op in _walk(low) if type(op).__name__ == "Mma"]
        (cost,) = [c for c in low.costs if c.task == mma.task]
        simt[a] = cost.simt_instructions
        if a == "f8e4m3":
            at = mma.atom
            assert at.fnuz and not at.widens_to and at.name.endswith("f8")
            want = ((2 * mma.mi * PER["f8e4m3"] + 2 * mma.ni * PER["f8e5m2"]) * mma.ks
                    + SCALE * mma.mi * mma.ni * at.m * at.n // 64)
    assert simt["f8e4m3"] - simt["f16"] == want > 0


def test_explain_names_gfx942s_fp8_matrix_unit():
    from ptc.devices import get_device
    from ptc.explain import explain
    from ptc.interp import bind_dims
    from ptc.sched.search import search

    kernel = typed(GEMM.format(a="f8e4m3", b="f8e5m2"), EVEN)
    dims = {"M": 1024, "N": 1024, "K": 1024}
    expl = explain(search(kernel, get_device("gfx942"), bind_dims(kernel, dims, {})))
    unit = [r.text for r in expl.why if r.aspect == "unit"]
    assert unit == [
        "mma_acc runs on the FP8 matrix unit at its FP8 rate: its instructions read the FNUZ "
        "formats, so each register of four OCP codes is rebiased in registers (-0 and NaN fixed "
        "up; a code read as FNUZ is half its value) and the accumulator is kept in quarter "
        "units, exact; a k-step whose e5m2 operands hold an infinity (no FNUZ code) is "
        "multiplied through f16 instead"], unit
    assert "CUDA cores" not in " ".join(r.text for r in expl.why)


def _walk(kernel):
    from ptc.lower import ir

    return ir.walk(kernel.body, fills=False)


@pytest.mark.parametrize("target", ["sm80", "sm90"])
def test_explain_says_fp8_is_widened_to_f16_in_registers(target):
    from ptc.devices import get_device
    from ptc.explain import explain
    from ptc.interp import bind_dims
    from ptc.sched.search import search

    kernel = typed(GEMM.format(a="f8e4m3", b="f8e5m2"), EVEN)
    dims = {"M": 1024, "N": 1024, "K": 1024}
    expl = explain(search(kernel, get_device(target), bind_dims(kernel, dims, {})))
    text = " ".join(" ".join(str(x) for x in vars(r).values()) for r in expl.why)
    assert "runs on the f16 tensor cores" in text, text
    assert "converted to f16 in registers (exact for every FP8 value)" in text
    if target == "sm90":        # B [K, N] is not K-major: no wgmma FP8 (part 3c)
        assert "mma.sync: this plan is not warp-specialized" in text


# the MFMAs each AMD build may hold: gfx942's FP8 instructions for the operands' formats, and
# (an e5m2 operand: the k-steps with an infinity) the f16 ones
AMD_MFMA = {("gfx90a", "f8e4m3", "f8e5m2"): (("v_mfma_f32_32x32x8f16", "v_mfma_f32_16x16x16f16"), ()),
            ("gfx942", "f8e4m3", "f8e5m2"): (("v_mfma_f32_32x32x16_fp8_bf8",
                                              "v_mfma_f32_16x16x32_fp8_bf8"),
                                             ("v_mfma_f32_32x32x8_f16", "v_mfma_f32_16x16x16_f16")),
            ("gfx942", "f8e4m3", "f8e4m3"): (("v_mfma_f32_32x32x16_fp8_fp8",
                                              "v_mfma_f32_16x16x32_fp8_fp8"), ())}


@pytest.mark.hip
@pytest.mark.parametrize("target, a, b", sorted(AMD_MFMA))
@pytest.mark.parametrize("name", ["gemm", "scaled"])
def test_the_fp8_gemm_builds_for_amd_with_mfma_in_the_main_loop(name, target, a, b, tmp_path):
    import importlib

    import ptc.runtime as R
    from ptc.targets.hip import toolchain as hip

    build = importlib.import_module("ptc.runtime.build")
    try:
        hip.find_compiler(target)
    except R.BuildError as exc:
        pytest.skip(f"no HIP compiler here: {exc.message}")
    text = (GEMM if name == "gemm" else SCALED).format(a=a, b=b)
    prepared = prepared_file(tmp_path, text, target)
    assert INSTRUCTIONS[target] in prepared.source
    folder = tmp_path / "build"
    build.write_build_dir(folder, kernel_source=prepared.source, signature=prepared.signature,
                          arch=prepared.device.arch, target=target,
                          plan_json=prepared.plan_json, backend="hip")
    report = build.build(folder, report_only=True).resources
    assert report.spills == 0 and report.scratch_bytes == 0, report.alerts()
    kernels = [k for k in report.kernels if k.name.startswith(f"ptc_{name}_kernel")]
    assert kernels
    wanted, fallback = AMD_MFMA[target, a, b]
    for k in kernels:
        assert k.loop_count("v_mfma") > 0, k.name
        mfma = dict(k.mfma)
        assert any(op in wanted for op in mfma), mfma
        assert all(op in wanted + fallback for op in mfma), mfma
        print(target, name, k.name, mfma, k.loop_count("v_"), k.loop_count("v_mfma"))
