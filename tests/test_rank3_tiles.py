"""Issue 22: tiles of rank 3 (docs/language.md, "Tiles of rank 3"). A `[G, BM, BN]` tile is
computed as its G * BM rows (ptc.sema.batched); its row values (`rowmax(x)`, `[G, BM]`) are
one vector of those rows. The truth is NumPy written here, per head and row: row (h, m) of
a tile of heads g*G.. and rows i*BM.. is X[h, m] where h < H and m < M (the pad elsewhere),
and only those rows are stored.

The interpreter is checked at ragged shapes (heads, rows and columns past the tensor); the
rendered kernels of every target on the emulators, in three thread orders: element copies
with a pad (f32) and 16-byte vector copies (f16). The tensor cores take a tile of rank 3 in
tests/kernels/gqa_packed_attn.pt (every target, and sm90's warp-specialized plan) and in the
coverage catalogue (tests/coverage/producer_rows.pt: the sm90 producer's copies of its rows).
"""
from __future__ import annotations

import numpy as np
import pytest

from ptc import driver
from ptc.interp import run_kernel
from ptc.lower.printer import print_lowered
from ptc.sema.batched import analyze, flatten
from ptc.sema.printer import print_kernel
from test_offset_tiles import emulated, rendered, typed

TARGETS = ("sm80", "sm90", "gfx90a", "gfx942")
ORDERS = (dict(), dict(order="reverse"), dict(order="random", seed=5))

# f32 with a pad that is not 0: element copies; the pad reaches the stored rows through the
# row sums of the last column tile (N = 70 against BN = 64)
SUMS_PAD = """
kernel head_sums(X: f32[H, M, N], w: f32[N]) -> (Y: f32[H, M, N]) {
  tile G = 4, BM = 32, BN = 64
  parallel g: G of H, i: BM of M, j: BN of N {
    x = load(X[g, i, j], pad=-1.5)                # f32[G, BM, BN]
    r = rowsum(x)                                  # f32[G, BM]: one value per row
    store(Y[g, i, j], x * load(w[j])[None, :] + r[:, :, None])
  }
}
"""
SUMS_SHAPE = {"H": 6, "M": 45, "N": 70}     # heads 6, 7 and rows 45.. lie outside

# f16 with zeros and 64 columns: 16-byte vector copies of each row, whole rows reduced
MAX_VEC = """
kernel head_max(X: f16[H, M, N]) -> (Y: f16[H, M, N]) {
  dims N = 64
  tile G = 4, BM = 32
  parallel g: G of H, i: BM of M {
    x = load(X[g, i, :])
    mx = full(f32[G, BM], -inf)
    mx = max(mx, rowmax(x as f32))
    store(Y[g, i, :], ((x as f32) * 2.0 - mx[:, :, None]) as f16)
  }
}
"""
MAX_SHAPE = {"H": 7, "M": 40, "N": 64}


def sums_want(x: np.ndarray, w: np.ndarray, pad: float, bn: int) -> np.ndarray:
    H, M, N = x.shape
    y = np.zeros_like(x)
    for j0 in range(0, N, bn):
        cols = slice(j0, min(j0 + bn, N))
        missing = j0 + bn - min(j0 + bn, N)
        r = x[:, :, cols].astype(np.float64).sum(axis=2) + pad * missing
        y[:, :, cols] = (x[:, :, cols] * w[cols] + r[:, :, None]).astype(x.dtype)
    return y


