"""Indices read from tensors (docs/language.md, "Indices read from tensors"): a single
index, an offset tile's offset and an `until` bound that read i32 elements of inputs. The
truth is NumPy written here: a lookup reads row ids[perm[t]] of E where every position is
inside, the pad elsewhere; a store to row dst[t] writes there and nowhere else; a packed
sequence's sum runs over rows starts[b] .. starts[b] + lens[b] - 1.

The interpreter is checked at ragged shapes with positions below 0, past the end and
past the index tensor's own end; the rendered kernels of every target on the emulators,
in three thread orders (an unguarded read of an index tensor, or of a row it names, is an
emulator error: reads outside every tensor). The corpus (tests/kernels/moe_sorted.pt,
varlen_mean.pt) takes them to the tensor cores and to sm90's TMA.
"""
from __future__ import annotations

import numpy as np
import pytest

from ptc import driver
from ptc.interp import run_kernel
from ptc.lower.printer import print_lowered
from ptc.sched.cost import loop_trips
from ptc.sema.printer import print_kernel
from test_offset_tiles import emulated, rendered, typed

TARGETS = ("sm80", "sm90", "gfx90a", "gfx942")
ORDERS = (dict(), dict(order="reverse"), dict(order="random", seed=5))

# a lookup through a permutation shorter than the grid (past its end: pad -1, no row), a
# store to a row read from a tensor; f32 with a pad: element copies
LOOKUP_PAD = """
kernel lookup(E: f32[V, D], ids: i32[T], perm: i32[P], dst: i32[T]) -> (Y: f32[R, D]) {
  dims V = 100, D = 64, T = 40, P = 30, R = 50
  parallel t of T {
    row = load(ids[load(perm[t + 0], pad=-1)], pad=-1)
    store(Y[load(dst[t]), :], load(E[row, :], pad=-1.5))
  }
}
"""
# f16 with zeros: 16-byte vector copies of the row
LOOKUP_VEC = LOOKUP_PAD.replace("f32", "f16").replace(", pad=-1.5", "")
SHAPE = {"V": 45, "D": 64, "T": 40, "P": 30, "R": 50}

# a packed sequence's rows: the start moves the tile, the length bounds the loop and masks
SEGMENT_SUM = """
kernel segment_sum(X: f32[TT, N], starts: i32[B], lens: i32[B]) -> (Y: f32[B, N]) {
  dims TT = 4096, N = 256, B = 16
  tile BM = 32, BN = 64
  parallel b of B, j: BN of N {
    n = load(lens[b])
    acc = zeros(f32[BN])
    for m: BM of TT until n {
      x = load(X[index(m) + load(starts[b]), j], pad=-1.5)
      acc += sum(where((index(m) < n)[:, None], x, 0.0), axis=0)
    }
    store(Y[b, j], acc)
  }
}
"""
SEGMENT_SHAPE = {"TT": 150, "N": 100, "B": 7}


def lookup_inputs(dtype, seed: int, shapes: dict) -> dict:
    """ids in [-3, V + 3); perm in [-2, T + 2) (some past ids' end), shorter than the grid;
    dst distinct rows of Y, some below 0 and one past its end."""
    rng = np.random.default_rng(seed)
    V, D, T_, P, R = (shapes[d] for d in "VDTPR")
    dst = rng.permutation(np.arange(-5, T_ - 5, dtype=np.int32))
    dst[dst == 3] = R + 7                   # one past the end of Y too
    return {"E": rng.standard_normal((V, D)).astype(dtype),
            "ids": rng.integers(-3, V + 3, T_).astype(np.int32),
            "perm": rng.integers(-2, T_ + 2, P).astype(np.int32),
            "dst": dst.astype(np.int32)}


def lookup_want(inputs: dict, shapes: dict, pad: float) -> np.ndarray:
    E, ids, perm, dst = (inputs[n] for n in ("E", "ids", "perm", "dst"))
    V, D, T_, P, R = (shapes[d] for d in "VDTPR")
    y = np.zeros((R, D), E.dtype)
    for t in range(T_):
        p = perm[t] if t < P else -1
        row = ids[p] if 0 <= p < T_ else -1
        if 0 <= dst[t] < R:
            y[dst[t]] = E[row] if 0 <= row < V else pad
    return y


