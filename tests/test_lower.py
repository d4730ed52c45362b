"""The lowering stage (ptc/lower) against independent expectations: the PTX ISA's fragment
formulas, NVIDIA's shared-memory bank rule, buffer lifetimes, and the plan it finalizes."""
from pathlib import Path

import pytest

from ptc.devices import get_device
from ptc.driver import check_file, lowered, schedule
from ptc.lower import ir
from ptc.lower.assign import tiling_layouts
from ptc.lower.atoms import Tiling
from ptc.lower.layout import Layout
from ptc.lower.swizzle import SmemLayout, bank_conflicts, smem_layout
from ptc.targets.cuda.atoms import MMA_SYNC_16816

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def elements(lay: Layout) -> dict[tuple[int, int], tuple[int, int]]:
    """(lane, register) -> element, for warp 0."""
    table = lay.table[0]
    return {(lane, r): tuple(int(x) for x in table[lane, r])
            for lane in range(table.shape[0]) for r in range(table.shape[1])}


# ---- the mma.sync m16n8k16 fragments, from the PTX ISA's formulas ----------------------------
def test_the_accumulator_layout_is_the_ptx_isa_one():
    c, _, _ = tiling_layouts(Tiling(MMA_SYNC_16816, 16, 8, 16, 1, 1), "t")
    for (lane, i), (row, col) in elements(c).items():
        g, t = lane // 4, lane % 4
        assert (row, col) == (g + 8 * (i >= 2), 2 * t + (i & 1))


def test_the_a_operand_layout_is_the_ptx_isa_one():
    _, a, _ = tiling_layouts(Tiling(MMA_SYNC_16816, 16, 8, 16, 1, 1), "t")
    for (lane, i), (row, col) in elements(a).items():
        g, t = lane // 4, lane % 4
        assert (row, col) == (g + 8 * (i in (2, 3, 6, 7)), 2 * t + (i & 1) + 8 * (i >= 4))


def test_the_b_operand_layout_is_the_ptx_isa_one():
    _, _, b = tiling_layouts(Tiling(MMA_SYNC_16816, 16, 8, 16, 1, 1), "t")
    for (lane, i), (row, col) in elements(b).items():
        g, t = lane // 4, lane % 4
        assert (row, col) == (2 * t + (i & 1) + 8 * (i >= 2), g)


def test_a_warp_tile_repeats_the_atom_along_n_then_m():
    """Registers of atom (mi, ni) are c[(mi * NI + ni) * 4 + i] -- mma_sync.cuh's order."""
    t = Tiling(MMA_SYNC_16816, 64, 64, 32, 2, 2)      # 2x2 warps, 2x4 atoms per warp
    c, _, _ = tiling_layouts(t, "t")
    assert (t.mi, t.ni, t.ks) == (2, 4, 2)
    table = c.table
    for warp in range(4):
        wm, wn = warp // 2, warp % 2
        for lane in range(32):
            for mi in range(2):
                for ni in range(4):
                    for i in range(4):
                        row, col = table[warp, lane, (mi * 4 + ni) * 4 + i]
                        assert row == wm * 32 + mi * 16 + lane // 4 + 8 * (i >= 2)
                        assert col == wn * 32 + ni * 8 + 2 * (lane % 4) + (i & 1)


def test_p_can_feed_the_second_mma_from_registers():
    """Flash attention's S accumulator (16 x 64 per warp) holds, register for register,
    what the A operand of P @ V needs: no shared-memory round trip."""
    s, _, _ = tiling_layouts(Tiling(MMA_SYNC_16816, 64, 64, 128, 4, 1), "s")
    _, a, _ = tiling_layouts(Tiling(MMA_SYNC_16816, 64, 128, 64, 4, 1), "o")
    assert s.same_map(a)
    split, _, _ = tiling_layouts(Tiling(MMA_SYNC_16816, 64, 64, 128, 2, 2), "s")
    assert not split.same_map(a)


