"""The ISA readout (ptc.targets.hip.isa) on recorded device assembly: what `ptc build`
reports for a HIP kernel -- registers, LDS, scratch, spills, occupancy and the instructions
of its main loop. tests/test_hip_build.py reads freshly compiled assembly the same way."""
from __future__ import annotations

import json
from pathlib import Path

from ptc.targets.hip.isa import family, parse_isa

RECORDED = Path(__file__).resolve().parent / "fixtures" / "hip" / "isa_probe.gfx942.s"


def test_the_readout_of_a_recorded_assembly():
    """tests/runtime/isa_probe.hip compiled by clang 19.1.7 for gfx942
    (`clang++-19 -x hip -std=c++17 -O3 -nogpulib --offload-arch=gfx942 --offload-device-only
    -S`): an MFMA loop, a private array in scratch, and spills."""
    report = parse_isa(RECORDED.read_text())
    loop, array, spilling = report.kernels
    assert (loop.name, loop.arch, loop.vgprs, loop.agprs, loop.total_vgprs, loop.sgprs,
            loop.lds_bytes, loop.scratch_bytes, loop.spills, loop.occupancy,
            loop.max_threads) == ("mma_loop", "gfx942", 8, 16, 24, 14, 2048, 0, 0, 8, 128)
    assert dict(loop.instructions) == {"v_mfma": 2, "ds_read": 2, "ds_write": 1,
                                       "global_load": 1, "global_store": 16, "s_barrier": 2,
                                       "s_waitcnt": 4, "accvgpr": 32}   # AGPRs zeroed, read out
    assert dict(loop.main_loop) == {"v_mfma": 2, "ds_read": 2, "ds_write": 1,
                                    "global_load": 1, "s_barrier": 2, "s_waitcnt": 3}
    assert loop.mfma == (("v_mfma_f32_32x32x8_f16", 2),)
    assert (array.scratch_bytes, array.spills, array.occupancy) == (272, 0, 7)
    assert (spilling.vgpr_spills, spilling.sgpr_spills, spilling.scratch_bytes) == (208, 0, 324)
    assert spilling.loop_count("v_mfma") == 5 and spilling.loop_count("scratch") == 32
    assert (report.spills, report.scratch_bytes) == (208, 324)
    assert report.alerts() == [
        "scratch_array: uses 272 bytes of scratch per lane (a private array kept in memory)",
        "spilling: spilled 208 VGPRs and 0 SGPRs to scratch"]
    as_json = json.loads(json.dumps(report.to_json()))
    assert as_json["spills"] == 208 and as_json["kernels"][0]["main_loop"]["v_mfma"] == 2


NESTED = """\
\t.amdgcn_target "amdgcn-amd-amdhsa--gfx90a"
\t.type\tnest,@function
nest:                                   ; @nest
; %bb.0:
\tglobal_load_dword v1, v0, s[2:3]
\ts_branch .LBB0_3
.LBB0_2:                                ;   in Loop: Header=BB0_3 Depth=1
\ts_cbranch_scc1 .LBB0_7
.LBB0_3:                                ; =>This Loop Header: Depth=1
                                        ;     Child Loop BB0_5 Depth 2
\tglobal_load_dword v18, v1, s[8:9]
\tglobal_store_dword v1, v18, s[8:9]
\ts_cbranch_vccnz .LBB0_2
; %bb.4:                                ;   in Loop: Header=BB0_3 Depth=1
\ts_mov_b32 s7, s3
.LBB0_5:                                ;   Parent Loop BB0_3 Depth=1
                                        ; =>  This Inner Loop Header: Depth=2
\tglobal_load_dwordx2 v[18:19], v1, s[12:13]
\tds_read_b64 v[20:21], v1
\tv_mfma_f32_32x32x8f16 v[2:17], v[18:19], v[20:21], v[2:17]
\ts_cbranch_scc0 .LBB0_5
\ts_branch .LBB0_2
.LBB0_7:
\ts_endpgm
\t.amdhsa_kernel nest
\t.end_amdhsa_kernel
.Lfunc_end0:
; Kernel info:
; NumVgprs: 22
; Occupancy: 8
\t.amdgpu_metadata
---
amdhsa.kernels:
  - .agpr_count:     0
    .group_segment_fixed_size: 512
    .name:           nest
    .private_segment_fixed_size: 0
    .sgpr_count:     24
    .sgpr_spill_count: 3
    .vgpr_spill_count: 0
...
\t.end_amdgpu_metadata
"""


def test_the_main_loop_is_the_innermost_loop_with_the_mfma():
    """LLVM's loop comments decide the loops (a loop's blocks need not be contiguous, nor
    end in its back edge); what the comments lack comes from the code object metadata."""
    (k,) = parse_isa(NESTED).kernels
    assert dict(k.main_loop) == {"v_mfma": 1, "ds_read": 1, "global_load": 1}
    assert dict(k.instructions)["global_load"] == 3
    assert (k.arch, k.vgprs, k.total_vgprs, k.sgprs, k.lds_bytes, k.sgpr_spills,
            k.occupancy) == ("gfx90a", 22, 22, 24, 512, 3, 8)
    assert family("ds_read2st64_b64") == "ds_read" and family("v_add_f32") is None
