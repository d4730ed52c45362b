"""Issue 22, part 3: gathered rows (`load(X[load(idx[i], pad=-1), k])`) and scattered
stores (`store(Y[load(out[i], pad=-1), j], v)`), docs/language.md, "Gathered rows". The
truth is NumPy written here: row m of a gathered tile is X[idx[m]] where
0 <= idx[m] < T, the pad elsewhere (and past the index tensor's end, where the index
load's pad -1 is no row); a scattered row m goes to Y[out[m]] where 0 <= out[m] < R, and
nowhere else.

The interpreter is checked at ragged shapes with positions below 0, past the end and
repeated; the rendered kernels of every target on the emulators, in three thread orders:
element copies with a pad (f32), vector copies (f16: cp.async with src-size 0 on
sm80/sm90, the staged loads' zeros on gfx90a/gfx942). The MoE sample (samples/moe_gemm.pt)
takes a gathered tile to the tensor cores (tests/test_emulate*.py, test_nvcc, test_hip_build).
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from ptc import driver
from ptc.interp import run_kernel
from test_offset_tiles import emulated, rendered, typed

TARGETS = ("sm80", "sm90", "gfx90a", "gfx942")
ORDERS = (dict(), dict(order="reverse"), dict(order="random", seed=5))
SHAPE = {"T": 45, "N": 70, "M": 50, "R": 40}   # ragged against the 32 x 64 tiles

GATHER_PAD = """
kernel gather(X: f32[T, N], idx: i32[M], out: i32[M]) -> (Y: f32[R, N]) {
  dims T = 256, N = 256, M = 256, R = 256
  tile BM = 32, BN = 64
  parallel i: BM of M, j: BN of N {
    store(Y[load(out[i], pad=-1), j], load(X[load(idx[i], pad=-1), j], pad=-1.5))
  }
}
"""
# f16 with zeros and 64 columns: 16-byte vector copies of each gathered row
GATHER_VEC = GATHER_PAD.replace("f32", "f16").replace(", pad=-1.5", "")
VEC_SHAPE = dict(SHAPE, N=64)

SCATTER_ADD = """
kernel scatter_add(V: f32[M, N], out: i32[M]) -> (Y: f32[R, N]) {
  tile BM = 32, BN = 64
  parallel i: BM of M, j: BN of N {
    atomic_add(Y[load(out[i], pad=-1), j], load(V[i, j]))
  }
}
"""


def positions(seed: int, shapes: dict) -> tuple[np.ndarray, np.ndarray]:
    """idx: positions in [-3, T + 3) (some before X, some past it, repeats); out: a
    permutation of Y's rows with the M - R others outside Y (below 0 and past R)."""
    rng = np.random.default_rng(seed)
    T_, M, R = shapes["T"], shapes["M"], shapes["R"]
    idx = rng.integers(-3, T_ + 3, M).astype(np.int32)
    extra = np.array([-1 - k if k % 2 else R + k for k in range(M - R)], np.int32)
    out = rng.permutation(np.concatenate([np.arange(R, dtype=np.int32), extra]))
    return idx, out.astype(np.int32)


def gather_inputs(dtype, seed: int, shapes: dict) -> dict:
    x = np.random.default_rng(seed + 100).standard_normal((shapes["T"], shapes["N"]))
    idx, out = positions(seed, shapes)
    return {"X": x.astype(dtype), "idx": idx, "out": out}


def gather_want(inputs: dict, R: int, pad: float) -> np.ndarray:
    x, idx, out = inputs["X"], inputs["idx"], inputs["out"]
    y = np.zeros((R, x.shape[1]), x.dtype)
    for m in range(len(idx)):
        if 0 <= out[m] < R:
            y[out[m]] = x[idx[m]] if 0 <= idx[m] < x.shape[0] else pad
    return y


# ---- the interpreter ---------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_interpreter_gathers_and_scatters_rows(seed):
    inputs = gather_inputs(np.float32, seed, SHAPE)
    got = run_kernel(typed(GATHER_PAD, SHAPE), inputs, shapes=SHAPE)["Y"]
    np.testing.assert_array_equal(got, gather_want(inputs, SHAPE["R"], -1.5))


def test_the_interpreter_adds_a_row_scattered_twice_once_per_row():
    shapes = {"M": 37, "N": 20, "R": 5}
    rng = np.random.default_rng(7)
    v = rng.standard_normal((37, 20)).astype(np.float32)
    out = rng.integers(-2, 7, 37).astype(np.int32)          # repeats, and rows outside
    got = run_kernel(typed(SCATTER_ADD, shapes), {"V": v, "out": out}, shapes=shapes)["Y"]
    want = np.zeros((5, 20))
    for m in range(37):
        if 0 <= out[m] < 5:
            want[out[m]] += v[m]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# ---- every target, emulated --------------------------------------------------------------