def test_a_row_reduction_combines_the_four_lanes_of_a_row():
    c, _, _ = tiling_layouts(Tiling(MMA_SYNC_16816, 64, 64, 16, 4, 1), "c")
    masks, warps = c.replicating(1)
    assert masks == [1, 2] and warps == []
    rows = c.slice(1)
    assert rows.size == 2 * 1   # rows g and g + 8 of the warp's 16
    masks, warps = tiling_layouts(Tiling(MMA_SYNC_16816, 64, 64, 16, 2, 2), "c")[0].replicating(1)
    assert masks == [1, 2] and len(warps) == 1


# ---- shared memory: the swizzle makes ldmatrix and 16-byte copies conflict-free ----------
@pytest.mark.parametrize("cols", [32, 64, 128, 256])
def test_ldmatrix_rows_of_a_swizzled_tile_hit_every_bank_once(cols):
    tile = smem_layout(64, cols, "bf16")
    assert tile.swizzle == "xor"
    for row0 in range(0, 64, 8):
        for col in range(0, cols, 8):
            rows = [tile.offset(row0 + r, col) for r in range(8)]
            assert bank_conflicts(rows, 16) == 0, (row0, col)
    plain = SmemLayout(64, cols, "bf16", "none")
    if cols >= 64:
        assert bank_conflicts([plain.offset(r, 0) for r in range(8)], 16) > 0


