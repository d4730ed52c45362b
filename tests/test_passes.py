"""The lowering's named passes (ptc.lower.passes): `ptc compile --emit lowered --after PASS`
shows the ops as each pass left them, the last pass's are the finished kernel's, and each
pass does what its name says."""
from __future__ import annotations

from pathlib import Path

import pytest

from ptc.driver import check_file, lowered
from ptc.lower import ir, print_lowered
from ptc.lower.passes import PASSES, SINGLE_ROLE, WARP_SPECIALIZED
from test_cli_schedule import ptc

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def after(name: str, target: str, pass_name: str | None) -> ir.LoweredKernel:
    kernel = check_file(SAMPLES / f"{name}.pt").kernels[0]
    (low,), *_ = lowered(kernel, target, after=pass_name)
    return low


def kinds(low: ir.LoweredKernel) -> set[type]:
    return {type(op) for op in ir.walk(low.body)}


@pytest.mark.parametrize("name,target", [("gemm", "sm80"), ("flash_attn", "gfx90a"),
                                         ("flash_attn", "sm90"), ("gemm", "sm90")])
def test_the_last_pass_leaves_the_finished_kernel(name, target):
    finished = after(name, target, None)
    passes = WARP_SPECIALIZED if finished.plan_style == "warp_specialized" else SINGLE_ROLE
    last = next(p for p in reversed(passes) if _runs(name, target, p))   # take_turns: ping-pong
    assert print_lowered(after(name, target, last)) == print_lowered(finished)


def _runs(name: str, target: str, pass_name: str) -> bool:
    from ptc.diagnostics import CompileError
    try:
        after(name, target, pass_name)
    except CompileError:
        return False
    return True


def test_place_sync_turns_the_plan_s_waits_into_waits_and_barriers():
    steps = after("gemm", "sm80", "steps")
    placed = after("gemm", "sm80", "place_sync")
    assert ir.PlanWait in kinds(steps)
    assert not {ir.WaitGroups, ir.Barrier} & kinds(steps)
    assert ir.PlanWait not in kinds(placed)
    assert {ir.WaitGroups, ir.Barrier} <= kinds(placed)
    # the steps' dump prints the plan's waits in words, not as Python objects
    text = print_lowered(steps)
    assert "the plan waits for A_smem, B_smem" in text and "PlanWait(" not in text


def test_one_group_in_flight_keeps_a_wgmma_in_flight_and_pin_accumulators_pins():
    def pending(low):
        return sorted({op.pending for op in ir.walk(low.body) if isinstance(op, ir.WgmmaWait)})
    assert pending(after("gemm", "sm90", "named_barriers")) == [0]
    assert pending(after("gemm", "sm90", "one_group_in_flight")) == [0, 1]
    assert ir.PinAccumulators not in kinds(after("gemm", "sm90", "one_group_in_flight"))
    assert ir.PinAccumulators in kinds(after("gemm", "sm90", "pin_accumulators"))


def _loop_ops(low: ir.LoweredKernel) -> list:
    (loop,) = [op for op in ir.walk(low.body) if isinstance(op, ir.Loop)
               and any(isinstance(o, ir.Wgmma) for o in op.body)]
    return list(loop.body)


def test_overlapped_wgmmas_keeps_each_plane_in_flight_across_the_next_planes_work():
    """W4A16 on sm90: eight wgmmas a k-step, each after its plane's dequantization. Before
    the pass each waits for itself (the CUDA cores and the tensor cores take turns); after
    it, each but the last is waited for after the next one is issued, and its slot of A is
    released after that wait; the last waits for all."""
    before = _loop_ops(after("w4a16_gemm", "sm90", "one_group_in_flight"))
    ops = _loop_ops(after("w4a16_gemm", "sm90", "overlapped_wgmmas"))
    waits = [op.pending for op in before if isinstance(op, ir.WgmmaWait)]
    assert waits == [0] * 8
    mmas = [i for i, op in enumerate(ops) if isinstance(op, ir.Wgmma)]
    waits = [i for i, op in enumerate(ops) if isinstance(op, ir.WgmmaWait)]
    assert [ops[i].pending for i in waits] == [1] * 7 + [0]
    assert all(m < w for m, w in zip(mmas[1:], waits)) and mmas[-1] < waits[-1]
    # the slots of A (released by one thread, not per warp) follow the waits, each after
    # the next wgmma is issued
    releases = [i for i, op in enumerate(ops) if isinstance(op, ir.MbarrierArrive)
                and not op.per_warp]
    assert len(releases) == 8 and all(isinstance(ops[i - 1], (ir.WgmmaWait, ir.MbarrierArrive))
                                      for i in releases)
    assert all(r > m for r, m in zip(releases, mmas[1:] + [mmas[-1]]))
    # where the work between two wgmmas reads the first's accumulator (attention's
    # softmax), the first is waited for before it
    for name in ("flash_attn", "gemm"):
        assert print_lowered(after(name, "sm90", "overlapped_wgmmas")) == \
            print_lowered(after(name, "sm90", "one_group_in_flight")), name


def test_the_cli_prints_a_pass_and_refuses_what_is_not_one():
    code, out, _ = ptc("compile", SAMPLES / "gemm.pt", "-t", "sm80", "--emit", "lowered",
                       "--after", "steps")
    assert code == 0
    assert out.startswith("# after pass steps: the ops as it left them")
    assert "lowered gemm for sm80" in out and "the plan waits for" in out
    code, _, err = ptc("compile", SAMPLES / "gemm.pt", "-t", "sm80", "--emit", "lowered",
                       "--after", "nope")
    assert code == 2 and "no lowering pass 'nope'; the passes: " + ", ".join(PASSES) in err
    code, _, err = ptc("compile", SAMPLES / "gemm.pt", "-t", "sm80", "--emit", "plan",
                       "--after", "steps")
    assert code == 2 and "--after PASS applies to --emit lowered" in err
    code, _, err = ptc("compile", SAMPLES / "gemm.pt", "-t", "sm80", "--emit", "lowered",
                       "--after", "take_turns")
    assert code == 1
    assert ("no pass take_turns ran in the multistage lowering of this plan; its passes: "
            "steps, hoist_fragments, shared_reads_once, place_sync, staged_waits") in err


def test_the_help_of_after_names_every_pass_in_order():
    """`ptc compile --help` lists each builder's passes as ptc.lower.passes has them."""
    from click.testing import CliRunner

    from ptc.cli import cli
    from ptc.lower.passes import SINGLE_ROLE, WARP_SPECIALIZED

    text = " ".join(CliRunner().invoke(cli, ["compile", "--help"]).output.split())
    assert "(" + ", ".join(SINGLE_ROLE) + "; warp-specialized plans: " + \
        ", ".join(WARP_SPECIALIZED) + ")" in text
