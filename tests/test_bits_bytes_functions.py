"""Issue 21, part 1: bit operations on integers (`& | ^ << >>`), the 8-bit storage dtypes
`i8` and `u8` with their conversions, and the functions `tanh`, `sigmoid` and `erf`.

Each kernel runs on the reference interpreter, which must give what a formula written here
(with Python's own integers and `math` functions) gives, and is emulated on every target
(sm80, sm90, gfx90a, gfx942), which must give the same values: exactly for integers and
conversions, within a few ulp for the functions (docs/language.md, "Numerics").
"""
from __future__ import annotations

import math
from functools import lru_cache

import ml_dtypes
import numpy as np
import pytest

from ptc import driver, ops
from ptc.diagnostics import CompileError
from ptc.fuzz.check import TARGETS
from ptc.grammar import parse
from ptc.interp import run_kernel
from ptc.sema import check
from ptc.sema import typed as T

SHAPES = {"M": 5, "N": 7}          # edge tiles on both axes
RNG = np.random.default_rng(21)


def typed(text: str, shapes=SHAPES) -> T.TypedKernel:
    return check(parse(text, "k.pt"), shapes).kernels[0]


@lru_cache(maxsize=None)
def emulated(text: str, target: str):
    """The kernel rendered for `target` and built for the CPU emulator."""
    from ptc.render.emulate import build_emulated

    source, _, _, device, _ = driver.render(typed(text), target, shapes=SHAPES)
    return build_emulated(source, backend=device)


def run_everywhere(text: str, inputs: dict) -> dict[str, dict[str, np.ndarray]]:
    """{"interp": outputs, target: outputs, ...}"""
    kernel = typed(text)
    out = {"interp": run_kernel(kernel, inputs, shapes=SHAPES)}
    for target in TARGETS:
        out[target] = emulated(text, target)(kernel, inputs, SHAPES)
    return out


def grid(values, dtype) -> np.ndarray:
    """`values` repeated over an M x N array."""
    flat = np.resize(np.asarray(values, dtype=np.float64), SHAPES["M"] * SHAPES["N"])
    return flat.reshape(SHAPES["M"], SHAPES["N"]).astype(dtype)


# ---- bit operations --------------------------------------------------------------------------
BITS = """
kernel bits(X: i32[M, N], Y: i32[M, N]) -> (AND: i32[M, N], OR: i32[M, N], XOR: i32[M, N],
                                           SHL: i32[M, N], SHR: i32[M, N], MIX: i32[M, N]) {
  parallel i: BM of M, j: BN of N {
    x = load(X[i, j]) * 1000003 - 7000000
    y = load(Y[i, j])
    s = y * 3 - 8
    store(AND[i, j], x & y * 37)
    store(OR[i, j], x | -y)
    store(XOR[i, j], x ^ y << 20)
    store(SHL[i, j], x << s)
    store(SHR[i, j], x >> s)
    store(MIX[i, j], index(i)[:, None] << 4 | index(j)[None, :] & 7 ^ 5)
  }
}
"""


def i32(v: int) -> int:
    """The low 32 bits of a Python integer as a signed value (two's complement)."""
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def shl(a: int, s: int) -> int:
    return i32(a << s) if 0 <= s < 32 else 0


def shr(a: int, s: int) -> int:
    return a >> s if 0 <= s < 32 else (-1 if a < 0 else 0)   # Python's >> floors


def bits_formula(X, Y) -> dict[str, np.ndarray]:
    out = {k: np.zeros(X.shape, np.int64) for k in ("AND", "OR", "XOR", "SHL", "SHR", "MIX")}
    for (r, c), xin in np.ndenumerate(X):
        x, y = int(xin) * 1000003 - 7000000, int(Y[r, c])
        s = y * 3 - 8
        out["AND"][r, c] = x & (y * 37)
        out["OR"][r, c] = x | -y
        out["XOR"][r, c] = x ^ i32(y << 20)
        out["SHL"][r, c] = shl(x, s)
        out["SHR"][r, c] = shr(x, s)
        out["MIX"][r, c] = (r << 4) | ((c & 7) ^ 5)
    return {k: v.astype(np.int32) for k, v in out.items()}


