"""Issue 22: what a tile of rank 3 combines with beyond its own shape (docs/language.md,
"Tiles of rank 3"). Its row form (ptc.sema.batched) computes `[G, BM, BN]` as G * BM rows:

- a `[G, BM]` tile loaded from a tensor meets the tile's row values (a backward pass reads
  the forward's log-sum-exps): its G x BM elements in order are the rows' vector;
- a 2-D tile of data broadcast over the heads (`s + load(bias[i, j])`, `[None, :, :]`, a
  vector `load(w[i])[:, None]`, a named mask) is computed again for every row: its load
  reads its rows once per head (T.RepeatRows; the copy's BatchRows has an outer step of 0);
- row values take a value per head or per row of each head spelled from vectors
  (`mx * load(slope[g])[:, None] + load(w[i])`, `where(index(i)[None, :] < M, mx, 0.0)`):
  the row form makes each the rows' vector;
- a value per head broadcast over its rows (`load(slope[g])[:, None, None]`, a `[G, 1,
  BN]` row per head, `index(g)[:, None, None]`) is computed for every row of its head: its
  load reads each row for the head's rows (BatchRows of inner step 0).

The truth is NumPy written here from the language's broadcasting rules, and the
interpreter; every target's kernel is emulated in three thread orders, sm90's
warp-specialized plans with one and two consumer warpgroups too.
"""
from __future__ import annotations

import numpy as np
import pytest

from ptc import driver
from ptc.interp import run_kernel
from ptc.lower.printer import print_lowered
from ptc.sema.batched import flatten
from ptc.sema.printer import print_kernel
from test_offset_tiles import emulated, rendered, typed

TARGETS = ("sm80", "sm90", "gfx90a", "gfx942")
ORDERS = (dict(), dict(order="reverse"), dict(order="random", seed=5))
SHAPE = {"H": 6, "M": 45, "N": 70}      # heads 6, 7 and rows 45.. lie outside

# the data broadcast over the heads, in each spelling: a [BM, BN] tile by NumPy's rule, a
# named [BM, BN] mask, a [BM] vector as a column, and the same at rank 3 ([None, :, None])
BROADCAST = """
kernel broadcast(S: f32[H, M, N], bias: f32[M, N], w: f32[M], mask: f32[M, N])
    -> (O: f32[H, M, N]) {
  tile G in [4], BM in [32], BN in [64, 32]
  parallel g: G of H, i: BM of M, j: BN of N {
    keep = load(mask[i, j]) > 0.0
    shift = load(w[i])[None, :, None]
    s = load(S[g, i, j]) * load(w[i])[:, None] + load(bias[i, j])
    store(O[g, i, j], where(keep, s + shift, -1.0))
  }
}
"""

# row values loaded from a tensor: the [G, BM] tile of maxima m0 meets the tile's own row
# maxima (one value per row, of its BN columns, the pad 0 past N), and comes back per row
LOADED_ROWS = """
kernel loaded_rows(S: f32[H, M, N], m0: f32[H, M]) -> (O: f32[H, M, N]) {
  tile G in [4], BM in [32], BN in [64]
  parallel g: G of H, i: BM of M, j: BN of N {
    s = load(S[g, i, j])
    mx = max(rowmax(s), load(m0[g, i]))
    store(O[g, i, j], s - mx[:, :, None])
  }
}
"""


# one value per head ([G, 1, 1]: ALiBi's slopes, an index) and one row per head
# ([G, 1, BN]), each broadcast over the head's rows, beside a [BM, BN] tile of indices
PER_HEAD = """
kernel per_head(S: f32[H, M, N], slope: f32[H], hb: f32[H, N]) -> (O: f32[H, M, N]) {
  tile G in [4], BM in [32], BN in [64, 32]
  parallel g: G of H, i: BM of M, j: BN of N {
    dist = (index(j)[None, :] - index(i)[:, None]) as f32
    s = load(S[g, i, j]) + load(slope[g])[:, None, None] * dist
    store(O[g, i, j], s + load(hb[g, j])[:, None, :] + (index(g) as f32)[:, None, None])
  }
}
"""


