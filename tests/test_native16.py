"""16-bit arithmetic computed in 16 bits (ptc.render.cexpr, `native16`).

The language rounds every f16 / bf16 operation to its dtype, and the interpreter computes
each in f32 and rounds once. A renderer whose target has 16-bit instructions (CUDA: f16 and
bf16; HIP: f16) issues them for +, - and * and for integer -> 16-bit conversions instead of
converting to f32 and back around each operation. That is only right if the two give the
same bits, which holds because f32 carries 24 >= 2 * 11 + 2 bits (a result rounded first to
f32, then to f16, is the exact result rounded to f16). The first test checks that claim
against exact float64 arithmetic; the emulated runs check the kernels bit for bit against
the interpreter on every target; the SASS check is why it was done (the W4A16 main loop).
"""
from __future__ import annotations

import importlib
import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from ptc import driver
from ptc.fuzz.check import TARGETS
from ptc.grammar import parse
from ptc.interp import run_kernel
from ptc.sema import check
from ptc.lower import ir
from ptc.lower.program import reads as lower_reads
from ptc.sema import printer as sema_printer
from ptc.sema import typed as T

ROOT = Path(__file__).resolve().parent.parent


def typed(src: str, shapes: dict[str, int]):
    return check(parse(src, "k.pt"), shapes).kernels[0]


def f16_operands(n: int, rng) -> np.ndarray:
    """Random f16 bit patterns, and the values where rounding is hardest: zeros, the
    subnormals' edges, the largest finite values, infinities and NaN."""
    special = np.array([0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF,
                        0x7C00, 0xFC00, 0x7E00, 0x3C00, 0x3C01, 0x3BFF], np.uint16)
    bits = np.concatenate([special, rng.integers(0, 1 << 16, n, dtype=np.uint16)])
    return bits.view(np.float16)


@pytest.mark.parametrize("op", [np.add, np.subtract, np.multiply])
def test_an_f16_operation_in_f32_rounds_as_the_exact_one(op):
    """The interpreter's f16 operation (in f32, rounded to f16) is the 16-bit instruction's
    (the exact result rounded to f16): double rounding through f32 never changes it."""
    rng = np.random.default_rng(7)
    a, b = f16_operands(200_000, rng), f16_operands(200_000, rng)[::-1]
    with np.errstate(all="ignore"):
        through_f32 = op(a.astype(np.float32), b.astype(np.float32)).astype(np.float16)
        exact = op(a.astype(np.float64), b.astype(np.float64))   # exact: 40 bits at most
        once = exact.astype(np.float16)                          # one rounding to nearest even
    np.testing.assert_array_equal(through_f32.view(np.uint16)[~np.isnan(once)],
                                  once.view(np.uint16)[~np.isnan(once)])
    assert np.array_equal(np.isnan(through_f32), np.isnan(once))


ARITHMETIC = """
kernel h16(X: f16[M, N], Y: bf16[M, N], Q: i32[M, N], s: f16[N], t: bf16[N])
    -> (A: f16[M, N], B: bf16[M, N], C: f32[M, N]) {
  parallel i: BM of M, j: BN of N {
    x = load(X[i, j])
    y = load(Y[i, j])
    q = load(Q[i, j])
    srow = load(s[j])[None, :]
    store(A[i, j], ((((q & 15) - 8) as f16) * srow + x * 0.5) - 3.0)
    store(B[i, j], (y * load(t[j])[None, :] - (q as bf16)) + y)
    store(C[i, j], ((x * x) as f32) + ((y - y * 2.0) as f32))
  }
}
"""
SHAPES = {"M": 21, "N": 37}


