"""The lowering for the HIP renderer (gfx90a, gfx942): copies staged in registers that
land at the waits, the plans it refuses, and what the cost model counts for MFMA tiles."""
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ptc.devices import get_device
from ptc.driver import check_file, lowered
from ptc.lower import LoweringError, ir
from ptc.lower.staged_copies import staged_waits
from ptc.render import capabilities

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted(p.stem for p in (ROOT / "samples").glob("*.pt"))


def lower_sample(name: str, target: str):
    k = check_file(ROOT / "samples" / f"{name}.pt").kernels[0]
    (low,), (plan,), _, device = lowered(k, target)
    return low, plan, device


@pytest.mark.parametrize("target", ["gfx90a", "gfx942"])
@pytest.mark.parametrize("name", SAMPLES)
def test_every_async_copy_is_staged_and_landed_before_it_is_copied_again(name, target):
    low, plan, device = lower_sample(name, target)
    ops = ir.walk(low.body)
    copies = [op for op in ops if isinstance(op, ir.CopyTile) and op.asynchronous]
    assert all(op.staged for op in copies)
    landed = {t for op in ops if isinstance(op, ir.WaitGroups) for t in op.lands}
    assert {op.task for op in copies} <= landed
    assert plan.stages <= 2
    assert low.launch.threads % device.resources.warp_size == 0


def gemm_copies():
    low, _, _ = lower_sample("gemm", "gfx90a")
    loop = next(op for op in low.body if isinstance(op, ir.Loop))
    a, b = [op for op in loop.body if isinstance(op, ir.CopyTile)]
    return a, b


def test_a_wait_lands_the_groups_older_than_those_it_leaves_in_flight():
    a, b = gemm_copies()
    body = (a, ir.CommitGroup(), b, ir.CommitGroup(), ir.WaitGroups(1, ("A_lds",)),
            ir.WaitGroups(0, ("B_lds",)))
    *_, first, last = staged_waits(body)
    assert first.lands == (a.task,)
    assert last.lands == (b.task,)


def test_copying_again_before_the_last_copy_landed_is_refused():
    a, _ = gemm_copies()
    body = (a, ir.CommitGroup(), a, ir.CommitGroup(), ir.WaitGroups(0, ("A_lds",)))
    with pytest.raises(LoweringError, match="copies again before a wait landed"):
        staged_waits(body)


def test_a_loop_body_is_checked_across_iterations():
    a, _ = gemm_copies()
    loop = ir.Loop("k", 32, "K", None, (a, ir.CommitGroup()), stages=2)
    with pytest.raises(LoweringError, match="keep one in flight"):
        staged_waits((loop,))
    fine = replace(loop, body=(ir.WaitGroups(0, ("A_lds",)), a, ir.CommitGroup()))
    (out,) = staged_waits((fine,))
    assert out.body[0].lands == (a.task,)


def test_the_hip_renderer_refuses_more_than_two_stages():
    _, plan, device = lower_sample("gemm", "gfx90a")
    why = capabilities(device).refuses(replace(plan, stages=3), device)
    assert "2 pipeline stages at most" in why
    assert capabilities(device).refuses(plan, device) is None


def test_b_is_stored_transposed_so_a_lane_reads_its_four_k_at_once():
    # gemm on gfx90a: 2x2 atoms of 32x32x8 per wave (the larger atom: half the
    # instructions of 16x16x16 for the same fragment reads), 4 k-steps; A [m][k] is read 8
    # bytes per lane (1 per atom); B [k][n] lands transposed, so it is too
    low, plan, _ = lower_sample("gemm", "gfx90a")
    (mma,) = [op for op in ir.walk(low.body) if isinstance(op, ir.Mma)]
    assert (mma.atom.name, mma.mi, mma.ni, mma.ks) == ("mfma.f32.32x32x8", 2, 2, 4)
    assert low.buffer("B_lds").layout.transposed and mma.b.transposed
    assert not low.buffer("A_lds").layout.transposed and not mma.a.transposed
    issue = plan.issue_of(mma.task)
    assert issue.mma == 2 * 2 * 4
    assert issue.fragment_loads == 2 * 4 + 2 * 4


def test_cuda_tiles_are_never_stored_transposed():
    low, _, _ = lower_sample("gemm", "gfx90a")
    k = check_file(ROOT / "samples" / "gemm.pt").kernels[0]
    (cuda,), *_ = lowered(k, "sm80")
    assert low.buffer("B_lds").layout.transposed
    assert not any(b.layout is not None and b.layout.transposed for b in cuda.buffers)