# row values with a value per head ([G, 1]) and per row ([BM], [1, BM]) beside them,
# stored as a tile of rank 3 and as themselves (whole rows: one task writes each of L's)
ROW_VALUES = """
kernel row_values(S: f32[H, M, N], slope: f32[H], w: f32[M]) -> (O: f32[H, M, N],
    L: f32[H, M]) {
  dims N = 64
  tile G in [4], BM in [32]
  parallel g: G of H, i: BM of M {
    s = load(S[g, i, :])
    mx = rowmax(s) * load(slope[g])[:, None] + load(w[i])
    mx = where(index(i)[None, :] < M - 3, mx, 0.0)
    store(O[g, i, :], s - mx[:, :, None])
    store(L[g, i], mx + (index(g) as f32)[:, None])
  }
}
"""


def inputs(seed: int, shape: dict = SHAPE) -> dict:
    rng = np.random.default_rng(seed)
    H, M, N = (shape[d] for d in "HMN")
    return {"S": rng.standard_normal((H, M, N)).astype(np.float32),
            "bias": rng.standard_normal((M, N)).astype(np.float32),
            "w": rng.standard_normal(M).astype(np.float32),
            "mask": rng.standard_normal((M, N)).astype(np.float32),
            "m0": rng.standard_normal((H, M)).astype(np.float32),
            "slope": rng.standard_normal(H).astype(np.float32),
            "hb": rng.standard_normal((H, N)).astype(np.float32)}


def broadcast_want(i: dict) -> np.ndarray:
    w = i["w"][None, :, None]
    s = i["S"] * w + i["bias"][None]
    return np.where(i["mask"][None] > 0, s + w, np.float32(-1.0)).astype(np.float32)


def loaded_rows_want(i: dict, bn: int = 64) -> np.ndarray:
    S = i["S"]
    out = np.empty_like(S)
    for j0 in range(0, S.shape[2], bn):
        cols = slice(j0, j0 + bn)
        mx = S[:, :, cols].max(axis=2)
        if j0 + bn > S.shape[2]:            # the pad, 0, of the columns past N
            mx = np.maximum(mx, 0.0)
        out[:, :, cols] = S[:, :, cols] - np.maximum(mx, i["m0"])[:, :, None]
    return out


def per_head_want(i: dict) -> np.ndarray:
    H, M, N = i["S"].shape
    dist = (np.arange(N)[None, :] - np.arange(M)[:, None]).astype(np.float32)
    heads = np.arange(H, dtype=np.float32)[:, None, None]
    return i["S"] + i["slope"][:, None, None] * dist + i["hb"][:, None, :] + heads


def row_values_want(i: dict) -> dict:
    S = i["S"]
    H, M, _ = S.shape
    mx = S.max(axis=2) * i["slope"][:, None] + i["w"][None, :]
    mx = np.where(np.arange(M)[None, :] < M - 3, mx, 0.0).astype(np.float32)
    return {"O": S - mx[:, :, None], "L": mx + np.arange(H, dtype=np.float32)[:, None]}


def only(kernel, values: dict) -> dict:
    return {p.name: values[p.name] for p in kernel.inputs}


CASES = {"broadcast": (BROADCAST, broadcast_want), "loaded_rows": (LOADED_ROWS, loaded_rows_want),
         "per_head": (PER_HEAD, per_head_want), "row_values": (ROW_VALUES, row_values_want)}
SHAPES = {"row_values": {"H": 6, "M": 45, "N": 64}}     # N is the kernel's own dim


def outputs(got) -> dict:
    return got if isinstance(got, dict) else {"O": got}


# ---- the language and its row form ---------------------------------------------------------
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_interpreter_broadcasts_as_numpy_does(case):
    text, want = CASES[case]
    shape = SHAPES.get(case, SHAPE)
    kernel = typed(text, shape)
    for seed in (0, 1):
        values = only(kernel, inputs(seed, shape))
        got = run_kernel(kernel, values, shapes=shape)
        for name, expected in outputs(want(values)).items():
            np.testing.assert_allclose(got[name], expected, rtol=1e-6, atol=1e-6,
                                       err_msg=f"{name} seed {seed}")


