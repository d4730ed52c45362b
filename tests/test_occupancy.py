"""One occupancy: the blocks an EU keeps resident come from one formula
(Resources.resident_blocks), so `--emit lowered`, the cost model and explain agree."""
from __future__ import annotations

from pathlib import Path

import pytest

from ptc.devices import get_device
from ptc.driver import check_file, lowered
from ptc.sched.cost import estimate, grid_tiles, occupancy
from test_cli import ptc

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted(p.stem for p in (ROOT / "samples").glob("*.pt"))
TARGETS = ("sm80", "sm90", "gfx90a", "gfx942")


def test_the_formula():
    res = get_device("sm80").resources          # 64K registers, 2048 threads, 164 KB
    assert res.resident_blocks(128, 128 * 128, 48 * 1024) == 3        # shared memory
    assert res.resident_blocks(256, 256 * 168, 16 * 1024) == 1        # registers
    assert res.resident_blocks(128, 128 * 32, 1024) == min(res.max_blocks, 16)   # threads
    assert res.resident_blocks(128, 128 * 32, res.shared_memory_per_eu_bytes + 1) == 0
    assert res.resident_blocks(2048, 2048 * 16, 0) == 0                # over a block's threads


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", SAMPLES)
def test_the_lowering_and_the_cost_model_count_the_same_blocks(name, target):
    kernel = check_file(ROOT / "samples" / f"{name}.pt").kernels[0]
    lows, plans, graphs, device = lowered(kernel, target)
    dims = {d.name: d.default for d in kernel.dims}
    for low, plan, graph in zip(lows, plans, graphs):
        assert low.launch.blocks_per_eu == occupancy(plan, device) >= 1
        # the timeline simulates the CTAs that are resident side by side (at most 2)
        resident = min(occupancy(plan, device), -(-grid_tiles(graph, dims) // device.eu_count))
        _, timeline = estimate(plan, graph, device, dims)
        assert timeline.ctas == max(1, min(resident, 2))


def test_explain_says_the_ctas_the_model_simulated():
    """A 256 x 256 gemm has 16 tiles for 108 SMs: one CTA per SM, whatever the resources
    allow (explain once recomputed 2 from the resources alone)."""
    out = ptc("explain", ROOT / "samples" / "gemm.pt", "-t", "sm80",
              "--shape", "M=256,N=256,K=4096").stdout
    assert "1 CTA per SM" in out and "CTAs per SM share" not in out


def test_explain_speaks_the_devices_words():
    """explain counts in the device description's `terms`: waves, workgroups, CUs, LDS
    fragment reads and the LDS on AMD; warps, CTAs, SMs, ldmatrix and shared memory on
    NVIDIA (a new target brings its own words in its YAML)."""
    amd = ptc("explain", ROOT / "samples" / "gemm.pt", "-t", "gfx942").stdout
    for said in ("4 waves", "Timeline of one CU", "workgroups per CU", "one workgroup per tile",
                 "issues per wave", " ds_read ", "KB LDS,", "bytes of LDS (buffers"):
        assert said in amd, said
    for never in (" warps", "CTA", " EU ", "ldmatrix", "per warp", "shared memory"):
        assert never not in amd, never
    nvidia = ptc("explain", ROOT / "samples" / "gemm.pt", "-t", "sm80").stdout
    for said in (" warps", "Timeline of one SM", "one CTA per tile", "issues per warp",
                 " ldmatrix ", "KB shared memory,"):
        assert said in nvidia, said
    assert " waves;" not in nvidia and "workgroup" not in nvidia and "LDS" not in nvidia


def test_explain_shows_the_layouts_the_buffers_were_built_in():
    """gfx942's gemm stores B transposed for its MFMA reads; sm90's TMA writes 128-byte
    panels: explain's buffer table says so (it once showed the plan's request,
    `swizzle128`, for every buffer)."""
    out = ptc("explain", ROOT / "samples" / "gemm.pt", "-t", "gfx942").stdout
    assert "transposed_k8" in out and "swizzle128" not in out
    out = ptc("explain", ROOT / "samples" / "gemm.pt", "-t", "sm90").stdout
    assert "tma128" in out and "swizzle128" not in out


def test_the_register_allocator_is_told_the_blocks_only_where_that_leaves_it_every_register():
    """ptxas, left to itself, caps a 128-thread block at 128 registers and spills where the
    plan needs more; told the plan's count it may take what that count leaves. It is told
    only where that is the per-thread maximum: a cap close above a low estimate spills."""
    from ptc.lower.registers import register_bound_blocks
    res = get_device("sm80").resources          # 64K registers, 255 a thread, 164 KB
    assert register_bound_blocks(res, 128, 32 * 1024, 1) == 1     # one block: always told
    assert register_bound_blocks(res, 128, 0, 0) == 0
    # two 128-thread blocks that the registers limit: 65536 / 256 = 256, every register
    assert register_bound_blocks(res, 128, 32 * 1024, 2) == 2
    # two blocks of 256 threads: a cap of 128, not told
    assert register_bound_blocks(res, 256, 32 * 1024, 2) == 0
    # two blocks that shared memory limits: the registers do not decide, not told
    assert register_bound_blocks(res, 128, 80 * 1024, 2) == 0
    # many blocks: not told
    assert register_bound_blocks(res, 128, 8 * 1024, 6) == 0
