"""Compiled objects kept by content (ptc.runtime.object_cache): a compile whose command,
compiler and inputs were built before is copied, not run; anything it reads that changes
makes it run again; links always run."""
from __future__ import annotations

import importlib
import subprocess
from pathlib import Path

import pytest

from ptc.runtime import prepare

B = importlib.import_module("ptc.runtime.build")
ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.nvcc


@pytest.fixture
def compiles(tmp_path, monkeypatch):
    """A fresh cache, and the outputs of the compiler commands that really ran."""
    monkeypatch.setenv("PTC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PTC_STAGE_CACHE", raising=False)
    ran = []
    real = subprocess.Popen

    def counted(cmd, *args, **kwargs):
        ran.append(cmd[cmd.index("-o") + 1] if "-o" in cmd else cmd[0])
        return real(cmd, *args, **kwargs)
    monkeypatch.setattr(B.subprocess, "Popen", counted)
    return ran


SHAPES = {"gemm": {"M": 256, "N": 256, "K": 128}, "softmax": {"M": 256, "N": 256}}


def write(folder: Path, name: str = "softmax"):
    """softmax where any kernel will do (it compiles in half gemm's time)."""
    prepared = prepare(ROOT / "samples" / f"{name}.pt", "sm80", shapes=SHAPES[name])
    B.write_build_dir(folder, kernel_source=prepared.source, signature=prepared.signature,
                      arch=prepared.device.arch, target="sm80", plan_json=prepared.plan_json)
    return prepared


def test_a_second_build_of_the_same_folder_compiles_nothing(compiles, tmp_path):
    write(tmp_path / "a")
    first = B.build(tmp_path / "a")
    assert sorted(compiles) == sorted(["kernel.o", "harness.o", "signature.o", B.LIBRARY,
                                       B.EXECUTABLE])
    compiles.clear()
    echoed = []
    again = B.build(tmp_path / "a", echo=echoed.append)
    assert sorted(compiles) == sorted([B.LIBRARY, B.EXECUTABLE])      # the links only
    assert again.ptxas.to_json() == first.ptxas.to_json()             # the report came along
    assert sum("compiled before" in line for line in echoed) == 3
    compiles.clear()
    sass = B.sass(tmp_path / "a")          # cuobjdump once; then the kept text
    assert "softmax" in sass and [Path(c).name for c in compiles] == ["cuobjdump"]
    assert B.sass(tmp_path / "a") == sass and len(compiles) == 1


def test_the_harness_is_compiled_once_for_every_kernel(compiles, tmp_path):
    """A kernel and a changed copy of it share their signature, so its tables and the
    harness; another kernel, of another signature, shares the harness and compiles its own
    tables (signature.cc)."""
    write(tmp_path / "a")
    B.build(tmp_path / "a")
    compiles.clear()
    prepared = write(tmp_path / "b")
    (tmp_path / "b" / "kernel.cu").write_text(prepared.source + "\n// another kernel\n")
    B.build(tmp_path / "b")
    assert "harness.o" not in compiles and "signature.o" not in compiles
    assert "kernel.o" in compiles
    compiles.clear()
    write(tmp_path / "c", "gemm")
    B.build(tmp_path / "c")
    assert "harness.o" not in compiles and {"kernel.o", "signature.o"} <= set(compiles)


def test_a_changed_header_compiles_again(compiles, tmp_path):
    write(tmp_path / "a")
    B.build(tmp_path / "a")
    compiles.clear()
    header = tmp_path / "a" / "mma_sync.cuh"
    header.write_text(header.read_text() + "\n// changed\n")
    B.build(tmp_path / "a")
    assert "kernel.o" in compiles and "harness.o" in compiles


def test_a_failed_compile_is_not_kept(compiles, tmp_path):
    """(A check's build: the kernel compiled alone, so that no harness compiles beside the
    failing kernel twice; whole builds go through the same cache.)"""
    write(tmp_path / "a")
    source = tmp_path / "a" / "kernel.cu"
    source.write_text(source.read_text() + "\n#error planted\n")
    for _ in range(2):
        with pytest.raises(B.BuildError, match="planted"):
            B.build(tmp_path / "a", report_only=True)
    assert compiles == ["kernel.cubin", "kernel.cubin"]


def test_a_report_only_build_compiles_the_kernel_alone(compiles, tmp_path):
    """What a check of the kernel's machine code needs: its device code (ptxas -v, the
    SASS), compiled once."""
    write(tmp_path / "a", "gemm")
    result = B.build(tmp_path / "a", report_only=True)
    assert compiles == ["kernel.cubin"]
    assert result.ptxas.kernels and result.ptxas.spills == 0
    assert not (tmp_path / "a" / B.LIBRARY).exists()
    assert "HMMA" in B.sass(tmp_path / "a")
    compiles.clear()
    again = B.build(tmp_path / "a", report_only=True)
    assert compiles == [] and again.ptxas.to_json() == result.ptxas.to_json()


@pytest.mark.hip
def test_a_hip_kernels_assembly_is_compiled_once(compiles, tmp_path):
    """HIP's resource report is the kernel's assembly (kernel.s): every sample's ISA check
    reads it, and it was compiled again in every run."""
    from ptc.runtime import BuildError
    from ptc.targets.hip.toolchain import find_compiler
    try:
        find_compiler("gfx942")
    except BuildError as exc:
        pytest.skip(f"no HIP compiler here: {exc.message}")
    prepared = prepare(ROOT / "samples" / "softmax.pt", "gfx942", shapes=SHAPES["softmax"])
    for folder in (tmp_path / "a", tmp_path / "b"):
        B.write_build_dir(folder, kernel_source=prepared.source,
                          signature=prepared.signature, arch=prepared.device.arch,
                          target="gfx942", plan_json=prepared.plan_json, backend="hip")
    def built():        # not the compiler's probes, not c++filt
        return [out for out in compiles if "/" not in out]
    first = B.build(tmp_path / "a", report_only=True)
    # (and, once per machine, the check's precompiled prelude: ptc.targets.hip.prelude)
    assert built() == ["prelude.pch.tmp", "kernel.s"]
    compiles.clear()
    again = B.build(tmp_path / "b", report_only=True)
    assert built() == []
    assert (tmp_path / "b" / "kernel.s").read_text() == (tmp_path / "a" / "kernel.s").read_text()
    assert again.resources.to_json() == first.resources.to_json()