def test_the_row_form_reads_a_broadcast_tiles_rows_once_per_head():
    flat = print_kernel(flatten(typed(BROADCAST, SHAPE)))
    assert "load(bias[repeat(i:BM, G), j:BN])" in flat
    assert "load(mask[repeat(i:BM, G), j:BN])" in flat        # the named mask, per row
    assert "expand(load(w[repeat(i:BM, G)]), f32[G*BM, 1])" in flat
    text = print_lowered(driver.lowered(typed(BROADCAST, SHAPE), "sm80", shapes=SHAPE)[0][0])
    assert "bias[128x32] rows of 32 for each of 4 heads" in text
    assert "w[128x1] rows of 32 for each of 4 heads" in text
    assert "f32[128] as 128x1 rows" in text                  # the vector's rows, in order


def test_the_row_form_reads_a_heads_value_for_each_of_its_rows():
    flat = print_kernel(flatten(typed(PER_HEAD, SHAPE)))
    assert "load(slope[repeat_each(g:G, BM)])" in flat
    assert "load(hb[repeat_each(g:G, BM), j:BN])" in flat
    assert "add(floordiv(arange(G*BM), BM), mul(g, G))" in flat    # index(g) per row
    text = print_lowered(driver.lowered(typed(PER_HEAD, SHAPE), "sm80", shapes=SHAPE)[0][0])
    assert "hb[128x32] rows of 4, each for 32 rows" in text
    assert "slope[128x1] rows of 4, each for 32 rows" in text


def test_row_values_take_a_value_per_head_and_per_row_as_their_vector():
    flat = print_kernel(flatten(typed(ROW_VALUES, SHAPES["row_values"])))
    assert "load(slope[repeat_each(g:G, BM)])" in flat and "load(w[repeat(i:BM, G)])" in flat
    assert "lt(add(mod(arange(G*BM), BM), mul(i, BM)), sub(M, 3:i32))" in flat
    assert "mx: f32[G*BM]" in flat


def test_loaded_row_values_are_the_vector_of_the_rows():
    flat = print_kernel(flatten(typed(LOADED_ROWS, SHAPE)))
    # the loaded [G, BM] tile is a vector of the G * BM rows, as the row maxima are
    assert "mx: f32[G*BM] = max(max(s, axis=1), load(m0[g:G, i:BM]))" in flat
    text = print_lowered(driver.lowered(typed(LOADED_ROWS, SHAPE), "sm80", shapes=SHAPE)[0][0])
    assert "f32[128] as 4x32 rows" in text and "m0[4x32]" in text


# ---- on the emulators ------------------------------------------------------------------------
@pytest.mark.cxx
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_target_computes_the_broadcasts_per_row(case, target):
    text, want = CASES[case]
    shape = SHAPES.get(case, SHAPE)
    kernel, source, device = rendered(text, target, tuple(shape.items()))
    run = emulated(source, device)
    values = only(kernel, inputs(2, shape))
    for config in ORDERS:
        got = run(kernel, values, shape, **config)
        for name, expected in outputs(want(values)).items():
            np.testing.assert_allclose(got[name], expected, rtol=1e-5, atol=1e-5,
                                       err_msg=f"{name} {target} {config}")


@pytest.mark.cxx
@pytest.mark.parametrize("case,rows", [("broadcast", "ptc::BatchRows<32, 0, 1>"),
                                       ("per_head", "ptc::BatchRows<32, 1, 0>")])
def test_a_copy_that_steps_through_the_rows_fails_the_check(case, rows):
    """The emulated check sees the repetition: a copy told to step through the rows (steps
    1, 1) instead of repeating them reads other rows, and the result differs."""
    text, want = CASES[case]
    kernel, source, device = rendered(text, "sm80", tuple(SHAPE.items()))
    assert source.count(rows) >= 2
    broken = source.replace(rows, "ptc::BatchRows<32, 1, 1>", 1)
    values = only(kernel, inputs(2))
    got = emulated(broken, device)(kernel, values, SHAPE)["O"]
    assert not np.allclose(got, want(values), rtol=1e-5, atol=1e-5)


@pytest.mark.cxx
@pytest.mark.parametrize("consumers", [1, 2])
@pytest.mark.parametrize("name,output", [("gqa_packed_bias", "O"), ("gqa_packed_bwd_dq", "dQ"),
                                         ("gqa_packed_alibi", "O")])
