"""Issue 21, part 3b: FP8 matrix products. `a @ b` of f8e4m3 / f8e5m2 tiles (the two
formats mixed too) gives f32: exact products (every FP8 value and every product of two is
an f32 value) summed in f32, as f16 products are.

The truth is a formula written here from ml_dtypes' decoding of the codes, in float64
(exact products; sums within the f32 rounding of K terms of the interpreter's order).
"""
from __future__ import annotations

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
    out += [("scaled", "f8e5m2", "f8e4m3", t, "edge") for t in ("sm80", "sm90", "gfx90a",
                                                                  "gfx942")]
    return out


@pytest.mark.cxx
@pytest.mark.parametrize("name, a, b, target, shape", emulated_cases(),
                         ids=["-".join(c) for c in emulated_cases()])
def test_fp8_gemms_on_every_target(name, a, b, target, shape):
    from ptc import driver
    from ptc.render.emulate import build_emulated

    shapes = EVEN if shape == "even" else EDGE
    kernel = typed((GEMM if name == "gemm" else SCALED).format(a=a, b=b), shapes)
    source, _, _, device, _ = driver.render(kernel, target, shapes=shapes)
    run = build_emulated(source, backend=device)
    inputs = inputs_for(name, a, b, shapes)
    want = formula(name, inputs)
    for config in (dict(), dict(order="reverse"), dict(order="random", seed=5)):
        close(run(kernel, inputs, shapes, **config)["C"], want, inputs)
