"""The main-loop report (ptc.runtime.mainloop) against kernels whose loops we wrote."""
import shutil
import subprocess

import pytest

from ptc.runtime.mainloop import MainLoopError, flops, mainloop_reports

LOOP_KERNEL = r"""
#include <cuda_runtime.h>
extern "C" __global__ void loop4(const unsigned* a, float* out, int n) {
  __shared__ __align__(16) unsigned short tile[16 * 16];
  float d[4] = {0, 0, 0, 0};
  unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(tile + (threadIdx.x % 16) * 16));
#pragma unroll 1
  for (int i = 0; i < n; ++i) {
    unsigned r[4];
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
#pragma unroll
    for (int j = 0; j < 4; ++j)
      asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                   "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                   : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                   : "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]), "r"(r[j % 4]), "r"(r[3 - j]));
    d[0] = exp2f(d[0]);
    __syncthreads();
  }
  out[threadIdx.x] = d[0] + d[1] + d[2] + d[3];
}
"""


@pytest.fixture(scope="module")
def loop_sass(tmp_path_factory):
    from ptc.targets.cuda.toolchain import find_cuobjdump
    from ptc.runtime.errors import BuildError
    if shutil.which("nvcc") is None:
        pytest.skip("no nvcc")
    try:
        tool = find_cuobjdump()
    except BuildError:
        pytest.skip("no cuobjdump")
    d = tmp_path_factory.mktemp("loop")
    (d / "k.cu").write_text(LOOP_KERNEL)
    subprocess.run(["nvcc", "-O3", "-gencode", "arch=compute_80,code=sm_80", "-cubin",
                    "-o", str(d / "k.cubin"), str(d / "k.cu")], check=True)
    return subprocess.run([tool, "-sass", str(d / "k.cubin")], capture_output=True, text=True,
                          check=True).stdout


def test_the_report_counts_what_the_loop_issues(loop_sass):
    (r,) = mainloop_reports(loop_sass)
    assert r.kernel == "loop4"
    assert r.tensor_core == 4 and r.mma_flops == 4 * 2 * 16 * 8 * 16
    assert r.ldmatrix == 1
    assert r.barriers == 1
    assert r.mufu >= 1                      # exp2f's MUFU.EX2
    assert r.instructions >= 4 + 1 + 1 + 1
    assert r.per_mflop == pytest.approx(r.instructions / (r.mma_flops / 1e6))


RECORDED = """
        Function : wgmma_loop
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], R24 ;
        /*0020*/                   LDS R3, [R2] ;
        /*0030*/              @!PT LDS RZ, [RZ] ;
        /*0040*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0050*/               @P0 BRA 0x10 ;
        /*0060*/                   EXIT ;
"""


def test_a_recorded_loop_is_parsed_and_padding_is_not_counted():
    (r,) = mainloop_reports(RECORDED)
    assert (r.tensor_core, r.shared, r.barriers, r.instructions) == (1, 1, 1, 4)
    assert r.mma_flops == 2 * 64 * 128 * 16 // 4       # a warp's quarter of the warpgroup's
    assert flops("HMMA.1688.F32.TF32 R0, R4, R8, R0") == 2 * 16 * 8 * 8


# a warp-specialized consumer loop (0x10..0x50) and its remainder iteration (0x60), whose
# mbarrier try_wait retry the compiler moved past the kernel's end (0x80..0x90): that
# block's branch back spans the EXIT and is no loop, though it jumps over more HGMMAs
RETRY_BLOCK = """
        Function : ws_loop
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [UR4], R2 ;
        /*0020*/              @!P1 BRA 0x80 ;
        /*0030*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], R24 ;
        /*0040*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], R24, gsb0 ;
        /*0050*/               @P0 BRA 0x10 ;
        /*0060*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], R24, gsb0 ;
        /*0070*/                   EXIT ;
        /*0080*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [UR4], R2 ;
        /*0090*/                   BRA 0x20 ;
"""


def test_a_jump_back_from_past_the_exit_is_not_the_main_loop():
    (r,) = mainloop_reports(RETRY_BLOCK)
    assert (r.tensor_core, r.waits, r.instructions) == (2, 1, 5)


def test_no_loop_is_a_clear_error():
    with pytest.raises(MainLoopError, match="no kernel with a loop"):
        mainloop_reports("Function : straight\n /*0000*/ EXIT ;\n")
    with pytest.raises(MainLoopError, match="no kernel function"):
        mainloop_reports("nothing here")
