"""Issue 21, part 2: the FP8 storage dtypes `f8e4m3` (OCP E4M3FN) and `f8e5m2` (OCP E5M2).

The truth here is written from the formats' definitions, not from ml_dtypes or ptc: `decode`
reads a code's sign, exponent and mantissa fields, `encode` picks the nearest of the
format's values (ties to the even code) and saturates past the largest finite one as PTX's
cvt.rn.satfinite does (NaN -> 0x7F; docs/language.md, "Numerics of conversions"). The
reference interpreter must agree with it on every code and on every rounding case, and the
kernels rendered for sm80, sm90, gfx90a and gfx942, emulated on the CPU, must give the same
bits.
"""
from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

import ml_dtypes
import numpy as np
import pytest

from ptc import driver
from ptc.diagnostics import CompileError
from ptc.fuzz.check import TARGETS
from ptc.grammar import parse
from ptc.interp import run_kernel
from ptc.sema import check
from ptc.sema import typed as T

# (exponent bits, mantissa bits, bias, has infinities)
FORMATS = {"f8e4m3": (4, 3, 7, False), "f8e5m2": (5, 2, 15, True)}
NUMPY = {"f8e4m3": ml_dtypes.float8_e4m3fn, "f8e5m2": ml_dtypes.float8_e5m2}
NAN_CODE = 0x7F


# ---- the formats, from their definitions ------------------------------------------------------
def decode(code: int, fmt: str) -> float:
    """The value of an 8-bit code: (-1)^s 2^(e - bias) 1.m, or 2^(1 - bias) 0.m for e = 0;
    E4M3FN spends only S.1111.111 on NaN (no infinities), E5M2 the IEEE way its top
    exponent."""
    ebits, mbits, bias, has_inf = FORMATS[fmt]
    code = int(code)
    sign = -1.0 if code & 0x80 else 1.0
    e = (code >> mbits) & ((1 << ebits) - 1)
    m = code & ((1 << mbits) - 1)
    top = (1 << ebits) - 1
    if has_inf and e == top:
        return sign * math.inf if m == 0 else math.nan
    if not has_inf and e == top and m == (1 << mbits) - 1:
        return math.nan
    if e == 0:
        return sign * math.ldexp(m, 1 - bias - mbits)
    return sign * math.ldexp((1 << mbits) + m, e - bias - mbits)


@lru_cache(maxsize=None)
def finite_codes(fmt: str) -> tuple[tuple[Fraction, int], ...]:
    """(value, code) of every finite non-negative value, by value."""
    out = [(Fraction(decode(c, fmt)), c) for c in range(0x80) if math.isfinite(decode(c, fmt))]
    return tuple(sorted(out))


def largest(fmt: str) -> float:
    return float(finite_codes(fmt)[-1][0])


def encode(x: float, fmt: str) -> int:
    """The code cvt.rn.satfinite gives for the f32 value x: round to nearest, ties to the even
    code; a magnitude beyond the largest finite value (infinities too) saturates to it; NaN
    gives 0x7F; the sign is kept, zeros and underflows included."""
    if math.isnan(x):
        return NAN_CODE
    sign = 0x80 if math.copysign(1.0, x) < 0 else 0
    a = abs(x)
    codes = finite_codes(fmt)
    if a >= codes[-1][0]:
        return sign | codes[-1][1]
    exact = Fraction(a)
    for (lo, lo_code), (hi, hi_code) in zip(codes, codes[1:]):
        if lo <= exact <= hi:
            below, above = exact - lo, hi - exact
            if below < above or (below == above and lo_code % 2 == 0):
                return sign | lo_code
            return sign | hi_code
    raise AssertionError(x)


def test_the_formula_knows_the_formats():
    assert largest("f8e4m3") == 448.0 and largest("f8e5m2") == 57344.0
    assert decode(0x01, "f8e4m3") == 2.0 ** -9 and decode(0x01, "f8e5m2") == 2.0 ** -16
    assert decode(0x08, "f8e4m3") == 2.0 ** -6 and decode(0x04, "f8e5m2") == 2.0 ** -14
    assert decode(0x7C, "f8e5m2") == math.inf and math.isnan(decode(0x7E, "f8e4m3")) is False
    assert [math.isnan(decode(c, "f8e4m3")) for c in range(256)].count(True) == 2
    assert [math.isnan(decode(c, "f8e5m2")) for c in range(256)].count(True) == 6
    assert encode(464.0, "f8e4m3") == 0x7E          # a tie between 448 and (480): to even
    assert encode(-1e9, "f8e5m2") == 0xFB and encode(math.inf, "f8e4m3") == 0x7E


def f32(x: float) -> float:
    return float(np.float32(x))


def rounding_cases(fmt: str) -> list[float]:
    """f32 values that probe every rule: each finite value, the midpoints between neighbours
    (ties) and the f32 values next to them, beyond the largest value, the tiny ones, the
    specials."""
    values = [float(v) for v, _ in finite_codes(fmt)]
    out = []
    for lo, hi in zip(values, values[1:]):
        mid = np.float32((lo + hi) / 2)          # exact: a few bits more than the format's
        out += [lo, float(mid), float(np.nextafter(mid, np.float32(0))),
                float(np.nextafter(mid, np.float32(np.inf)))]
    top = largest(fmt)
    step = top - values[-2]
    out += [top, top + step / 2, top + step / 4, top + step, float(np.nextafter(np.float32(top),
            np.float32(np.inf))), 1e30, f32(3.0e38), math.inf,
            values[1] / 2, values[1] / 4, f32(values[1] * 0.50000006), 1e-30, 1e-45, 0.0,
            math.nan]
    return [f32(v) for v in out]