def arithmetic_inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(11)
    m, n = SHAPES["M"], SHAPES["N"]
    x = f16_operands(m * n, rng)[:m * n].reshape(m, n)
    y = (rng.standard_normal((m, n)) * 1e30).astype(np.float32)
    y.flat[:4] = [np.inf, -np.inf, 3e38, 1e-40]
    q = rng.integers(-(1 << 20), 1 << 20, (m, n)).astype(np.int32)
    q.flat[:3] = [65519, 65520, -(1 << 31)]           # the last f16 below inf, the first at it
    s = f16_operands(n, rng)[:n]
    t = (rng.standard_normal(n) * 1e5).astype(np.float32)
    return {"X": x, "Y": y.astype(ml_dtypes.bfloat16), "Q": q, "s": s,
            "t": t.astype(ml_dtypes.bfloat16)}


def same_values(got, want, what: str) -> None:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=what)
    np.testing.assert_array_equal(got[~np.isnan(got)], want[~np.isnan(want)], err_msg=what)


def test_the_renderer_computes_in_16_bits_what_its_target_has():
    """CUDA: f16 and bf16 +, -, * and int -> 16-bit conversions in 16 bits; HIP: f16 only
    (CDNA2/3 have no bf16 arithmetic), bf16 in f32. An integer whose range fits 16 bits
    ((q & 15) - 8) converts from 16 bits, any other (q) from 32."""
    kernel = typed(ARITHMETIC, SHAPES)
    for target in TARGETS:
        source = driver.render(kernel, target, shapes=SHAPES)[0]
        f16 = "__half" if target.startswith("sm") else "ptc::f16"
        bf16 = "__nv_bfloat16" if target.startswith("sm") else "ptc::bf16"
        assert "ptc::mul_rn(" in source and f"ptc::from_short<{f16}>" in source, target
        assert (f"ptc::from_int<{bf16}>" in source) == target.startswith("sm"), target
        assert f"ptc::from_short<{bf16}>" not in source, target


def test_integer_ranges():
    """ptc.sema.ranges: what bounds an integer expression, and where nothing does."""
    from ptc.sema.ranges import fits_16_bits, int_range

    q = T.Var("q", T.TileType("i32", (4,)))
    z = T.Convert(T.Var("z", T.TileType("u8", (4,))), T.TileType("i32", (4,)))

    def op(name, a, b):
        return T.Elementwise(name, (a, b), T.TileType("i32", (4,)))

    def c(n):
        return T.Const(n, T.TileType("i32"))

    nibble = op("bitand", op("shr", q, c(28)), c(15))
    assert int_range(nibble) == (0, 15)
    assert int_range(op("sub", nibble, z)) == (-255, 15)
    assert int_range(op("shr", q, c(20))) == (-2048, 2047)       # arithmetic shift
    assert int_range(op("mul", op("sub", nibble, c(8)), c(-3))) == (-21, 24)
    assert int_range(q) is None and int_range(op("add", q, c(1))) is None
    assert int_range(op("mul", op("bitand", q, c(1 << 30)), c(4))) is None   # past i32
    assert fits_16_bits(op("sub", op("bitand", q, c(32767)), c(16384)))
    assert not fits_16_bits(op("bitand", q, c(65535)))


def test_the_lowered_kernel_records_it_and_the_cost_model_counts_it():
    """The decision is the lowering's (LoweredKernel.arith16, from the renderer's
    capabilities), and the cost model counts what each form issues: in 16 bits one
    instruction per operation (a product never fused into the add: the .rn forms), in f32
    two more for the conversion to 16 bits and back; only f32 products fuse."""
    from ptc.lower.costs import ROUND_TRIP_INSTRUCTIONS, expression_counts

    kernel = typed(ARITHMETIC, SHAPES)
    for target, want in (("sm80", ("bf16", "f16")), ("sm90", ("bf16", "f16")),
                         ("gfx90a", ("f16",)), ("gfx942", ("f16",))):
        lows = driver.lowered(kernel, target, shapes=SHAPES)[0]
        assert all(low.arith16 == want for low in lows), target

    def multiply_add(dtype: str):
        t = T.TileType(dtype, (4, 4))
        x, y = T.Var("x", t), T.Var("y", t)
        return T.Elementwise("add", (T.Elementwise("mul", (x, y), t), x), t)

    assert expression_counts(multiply_add("f32"), {})[0] == 1
    assert expression_counts(multiply_add("f16"), {}, arith16=("f16",))[0] == 2
    assert expression_counts(multiply_add("bf16"), {}, arith16=("f16",))[0] == \
        2 + 2 * ROUND_TRIP_INSTRUCTIONS


