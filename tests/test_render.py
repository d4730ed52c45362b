"""Renderer boundaries: what it refuses with a reason, and kernels outside the samples."""
import importlib
import json
from dataclasses import replace
from pathlib import Path

import pytest

from ptc.devices import get_device
from ptc.driver import check_file, stask_graph
from ptc.render import RenderError, render_kernel
from ptc.sched.construct import Choice, construct
from ptc.sched.plan import LoopBlock, Step
from ptc.sched.verify import problems

ROOT = Path(__file__).resolve().parent.parent


def gemm_plan(stages=3):
    k = check_file(ROOT / "samples" / "gemm.pt").kernels[0]
    g = stask_graph(k, {"BM": 64, "BN": 64, "BK": 32})
    device = get_device("sm80")
    return k, g, device, construct(g, device, Choice("multistage", stages, warps=4))


def with_offsets(plan, offsets):
    def fix(items):
        return tuple(replace(i, body=fix(i.body)) if isinstance(i, LoopBlock)
                     else replace(i, offset=offsets.get(i.task, i.offset)) for i in items)
    role = plan.roles[0]
    return replace(plan, roles=(replace(role, body=fix(role.body)),))


def test_a_copy_loaded_in_its_own_iteration_fills_its_slot_right_before_its_use():
    k, g, device, plan = gemm_plan()
    inline = with_offsets(plan, {"load_A": 0})
    assert "load_A: A[64x32] -> A_smem\n" in render_kernel(k, inline, g, device)


def test_verifier_checks_the_buffer_fields_the_renderer_uses():
    k, g, device, plan = gemm_plan()
    b = plan.buffers[0]
    for broken, words in ((replace(b, dtype="f32"), "holds f32[64, 32]"),
                          (replace(b, shape=(32, 64)), "holds f16[32, 64]"),
                          (replace(b, stages=0), "at least 1 stage"),
                          (replace(b, layout="zz"), "layout 'zz'")):
        bad = replace(plan, buffers=(broken,) + plan.buffers[1:])
        assert any(words in p for p in problems(bad, g, device)), words
    assert any("style 'bogus'" in p for p in problems(replace(plan, style="bogus"), g, device))
    wrong_grid = replace(plan, launch=replace(plan.launch, grid=("1", "1")))
    assert any("launch.grid" in p for p in problems(wrong_grid, g, device))
    assert any("not a loop" in p for p in problems(replace(plan, pipelined="q"), g, device))


BOOL_KERNEL = """
kernel positive(X: f32[M, N]) -> (Z: bool[M, N], C: i32[M]) {
  dims M = 1000, N = 32
  tile BM in [64]
  parallel i: BM of M {
    x = load(X[i, :])
    store(Z[i, :], x > 0.0)
    atomic_add(C[i], sum(where(x > 0.0, 1, 0), axis=1))
  }
}
"""


@pytest.mark.nvcc
def test_bool_and_i32_outputs_build_with_nvcc(tmp_path):
    from ptc.runtime import prepare
    build = importlib.import_module("ptc.runtime.build")
    path = tmp_path / "positive.pt"
    path.write_text(BOOL_KERNEL)
    prepared = prepare(path, "sm80")
    folder = tmp_path / "build"
    build.write_build_dir(folder, kernel_source=prepared.source, signature=prepared.signature,
                          arch=prepared.device.arch, target="sm80", plan_json=prepared.plan_json)
    result = build.build(folder, prepared.device.arch)
    assert result.ptxas.spills == 0


@pytest.mark.cxx
def test_bool_and_i32_outputs_match_the_interpreter_on_the_emulator(tmp_path):
    import numpy as np
    from ptc.interp import run_kernel
    from ptc.render.emulate import run_emulated
    from ptc.runtime import prepare

    path = tmp_path / "positive.pt"
    path.write_text(BOOL_KERNEL)
    prepared = prepare(path, "sm80")
    x = np.random.default_rng(0).standard_normal((100, 32)).astype(np.float32)
    want = run_kernel(prepared.kernel, {"X": x}, shapes={"M": 100}, tiles={"BM": 64})
    got = run_emulated(prepared.source, prepared.kernel, {"X": x}, {"M": 100, "N": 32}, {})
    assert np.array_equal(got["Z"], want["Z"]) and np.array_equal(got["C"], want["C"])


@pytest.mark.cxx
@pytest.mark.parametrize("name", ["flash_attn", "flash_attn_causal"])
def test_head_dim_256_attention_matches_the_interpreter_on_the_emulator(name):
    import numpy as np
    import ml_dtypes
    from ptc.interp import run_kernel
    from ptc.render.emulate import run_emulated
    from ptc.runtime import prepare

    prepared = prepare(ROOT / "samples" / f"{name}.pt", "sm80", shapes={"D": 256})
    rng = np.random.default_rng(1)
    seq = {"S": 45} if name == "flash_attn_causal" else {"S": 45, "T": 70}
    dims = {"B": 1, "H": 1, "D": 256, **seq}
    inputs = {}
    for p in prepared.kernel.inputs:
        shape = p.shape_in(dims)
        inputs[p.name] = rng.standard_normal(shape).astype(np.float32).astype(ml_dtypes.bfloat16)
    want = run_kernel(prepared.kernel, inputs, shapes=dims, tiles=prepared.tiles)
    got = run_emulated(prepared.source, prepared.kernel, inputs, dims, {})
    g, w = got["O"].astype(np.float64), want["O"].astype(np.float64)
    assert np.linalg.norm(g - w) / np.linalg.norm(w) < 1e-2