def test_the_bit_operators_parse_with_cs_precedence():
    (stmt,) = parse("kernel k() -> () {\n  v = a | b ^ c & d == e << f + g\n}\n").kernels[0].body
    e = stmt.value
    assert e.op == "|" and e.rhs.op == "^" and e.rhs.rhs.op == "&"
    eq = e.rhs.rhs.rhs
    assert eq.op == "==" and eq.rhs.op == "<<" and eq.rhs.rhs.op == "+"


@pytest.mark.parametrize("a, b, left, right", [
    (-3, 2, -12, -1), (1, 31, -2 ** 31, 0), (-7, 1, -14, -4), (5, 32, 0, 0), (-5, 32, 0, -1),
    (5, -1, 0, 0), (-5, -1, 0, -1), (2 ** 30, 2, 0, 2 ** 28)])
def test_shifts_of_the_op_table(a, b, left, right):
    assert ops.shift_left(np.int32(a), np.int32(b)) == left == shl(a, b)
    assert ops.shift_right(np.int32(a), np.int32(b)) == right == shr(a, b)


@pytest.mark.cxx
def test_bit_operations_on_every_target():
    X = RNG.integers(0, 16, size=(5, 7), dtype=np.int32)
    Y = RNG.integers(0, 16, size=(5, 7), dtype=np.int32)
    want = bits_formula(X, Y)
    for where, got in run_everywhere(BITS, {"X": X, "Y": Y}).items():
        for name, value in want.items():
            np.testing.assert_array_equal(got[name], value, err_msg=f"{where}: {name}")


def test_and_or_of_bools_stay_logical_and_xor_of_bools_is_inequality():
    k = typed("""
kernel logic(X: f32[N]) -> (Y: bool[N]) {
  parallel i: BN of N {
    x = load(X[i])
    store(Y[i], (x > 0.0) & (x < 2.0) | (x > 5.0) ^ (x > 6.0))
  }
}""", {"N": 9})
    X = np.array([-1, 0.5, 1.5, 3, 5.5, 6.5, 7, 1, 2], np.float32)
    got = run_kernel(k, {"X": X}, shapes={"N": 9})["Y"]
    np.testing.assert_array_equal(got, ((X > 0) & (X < 2)) | ((X > 5) != (X > 6)))
    used = set()

    def walk(e):
        if isinstance(e, T.Elementwise):
            used.add(e.op)
        for c in T.children(e):
            walk(c)
    for s in k.body[0].body:
        walk(s.value)
    assert {"and", "or", "ne"} <= used and not {"bitand", "bitor", "xor"} & used


# ---- i8 and u8 ----------------------------------------------------------------------------------
BYTES = """
kernel bytes(Q: i8[M, N], U: u8[M, N], F: f32[M, N], H: f16[M, N])
    -> (S: i32[M, N], R: i32[M], QF: i8[M, N], UF: u8[M, N], QI: i8[M, N], UQ: u8[M, N],
        QH: i8[M, N], UB: u8[M, N], BACK: f32[M, N], WIDE: i32[M, N], HALF: f16[M, N],
        COPY: i8[M, N]) {
  parallel i: BM of M, j: BN of N {
    q = load(Q[i, j])
    u = load(U[i, j])
    f = load(F[i, j])
    store(S[i, j], q + u * 2 - (q >> 2) & 1023)
    atomic_add(R[i], rowsum(q))
    store(QF[i, j], f as i8)
    store(UF[i, j], f as u8)
    store(QI[i, j], (q * 3) as i8)
    store(UQ[i, j], q as u8)
    store(QH[i, j], load(H[i, j]) as i8)
    store(UB[i, j], (f as bf16) as u8)
    store(BACK[i, j], q * 0.5 + u)
    store(WIDE[i, j], q)
    store(HALF[i, j], u)
    store(COPY[i, j], (q - 1 + 1) as i8)
  }
}
"""
# ties go to even, everything saturates, NaN gives 0
SPECIAL = [2.5, -0.5, 3.5, 0.5, 1.5, -2.5, 127.5, -128.5, 126.5, 254.5, 255.5, 300.0, -300.0,
           float("nan"), float("inf"), float("-inf"), 0.49999997, -1.0, 7.25, -7.75]


