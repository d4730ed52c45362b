"""Issue 22, part 2: offset tiles (`load(X[index(i) + s, c], pad=...)`, docs/language.md,
"Offset tiles"). The truth is NumPy written here: element (m, n) of a tile moved by (s, t)
is X[m + s, n + t] where that lies inside X, the pad elsewhere -- before 0 and past the end.

The interpreter is checked at ragged shapes and offsets that reach before the tensor, past
it and wholly outside; the rendered kernels of every target on the emulators, in three
thread orders: element copies with a pad, vector copies (cp.async with src-size 0 on
sm80/sm90, the staged loads' zeros on gfx90a/gfx942) with rows and 8-column steps moved,
and a tensor-core product of a moved A tile, loaded by TMA at negative coordinates in an
sm90 warp-specialized plan.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest

from ptc import driver
from ptc.grammar import parse
from ptc.interp import run_kernel
from ptc.sema import check
from ptc.sema import typed as T

TARGETS = ("sm80", "sm90", "gfx90a", "gfx942")
ORDERS = (dict(), dict(order="reverse"), dict(order="random", seed=5))
SHAPE = {"M": 45, "N": 70}          # ragged against the 32 x 64 tiles
# (s, t): moved down and right, up and left (before 0), past the end, wholly outside
OFFSETS = [(0, 0), (3, -5), (-7, 9), (-40, 2), (44, -69), (-45, 0), (60, 70), (-1, 1)]

# f32 with a pad that is not 0: element copies, each element checked against both ends
SHIFT_PAD = """
kernel shift(X: f32[M, N], s: i32, t: i32) -> (Y: f32[M, N]) {
  dims M = 256, N = 256
  tile BM = 32, BN = 64
  parallel i: BM of M, j: BN of N {
    store(Y[i, j], load(X[index(i) + s, index(j) + t], pad=-1.5))
  }
}
"""
# f16 with zeros: rows moved by s, columns by whole 8-element (16-byte) steps, so each
# vector copy is wholly inside or wholly outside
SHIFT_VEC = """
kernel shift(X: f16[M, N], s: i32, t: i32) -> (Y: f16[M, N]) {
  dims M = 256, N = 256
  tile BM = 32, BN = 64
  parallel i: BM of M, j: BN of N {
    store(Y[i, j], load(X[index(i) + s, index(j) + 8 * t]))
  }
}
"""
SHIFTED_GEMM = """
kernel shifted_gemm(A: f16[M, K], B: f16[K, N], s: i32) -> (C: f32[M, N]) {
  dims M = 256, N = 256, K = 256
  tile BM = 64, BN = 64, BK = 32
  parallel i: BM of M, j: BN of N {
    acc = zeros(f32[BM, BN])
    for k: BK of K {
      acc += load(A[index(i) - s, k], pad=0.0) @ load(B[k, j])
    }
    store(C[i, j], acc)
  }
}
"""
GEMM_SHAPE = {"M": 72, "N": 40, "K": 48}


def typed(text: str, shapes: dict) -> T.TypedKernel:
    return check(parse(text, "k.pt"), shapes).kernels[0]


def moved(x: np.ndarray, s: int, t: int, pad: float) -> np.ndarray:
    """y[m, n] = x[m + s, n + t] where inside x, else pad."""
    M, N = x.shape
    y = np.full((M, N), pad, x.dtype)
    for m in range(M):
        for n in range(N):
            if 0 <= m + s < M and 0 <= n + t < N:
                y[m, n] = x[m + s, n + t]
    return y


def shift_inputs(dtype, s: int, t: int) -> dict:
    x = np.random.default_rng(3).standard_normal((SHAPE["M"], SHAPE["N"])).astype(dtype)
    return {"X": x, "s": np.int32(s), "t": np.int32(t)}


def gemm_inputs(s: int) -> dict:
    rng = np.random.default_rng(4)
    M, N, K = (GEMM_SHAPE[d] for d in "MNK")
    return {"A": rng.standard_normal((M, K)).astype(np.float16),
            "B": (rng.standard_normal((K, N)) / np.sqrt(K)).astype(np.float16),
            "s": np.int32(s)}


def gemm_formula(inputs: dict) -> np.ndarray:
    a = moved(inputs["A"].astype(np.float64), -int(inputs["s"]), 0, 0.0)
    return a @ inputs["B"].astype(np.float64)


# ---- the interpreter ---------------------------------------------------------------------
@pytest.mark.parametrize("s, t", OFFSETS)
def test_the_interpreter_pads_every_element_outside(s, t):
    kernel = typed(SHIFT_PAD, SHAPE)
    inputs = shift_inputs(np.float32, s, t)
    got = run_kernel(kernel, inputs, shapes=SHAPE)["Y"]
    np.testing.assert_array_equal(got, moved(inputs["X"], s, t, -1.5))


@pytest.mark.parametrize("s, t", OFFSETS)
def test_the_interpreter_moves_columns_by_an_expression_of_a_scalar(s, t):
    kernel = typed(SHIFT_VEC, SHAPE)
    inputs = shift_inputs(np.float16, s, t)
    got = run_kernel(kernel, inputs, shapes=SHAPE)["Y"]
    np.testing.assert_array_equal(got, moved(inputs["X"], s, 8 * t, 0.0))


def test_a_loop_index_moves_the_tile_each_iteration():
    """y[l] = sum_r w[r] x[l - 2 + r] (r < 3), x zero before the start and past the end."""
    text = """
