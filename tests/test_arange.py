"""`arange(E)`: the i32 positions 0..E-1 (docs/language.md, "Tiles"). The truth is NumPy
written here: a row-wise mask against a length read per row, and the positions as values.
The interpreter and every target's kernel, emulated in three thread orders; the page walk
of samples/paged_decode.pt masks its last page with it (tests/test_samples.py)."""
from __future__ import annotations

import numpy as np
import pytest

from ptc.interp import run_kernel
from ptc.sema.printer import print_kernel
from test_offset_tiles import emulated, rendered, typed

TARGETS = ("sm80", "sm90", "gfx90a", "gfx942")
ORDERS = (dict(), dict(order="reverse"), dict(order="random", seed=5))

MASKED = """
kernel masked(X: f32[M, N], lim: i32[M]) -> (Y: f32[M, N]) {
  dims N = 48
  tile BM in [16]
  parallel i: BM of M {
    x = load(X[i, :])
    n = load(lim[i])
    y = where(arange(N)[None, :] < n[:, None], x, -1.0)
    store(Y[i, :], y + (arange(N) as f32)[None, :])
  }
}
"""
SHAPE = {"M": 37, "N": 48}


def inputs(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {"X": rng.standard_normal((SHAPE["M"], SHAPE["N"])).astype(np.float32),
            "lim": rng.integers(-3, SHAPE["N"] + 3, SHAPE["M"]).astype(np.int32)}


def want(i: dict) -> np.ndarray:
    pos = np.arange(SHAPE["N"], dtype=np.int32)[None, :]
    return np.where(pos < i["lim"][:, None], i["X"], np.float32(-1.0)) + pos.astype(np.float32)


def test_the_interpreter_and_the_printer():
    kernel = typed(MASKED, SHAPE)
    assert "where(lt(expand(arange(N)" in print_kernel(kernel)
    for seed in (0, 1):
        i = inputs(seed)
        np.testing.assert_array_equal(run_kernel(kernel, i, shapes=SHAPE)["Y"], want(i))


@pytest.mark.cxx
@pytest.mark.parametrize("target", TARGETS)
def test_every_target_computes_the_positions(target):
    kernel, source, device = rendered(MASKED, target, tuple(SHAPE.items()))
    run = emulated(source, device)
    for seed in (0, 1):
        i = inputs(seed)
        for config in ORDERS:
            np.testing.assert_array_equal(run(kernel, i, SHAPE, **config)["Y"], want(i),
                                          err_msg=f"{target} seed={seed} {config}")
