"""The runtime (ptc.runtime, ptc build / bench): build directories, nvcc, the ptxas report,
the harness's C ABI and `ptc_run`, and CompiledKernel's argument handling.

Without a GPU, three builds stand in for one:
- nvcc builds tests/runtime/axpy.cu (a hand-written kernel following the kernel ABI) with
  the rendered harness for sm_80: it must compile, export the ABI and report resources;
- g++ builds the same harness against tests/runtime/fake_cuda (a CUDA runtime on host
  memory) with axpy_host.cpp: this runs everything the harness and CompiledKernel do --
  copies, launches, poisoning, out= arrays, device arrays, timing, ptc_run on .npy files;
- tests marked `gpu` (pytest -m gpu) build with nvcc and run on the real device.
"""
from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner

import formulas as F
import ptc.runtime as R
from ptc import driver
from ptc.cli import cli
from ptc.interp import run_kernel
from ptc.runtime.library import ABI_SYMBOLS
from ptc.targets.cuda.driver import find_gpus
from ptc.targets.cuda.ptxas import parse_ptxas
from ptc.targets.cuda.toolchain import find_cuobjdump
from ptc.runtime.signature import Signature, signature_of

B = importlib.import_module("ptc.runtime.build")   # the module (ptc.runtime.build is the function)
HERE = Path(__file__).resolve().parent / "runtime"
SAMPLES = Path(__file__).resolve().parent.parent / "samples"
AXPY_PT = HERE / "axpy.pt"
AXPY_CU = HERE / "axpy.cu"
AXPY_HOST = HERE / "axpy_host.cpp"
FAKE_CUDA = HERE / "fake_cuda"

needs_nvcc = pytest.mark.nvcc       # conftest: skipped without nvcc, failed under CI
needs_gxx = pytest.mark.cxx


def has_gpu() -> bool:
    try:
        find_gpus()
        return True
    except R.NoDevice:
        return False


def ptc(*args, env=None):
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False, env=env)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def axpy():
    return driver.check_file(AXPY_PT).kernels[0]


@pytest.fixture(scope="module")
def sig(axpy) -> Signature:
    return signature_of(axpy)


def inputs(m=50, n=40, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, n), dtype=np.float32)
    b = rng.standard_normal((m, n), dtype=np.float32).astype(ml_dtypes.bfloat16)
    return a, b


def reference(kernel, a, b, alpha):
    return run_kernel(kernel, {"A": a, "B": b, "alpha": np.float32(alpha)})


def close(got, want, tol=1e-5):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return np.linalg.norm(got - want) <= tol * max(np.linalg.norm(want), 1e-30)


# ---- the build directory ---------------------------------------------------------------
def test_a_build_directory_has_everything_to_rebuild_and_run(tmp_path, sig):
    folder = R.write_build_dir(tmp_path / "axpy", kernel_source=AXPY_CU.read_text(),
                               signature=sig, arch="sm_80", target="sm80",
                               plan_json='{"kernel": "axpy"}')
    names = {p.name for p in folder.iterdir()}
    assert {"kernel.cu", "harness.cu", "signature.cc", "npy.h", "ptc_signature.h", "plan.json",
            "signature.json", "manifest.json", "build.sh", "Makefile"} <= names
    assert {h.name for h in B.headers()} <= names            # every template header
    assert (folder / "kernel.cu").read_text() == AXPY_CU.read_text()
    assert Signature.from_json((folder / "signature.json").read_text()) == sig
    assert json.loads((folder / "manifest.json").read_text())["arch"] == "sm_80"
    script = (folder / "build.sh").read_text()
    assert os.access(folder / "build.sh", os.X_OK)
    assert ("nvcc -O3 -std=c++17 -gencode 'arch=compute_80,code=[sm_80,compute_80]' -lineinfo "
            "-Xptxas -v -Xcompiler -fPIC "
            "-c kernel.cu -o kernel.o") in script
    assert "-shared kernel.o harness.o signature.o -o libptc_kernel.so" in script
    assert "kernel.o harness.o signature.o -o ptc_run" in script
    assert "-x c++ -Xcompiler -fPIC -c signature.cc -o signature.o" in script
    assert "libptc_kernel.so: kernel.o harness.o signature.o" in (folder / "Makefile").read_text()
    # the signature's tables are in signature.cc; the harness is the same for every kernel
    tables = (folder / "signature.cc").read_text()
    assert str(sig) in tables and '{"S", F32, 1, kDim3, kFixed3, true}' in tables
    assert "const int kDim3[] = { 0 };" in tables
    harness = (folder / "harness.cu").read_text()
    assert str(sig) not in harness and "kTensors[] =" not in harness
    other = R.write_build_dir(tmp_path / "other", kernel_source="", arch="sm_80",
                              signature=signature_of(driver.check_file(SAMPLES / "gemm.pt")
                                                     .kernels[0]))
    assert (other / "harness.cu").read_text() == harness
    assert sorted(p.name for p in tmp_path.iterdir()) == ["axpy", "other"]  # no temporary left


def test_signature_order_and_atomic_outputs(sig):
    assert [t.name for t in sig.tensors] == ["A", "B", "C", "S"]
    assert [s.name for s in sig.scalars] == ["alpha"]
    assert [d.name for d in sig.dims] == ["M", "N"]
    assert {t.name for t in sig.outputs if t.atomic} == {"S"}


