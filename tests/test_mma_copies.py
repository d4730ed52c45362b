"""An mma with fewer atoms than the warps can split (a 16 x 16 product on 4 warps, the 16 x 8
scores of a page of decoding attention) runs on the tensor cores in copies: a group of warps
splits it, and every group computes all of it (ptc.lower.atoms.Tiling.replicas). The copies
hold the same values, so whatever reads them (a reduction, a conversion, a store) must take
one copy, not their sum. Checked against NumPy on every target's emulator, in three thread
orders, with the copies asserted in the lowered kernel."""
from __future__ import annotations

import numpy as np
import pytest

from ptc import driver
from ptc.devices import get_device
from ptc.devices.model import UnitKind
from ptc.lower import ir
from ptc.sched.construct import Choice, construct
from ptc.sched.plan import Style
from ptc.stask import build_graphs, propagate

from test_offset_tiles import ORDERS, TARGETS, emulated, rendered, typed

# a 16 x 16 product per task, its column sums (a reduction over rows split between the
# copies' lanes) and the product stored transposed (a conversion through shared memory)
SMALL = """
kernel small(A: f16[M, K], B: f16[K, N]) -> (C: f32[M, N], S: f32[N], T: f32[N, M]) {
  tile BM = 16, BN = 16
  parallel i: BM of M, j: BN of N {
    c = load(A[i, :]) @ load(B[:, j])
    store(C[i, j], c)
    atomic_add(S[j], sum(c, axis=0))
    store(T[j, i], c.T)
  }
}
"""
SHAPE = {"M": 40, "N": 24, "K": 32}        # ragged against the 16 x 16 tiles
FOUR_WARPS = Choice(Style.SEQUENTIAL, 1, 1, 4)


def inputs(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {"A": rng.standard_normal((SHAPE["M"], SHAPE["K"])).astype(np.float16),
            "B": rng.standard_normal((SHAPE["K"], SHAPE["N"])).astype(np.float16)}


def want(i: dict) -> dict:
    c = i["A"].astype(np.float64) @ i["B"].astype(np.float64)
    return {"C": c, "S": c.sum(axis=0), "T": c.T}


@pytest.mark.parametrize("target", TARGETS)
def test_the_product_is_computed_in_copies(target):
    kernel = typed(SMALL, SHAPE)
    device = get_device(target)
    (g,) = build_graphs(kernel)
    g = propagate(g, {t.name: t.choices[0] for t in kernel.tiles})
    plan = construct(g, device, FOUR_WARPS)
    assert [device.unit(s.unit).kind for _, s in plan.steps() if s.task.startswith("mma")] \
        == [UnitKind.MMA]
    low = driver.lowered_plan(plan, g, device)[0]
    (mma,) = [op for op in ir.walk(low.body) if isinstance(op, ir.Mma)]
    assert mma.replicas > 1 and mma.wm * mma.wn * mma.replicas == 4, mma
    # the search ranks it on the tensor cores too
    best = driver.schedule(kernel, target, shapes=SHAPE).ranked[0].plan
    assert UnitKind.MMA in {device.unit(s.unit).kind for _, s in best.steps()}


@pytest.mark.cxx
@pytest.mark.parametrize("target", TARGETS)
def test_copies_give_the_product_once_on_every_target(target):
    kernel, source, device = rendered(SMALL, target, tuple(SHAPE.items()), FOUR_WARPS)
    assert "copies" in source
    run = emulated(source, device)
    i = inputs()
    for order in ORDERS:
        got = run(kernel, i, SHAPE, **order)
        for name, w in want(i).items():
            np.testing.assert_allclose(np.asarray(got[name], np.float64), w, rtol=1e-3,
                                       atol=1e-3, err_msg=f"{target} {name} {order}")