def cases_grid(fmt: str, shape: tuple[int, int]) -> np.ndarray:
    """The rounding cases, each with both signs (and a negative NaN), over `shape`."""
    cases = rounding_cases(fmt)
    cases = cases + [-c for c in cases]
    assert len(cases) <= shape[0] * shape[1]
    flat = np.resize(np.asarray(cases, np.float32), shape[0] * shape[1])
    return flat.reshape(shape)


def codes_grid(fmt: str, shape: tuple[int, int]) -> np.ndarray:
    """Every code, then again, over `shape`."""
    flat = np.resize(np.arange(256, dtype=np.uint8), shape[0] * shape[1])
    return flat.reshape(shape).view(NUMPY[fmt])


def bits(a) -> np.ndarray:
    return np.asarray(a).view(np.uint8)


def same_floats(got, want) -> bool:
    """Equal values, NaN matching NaN, and zeros of the same sign."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return bool(np.array_equal(got, want, equal_nan=True) and
                np.array_equal(np.signbit(got[got == 0]), np.signbit(want[want == 0])))


# ---- the kernel of the conversions ----------------------------------------------------------
SHAPES = {"M": 37, "N": 29}            # edge tiles on both axes; room for every case
CONVERT = """
kernel convert(F: f32[M, N], G: f32[M, N], P: f8e4m3[M, N], Q: f8e5m2[M, N], H: f16[M, N],
               B: bf16[M, N])
    -> (PF: f8e4m3[M, N], QF: f8e5m2[M, N], PV: f32[M, N], QV: f32[M, N], PH: f16[M, N],
        QB: bf16[M, N], PP: f8e4m3[M, N], QQ: f8e5m2[M, N], PQ: f8e5m2[M, N], QP: f8e4m3[M, N],
        HP: f8e4m3[M, N], BQ: f8e5m2[M, N], IP: f8e4m3[M, N], PI: i8[M, N], SUM: f32[M, N],
        FI: f8e5m2[M, N], FT: f8e4m3[M, N]) {
  parallel i: BM of M, j: BN of N {
    p = load(P[i, j])
    q = load(Q[i, j])
    store(PF[i, j], load(F[i, j]) as f8e4m3)
    store(QF[i, j], load(G[i, j]) as f8e5m2)
    store(PV[i, j], p as f32)
    store(QV[i, j], q)
    store(PH[i, j], p)
    store(QB[i, j], q as bf16)
    store(PP[i, j], p)
    store(QQ[i, j], q)
    store(PQ[i, j], p as f8e5m2)
    store(QP[i, j], q as f8e4m3)
    store(HP[i, j], load(H[i, j]) as f8e4m3)
    store(BQ[i, j], load(B[i, j]) as f8e5m2)
    store(IP[i, j], (index(i)[:, None] * 40 - index(j)[None, :] * 3) as f8e4m3)
    store(PI[i, j], p as i8)
    store(SUM[i, j], p * 0.5 + q - abs(p))
    store(FI[i, j], full(f8e5m2[BM, BN], -inf))
    store(FT[i, j], full(f8e4m3[BM, BN], 0.3))
  }
}
"""


def typed(text: str, shapes=SHAPES) -> T.TypedKernel:
    return check(parse(text, "k.pt"), shapes).kernels[0]


def convert_inputs() -> dict[str, np.ndarray]:
    shape = (SHAPES["M"], SHAPES["N"])
    rng = np.random.default_rng(2)
    halves = (rng.standard_normal(shape) * 60).astype(np.float16)
    halves.flat[:6] = [np.inf, -np.inf, np.nan, 65504, 2.0 ** -24, -2.0 ** -10]
    wide = (rng.standard_normal(shape) * 3e4).astype(np.float32).astype(ml_dtypes.bfloat16)
    wide.flat[:4] = [3e38, -1e-30, np.nan, 61440.0]
    return {"F": cases_grid("f8e4m3", shape), "G": cases_grid("f8e5m2", shape),
            "P": codes_grid("f8e4m3", shape), "Q": codes_grid("f8e5m2", shape),
            "H": halves, "B": wide}


def convert_formula(F, G, P, Q, H, B) -> dict[str, np.ndarray]:
    """Each output from encode/decode and Python floats alone; FP8 outputs as codes."""
    enc = np.vectorize(encode, otypes=[np.uint8])
    dec = np.vectorize(decode, otypes=[np.float64])
    p, q = dec(bits(P), "f8e4m3"), dec(bits(Q), "f8e5m2")
    rows, cols = np.indices(P.shape)
    p32, q32 = p.astype(np.float32), q.astype(np.float32)     # exact
    with np.errstate(invalid="ignore", over="ignore"):
        to_i8 = np.where(np.isnan(p), 0, np.clip(np.round(p), -128, 127))  # half to even
        total = p32 * np.float32(0.5) + q32 - np.abs(p32)    # f32 operations, each rounded
    return {
        "PF": enc(F.astype(np.float64), "f8e4m3"),
        "QF": enc(G.astype(np.float64), "f8e5m2"),
        "PV": p, "QV": q, "PH": p, "QB": q,
        # a value stored into its own dtype keeps its code (NaNs included)
        "PP": bits(P), "QQ": bits(Q),
        "PQ": enc(p, "f8e5m2"), "QP": enc(q, "f8e4m3"),
        "HP": enc(H.astype(np.float64), "f8e4m3"),
        "BQ": enc(B.astype(np.float64), "f8e5m2"),
        "IP": enc((rows * 40 - cols * 3).astype(np.float64), "f8e4m3"),
        "PI": to_i8.astype(np.int8),
        "SUM": total,
        "FI": np.full(P.shape, 0xFC, np.uint8),                # -inf, an f8e5m2 value
        "FT": np.full(P.shape, encode(f32(0.3), "f8e4m3"), np.uint8),
    }


def check_outputs(got: dict, want: dict, where: str) -> None:
    for name, value in want.items():
        out = got[name]
        if out.dtype in (np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)):
            fmt = "f8e4m3" if out.dtype == ml_dtypes.float8_e4m3fn else "f8e5m2"
            out, value = bits(out), np.asarray(value)
            # a NaN moved through a layout conversion may come back as the NaN 0x7F
            nan = np.isnan(np.vectorize(decode, otypes=[np.float64])(value, fmt))
            assert np.isnan(np.vectorize(decode, otypes=[np.float64])(out[nan], fmt)).all(), f"{where}: {name}"
            out, value = np.where(nan, 0, out), np.where(nan, 0, value)
            bad = np.flatnonzero(out != value)
            assert bad.size == 0, (f"{where}: {name}: {bad.size} codes differ, e.g. "
                                   f"{[(hex(a), hex(b)) for a, b in zip(out.flat[bad[:4]], value.flat[bad[:4]])]}")
        else:
            assert same_floats(out, value), f"{where}: {name}"


def test_the_interpreter_decodes_every_code():
    shape = (SHAPES["M"], SHAPES["N"])
    got = run_kernel(typed(CONVERT), convert_inputs(), shapes=SHAPES)
    want = convert_formula(**convert_inputs())
    for name in ("PV", "QV", "PH", "QB", "PP", "QQ"):
        check_outputs(got, {name: want[name]}, "interp")
    # and as a table: every code of both formats
    for fmt, name in (("f8e4m3", "PV"), ("f8e5m2", "QV")):
        codes = bits(codes_grid(fmt, shape)).ravel()[:256]
        assert same_floats(got[name].ravel()[:256], [decode(c, fmt) for c in codes])


def test_the_interpreter_rounds_and_saturates_as_cvt_rn_satfinite():
    got = run_kernel(typed(CONVERT), convert_inputs(), shapes=SHAPES)
    want = convert_formula(**convert_inputs())
    check_outputs(got, want, "interp")


def test_a_few_conversions_by_value():
    inputs = convert_inputs()
    got = run_kernel(typed(CONVERT), inputs, shapes=SHAPES)

    def code(x: float, source: str, out: str) -> int:
        """The code the kernel gave for the (first) input whose f32 bits are x's."""
        where = np.flatnonzero(inputs[source].view(np.uint32).ravel() ==
                               np.float32(x).view(np.uint32))
        return int(bits(got[out]).ravel()[where[0]])

    e4 = lambda x: decode(code(x, "F", "PF"), "f8e4m3")                    # noqa: E731
    assert e4(1.0625) == 1.0 and e4(1.1875) == 1.25        # ties go to the even mantissa
    assert e4(464.0) == 448.0 and e4(1e30) == 448.0 and e4(math.inf) == 448.0   # satfinite
    assert e4(-math.inf) == -448.0 and code(math.nan, "F", "PF") == 0x7F
    assert code(-math.nan, "F", "PF") == 0x7F                   # the sign of NaN is dropped
    assert e4(2.0 ** -10) == 0.0 and e4(2.0 ** -9 * 0.50000006) == 2.0 ** -9
    assert code(-0.0, "F", "PF") == 0x80 and code(-1e-30, "F", "PF") == 0x80  # -0 is kept
    e5 = lambda x: decode(code(x, "G", "QF"), "f8e5m2")                    # noqa: E731
    assert e5(math.inf) == 57344.0 and e5(-math.inf) == -57344.0 and e5(61440.0) == 57344.0