def test_a_transposed_tile_is_a_bijection_and_an_mfma_read_takes_every_bank_once():
    from ptc.lower.swizzle import transposed_layout, wavefronts
    lay = transposed_layout(32, 128, "f16")        # B[k][n]: stored [n][k], 64-byte rows
    offsets = {lay.offset(r, c) for r in range(32) for c in range(128)}
    assert len(offsets) == 32 * 128 and max(offsets) < lay.bytes == 32 * 128 * 2
    assert all(lay.offset(r, c) % 8 == lay.offset(r - r % 4, c) % 8 + 2 * (r % 4)
               for r in range(32) for c in range(128))    # four k: one 8-byte unit
    for k0 in range(0, 32, 4):                      # 16 lanes: 16 columns, one unit each
        for n0 in range(0, 128, 16):
            reads = [lay.offset(k0, n0 + i) for i in range(16)]
            assert wavefronts(reads, 8) == 1
    assert transposed_layout(30, 128, "f16") is None and transposed_layout(32, 8, "f32") is None


@pytest.mark.parametrize("target", ["gfx90a", "gfx942"])
def test_accumulators_the_alu_reads_in_the_loop_get_a_budget_of_alu_registers(target):
    """Flash attention rescales o (and reads S) with the vector ALU every iteration: the
    allocator is told to leave room for 2 blocks of 4 waves (256 registers per lane, CDNA's
    arch VGPRs), so it keeps them out of the AGPRs. gemm's accumulator never leaves the
    MFMA in the loop: the compiler chooses. CUDA has no such registers."""
    low, _, device = lower_sample("flash_attn", target)
    res = device.resources
    assert low.launch.min_blocks == 2
    assert res.registers // (low.launch.min_blocks * low.launch.threads) == res.alu_registers
    assert any("the vector ALU reads accumulators in the loop (%s_mma, o)" in n
               for n in low.notes)
    assert lower_sample("gemm", target)[0].launch.min_blocks == 0
    assert lower_sample("flash_attn", "sm80")[0].launch.min_blocks == 0


def test_a_transposed_layout_holds_each_element_where_the_original_held_its_mirror():
    from ptc.lower.assign import tiling_layouts
    from ptc.lower.atoms import tilings
    from ptc.targets.hip.atoms import MFMA_16x16x16
    (t,) = [t for t in tilings(MFMA_16x16x16, 32, 64, 16, 4) if (t.wm, t.wn) == (1, 4)]
    c, a, b = tiling_layouts(t, "x")
    for lay in (c, a, b):
        flipped = lay.transposed("y")
        assert flipped.shape == lay.shape[::-1]
        np.testing.assert_array_equal(flipped.table, lay.table[..., ::-1])


@pytest.mark.parametrize("target", ["gfx90a", "gfx942"])
def test_flash_attention_on_mfma_computes_both_products_transposed(target):
    """MFMA's accumulator gives a lane 4 consecutive rows of one column and its A operand 4
    consecutive k of one row: computing S^T = K Q^T leaves P in the registers where
    O^T = V^T P^T reads it as its B operand, so P stays in registers (no conversion through
    LDS), each lane holds 4 keys of one query row (row reductions exchange only across
    lane groups: xor 16 and 32, or 32 alone with 32x32 atoms, not 1, 2, 4, 8), and 4
    consecutive d of a row of O (8-byte stores)."""
    low, _, _ = lower_sample("flash_attn", target)
    mmas = [op for op in ir.walk(low.body) if isinstance(op, ir.Mma)]
    assert mmas and all(op.swapped for op in mmas)
    ops = ir.walk(low.body)
    assert not [op for op in ops if isinstance(op, (ir.SpillTile, ir.FillTile))]
    # exchanges only between the lane groups that hold other keys of the same rows
    reduces = [op for op in ops if isinstance(op, ir.Reduce)]
    assert reduces and all(op.lane_masks and min(op.lane_masks) >= 16 for op in reduces)
    pv = next(op for op in mmas if op.out == "o")
    assert (pv.a.value, pv.a.in_registers, pv.b.value, pv.b.in_registers) == \
        ("v", False, "%o", True)
    o = low.layout(dict(low.values)["o"].layout)
    assert o.regs[0].size == 4 and o.regs[0].stride == (0, 1)   # 4 consecutive d


def test_cuda_products_are_never_computed_transposed():
    low, _, _ = lower_sample("flash_attn", "sm80")
    assert not any(op.swapped for op in ir.walk(low.body) if isinstance(op, ir.Mma))
