"""Issue 22: `rows(x)`, a tile of rank 3 `[A, R, C]` as the 2-D tile of its `A * R` rows
(docs/language.md, "Tiles of rank 3"; NumPy's `x.reshape(A * R, C)`). A product with its
transpose sums over both leading axes at once: FlashAttention's GQA backward adds the dV
of a group's query heads, `rows(p).T @ rows(do)` = sum over h and m of p[h, m, :]^T
do[h, m, :] (tests/kernels/gqa_packed_bwd_dkdv.pt). The back end computes a tile of rank 3
as its rows already (ptc.sema.batched), so the row form drops `rows`.

The truth is NumPy's einsum over the heads; every target's kernel is emulated in three
thread orders, sm90's warp-specialized plan too.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from ptc.interp import run_kernel
from ptc.sema.batched import flatten
from ptc.sema.printer import print_kernel
from test_offset_tiles import emulated, rendered, typed

TARGETS = ("sm80", "sm90", "gfx90a", "gfx942")
ORDERS = (dict(), dict(order="reverse"), dict(order="random", seed=5))

# dV of one K/V head: the probabilities of GH query heads' BM queries against a BN tile of
# keys, summed with dO over the heads and queries; tiles of heads add into dV
DV = """
kernel dv(Q: bf16[H, S, D], K: bf16[T, D], dO: bf16[H, S, D]) -> (dV: f32[T, D]) {
  dims D = 64
  tile GH in [2], BM in [32], BN in [64]
  parallel n: BN of T, h: GH of H {
    k = load(K[n, :])
    dv = zeros(f32[BN, D])
    for m: BM of S {
      p = exp(load(Q[h, m, :]) @ k.T * 0.125)
      dv += rows(p as bf16).T @ rows(load(dO[h, m, :]))
    }
    atomic_add(dV[n, :], dv)
  }
}
"""
SHAPE = {"H": 6, "S": 45, "T": 70, "D": 64}      # the last head tile and query tile ragged


def inputs(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    bf16 = ml_dtypes.bfloat16
    return {"Q": rng.standard_normal((6, 45, 64)).astype(bf16),
            "K": rng.standard_normal((70, 64)).astype(bf16),
            "dO": rng.standard_normal((6, 45, 64)).astype(bf16)}


def want(i: dict) -> np.ndarray:
    q, k, do = (i[n].astype(np.float64) for n in ("Q", "K", "dO"))
    p = np.exp(np.einsum("hsd,td->hst", q, k) * 0.125)
    return np.einsum("hst,hsd->td", p, do)


def relative_error(got, expected) -> float:
    return float(np.linalg.norm(got.astype(np.float64) - expected) / np.linalg.norm(expected))


def test_rows_is_numpys_reshape_of_the_two_leading_axes():
    kernel = typed(DV, SHAPE)
    assert "rows(convert(p, bf16))" in print_kernel(kernel)
    for seed in (0, 1):
        values = inputs(seed)
        got = run_kernel(kernel, values, shapes=SHAPE)["dV"]
        assert relative_error(got, want(values)) < 1e-2       # p rounded to bf16


def test_the_row_form_drops_rows():
    flat = print_kernel(flatten(typed(DV, SHAPE)))
    assert "rows(" not in flat
    assert "mma_acc(dv, transpose(convert(p, bf16)), load(dO[h:GH, m:BM, :D]))" in flat


@pytest.mark.cxx
@pytest.mark.parametrize("target", TARGETS)
def test_a_product_over_the_rows_sums_over_heads_and_queries_on_every_target(target):
    kernel, source, device = rendered(DV, target, tuple(SHAPE.items()))
    run = emulated(source, device)
    values = inputs(2)
    for config in ORDERS:
        got = run(kernel, values, SHAPE, **config)["dV"]
        assert relative_error(got, want(values)) < 1e-2, (target, config)


@pytest.mark.cxx
def test_sm90s_warp_specialized_plan_sums_over_the_rows():
    from ptc.sched.construct import Choice, Style
    kernel, source, device = rendered(DV, "sm90", tuple(SHAPE.items()),
                                      Choice(Style.WARP_SPECIALIZED, 2, 1))
    run = emulated(source, device)
    values = inputs(3)
    for config in ORDERS:
        got = run(kernel, values, SHAPE, **config)["dV"]
        assert relative_error(got, want(values)) < 1e-2, config
