"""The HIP build path (issue 10): the per-backend toolchains (ptc.runtime.toolchains, hip.py,
nvcc.py), the HIP harness (targets/hip/templates/harness.hip.j2 over templates/host/harness.j2),
the ISA readout (ptc.targets.hip.isa) and every sample building for gfx90a and gfx942.

Without a compiler: the toolchain registry, the commands, the compiler resolution (against
fake compilers), the missing-compiler error and the ISA parser on a recorded assembly file.
With one (Debian's hipcc and clang-19: `make test` installs them, tools/hip_toolchain.sh):
real builds. Those skip where the compiler is missing, except under CI (CI set, as
.ci/run does), where a missing compiler fails them.
"""
from __future__ import annotations

import ctypes
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

import ptc.runtime as R
from ptc import driver
from ptc.cli import cli
from ptc.devices import builtin_targets, get_device
from ptc import targets
from ptc.render import headers as render_headers
from ptc.targets.hip import toolchain as hip
from ptc.targets.hip.isa import parse_isa
from ptc.runtime.library import ABI_SYMBOLS
from ptc.runtime.harness import render_harness
from ptc.runtime.signature import signature_of
from ptc.runtime.toolchain import Compiler
from ptc.runtime.toolchains import toolchain

B = importlib.import_module("ptc.runtime.build")   # the module (ptc.runtime.build is the function)
ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent / "runtime"
SAMPLES = sorted(p.stem for p in (ROOT / "samples").glob("*.pt"))
AXPY_PT, AXPY_HIP, PROBE = HERE / "axpy.pt", HERE / "axpy.hip", HERE / "isa_probe.hip"
HIP_TARGETS = {"gfx90a": "gfx90a", "gfx942": "gfx942"}      # target: arch
WHOLE_BUILD = "gfx942"   # the target whose samples are built whole at the benchmark shape
IN_CI = bool(os.environ.get("CI"))
HIPCC = Compiler("/usr/bin/hipcc", "hipcc", "hipcc")
CLANG = Compiler("/usr/bin/clang++-19", "clang++-19", "clang")


def ptc(*args, env=None):
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False, env=env)
    return result.exit_code, result.stdout, result.stderr


def compiler_or_skip(arch: str) -> Compiler:
    """The compiler ptc resolves for `arch`; skip without one, except in CI."""
    try:
        return hip.find_compiler(arch)
    except R.BuildError as exc:
        if IN_CI:
            raise
        pytest.skip(f"no HIP compiler here: {exc.message}")