def segment_inputs(seed: int, shapes: dict) -> dict:
    """Starts from below 0 to past the end, lengths from 0 to past the rows there are."""
    rng = np.random.default_rng(seed)
    TT, N, B = shapes["TT"], shapes["N"], shapes["B"]
    starts = rng.integers(-40, TT, B).astype(np.int32)
    starts[0], starts[1] = -5, TT - 3
    return {"X": rng.standard_normal((TT, N)).astype(np.float32), "starts": starts,
            "lens": rng.integers(0, 80, B).astype(np.int32)}


def segment_want(inputs: dict, pad: float) -> np.ndarray:
    X, starts, lens = inputs["X"], inputs["starts"], inputs["lens"]
    y = np.zeros((len(starts), X.shape[1]))
    for b, (s, n) in enumerate(zip(starts, lens)):
        for r in range(s, s + min(n, X.shape[0])):
            y[b] += X[r] if 0 <= r < X.shape[0] else pad
    return y


# ---- the interpreter ---------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_interpreter_reads_indices_from_tensors(seed):
    kernel = typed(LOOKUP_PAD, SHAPE)
    inputs = lookup_inputs(np.float32, seed, SHAPE)
    got = run_kernel(kernel, inputs, shapes=SHAPE)["Y"]
    np.testing.assert_array_equal(got, lookup_want(inputs, SHAPE, -1.5))
    kernel = typed(SEGMENT_SUM, SEGMENT_SHAPE)
    inputs = segment_inputs(seed, SEGMENT_SHAPE)
    got = run_kernel(kernel, inputs, shapes=SEGMENT_SHAPE)["Y"]
    np.testing.assert_allclose(got, segment_want(inputs, -1.5), rtol=1e-5, atol=1e-4)


def test_the_printers_show_the_read_and_the_lowering_addresses_it():
    kernel = typed(SEGMENT_SUM, SEGMENT_SHAPE)
    assert "until load(lens[b])" in print_kernel(kernel)
    lows, _, _, _ = driver.lowered(kernel, "sm80", shapes=SEGMENT_SHAPE)
    text = "\n".join(map(print_lowered, lows))
    # element b of lens where b is inside, else the load's pad
    assert "until (lens.at(b) if and(ge(b, 0:i32), lt(b, B)) else 0)" in text


def test_a_bound_read_from_a_tensor_plans_the_whole_trip_count():
    kernel = typed(SEGMENT_SUM, SEGMENT_SHAPE)
    (graph,) = driver.stask_graphs(kernel)
    assert loop_trips(graph, dict(SEGMENT_SHAPE, TT=4096)) == {"m": 128}


# ---- every target, emulated --------------------------------------------------------------
@pytest.mark.cxx
@pytest.mark.parametrize("vector", [False, True], ids=["pad", "vector"])
@pytest.mark.parametrize("target", TARGETS)
def test_rows_looked_up_and_stored_by_indices_read_from_tensors(target, vector):
    text, dtype, pad = (LOOKUP_VEC, np.float16, 0.0) if vector else \
        (LOOKUP_PAD, np.float32, -1.5)
    kernel, source, device = rendered(text, target, tuple(SHAPE.items()))
    run = emulated(source, device)
    for seed in (0, 1):
        inputs = lookup_inputs(dtype, seed, SHAPE)
        want = lookup_want(inputs, SHAPE, pad)
        for config in ORDERS:
            np.testing.assert_array_equal(run(kernel, inputs, SHAPE, **config)["Y"], want,
                                          err_msg=f"{target} seed={seed} {config}")