@pytest.mark.cxx
def test_conversions_are_the_same_bits_on_every_target():
    from ptc.render.emulate import build_emulated

    kernel = typed(CONVERT)
    inputs = convert_inputs()
    want = convert_formula(**inputs)
    for target in TARGETS:
        source, _, _, device, _ = driver.render(kernel, target, shapes=SHAPES)
        got = build_emulated(source, backend=device)(kernel, inputs, SHAPES)
        check_outputs(got, want, target)


@pytest.mark.cxx
def test_sm90_converts_by_the_instruction_and_makes_every_nan_0x7f():
    """sm90 converts to FP8 by cvt.rn.satfinite (the device feature cvt_fp8: the lowered
    kernel's fp8_cvt, the source's PTC_CVT_FP8). The emulation's cvt keeps a NaN's sign,
    an answer the PTX ISA allows; the fix-up after it gives 0x7F (checked above with the
    other codes), and without the fix-up the negative NaNs come out 0xFF."""
    from ptc.device_headers import SHARED
    from ptc.render.emulate import build_emulated

    kernel = typed(CONVERT)
    inputs = convert_inputs()
    source, _, _, device, _ = driver.render(kernel, "sm90", shapes=SHAPES)
    assert "#define PTC_CVT_FP8 1" in source
    assert "PTC_CVT_FP8" not in driver.render(kernel, "sm80", shapes=SHAPES)[0]
    nans = {name: np.flatnonzero(np.isnan(inputs[x].astype(np.float32).ravel()) &
                                 np.signbit(inputs[x].astype(np.float32).ravel()))
            for name, x in (("PF", "F"), ("QF", "G"))}
    got = build_emulated(source, backend=device)(kernel, inputs, SHAPES)
    for name, where in nans.items():
        assert where.size and (bits(got[name]).ravel()[where] == 0x7F).all(), name
    text = (SHARED / "ptc_numerics.h").read_text()
    good = "return w & ~(((w & 0x7f7fu) + 0x0101u) & 0x8080u);"
    assert good in text
    slip = build_emulated(source, backend=device,
                          header_overrides={"ptc_numerics.h": text.replace(good, "return w;")})
    got = slip(kernel, inputs, SHAPES)
    assert (bits(got["PF"]).ravel()[nans["PF"]] == 0xFF).all()