@pytest.mark.cxx
@pytest.mark.parametrize("target", TARGETS)
def test_element_copies_pad_rows_with_no_position_on_every_target(target):
    kernel, source, device = rendered(GATHER_PAD, target, tuple(SHAPE.items()))
    assert "copy_gathered_sync" in source and "rows.at(" in source
    run = emulated(source, device)
    for seed in (0, 1):
        inputs = gather_inputs(np.float32, seed, SHAPE)
        want = gather_want(inputs, SHAPE["R"], -1.5)
        for config in ORDERS:
            np.testing.assert_array_equal(run(kernel, inputs, SHAPE, **config)["Y"], want,
                                          err_msg=f"{target} seed={seed} {config}")


# the vector copy each target issues for a gathered f16 tile
VECTOR_COPY = {"sm80": "copy_gathered_async<__half, 32, 64, 8",
               "sm90": "copy_gathered_async<__half, 32, 64, 8",
               "gfx90a": "load_gathered(", "gfx942": "load_gathered("}


@pytest.mark.cxx
@pytest.mark.parametrize("target", TARGETS)
def test_vector_copies_zero_fill_rows_with_no_position_on_every_target(target):
    kernel, source, device = rendered(GATHER_VEC, target, tuple(VEC_SHAPE.items()))
    assert VECTOR_COPY[target] in source
    run = emulated(source, device)
    for seed in (0, 1):
        inputs = gather_inputs(np.float16, seed, VEC_SHAPE)
        want = gather_want(inputs, VEC_SHAPE["R"], 0.0)
        for config in ORDERS + (dict(eager_cp_async=True),):
            np.testing.assert_array_equal(run(kernel, inputs, VEC_SHAPE, **config)["Y"], want,
                                          err_msg=f"{target} seed={seed} {config}")


# ---- the plan sees a gathered copy -------------------------------------------------------
def test_a_gathered_copy_goes_by_no_tma_and_costs_a_request_per_row():
    from ptc.lower.tma import GATHERED, tma_box
    from ptc.targets import copy_rules
    from ptc.sched.cost import SECTOR_BYTES, gathered_bytes
    from ptc.stask import build_graphs, propagate

    kernel = typed(GATHER_VEC, VEC_SHAPE)
    (g,) = build_graphs(kernel)
    g = propagate(g, {"BM": 32, "BN": 64})
    load = next(t for t in g.tasks if t.op == "load")
    store = next(t for t in g.tasks if t.op == "store")
    assert (load.gathered, store.gathered) == ("idx", "out")
    assert gathered_bytes(load) == gathered_bytes(store) == 2 * SECTOR_BYTES * 32
    (let,) = load.stmts
    assert tma_box(kernel, {"BM": 32, "BN": 64}, let.value, copy_rules("cuda")) == GATHERED


def test_sm90_multiplies_gathered_rows_on_wgmma_from_the_producers_copies():
    """No TMA box takes gathered rows: the producer warpgroup's threads copy them by cp.async
    into the layout TMA would write, and wgmma reads them there (the MoE sample's plan;
    tests/test_emulate.py runs it, test_nvcc finds HGMMA in its SASS)."""
    from pathlib import Path

    from ptc.driver import check_file

    sample = Path(__file__).resolve().parent.parent / "samples" / "moe_gemm.pt"
    kernel = check_file(sample).kernels[0]
    source, plans, _, _, _ = driver.render(kernel, "sm90")
    assert [p.style for p in plans] == ["warp_specialized"]
    assert "ptc::copy_gathered_to_tma_layout_async<__half" in source
    assert "ptc::wgmma_tile<" in source


# gathered rows as either operand of the tensor cores: A's rows (a MoE expert's tokens),
# or B's k rows (paged attention's V rows), each with positions outside the tensor and a
# ragged last tile of positions (the index load's pad -1)
GATHERED_GEMM = """
kernel gathered(PARAMS, idx: i32[ROWS]) -> (C: f32[M, N]) {
  dims M = 256, N = 256, K = 256, T = 256
  tile BM = 64, BN = 64, BK = 32
  parallel i: BM of M, j: BN of N {
    acc = zeros(f32[BM, BN])
    for k: BK of K {
      acc += PRODUCT
    }
    store(C[i, j], acc)
  }
}
"""
GATHERED_A = GATHERED_GEMM.replace("PARAMS", "X: f16[T, K], B: f16[K, N]").replace(
    "ROWS", "M").replace("PRODUCT", "load(X[load(idx[i], pad=-1), k]) @ load(B[k, j])")