@pytest.mark.parametrize("cols", [32, 64, 128, 256])
def test_a_warps_16_byte_copies_into_a_swizzled_tile_are_conflict_free(cols):
    tile = smem_layout(64, cols, "bf16")
    per_row = cols // 8
    for first in range(0, 64 * per_row, 32):
        chunks = [first + lane for lane in range(32)]
        addrs = [tile.offset(c // per_row, (c % per_row) * 8) for c in chunks]
        assert bank_conflicts(addrs, 16) == 0


# ---- the lowered kernels of the samples ------------------------------------------------------
def lower_sample(name: str, target: str = "sm80", **shapes):
    """(lowered kernel, plan, graph, device) of a one-grid sample."""
    k = check_file(SAMPLES / f"{name}.pt", shapes).kernels[0]
    (low,), (plan,), (graph,), device = lowered(k, target, shapes=shapes or None)
    return low, plan, graph, device


def test_buffers_whose_lives_do_not_meet_share_bytes():
    low, *_ = lower_sample("rmsnorm")
    x, w = low.buffer("X_smem"), low.buffer("W_smem")
    assert x.live[1] < w.live[0]
    assert x.offset == w.offset == 0          # W reuses X's bytes
    assert low.launch.dynamic_smem == max(b.end for b in low.buffers)


def test_buffers_that_live_together_do_not_overlap():
    for name in ("gemm", "flash_attn", "mamba2_chunk_state", "gemm_chain"):
        low, *_ = lower_sample(name)
        bufs = low.buffers
        for i, a in enumerate(bufs):
            for b in bufs[i + 1:]:
                meet = not (a.live[1] < b.live[0] or b.live[1] < a.live[0])
                if meet:
                    assert a.end <= b.offset or b.end <= a.offset, (name, a.name, b.name)
            if a.layout is not None and a.layout.swizzle == "xor":
                assert a.offset % 1024 == 0


@pytest.mark.parametrize("target", ["sm80", "sm90", "gfx90a", "gfx942"])
@pytest.mark.parametrize("name", sorted(p.stem for p in SAMPLES.glob("*.pt")))
def test_the_plan_says_the_shared_memory_the_kernel_allocates(name, target):
    low, plan, _, _ = lower_sample(name, target)
    assert plan.launch.dynamic_smem == low.launch.dynamic_smem
    k = check_file(SAMPLES / f"{name}.pt").kernels[0]
    best = schedule(k, target).best.plan
    assert best == plan                     # --emit plan prints the plan -o DIR builds
    # and the device can launch it: staging the lowering adds is counted too
    assert low.launch.dynamic_smem <= get_device(target).resources.shared_memory_bytes
    # and it names the layout each buffer was built in (what explain's buffer table shows)
    built = {b.plan_buffer: b.layout.name if b.layout is not None else "vector"
             for b in low.buffers if b.plan_buffer}
    assert {b.name: b.built_layout for b in plan.buffers} == built


STAGED_B = """
kernel staged_b(A: f16[M, K], W: f16[K, N], S: f16[N]) -> (C: f16[M, N]) {
  tile BM in [128], BN in [256], BK in [64]
  parallel i: BM of M, j: BN of N {
    acc = zeros(f32[BM, BN])
    for k: BK of K {
      acc += (load(A[i, k]) * 2.0) @ (load(W[k, j]) * load(S[j])[None, :])
    }
    store(C[i, j], acc as f16)
  }
}
"""


def test_staging_that_leaves_the_devices_shared_memory_is_refused_by_the_lowering(tmp_path):
    """The plan's verifier counts the plan's rings only. Two consumer warpgroups of a
    product whose A and B are both computed in registers stage B (wgmma reads it from
    shared memory) once per warpgroup, beside 4 stages of rings: over sm90's
    232,448 bytes. The lowering refuses it, saying how much is whose, so the search goes
    on to another plan. (W4A16's planes are no longer staged: their A is loaded, so they
    are multiplied swapped, from registers.)"""
    from ptc.driver import stask_graph
    from ptc.lower import LoweringError, lower
    from ptc.render import capabilities
    from ptc.sched.construct import Choice, construct
    from ptc.sched.verify import problems
    path = tmp_path / "staged_b.pt"
    path.write_text(STAGED_B)
    k = check_file(path, dict(M=256, N=256, K=256)).kernels[0]
    g = stask_graph(k, {"BM": 128, "BN": 256, "BK": 64})
    dev = get_device("sm90")
    plan = construct(g, dev, Choice("warp_specialized", 4, 2))
    assert problems(plan, g, dev) == []            # the plan's own buffers fit
    with pytest.raises(LoweringError, match=r"needs \d+ bytes of shared memory: the plan's "
                       r"buffers \d+, and \d+ for 2 staging buffer\(s\) the lowering adds, "
                       r"over sm90's 232448 per block"):
        lower(plan, g, dev, capabilities(dev))


def multistage_flash_attention():
    from ptc.driver import stask_graph
    from ptc.lower import lower
    from ptc.render import capabilities
    from ptc.sched.construct import Choice, construct
    k = check_file(SAMPLES / "flash_attn.pt").kernels[0]
    g = stask_graph(k, {"BM": 64, "BN": 64})
    dev = get_device("sm80")
    return lower(construct(g, dev, Choice("multistage", 2, warps=4)), g, dev, capabilities(dev))


def loop_barriers(low) -> list:
    (loop,) = [op for op in low.body if isinstance(op, ir.Loop)]
    return [op for op in ir.walk(loop.body) if isinstance(op, ir.Barrier)]


def test_flash_attention_keeps_its_softmax_in_registers():
    # pipelined: the wait for K and the one for V, each with its barrier, nothing else
    assert len(loop_barriers(multistage_flash_attention())) == 2
    # what the search picks at the benchmark shape
    low, plan, *_ = lower_sample("flash_attn")
    (loop,) = [op for op in low.body if isinstance(op, ir.Loop)]
    body = ir.walk(loop.body)
    assert len(loop_barriers(low)) <= (2 if plan.style == "multistage" else 3)
    mma_o = [op for op in body if isinstance(op, ir.Mma) and op.task == "mma_o"][0]
    assert mma_o.a.in_registers                     # P straight from the S accumulator
    assert not any(isinstance(op, (ir.SpillTile, ir.FillTile)) for op in body)
    reduces = [op for op in body if isinstance(op, ir.Reduce)]
    assert reduces and all(op.lane_masks == (1, 2) and not op.scratch for op in reduces)


def test_an_mma_no_atom_fits_runs_on_cuda_cores():
    from ptc.lower.atoms import mma_atom
    sm80 = get_device("sm80")
    assert mma_atom(sm80, "f16", 64, 64, 32, 4) is MMA_SYNC_16816
    assert mma_atom(sm80, "f16", 32, 32, 24, 4) is None      # k is not a multiple of 16
    assert mma_atom(sm80, "f16", 16, 12, 32, 4) is None      # n is not a multiple of 8


def test_an_mma_with_fewer_atoms_than_warps_is_computed_in_copies():
    """16 x 16 on 4 warps: 2 warps split it, and each pair computes all of it (decoding
    attention's 16 x 8 scores of a page); only where no split of all the warps is whole."""
    from ptc.lower.atoms import mma_atom, mma_tilings
    sm80 = get_device("sm80")
    assert mma_atom(sm80, "f16", 16, 16, 32, 4) is MMA_SYNC_16816
    (t,) = mma_tilings([MMA_SYNC_16816], 16, 16, 32, 4)
    assert (t.wm, t.wn, t.replicas) == (1, 2, 2)
    (t,) = mma_tilings([MMA_SYNC_16816], 16, 8, 128, 4)
    assert (t.wm, t.wn, t.replicas, t.ks) == (1, 1, 4, 8)
    assert all(t.replicas == 1 for t in mma_tilings([MMA_SYNC_16816], 64, 16, 32, 4))
    c, a, b = tiling_layouts(t, "s")
    assert all(d.stride == (0, 0) for d in c.warps + a.warps + b.warps)


def test_a_reduction_result_lives_in_the_slice_of_what_it_reads(tmp_path):
    """`x = load(..) as f32; ss += rowsum(x)`: the sum used to take ss's blocked layout
    from its reader, so the reduction wrote its rows into the wrong registers."""
    path = tmp_path / "w.pt"
    path.write_text("""
kernel w(X: f16[M, N]) -> (S: f32[M]) {
  dims M = 64, N = 512
  tile BM in [16], BK in [256]
  parallel i: BM of M {
    ss = zeros(f32[BM])
    for k: BK of N {
      x = load(X[i, k]) as f32
      ss += rowsum(x)
    }
    store(S[i], ss)
  }
}
""")
    k = check_file(path).kernels[0]
    (low,), *_ = lowered(k, "sm80")
    homes = dict(low.values)
    x = low.layout(homes["x"].layout)
    for name in ("%r1", "ss"):
        assert low.layout(homes[name].layout).same_map(x.slice(1)), name


def test_a_named_mask_is_computed_where_the_reduction_reads_it(tmp_path):
    """`valid = index(n)[None, :] < N - 10` read by `rowmax(where(valid, x, -inf))`: the
    [1, BN] mask had no layout (no plan fitted, issue 20); it takes the reduction's layout
    collapsed along the rows, so nothing converts it."""
    path = tmp_path / "m.pt"
    path.write_text((Path(__file__).resolve().parent / "generated" /
                     "issue20-named-mask.pt").read_text())
    shapes = {"M": 40, "N": 100}
    k = check_file(path, shapes).kernels[0]
    (low,), *_ = lowered(k, "sm80", shapes=shapes)
    homes = dict(low.values)
    (reduce,) = [op for op in ir.walk(low.body) if isinstance(op, ir.Reduce)]
    source = low.layout(reduce.source_layout)
    assert low.layout(homes["valid"].layout).same_map(source.collapsed(0))
    assert not any(isinstance(op, (ir.SpillTile, ir.FillTile)) for op in ir.walk(low.body))


def test_a_computed_b_with_a_loaded_a_is_multiplied_swapped_and_said_so():
    """sm90: B computed in registers and A loaded -> wgmma multiplies out^T = b^T a^T with
    b^T from registers (SpecializedPlan.rs_swap): no staging buffer, the Wgmma op marked
    swapped with N = A's rows, and a note saying so; with A computed too, B is staged."""
    from ptc.lower.printer import print_lowered

    path = SAMPLES.parent / "tests" / "coverage" / "swapped.pt"
    dims = {"M": 256, "N": 256, "K": 256}
    for name, swapped in (("swapped_b", True), ("computed_ab", False)):
        kernel = next(k for k in check_file(path, dims).kernels if k.name == name)
        (low,), *_ = lowered(kernel, "sm90", shapes=dims, tiles={"BM": 64, "BN": 64, "BK": 32})
        (mma,) = [op for op in ir.walk(low.body) if isinstance(op, ir.Wgmma)]
        staged = [b for b in low.buffers if "staged for wgmma" in b.purpose]
        text = print_lowered(low)
        assert mma.swapped == swapped and (not staged) == swapped, name
        assert ("wgmma multiplies out^T = b^T a^T" in text) == swapped, name
        if swapped:
            assert mma.a.in_registers and not mma.b.in_registers and mma.n == 64