@pytest.mark.gpu
def test_the_gpu_converts_to_fp8_as_the_interpreter_does(tmp_path, monkeypatch):
    """On a GPU that runs sm90 code, the conversions by cvt.rn.satfinite (and the NaN
    fix-up) give the interpreter's codes, every case of CONVERT's grids (NaN codes: 0x7F)."""
    from ptc import runtime as R
    from ptc.devices import get_device
    from ptc.targets.cuda.driver import can_run, find_gpus

    try:
        gpu = find_gpus()[0]
    except R.NoDevice as exc:
        pytest.skip(str(exc))
    if not can_run(gpu, get_device("sm90").arch):
        pytest.skip(f"{gpu.name} cannot run sm90 code")
    monkeypatch.setenv("PTC_CACHE_DIR", str(tmp_path))
    path = tmp_path / "convert.pt"
    path.write_text(CONVERT)
    kernel = R.compile(path, "sm90", shapes=SHAPES)
    assert "#define PTC_CVT_FP8" in (kernel.directory / "kernel.cu").read_text()
    inputs = convert_inputs()
    got = kernel.run(kernel.bind(**inputs))
    want = convert_formula(**inputs)
    check_outputs(got, want, "gpu")
    for name, x in (("PF", "F"), ("QF", "G")):
        nan = np.flatnonzero(np.isnan(inputs[x].astype(np.float32).ravel()))
        assert (bits(got[name]).ravel()[nan] == 0x7F).all(), name


# ---- loads, pads, arithmetic ------------------------------------------------------------------
PADS = """
kernel pads(P: f8e4m3[M, N], Q: f8e5m2[M, N]) -> (PS: f32[M], QS: f32[M], S: f32[N]) {
  parallel i: BM of M {
    ps = zeros(f32[BM])
    qs = zeros(f32[BM])
    for j: BN of N {
      ps += rowsum(load(P[i, j], pad=-448))
      qs += rowsum(load(Q[i, j], pad=-inf))
    }
    store(PS[i], ps)
    store(QS[i], qs)
  }
  parallel j: BN of N {
    s = zeros(f32[BN])
    for k: BK of M {
      s += sum(load(P[k, j], pad=0.25), axis=0)
    }
    store(S[j], s)
  }
}
"""
PAD_SHAPES = {"M": 13, "N": 20}


def pads_inputs():
    """Values whose sums are exact in f32 (multiples of 1/8 below 2^7; small integers)."""
    rng = np.random.default_rng(5)
    p = np.round(rng.standard_normal((13, 20)) * 8) / 8
    q = rng.choice([-16.0, -6.0, -1.0, 0.0, 2.0, 3.0, 5.0, 12.0], size=(13, 20))
    return {"P": p.astype(np.float32).astype(ml_dtypes.float8_e4m3fn),
            "Q": q.astype(np.float32).astype(ml_dtypes.float8_e5m2)}


