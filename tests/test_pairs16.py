"""16-bit values computed a register (two values) at a time, integers through the exponent
bias (ptc.lower.pairs, ir.Compute.pairs): the W4A16 dequantization, on every target (CDNA:
v_perm_b32 and v_pk_*_f16; CUDA: PRMT, LOP3, HADD2 / HMUL2, f16 and bf16).

The decision is the lowering's (where the renderer packs the dtype's arithmetic, the layout
pairs its registers and a bounded integer converts); the emulated kernel matches a NumPy
formula at odd shapes in three thread orders; an emulator given a wrong byte selection
fails; the main loop's ISA is checked in test_native16.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from formulas import rel_l2
from ptc import driver
from ptc.driver import check_file
from ptc.lower import ir, pairs
from ptc.render import backend_headers
from ptc.render.emulate import build_emulated

ROOT = Path(__file__).resolve().parent.parent
PAIRS16 = ROOT / "tests" / "coverage" / "pairs16.pt"
TARGETS = ("sm80", "sm90", "gfx90a", "gfx942")
ORDERS = (dict(), dict(order="reverse"), dict(order="random", seed=3))


def computes(kernel, target: str, **shapes) -> list[ir.Compute]:
    (low,) = driver.lowered(kernel, target, shapes=shapes or None)[0]
    return [op for op in ir.walk(low.body) if isinstance(op, ir.Compute)]


def typed_text(text: str, shapes: dict):
    from ptc.grammar import parse
    from ptc.sema import check

    return check(parse(text, "k.pt"), shapes).kernels[0]


def test_the_w4a16_planes_are_computed_in_pairs_where_the_renderer_packs_f16():
    """Every plane of the W4A16 sample, on every target (each renderer packs f16), in the
    single-role plans and sm90's warp-specialized one."""
    kernel = check_file(ROOT / "samples" / "w4a16_gemm.pt").kernels[0]
    for target in TARGETS:
        planes = [op for op in computes(kernel, target) if "bitand" in repr(op.expr)]
        assert len(planes) == 8 and all(op.pairs for op in planes), target


def test_bf16_is_paired_where_the_renderer_packs_it():
    """CUDA packs bf16 (HADD2.BF16), CDNA has no bf16 arithmetic: element-wise there."""
    kernel = check_file(PAIRS16).kernels[1]
    for target, paired in (("sm80", True), ("sm90", True), ("gfx942", False)):
        found = [op.pairs for op in computes(kernel, target, **SHAPE) if "bitand" in repr(op.expr)]
        assert found == [paired], target


SHAPE = dict(M=64, N=64, K=64)
UNBOUNDED = """
kernel k(A: f16[M, K], W: i32[K, N], Z: i32[N]) -> (C: f32[M, N]) {
  tile BM in [64], BN in [64], BK in [32]
  parallel i: BM of M, j: BN of N {
    acc = zeros(f32[BM, BN])
    for k: BK of K {
      acc += load(A[i, k]) @ ((((load(W[k, j]) >> 4) & 15) - load(Z[j])[None, :]) as f16)
    }
    store(C[i, j], acc)
  }
}
"""


def test_an_integer_the_bias_cannot_hold_is_not_paired():
    """A zero point read as i32 has no bound: (q - z) may leave 0..1023's difference, so
    the conversion stays element-wise (and with it the whole expression)."""
    kernel = typed_text(UNBOUNDED, SHAPE)
    (plane,) = [op for op in computes(kernel, "gfx942", **SHAPE) if "bitand" in repr(op.expr)]
    assert not plane.pairs
    assert pairs.form(plane.expr, "f16").kind == "leaf"
    bounded = typed_text(UNBOUNDED.replace("Z: i32[N]", "Z: u8[N]").replace(
        "load(Z[j])[None, :]", "(load(Z[j]) as i32)[None, :]"), SHAPE)
    (plane,) = [op for op in computes(bounded, "gfx942", **SHAPE) if "bitand" in repr(op.expr)]
    assert plane.pairs and pairs.pieces(pairs.form(plane.expr, "f16")) == \
        {"difference", "nibble.high", "biased"}


