"""What the convolution samples need beyond the sample tests (tests/test_samples.py,
test_emulate*.py, test_nvcc.py, test_hip_build.py take samples/conv2d*.pt and
depthwise_conv2d.pt like every sample): the launch's alignment checks ask only the dims
that set the strides' divisibility, so a 3x3 filter (S = 3) or a 7x7 image keeps the
vector copies; and a tile whose single index (the input row) is outside its dim reads the
pad on every target."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ptc.devices import get_device
from ptc.driver import check_file
from ptc.interp import run_kernel
from ptc.lower.stage import lower
from ptc.sched.construct import Choice, construct
from ptc.stask import build_graphs, propagate
from test_offset_tiles import ORDERS, TARGETS, emulated, rendered, typed

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
SHAPES = dict(N=1, H=7, W=7, C=64, CO=64, R=3, S=3, OH=7, OW=7)


@pytest.mark.parametrize("name, target, choice", [
    ("conv2d", "sm80", Choice("multistage", 2, warps=4)),
    ("conv2d", "gfx942", Choice("sequential", 1, warps=4)),
    ("conv2d_stride2", "sm90", Choice("multistage", 3, warps=4)),
    ("depthwise_conv2d", "sm80", Choice("multistage", 2, warps=4)),
])
def test_the_alignment_checks_ask_only_the_channel_dims(name, target, choice):
    """x [N, H, W, C]'s strides are multiples of 8 elements when C is (H * W * C, W * C, C),
    w [R, S, C, CO]'s when CO is: the checks ask C and CO, never H, W, R or S (a product
    asked its first factor before, so every 3x3 conv took the element-wise copies)."""
    shapes = dict(SHAPES, OH=4, OW=4) if name == "conv2d_stride2" else SHAPES
    if name == "depthwise_conv2d":
        shapes = {k: v for k, v in shapes.items() if k != "CO"}
    kernel = check_file(SAMPLES / f"{name}.pt", shapes).kernels[0]
    device = get_device(target)
    (g,) = build_graphs(kernel)
    g = propagate(g, {t.name: t.choices[0] for t in kernel.tiles})
    low = lower(construct(g, device, choice), g, device)
    dims = {dim for kind, dim, _ in low.alignment if kind == "dim"}
    assert dims == ({"C"} if name == "depthwise_conv2d" else {"C", "CO"}), low.alignment


# a tile of image row h (a single index, as a convolution's input row p + r * D - P) moved
# s pixels: every element reads the pad where h is outside the image, as the pad rule says
ROW_PAD = """
kernel row(X: f32[H, W, C], h: i32, s: i32) -> (Y: f32[W, C]) {
  dims H = 4, W = 256, C = 256
  tile BW = 32, BC = 64
  parallel i: BW of W, j: BC of C {
    store(Y[i, j], load(X[h, index(i) + s, j], pad=-1.5))
  }
}
"""
ROW_SHAPE = {"H": 4, "W": 45, "C": 70}
ROWS = [(0, 0), (3, -2), (-1, 0), (4, 3), (-3, -40), (9, 1)]   # (h, s): inside, above, below


def row_inputs(h: int, s: int) -> dict:
    x = np.random.default_rng(6).standard_normal(tuple(ROW_SHAPE.values())).astype(np.float32)
    return {"X": x, "h": np.int32(h), "s": np.int32(s)}


def row_formula(inputs: dict) -> np.ndarray:
    x, h, s = inputs["X"], int(inputs["h"]), int(inputs["s"])
    H, W, C = x.shape
    y = np.full((W, C), -1.5, np.float32)
    for w in range(W):
        if 0 <= h < H and 0 <= w + s < W:
            y[w] = x[h, w + s]
    return y


def test_the_interpreter_pads_a_row_outside():
    kernel = typed(ROW_PAD, ROW_SHAPE)
    for h, s in ROWS:
        inputs = row_inputs(h, s)
        got = run_kernel(kernel, inputs, shapes=ROW_SHAPE)["Y"]
        np.testing.assert_array_equal(got, row_formula(inputs), err_msg=f"h={h} s={s}")


@pytest.mark.cxx
@pytest.mark.parametrize("target", TARGETS)
def test_a_row_outside_reads_the_pad_on_every_target(target):
    kernel, source, device = rendered(ROW_PAD, target, tuple(ROW_SHAPE.items()))
    run = emulated(source, device)
    for h, s in ROWS:
        inputs = row_inputs(h, s)
        for config in ORDERS:
            np.testing.assert_array_equal(run(kernel, inputs, ROW_SHAPE, **config)["Y"],
                                          row_formula(inputs),
                                          err_msg=f"{target} h={h} s={s} {config}")