def executable_or_skip(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        if IN_CI:
            pytest.fail(f"{name} is not on PATH in CI (tools/hip_toolchain.sh installs it)")
        pytest.skip(f"{name} is not on PATH")
    return path


@pytest.fixture
def no_compilers(tmp_path, monkeypatch):
    """A PATH with no compiler on it (and no ROCm, no PTC_HIPCC); the folder to put fakes in."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("PTC_HIPCC", raising=False)
    monkeypatch.delenv("ROCM_PATH", raising=False)
    monkeypatch.setattr(hip, "ROCM_DEFAULT", str(tmp_path / "no-rocm"))
    hip.refusal.cache_clear()
    yield bin_dir
    hip.refusal.cache_clear()


def fake_compiler(folder: Path, name: str, refuses: str = "") -> Path:
    """An executable that takes every build, except for target `refuses`, which it rejects as
    Debian's hipcc (clang 15) rejects gfx942. It logs its HIP_PLATFORM beside itself."""
    path = folder / name
    path.write_text(f"""#!/bin/sh
echo "HIP_PLATFORM=$HIP_PLATFORM" >> "{folder}/{name}.env"
for a in "$@"; do
  if [ "$a" = "--offload-arch={refuses}" ]; then
    echo "clang: error: invalid target ID '{refuses}'; format is a processor name" >&2
    exit 1
  fi
done
exit 0
""")
    path.chmod(0o755)
    return path


# ---- the toolchains, without a compiler ------------------------------------------------------
def test_every_builtin_target_has_a_toolchain_beside_its_renderer():
    assert targets.names() == ("cuda", "hip")
    for target in builtin_targets():
        device = get_device(target)
        chain, renderer = toolchain(device.backend), targets.renderer(device.backend)
        assert (targets.backend(device.backend).templates / chain.harness_template).is_file()
        assert chain.kernel_file == "kernel" + renderer.suffix
    assert toolchain("hip").harness_file == "harness.hip"
    with pytest.raises(R.BuildError, match="ptc builds no metal targets"):
        toolchain("metal")


@pytest.mark.parametrize("compiler,arch,expected", [
    (HIPCC, "gfx90a", {
        "kernel.o": "hipcc -std=c++17 -O3 --offload-arch=gfx90a -fPIC -c kernel.hip -o kernel.o",
        "kernel.s": "hipcc -std=c++17 -O3 --offload-arch=gfx90a --offload-device-only -S "
                    "kernel.hip -o kernel.s",
        "signature.o": "hipcc -std=c++17 -O3 --offload-arch=gfx90a -x c++ -fPIC -c "
                       "signature.cc -o signature.o",
        "libptc_kernel.so": "hipcc --offload-arch=gfx90a -shared kernel.o harness.o signature.o "
                            "-o libptc_kernel.so",
        "ptc_run": "hipcc --offload-arch=gfx90a kernel.o harness.o signature.o -o ptc_run"}),
    (CLANG, "gfx942", {
        # the device code once: kernel.s, assembled, bundled and embedded by the host compile
        "kernel.s": "clang++-19 -x hip -std=c++17 -O3 -nogpulib --offload-arch=gfx942 "
                    "-cuid=ptc_kernel --offload-device-only -S kernel.hip -o kernel.s",
        "kernel.co": "clang++-19 --target=amdgcn-amd-amdhsa -mcpu=gfx942 kernel.s -o kernel.co",
        "kernel.hipfb": "clang-offload-bundler-19 -type=o -bundle-align=4096 "
                        "-targets=host-x86_64-unknown-linux,hipv4-amdgcn-amd-amdhsa--gfx942 "
                        "-input=/dev/null -input=kernel.co -output=kernel.hipfb",
        "kernel.o": "clang++-19 -x hip -std=c++17 -O3 -nogpulib --offload-arch=gfx942 -Xclang "
                    "-cuid=ptc_kernel --offload-host-only -fPIC -c kernel.hip -o kernel.o "
                    "-Xclang -fcuda-include-gpubinary -Xclang kernel.hipfb",
        "harness.o": "clang++-19 -x hip -std=c++17 -O3 -nogpulib --offload-arch=gfx942 "
                     "--offload-host-only -fPIC -c harness.hip -o harness.o",
        "signature.o": "clang++-19 -x c++ -std=c++17 -O3 -fPIC -c signature.cc -o signature.o",
        "libptc_kernel.so": "clang++-19 --hip-link --offload-arch=gfx942 -shared kernel.o "
                            "harness.o signature.o -o libptc_kernel.so"}),
])
def test_hip_commands_per_compiler(compiler, arch, expected):
    steps = {s.output: s for s in toolchain("hip").steps(arch, compiler)}
    for output, line in expected.items():
        assert " ".join(steps[output].command) == line
    if compiler.flavour == "hipcc":   # the objects and the assembly at once, then the links
        assert [(s.output, s.stage) for s in steps.values()] == [
            ("kernel.o", 0), ("harness.o", 0), ("signature.o", 0), ("kernel.s", 0),
            ("libptc_kernel.so", 1), ("ptc_run", 1)]
    else:                             # the assembly first, the kernel's object from it
        assert [(s.output, s.stage) for s in steps.values()] == [
            ("kernel.s", 0), ("harness.o", 0), ("signature.o", 0), ("kernel.co", 1),
            ("kernel.hipfb", 2), ("kernel.o", 3), ("libptc_kernel.so", 4), ("ptc_run", 4)]
    assert toolchain("hip").environment(compiler) == (
        {"HIP_PLATFORM": "amd"} if compiler.flavour == "hipcc" else {})


def test_the_cuda_commands_are_unchanged():
    script = B.build_script("sm_80")
    assert ("nvcc -O3 -std=c++17 -gencode 'arch=compute_80,code=[sm_80,compute_80]' -lineinfo "
            "-Xptxas -v -Xcompiler -fPIC -c kernel.cu -o kernel.o") in script
    assert "export" not in script
    make = B.makefile("sm_80")
    assert "all: libptc_kernel.so ptc_run\n" in make
    assert "harness.o: harness.cu npy.h ptc_signature.h\n" in make
    assert "signature.o: signature.cc ptc_signature.h\n" in make


def test_build_script_and_makefile_of_a_hip_directory():
    script = B.build_script("gfx90a", "hip", HIPCC)
    assert "export HIP_PLATFORM=amd\n" in script
    assert script.index("export HIP_PLATFORM") < script.index("hipcc -std=c++17")
    make = B.makefile("gfx942", "hip", CLANG)
    assert "export" not in make
    assert "all: libptc_kernel.so ptc_run kernel.s\n" in make
    device_headers = [h.name for h in render_headers(get_device("gfx942"))]
    # clang: the kernel's object embeds the code object assembled from kernel.s
    assert device_headers and \
        f"kernel.o: kernel.hip kernel.hipfb {' '.join(device_headers)}\n" in make
    assert f"kernel.s: kernel.hip {' '.join(device_headers)}\n" in make
    assert "kernel.co: kernel.s\n" in make and "kernel.hipfb: kernel.co\n" in make
    assert "harness.o: harness.hip npy.h ptc_signature.h\n" in make
    assert ("\trm -f kernel.s harness.o signature.o kernel.co kernel.hipfb kernel.o "
            "libptc_kernel.so ptc_run\n") in make
    hipcc = B.makefile("gfx90a", "hip", HIPCC)
    assert f"kernel.o: kernel.hip {' '.join(device_headers)}\n" in hipcc
    assert "export HIP_PLATFORM = amd\n" in B.makefile("gfx90a", "hip", HIPCC)


def test_the_hip_harness_is_the_cuda_harness_in_hip_names():
    """One harness text (templates/host/harness.j2): HIP's differs from CUDA's only in the
    runtime's names and where the device's arch name comes from (gfx942 from
    gcnArchName, sm_90 from the compute capability), so every behaviour the fake-CUDA
    tests check holds for HIP too."""
    cuda, hip_text = render_harness(), render_harness("hip")
    assert "#include <hip/hip_runtime.h>" in hip_text and "hipDeviceProp_t prop;" in hip_text
    assert "cuda" not in hip_text.lower() and "{{" not in hip_text
    back = hip_text
    for hip_name, cuda_name in (('"%s", prop.gcnArchName', '"sm_%d%d", prop.major, prop.minor'),
                                ("hipDeviceProp_t", "cudaDeviceProp"),
                                ("hip/hip_runtime.h", "cuda_runtime.h"),
                                ("harness.hip", "harness.cu"), ("kernel.hip", "kernel.cu"),
                                ("HIP", "CUDA"), ("hip", "cuda")):
        back = back.replace(hip_name, cuda_name)
    assert back == cuda


def test_a_hip_build_directory(tmp_path, monkeypatch):
    monkeypatch.setattr(hip, "find_compiler", lambda arch: CLANG)
    sig = signature_of(driver.check_file(AXPY_PT).kernels[0])
    folder = R.write_build_dir(tmp_path / "axpy", kernel_source=AXPY_HIP.read_text(),
                               signature=sig, arch="gfx942", target="gfx942", backend="hip")
    names = {p.name for p in folder.iterdir()}
    device_headers = {h.name for h in render_headers(get_device("gfx942"))}
    assert names == {"kernel.hip", "harness.hip", "signature.cc", "npy.h", "ptc_signature.h",
                     "plan.json", "signature.json", "manifest.json", "build.sh",
                     "Makefile"} | device_headers
    assert json.loads((folder / "manifest.json").read_text())["backend"] == "hip"
    assert B.is_build_dir(folder) and B.backend_of(folder) == "hip"
    assert "clang++-19 -x hip" in (folder / "build.sh").read_text()


# ---- the compiler: which one, and the error without one -------------------------------------
def test_hipcc_first_and_clang_19_where_hipcc_does_not_know_the_target(no_compilers):
    fake_compiler(no_compilers, "hipcc", refuses="gfx942")
    fake_compiler(no_compilers, "clang++-19")
    assert hip.find_compiler("gfx90a") == Compiler(str(no_compilers / "hipcc"), "hipcc",
                                                   "hipcc")
    assert hip.find_compiler("gfx942") == Compiler(str(no_compilers / "clang++-19"),
                                                   "clang++-19", "clang")
    # hipcc was asked as ROCm's hipcc is driven: for AMD, not for nvcc
    assert set((no_compilers / "hipcc.env").read_text().split()) == {"HIP_PLATFORM=amd"}


def test_ptc_hipcc_wins_and_rocm_is_found_off_the_path(no_compilers, tmp_path, monkeypatch):
    fake_compiler(no_compilers, "hipcc")
    fake_compiler(no_compilers, "clang++-19")
    monkeypatch.setenv("PTC_HIPCC", "clang++-19")
    assert hip.find_compiler("gfx90a").shown == "clang++-19"
    monkeypatch.setenv("PTC_HIPCC", "/no/such/hipcc")
    with pytest.raises(R.BuildError, match="PTC_HIPCC=/no/such/hipcc is not an executable"):
        hip.find_compiler("gfx90a")
    monkeypatch.delenv("PTC_HIPCC")
    (no_compilers / "hipcc").unlink()
    rocm = tmp_path / "rocm"
    (rocm / "bin").mkdir(parents=True)
    fake_compiler(rocm / "bin", "hipcc")
    monkeypatch.setenv("ROCM_PATH", str(rocm))
    found = hip.find_compiler("gfx942")
    assert found.shown == str(rocm / "bin" / "hipcc") and found.flavour == "hipcc"


def test_no_compiler_that_knows_the_target(no_compilers):
    fake_compiler(no_compilers, "hipcc", refuses="gfx942")
    with pytest.raises(R.BuildError) as info:
        hip.find_compiler("gfx942")
    assert info.value.message == ("no HIP compiler for gfx942 found (hipcc: invalid target ID "
                                  "'gfx942'; format is a processor name)")
    assert "apt-get install" in info.value.hint and "PTC_HIPCC" in info.value.hint


def test_a_missing_compiler_is_one_line_and_writes_nothing(no_compilers, tmp_path):
    out = tmp_path / "out" / "axpy"
    code, _, err = ptc("build", AXPY_PT, "-t", "gfx942", "--kernel-source", AXPY_HIP, "-o", out)
    assert code == 1, err
    lines = err.splitlines()
    assert lines[0] == "ptc: error: no HIP compiler for gfx942 found", err
    assert lines[1].startswith("hint: install ROCm (hipcc)") and len(lines) == 2
    assert not out.parent.exists()
    # writing the directory needs no compiler: its build.sh names ROCm's hipcc
    code, stdout, err = ptc("compile", AXPY_PT, "-t", "gfx942", "-o", out)
    assert code == 0 and "kernel.hip, harness.hip, signature.cc, plan.json, build.sh" in stdout, err
    assert "\nhipcc -std=c++17 -O3 --offload-arch=gfx942" in (out / "build.sh").read_text()
    before = sorted(p.name for p in out.iterdir())
    code, _, err = ptc("build", AXPY_PT, "-t", "gfx942", "--kernel-source", AXPY_HIP, "-o", out)
    assert code == 1 and err.startswith("ptc: error: no HIP compiler for gfx942 found")
    assert sorted(p.name for p in out.iterdir()) == before
    assert sorted(p.name for p in out.parent.iterdir()) == ["axpy"]


def test_running_a_hip_target_without_the_emulator_needs_an_amd_gpu():
    code, _, err = ptc("run", ROOT / "samples" / "gemm.pt", "--target", "gfx942")
    assert code == 1
    assert err == ("ptc: error: running the HIP kernel of gfx942 needs an AMD GPU, which ptc "
                   "does not drive; add --emulate to run it on the CPU emulator\n")


# ---- the ISA readout of a fresh compile (tests/test_amdgpu_isa.py: of recorded ones) --------
@pytest.mark.hip
@pytest.mark.parametrize("arch", list(HIP_TARGETS.values()))
def test_the_readout_of_a_fresh_compile(arch, tmp_path):
    compiler = compiler_or_skip(arch)
    cmd = list(hip.hip_commands(arch, compiler)["kernel.s"])
    cmd[cmd.index("kernel.hip")] = str(PROBE)
    cmd[0] = compiler.path
    subprocess.run(cmd, cwd=tmp_path, check=True, capture_output=True,
                   env={**os.environ, **hip.environment(compiler.flavour)})
    report = parse_isa((tmp_path / "kernel.s").read_text())
    kernels = {k.name: k for k in report.kernels}
    loop = kernels["mma_loop"]
    assert loop.arch == arch and loop.scratch_bytes == 0 and loop.spills == 0
    assert loop.loop_count("v_mfma") == 2 and loop.loop_count("s_barrier") >= 1
    assert loop.loop_count("ds_read") >= 1 and loop.loop_count("ds_write") >= 1
    assert loop.agprs + loop.vgprs >= 16 and loop.lds_bytes == 2048
    assert kernels["scratch_array"].scratch_bytes > 0 and kernels["scratch_array"].spills == 0
    assert kernels["spilling"].vgpr_spills > 0


# ---- real builds ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def axpy_sig():
    return signature_of(driver.check_file(AXPY_PT).kernels[0])


@pytest.mark.hip
@pytest.mark.parametrize("target", list(HIP_TARGETS))
def test_a_hand_written_kernel_builds_and_finds_no_amd_gpu(target, tmp_path, axpy_sig,
                                                           monkeypatch):
    """axpy.hip (the kernel ABI in HIP) with the harness: both products build, export the
    ABI and, on this GPU-less machine, say there is no HIP device. Its own object cache:
    the compiles run (and are echoed) however often the suite has run before."""
    monkeypatch.setenv("PTC_CACHE_DIR", str(tmp_path / "cache"))
    compiler = compiler_or_skip(HIP_TARGETS[target])
    out = tmp_path / "axpy"
    code, stdout, err = ptc("build", AXPY_PT, "-t", target, "--kernel-source", AXPY_HIP,
                            "-o", out)
    assert code == 0, err
    assert f"ISA: {target}" in stdout and "axpy_kernel" in stdout
    assert f"{compiler.shown} -std=c++17" in err or f"{compiler.shown} -x hip" in err
    info = json.loads((out / "build.json").read_text())
    assert info["backend"] == "hip" and info["compiler"] == compiler.path
    (k,) = info["isa"]["kernels"]
    assert k["arch"] == HIP_TARGETS[target] and k["scratch_bytes"] == 0
    assert (out / "kernel.s").is_file() and (out / "ptc_run").is_file()
    np.save(out / "A.npy", np.ones((4, 8), np.float32))
    np.save(out / "B.npy", np.ones((4, 8), np.float32))
    (out / "scalars.txt").write_text("alpha 2\n")
    run = subprocess.run([out / "ptc_run", out], capture_output=True, text=True)
    assert run.returncode == 1 and run.stderr.startswith("ptc_run: error: no HIP device"), \
        run.stderr
    kernel = R.load(out)
    assert kernel.backend == "hip" and kernel.build.resources.kernels[0].label == "axpy_kernel"
    loaded = ctypes.CDLL(str(out / "libptc_kernel.so"))
    assert all(hasattr(loaded, name) for name in ABI_SYMBOLS)
    with pytest.raises(R.NoDevice, match="no HIP device"):
        kernel(np.ones((4, 8), np.float32), np.ones((4, 8), ml_dtypes.bfloat16), 2.0)


@pytest.mark.hip
@pytest.mark.parametrize("name", ["hipcc", "clang++-19"])
def test_both_compilers_build_gfx90a(name, tmp_path, monkeypatch):
    """gfx90a builds with Debian's hipcc (clang 15, device libraries) and with clang 19
    (-nogpulib): the build.sh of each says which."""
    executable_or_skip(name)
    monkeypatch.setenv("PTC_HIPCC", name)
    out = tmp_path / "axpy"
    code, _, err = ptc("build", AXPY_PT, "-t", "gfx90a", "--kernel-source", AXPY_HIP, "-o", out)
    assert code == 0, err
    assert f"\n{name} " in (out / "build.sh").read_text()
    assert ("export HIP_PLATFORM=amd" in (out / "build.sh").read_text()) == (name == "hipcc")


@pytest.mark.hip
def test_the_harness_compiles_without_warnings(tmp_path):
    """The same text for every kernel: one check (test_runtime checks each sample's
    signature.cc)."""
    compiler = compiler_or_skip("gfx942")
    sig = signature_of(driver.check_file(AXPY_PT).kernels[0])
    folder = R.write_build_dir(tmp_path / "axpy", kernel_source="", signature=sig,
                               arch="gfx942", backend="hip")
    cmd = list(hip.hip_commands("gfx942", compiler)["harness.o"])
    cmd = [compiler.path] + cmd[1:cmd.index("-c")] + [
        "-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-Wno-unused-command-line-argument",
        "harness.hip"]
    res = subprocess.run(cmd, cwd=folder, capture_output=True, text=True,
                         env={**os.environ, **hip.environment(compiler.flavour)})
    assert res.returncode == 0, res.stderr


@pytest.mark.hip
@pytest.mark.parametrize("sample", SAMPLES)
def test_every_sample_signature_compiles_without_warnings(sample, tmp_path):
    """signature.cc, by the command that builds signature.o."""
    compiler = compiler_or_skip("gfx942")
    sig = signature_of(driver.check_file(ROOT / "samples" / f"{sample}.pt").kernels[0])
    folder = R.write_build_dir(tmp_path / sample, kernel_source="", signature=sig,
                               arch="gfx942", backend="hip")
    cmd = list(hip.hip_commands("gfx942", compiler)["signature.o"])
    cmd = [compiler.path] + cmd[1:cmd.index("-c")] + [
        "-fsyntax-only", "-Wall", "-Wextra", "-Werror", "signature.cc"]
    res = subprocess.run(cmd, cwd=folder, capture_output=True, text=True,
                         env={**os.environ, **hip.environment(compiler.flavour)})
    assert res.returncode == 0, f"{sample}: {res.stderr}"


def sample_cases():
    return [(name, target, shape) for name in SAMPLES for target in HIP_TARGETS
            for shape in ("bench", "edge")]


@pytest.mark.hip
@pytest.mark.parametrize("name,target,shape", sample_cases(),
                         ids=[f"{n}.{t}.{s}" for n, t, s in sample_cases()])
def test_sample_builds_without_scratch_and_with_mfma(name, target, shape, tmp_path):
    """Every sample at the benchmark shape (the dims' defaults) and at a ragged edge-tile
    shape (the search may pick another plan there): its kernels use no scratch and spill
    nothing, and a plan with mma steps issues v_mfma in every kernel variant's main loop.
    The device assembly is checked from the kernel compiled alone; the whole build at the
    benchmark shape on gfx942 only, whose build has the most parts (clang: the assembly
    assembled, bundled and embedded by ptc's own commands). gfx90a's compiler, hipcc,
    compiles kernel.o whole: test_both_compilers_build_gfx90a builds with it."""
    from test_simulate import EDGE

    arch = HIP_TARGETS[target]
    compiler_or_skip(arch)
    prepared = R.prepare(ROOT / "samples" / f"{name}.pt", target,
                         shapes=EDGE[name] if shape == "edge" else None)
    folder = tmp_path / "build"
    B.write_build_dir(folder, kernel_source=prepared.source, signature=prepared.signature,
                      arch=prepared.device.arch, target=target,
                      plan_json=prepared.plan_json, backend="hip")
    whole = shape == "bench" and target == WHOLE_BUILD
    result = B.build(folder, report_only=not whole)
    assert result.arch == arch and result.backend == "hip"
    report = result.resources
    assert (folder / B.LIBRARY).is_file() == whole
    kernels = [k for k in report.kernels
               if k.name in (f"ptc_{name}_kernel<true>", f"ptc_{name}_kernel<false>")]
    assert kernels, f"no ptc_{name}_kernel in the ISA: {[k.name for k in report.kernels]}"
    assert report.spills == 0 and report.scratch_bytes == 0, report.alerts()
    steps = [step for plan in prepared.plans for _, step in plan.steps() if step.task != "sync"]
    if any(prepared.device.unit(step.unit).kind == "mma" for step in steps):
        for k in kernels:
            assert k.loop_count("v_mfma") > 0, f"{k.name}: mma steps, but no v_mfma in a loop"
    if "the vector ALU reads accumulators in the loop" in prepared.source:
        # the register budget the lowering asked for keeps them in VGPRs: no AGPR moves
        (fast,) = [k for k in kernels if k.name.endswith("<true>")]
        assert fast.loop_count("accvgpr") == 0, f"{fast.name}: accumulators moved per iteration"
    assert all(k.arch == arch for k in kernels)
    assert re.search(r"\bs_barrier\b", report.text) or all(
        k.max_threads <= 64 for k in kernels), "a workgroup of several waves has no barrier"


def device_code(obj: Path, arch: str, tmp: Path) -> tuple[str, str]:
    """(the disassembly, the metadata notes) of the code object a HIP object embeds."""
    fatbin, code = tmp / f"{obj.stem}.fatbin", tmp / f"{obj.stem}.co"
    for cmd in ([executable_or_skip("llvm-objcopy-19"), f"--dump-section=.hip_fatbin={fatbin}",
                 str(obj), os.devnull],
                [executable_or_skip("clang-offload-bundler-19"), "-type=o", "-unbundle",
                 f"-targets=hipv4-amdgcn-amd-amdhsa--{arch}", f"-input={fatbin}",
                 f"-output={code}"]):
        done = subprocess.run(cmd, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    dis = subprocess.run([executable_or_skip("llvm-objdump-19"), "-d", "--no-show-raw-insn",
                          str(code)], capture_output=True, text=True, check=True).stdout
    notes = subprocess.run([executable_or_skip("llvm-readelf-19"), "--notes", str(code)],
                           capture_output=True, text=True, check=True).stdout
    return dis.split("\n", 3)[-1], notes


@pytest.mark.hip
def test_clangs_kernel_object_holds_the_code_its_isa_report_reads(tmp_path):
    """A clang build compiles the device code once: kernel.s (the ISA report), assembled
    into the code object that the host compile of kernel.o embeds. That object is the one
    the driver's single command builds: the same instructions, the same metadata
    (registers, LDS, scratch), and the host and device halves name the same unit."""
    arch = "gfx942"
    compiler = compiler_or_skip(arch)
    if compiler.flavour != "clang":
        pytest.skip(f"{compiler.shown} builds {arch} (hipcc compiles kernel.o whole)")
    prepared = R.prepare(ROOT / "samples" / "gemm.pt", "gfx942")
    folder = tmp_path / "build"
    B.write_build_dir(folder, kernel_source=prepared.source, signature=prepared.signature,
                      arch=arch, target="gfx942", plan_json=prepared.plan_json, backend="hip")
    B.build(folder)
    assert (folder / "kernel.co").is_file() and (folder / "kernel.hipfb").is_file()
    # the driver's one command: device and host compiled together
    direct = subprocess.run([compiler.path, "-x", "hip", *hip.STANDARD, "-nogpulib",
                             f"--offload-arch={arch}", "-fPIC", "-c", "kernel.hip", "-o",
                             "direct.o"], cwd=folder, capture_output=True, text=True)
    assert direct.returncode == 0, direct.stderr
    ours, drivers = (device_code(folder / name, arch, tmp_path)
                     for name in ("kernel.o", "direct.o"))
    assert "v_mfma" in ours[0] and ours == drivers
    host = subprocess.run(["nm", str(folder / "kernel.o")], capture_output=True, text=True,
                          check=True).stdout
    cuid = re.search(r"__hip_cuid_(\w+)", host).group(1)
    assert cuid and f"__hip_cuid_{cuid}" in subprocess.run(
        [executable_or_skip("llvm-readelf-19"), "-s", str(tmp_path / "kernel.co")],
        capture_output=True, text=True, check=True).stdout


# ---- the precompiled prelude of a check (ptc.targets.hip.prelude) ---------------------------
def test_the_prelude_is_the_system_includes_a_kernel_starts_with():
    from ptc.targets.hip.prelude import leading_system_includes
    kernel = "// made by ptc\n\n#include <climits>\n#include <cmath>\n#include \"ptc_types.h\"\n"
    assert leading_system_includes(kernel) == "#include <climits>\n#include <cmath>\n"
    # a line before them (a macro could change what they declare): no prelude
    assert leading_system_includes("#define N 4\n#include <cmath>\n") == ""
    assert leading_system_includes("#include \"ptc_types.h\"\n#include <cmath>\n") == ""


def test_a_prelude_the_compiler_refuses_leaves_the_check_as_build_sh_has_it(no_compilers,
                                                                            tmp_path,
                                                                            monkeypatch):
    from ptc.targets.hip.prelude import FAILED, with_prelude
    monkeypatch.setenv("PTC_CACHE_DIR", str(tmp_path / "cache"))
    refusing = no_compilers / "clang++-19"
    refusing.write_text("#!/bin/sh\necho 'error: no precompiled headers here' >&2\nexit 1\n")
    refusing.chmod(0o755)
    folder = tmp_path / "build"
    folder.mkdir()
    (folder / "kernel.hip").write_text("#include <cmath>\n__global__ void k() {}\n")
    compiler = Compiler(str(refusing), "clang++-19", "clang")
    (step,) = hip.TOOLCHAIN.check("gfx942", compiler)[0]
    assert with_prelude(step, compiler, folder, dict(os.environ)) == step
    (failed,) = (tmp_path / "cache" / "objects" / "pch").glob(f"*/{FAILED}")
    assert "no precompiled headers here" in failed.read_text()


@pytest.mark.hip
@pytest.mark.parametrize("target", sorted(HIP_TARGETS))
def test_a_checks_assembly_is_the_whole_builds_byte_for_byte(target, tmp_path, monkeypatch):
    """A check (report_only) reads the kernel's system headers from a precompiled prelude;
    the assembly is the one build.sh's command makes. A header changed since the prelude
    was built (a package upgrade) builds it again."""
    from ptc.targets.hip.prelude import INPUTS
    monkeypatch.setenv("PTC_CACHE_DIR", str(tmp_path / "cache"))
    arch = HIP_TARGETS[target]
    compiler_or_skip(arch)
    prepared = R.prepare(ROOT / "samples" / "softmax.pt", target)

    def assembly(name: str, whole: bool) -> tuple[str, tuple]:
        folder = tmp_path / name
        B.write_build_dir(folder, kernel_source=prepared.source, signature=prepared.signature,
                          arch=arch, target=target, plan_json=prepared.plan_json, backend="hip")
        result = B.build(folder, report_only=not whole)
        return (folder / "kernel.s").read_text(), result.commands

    checked, commands = assembly("check", False)
    assert any("-include-pch" in c for c in commands), commands
    built, plain = assembly("whole", True)
    assert not any("-include-pch" in c for c in plain)
    assert checked == built
    (inputs,) = (tmp_path / "cache" / "objects" / "pch").glob(f"*/{INPUTS}")
    header, size, mtime = inputs.read_text().splitlines()[0].split("\t")
    inputs.write_text(inputs.read_text().replace(f"{header}\t{size}\t{mtime}",
                                                 f"{header}\t{size}\t{int(mtime) - 1}"))
    (inputs.parent / "prelude.pch").write_text("stale")
    again, _ = assembly("again", False)
    assert again == built and (inputs.parent / "prelude.pch").read_bytes() != b"stale"