@pytest.mark.cxx
def test_16_bit_arithmetic_gives_the_interpreters_bits_on_every_target():
    from ptc.render.emulate import build_emulated

    kernel = typed(ARITHMETIC, SHAPES)
    inputs = arithmetic_inputs()
    with np.errstate(all="ignore"):
        want = run_kernel(kernel, inputs, shapes=SHAPES)
    assert np.isinf(want["A"]).any() and np.isnan(want["A"]).any()   # the edges are reached
    for target in TARGETS:
        source, _, _, device, _ = driver.render(kernel, target, shapes=SHAPES)
        got = build_emulated(source, backend=device)(kernel, inputs, SHAPES)
        for name in want:
            same_values(got[name], want[name], f"{target}: {name}")


DEQUANTIZED = """
kernel deq(A: f16[M, K], W: i32[K, N], S: f16[N]) -> (C: f32[M, N]) {
  parallel i: BM of M, j: BN of N {
    acc = zeros(f32[BM, BN])
    for k: BK of K {
      w = load(W[k, j])
      acc += load(A[i, k]) @ ((((w >> 4) & 15) - 8) as f16 * load(S[j])[None, :])
    }
    store(C[i, j], acc)
  }
}
"""
DEQ_SHAPES = {"M": 40, "N": 72, "K": 100}


@pytest.mark.cxx
def test_an_operand_computed_in_16_bits_feeds_the_tensor_cores_on_every_target():
    """The matrix unit's register operand packed from values computed in 16 bits, at edge
    tiles on every axis. The products are exact (small integers times powers of two)."""
    from ptc.render.emulate import build_emulated

    kernel = typed(DEQUANTIZED, DEQ_SHAPES)
    rng = np.random.default_rng(3)
    inputs = {"A": rng.integers(-4, 5, (40, 100)).astype(np.float16),
              "W": rng.integers(-(1 << 31), 1 << 31, (100, 72), dtype=np.int64).astype(np.int32),
              "S": (2.0 ** rng.integers(-3, 3, 72)).astype(np.float16)}
    want = (inputs["A"].astype(np.float64)
            @ ((((inputs["W"] >> 4) & 15) - 8) * inputs["S"].astype(np.float64)))
    np.testing.assert_array_equal(run_kernel(kernel, inputs, shapes=DEQ_SHAPES)["C"], want)
    for target in TARGETS:
        source, _, _, device, _ = driver.render(kernel, target, shapes=DEQ_SHAPES)
        # one value at a time, or two (ptc.lower.pairs, where the renderer packs f16)
        assert "ptc::mul_rn(" in source or "ptc::pk_mul<" in source, target
        got = build_emulated(source, backend=device)(kernel, inputs, DEQ_SHAPES)
        np.testing.assert_array_equal(got["C"], want, err_msg=target)


def sass_main_loop(tmp_path, sample: str, target: str, tiles: dict | None):
    """(the main-loop report of a sample's aligned kernel from its SASS, the plan's tiles):
    `tiles` pins them (None: the search's)."""
    from ptc.runtime import prepare
    from ptc.runtime.mainloop import mainloop_reports
    from ptc.runtime.symbols import kernel_name
    build = importlib.import_module("ptc.runtime.build")

    prepared = prepare(ROOT / "samples" / f"{sample}.pt", target, tiles=tiles)
    folder = tmp_path / f"{sample}.{target}"
    build.write_build_dir(folder, kernel_source=prepared.source, signature=prepared.signature,
                          arch=prepared.device.arch, target=target, plan_json=prepared.plan_json)
    build.build(folder, prepared.device.arch, report_only=True)
    (loop,) = [r for r in mainloop_reports(build.sass(folder))
               if kernel_name(r.kernel).endswith("<true>")]
    return loop, dict(prepared.plans[0].tiles)