def cvt_rni_sat(x: float, lo: int, hi: int) -> int:
    """PTX cvt.rni.sat to an integer range, from its definition."""
    if math.isnan(x):
        return 0
    if math.isinf(x):
        return hi if x > 0 else lo
    n = math.floor(x)
    frac = x - n
    if frac > 0.5 or (frac == 0.5 and n % 2 == 1):
        n += 1
    return min(max(n, lo), hi)


def bytes_formula(Q, U, F, H) -> dict[str, np.ndarray]:
    q, u = Q.astype(np.int64), U.astype(np.int64)
    sat = np.vectorize(cvt_rni_sat, otypes=[np.int64])
    bf = F.astype(ml_dtypes.bfloat16).astype(np.float64)
    return {
        "S": ((q + u * 2 - (q >> 2)) & 1023).astype(np.int32),
        "R": q.sum(axis=1).astype(np.int32),
        "QF": sat(F.astype(np.float64), -128, 127).astype(np.int8),
        "UF": sat(F.astype(np.float64), 0, 255).astype(np.uint8),
        "QI": np.clip(q * 3, -128, 127).astype(np.int8),
        "UQ": np.clip(q, 0, 255).astype(np.uint8),
        "QH": sat(H.astype(np.float64), -128, 127).astype(np.int8),
        "UB": sat(bf, 0, 255).astype(np.uint8),
        "BACK": (q * 0.5 + u).astype(np.float32),
        "WIDE": q.astype(np.int32),
        "HALF": u.astype(np.float16),
        "COPY": Q,
    }


def bytes_inputs():
    Q = RNG.integers(-128, 128, size=(5, 7)).astype(np.int8)
    Q[0, :3] = (-128, 127, 0)
    U = RNG.integers(0, 256, size=(5, 7)).astype(np.uint8)
    U[0, :2] = (0, 255)
    F = grid(SPECIAL, np.float32)
    H = grid([2.5, 3.5, -0.5, 200.0, -200.0, 65504.0, float("-inf"), 1.5], np.float16)
    return {"Q": Q, "U": U, "F": F, "H": H}


def test_the_interpreter_converts_to_8_bits_as_cvt_rni_sat():
    inputs = bytes_inputs()
    got = run_kernel(typed(BYTES), inputs, shapes=SHAPES)
    for name, value in bytes_formula(**inputs).items():
        assert got[name].dtype == value.dtype, name
        np.testing.assert_array_equal(got[name], value, err_msg=name)


def test_a_few_conversions_by_value():
    F = grid(SPECIAL, np.float32)
    got = run_kernel(typed(BYTES), {**bytes_inputs(), "F": F}, shapes=SHAPES)
    by_value = dict(zip(SPECIAL[:16], got["QF"].ravel()[:16].tolist()))
    assert [by_value[x] for x in (2.5, -0.5, 3.5, 0.5, 1.5, -2.5)] == [2, 0, 4, 0, 2, -2]
    assert [by_value[x] for x in (127.5, -128.5, 300.0, -300.0)] == [127, -128, 127, -128]
    assert got["QF"].ravel()[13] == 0                         # NaN
    assert got["UF"].ravel()[:13].tolist() == [2, 0, 4, 0, 2, 0, 128, 0, 126, 254, 255, 255, 0]


@pytest.mark.cxx
def test_bytes_on_every_target():
    inputs = bytes_inputs()
    want = bytes_formula(**inputs)
    for where, got in run_everywhere(BYTES, inputs).items():
        for name, value in want.items():
            assert got[name].dtype == value.dtype, f"{where}: {name}"
            np.testing.assert_array_equal(got[name], value, err_msg=f"{where}: {name}")


def test_arithmetic_on_bytes_is_on_i32():
    k = typed("""
kernel widen(Q: i8[N], U: u8[N]) -> (A: i32[N], B: f32[N], C: i32[N], D: f32[N]) {
  parallel i: BN of N {
    q = load(Q[i])
    u = load(U[i])
    store(A[i], q + u)
    store(B[i], q * 0.5)
    store(C[i], max(q, u) - abs(q) + -q)
    store(D[i], exp(q * 0) + u)
  }
}""", {"N": 4})
    types = {s.tensor: s.value for s in k.body[0].body if isinstance(s, T.Store)}
    assert types["A"].type.dtype == "i32" and types["B"].type.dtype == "f32"
    Q = np.array([127, -128, -1, 5], np.int8)
    U = np.array([255, 255, 0, 200], np.uint8)
    got = run_kernel(k, {"Q": Q, "U": U}, shapes={"N": 4})
    q, u = Q.astype(np.int64), U.astype(np.int64)
    np.testing.assert_array_equal(got["A"], q + u)                 # 382: no wrap at 8 bits
    np.testing.assert_array_equal(got["B"], q * 0.5)
    np.testing.assert_array_equal(got["C"], np.maximum(q, u) - np.abs(q) - q)
    np.testing.assert_array_equal(got["D"], 1.0 + u)