GATHERED_B = GATHERED_GEMM.replace("PARAMS", "A: f16[M, K], V: f16[T, N]").replace(
    "ROWS", "K").replace("PRODUCT", "load(A[i, k]) @ load(V[load(idx[k], pad=-1), j])")
MMA_SHAPE = {"M": 72, "N": 40, "K": 48, "T": 60}


def mma_case(which: str, shape: dict) -> tuple[dict, np.ndarray]:
    rng = np.random.default_rng(11)
    M, N, K, T_ = (shape[d] for d in "MNKT")
    scale = 1.0 / np.sqrt(K)
    if which == "a":      # X's rows at M positions, times B
        x, b = rng.standard_normal((T_, K)), rng.standard_normal((K, N)) * scale
        ins = {"X": x.astype(np.float16), "B": b.astype(np.float16)}
        n, left, table = M, None, "X"
    else:                 # A times V's rows at K positions
        a, v = rng.standard_normal((M, K)), rng.standard_normal((T_, N)) * scale
        ins = {"A": a.astype(np.float16), "V": v.astype(np.float16)}
        n, left, table = K, "A", "V"
    idx = rng.integers(-2, T_ + 2, n).astype(np.int32)
    src = ins[table].astype(np.float64)
    rows = np.where(((idx >= 0) & (idx < T_))[:, None], src[np.clip(idx, 0, T_ - 1)], 0.0)
    want = rows @ ins["B"].astype(np.float64) if left is None else \
        ins[left].astype(np.float64) @ rows
    return dict(ins, idx=idx), want


# what carries the product on each target
MMA_MARK = {"sm80": "ptc::mma_tile<", "sm90": "ptc::wgmma_tile<", "gfx90a": "ptc::mfma_tile<",
            "gfx942": "ptc::mfma_tile<"}


@pytest.mark.cxx
@pytest.mark.parametrize("which", ["a", "b"])
@pytest.mark.parametrize("target", TARGETS)
def test_gathered_rows_feed_the_tensor_cores_on_every_target(target, which):
    text = GATHERED_A if which == "a" else GATHERED_B
    kernel, source, device = rendered(text, target, tuple(MMA_SHAPE.items()))
    assert MMA_MARK[target] in source
    if which == "b" and target.startswith("gfx"):     # B's k rows land transposed in LDS
        assert "StagedTileK8<" in source and "load_gathered(" in source
        assert re.search(r"copy_gathered_sync<[^>]*, true>\(", source)   # K8
    run = emulated(source, device)
    # N = 37: rows of no whole 16-byte chunks, the element copies (K8 ones on gfx)
    for shape in (MMA_SHAPE, dict(MMA_SHAPE, N=37)):
        inputs, want = mma_case(which, shape)
        np.testing.assert_allclose(run_kernel(kernel, inputs, shapes=shape)["C"], want,
                                   rtol=2e-3, atol=2e-3)
        for config in ORDERS:
            np.testing.assert_allclose(run(kernel, inputs, shape, **config)["C"], want,
                                       rtol=2e-3, atol=2e-3,
                                       err_msg=f"{target} {which} {shape} {config}")


def test_a_gathered_copy_issues_more_address_work_than_a_copy_of_consecutive_rows():
    """Each chunk of a gathered copy (each element of a scattered store) loads its row's
    position, checks it and forms the row's address: 3 instructions more than the plain
    copy of the same tile (ptc.lower.costs, shown by explain's issue table)."""
    from ptc.lower.costs import GATHER_INSTRUCTIONS_PER_CHUNK

    plain = """
kernel plain(X: f16[M, N], idx: i32[M], out: i32[M]) -> (Y: f16[M, N]) {
  tile BM = 32, BN = 64
  parallel i: BM of M, j: BN of N {
    store(Y[i, j], load(X[i, j]))
  }
}
"""
    issued = {}
    for which, text, shapes in (("gathered", GATHER_VEC, VEC_SHAPE),
                                ("plain", plain, {"M": 50, "N": 64})):
        kernel = typed(text, shapes)
        _, plans, _, _, _ = driver.render(kernel, "sm80", shapes=shapes)
        issued[which] = {t.task: t.simt for t in plans[0].issue}
    # per chunk: the copy's 3 (COPY_INSTRUCTIONS_PER_CHUNK) and the gather's 3
    assert GATHER_INSTRUCTIONS_PER_CHUNK == 3
    assert issued["gathered"]["load_X"] == 2 * issued["plain"]["load_X"] > 0
    assert issued["gathered"]["store_Y"] > issued["plain"]["store_Y"]
