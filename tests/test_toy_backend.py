"""A fifth backend touches one folder, one YAML and one registry line (issue 24).

tests/toy_backend/ is written as a new target's author would write one: a package with its
Backend, renderer, toolchain and emulation, its own kernel template, and toy1.yaml. The
tests register it with the one line a new backend adds to ptc.targets.BACKENDS, and check
that everything ptc does with a target works for it -- the device schema, the search, the
lowering, explain, the renderer, the build's refusal and the CPU emulator -- with nothing
in ptc/ that names it.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from ptc import driver, targets
from ptc.cli import cli
from ptc.devices import DeviceError, load_device
from ptc.interp import random_inputs, run_kernel
from ptc.lower.printer import print_lowered
from ptc.render.emulate import build_emulated

ROOT = Path(__file__).resolve().parent.parent
FOLDER = Path(__file__).resolve().parent / "toy_backend"
YAML = FOLDER / "toy1.yaml"
SAMPLES = ROOT / "samples"
ORDERS = [dict(), dict(order="reverse"), dict(order="random", seed=5)]


@pytest.fixture
def toy(monkeypatch):
    """The one registry line of the toy backend."""
    monkeypatch.setitem(targets.BACKENDS, "toy", "toy_backend")
    return load_device(YAML)


def ptc(*args) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


def test_the_toy_is_one_folder_and_nothing_in_ptc_names_it():
    files = sorted(str(p.relative_to(FOLDER)) for p in FOLDER.rglob("*")
                   if p.is_file() and "__pycache__" not in p.parts)
    assert files == ["__init__.py", "emulation.py", "render.py", "templates/kernel.toy.j2",
                     "toolchain.py", "toy1.yaml"]
    named = [str(p.relative_to(ROOT)) for p in (ROOT / "ptc").rglob("*")
             if p.is_file() and p.suffix in (".py", ".yaml", ".j2", ".h", ".cuh")
             and re.search(r"toyco|['\"]toy['\"]|toy1", p.read_text())]
    assert named == []


def test_without_its_registry_line_the_yaml_is_refused_with_a_location():
    with pytest.raises(DeviceError) as info:
        load_device(YAML)
    text = str(info.value)
    assert "vendor" in text and "toyco" in text and "toy1.yaml:" in text


def test_its_device_reads_its_own_words_and_units(toy):
    assert (toy.backend, toy.vendor, toy.arch) == ("toy", "toyco", "toy1")
    assert toy.terms.warp == "lane group" and toy.terms.block == "team"
    assert {u.name for u in toy.units_of("copy")} == {"lsu"}
    # what its backend does not declare is refused like any other feature
    text = YAML.read_text().replace("features: [cp_async,", "features: [wgmma, cp_async,")
    bad = FOLDER.parent / "toy_bad_features.yaml"
    try:
        bad.write_text(text)
        with pytest.raises(DeviceError, match="'wgmma' is an nvidia feature, not an toyco"):
            load_device(bad)
    finally:
        bad.unlink()


def test_the_search_and_the_lowering_keep_to_its_capabilities(toy):
    kernel = driver.check_file(SAMPLES / "gemm.pt").kernels[0]
    (result,) = driver.schedule_grids(kernel, str(YAML), shapes={"M": 256, "N": 256, "K": 256})
    plan = result.best.plan
    assert plan.style in {"multistage", "sequential"}
    copies = {step.unit for _, step in plan.steps()} & {"lsu", "cp_async", "tma"}
    assert copies == {"lsu"}
    source, plans, _, device, _ = driver.render(kernel, str(YAML),
                                                shapes={"M": 256, "N": 256, "K": 256})
    assert source.startswith("// Rendered by the toy backend")       # its own template
    assert f"device {device.name}" in source
    lows = driver.lowered(kernel, str(YAML), shapes={"M": 256, "N": 256, "K": 256})[0]
    assert "mma.sync.m16n8k16" in print_lowered(lows[0])


def test_explain_and_the_build_speak_for_it(toy):
    code, text = ptc("explain", SAMPLES / "gemm.pt", "-t", YAML)
    assert code == 0 and "lane groups" in text and "scratchpad" in text
    assert "warps" not in text and "CTA" not in text
    code, text = ptc("build", SAMPLES / "gemm.pt", "-t", YAML, "-o", FOLDER.parent / "no_dir")
    assert code == 1 and "there is no compiler for toy1" in text
    assert not (FOLDER.parent / "no_dir").exists()


@pytest.mark.cxx
@pytest.mark.parametrize("sample, dims", [
    ("gemm", {"M": 72, "N": 40, "K": 56}),
    ("softmax", {"M": 33, "N": 70}),
    ("rmsnorm", {"M": 17, "N": 96}),
])
def test_its_kernels_emulate_to_the_interpreter(toy, sample, dims):
    kernel = driver.check_file(SAMPLES / f"{sample}.pt", dims).kernels[0]
    source, plans, _, device, _ = driver.render(kernel, str(YAML), shapes=dims)
    tiles = {k: v for plan in plans for k, v in plan.tiles}
    inputs = random_inputs(kernel, dims, seed=3)
    want = run_kernel(kernel, inputs, shapes=dims, tiles=tiles)
    built = build_emulated(source, backend=device)
    for config in ORDERS:
        got = built(kernel, inputs, dims, **config)
        for name, ref in want.items():
            ref, out = np.asarray(ref, np.float64), np.asarray(got[name], np.float64)
            error = np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-12)
            assert error <= 1e-2, (sample, name, config, error)


@pytest.mark.cxx
def test_an_mma_its_renderer_cannot_issue_goes_to_cuda_cores(toy, tmp_path):
    """toy1's matrix unit multiplies i8 and its features offer mma.sync's m16n8k32, but the
    toy's renderer prints only m16n8k16: the plan puts an i8 GEMM on its ALUs (the unit
    placement reads the renderer's atoms), builds, emulates to the interpreter, and
    explain says why. Before, every single-role plan put it on the tensor cores and the
    lowering refused them all: no plan fit."""
    yaml = tmp_path / "toy1_i8.yaml"
    yaml.write_text(YAML.read_text().replace("throughput: {f16: 512, bf16: 512}",
                                             "throughput: {f16: 512, bf16: 512, i8: 1024}"))
    dims = {"M": 72, "N": 40, "K": 96}
    path = ROOT / "tests" / "coverage" / "igemm.pt"
    kernel = next(k for k in driver.check_file(path, dims).kernels if k.name == "igemm_nn")
    source, plans, _, device, _ = driver.render(kernel, str(yaml), shapes=dims)
    (mma,) = [step for _, step in plans[0].steps() if step.task.startswith("mma")]
    assert mma.unit == "alu"
    inputs = random_inputs(kernel, dims, seed=3)
    tiles = {k: v for plan in plans for k, v in plan.tiles}
    want = run_kernel(kernel, inputs, shapes=dims, tiles=tiles)
    got = build_emulated(source, backend=device)(kernel, inputs, dims)
    np.testing.assert_array_equal(got["C"], want["C"])
    code, text = ptc("explain", path, "--kernel", "igemm_nn", "-t", yaml,
                     "--shape", "M=1024,N=1024,K=1024")
    assert code == 0 and "mma.sync.m16n8k32 for i8, which this renderer does not issue" in \
        " ".join(text.split())
