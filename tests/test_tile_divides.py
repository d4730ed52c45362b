"""`tile A divides B` (issue 22): a tile size a user requires to divide a dim, another tile
size or a number -- e.g. a K tile that must not straddle two quantization groups. The
checker refuses what no candidate meets, the search ranks only plans that meet it, `--tile`
is held to it, and the interpreter picks the first candidate that meets it."""
from __future__ import annotations

import numpy as np
import pytest

from ptc import driver
from ptc.diagnostics import CompileError, FlagError
from ptc.grammar import parse
from ptc.grammar.printer import print_module
from ptc.sema import check
from ptc.sema.grids import grid_kernels
from test_cli import ptc

GROUPED = """\
kernel grouped_sum(X: f32[M, K]) -> (Y: f32[M]) {
  tile BM in [16, 32], BK in [64, 32], BK divides K
  parallel i: BM of M {
    acc = zeros(f32[BM])
    for k: BK of K {
      acc += rowsum(load(X[i, k]))
    }
    store(Y[i], acc)
  }
}
"""


def kernel_of(source: str, shapes=None):
    return check(parse(source, "g.pt"), shapes or {}).kernels[0]


def test_it_parses_prints_and_checks():
    module = parse(GROUPED, "g.pt")
    assert print_module(module) == GROUPED
    (c,) = kernel_of(GROUPED).divides
    assert (c.tile, c.of, str(c)) == ("BK", "K", "BK divides K")
    assert c.holds({"BK": 32, "K": 96}) and c.holds({"BK": 64, "K": 96}) is False
    assert c.holds({"BK": 32}) is None                      # K unknown: not broken


def test_a_tile_size_or_a_number_on_the_right():
    two = GROUPED.replace("BK divides K", "BK divides BM, BM divides 64")
    k = kernel_of(two)
    assert [str(c) for c in k.divides] == ["BK divides BM", "BM divides 64"]
    with pytest.raises(CompileError, match="no candidate of BM"):
        kernel_of(two.replace("BM divides 64", "BM divides 8"))


def test_the_search_ranks_only_plans_that_meet_it():
    for size, allowed in ((96, {32}), (128, {32, 64})):
        k = kernel_of(GROUPED, {"K": size})
        result = driver.schedule(k, "sm80", shapes={"M": 256, "K": size})
        assert {dict(c.plan.tiles)["BK"] for c in result.ranked} == allowed, size


def test_tile_flags_are_held_to_it(tmp_path):
    path = tmp_path / "g.pt"
    path.write_text(GROUPED)
    k = kernel_of(GROUPED, {"K": 96})
    with pytest.raises(FlagError, match=r"BK=64 does not divide K=96: kernel grouped_sum "
                                        r"declares `BK divides K` \(line 2\)"):
        driver.schedule(k, "sm80", shapes={"M": 256, "K": 96}, tiles={"BK": 64})
    out = ptc("compile", path, "-t", "sm80", "--shape", "M=256,K=96", "--tile", "BK=64",
              "--emit", "plan", expect=2)
    assert "BK=64 does not divide K=96" in out.output and "Traceback" not in out.output
    out = ptc("check", path, "--shape", "K=100", expect=1)
    assert "g.pt:2:40: error: no candidate of BK (64, 32) divides K = 100" in out.output


def test_the_interpreter_takes_the_first_candidate_that_meets_it(tmp_path):
    path = tmp_path / "g.pt"
    path.write_text(GROUPED)
    x = np.random.default_rng(0).standard_normal((40, 96)).astype(np.float32)
    got = driver.interpret(path, {"X": x})["Y"]          # BK=64 would not divide 96
    np.testing.assert_allclose(got, x.sum(axis=1), rtol=1e-5, atol=1e-5)
    with pytest.raises(CompileError, match="no candidate of BK"):
        driver.interpret(path, {"X": x[:, :90]})