def test_the_form_reads_every_piece_of_the_coverage_kernel():
    kernel = check_file(PAIRS16).kernels[0]
    (op,) = [op for op in computes(kernel, "gfx942", M=64, N=64, K=64) if op.pairs]
    assert pairs.pieces(pairs.form(op.expr, "f16")) == set(pairs.PIECES)


def pairs16_inputs(M: int, N: int, K: int, seed: int = 7) -> dict:
    rng = np.random.default_rng(seed)
    return {"A": (rng.standard_normal((M, K)) * 0.25).astype(np.float16),
            "W": rng.integers(-(1 << 31), 1 << 31, (K, N), dtype=np.int64).astype(np.int32),
            "X": rng.integers(-(1 << 31), 1 << 31, (K, N), dtype=np.int64).astype(np.int32),
            "S": (2.0 ** rng.integers(-4, 2, N)).astype(np.float16),
            "Z": rng.integers(0, 256, N).astype(np.uint8)}


def pairs16_formula(A, W, X, S, Z) -> np.ndarray:
    """C = A @ (((q0 + (q3 - z)) * s) - (x & 255)), each f16 operation rounded to f16."""
    f16 = np.float16
    q0 = (W & 15).astype(f16)
    q3 = ((W >> 12) & 15).astype(np.int32) - Z.astype(np.int32)[None, :]
    b = ((q0 + q3.astype(f16)) * S[None, :]) - (X & 255).astype(f16)
    return A.astype(np.float64) @ b.astype(np.float64)


@pytest.mark.cxx
@pytest.mark.parametrize("target", TARGETS)
def test_the_emulated_pairs_match_numpy_at_odd_shapes(target):
    kernel = check_file(PAIRS16).kernels[0]
    for shape in (dict(M=64, N=64, K=64), dict(M=70, N=50, K=40)):
        source, _, _, device, _ = driver.render(kernel, target, shapes=shape)
        assert "ptc::nibbles16<" in source and "ptc::pk_sub<" in source
        run = build_emulated(source, backend=device)
        inputs = pairs16_inputs(**shape)
        want = pairs16_formula(**inputs)
        for order in ORDERS:
            got = run(kernel, inputs, shape, **order)["C"]
            assert rel_l2(got, want) < 1e-5, (target, shape, order)


@pytest.mark.cxx
@pytest.mark.parametrize("target,header", [("gfx942", "ptc_types.h"), ("sm80", "ptc_types.cuh")])
def test_an_emulator_given_the_wrong_byte_fails(target, header):
    """The pair code's byte selection is the emulated v_perm_b32's (PRMT's on CUDA):
    selecting the byte next to the nibble's gives wrong numbers, so the check can fail."""
    kernel = check_file(PAIRS16).kernels[0]
    shape = dict(M=64, N=64, K=64)
    source, _, _, device, _ = driver.render(kernel, target, shapes=shape)
    (types,) = [h for h in backend_headers(device.backend) if h.name == header]
    text = types.read_text()
    wrong = text.replace("constexpr uint32_t b = S / 8;", "constexpr uint32_t b = (S / 8 + 1) % 4;")
    assert wrong != text
    inputs = pairs16_inputs(**shape)
    want = pairs16_formula(**inputs)
    right = build_emulated(source, backend=device)(kernel, inputs, shape)["C"]
    bad = build_emulated(source, backend=device,
                         header_overrides={header: wrong})(kernel, inputs, shape)["C"]
    assert rel_l2(right, want) < 1e-5 and rel_l2(bad, want) > 1e-2


W8 = """
kernel w8(A: f16[M, K], Q: u8[K, N], S: f16[N]) -> (C: f32[M, N]) {
  tile BM in [64], BN in [64], BK in [32]
  parallel i: BM of M, j: BN of N {
    acc = zeros(f32[BM, BN])
    for k: BK of K {
      acc += load(A[i, k]) @ ((load(Q[k, j]) as f16) * load(S[j])[None, :])
    }
    store(C[i, j], acc)
  }
}
"""


