"""A register tile's reads of a swizzled shared tile are addressed as (the thread's row, the
register's constant row step) (`ptc::tma_offset_at`, `ptc::tile_offset_at`, c_body's
shared_read): the step's whole periods of rows are added after the swizzle, so registers a
period apart share one swizzled address. These check, for every row, step and byte of the
tile shapes ptc renders, that the split is the offset itself, and that a shorter period
would not be (the checks can fail)."""
from __future__ import annotations

import subprocess

import pytest

PROGRAM = r"""
#include <cstdio>
int failures = 0, shorter = 0;
template <int ROW_BYTES, bool SWIZZLE>
void sync_tile() {
  for (int row = 0; row < 40; ++row)
    for (int step = 0; step < 72; ++step)
      for (int byte = 0; byte < ROW_BYTES && byte < 1024; byte += 2) {
        const uint32_t want = ptc::tile_offset<ROW_BYTES, SWIZZLE>(row + step, byte);
        if (ptc::tile_offset_at<ROW_BYTES, SWIZZLE>(row, step, byte) != want) ++failures;
        if (ptc::tile_offset<ROW_BYTES, SWIZZLE>(row + step % 4, byte) +
            (step - step % 4) * ROW_BYTES != want) ++shorter;
      }
}
template <int SPAN, int PANEL_BYTES>
void tma_tile(int bytes) {
  for (int row = 0; row < PANEL_BYTES / SPAN; ++row)
    for (int step = 0; row + step < PANEL_BYTES / SPAN; ++step)
      for (int byte = 0; byte < bytes; byte += 2) {
        const uint32_t want = ptc::tma_offset<SPAN, PANEL_BYTES>(row + step, byte);
        if (ptc::tma_offset_at<SPAN, PANEL_BYTES>(row, step, byte) != want) ++failures;
        if (ptc::tma_offset<SPAN, PANEL_BYTES>(row + step % 4, byte) +
            (step - step % 4) * SPAN != want) ++shorter;
      }
}
int main() {
  sync_tile<32, true>(); sync_tile<64, true>(); sync_tile<128, true>();
  sync_tile<256, true>(); sync_tile<8192, true>(); sync_tile<96, true>();
  sync_tile<192, true>(); sync_tile<256, false>(); sync_tile<72, false>();
  tma_tile<128, 4096>(256); tma_tile<128, 16384>(512); tma_tile<64, 2048>(192);
  tma_tile<32, 1024>(96); tma_tile<16, 512>(64); tma_tile<128, 1536>(256);
  printf("%d %d\n", failures, shorter);
  return 0;
}
"""


@pytest.mark.cxx
def test_a_swizzled_offset_split_at_its_period_is_the_offset(tmp_path):
    from ptc.render.emulate import backend_of

    back = backend_of("cuda")
    src = tmp_path / "offsets.cpp"
    src.write_text(back.runtime + '#include "global_to_shared_tma.cuh"\n' + PROGRAM)
    exe = tmp_path / "offsets"
    subprocess.run(["g++", "-std=c++20", "-O1", "-DPTC_EMULATE",
                    *(f"-I{d}" for d in back.include_dirs()), "-w", str(src), "-o", str(exe)],
                   check=True)
    failures, shorter = map(int, subprocess.run([str(exe)], capture_output=True, text=True,
                                                check=True).stdout.split())
    assert failures == 0
    assert shorter > 0      # a period of 4 rows is not one: the program tells them apart