W8A16 = """
kernel w8a16(A: f16[M, K], B: i8[K, N], s: f32[N]) -> (C: f16[M, N]) {
  parallel i: BM of M, j: BN of N {
    acc = zeros(f32[BM, BN])
    for k: BK of K {
      acc += load(A[i, k]) @ (load(B[k, j]) as f16)
    }
    store(C[i, j], (acc * load(s[j])[None, :]) as f16)
  }
}
"""
W8A16_SHAPES = {"M": 40, "N": 72, "K": 100}


@pytest.mark.cxx
def test_int8_weights_converted_to_f16_feed_the_matrix_product_on_every_target():
    """i8 weights (TMA-copied as bytes on sm90, cp.async on sm80, staged on CDNA) converted
    exactly to f16 for the tensor cores, per-column scales after: W8A16 with edge tiles."""
    from ptc.render.emulate import build_emulated

    rng = np.random.default_rng(8)
    M, N, K = W8A16_SHAPES["M"], W8A16_SHAPES["N"], W8A16_SHAPES["K"]
    A = rng.standard_normal((M, K)).astype(np.float16)
    B = rng.integers(-128, 128, size=(K, N)).astype(np.int8)
    scale = rng.uniform(0.001, 0.01, size=N).astype(np.float32)
    want = (A.astype(np.float64) @ B.astype(np.float64)) * scale
    kernel = typed(W8A16, W8A16_SHAPES)
    inputs = {"A": A, "B": B, "s": scale}
    results = {"interp": run_kernel(kernel, inputs, shapes=W8A16_SHAPES)}
    for target in TARGETS:
        source, _, _, device, _ = driver.render(kernel, target, shapes=W8A16_SHAPES)
        results[target] = build_emulated(source, backend=device)(kernel, inputs, W8A16_SHAPES)
    for where, got in results.items():
        err = np.abs(got["C"].astype(np.float64) - want).max() / np.abs(want).max()
        assert err < 2e-3, f"{where}: relative error {err:.2g}"


# ---- tanh, sigmoid, erf ---------------------------------------------------------------------------
FUNCTIONS = """
kernel smooth(X: f32[M, N], H: bf16[M, N]) -> (TANH: f32[M, N], SIG: f32[M, N], ERF: f32[M, N],
                                             HALF: bf16[M, N], INT: f32[M, N]) {
  parallel i: BM of M, j: BN of N {
    x = load(X[i, j])
    store(TANH[i, j], tanh(x))
    store(SIG[i, j], sigmoid(x))
    store(ERF[i, j], erf(x))
    store(HALF[i, j], tanh(load(H[i, j])) + erf(load(H[i, j])))
    store(INT[i, j], erf(index(j)[None, :] - 3) + sigmoid(index(i)[:, None]))
  }
}
"""
# around 0, the switch points of the HIP helpers (0.55, 1), far out and infinite
POINTS = [0.0, 1e-3, -1e-3, 0.3, 0.5499, 0.5501, -0.5501, 0.999, 1.0, 1.001, -1.2, 2.0, 3.5,
          -3.9, 5.0, 9.0, -12.0, 20.0, 90.0, -90.0, float("inf"), float("-inf"), 1e-20,
          0.75, -0.1, 4.2, -6.0, 0.05, 1.7, -2.6, 7.5, 0.9, -0.9, 0.2, -0.45]


def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x)) if x > -700 else 0.0