@pytest.mark.nvcc
def test_the_w4a16_main_loop_issues_at_most_1_5x_the_f16_gemms_on_sm80(tmp_path):
    """Issue 21's bar for the dequantizing main loop, from the SASS: instructions per
    tensor-core MFLOP against the f16 GEMM sample at the same tiles (1.06x with the planes
    in pairs, 1.24x before), and the dequantization two f16 values at a time (HADD2 and
    HMUL2 per B register, ptc.lower.pairs) with no conversion instruction (I2F)."""
    w4a16, tiles = sass_main_loop(tmp_path, "w4a16_gemm", "sm80", None)
    gemm, _ = sass_main_loop(tmp_path, "gemm", "sm80", tiles)
    assert w4a16.count("HMUL2") >= w4a16.count("HMMA") // 2, dict(w4a16.mnemonics)
    assert w4a16.count("HADD2") >= w4a16.count("HMMA") // 2, dict(w4a16.mnemonics)
    assert not any(op.startswith("I2F") for op in dict(w4a16.mnemonics)), dict(w4a16.mnemonics)
    assert w4a16.per_mflop <= 1.5 * gemm.per_mflop, (tiles, w4a16.per_mflop, gemm.per_mflop)


@pytest.mark.nvcc
def test_the_sm90_w4a16_planes_reach_the_tensor_cores_from_registers(tmp_path):
    """sm90 multiplies each dequantized plane swapped, C^T = W^T A^T (ptc.lower.
    specialized_plan.rs_swap): the plane is wgmma's A from its fragment registers (HGMMA
    with a register operand), so nothing is staged in shared memory (no STS, no named
    barrier in the loop), and the consumer reads the tile of packed words once for the
    eight planes (nvcc merges the planes' reads). At the tiles of the staged version (BM
    128, BN 64, BK 32), issue 21's bar: 1.45x the f16 GEMM's instructions per MFLOP (1.71x
    before the words' swizzled addresses were shared by the registers 8 rows apart and
    each nibble's mask and bias were one LOP3; 2.09x staged, 3.9x before the pairs)."""
    from ptc.runtime.mainloop import functions

    w4a16, tiles = sass_main_loop(tmp_path, "w4a16_gemm", "sm90",
                                  {"BM": 128, "BN": 64, "BK": 32})
    gemm, _ = sass_main_loop(tmp_path, "gemm", "sm90", tiles)
    ops = dict(w4a16.mnemonics)
    assert not any(op.startswith(("STS", "BAR")) for op in ops), ops
    # the words once (16 a thread), and per plane the scale and zero point of the thread's
    # two columns of the fragment (n and n + 8: not adjacent, two loads each)
    assert w4a16.count("LDS") <= 48, ops
    assert w4a16.per_mflop <= 1.5 * gemm.per_mflop, (tiles, w4a16.per_mflop, gemm.per_mflop)
    # a nibble's mask and bias in one LOP3 (two where the compiler chose): one per pair
    assert w4a16.count("LOP3.LUT") <= w4a16.count("HMUL2") + 48, ops
    build = importlib.import_module("ptc.runtime.build")
    (true,) = [lines for name, lines in functions(build.sass(tmp_path / "w4a16_gemm.sm90"))
               .items() if "ILb1E" in name]
    hgmma = [text for _, text in true if "HGMMA" in text]
    assert len(hgmma) >= 16 and all(re.search(r"HGMMA\.\S+ R\d+, R\d+, gdesc", t)
                                    for t in hgmma), hgmma[:2]