@pytest.mark.cxx
@pytest.mark.parametrize("target", ["sm80", "gfx942"])
def test_a_loaded_byte_converts_through_the_bias(target):
    """A u8 tile read as it is (no range from an expression, its dtype's 0..255) converts
    two at a time: (0x6400 | q) - 1024.0, then the packed scale."""
    shape = dict(M=70, N=50, K=40)
    kernel = typed_text(W8, shape)
    (op,) = [op for op in computes(kernel, target, **shape) if op.pairs]
    assert pairs.pieces(pairs.form(op.expr, "f16")) == {"offset", "biased", "mul", "pack"}
    rng = np.random.default_rng(5)
    inputs = {"A": (rng.standard_normal((70, 40)) * 0.25).astype(np.float16),
              "Q": rng.integers(0, 256, (40, 50)).astype(np.uint8),
              "S": (2.0 ** rng.integers(-8, -3, 50)).astype(np.float16)}
    b = inputs["Q"].astype(np.float16) * inputs["S"][None, :]
    want = inputs["A"].astype(np.float64) @ b.astype(np.float64)
    source, _, _, device, _ = driver.render(kernel, target, shapes=shape)
    run = build_emulated(source, backend=device)
    for order in ORDERS:
        assert rel_l2(run(kernel, inputs, shape, **order)["C"], want) < 1e-5, order


@pytest.mark.parametrize("compilers", [False, pytest.param(True, marks=pytest.mark.cxx)])
def test_a_named_zero_point_has_its_expression_s_range(compilers):
    """`z = (load(Z[j]) as i32)[None, :]` bound to a name is 0..255 as the inline form is
    (sema.ranges.named_ranges), so the plane is paired the same way, and emulates to NumPy
    (with the host compiler); a name bound twice has no range."""
    from ptc.sema.ranges import named_ranges

    named = UNBOUNDED.replace("Z: i32[N]", "Z: u8[N]").replace(
        "      acc += load(A[i, k]) @ ((((load(W[k, j]) >> 4) & 15) - load(Z[j])[None, :]) as f16)",
        "      z = (load(Z[j]) as i32)[None, :]\n"
        "      q = (load(W[k, j]) >> 4) & 15\n"
        "      acc += load(A[i, k]) @ ((q - z) as f16)")
    kernel = typed_text(named, SHAPE)
    assert named_ranges(kernel) == {"z": (0, 255), "q": (0, 15)}
    (plane,) = [op for op in computes(kernel, "gfx942", **SHAPE) if op.target.startswith("%")
                and op.pairs]
    (low,) = driver.lowered(kernel, "gfx942", shapes=SHAPE)[0]
    assert pairs.pieces(pairs.form(plane.expr, "f16", dict(low.int_ranges))) == \
        {"difference", "nibble.high", "biased"}
    for target in ("sm80", "gfx942") if compilers else ():
        source, _, _, device, _ = driver.render(kernel, target, shapes=SHAPE)
        rng = np.random.default_rng(9)
        inputs = {"A": (rng.standard_normal((64, 64)) * 0.25).astype(np.float16),
                  "W": rng.integers(-(1 << 31), 1 << 31, (64, 64), dtype=np.int64).astype(np.int32),
                  "Z": rng.integers(0, 256, 64).astype(np.uint8)}
        b = (((inputs["W"] >> 4) & 15) - inputs["Z"].astype(np.int32)[None, :]).astype(np.float16)
        want = inputs["A"].astype(np.float64) @ b.astype(np.float64)
        got = build_emulated(source, backend=device)(kernel, inputs, SHAPE)["C"]
        assert rel_l2(got, want) < 1e-5, target
    twice = typed_text(named.replace("      q = (load(W[k, j]) >> 4) & 15\n",
                                     "      q = (load(W[k, j]) >> 4) & 15\n      z = z + 1\n"),
                       SHAPE)
    assert named_ranges(twice) == {"q": (0, 15)}