kernel taps(x: f32[L, C], w: f32[R]) -> (y: f32[L, C]) {
  tile BL = 16, BC = 8
  parallel l: BL of L, c: BC of C {
    acc = zeros(f32[BL, BC])
    for r: 1 of R {
      acc += load(x[index(l) - 2 + r, c]) * load(w[r])
    }
    store(y[l, c], acc)
  }
}
"""
    shapes = {"L": 21, "C": 11, "R": 3}
    kernel = typed(text, shapes)
    x = np.random.default_rng(5).standard_normal((21, 11)).astype(np.float32)
    w = np.array([0.5, -2.0, 3.0], np.float32)
    want = sum(w[r] * moved(x.astype(np.float64), r - 2, 0, 0.0) for r in range(3))
    got = run_kernel(kernel, {"x": x, "w": w}, shapes=shapes)["y"]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


# every S-th row (column) of the tensor from the tile's start times S, moved by s; rows
# (or columns) outside padded. Rows: f32 with a pad; columns: f16 with zeros.
STRIDED_ROWS = """
kernel strided(X: f32[M, N], s: i32) -> (Y: f32[P, N]) {
  tile BP = 16, BN = 64
  parallel p: BP of P, j: BN of N {
    store(Y[p, j], load(X[index(p) * 2 + s, j], pad=-1.5))
  }
}
"""
STRIDED_COLS = """
kernel strided(X: f16[N, M], s: i32) -> (Y: f16[N, P]) {
  tile BN = 16, BP = 32
  parallel j: BN of N, p: BP of P {
    store(Y[j, p], load(X[j, (index(p) - 1) * 3 - s]))
  }
}
"""
STRIDED_SHAPE = {"M": 45, "N": 37, "P": 30}
STRIDES = [0, 1, -1, -7, 20, 44, -60, 90]


def strided_want(text: str, x: np.ndarray, s: int) -> np.ndarray:
    """Y[p] = X[2p + s] (rows, pad -1.5) or Y[:, p] = X[:, 3(p - 1) - s] (columns, 0)."""
    P = STRIDED_SHAPE["P"]
    rows = text == STRIDED_ROWS
    src = x if rows else x.T
    out = np.full((P,) + src.shape[1:], -1.5 if rows else 0.0, x.dtype)
    for p in range(P):
        m = 2 * p + s if rows else 3 * (p - 1) - s
        if 0 <= m < src.shape[0]:
            out[p] = src[m]
    return out if rows else out.T


def strided_inputs(text: str, s: int) -> dict:
    M, N = STRIDED_SHAPE["M"], STRIDED_SHAPE["N"]
    rng = np.random.default_rng(6)
    if text == STRIDED_ROWS:
        return {"X": rng.standard_normal((M, N)).astype(np.float32), "s": np.int32(s)}
    return {"X": rng.standard_normal((N, M)).astype(np.float16), "s": np.int32(s)}


@pytest.mark.parametrize("which", ["rows", "cols"])
def test_the_interpreter_takes_every_nth_element_of_a_strided_tile(which):
    text = STRIDED_ROWS if which == "rows" else STRIDED_COLS
    kernel = typed(text, STRIDED_SHAPE)
    for s in STRIDES:
        inputs = strided_inputs(text, s)
        got = run_kernel(kernel, inputs, shapes=STRIDED_SHAPE)["Y"]
        np.testing.assert_array_equal(got, strided_want(text, inputs["X"], s), err_msg=str(s))


# ---- every target, emulated ----------------------------------------------------------------
@lru_cache(maxsize=None)
def rendered(text: str, target: str, shapes: tuple, choice=None):
    kernel = typed(text, dict(shapes))
    if choice is None:
        source, plans, _, device, _ = driver.render(kernel, target, shapes=dict(shapes))
        return kernel, source, device
    from ptc.devices import get_device
    from ptc.render import render_kernel
    from ptc.sched.construct import construct
    from ptc.stask import build_graphs, propagate

    device = get_device(target)
    (g,) = build_graphs(kernel)
    g = propagate(g, {t.name: t.choices[0] for t in kernel.tiles})
    return kernel, render_kernel(kernel, construct(g, device, choice), g, device), device


@lru_cache(maxsize=None)
def emulated(source: str, device):
    from ptc.render.emulate import build_emulated

    return build_emulated(source, backend=device)


@pytest.mark.cxx
@pytest.mark.parametrize("target", TARGETS)
def test_element_copies_pad_outside_on_every_target(target):
    kernel, source, device = rendered(SHIFT_PAD, target, tuple(SHAPE.items()))
    assert "rows_first" in source
    run = emulated(source, device)
    for s, t in OFFSETS:
        inputs = shift_inputs(np.float32, s, t)
        want = moved(inputs["X"], s, t, -1.5)
        for config in ORDERS:
            np.testing.assert_array_equal(run(kernel, inputs, SHAPE, **config)["Y"], want,
                                          err_msg=f"{target} s={s} t={t} {config}")


# the vector copy each target issues for the moved f16 tile: 16-byte cp.async chunks
# (a TileCopy), or the staged loads of CDNA
VECTOR_COPY = {"sm80": "TileCopy<__half, 32, 64, 8", "sm90": "TileCopy<__half, 32, 64, 8",
               "gfx90a": "StagedTile<ptc::f16, 32, 64, 8", "gfx942": "StagedTile<ptc::f16, 32, 64, 8"}


@pytest.mark.cxx
@pytest.mark.parametrize("target", TARGETS)
def test_vector_copies_zero_fill_outside_on_every_target(target):
    kernel, source, device = rendered(SHIFT_VEC, target, tuple(SHAPE.items()))
    assert VECTOR_COPY[target] in source
    run = emulated(source, device)
    for s, t in OFFSETS:
        inputs = shift_inputs(np.float16, s, t)
        want = moved(inputs["X"], s, 8 * t, 0.0)
        for config in ORDERS + (dict(eager_cp_async=True),):
            np.testing.assert_array_equal(run(kernel, inputs, SHAPE, **config)["Y"], want,
                                          err_msg=f"{target} s={s} t={t} {config}")


@pytest.mark.cxx
@pytest.mark.parametrize("which", ["rows", "cols"])
@pytest.mark.parametrize("target", TARGETS)
def test_strided_tiles_on_every_target(target, which):
    text = STRIDED_ROWS if which == "rows" else STRIDED_COLS
    kernel, source, device = rendered(text, target, tuple(STRIDED_SHAPE.items()))
    assert "tma_load" not in source
    run = emulated(source, device)
    for s in STRIDES:
        inputs = strided_inputs(text, s)
        want = strided_want(text, inputs["X"], s)
        for config in ORDERS:
            np.testing.assert_array_equal(run(kernel, inputs, STRIDED_SHAPE, **config)["Y"],
                                          want, err_msg=f"{target} s={s} {config}")


def gemm_cases():
    from ptc.sched.construct import Choice

    return [(t, None) for t in TARGETS] + [("sm90", Choice("warp_specialized", 2, 1))]


@pytest.mark.cxx
@pytest.mark.parametrize("target, choice", gemm_cases(),
                         ids=[f"{t}-{'ws' if c else 'best'}" for t, c in gemm_cases()])
def test_a_moved_operand_on_the_tensor_cores(target, choice):
    kernel, source, device = rendered(SHIFTED_GEMM, target, tuple(GEMM_SHAPE.items()), choice)
    if choice is not None:      # TMA at the moved, possibly negative, row coordinate
        assert "ptc::tma_load<2>(" in source and "&map_load_A" in source
    run = emulated(source, device)
    for s in (0, 5, -13, 30, -71, 100):
        inputs = gemm_inputs(s)
        want = gemm_formula(inputs)
        for config in ORDERS:
            got = run(kernel, inputs, GEMM_SHAPE, **config)["C"]
            np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2,
                                       err_msg=f"{target} s={s} {config}")


# every other row of A, moved by s: a stride-2 convolution's pixels
STRIDED_GEMM = SHIFTED_GEMM.replace("index(i) - s", "index(i) * 2 - s")


@pytest.mark.cxx
@pytest.mark.parametrize("K", [48, 44], ids=["chunks", "elements"])
def test_strided_rows_feed_wgmma_from_the_producers_copies(K):
    """sm90 warp-specialized: no TMA box takes every other row, so the producer's threads
    copy the rows' 16-byte chunks (element copies where K leaves a row unaligned) into the
    layout TMA would write, where wgmma reads them; against the formula in three orders."""
    from ptc.sched.construct import Choice

    shape = dict(GEMM_SHAPE, K=K)
    kernel, source, device = rendered(STRIDED_GEMM, "sm90", tuple(shape.items()),
                                      Choice("warp_specialized", 2, 1))
    assert "ptc::copy_tile_to_tma_layout_async<__half, 64, 32" in source
    assert "ptc::wgmma_tile<" in source and "&map_load_B" in source
    run = emulated(source, device)
    rng = np.random.default_rng(5)
    for s in (0, 3, -7, 60):
        a = rng.standard_normal((shape["M"], K)).astype(np.float16)
        b = (rng.standard_normal((K, shape["N"])) / np.sqrt(K)).astype(np.float16)
        rows = np.arange(shape["M"]) * 2 - s
        inside = (rows >= 0) & (rows < shape["M"])
        a_rows = np.where(inside[:, None], a[np.clip(rows, 0, shape["M"] - 1)], 0)
        want = a_rows.astype(np.float64) @ b.astype(np.float64)
        for config in ORDERS + (dict(eager_cp_async=True),):
            got = run(kernel, {"A": a, "B": b, "s": np.int32(s)}, shape, **config)["C"]
            np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2,
                                       err_msg=f"K={K} s={s} {config}")


# ---- what TMA takes --------------------------------------------------------------------------
COLUMN_MOVE = """
kernel moved(A: f16[M, K], B: f16[K, N], s: i32) -> (C: f32[M, N]) {{
  tile BM = 64, BN = 64, BK = 32
  parallel i: BM of M, j: BN of N {{
    acc = zeros(f32[BM, BN])
    for k: BK of K {{
      acc += load(A[index(i) - s, index(k) + {cols}]) @ load(B[k, j])
    }}
    store(C[i, j], acc)
  }}
}}
"""


@pytest.mark.parametrize("cols, takes", [("8 * s", True), ("s", False), ("2 * s + 1", False)])
def test_tma_takes_rows_moved_anywhere_and_columns_moved_by_whole_chunks(cols, takes):
    from ptc.lower.tma import TmaBox, tma_box
    from ptc.targets import copy_rules

    kernel = typed(COLUMN_MOVE.format(cols=cols), {"M": 256, "N": 256, "K": 256})
    (load,) = [e for e in _loads(kernel.body) if e.tensor == "A"]
    box = tma_box(kernel, {"BM": 64, "BN": 64, "BK": 32}, load, copy_rules("cuda"))
    assert isinstance(box, TmaBox) == takes, box
    if not takes:
        assert "16-byte chunks" in box


def test_what_a_box_takes_is_its_backends_declaration():
    """The geometry is ptc's (ptc.lower.tma), the limits each backend's own (its
    copy_rules.py): rules of 32-byte chunks refuse the column move 16-byte ones take; a
    backend that declares none (HIP) loads nothing by a bulk copy; CUDA's element types
    are the ones its tensor maps name (one table)."""
    from dataclasses import replace

    from ptc.lower.tma import TmaBox, per_thread_copy, tma_box
    from ptc.targets import copy_rules
    from ptc.targets.cuda.specialized import TMA_DTYPES

    kernel = typed(COLUMN_MOVE.format(cols="8 * s"), {"M": 256, "N": 256, "K": 256})
    (load,) = [e for e in _loads(kernel.body) if e.tensor == "A"]
    tiles, cuda = {"BM": 64, "BN": 64, "BK": 32}, copy_rules("cuda")
    assert isinstance(tma_box(kernel, tiles, load, cuda), TmaBox)
    assert "whole 32-byte chunks" in tma_box(kernel, tiles, load, replace(cuda, chunk_bytes=32))
    assert "fills out-of-bounds elements with 1.5" in \
        tma_box(kernel, tiles, load, replace(cuda, fill=1.5))
    assert copy_rules("hip") is None
    assert tma_box(kernel, tiles, load, None) == "the backend declares no bulk tensor copy"
    assert per_thread_copy(kernel, load, None) == \
        "the backend declares no per-thread asynchronous copy"
    assert cuda.dtypes == frozenset(TMA_DTYPES) and cuda.unit == "TMA"


def _loads(stmts):
    for s in stmts:
        if isinstance(s, (T.Grid, T.Loop)):
            yield from _loads(s.body)
        elif isinstance(s, T.Let):
            yield from _loads_in(s.value)


def _loads_in(e):
    if isinstance(e, T.Load):
        yield e
    for c in T.children(e):
        yield from _loads_in(c)


STRIDED_IN_A_LOOP = """
kernel colsum(X: f32[M, K], s: i32, h: f32[KH]) -> (Y: f32[M]) {
  tile BM = 64, BK = 32
  parallel i: BM of M {
    acc = zeros(f32[BM])
    for k: BK of KH {
      acc += rowsum(load(X[i, index(k) * 2 + s]))
    }
    store(Y[i], acc)
  }
}
"""


def test_a_warp_specialized_producer_refuses_strided_columns_with_the_reason():
    """No TMA box takes every other column, and the producer's cp.async copies take
    consecutive columns: the plan does not apply (the search takes another)."""
    from ptc.sched.construct import Choice, Unfit

    with pytest.raises(Unfit, match="every n-th element of the innermost dim"):
        rendered(STRIDED_IN_A_LOOP, "sm90", (("M", 70), ("K", 100), ("KH", 50)),
                 Choice("warp_specialized", 2, 1))


STRIDED_SUMS = """
kernel sums(X: f16[M, K]) -> (S: f32[M]) {{
  tile BM = 64, BK = {bk}
  parallel i: BM of M {{
    acc = zeros(f32[BM])
    for k: BK of K {{
      acc += rowsum(load(X[index(i) * 2 + 1, k]) as f32)
    }}
    store(S[i], acc)
  }}
}}
"""


@pytest.mark.cxx
def test_the_producer_copies_strided_rows_for_the_cuda_cores_or_says_why_not():
    """sm90 warp-specialized, a strided f16 tile the CUDA cores reduce: its rows' chunks go
    into the layout TMA would write (BK = 32), and a tile no such layout takes (BK = 4: rows
    of 8 bytes) is no plan, with the reason, rather than a copy of 2-byte cp.asyncs."""
    from ptc.devices import get_device
    from ptc.sched.construct import Choice, Unfit, construct
    from ptc.stask import build_graphs, propagate

    ws = Choice("warp_specialized", 2, 1)
    shape = {"M": 70, "K": 64}
    kernel = typed(STRIDED_SUMS.format(bk=4), shape)
    (g,) = build_graphs(kernel)
    with pytest.raises(Unfit, match="no layout wgmma reads takes a 64 x 4 tile"):
        construct(propagate(g, {"BM": 64, "BK": 4}), get_device("sm90"), ws)
    kernel, source, device = rendered(STRIDED_SUMS.format(bk=32), "sm90",
                                      tuple(shape.items()), ws)
    assert "ptc::copy_tile_to_tma_layout_async<__half, 64, 32" in source
    x = np.random.default_rng(6).standard_normal((70, 64)).astype(np.float16)
    rows = np.arange(70) * 2 + 1
    want = np.where(rows < 70, x[np.minimum(rows, 69)].astype(np.float64).sum(axis=1), 0)
    run = emulated(source, device)
    for config in ORDERS:
        np.testing.assert_allclose(run(kernel, {"X": x}, shape, **config)["S"], want,
                                   rtol=1e-5, atol=1e-3, err_msg=str(config))
