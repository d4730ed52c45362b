"""The interpreter's reads and writes outside a tensor: an element subscript outside its dim,
before or after a `:` or a tile, reads the pad value for the whole tile (the language's rule)
and a store there is dropped -- checked against NumPy formulas, at shifts that reach past
either end."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ptc import driver
from ptc.grammar import parse
from ptc.sema import check


def kernel(text: str, shapes: dict):
    return check(parse(text, "bounds.pt"), shapes).kernels[0]


def run(text: str, inputs: dict, shapes: dict) -> dict:
    from ptc.interp import run_kernel
    return run_kernel(kernel(text, shapes), inputs, shapes=shapes)


def shifted_rows(x: np.ndarray, shift: int) -> np.ndarray:
    """Row n of the result is row n + shift of x, or zeros outside it."""
    out = np.zeros_like(x)
    for n in range(x.shape[0]):
        if 0 <= n + shift < x.shape[0]:
            out[n] = x[n + shift]
    return out


SHIFTED_MATMUL = """
kernel shifted(X: f32[N, K], W: f32[K, M]) -> (Y: f32[N, M]) {{
  tile BM = 16
  parallel n of N, j: BM of M {{
    x = load(X[n + {shift}, :])[None, :]
    store(Y[n, j], sum(x @ load(W[:, j]), axis=0))
  }}
}}
"""


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 5), k=st.integers(1, 40), m=st.integers(1, 40),
       shift=st.integers(-6, 6))
def test_an_element_subscript_outside_before_a_full_slice_reads_zeros(n, k, m, shift):
    rng = np.random.default_rng(n * 1000 + k * 10 + m)
    x = rng.standard_normal((n, k), dtype=np.float32)
    w = rng.standard_normal((k, m), dtype=np.float32)
    text = SHIFTED_MATMUL.format(shift=f"+ {shift}" if shift >= 0 else f"- {-shift}")
    text = text.replace("+ + ", "+ ").replace("+ - ", "- ")
    got = run(text, {"X": x, "W": w}, {"N": n, "K": k, "M": m})["Y"]
    want = shifted_rows(x, shift) @ w
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


MIDDLE = """
kernel middle(X: f32[A, B, C]) -> (Y: f32[A, C]) {
  tile BA = 4
  parallel i: BA of A {
    store(Y[i, :], load(X[i, b0 - 1, :]) * 2.0)
  }
}
"""


@pytest.mark.parametrize("pad_at", [0, 3])
def test_an_element_subscript_between_tiles_and_slices(pad_at):
    """X[i, b0 - 1, :]: an element subscript in the middle, inside or outside."""
    text = MIDDLE.replace("b0 - 1", str(pad_at - 1))
    x = np.arange(5 * 2 * 3, dtype=np.float32).reshape(5, 2, 3)
    got = run(text, {"X": x}, {"A": 5, "B": 2, "C": 3})["Y"]
    row = pad_at - 1
    want = x[:, row, :] * 2 if 0 <= row < 2 else np.zeros((5, 3), np.float32)
    np.testing.assert_array_equal(got, want)


def test_a_tile_number_as_an_element_subscript_past_the_end():
    """In arithmetic a tile index is its tile number: X[i + 1, :] is row i + 1, one row
    broadcast over the tile; past the last row it reads zeros."""
    text = """
kernel k(X: f32[N, K]) -> (Y: f32[N, K]) {
  tile BN = 4
  parallel i: BN of N {
    store(Y[i, :], load(X[i + 1, :]) + 1.0)
  }
}
"""
    x = np.arange(10 * 5, dtype=np.float32).reshape(10, 5)
    got = run(text, {"X": x}, {"N": 10, "K": 5})["Y"]
    want = np.empty_like(x)
    for i in range(3):                       # tiles 0, 1, 2 of four rows
        row = x[i + 1] if i + 1 < 10 else np.zeros(5, np.float32)
        want[4 * i:4 * i + 4] = row + 1.0
    np.testing.assert_array_equal(got, want)


def test_driver_interpret_takes_the_same_path(tmp_path):
    path = tmp_path / "k.pt"
    path.write_text(SHIFTED_MATMUL.format(shift="- 1"))
    x = np.ones((3, 4), np.float32)
    w = np.ones((4, 16), np.float32)
    got = driver.interpret(path, {"X": x, "W": w})["Y"]
    np.testing.assert_array_equal(got[0], np.zeros(16, np.float32))
    np.testing.assert_array_equal(got[1:], np.full((2, 16), 4.0, np.float32))


# ---- pinned tile sizes -------------------------------------------------------------------
def test_a_pinned_tile_size_must_be_one_the_kernel_declares(tmp_path):
    """`--tile BK=48` where the kernel declares `BK in [64, 32]`: a usage error naming the
    candidates, from the interpreter and the scheduler alike; an undeclared tile size
    takes any positive size."""
    from click.testing import CliRunner

    from ptc.cli import cli
    gemm = str(Path(__file__).resolve().parent.parent / "samples" / "gemm.pt")
    for args in (["run", gemm, "--shape", "M=64,N=64,K=96", "--tile", "BK=48"],
                 ["compile", gemm, "-t", "sm80", "--tile", "BK=48", "--emit", "plan"]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2, result.output
        assert "BK=48 is not one of the sizes kernel gemm declares for BK (64, 32)" in \
            result.stderr
        assert "tile BK in [64, 32, 48]" in result.stderr
    implicit = tmp_path / "k.pt"
    implicit.write_text("""
kernel k(X: f32[M, N]) -> (Y: f32[M, N]) {
  parallel i: BM of M {
    store(Y[i, :], load(X[i, :]) * 2.0)
  }
}
""")
    x = np.ones((7, 3), np.float32)
    got = driver.interpret(implicit, {"X": x}, tiles={"BM": 5})["Y"]
    np.testing.assert_array_equal(got, x * 2)
