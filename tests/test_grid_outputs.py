"""A grid may load an output it does not write: what the grids before it wrote, zeros where
none did (docs/language.md). Normalizing by sums a first grid computed, against NumPy, on
the interpreter and every target's emulator in three thread orders; the same-grid read is a
located error (tests/errors/load_from_output.pt)."""
from __future__ import annotations

import numpy as np
import pytest

from ptc.interp import run_kernel

from test_offset_tiles import ORDERS, TARGETS, emulated, rendered, typed

# S: row sums (grid 1, atomic over column tiles); Y = X / S (grid 2); U: a grid reading an
# output no grid writes before it reads zeros (grid 3 writes Z from U, which grid 4 writes)
NORMALIZE = """
kernel normalize(X: f32[M, N]) -> (S: f32[M], Y: f32[M, N], Z: f32[M], U: f32[M]) {
  tile BM = 32, BN = 64
  parallel i: BM of M, j: BN of N {
    atomic_add(S[i], rowsum(load(X[i, j])))
  }
  parallel i: BM of M, j: BN of N {
    store(Y[i, j], load(X[i, j]) / load(S[i])[:, None])
  }
  parallel i: BM of M {
    store(Z[i], load(U[i]) + 1.0)
  }
  parallel i: BM of M {
    store(U[i], load(S[i]) * 2.0)
  }
}
"""
SHAPE = {"M": 45, "N": 100}


def want(x: np.ndarray) -> dict:
    s = x.astype(np.float64).sum(axis=1)
    return {"S": s, "Y": x / s[:, None], "Z": np.ones(len(s)), "U": 2 * s}


def inputs() -> dict:
    return {"X": np.random.default_rng(0).uniform(0.5, 1.5, (SHAPE["M"], SHAPE["N"]))
            .astype(np.float32)}


def check(got: dict, what: str) -> None:
    for name, w in want(inputs()["X"]).items():
        np.testing.assert_allclose(np.asarray(got[name], np.float64), w, rtol=1e-5,
                                   err_msg=f"{what} {name}")


def test_the_interpreter_reads_what_earlier_grids_wrote():
    check(run_kernel(typed(NORMALIZE, SHAPE), inputs(), shapes=SHAPE), "interpreter")


@pytest.mark.cxx
@pytest.mark.parametrize("target", TARGETS)
def test_every_target_reads_what_earlier_grids_wrote(target):
    kernel, source, device = rendered(NORMALIZE, target, tuple(SHAPE.items()))
    run = emulated(source, device)
    for order in ORDERS:
        check(run(kernel, inputs(), SHAPE, **order), f"{target} {order}")