def sums_inputs(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    H, M, N = (SUMS_SHAPE[d] for d in "HMN")
    return {"X": rng.standard_normal((H, M, N)).astype(np.float32),
            "w": rng.standard_normal(N).astype(np.float32)}


def max_inputs(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {"X": rng.standard_normal(tuple(MAX_SHAPE[d] for d in "HMN")).astype(np.float16)}


def max_want(x: np.ndarray) -> np.ndarray:
    x32 = x.astype(np.float32)
    return (x32 * 2.0 - x32.max(axis=2, keepdims=True)).astype(np.float16)


# ---- the language and its row form ---------------------------------------------------------
def test_the_interpreter_computes_tiles_of_rank_3_per_head_and_row():
    kernel = typed(SUMS_PAD, SUMS_SHAPE)
    for seed in (0, 1):
        inputs = sums_inputs(seed)
        got = run_kernel(kernel, inputs, shapes=SUMS_SHAPE)["Y"]
        np.testing.assert_allclose(got, sums_want(inputs["X"], inputs["w"], -1.5, 64),
                                   rtol=1e-5, atol=1e-5)
    inputs = max_inputs(0)
    got = run_kernel(typed(MAX_VEC, MAX_SHAPE), inputs, shapes=MAX_SHAPE)["Y"]
    np.testing.assert_array_equal(got, max_want(inputs["X"]))


def test_the_row_values_of_a_tile_of_rank_3_are_found_through_loops_and_names():
    kernel = typed(open(_corpus("gqa_packed_attn.pt")).read(), {})
    # the running maxima and sums, carried through the loop, are the query rows' values
    assert analyze(kernel).names == {"mx", "l", "mn", "a"}
    assert not analyze(kernel).errors


def test_the_back_end_builds_the_rows_and_the_typed_program_keeps_rank_3():
    kernel = typed(SUMS_PAD, SUMS_SHAPE)
    assert "f32[G, BM, BN]" in print_kernel(kernel)
    flat = print_kernel(flatten(kernel))
    assert "f32[G*BM, BN]" in flat and "f32[G*BM, 1]" in flat and "f32[G, BM" not in flat
    plain = typed(open(_corpus("gqa_attn.pt")).read(), {})
    assert flatten(plain) is plain           # nothing of rank 3: the kernel itself
    text = print_lowered(driver.lowered(kernel, "sm80", shapes=SUMS_SHAPE)[0][0])
    assert "X[128x64] rows of 4x32" in text and "Y[128x64] rows of 4x32" in text


def test_a_tile_of_rank_3_is_one_tma_box_of_three_dims_whose_rows_land_in_order():
    from ptc.lower.tma import STRIDED, TmaBox, tma_box
    from ptc.targets import copy_rules
    kernel = flatten(typed(MAX_VEC, MAX_SHAPE))
    load, rules = kernel.body[0].body[0].value, copy_rules("cuda")
    box = tma_box(kernel, {"G": 4, "BM": 32}, load, rules)
    assert isinstance(box, TmaBox) and box.box == (4, 32, 64), box
    assert (box.layout.rows, box.layout.cols) == (128, 64)     # the rows: 4 x 32, in order
    strided = flatten(typed(MAX_VEC.replace("X[g, i, :]", "X[g, index(i) * 2, :]"),
                            MAX_SHAPE)).body[0].body[0].value
    assert tma_box(kernel, {"G": 4, "BM": 32}, strided, rules) == STRIDED  # the threads copy it


# the row values of a tile of rank 3 stored to a 2-D tile of two tiled dims (a flash
# attention's log-sum-exp): their vector of rows goes out as a column of rows, each at its
# (head, row) position, none past H or M
ROW_SUMS = """
kernel row_sums(X: f32[H, M, N]) -> (S: f32[H, M], Y: f32[H, M, N]) {
  dims N = 48
  tile G = 4, BM = 16
  parallel g: G of H, i: BM of M {
    x = load(X[g, i, :])
    r = rowsum(x)
    store(S[g, i], r * 0.5)
    store(Y[g, i, :], x - r[:, :, None])
  }
}
"""


@pytest.mark.cxx
@pytest.mark.parametrize("target", TARGETS)
def test_row_values_of_a_tile_of_rank_3_are_stored_to_their_heads_and_rows(target):
    shape = {"H": 7, "M": 37, "N": 48}
    kernel, source, device = rendered(ROW_SUMS, target, tuple(shape.items()))
    x = np.random.default_rng(3).standard_normal((7, 37, 48)).astype(np.float32)
    sums = x.astype(np.float64).sum(axis=2)
    run = emulated(source, device)
    for config in ORDERS:
        got = run(kernel, {"X": x}, shape, **config)
        np.testing.assert_allclose(got["S"], sums * 0.5, rtol=1e-5, atol=1e-5,
                                   err_msg=f"{target} {config}")
        np.testing.assert_allclose(got["Y"], x - sums[:, :, None], rtol=1e-5, atol=1e-5)


# a warp-specialized sm90 plan loads the [G, BM, BK] tile by TMA (a box of three dims);
# where K leaves a row unaligned the launch takes the element-wise variant, whose producer
# threads address each row (BatchRows) into the layout the box writes
HEADS_ROWSUM = """
kernel heads_rowsum(X: f16[H, M, K]) -> (S: f32[H, M, 1]) {
  tile G = 4, BM = 16, BK = 64
  parallel g: G of H, i: BM of M {
    acc = zeros(f32[G, BM, 1])
    for k: BK of K {
      acc += rowsum(load(X[g, i, k]) as f32)[:, :, None]
    }
    store(S[g, i, :], acc)
  }
}
"""


@pytest.mark.cxx
@pytest.mark.parametrize("k", [128, 70])
def test_sm90_loads_a_tile_of_rank_3_by_tma_and_without_a_tensor_map(k):
    from ptc.sched.construct import Choice, Style
    shape = {"H": 6, "M": 40, "K": k}
    kernel, source, device = rendered(HEADS_ROWSUM, "sm90", tuple(shape.items()),
                                      Choice(Style.WARP_SPECIALIZED, 2, 1))
    assert "ptc::tma_load<3>" in source and "copy_gathered_to_tma_layout<" in source
    x = np.random.default_rng(1).standard_normal((6, 40, k)).astype(np.float16)
    want = x.astype(np.float32).sum(axis=2, keepdims=True)
    run = emulated(source, device)
    for config in ORDERS:
        np.testing.assert_allclose(run(kernel, {"X": x}, shape, **config)["S"], want,
                                   rtol=1e-5, atol=1e-5, err_msg=f"K={k} {config}")


@pytest.mark.cxx
def test_two_consumer_warpgroups_divide_the_heads_of_a_tile_of_rank_3():
    """sm90, 2 consumers: the [4, 32, D] query tile's 128 rows are two warpgroups' 64, two
    heads each (the split along the outer axis: ptc.lower.specialized_plan.split_rows); each
    stores its heads' rows of O and their log-sum-exps."""
    from ptc.sched.construct import Choice, Style
    shape = dict(B=1, H=8, G=2, S=50, T=90, D=64)
    text = open(_corpus("gqa_packed_attn.pt")).read().replace(
        "tile GH in [4, 2], BM in [32, 16, 64]", "tile GH in [4], BM in [32]")
    kernel, source, device = rendered(text, "sm90", tuple(shape.items()),
                                      Choice(Style.WARP_SPECIALIZED, 2, 2))
    assert "rows 64 each" in source
    rng = np.random.default_rng(4)
    import ml_dtypes
    q, k, v = (rng.standard_normal(s).astype(ml_dtypes.bfloat16) for s in
               ((1, 8, 50, 64), (1, 2, 90, 64), (1, 2, 90, 64)))
    scores = np.einsum("bhsd,bhtd->bhst", q.astype(np.float64),
                       np.repeat(k.astype(np.float64), 4, axis=1)) / 8.0
    top = scores.max(axis=-1)
    weights = np.exp(scores - top[..., None])
    lse = top + np.log(weights.sum(axis=-1))
    o = (weights / weights.sum(axis=-1)[..., None]) @ np.repeat(v.astype(np.float64), 4, axis=1)
    run = emulated(source, device)
    for config in ORDERS:
        got = run(kernel, {"Q": q, "K": k, "V": v}, shape, **config)
        np.testing.assert_allclose(got["LSE"], lse, rtol=1e-5, atol=1e-5, err_msg=str(config))
        np.testing.assert_allclose(got["O"].astype(np.float64), o, atol=2e-2,
                                   err_msg=str(config))


# an index tile broadcast over the heads, named: row m of each head keeps its first m + 1
# columns (arange's positions within the tile, computed again for every row of the heads)
LOWER_TRIANGLE = """
kernel lower_triangle(X: f32[H, M, N]) -> (Y: f32[H, M, N]) {
  tile G = 4, BM = 32, BN = 32
  parallel g: G of H, i: BM of M, j: BN of N {
    keep = arange(BM)[:, None] + 1 > arange(BN)[None, :]
    store(Y[g, i, j], where(keep, load(X[g, i, j]), -2.0))
  }
}
"""


def triangle_want(x: np.ndarray) -> np.ndarray:
    H, M, N = x.shape
    keep = (np.arange(M)[:, None] % 32) >= (np.arange(N)[None, :] % 32)
    return np.where(keep[None], x, np.float32(-2.0))


# the same in the spelling of rank 3: 1 along the heads (`[None, :, None]`)
LOWER_TRIANGLE_3D = LOWER_TRIANGLE.replace(
    "keep = arange(BM)[:, None] + 1 > arange(BN)[None, :]",
    "keep = arange(BM)[None, :, None] + 1 > arange(BN)[None, None, :]")


@pytest.mark.cxx
@pytest.mark.parametrize("text,target", [(LOWER_TRIANGLE, "sm80"),
                                         (LOWER_TRIANGLE_3D, "sm80"),
                                         (LOWER_TRIANGLE_3D, "gfx942")])
def test_an_index_tile_broadcast_over_the_heads_is_computed_again_for_every_row(text, target):
    kernel = typed(text, SUMS_SHAPE)
    assert "mod(arange(G*BM), BM)" in print_kernel(flatten(kernel))
    x = sums_inputs(2)["X"]
    want = triangle_want(x)
    np.testing.assert_array_equal(run_kernel(kernel, {"X": x}, shapes=SUMS_SHAPE)["Y"], want)
    kernel, source, device = rendered(text, target, tuple(SUMS_SHAPE.items()))
    run = emulated(source, device)
    for config in ORDERS:
        np.testing.assert_array_equal(run(kernel, {"X": x}, SUMS_SHAPE, **config)["Y"], want)


# both leading axes moved and strided (a stride-2 convolution's pixels), the columns moved
# too, with a pad: element (a, b, c) of tile (g, i, j) is X[(4g + a) * 2 - 1, (16i + b) * 2
# + s, 32j + c - t] where inside X, the pad elsewhere -- below 0 and past the end
MOVED = """
kernel moved(X: f32[H, M, N], s: i32, t: i32) -> (Y: f32[OH, OM, N]) {
  tile G = 4, BM = 16, BN = 32
  parallel g: G of OH, i: BM of OM, j: BN of N {
    store(Y[g, i, j], load(X[index(g) * 2 - 1, index(i) * 2 + s, index(j) - t], pad=-1.5))
  }
}
"""
MOVED_SHAPE = {"H": 9, "M": 40, "N": 50, "OH": 6, "OM": 22}


def moved_want(x: np.ndarray, s: int, t: int) -> np.ndarray:
    H, M, N = x.shape
    y = np.full((MOVED_SHAPE["OH"], MOVED_SHAPE["OM"], N), -1.5, np.float32)
    for a in range(y.shape[0]):
        for b in range(y.shape[1]):
            for c in range(N):
                h, m, n = a * 2 - 1, b * 2 + s, c - t
                if 0 <= h < H and 0 <= m < M and 0 <= n < N:
                    y[a, b, c] = x[h, m, n]
    return y


@pytest.mark.cxx
@pytest.mark.parametrize("target", TARGETS)
def test_offset_and_strided_axes_of_a_tile_of_rank_3_read_the_pad_outside(target):
    kernel, source, device = rendered(MOVED, target, tuple(MOVED_SHAPE.items()))
    assert "BatchRows<16, 2, 2>" in source
    run = emulated(source, device)
    x = np.random.default_rng(5).standard_normal((9, 40, 50)).astype(np.float32)
    for s, t in ((0, 0), (-3, 5), (1, -7)):
        inputs = {"X": x, "s": np.int32(s), "t": np.int32(t)}
        want = moved_want(x, s, t)
        np.testing.assert_array_equal(run_kernel(kernel, inputs, shapes=MOVED_SHAPE)["Y"], want)
        for config in ORDERS:
            np.testing.assert_array_equal(run(kernel, inputs, MOVED_SHAPE, **config)["Y"], want,
                                          err_msg=f"{target} s={s} t={t} {config}")


# ---- on the emulators ------------------------------------------------------------------------
@pytest.mark.cxx
@pytest.mark.parametrize("target", TARGETS)
def test_element_copies_pad_the_heads_and_rows_outside_on_every_target(target):
    kernel, source, device = rendered(SUMS_PAD, target, tuple(SUMS_SHAPE.items()))
    assert "BatchRows<32>" in source and "copy_gathered_sync" in source
    run = emulated(source, device)
    for seed in (0, 1):
        inputs = sums_inputs(seed)
        want = sums_want(inputs["X"], inputs["w"], -1.5, 64)
        for config in ORDERS:
            np.testing.assert_allclose(run(kernel, inputs, SUMS_SHAPE, **config)["Y"], want,
                                       rtol=1e-5, atol=1e-5,
                                       err_msg=f"{target} seed={seed} {config}")


# the vector copy each target issues for the rows of an f16 tile of rank 3
VECTOR_COPY = {"sm80": "copy_gathered_async<__half, 128, 64, 8",
               "sm90": "copy_gathered_async<__half, 128, 64, 8",
               "gfx90a": "load_gathered(", "gfx942": "load_gathered("}


@pytest.mark.cxx
@pytest.mark.parametrize("target", TARGETS)
def test_vector_copies_zero_fill_the_heads_and_rows_outside_on_every_target(target):
    kernel, source, device = rendered(MAX_VEC, target, tuple(MAX_SHAPE.items()))
    assert VECTOR_COPY[target] in source
    run = emulated(source, device)
    for seed in (0, 1):
        inputs = max_inputs(seed)
        want = max_want(inputs["X"])
        for config in ORDERS + (dict(eager_cp_async=True),):
            np.testing.assert_array_equal(run(kernel, inputs, MAX_SHAPE, **config)["Y"], want,
                                          err_msg=f"{target} seed={seed} {config}")


def _corpus(name: str) -> str:
    from pathlib import Path
    return str(Path(__file__).resolve().parent / "kernels" / name)
