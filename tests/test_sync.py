"""Barrier and wait placement (ptc.lower.sync): a loop whose iteration picks no ring slot and
issues no copy (a convolution's taps around the pipelined loop) is simulated for 3 trips,
not 2 * stages + 2; the shortcut must place exactly what the full simulation places."""
from pathlib import Path

import pytest

from ptc.devices import get_device
from ptc.driver import check_file, lowered_plan, schedule
from ptc.lower import ir, sync
from ptc.lower.printer import print_lowered

ROOT = Path(__file__).resolve().parent.parent
NESTED = ("conv2d", "conv2d_stride2", "depthwise_conv2d")      # loops of taps around k


@pytest.mark.parametrize("target", ["sm80", "sm90", "gfx90a", "gfx942"])
@pytest.mark.parametrize("name", NESTED)
def test_unkeyed_loops_place_what_the_full_simulation_places(name, target, monkeypatch):
    kernel = check_file(ROOT / "samples" / f"{name}.pt").kernels[0]
    device = get_device(target)
    ranked = schedule(kernel, target).ranked[:4]
    lows = [lowered_plan(c.plan, c.graph, device)[0] for c in ranked]
    loops = {op.var for low in lows for op in ir.walk(low.body) if isinstance(op, ir.Loop)}
    keyed = set().union(*(sync.keyed_loops(low.body, dict(low.values)) for low in lows))
    assert loops - keyed, f"every loop of {name} picks a slot: the shortcut is not tested"
    short = [print_lowered(low) for low in lows]
    monkeypatch.setattr(sync, "_trips", lambda loop, keyed: 2 * loop.stages + 2)
    full = [print_lowered(lowered_plan(c.plan, c.graph, device)[0]) for c in ranked]
    assert short == full
    assert any("barrier" in text for text in short)


class _Forgetful(dict):
    """A placement memo that keeps nothing: every lowering places its own barriers."""

    def __setitem__(self, key, value):
        pass


@pytest.mark.parametrize("target", ["sm80", "sm90", "gfx90a", "gfx942"])
@pytest.mark.parametrize("name", ["gemm", "flash_attn", "conv2d"])
def test_a_placement_decided_for_another_candidate_is_the_one_placed_afresh(name, target,
                                                                            monkeypatch):
    """place_sync decides once per shape of the problem (ops, loops' trips, the order of the
    slots' byte bounds) and carries the decisions out on each candidate's own ops: every
    candidate the search ranked lowers to the same kernel as with a placement of its own."""
    kernel = check_file(ROOT / "samples" / f"{name}.pt").kernels[0]
    device = get_device(target)
    ranked = schedule(kernel, target).ranked[:24]
    monkeypatch.setattr(sync, "_PLACEMENTS", {})
    shared = [print_lowered(lowered_plan(c.plan, c.graph, device)[0]) for c in ranked]
    shapes = len(sync._PLACEMENTS)
    assert shapes < len(ranked), "no two candidates share a shape: nothing is reused"
    monkeypatch.setattr(sync, "_PLACEMENTS", _Forgetful())
    afresh = [print_lowered(lowered_plan(c.plan, c.graph, device)[0]) for c in ranked]
    assert shared == afresh