def test_sm90_warp_specialized_plans_read_broadcast_and_loaded_rows(name, output, consumers):
    """The producer's threads copy the bias's rows once per head, the loaded row values'
    G x BM tile and each head's slope for its rows; two consumer warpgroups each read
    their heads' rows of them."""
    from ptc.sched.construct import Choice, Style
    from test_kernels import KF, CORPUS
    entry = KF.KERNELS[name]
    text = (CORPUS / f"{name}.pt").read_text().replace(
        "tile GH in [4, 2], BM in [32, 16, 64]", "tile GH in [4], BM in [32]")
    kernel, source, device = rendered(text, "sm90", tuple(entry.shapes.items()),
                                      Choice(Style.WARP_SPECIALIZED, 2, consumers))
    values = entry.make_inputs(entry.shapes, np.random.default_rng(1))
    want = entry.reference(values, entry.shapes)[output]
    run = emulated(source, device)
    for config in ORDERS:
        got = run(kernel, values, entry.shapes, **config)[output].astype(np.float64)
        error = np.linalg.norm(got - want) / np.linalg.norm(want)
        assert error <= entry.tolerance[output], (config, error)


# a broadcast tile moved and strided along its rows, with a pad (row 2m + s of bias, the
# pad where that is outside), and a vector of the rows moved back by 3: BatchRows' inner
# axis starts below 0 or ends past the dim, and each head reads the same positions
MOVED = """
kernel moved(S: f32[H, M, N], bias: f32[M2, N], w: f32[M2], s: i32) -> (O: f32[H, M, N]) {
  tile G in [4], BM in [32], BN in [64, 32]
  parallel g: G of H, i: BM of M, j: BN of N {
    b = load(bias[index(i) * 2 + s, j], pad=0.5)
    v = load(w[index(i) - 3])[:, None]
    store(O[g, i, j], load(S[g, i, j]) + b + v)
  }
}
"""
MOVED_SHAPE = {"H": 6, "M": 32, "N": 70, "M2": 50}


def moved_want(i: dict, s: int) -> np.ndarray:
    M2 = i["bias"].shape[0]
    rows, back = np.arange(32) * 2 + s, np.arange(32) - 3
    b = np.where(((rows >= 0) & (rows < M2))[:, None], i["bias"][np.clip(rows, 0, M2 - 1)], 0.5)
    v = np.where((back >= 0) & (back < M2), i["w"][np.clip(back, 0, M2 - 1)], 0.0)
    return (i["S"] + b[None] + v[None, :, None]).astype(np.float32)


@pytest.mark.cxx
@pytest.mark.parametrize("target", TARGETS)
def test_a_moved_and_strided_broadcast_reads_the_pad_outside_for_every_head(target):
    kernel, source, device = rendered(MOVED, target, tuple(MOVED_SHAPE.items()))
    run = emulated(source, device)
    rng = np.random.default_rng(6)
    values = {"S": rng.standard_normal((6, 32, 70)).astype(np.float32),
              "bias": rng.standard_normal((50, 70)).astype(np.float32),
              "w": rng.standard_normal(50).astype(np.float32)}
    for s in (5, -7, 20):
        values["s"] = np.int32(s)
        want = moved_want(values, s)
        np.testing.assert_allclose(run_kernel(kernel, values, shapes=MOVED_SHAPE)["O"], want,
                                   rtol=1e-5, atol=1e-5)
        for config in ORDERS:
            np.testing.assert_allclose(run(kernel, values, MOVED_SHAPE, **config)["O"], want,
                                       rtol=1e-5, atol=1e-5, err_msg=f"{target} s={s} {config}")


def test_a_named_load_outside_a_loop_is_read_once_for_its_uses_inside():
    """ALiBi's slopes, named before the loop over the keys and read in it: the row form
    binds their per-row tile beside the definition, so its copy stays outside the loop; a
    named tile of indices is computed where it is used, as its 2-D form is."""
    from test_kernels import CORPUS
    from ptc.stask import build_graphs
    kernel = typed((CORPUS / "gqa_packed_alibi.pt").read_text(), {})
    flat = print_kernel(flatten(kernel))
    before_loop = flat.split("for n:")[0]
    assert "slope_rows1: f32[GH*BM, 1] = expand(load(Slopes[repeat_each(h:GH, BM)])" in \
        before_loop
    assert "mul(slope_rows1, convert(sub(" in flat          # dist, computed in place
    (graph,) = build_graphs(kernel)
    loop_tasks = [t.name for t in graph.tasks if t.region != graph.tasks[0].region]
    assert "load_Slopes" not in loop_tasks and "load_K" in loop_tasks