def functions_formula(X, H) -> dict[str, np.ndarray]:
    f = np.vectorize
    h = H.astype(np.float32).astype(np.float64)
    half = f(math.tanh)(h).astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float32) + \
        f(math.erf)(h).astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)
    rows, cols = np.indices(X.shape)
    return {
        "TANH": f(math.tanh)(X.astype(np.float64)).astype(np.float32),
        "SIG": f(sigmoid)(X.astype(np.float64)).astype(np.float32),
        "ERF": f(math.erf)(X.astype(np.float64)).astype(np.float32),
        "HALF": half.astype(ml_dtypes.bfloat16),
        "INT": (f(math.erf)(cols - 3.0).astype(np.float32) +
                f(sigmoid)(rows.astype(np.float64)).astype(np.float32)),
    }


def within_ulps(got, want, ulps: int, dtype=np.float32, scale: float = 0.0) -> None:
    """Within `ulps` units in the last place, in `dtype`, of `want` (or of `scale`, for a sum
    whose terms are that large), or (below the normal range, where an f32 formula such as
    1 / (1 + exp(90)) underflows) within the smallest normal f32."""
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    size = np.maximum(np.abs(want), scale).astype(dtype)
    step = np.abs(np.spacing(size)).astype(np.float64)
    close = np.abs(got - want) <= np.maximum(ulps * step, np.finfo(np.float32).tiny)
    bad = ~(same | close)
    assert not bad.any(), f"{int(bad.sum())} values off, e.g. {got[bad][:3]} for {want[bad][:3]}"


def functions_inputs():
    return {"X": grid(POINTS, np.float32),
            "H": grid(POINTS[::-1], np.float32).astype(ml_dtypes.bfloat16)}


def test_the_interpreter_computes_the_functions():
    inputs = functions_inputs()
    got = run_kernel(typed(FUNCTIONS), inputs, shapes=SHAPES)
    for name, value in functions_formula(**inputs).items():
        if name == "HALF":
            within_ulps(got[name], value, 2, ml_dtypes.bfloat16, scale=1.0)
        else:
            within_ulps(got[name], value, 2, scale=1.0 if name == "INT" else 0.0)


@pytest.mark.cxx
def test_the_functions_on_every_target():
    """Within 4 ulp of the exact values (CUDA's tanhf, erff and ptc's HIP helpers), an ulp of
    bf16 for the bf16 results (a rounding of a value a few f32 ulp off)."""
    inputs = functions_inputs()
    want = functions_formula(**inputs)
    for where, got in run_everywhere(FUNCTIONS, inputs).items():
        for name, value in want.items():
            if name == "HALF":
                within_ulps(got[name], value, 2, ml_dtypes.bfloat16, scale=1.0)
            else:
                within_ulps(got[name], value, 4, scale=1.0 if name == "INT" else 0.0)


def test_the_hip_spellings_are_builtins_or_ptc_helpers():
    """Generated HIP code links no device math library (ptc/targets/hip/templates/ptc_types.h)."""
    for op in ops.ELEMENTWISE.values():
        if op.c_form == "call":
            assert op.hip.startswith(("ptc::", "__builtin_")), op.name


# ---- the checker ---------------------------------------------------------------------------------
@pytest.mark.parametrize("body, message, hint", [
    ("store(Y[i], load(X[i]) << 2)", "`<<` needs integer operands, not f32", "as i32"),
    ("store(Y[i], load(X[i]) ^ 2)", "`^` needs integer operands (or two bools), not f32",
     "not a power"),
    ("store(Z[i], load(I[i]) & 1 == 0)", "`&` of a bool and an i32 value", "(x & 1) == 0"),
    ("store(Z[i], (load(I[i]) > 0) >> 1)", "`>>` needs integer operands, not bool", "as i32"),
    ("store(B[i], load(Q[i]) + 1)", "store of an i32 value into i8 output 'B'", "as i8"),
    ("store(B[i], 300 as i8)", "the literal 300 takes the dtype i8", None),
])
def test_wrong_operands_are_located_errors_with_hints(body, message, hint):
    text = f"""kernel k(X: f32[N], I: i32[N], Q: i8[N]) -> (Y: i32[N], Z: bool[N], B: i8[N]) {{
  parallel i: BN of N {{
    {body}
  }}
}}
"""
    with pytest.raises(CompileError) as info:
        typed(text, {"N": 8})
    # (the outputs the line does not store are reported too)
    (d,) = [d for d in info.value.diagnostics if "never written" not in d.message]
    assert message in d.message, d.message
    assert d.span is not None and d.span.line == 3
    if hint is not None:
        assert hint in (d.hint or ""), d.hint