@needs_gxx
@pytest.mark.parametrize("sample", sorted(p.name for p in SAMPLES.glob("*.pt")))
def test_the_signature_of_every_sample_compiles(tmp_path, sample):
    """signature.cc, against the declarations the harness reads (ptc_signature.h)."""
    kernel = driver.check_file(SAMPLES / sample).kernels[0]
    folder = R.write_build_dir(tmp_path / "k", kernel_source="", signature=signature_of(kernel),
                               arch="sm_80")
    subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-Wall", "-Wextra", "-Werror",
                    "signature.cc"], cwd=folder, check=True)


@needs_gxx
def test_the_harness_compiles_without_warnings(tmp_path, sig):
    """One text for every kernel (test_a_build_directory_has_everything_to_rebuild_and_run)."""
    folder = R.write_build_dir(tmp_path / "k", kernel_source="", signature=sig, arch="sm_80")
    subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-Wall", "-Wextra", "-Werror",
                    "-I", str(FAKE_CUDA), "-x", "c++", "harness.cu"], cwd=folder, check=True)


def test_a_failed_write_leaves_nothing_half_written(tmp_path, sig, monkeypatch):
    def broken(folder, backend):
        (folder / "partial.cuh").write_text("half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(B, "_copy_headers", broken)
    with pytest.raises(R.BuildError, match="cannot write .*No space left"):
        R.write_build_dir(tmp_path / "new", kernel_source="x", signature=sig, arch="sm_80")
    assert list(tmp_path.iterdir()) == []


def test_a_failed_rewrite_keeps_the_old_directory(tmp_path, sig, monkeypatch):
    folder = R.write_build_dir(tmp_path / "k", kernel_source="// one", signature=sig,
                               arch="sm_80")
    monkeypatch.setattr(B, "_copy_headers", lambda folder, backend: (_ for _ in ()).throw(OSError("boom")))
    with pytest.raises(R.BuildError):
        R.write_build_dir(folder, kernel_source="// two", signature=sig, arch="sm_80")
    assert (folder / "kernel.cu").read_text() == "// one"
    assert [p.name for p in tmp_path.iterdir()] == ["k"]
    monkeypatch.undo()
    R.write_build_dir(folder, kernel_source="// two", signature=sig, arch="sm_80")
    assert (folder / "kernel.cu").read_text() == "// two"
    assert [p.name for p in tmp_path.iterdir()] == ["k"]


def test_a_directory_that_is_not_a_build_directory_is_never_replaced(tmp_path, sig):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(R.BuildError, match="not a ptc build directory"):
        R.write_build_dir(tmp_path / "mine", kernel_source="x", signature=sig, arch="sm_80")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


def test_ptc_compile_writes_the_directory(tmp_path):
    out = tmp_path / "axpy"
    code, stdout, stderr = ptc("compile", AXPY_PT, "--target", "sm80", "-o", out)
    assert code == 0, stderr
    assert f"wrote {out}" in stdout
    assert B.is_build_dir(out) and "ptc_launch" in (out / "kernel.cu").read_text()
    assert json.loads((out / "plan.json").read_text())["kernel"] == "axpy"
    assert not (out / "libptc_kernel.so").exists()                 # no nvcc here
    code, _, stderr = ptc("compile", AXPY_PT, "--emit", "ast", "-o", out)
    assert code == 2 and "not both" in stderr
    code, _, stderr = ptc("compile", AXPY_PT, "-o", out)
    assert code == 2 and "--target" in stderr
    code, _, stderr = ptc("compile", AXPY_PT)
    assert code == 2 and "give --emit STAGE" in stderr


# ---- nvcc ------------------------------------------------------------------------------
def test_without_nvcc_build_says_how_to_get_it(tmp_path, sig, monkeypatch):
    folder = R.write_build_dir(tmp_path / "k", kernel_source="x", signature=sig, arch="sm_80")
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    with pytest.raises(R.BuildError, match="nvcc not found") as info:
        R.build(folder)
    assert "PATH" in info.value.hint


def test_without_nvcc_the_cli_exits_1_and_writes_nothing(tmp_path, monkeypatch):
    (tmp_path / "bin").mkdir()
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    out = tmp_path / "out"
    code, stdout, stderr = ptc("build", AXPY_PT, "-t", "sm80", "--kernel-source", AXPY_CU,
                               "-o", out, env={"PATH": str(tmp_path / "bin")})
    assert code == 1
    assert stderr.startswith("ptc: error: nvcc not found")
    assert "hint: install the CUDA toolkit" in stderr and "Traceback" not in stderr
    assert not out.exists()


@needs_nvcc
def test_a_broken_kernel_shows_nvcc_errors_and_keeps_the_files(tmp_path):
    broken = tmp_path / "broken.cu"
    broken.write_text(AXPY_CU.read_text().replace("float c = A[idx]", "float c = A[idx] +* oops"))
    out = tmp_path / "out"
    code, _, stderr = ptc("build", AXPY_PT, "-t", "sm80", "--kernel-source", broken, "-o", out)
    assert code == 1
    assert f"nvcc failed building {out}" in stderr
    assert "kernel.cu(" in stderr and "error" in stderr          # nvcc's own message
    assert "kept in" in stderr and "Traceback" not in stderr
    assert (out / "kernel.cu").is_file() and (out / "nvcc.log").is_file()
    assert not (out / "libptc_kernel.so").exists()


PTXAS_SM80 = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z12spill_kernelPfi' for 'sm_80'
ptxas info    : Function properties for _Z12spill_kernelPfi
    36824 bytes stack frame, 37076 bytes spill stores, 174564 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers, 36824 bytes cumulative stack size, 364 bytes cmem[0]
ptxas info    : Compile time = 144922.000 ms
ptxas info    : Compiling entry function '_Z11smem_kernelPf' for 'sm_80'
ptxas info    : Function properties for _Z11smem_kernelPf
    256 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 256 bytes cumulative stack size, 4096 bytes smem, 360 bytes cmem[0]
ptxas info    : Compile time = 11.143 ms
ptxas info    : Function properties for _Z6helperPfi
    0 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
"""

PTXAS_SM90 = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'ptc_gemm_kernel' for 'sm_90a'
ptxas info    : Function properties for ptc_gemm_kernel
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 168 registers, used 1 barriers, 8 bytes smem
ptxas info    : Compile time = 6.280 ms"""


def test_the_ptxas_report_is_parsed():
    report = parse_ptxas(PTXAS_SM80)
    spill, smem = report.kernels
    assert (spill.name, spill.arch, spill.registers, spill.spill_stores, spill.spill_loads,
            spill.stack_bytes) == ("_Z12spill_kernelPfi", "sm_80", 32, 37076, 174564, 36824)
    assert (smem.registers, smem.barriers, smem.smem_bytes, smem.cmem_bytes, smem.spills) == \
        (40, 1, 4096, 360, 0)
    (helper,) = report.functions
    assert helper.name == "_Z6helperPfi" and not helper.is_entry and helper.spills == 16
    assert report.spills == 37076 + 174564 + 16
    if shutil.which("c++filt"):
        assert smem.display_name == "smem_kernel(float*)"
    (gemm,) = parse_ptxas(PTXAS_SM90).kernels
    assert (gemm.name, gemm.arch, gemm.registers, gemm.smem_bytes, gemm.cmem_bytes,
            gemm.spills) == ("ptc_gemm_kernel", "sm_90a", 168, 8, 0, 0)
    assert parse_ptxas(PTXAS_SM90).to_json()["kernels"][0]["registers"] == 168


@pytest.fixture(scope="module")
def nvcc_build(tmp_path_factory, sig):
    """axpy.cu + the harness, built by nvcc for sm_80 (once for the module)."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    folder = tmp_path_factory.mktemp("nvcc") / "axpy"
    R.write_build_dir(folder, kernel_source=AXPY_CU.read_text(), signature=sig, arch="sm_80",
                      target="sm80")
    return R.build(folder)


def test_nvcc_builds_the_harness_and_exports_the_abi(nvcc_build):
    folder = nvcc_build.directory
    assert nvcc_build.library.is_file() and os.access(nvcc_build.executable, os.X_OK)
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(nvcc_build.library)],
                             capture_output=True, text=True, check=True).stdout
    exported = {line.split()[-1] for line in symbols.splitlines() if " T " in line}
    assert set(ABI_SYMBOLS) <= exported
    (k,) = nvcc_build.ptxas.kernels
    assert k.arch == "sm_80" and k.registers > 0 and k.spills == 0
    info = json.loads((folder / "build.json").read_text())
    assert info["ptxas"]["kernels"][0]["registers"] == k.registers
    assert "ptxas info" in (folder / "ptxas.txt").read_text()
    usage = subprocess.run([str(nvcc_build.executable)], capture_output=True, text=True)
    assert usage.returncode == 2 and "usage: ptc_run DIR" in usage.stderr


@needs_nvcc
def test_the_sass_of_the_build(nvcc_build):
    try:
        find_cuobjdump()
    except R.BuildError:
        pytest.skip("no cuobjdump (pip install nvidia-cuda-cuobjdump)")
    text = R.sass(nvcc_build.directory)
    assert "axpy_kernel" in text and "RED" in text          # the atomic add


def test_without_a_gpu_a_call_says_no_cuda_device(nvcc_build, sig):
    if has_gpu():
        pytest.skip("there is a GPU")
    kernel = R.CompiledKernel(nvcc_build.directory, sig, arch="sm_80")
    a, b = inputs()
    with pytest.raises(R.NoDevice, match="^no CUDA device: "):
        kernel(a, b, 2.0)
    data = nvcc_build.directory / "data"
    data.mkdir()
    np.save(data / "A.npy", a)
    np.save(data / "B.npy", b)
    (data / "scalars.txt").write_text("alpha 2\n")
    run = subprocess.run([str(nvcc_build.executable), str(data)], capture_output=True, text=True)
    assert run.returncode == 1 and "ptc_run: error: no CUDA device" in run.stderr


@needs_nvcc
def test_ptc_build_prints_the_resources(tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    out = tmp_path / "b"
    code, stdout, stderr = ptc("build", AXPY_PT, "-t", "sm80", "--kernel-source", AXPY_CU,
                               "-o", out)
    assert code == 0, stderr
    assert "registers" in stdout and "spill stores" in stdout and "axpy_kernel" in stdout
    assert f"built {out}" in stdout
    code, stdout, _ = ptc("build", AXPY_PT, "-t", "sm80", "--kernel-source", AXPY_CU,
                          "-o", out, "--json")
    assert code == 0 and json.loads(stdout)["ptxas"]["spills"] == 0


@needs_nvcc
def test_a_rendered_sample_builds_with_tensor_cores(tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    out = tmp_path / "gemm"
    code, stdout, stderr = ptc("build", SAMPLES / "gemm.pt", "-t", "sm80", "-o", out)
    if code == 1 and "render" in stderr:
        pytest.skip(f"the renderer does not take this yet: {stderr}")
    assert code == 0, stderr
    assert json.loads((out / "build.json").read_text())["ptxas"]["spills"] == 0
    try:
        assert "HMMA" in R.sass(out)
    except R.BuildError:
        pass                                   # no cuobjdump here


@needs_nvcc
def test_compile_caches_by_content(tmp_path, monkeypatch):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    monkeypatch.setenv("PTC_CACHE_DIR", str(tmp_path / "cache"))
    first = R.compile(AXPY_PT, "sm80", kernel_source=AXPY_CU.read_text())
    assert first.directory.parent == tmp_path / "cache" and first.build.ptxas.kernels
    monkeypatch.setattr(R, "build", lambda *a, **k: pytest.fail("rebuilt a cached kernel"))
    again = R.compile(AXPY_PT, "sm80", kernel_source=AXPY_CU.read_text())
    assert again.directory == first.directory
    loaded = R.load(first.directory)
    assert loaded.signature == first.signature and loaded.arch == "sm_80"


def test_ptc_bench_without_a_gpu_exits_1():
    if has_gpu():
        pytest.skip("there is a GPU")
    code, _, stderr = ptc("bench", AXPY_PT, "-t", "sm80", "--kernel-source", AXPY_CU)
    assert code == 1
    assert stderr.startswith("ptc: error: no CUDA GPU found (")
    assert "Traceback" not in stderr


# ---- arguments, checked before anything touches CUDA ------------------------------------------
@pytest.fixture
def unbuilt(tmp_path, sig):
    """A CompiledKernel whose directory has no library: binding must not need one."""
    return R.CompiledKernel(tmp_path, sig, arch="sm_80")


@pytest.mark.parametrize("call, message", [
    (lambda k, a, b: k(a, b), "missing input alpha: f32"),
    (lambda k, a, b: k(a, b, 1.0, 2.0), "takes 3 inputs .* but 4 were given"),
    (lambda k, a, b: k(a, b, 1.0, D=a), "has no input D"),
    (lambda k, a, b: k(a, b, 1.0, C=a), "C is an output of axpy, not an input"),
    (lambda k, a, b: k(a, b, alpha=1.0, A=a), "A is given twice"),
    (lambda k, a, b: k(a, b.astype(np.float16), 1.0), r"input B \(B: bf16\[M, N\]\) is bf16, "
                                                      "but the array given holds float16"),
    (lambda k, a, b: k(a.astype(np.float64), b, 1.0), "is f32, but the array given holds float64"),
    (lambda k, a, b: k(a[0], b, 1.0), r"has 2 dims, but the array given has shape \(40,\)"),
    (lambda k, a, b: k(a, b[:, :30], 1.0), "so N = 30, but N = 40 from A"),
    (lambda k, a, b: k(a, b, "x"), "scalar alpha: f32 needs a number"),
    (lambda k, a, b: k(a, b, True), "scalar alpha: f32 needs a number"),
    (lambda k, a, b: k(a, b, np.ones(2)), "needs a single value"),
    (lambda k, a, b: k(a, b, 1.0, out={"D": a}), "has no output D"),
    (lambda k, a, b: k(a, b, 1.0, out=a), "has 2 outputs; pass out= as a dict"),
    (lambda k, a, b: k(a, b, 1.0, out={"C": np.zeros((50, 41), np.float32)}),
     "so N = 41, but N = 40 from A"),
    (lambda k, a, b: k(a, b, 1.0, out={"S": np.zeros(50, np.float16)}), "is f32, but"),
    (lambda k, a, b: k(a[:0], b[:0], 1.0), "dim M must be positive"),
    (lambda k, a, b: k.time(a, b, 1.0, iters=0), "iters >= 1"),
])
def test_wrong_arguments_are_reported_before_launch(unbuilt, call, message):
    a, b = inputs()
    with pytest.raises(R.ArgumentError, match=message):
        call(unbuilt, a, b)


def test_binding_fills_dims_and_converts(unbuilt):
    a, b = inputs()
    call = unbuilt.bind(a, b.astype(np.float32), np.float64(0.1))    # f32 for bf16 is rounded
    assert call.dims == {"M": 50, "N": 40} and not call.on_device
    assert call.scalars == [float(np.float32(0.1))]
    assert call.tensors[1].host.dtype == ml_dtypes.bfloat16
    assert [t.shape for t in call.tensors] == [(50, 40), (50, 40), (50, 40), (50,)]
    listed = unbuilt.bind([[1.0, 2.0]], [[3.0, 4.0]], alpha=1)      # lists are converted
    assert listed.tensors[0].host.dtype == np.float32 and listed.dims == {"M": 1, "N": 2}


def test_device_arrays_are_checked_too(unbuilt):
    a, b = inputs()
    with pytest.raises(R.ArgumentError, match="not C-contiguous"):
        unbuilt.bind(FakeCAI(np.asfortranarray(a)), b, 1.0)
    with pytest.raises(R.ArgumentError, match="is f32, but the device array given holds f16"):
        unbuilt.bind(FakeCAI(a.astype(np.float16)), b, 1.0)
    with pytest.raises(R.ArgumentError, match="not 16-byte aligned"):
        unbuilt.bind(FakeCAI(np.zeros(50 * 40 + 1, np.float32)[1:].reshape(50, 40)), b, 1.0)
    call = unbuilt.bind(FakeCAI(a), b, 1.0)
    assert call.on_device and call.tensors[0].device.ptr == a.ctypes.data


# ---- the harness, run on the fake CUDA runtime -------------------------------------------
class FakeCAI:
    """A host array posing as a device array (the fake runtime's device is host memory)."""

    def __init__(self, array: np.ndarray, dtype=None):
        self.array = array
        if dtype is not None:      # what the framework calls its elements (torch.bfloat16)
            self.dtype = dtype

    @property
    def __cuda_array_interface__(self):
        a = self.array
        return {"shape": a.shape, "typestr": a.dtype.str, "data": (a.ctypes.data, False),
                "strides": None if a.flags.c_contiguous else a.strides, "version": 3}


class FakeDLPack:
    """A host array posing as a CUDA DLPack producer."""

    def __init__(self, array: np.ndarray):
        self.array = array

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__()


@pytest.fixture(scope="module")
def fake_build(tmp_path_factory, sig):
    """The harness and axpy_host.cpp, built by g++ against the fake CUDA runtime."""
    if shutil.which("g++") is None:
        pytest.skip("g++ is not on PATH")
    folder = tmp_path_factory.mktemp("fake") / "axpy"
    R.write_build_dir(folder, kernel_source=AXPY_HOST.read_text(), signature=sig,
                      arch="sm_80", target="sm80")
    flags = ["g++", "-std=c++17", "-O1", "-Wall", "-Werror", "-I", str(FAKE_CUDA), "-I", ".",
             "-x", "c++", "kernel.cu", "-x", "c++", "harness.cu", "signature.cc"]
    for extra in (["-fPIC", "-shared", "-o", "libptc_kernel.so"], ["-o", "ptc_run"]):
        subprocess.run(flags + extra, cwd=folder, check=True)
    return folder


@pytest.fixture
def fake(fake_build, sig):
    return R.CompiledKernel(fake_build, sig, arch="sm_80")


def test_a_call_copies_launches_and_returns_numpy(fake, axpy):
    a, b = inputs()
    out = fake(a, b, 1.5)
    want = reference(axpy, a, b, 1.5)
    assert set(out) == {"C", "S"}
    assert out["C"].dtype == np.float32 and out["C"].shape == (50, 40)
    assert close(out["C"], want["C"]) and close(out["S"], want["S"])
    again = fake(A=a, B=b.astype(np.float32), alpha=1.5)     # outputs are zeroed every time
    assert close(again["S"], want["S"])


def test_poisoned_and_given_outputs(fake, axpy):
    a, b = inputs(7, 9)
    want = reference(axpy, a, b, -2.0)
    out = fake.run(fake.bind(a, b, -2.0), poison=("C",))
    assert close(out["C"], want["C"]) and close(out["S"], want["S"])
    c, s = np.full((7, 9), np.nan, np.float32), np.full(7, 5.0, np.float32)
    out = fake(a, b, -2.0, out={"C": c, "S": s})
    assert out["C"] is c and out["S"] is s
    assert close(c, want["C"]) and close(s, want["S"])        # S started at zero


def test_device_arrays_are_used_in_place(fake, axpy):
    a, b = inputs(16, 8)
    want = reference(axpy, a, b, 0.5)
    c = np.zeros((16, 8), np.float32)
    out = fake(FakeCAI(a), b, 0.5, out={"C": FakeCAI(c)})
    assert isinstance(out["C"], FakeCAI) and close(c, want["C"])
    s = out["S"]                                     # allocated by the runtime
    assert isinstance(s, R.DeviceArray) and s.shape == (16,) and s.dtype == "f32"
    assert s.__cuda_array_interface__["typestr"] == "<f4"
    assert close(s.numpy(), want["S"]) and close(np.asarray(s), want["S"])
    out = fake(FakeDLPack(a), b, 0.5)
    assert close(out["C"].numpy(), want["C"])


def test_bf16_device_arrays_through_the_array_interface(fake, axpy):
    """torch exports bf16 as untyped '<V2' words: bf16 where the array's dtype says so, an
    error where nothing does (never taken as some other 2-byte type)."""
    a, b = inputs(16, 8)
    want = reference(axpy, a, b, 0.5)
    b16 = b                       # already bf16
    assert FakeCAI(b16).__cuda_array_interface__["typestr"] == "<V2"
    out = fake(FakeCAI(a), FakeCAI(b16, dtype="torch.bfloat16"), 0.5)
    assert close(out["C"].numpy(), want["C"]) and close(out["S"].numpy(), want["S"])
    with pytest.raises(R.ArgumentError, match="input B .*untyped 2-byte elements"):
        fake(a, FakeCAI(b16), 0.5)


def test_timing(fake):
    a, b = inputs()
    t = fake.time(a, b, 1.0, warmup=2, iters=7)
    assert len(t.ms) == 7 and t.warmup == 2 and all(ms >= 0 for ms in t.ms)
    assert t.min_ms <= t.median_ms


def test_timing_with_the_l2_flushed(fake, monkeypatch):
    """flush_bytes: one timed launch per call, each after a scratch buffer is written."""
    from ptc.runtime.library import HarnessLibrary

    writes = []
    memset = HarnessLibrary.memset
    monkeypatch.setattr(HarnessLibrary, "memset", lambda self, ptr, value, n: (
        writes.append(n), memset(self, ptr, value, n))[1])
    a, b = inputs()
    t = fake.time(a, b, 1.0, warmup=2, iters=5, flush_bytes=1 << 20)
    assert len(t.ms) == 5 and t.flushed and not fake.time(a, b, 1.0, iters=1).flushed
    assert writes.count(1 << 20) == 5
    with pytest.raises(R.ArgumentError, match="flush_bytes"):
        fake.time(a, b, 1.0, flush_bytes=-1)


def test_no_device_from_the_runtime(fake_build, sig, monkeypatch):
    monkeypatch.setenv("PTC_FAKE_CUDA_DEVICES", "0")
    kernel = R.CompiledKernel(fake_build, sig, arch="sm_80")
    a, b = inputs()
    with pytest.raises(R.NoDevice, match="^no CUDA device: "):
        kernel(a, b, 1.0)


def test_a_library_for_another_signature_is_refused(fake_build, sig):
    other = Signature("axpy", sig.inputs[:2], sig.outputs, sig.dims)
    kernel = R.CompiledKernel(fake_build, other, arch="sm_80")
    a, b = inputs()
    with pytest.raises(R.BuildError, match="was built for axpy"):
        kernel(a, b)


def run_exe(folder, data, *args, env=None):
    return subprocess.run([str(folder / "ptc_run"), str(data), *args], capture_output=True,
                          text=True, env={**os.environ, **(env or {})})


def test_ptc_run_reads_npy_and_writes_outputs(fake_build, axpy, tmp_path):
    a, b = inputs(12, 20)
    want = reference(axpy, a, b, 3.0)
    np.save(tmp_path / "A.npy", a)
    np.save(tmp_path / "B.npy", b.view(np.uint16))             # bf16 as <u2 bits
    (tmp_path / "scalars.txt").write_text("# alpha\nalpha 3.0\n")
    run = run_exe(fake_build, tmp_path, "--warmup", "1", "--iters", "4")
    assert run.returncode == 0, run.stderr
    assert "axpy:" in run.stdout and "median of 4 runs" in run.stdout
    c, s = np.load(tmp_path / "C.npy"), np.load(tmp_path / "S.npy")
    assert c.dtype == np.float32 and c.shape == (12, 20) and s.shape == (12,)
    assert close(c, want["C"]) and close(s, want["S"])
    timings = json.loads((tmp_path / "timings.json").read_text())
    assert timings["kernel"] == "axpy" and len(timings["ms"]) == 4 and timings["warmup"] == 1
    np.save(tmp_path / "B.npy", b.astype(np.float32))          # bf16 as f32, rounded
    np.save(tmp_path / "B.npy", b)                             # ml_dtypes' own <V2
    assert run_exe(fake_build, tmp_path, "--iters", "0").returncode == 0
    assert close(np.load(tmp_path / "C.npy"), want["C"])


@pytest.mark.parametrize("setup, message", [
    (lambda d, a, b: (d / "scalars.txt").unlink(), "no value for scalar alpha"),
    (lambda d, a, b: np.save(d / "B.npy", b.astype(np.float16)), "holds '<f2', but B is bf16"),
    (lambda d, a, b: np.save(d / "B.npy", np.asarray(b)[:, :3]), r"so N = 3, but N = 20 from A\.npy"),
    (lambda d, a, b: (d / "dims.txt").write_text("N 21\n"), "so N = 20, but N = 21 from dims.txt"),
    (lambda d, a, b: (d / "dims.txt").write_text("Q 1\n"), "kernel axpy has no Q"),
    (lambda d, a, b: (d / "A.npy").write_bytes(b"not npy"), "A.npy: not a .npy file"),
    (lambda d, a, b: np.save(d / "A.npy", np.asfortranarray(np.ones((12, 20), np.float32))),
     "Fortran order"),
    (lambda d, a, b: (d / "A.npy").unlink(), "A.npy: cannot open it"),
])
def test_ptc_run_errors(fake_build, tmp_path, setup, message):
    a, b = inputs(12, 20)
    np.save(tmp_path / "A.npy", a)
    np.save(tmp_path / "B.npy", b)
    (tmp_path / "scalars.txt").write_text("alpha 1\n")
    setup(tmp_path, a, b)
    run = run_exe(fake_build, tmp_path)
    assert run.returncode == 1
    assert run.stderr.startswith("ptc_run: error: ")
    assert re.search(message, run.stderr), run.stderr


def test_ptc_run_without_a_device(fake_build, tmp_path):
    a, b = inputs(2, 3)
    np.save(tmp_path / "A.npy", a)
    np.save(tmp_path / "B.npy", b)
    (tmp_path / "scalars.txt").write_text("alpha 1\n")
    run = run_exe(fake_build, tmp_path, env={"PTC_FAKE_CUDA_DEVICES": "0"})
    assert run.returncode == 1 and "no CUDA device: cudaGetDeviceCount" in run.stderr


def test_bench_compares_with_the_reference():
    from ptc.runtime.bench import compare

    want = np.linspace(-1, 1, 100, dtype=np.float32)
    assert compare("C", "f32", want, want).ok
    assert not compare("C", "f32", want * 1.01, want).ok
    assert compare("C", "bf16", want * 1.01, want).ok
    nan = want.copy()
    nan[3] = np.nan
    check = compare("C", "bf16", nan, want)
    assert check.bad_nan == 1 and not check.ok
    assert compare("C", "f32", nan, nan).ok                  # NaN where the reference has it
    assert compare("S", "i32", np.arange(4), np.arange(4)).ok


def test_bench_on_the_fake_runtime(fake, capsys):
    from ptc.cli.build import print_bench
    from ptc.runtime.bench import run_bench

    prepared = R.prepare(AXPY_PT, "sm80", shapes={"M": 64, "N": 48},
                         kernel_source=AXPY_HOST.read_text())
    result = run_bench(fake, prepared, shapes={"M": 64, "N": 48}, warmup=1, iters=5,
                       baseline=None)
    assert result.ok and [c.name for c in result.checks] == ["C", "S"]
    assert result.dims == {"M": 64, "N": 48} and len(result.timing.ms) == 5
    assert result.bound == "memory" and result.work.flops == 0
    assert result.work.bytes == 64 * 48 * (4 + 2 + 4) + 64 * 4     # A, B, C, S
    assert result.gpu == "fake CUDA device (sm_80)"     # the harness's name and arch
    print_bench(result)
    shown = capsys.readouterr().out
    assert "axpy on fake CUDA device" in shown and "GB/s" in shown and "ok" in shown
    assert json.loads(json.dumps(result.to_json()))["ok"] is True


def test_ptc_bench_through_the_cli(fake, monkeypatch):
    from ptc.runtime.library import GpuInfo
    from ptc.targets.cuda import driver

    monkeypatch.setattr(driver, "find_gpus", lambda: [GpuInfo(0, "fake CUDA device", "sm_80")])
    monkeypatch.setattr(R, "build_prepared", lambda prepared, out, shapes=None: fake)
    code, stdout, stderr = ptc("bench", AXPY_PT, "-t", "sm80", "--kernel-source", AXPY_HOST,
                               "--shape", "M=20,N=30", "--iters", "3", "--json")
    assert code == 0, stderr
    result = json.loads(stdout)
    assert result["ok"] and result["dims"] == {"M": 20, "N": 30} and result["runs"] == 3
    monkeypatch.setattr(driver, "find_gpus", lambda: [GpuInfo(0, "old GPU", "sm_70")])
    code, _, stderr = ptc("bench", AXPY_PT, "-t", "sm80", "--kernel-source", AXPY_HOST)
    assert code == 1 and "cannot run code built for sm_80" in stderr


# ---- on a GPU ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gpu():
    try:
        return find_gpus()[0]
    except R.NoDevice as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def gpu_axpy(gpu, tmp_path_factory):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    return R.compile(AXPY_PT, "sm80", kernel_source=AXPY_CU.read_text(),
                     out_dir=tmp_path_factory.mktemp("gpu") / "axpy")


@pytest.mark.gpu
def test_gpu_axpy_matches_the_reference(gpu_axpy, axpy):
    for m, n in ((50, 40), (1, 1), (257, 129)):
        a, b = inputs(m, n)
        want = reference(axpy, a, b, 1.25)
        out = gpu_axpy(a, b, 1.25)
        assert close(out["C"], want["C"], 1e-6) and close(out["S"], want["S"], 1e-5)
        out = gpu_axpy.run(gpu_axpy.bind(a, b, 1.25), poison=("C",))
        assert close(out["C"], want["C"], 1e-6)
    t = gpu_axpy.time(a, b, 1.25, warmup=3, iters=20)
    assert len(t.ms) == 20 and 0 < t.median_ms < 100


@pytest.mark.gpu
def test_gpu_ptc_run(gpu_axpy, axpy, tmp_path):
    a, b = inputs(33, 65)
    np.save(tmp_path / "A.npy", a)
    np.save(tmp_path / "B.npy", b)
    (tmp_path / "scalars.txt").write_text("alpha 2\n")
    run = run_exe(gpu_axpy.directory, tmp_path, "--iters", "10")
    assert run.returncode == 0, run.stderr
    want = reference(axpy, a, b, 2.0)
    assert close(np.load(tmp_path / "C.npy"), want["C"], 1e-6)
    assert len(json.loads((tmp_path / "timings.json").read_text())["ms"]) == 10


@pytest.mark.gpu
def test_gpu_device_arrays_without_copies(gpu_axpy, axpy):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    a, b = inputs(64, 32)
    want = reference(axpy, a, b, 0.5)
    ta = torch.from_numpy(a).cuda()
    tb = torch.from_numpy(b.astype(np.float32)).cuda().to(torch.bfloat16)   # DLPack only
    tc = torch.zeros((64, 32), device="cuda")
    out = gpu_axpy(ta, tb, 0.5, out={"C": tc})
    assert out["C"] is tc and close(tc.cpu().numpy(), want["C"], 1e-6)
    s = out["S"]
    assert isinstance(s, R.DeviceArray)
    assert close(torch.as_tensor(s, device="cuda").cpu().numpy(), want["S"], 1e-5)


@pytest.mark.gpu
def test_gpu_ptc_bench(gpu, tmp_path):
    code, stdout, stderr = ptc("bench", AXPY_PT, "-t", "sm80", "--kernel-source", AXPY_CU,
                               "-o", tmp_path / "b", "--iters", "10", "--baseline", "none",
                               "--json")
    assert code == 0, stderr
    result = json.loads(stdout)
    assert result["ok"] and result["median_ms"] > 0 and result["gbs"] > 0


def _smoke():
    for line in (SAMPLES / "SMOKE").read_text().splitlines():
        parts = line.split()
        if parts and not parts[0].startswith("#"):
            yield parts[0], parts[1], parts[2] if len(parts) > 2 else ""


def _pairs(text):
    return {k: int(v) for k, v in (p.split("=") for p in text.split(","))} if text else {}


@pytest.mark.gpu
@pytest.mark.parametrize("target", ["sm80", "sm90"])
@pytest.mark.parametrize("sample, shapes, tiles", list(_smoke()))
def test_gpu_samples_match_the_reference(gpu, tmp_path, monkeypatch, sample, shapes, tiles,
                                         target):
    from ptc.devices import get_device
    from ptc.diagnostics import CompileError
    from ptc.runtime.bench import compare
    from ptc.targets.cuda.driver import can_run

    if not can_run(gpu, get_device(target).arch):
        pytest.skip(f"{gpu.name} cannot run {target} code")
    monkeypatch.setenv("PTC_CACHE_DIR", str(tmp_path))
    shapes, tiles = _pairs(shapes), _pairs(tiles)
    try:
        kernel = R.compile(SAMPLES / sample, target, shapes=shapes, tiles=tiles)
    except CompileError as exc:
        if "render" in str(exc):
            pytest.skip(str(exc))
        raise
    typed = driver.check_file(SAMPLES / sample, shapes).kernels[0]
    from ptc.interp import bind_dims

    dims = bind_dims(typed, {}, shapes)
    # the sample's own inputs, as the emulated tests draw them: random routing indices
    # would write some rows of moe_gemm's Y twice (in an order no reference can know)
    # and leave others unwritten (poisoned)
    args = F.make_inputs(Path(sample).stem, dims, np.random.default_rng(1))
    got = kernel.run(kernel.bind(**args),
                     poison=tuple(p.name for p in kernel.signature.outputs if not p.atomic))
    want = run_kernel(typed, args, shapes=dims, grid_tiles=[dict(p.tiles) for p in kernel.plans])
    for p in kernel.signature.outputs:
        check = compare(p.name, p.dtype, got[p.name], want[p.name])
        assert check.ok, check


STORED = {"<f2": np.float16, "<f4": np.float32, "<f8": np.float64, "<u2": np.uint16,
          "<i4": np.int32, "|V2": ml_dtypes.bfloat16, "|b1": np.bool_}


@pytest.mark.parametrize("param", ["A", "B"])
@pytest.mark.parametrize("stored", sorted(STORED))
def test_ptc_run_and_the_harness_read_inputs_by_one_rule(fake_build, axpy, tmp_path, param,
                                                          stored):
    """The same .npy accepted (with the same values) or refused by `ptc run --inputs` and by
    the harness's ptc_run, as ptc.npy_dtypes.ACCEPTED says."""
    from ptc.npy_dtypes import ACCEPTED

    a, b = inputs(4, 6)
    values = {"A": a, "B": b}
    chosen = values[param].astype(np.float32)
    if stored == "<u2":
        chosen = b.view(np.uint16) if param == "B" else chosen.astype(np.uint16)
    else:
        chosen = chosen.astype(STORED[stored])
    values[param] = chosen
    dtype = {"A": "f32", "B": "bf16"}[param]
    descr = "<V2" if stored == "|V2" else stored
    accepted = descr in ACCEPTED[dtype] or stored in ACCEPTED[dtype]
    np.save(tmp_path / "A.npy", values["A"])
    np.save(tmp_path / "B.npy", values["B"])
    (tmp_path / "scalars.txt").write_text("alpha 2\n")
    harness = run_exe(fake_build, tmp_path, "--iters", "0")
    np.savez(tmp_path / "in.npz", alpha=np.float32(2), **values)
    code, _, err = ptc("run", AXPY_PT, "--inputs", tmp_path / "in.npz", "-o", tmp_path / "o.npz")
    assert (harness.returncode == 0) == accepted, harness.stderr
    assert (code == 0) == accepted, err
    if accepted:     # the same values, and bf16 bits are the values they encode
        assert close(np.load(tmp_path / "C.npy"), np.load(tmp_path / "o.npz")["C"])
        assert close(np.load(tmp_path / "C.npy"), reference(axpy, a, b, 2.0)["C"])
    else:
        assert f"'{descr}'" in err or f"'{stored}'" in err
