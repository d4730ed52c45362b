"""The HIP toolchain (gfx90a, gfx942): kernel.hip, harness.hip and signature.cc build into
libptc_kernel.so and ptc_run, and a device-only compile of kernel.hip leaves its assembly,
kernel.s, which ptc.targets.hip.isa reads (registers, LDS, scratch, spills, occupancy,
instructions).

The compiler (docs/hip.md, "Build commands"): $PTC_HIPCC if set; else the first of hipcc
(on PATH, then $ROCM_PATH/bin, /opt/rocm/bin), clang++-19 and clang++ that knows the target
-- Debian's hipcc 5.2 (clang 15) builds gfx90a but not gfx942, Debian's clang 19 both. A
hipcc builds as ROCm documents it (HIP_PLATFORM=amd: without it a hipcc beside nvcc drives
nvcc); a clang builds `-x hip -nogpulib`: against the HIP headers, without a device
library, which ptc's kernels never call (their device code is clang builtins only).
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from pathlib import Path

from ptc.runtime.errors import BuildError
from ptc.runtime.toolchain import EXECUTABLE, LIBRARY, Compiler, Step, Toolchain

from . import driver
from .isa import parse_isa
from .prelude import with_prelude

HIP_HINT = ("install ROCm (hipcc), or Debian's HIP headers and clang 19: `apt-get install -y "
            "--no-install-recommends hipcc clang-19 clang-tools-19 lld-19 llvm-19` "
            "(tools/hip_toolchain.sh); or name the compiler: "
            "export PTC_HIPCC=/opt/rocm/bin/hipcc")
STANDARD = ("-std=c++17", "-O3")
OBJECTS = ("kernel.o", "harness.o", "signature.o")
ROCM_DEFAULT = "/opt/rocm"        # where ROCm installs itself when ROCM_PATH is not set


def candidates() -> list[str]:
    """The compilers tried in order when PTC_HIPCC is not set."""
    found = ["hipcc"]
    for root in (os.environ.get("ROCM_PATH"), ROCM_DEFAULT):
        if root:
            found.append(str(Path(root) / "bin" / "hipcc"))
    return found + ["clang++-19", "clang++"]


def flavour_of(name: str) -> str:
    return "hipcc" if Path(name).name.startswith("hipcc") else "clang"


def environment(flavour: str) -> dict[str, str]:
    return {"HIP_PLATFORM": "amd"} if flavour == "hipcc" else {}


@functools.lru_cache(maxsize=None)
def refusal(path: str, flavour: str, arch: str) -> str | None:
    """None when the compiler at `path` builds HIP for `arch` (it knows the target and finds
    the HIP headers), else its reason: an empty preprocessing run asks it (~0.1 s)."""
    cmd = [path, "-x", "hip", f"--offload-arch={arch}", "--offload-device-only", "-nogpulib",
           "-E", "-o", os.devnull, os.devnull]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace",
                              timeout=120, env={**os.environ, **environment(flavour)})
    except (OSError, subprocess.SubprocessError) as exc:
        return f"cannot run it ({exc})"
    if proc.returncode == 0:
        return None
    errors = [line for line in proc.stderr.splitlines() if "error" in line]
    why = (errors or proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[0]
    return why.split("error: ", 1)[-1][:160]


def find_compiler(arch: str) -> Compiler:
    chosen = os.environ.get("PTC_HIPCC")
    if chosen:
        path = shutil.which(chosen)
        if path is None:
            raise BuildError(f"PTC_HIPCC={chosen} is not an executable", hint=HIP_HINT)
        return Compiler(path, chosen, flavour_of(chosen))
    rejected = []
    for name in candidates():
        path = shutil.which(name)
        if path is None:
            continue
        why = refusal(path, flavour_of(name), arch)
        if why is None:
            return Compiler(path, name, flavour_of(name))
        rejected.append(f"{name}: {why}")
    tried = f" ({'; '.join(rejected)})" if rejected else ""
    raise BuildError(f"no HIP compiler for {arch} found{tried}", hint=HIP_HINT)


# the device code's translation-unit id, the same in the device and the host compile of
# kernel.hip where they are separate commands (clang derives one per compile otherwise)
CUID = "-cuid=ptc_kernel"


def bundler_of(compiler: Compiler) -> str:
    """The clang-offload-bundler beside a clang: clang++-19 -> clang-offload-bundler-19."""
    shown = Path(compiler.shown)
    name = re.sub(r"^clang(\+\+)?", "clang-offload-bundler", shown.name)
    return str(shown.with_name(name)) if shown.parent != Path(".") else name


def hip_commands(arch: str, compiler: Compiler) -> dict[str, tuple[str, ...]]:
    """Each product's command: the objects (with -fPIC, shared by the library and the
    executable), the kernel's device assembly, then the two links. A clang compiles the
    device code once: kernel.s, assembled into the code object (kernel.co) that the host
    compile of kernel.o embeds (kernel.hipfb, the bundle clang's driver makes itself); so
    the ISA report is the code that is built. hipcc (a wrapper that adds its own link
    flags) compiles kernel.o whole, and the assembly beside it."""
    cc = compiler.shown
    target = f"--offload-arch={arch}"
    if compiler.flavour == "hipcc":
        compile_, link = (cc, *STANDARD, target), (cc, target)
        # (hipcc asks rocm_agent_enumerator for a GPU when no --offload-arch is given)
        plain = (cc, *STANDARD, target, "-x", "c++")
        kernel = {
            "kernel.o": (*compile_, "-fPIC", "-c", "kernel.hip", "-o", "kernel.o"),
            # the same code the object holds, as assembly with LLVM's resource comments
            "kernel.s": (*compile_, "--offload-device-only", "-S", "kernel.hip", "-o",
                         "kernel.s")}
    else:
        compile_ = (cc, "-x", "hip", *STANDARD, "-nogpulib", target)
        link = (cc, "--hip-link", target)       # adds the HIP runtime, -lamdhip64
        plain = (cc, "-x", "c++", *STANDARD)
        kernel = {
            # the assembly, with LLVM's resource comments, is what kernel.o holds
            "kernel.s": (*compile_, CUID, "--offload-device-only", "-S", "kernel.hip", "-o",
                         "kernel.s"),
            "kernel.co": (cc, "--target=amdgcn-amd-amdhsa", f"-mcpu={arch}", "kernel.s", "-o",
                          "kernel.co"),
            # the host entry of the bundle is empty, as the driver's is
            "kernel.hipfb": (bundler_of(compiler), "-type=o", "-bundle-align=4096",
                             f"-targets=host-x86_64-unknown-linux,hipv4-amdgcn-amd-amdhsa--{arch}",
                             "-input=/dev/null", "-input=kernel.co", "-output=kernel.hipfb"),
            # (the driver passes -cuid to the device compile only: the host's by -Xclang)
            "kernel.o": (*compile_, "-Xclang", CUID, "--offload-host-only", "-fPIC", "-c",
                         "kernel.hip", "-o", "kernel.o", "-Xclang", "-fcuda-include-gpubinary",
                         "-Xclang", "kernel.hipfb")}
    return {
        **kernel,
        # the harness holds no device code: its host side alone (a third less time); the
        # same text for every kernel (ptc.runtime.harness)
        "harness.o": (*compile_, "--offload-host-only", "-fPIC", "-c", "harness.hip", "-o",
                      "harness.o"),
        # the kernel's signature for the harness: data, plain C++
        "signature.o": (*plain, "-fPIC", "-c", "signature.cc", "-o", "signature.o"),
        LIBRARY: (*link, "-shared", *OBJECTS, "-o", LIBRARY),
        EXECUTABLE: (*link, *OBJECTS, "-o", EXECUTABLE),
    }


# (output, inputs, stage) of each flavour's steps: the steps of a stage run at once
HARNESS_STEPS = (("harness.o", ("harness.hip", "npy.h", "ptc_signature.h"), 0),
                 ("signature.o", ("signature.cc", "ptc_signature.h"), 0))
WHOLE_STEPS = {
    "hipcc": (("kernel.o", ("kernel.hip",), 0), *HARNESS_STEPS, ("kernel.s", ("kernel.hip",), 0),
              (LIBRARY, OBJECTS, 1), (EXECUTABLE, OBJECTS, 1)),
    "clang": (("kernel.s", ("kernel.hip",), 0), *HARNESS_STEPS,
              ("kernel.co", ("kernel.s",), 1), ("kernel.hipfb", ("kernel.co",), 2),
              ("kernel.o", ("kernel.hip", "kernel.hipfb"), 3),
              (LIBRARY, OBJECTS, 4), (EXECUTABLE, OBJECTS, 4)),
}


class HipToolchain(Toolchain):
    def find(self, arch: str) -> Compiler:
        return find_compiler(arch)

    def default(self, arch: str) -> Compiler:
        return Compiler("hipcc", "hipcc", "hipcc")      # what a ROCm install has

    def steps(self, arch: str, compiler: Compiler) -> tuple[Step, ...]:
        cmd = hip_commands(arch, compiler)
        return tuple(Step(output, inputs, cmd[output], stage)
                     for output, inputs, stage in WHOLE_STEPS[compiler.flavour])

    def check(self, arch: str, compiler: Compiler,
              folder: Path | None = None) -> tuple[tuple[Step, ...], str]:
        """kernel.s, its system headers read from a precompiled prelude where one can be
        built (ptc.targets.hip.prelude: the same assembly, a third less time)."""
        steps, report = super().check(arch, compiler, folder)
        if folder is None:
            return steps, report
        env = {**os.environ, **environment(compiler.flavour)}
        return tuple(with_prelude(s, compiler, Path(folder), env) for s in steps), report

    def environment(self, compiler: Compiler) -> dict[str, str]:
        return environment(compiler.flavour)

    def parse(self, report: str):
        return parse_isa(report)

    def find_gpus(self) -> list:
        return driver.find_gpus()


TOOLCHAIN = HipToolchain(
    backend="hip", language="HIP", kernel_file="kernel.hip", harness_file="harness.hip",
    harness_template="harness.hip.j2", log_file="hip.log",
    report_file="kernel.s", report_name="isa", report_step="", hint=HIP_HINT,
    gpu="an AMD GPU")