@pytest.mark.cxx
@pytest.mark.parametrize("target", TARGETS)
def test_an_offset_and_a_loop_bound_read_from_tensors(target):
    kernel, source, device = rendered(SEGMENT_SUM, target, tuple(SEGMENT_SHAPE.items()))
    run = emulated(source, device)
    for seed in (0, 1):
        inputs = segment_inputs(seed, SEGMENT_SHAPE)
        want = segment_want(inputs, -1.5)
        for config in ORDERS:
            got = run(kernel, inputs, SEGMENT_SHAPE, **config)["Y"]
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4,
                                       err_msg=f"{target} seed={seed} {config}")


@pytest.mark.cxx
def test_sm90_producer_and_consumers_read_the_bound_and_tma_takes_the_offset():
    """A warp-specialized plan: the producer's loop and the consumers' read the bound each,
    and TMA loads the tile at the row read from a tensor (outside: its zero fill)."""
    from ptc.sched.construct import Choice

    text = SEGMENT_SUM.replace(", pad=-1.5", "")
    kernel, source, device = rendered(text, "sm90", tuple(SEGMENT_SHAPE.items()),
                                      Choice("warp_specialized", 2, 1))
    assert "ptc::tma_load<2>(" in source and "&map_load_X" in source
    run = emulated(source, device)
    for seed in (0, 1):
        inputs = segment_inputs(seed, SEGMENT_SHAPE)
        want = segment_want(inputs, 0.0)
        for config in ORDERS + (dict(eager_cp_async=True),):
            got = run(kernel, inputs, SEGMENT_SHAPE, **config)["Y"]
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4,
                                       err_msg=f"seed={seed} {config}")


# a page walk in tiles of a page (PAGE known only at run time): the page read from the
# table for an outer loop bounded by the request's length, its tokens in an inner loop
PAGED_TILES = """
kernel paged_decode(Q: bf16[B, HK, G, D], K: bf16[NP, PAGE, HK, D],
                    V: bf16[NP, PAGE, HK, D], table: i32[B, MP],
                    lens: i32[B]) -> (O: bf16[B, HK, G, D]) {
  dims G = 8, D = 64
  tile BJ in [16], BJ divides PAGE
  parallel b of B, hk of HK {
    q = load(Q[b, hk, :, :])
    n = load(lens[b])
    o = zeros(f32[G, D]); mx = full(f32[G], -inf); l = zeros(f32[G])
    for p: 1 of MP until (n + PAGE - 1) // PAGE {
      page = load(table[b, p + 0], pad=-1)
      for j: BJ of PAGE {
        k = load(K[page, j, hk, :]); v = load(V[page, j, hk, :])
        s = (q @ k.T) * rsqrt(D)
        s = where((p * PAGE + index(j) < n)[None, :], s, -inf)
        mn = max(mx, rowmax(s))
        e = exp(s - mn[:, None])
        a = exp(mx - mn)
        l = l * a + rowsum(e)
        o = o * a[:, None] + (e as bf16) @ v
        mx = mn
      }
    }
    store(O[b, hk, :, :], (o / l[:, None]) as bf16)
  }
}
"""
PAGED_SHAPE = {"B": 3, "HK": 2, "G": 8, "D": 64, "NP": 14, "PAGE": 32, "MP": 4}


@pytest.mark.cxx
@pytest.mark.parametrize("target", TARGETS)
def test_a_page_walk_in_tiles_of_a_page_read_from_a_block_table(target):
    """Nested loops: the outer bound and the page read from tensors, two tiles a page
    (samples/paged_decode.pt reads a page whole); against tests/formulas.py."""
    import formulas as F

    kernel, source, device = rendered(PAGED_TILES, target, tuple(PAGED_SHAPE.items()))
    run = emulated(source, device)
    inputs = F.make_inputs("paged_decode", PAGED_SHAPE, np.random.default_rng(1))
    want = F.paged_decode(*(inputs[n] for n in ("Q", "K", "V", "table", "lens")))
    for config in ORDERS:
        got = run(kernel, inputs, PAGED_SHAPE, **config)["O"]
        assert F.rel_l2(got, want) < 1e-2, (target, config)