def test_the_packed_words_are_read_from_shared_memory_once_per_iteration():
    """ptc.lower.shared_once: the eight planes of W4A16 read the same words; on gfx942 the
    words are read into registers once (a Compute of w itself) and every plane reads those;
    where the register estimate leaves no margin (sm80's plan; sm90's consumer, whose
    planes stay in registers until their swapped wgmma retires), each plane reads shared
    memory (on sm90 nvcc reads the words once anyway: the SASS test above)."""
    from ptc.driver import check_file

    kernel = check_file(ROOT / "samples" / "w4a16_gemm.pt").kernels[0]
    for target, once in (("gfx942", True), ("gfx90a", True), ("sm80", False), ("sm90", False)):
        (low,) = driver.lowered(kernel, target)[0]
        computes = [op for op in ir.walk(low.body) if isinstance(op, ir.Compute)]
        copies = [op for op in computes if op.expr == T.Var("w", op.expr.type)
                  if isinstance(op.expr, T.Var)]
        planes = [op for op in computes if "bitand" in sema_printer.expr(op.expr)]
        assert len(planes) == 8, target
        assert (len(copies) == 1) == once, target
        reads = {n for op in planes for n in lower_reads(op.expr)}
        assert reads >= ({"w@regs"} if once else {"w"}) and \
            not reads & ({"w"} if once else {"w@regs"}), (target, reads)


@pytest.mark.hip
@pytest.mark.parametrize("target", ["gfx90a", "gfx942"])
def test_the_w4a16_main_loop_on_cdna(target, tmp_path):
    """Issue 21's bar from the AMDGPU assembly: the W4A16 main loop issues at most 1.5x the
    f16 GEMM's instructions per tensor-core MFLOP at the same tiles (gfx942 1.33x, gfx90a
    1.00x with the planes computed in pairs; 1.87x and 1.34x before); the packed words are
    read from LDS once per iteration, not once per plane (32 ds_read_b32 per wave, not
    256); and the nibbles become f16 two at a time through the exponent bias
    (ptc.lower.pairs: v_perm_b32, v_pk_add_f16, v_pk_mul_f16), with no conversion
    instruction at all."""
    from ptc.runtime import prepare
    from ptc.targets.hip.isa import parse_isa
    build = importlib.import_module("ptc.runtime.build")

    def main_loop(sample: str, tiles: dict | None):
        prepared = prepare(ROOT / "samples" / f"{sample}.pt", target, tiles=tiles)
        folder = tmp_path / sample
        build.write_build_dir(folder, kernel_source=prepared.source,
                              signature=prepared.signature, arch=prepared.device.arch,
                              target=target, plan_json=prepared.plan_json,
                              backend=prepared.device.backend)
        build.build(folder, prepared.device.arch, report_only=True)
        report = next(k for k in parse_isa((folder / "kernel.s").read_text()).kernels
                      if k.name.endswith("<true>"))
        return report, dict(prepared.plans[0].tiles)

    w4a16, tiles = main_loop("w4a16_gemm", None)
    gemm, _ = main_loop("gemm", tiles)
    ops = dict(w4a16.loop_mnemonics)
    assert w4a16.loop_mnemonic("ds_read_b32") <= 32, ops
    assert not any(op.startswith("v_cvt") for op in ops), ops
    mfma = sum(n for op, n in ops.items() if op.startswith("v_mfma"))
    for packed in ("v_pk_add_f16", "v_pk_mul_f16"):
        assert w4a16.loop_mnemonic(packed) == 2 * mfma, ops     # a B register per k-step
    assert w4a16.loop_mnemonic("v_perm_b32") == mfma, ops       # a byte pair, two planes
    assert w4a16.loop_mnemonic("v_and_or_b32") == 2 * mfma, ops    # mask and bias in one
    assert w4a16.per_mflop <= 1.5 * gemm.per_mflop, (tiles, w4a16.per_mflop, gemm.per_mflop)
