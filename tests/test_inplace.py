"""An mma's addend computed elementwise from its accumulator is stored in the accumulator's
registers (ptc.lower.inplace): flash attention's rescaled `o` on every target, and not
where the two would hold different live values at once or the addend reads the
accumulator other than element by element."""
from pathlib import Path

import pytest

from ptc.driver import check_file, lowered
from ptc.lower import print_lowered
from ptc.lower.inplace import reads_elementwise
from ptc.runtime import prepare
from ptc.sema import typed as T

SAMPLES = Path(__file__).resolve().parent.parent / "samples"

DECAY = """
kernel decay(A: f16[M, K], B: f16[K, N]) -> (C: f32[M, N], D: f32[M, N]) {
  dims M = 128, N = 128, K = 256
  tile BM in [64], BN in [64], BK in [32]
  parallel i: BM of M, j: BN of N {
    acc = zeros(f32[BM, BN]); d = zeros(f32[BM, BN])
    for k: BK of K {
      t = acc * 0.5
      acc = t + load(A[i, k]) @ load(B[k, j])
      KEEP
    }
    store(C[i, j], acc)
    store(D[i, j], d)
  }
}
"""


def lower_file(path: Path, target: str):
    k = check_file(path).kernels[0]
    (low,), *_ = lowered(k, target)
    return low, k


def c_names(low) -> dict[str, str]:
    return {n: h.name for n, h in low.values if hasattr(h, "layout") and hasattr(h, "shape")}


@pytest.mark.parametrize("target", ["sm80", "sm90", "gfx90a", "gfx942"])
def test_flash_attention_rescales_o_in_its_own_registers(target):
    low, _ = lower_file(SAMPLES / "flash_attn.pt", target)
    names = c_names(low)
    assert names["%o2"] == names["o"] == "v_o"
    assert "(in o's registers)" in print_lowered(low)
    source = prepare(SAMPLES / "flash_attn.pt", target).source
    assert "t_o2" not in source                  # declared once, never copied back
    assert source.count("float v_o[") == 1
    assert "v_o[r] = (ptc::f32(v_o[r]) *" in source   # the rescale, in place


def test_an_addend_read_after_the_mma_keeps_its_own_registers(tmp_path):
    path = tmp_path / "decay.pt"
    path.write_text(DECAY.replace("KEEP", "d = d + t * acc"))    # t outlives the mma
    low, _ = lower_file(path, "sm80")
    names = c_names(low)
    assert names["t"] != names["acc"]


def test_an_addend_that_dies_at_the_mma_takes_the_accumulators_registers(tmp_path):
    path = tmp_path / "decay.pt"
    path.write_text(DECAY.replace("KEEP", "d = d + acc"))
    low, _ = lower_file(path, "sm80")
    names = c_names(low)
    assert names["t"] == names["acc"]


def test_only_elementwise_reads_of_the_accumulator_update_it_in_place():
    f32 = T.TileType("f32", (64, 64))
    acc = T.Var("acc", f32)
    row = T.Var("a", T.TileType("f32", (64,)))
    scaled = T.Elementwise("mul", (acc, T.Expand(row, (1,), T.TileType("f32", (64, 1)))), f32)
    assert reads_elementwise(scaled, "acc", f32.shape)
    assert reads_elementwise(T.Convert(acc, T.TileType("f16", (64, 64))), "acc", f32.shape)
    assert not reads_elementwise(T.Transpose(acc, f32), "acc", f32.shape)
    assert not reads_elementwise(T.Elementwise("add", (acc, T.Reduce("sum", acc, 1, T.TileType(
        "f32", (64,)))), f32), "acc", f32.shape)