def pads_formula(P, Q, tiles: dict[str, int]):
    """Row sums over column tiles that stick out of N by the pad (-448, and -inf for e5m2),
    column sums over row tiles padded with 0.25."""
    dec = np.vectorize(decode, otypes=[np.float64])
    p, q = dec(bits(P), "f8e4m3"), dec(bits(Q), "f8e5m2")
    m, n = p.shape
    out_n = -(-n // tiles["BN"]) * tiles["BN"] - n
    out_m = -(-m // tiles["BK"]) * tiles["BK"] - m
    return {"PS": (p.sum(axis=1) - 448.0 * out_n).astype(np.float32),
            "QS": (q.sum(axis=1) - (math.inf if out_n else 0.0)).astype(np.float32),
            "S": (p.sum(axis=0) + 0.25 * out_m).astype(np.float32)}


def test_loads_pad_with_values_of_the_dtype():
    kernel = typed(PADS, PAD_SHAPES)
    for tiles in ({"BM": 4, "BN": 8, "BK": 8}, {"BM": 16, "BN": 4, "BK": 16}):
        got = run_kernel(kernel, pads_inputs(), shapes=PAD_SHAPES, tiles=tiles)
        for name, value in pads_formula(**pads_inputs(), tiles=tiles).items():
            np.testing.assert_array_equal(got[name], value, err_msg=f"{tiles}: {name}")


def test_every_operation_computes_on_f32():
    k = typed("""
kernel widen(P: f8e4m3[N], Q: f8e5m2[N]) -> (A: f32[N], B: f32[N], C: bool[N], D: f32[N],
                                          E: f32[N]) {
  parallel i: BN of N {
    p = load(P[i])
    q = load(Q[i])
    store(A[i], p + q)
    store(B[i], p * p * p)
    store(C[i], p < q)
    store(D[i], max(p, q) + where(p > 0.0, p, q))
    store(E[i], -p + exp(q * 0.0))
  }
}""", {"N": 4})
    types = {s.tensor: s.value.type.dtype for s in k.body[0].body if isinstance(s, T.Store)}
    assert types == {"A": "f32", "B": "f32", "C": "bool", "D": "f32", "E": "f32"}
    P = np.array([448, 2, -3, 0.5], np.float32).astype(ml_dtypes.float8_e4m3fn)
    Q = np.array([57344, 3, 1, 0.25], np.float32).astype(ml_dtypes.float8_e5m2)
    got = run_kernel(k, {"P": P, "Q": Q}, shapes={"N": 4})
    p, q = P.astype(np.float64), Q.astype(np.float64)
    np.testing.assert_array_equal(got["A"], (p + q).astype(np.float32))
    np.testing.assert_array_equal(got["B"], np.float32(p ** 3))   # 448^3: no FP8 rounding
    np.testing.assert_array_equal(got["D"], np.maximum(p, q) + np.where(p > 0, p, q))
    np.testing.assert_array_equal(got["E"], 1.0 - p)


@pytest.mark.cxx
def test_pads_and_arithmetic_on_every_target():
    from ptc.render.emulate import build_emulated

    kernel = typed(PADS, PAD_SHAPES)
    inputs = pads_inputs()
    for target in TARGETS:
        source, plans, _, device, _ = driver.render(kernel, target, shapes=PAD_SHAPES)
        got = build_emulated(source, backend=device)(kernel, inputs, PAD_SHAPES)
        # each grid at its own plan's tile sizes (a pad that enters a sum depends on them)
        tiles = {"BN": dict(plans[0].tiles)["BN"], "BK": dict(plans[1].tiles)["BK"]}
        want = pads_formula(**inputs, tiles=tiles)
        for name, value in want.items():
            np.testing.assert_array_equal(got[name], value, err_msg=f"{target}: {name}")


# ---- an FP8 GEMM, converted to f16 for the matrix units ----------------------------------------
GEMM = """
kernel gemm_fp8(A: f8e4m3[M, K], B: f8e4m3[K, N], scale: f32) -> (C: f16[M, N]) {
  parallel i: BM of M, j: BN of N {
    acc = zeros(f32[BM, BN])
    for k: BK of K {
      acc += (load(A[i, k]) as f16) @ (load(B[k, j]) as f16)
    }
    store(C[i, j], (acc * scale) as f16)
  }
}
"""
GEMM_SHAPES = {"M": 40, "N": 72, "K": 100}        # edge tiles on every axis
PLAN_SHAPES = {"M": 512, "N": 512, "K": 512}      # where sm90's plan loads by TMA


def gemm_inputs():
    rng = np.random.default_rng(21)
    a = (rng.standard_normal((40, 100)) * 30).astype(np.float32)
    b = rng.standard_normal((100, 72)).astype(np.float32)
    return {"A": a.astype(ml_dtypes.float8_e4m3fn), "B": b.astype(ml_dtypes.float8_e4m3fn),
            "scale": np.float32(1 / 64)}


def gemm_formula(A, B, scale) -> np.ndarray:
    dec = np.vectorize(decode, otypes=[np.float64])
    return dec(bits(A), "f8e4m3") @ dec(bits(B), "f8e4m3") * float(scale)


@pytest.mark.cxx
def test_an_fp8_gemm_through_f16_on_every_target():
    """e4m3 A and B, converted exactly to f16 on their way to the tensor cores (mma.sync,
    wgmma after a TMA copy of the bytes on sm90, MFMA): every target gives the
    interpreter's result, which is the formula's to f32 sums and the f16 rounding."""
    from ptc.render.emulate import build_emulated

    kernel = typed(GEMM, GEMM_SHAPES)
    inputs = gemm_inputs()
    interp = run_kernel(kernel, inputs, shapes=GEMM_SHAPES)["C"].astype(np.float64)
    want = gemm_formula(**inputs)
    err = np.abs(interp - want) / np.abs(want).max()
    assert err.max() < 2 ** -10, err.max()
    for target in TARGETS:
        # the plan of a larger problem (sm90: TMA and wgmma), run at the small shape
        source, _, _, device, _ = driver.render(typed(GEMM, PLAN_SHAPES), target,
                                                shapes=PLAN_SHAPES)
        if target == "sm90":
            assert "CU_TENSOR_MAP_DATA_TYPE_UINT8" in source and "wgmma" in source
        got = build_emulated(source, backend=device)(kernel, inputs, GEMM_SHAPES)["C"]
        np.testing.assert_allclose(got.astype(np.float64), interp, rtol=2 ** -10,
                                   atol=2 ** -14, err_msg=target)


# ---- the checker ---------------------------------------------------------------------------------
@pytest.mark.parametrize("body, message, hint", [
    ("store(Y[i], load(X[i]))", "store of an f32 value into f8e4m3 output 'Y'", "as f8e4m3"),
    ("store(Y[i], load(Q[i]))", "store of an f8e5m2 value into f8e4m3 output 'Y'",
     "as f8e4m3"),
    ("store(Y[i], 500.0 as f8e4m3)", "is outside its range (-448..448)", "-448..448"),
    ("store(Y[i], -inf as f8e4m3)", "f8e4m3 has no infinities", None),
    ("store(Y[i], 1e-4 as f8e4m3)", "rounds to 0", "2^-9"),
    ("store(Y[i], load(Y2[i], pad=-inf) as f8e4m3)", "pad=-inf is not an f8e4m3 value",
     "pad with -448"),
    ("store(Z[i], load(Q[i], pad=1e6) as f32)", "pad=1e6 is not an f8e5m2 value", "57344"),
    ("store(Z[i], load(Q[i]) << 2)", "`<<` needs integer operands, not f32", "as i32"),
    ("atomic_add(Y[i], load(Y2[i]))", "atomic_add needs a f16, bf16, f32 or i32 output, "
     "not f8e4m3", None),
])
def test_wrong_uses_are_located_errors_with_hints(body, message, hint):
    text = f"""kernel k(X: f32[N], Q: f8e5m2[N], Y2: f8e4m3[N]) -> (Y: f8e4m3[N], Z: f32[N]) {{
  parallel i: BN of N {{
    {body}
  }}
}}
"""
    with pytest.raises(CompileError) as info:
        typed(text, {"N": 8})
    (d,) = [d for d in info.value.diagnostics if "never written" not in d.message]
    assert message in d.message, d.message
    assert d.span is not None and d.span.line == 3
    if hint is not None:
        assert hint in (d.hint or ""), d.hint


def test_what_fp8_values_may_do_without_as():
    """Stored into f16, bf16 and f32 outputs as they are (every FP8 value is one of theirs);
    the literals they meet are f32 (rule 9); an e5m2 pad may be infinite."""
    k = typed("""
kernel k(P: f8e4m3[N], Q: f8e5m2[N]) -> (A: f16[N], B: bf16[N], C: f32[N], D: f8e5m2[N]) {
  parallel i: BN of N {
    store(A[i], load(P[i]))
    store(B[i], load(Q[i]))
    store(C[i], load(P[i]) * 1e-30)
    store(D[i], load(Q[i], pad=-inf))
  }
}""", {"N": 8})
    assert len(k.body[0].body) == 4


def test_an_fp8_operand_against_f16_is_refused_at_its_operand():
    text = """kernel gemm(A: f8e4m3[M, K], B: f16[K, N]) -> (C: f32[M, N]) {
  parallel i: BM of M, j: BN of N {
    acc = zeros(f32[BM, BN])
    for k: BK of K {
      acc += load(A[i, k]) @ load(B[k, j])
    }
    store(C[i, j], acc)
  }
}
"""
    with pytest.raises(CompileError) as info:
        typed(text, {})
    (d,) = info.value.diagnostics
    assert "`@` of f8e4m3 and f16 tiles: FP8 multiplies FP8" in d.message
    assert (d.span.line, d.span.col) == (5, 14)
    assert "`(load(A[i, k]) as f16) @ load(B[k, j])`" in d.hint
    # the suggested fix checks
    typed(text.replace("load(A[i, k]) @", "(load(A[i, k]) as f16) @"), {})


def test_the_cost_model_counts_the_software_conversions():
    from ptc.lower.costs import (FP8_DECODE_INSTRUCTIONS, FP8_ENCODE_INSTRUCTIONS,
                                 expression_counts)

    p = T.Var("p", T.TileType("f8e4m3", ()))
    wide = T.Convert(p, T.TileType("f32", ()))
    e = T.Convert(T.Elementwise("add", (wide, T.Const(1.0, T.TileType("f32", ()))),
                                T.TileType("f32", ())), T.TileType("f8e5m2", ()))
    assert expression_counts(e, {}) == (FP8_ENCODE_INSTRUCTIONS + 1 + FP8_DECODE_INSTRUCTIONS,
                                         0, 0)
    assert expression_counts(T.Convert(wide, T.TileType("f16", ())), {})[0] == \
        FP8_DECODE_INSTRUCTIONS + 1


def test_the_reserved_dtypes_are_still_reserved():
    with pytest.raises(CompileError, match="dtype i4 is not supported yet"):
        typed("kernel k(X: i4[N]) -> (Y: f32[N]) {\n  parallel i: BN of N {\n"
              "    store(Y[i], load(X[i]) as f32)\n  }\n}\n", {"N": 8})


# ---- real builds ---------------------------------------------------------------------------------
# loads of both formats with pads, conversions to both from f32 arithmetic on bf16 and FP8
# values, FP8 stored into f16 as it is. (With five FP8 outputs of one 4 x 128 tile, sm80's
# vector variant spilled 4 bytes at ptxas's own register choice: docs/low-precision.md.)
ALL_OF_IT = """
kernel fp8_all(X: bf16[M, N], P: f8e4m3[M, N], Q: f8e5m2[M, N])
    -> (A: f8e4m3[M, N], B: f8e5m2[M, N], C: f32[M, N], D: f16[M, N]) {
  dims M = 256, N = 256
  parallel i: BM of M, j: BN of N {
    x = load(X[i, j])
    p = load(P[i, j], pad=-448)
    q = load(Q[i, j], pad=-inf)
    store(A[i, j], (x * 16.0 + q) as f8e4m3)
    store(B[i, j], (x + p) as f8e5m2)
    store(C[i, j], q * 2.0 + p)
    store(D[i, j], p)
  }
}
"""


@pytest.fixture
def all_of_it(tmp_path):
    path = tmp_path / "fp8_all.pt"
    path.write_text(ALL_OF_IT)
    return path


# (ptxas at its own register choice spilled 4 bytes in sm90's aligned variant, with the FP8
# encode by cvt; the build now compiles it again with the plan's blocks: ptc.runtime.build)
@pytest.mark.nvcc
@pytest.mark.parametrize("target", ["sm80", "sm90"])
def test_fp8_kernels_build_with_nvcc(all_of_it, target, tmp_path):
    from test_bits_bytes_functions import nvcc_build

    result = nvcc_build(all_of_it, target, tmp_path / "build")
    assert result.ptxas.spills == 0, result.ptxas.text
    assert any("fp8_all" in k.name for k in result.ptxas.kernels)


@pytest.mark.nvcc
def test_the_fp8_gemm_builds_for_sm90a_with_tma_and_wgmma(tmp_path):
    import importlib

    from ptc.runtime import prepare

    path = tmp_path / "gemm_fp8.pt"
    path.write_text(GEMM)
    build = importlib.import_module("ptc.runtime.build")
    prepared = prepare(path, "sm90", shapes=PLAN_SHAPES)
    assert "CU_TENSOR_MAP_DATA_TYPE_UINT8" in prepared.source
    folder = tmp_path / "build"
    build.write_build_dir(folder, kernel_source=prepared.source, signature=prepared.signature,
                          arch=prepared.device.arch, target="sm90",
                          plan_json=prepared.plan_json)
    result = build.build(folder, prepared.device.arch)
    assert result.ptxas.spills == 0, result.ptxas.text


@pytest.mark.hip
@pytest.mark.parametrize("target", ["gfx90a", "gfx942"])
def test_fp8_kernels_build_for_amd(all_of_it, target, tmp_path):
    """The FP8 helpers are builtins and bit manipulation: nothing from HIP's device
    library (its FP8 types are FNUZ on gfx942) survives."""
    import importlib

    import ptc.runtime as R
    from ptc.targets.hip import toolchain as hip

    build = importlib.import_module("ptc.runtime.build")
    try:
        hip.find_compiler(target)
    except R.BuildError as exc:
        pytest.skip(f"no HIP compiler here: {exc.message}")
    prepared = R.prepare(all_of_it, target)
    folder = tmp_path / "build"
    build.write_build_dir(folder, kernel_source=prepared.source, signature=prepared.signature,
                          arch=prepared.device.arch, target=target,
                          plan_json=prepared.plan_json, backend="hip")
    result = build.build(folder)
    assert result.arch == target
    assert result.resources.spills == 0 and result.resources.scratch_bytes == 0
    assert any("fp8_all" in k.name for k in result.resources.kernels)


# ---- arrays in and out ---------------------------------------------------------------------------
def test_fp8_arrays_are_read_by_one_rule():
    """`ptc run --inputs` (ptc.npy_dtypes) takes an FP8 parameter as raw bits (|u1, or the
    V1 np.save writes for an ml_dtypes array) or as f32 values rounded as `as` rounds."""
    from ptc.npy_dtypes import to_param_dtype

    codes = np.arange(256, dtype=np.uint8)
    for dtype in ("f8e4m3", "f8e5m2"):
        fp8 = codes.view(NUMPY[dtype])
        assert to_param_dtype(fp8, dtype) is fp8
        np.testing.assert_array_equal(bits(to_param_dtype(codes, dtype)), codes)
        void = codes.view("|V1")
        np.testing.assert_array_equal(bits(to_param_dtype(void, dtype)), codes)
        values = np.array([1.0625, 464.0, -1e9, np.nan, -0.0, 2.0 ** -17], np.float32)
        got = bits(to_param_dtype(values, dtype))
        np.testing.assert_array_equal(got, [encode(float(v), dtype) for v in values])
        for wrong in (codes.view(np.int8), values[:2].astype(np.float16)):
            with pytest.raises(ValueError):
                to_param_dtype(wrong, dtype)
    with pytest.raises(ValueError, match="holds ml_dtypes.float8_e5m2, but the parameter is "
                                         "f8e4m3"):
        to_param_dtype(codes.view(ml_dtypes.float8_e5m2), "f8e4m3")


def test_an_npz_round_trip_through_ptc_run(tmp_path):
    from click.testing import CliRunner

    from ptc.cli import cli

    path = tmp_path / "k.pt"
    path.write_text("""kernel k(P: f8e4m3[N]) -> (Q: f8e5m2[N], R: f8e4m3[N]) {
  parallel i: BN of N {
    store(Q[i], load(P[i]) as f8e5m2)
    store(R[i], load(P[i]))
  }
}
""")
    codes = np.arange(256, dtype=np.uint8)
    np.savez(tmp_path / "in.npz", P=codes.view(ml_dtypes.float8_e4m3fn))   # saved as <V1
    result = CliRunner().invoke(cli, ["run", str(path), "--inputs", str(tmp_path / "in.npz"),
                                      "-o", str(tmp_path / "out.npz")], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    out = np.load(tmp_path / "out.npz")
    assert out["Q"].dtype == np.float32 and out["R"].dtype == np.float32   # exact f32
    values = [decode(c, "f8e4m3") for c in range(256)]
    assert same_floats(out["R"], values)
    assert same_floats(out["Q"], [decode(encode(v, "f8e5m2"), "f8e5m2") for v in values])


def test_device_arrays_name_their_fp8_format():
    """__cuda_array_interface__ shows FP8 as untyped bytes ('|V1'): FP8 where the array's own
    dtype says which, an error where nothing does; DLPack 1.1 names them (codes 10, 12)."""
    from ptc.runtime import arrays as A

    class Device:
        def __init__(self, a, dtype=None):
            self.a = a
            if dtype:
                self.dtype = dtype

        @property
        def __cuda_array_interface__(self):
            return {"shape": self.a.shape, "typestr": "|V1", "data": (self.a.ctypes.data, False),
                    "strides": None, "version": 3}

    a = np.zeros(16, ml_dtypes.float8_e4m3fn)
    assert A.device_ref(Device(a, "torch.float8_e4m3fn")).dtype == "f8e4m3"
    assert A.device_ref(Device(a, "torch.float8_e5m2")).dtype == "f8e5m2"
    for dtype in (None, "torch.float8_e5m2fnuz", "torch.uint8"):
        with pytest.raises(A.ArrayProblem, match="untyped bytes"):
            A.device_ref(Device(a, dtype))
    assert A._DLPACK[(10, 8)] == "f8e4m3" and A._DLPACK[(12, 8)] == "f8e5m2"
    assert (11, 8) not in A._DLPACK and (13, 8) not in A._DLPACK     # the FNUZ formats


# the harness's ptc_run, built by g++ against tests/runtime/fake_cuda (a CUDA runtime on host
# memory) with a host kernel that copies P to R and Q to S byte for byte
COPY_PT = """kernel copy8(P: f8e4m3[N], Q: f8e5m2[N]) -> (R: f8e4m3[N], S: f8e5m2[N]) {
  parallel i: BN of N {
    store(R[i], load(P[i]))
    store(S[i], load(Q[i]))
  }
}
"""
COPY_HOST = """#include <cstring>
extern "C" int ptc_launch(void* const* tensors, const double*, const long long* dims, void*) {
  std::memcpy(tensors[2], tensors[0], (size_t)dims[0]);
  std::memcpy(tensors[3], tensors[1], (size_t)dims[0]);
  return 0;
}
extern "C" const char* ptc_kernel_name(void) { return "copy8"; }
"""


@pytest.fixture(scope="module")
def copy_build(tmp_path_factory):
    import shutil
    import subprocess
    from pathlib import Path

    import ptc.runtime as R
    from ptc.runtime.signature import signature_of

    if shutil.which("g++") is None:
        pytest.skip("g++ is not on PATH")
    fake_cuda = Path(__file__).resolve().parent / "runtime" / "fake_cuda"
    folder = tmp_path_factory.mktemp("fp8") / "copy8"
    R.write_build_dir(folder, kernel_source=COPY_HOST, signature=signature_of(typed(COPY_PT, {})),
                      arch="sm_80", target="sm80")
    subprocess.run(["g++", "-std=c++17", "-O1", "-Wall", "-Werror", "-I", str(fake_cuda), "-I",
                    ".", "-x", "c++", "kernel.cu", "-x", "c++", "harness.cu", "signature.cc", "-o",
                    "ptc_run"],
                   cwd=folder, check=True)
    return folder


@pytest.mark.cxx
def test_ptc_run_reads_and_writes_fp8_by_the_documented_rule(copy_build, tmp_path):
    """Inputs as |u1 codes, as what np.save writes for ml_dtypes arrays (<V1 for
    float8_e4m3fn, <f1 for float8_e5m2), or as f32 values rounded as `as` rounds (the
    harness's own host coder, npy.h, against the formula); outputs as exact f32. Anything
    else is refused with a hint."""
    import subprocess

    def run():
        return subprocess.run([str(copy_build / "ptc_run"), str(tmp_path), "--iters", "0"],
                              capture_output=True, text=True)

    codes = np.arange(256, dtype=np.uint8)
    values = np.concatenate([cases_grid("f8e4m3", (32, 33)).ravel(),
                             cases_grid("f8e5m2", (32, 33)).ravel()])[:1024]
    for stored_p, stored_q, want_p, want_q in (
            (codes, codes.view(ml_dtypes.float8_e5m2), codes, codes),
            (codes.view(ml_dtypes.float8_e4m3fn), codes, codes, codes),
            (values, values, [encode(float(v), "f8e4m3") for v in values],
             [encode(float(v), "f8e5m2") for v in values])):
        np.save(tmp_path / "P.npy", stored_p)
        np.save(tmp_path / "Q.npy", stored_q)
        done = run()
        assert done.returncode == 0, done.stderr
        r, s = np.load(tmp_path / "R.npy"), np.load(tmp_path / "S.npy")
        assert r.dtype == np.float32 and s.dtype == np.float32
        assert same_floats(r, [decode(c, "f8e4m3") for c in want_p])
        assert same_floats(s, [decode(c, "f8e5m2") for c in want_q])
    for wrong, descr in ((codes.astype(np.float16), "<f2"),
                         (codes.view(ml_dtypes.float8_e5m2), "<f1")):   # e5m2 for e4m3
        np.save(tmp_path / "P.npy", wrong)
        done = run()
        assert done.returncode == 1
        assert f"holds '{descr}', but P is f8e4m3 (store FP8 as |u1 bits or <f4)" in done.stderr


def test_ptc_run_says_how_to_save_an_e5m2_array(tmp_path):
    """np.save writes ml_dtypes.float8_e5m2 as '<f1', which np.load cannot read back."""
    from click.testing import CliRunner

    from ptc.cli import cli

    path = tmp_path / "k.pt"
    path.write_text(COPY_PT)
    codes = np.arange(16, dtype=np.uint8)
    np.savez(tmp_path / "in.npz", P=codes, Q=codes.view(ml_dtypes.float8_e5m2))
    result = CliRunner().invoke(cli, ["run", str(path), "--inputs", str(tmp_path / "in.npz")],
                                catch_exceptions=False)
    assert result.exit_code == 1
    assert "save its bits, x.view(np.uint8)" in result.stderr
    np.savez(tmp_path / "in.npz", P=codes, Q=codes)
    result = CliRunner().invoke(cli, ["run", str(path), "--inputs", str(tmp_path / "in.npz")],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.stderr


def test_a_host_array_of_another_dtype_is_refused_with_a_hint():
    """A call takes FP8 as ml_dtypes arrays: an f32 array is not rounded behind the caller's
    back (a list of numbers is, as `as` rounds)."""
    import ptc.runtime as R
    from ptc.runtime.binding import _host_array
    from ptc.runtime.signature import signature_of

    (p, _, _, _) = signature_of(typed(COPY_PT, {})).tensors
    with pytest.raises(R.ArgumentError) as info:
        _host_array(p, np.ones(4, np.float32))
    assert "NumPy has no f8e4m3: pass an ml_dtypes.float8_e4m3fn array" in info.value.hint
    _, array = _host_array(p, [1.0, 464.0, -0.0])
    np.testing.assert_array_equal(bits(array), [0x38, 0x7E, 0x80])
