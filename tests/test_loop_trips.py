"""The cost model's trip count of a loop whose `until` bound depends on the tile's place in
the grid (a causal loop): the mean over every tile of the grid, however many there are.

It used to be the mean over the first 64 tiles of each grid axis: at S = 8192 a causal loop
over 256 query tiles of BM = 32 looked a quarter as long as it is, and the search chose
BM = 32 plans that ran 2.6x slower on an H200 than the BM = 128 ones it rated slower
(benchmarks/results/2026-11-28-NVIDIA-H200-recheck)."""
from __future__ import annotations

from pathlib import Path

import pytest

from ptc import driver
from ptc.sched.cost import loop_trips

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "flash_attn_causal.pt"


def exact_mean_trips(S: int, BM: int, BN: int) -> float:
    """The causal loop `for n: BN of S until (m + 1) * BM` over every query tile m."""
    tiles = -(-S // BM)
    return sum(-(-min(S, (m + 1) * BM) // BN) for m in range(tiles)) / tiles


@pytest.mark.parametrize("S, BM, BN", [(8192, 32, 128), (8192, 128, 64), (4096, 32, 32),
                                       (1000, 64, 128), (128, 32, 32)])
def test_a_causal_loop_is_planned_at_its_mean_over_the_whole_grid(S, BM, BN):
    shape = dict(B=1, H=2, S=S, D=64)
    kernel = driver.check_file(SAMPLE, shape).kernels[0]
    (graph,) = driver.stask_graphs(kernel, {"BM": BM, "BN": BN})
    (trips,) = loop_trips(graph, shape).values()
    assert trips == pytest.approx(exact_mean_trips(S, BM, BN), rel=0.01)


def test_the_search_takes_big_tiles_for_long_causal_attention_on_sm90():
    """What the H200 measured: BM = 128 (1.12-1.17 ms) over BM = 32 (2.89 ms) at d128 8k."""
    shape = dict(B=2, H=16, S=8192, D=128)
    kernel = driver.check_file(SAMPLE, shape).kernels[0]
    best = driver.schedule(kernel, "sm90", shapes=shape).best
    assert dict(best.tiles)["BM"] == 128, best.tiles