def test_an_i8_operand_against_f16_is_refused_at_the_i8_operand():
    """i8 @ i8 runs on the integer tensor cores (tests/test_int8_mma.py); an i8 operand
    against an f16 one is a located error whose hint converts the i8 side (W8A16)."""
    text = """kernel w8a16(A: f16[M, K], B: i8[K, N]) -> (C: f32[M, N]) {
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
    assert "`@` of i8 and f16 tiles" in d.message
    assert (d.span.line, d.span.col) == (5, 30)
    assert "load(A[i, k]) @ (load(B[k, j]) as f16)" in d.hint
    # the suggested fix checks
    typed(text.replace("load(A[i, k]) @ load(B[k, j])",
                       "load(A[i, k]) @ (load(B[k, j]) as f16)"), {})


# ---- real builds ---------------------------------------------------------------------------------
# every new op and dtype in one kernel: loads and stores of i8 and u8, conversions to and from
# them, the bit operators and the three functions
ALL_OF_IT = """
kernel all_of_it(X: i32[M, N], Q: i8[M, N], U: u8[M, N], F: f32[M, N], H: bf16[M, N])
    -> (A: i32[M, N], B: i8[M, N], C: u8[M, N], D: f32[M, N], E: bf16[M, N]) {
  dims M = 256, N = 256
  parallel i: BM of M, j: BN of N {
    x = load(X[i, j])
    q = load(Q[i, j])
    u = load(U[i, j])
    f = load(F[i, j])
    store(A[i, j], (x << 3 ^ x >> 1 | q & 15) + u)
    store(B[i, j], (f * 100.0) as i8)
    store(C[i, j], (q + u) as u8)
    store(D[i, j], tanh(f) + sigmoid(f) * erf(f) + q)
    store(E[i, j], (tanh(load(H[i, j])) + (u as bf16)) as bf16)
  }
}
"""


@pytest.fixture
def all_of_it(tmp_path):
    path = tmp_path / "all_of_it.pt"
    path.write_text(ALL_OF_IT)
    return path


def nvcc_build(path, target: str, folder):
    """`path` built for `target` in `folder` with nvcc: the BuildResult (ptxas's report)."""
    import importlib

    from ptc.runtime import prepare

    build = importlib.import_module("ptc.runtime.build")
    prepared = prepare(path, target)
    build.write_build_dir(folder, kernel_source=prepared.source, signature=prepared.signature,
                          arch=prepared.device.arch, target=target,
                          plan_json=prepared.plan_json)
    return build.build(folder, prepared.device.arch)


@pytest.mark.nvcc
@pytest.mark.parametrize("target", ["sm80", "sm90"])
def test_every_new_op_and_dtype_builds_with_nvcc(all_of_it, target, tmp_path):
    result = nvcc_build(all_of_it, target, tmp_path / "build")
    assert result.ptxas.spills == 0, result.ptxas.text
    assert any("all_of_it" in k.name for k in result.ptxas.kernels)


@pytest.mark.hip
@pytest.mark.parametrize("target", ["gfx90a", "gfx942"])
def test_every_new_op_and_dtype_builds_for_amd(all_of_it, target, tmp_path):
    """No call into HIP's device library survives: the kernel links without it."""
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
    assert any("all_of_it" in k.name for k in result.resources.kernels)


def test_byte_arrays_are_read_as_they_are_and_nothing_else_is():
    """`ptc run --inputs` and the harness's ptc_run read i8 as `|i1` and u8 as `|u1`
    (ptc.npy_dtypes), and the interpreter refuses values outside the range."""
    from ptc.interp import coerce
    from ptc.npy_dtypes import to_param_dtype

    q = np.array([-128, 5, 127], np.int8)
    assert to_param_dtype(q, "i8") is q
    assert to_param_dtype(q.view(np.uint8), "u8").dtype == np.uint8
    for array, dtype in ((q, "u8"), (q, "i32"), (q.astype(np.int32), "i8")):
        with pytest.raises(ValueError):
            to_param_dtype(array, dtype)
    assert coerce("Q", np.array([1, -2], np.int32), "i8").dtype == np.int8
    with pytest.raises(CompileError, match="outside the u8 range"):
        coerce("U", np.array([300], np.int32), "u8")