def test_each_grid_keeps_the_lines_of_its_own_tile_sizes():
    two_grids = GROUPED.replace("BK divides K", "BK divides K, BN divides N").replace(
        "kernel grouped_sum(X: f32[M, K]) -> (Y: f32[M])",
        "kernel two(X: f32[M, K], Z: f32[N]) -> (Y: f32[M], W: f32[N])").replace(
        "    store(Y[i], acc)\n  }\n}\n",
        "    store(Y[i], acc)\n  }\n  parallel j: BN of N {\n    store(W[j], load(Z[j]) * 2.0)\n"
        "  }\n}\n").replace("tile BM in [16, 32]", "tile BN in [32], BM in [16, 32]")
    first, second = grid_kernels(kernel_of(two_grids))
    assert [str(c) for c in first.divides] == ["BK divides K"]
    assert [str(c) for c in second.divides] == ["BN divides N"]


def test_a_compiled_kernel_checks_each_calls_dims(tmp_path):
    """K is a call-time dim (the search timed K=128): the build's BK becomes a check of
    every call's K."""
    from ptc.runtime import prepare
    from ptc.runtime.binding import bind_call
    from ptc.runtime.errors import ArgumentError
    from ptc.runtime.signature import Signature

    path = tmp_path / "g.pt"
    path.write_text(GROUPED)
    prepared = prepare(path, "sm80", shapes={"M": 256, "K": 128}, tiles={"BK": 64})
    sig = prepared.signature
    assert sig.multiples == (("K", "BK", 64, "BK divides K"),)
    assert Signature.from_json(sig.to_json()) == sig            # signature.json keeps it
    x = np.zeros((32, 192), np.float32)
    assert bind_call(sig, {}, (x,), {}, None).dims["K"] == 192
    with pytest.raises(ArgumentError, match=r"K=96 is not a multiple of BK=64: grouped_sum "
                                            r"declares `BK divides K`"):
        bind_call(sig, {}, (x[:, :96],), {}, None)


@pytest.mark.nvcc
def test_ptc_run_checks_the_dims_it_reads(tmp_path):
    """The harness's `ptc_run DIR` holds the dims it reads to the same lines, before it
    looks for a GPU."""
    import shutil
    import subprocess

    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    path = tmp_path / "g.pt"
    path.write_text(GROUPED)
    ptc("build", path, "-t", "sm80", "--shape", "M=256,K=128", "--tile", "BK=64",
        "-o", tmp_path / "build")
    data = tmp_path / "data"
    data.mkdir()
    np.save(data / "X.npy", np.zeros((256, 96), np.float32))
    run = subprocess.run([tmp_path / "build" / "ptc_run", data], capture_output=True, text=True)
    assert run.returncode == 1
    assert ("dim K = 96 is not a multiple of 64: the kernel declares `BK divides K` with "
            "BK=64 in this build") in run.stderr


@pytest.mark.cxx
@pytest.mark.parametrize("target", ["sm80", "gfx942"])
def test_the_kernel_abi_refuses_dims_the_build_tile_does_not_divide(target, tmp_path):
    """`ptc_launch` (the C ABI every other caller goes through) returns the backend's
    invalid-value code for a dim the built BK does not divide, before any block runs, and
    launches the same kernel when it does (on the emulator)."""
    from ptc.render.emulate import EmulationError, build_emulated
    from ptc.runtime import prepare

    path = tmp_path / "g.pt"
    path.write_text(GROUPED)
    prepared = prepare(path, target, shapes={"M": 256, "K": 128}, tiles={"BK": 64})
    assert "% 64 != 0) return (int)" in prepared.source
    kernel = build_emulated(prepared.source, backend=prepared.device)
    x = np.arange(32 * 192, dtype=np.float32).reshape(32, 192) % 7
    y = np.zeros(32, np.float32)
    kernel.launch([x, y], dims=[32, 192])
    np.testing.assert_allclose(y, x.sum(axis=1), rtol=1e-6)
    bad = np.ascontiguousarray(x[:, :96])
    with pytest.raises(EmulationError, match=r"failed \(code 1\)"):
        kernel.launch([bad, np.zeros(32, np.float32)], dims=[32, 96])
