"""The CUDA toolchain: nvcc builds kernel.cu, harness.cu and signature.cc into libptc_kernel.so
and ptc_run, and `ptxas -v` (through nvcc) reports each kernel's registers, shared memory
and spills; cuobjdump reads the SASS.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

from ptc.runtime import object_cache
from ptc.runtime.errors import BuildError, NoDevice
from ptc.runtime.toolchain import EXECUTABLE, LIBRARY, Compiler, Step, Toolchain

from . import driver
from .ptxas import parse_ptxas

NVCC_HINT = ("install the CUDA toolkit (nvcc), or put its bin/ folder on PATH "
             "(e.g. export PATH=/usr/local/cuda/bin:$PATH) or set CUDA_HOME")


OBJECTS = ["kernel.o", "harness.o", "signature.o"]
STANDARD = ("-O3", "-std=c++17")     # every compile: the kernel's, the host's, a check's


def nvcc_commands(arch: str, nvcc: str = "nvcc") -> list[list[str]]:
    """The build, in order: the kernel, the harness and the signature's tables compile to
    objects (each once, with -fPIC, so both products share them; ptxas -v reports the
    kernel's resources), then the shared library for ctypes and the `ptc_run` executable
    link from the same objects. The harness and the tables hold no device code: they
    compile as host C++ (`-x c++`: no device pass), the same objects for every arch, and
    the harness the same for every kernel."""
    common = [nvcc, *STANDARD, *gencode(arch), "-lineinfo"]
    host = [nvcc, *STANDARD, "-x", "c++", "-Xcompiler", "-fPIC", "-c"]
    return [
        common + ["-Xptxas", "-v", "-Xcompiler", "-fPIC", "-c", "kernel.cu", "-o", "kernel.o"],
        host + ["harness.cu", "-o", "harness.o"],
        host + ["signature.cc", "-o", "signature.o"],
        common + ["-shared", *OBJECTS, "-o", LIBRARY],
        common + [*OBJECTS, "-o", EXECUTABLE],
    ]


def gencode(arch: str) -> list[str]:
    """The machine code for `arch` and its PTX (for a newer GPU's JIT). Spelled out: plain
    `-arch=sm_90a` also compiles compute_90 PTX, which rejects wgmma and setmaxnreg."""
    virtual = virtual_arch(arch)
    return ["-gencode", f"arch={virtual},code=[{arch},{virtual}]"]


def virtual_arch(arch: str) -> str:
    """The PTX architecture of a machine architecture: sm_90a -> compute_90a."""
    return arch.replace("sm_", "compute_")


def find_nvcc() -> str:
    """The nvcc to use: the one on PATH, else $CUDA_HOME/bin/nvcc (or $CUDA_PATH)."""
    found = shutil.which("nvcc")
    if found:
        return found
    for var in ("CUDA_HOME", "CUDA_PATH"):
        home = os.environ.get(var)
        if home and os.access(Path(home) / "bin" / "nvcc", os.X_OK):
            return str(Path(home) / "bin" / "nvcc")
    raise BuildError("nvcc not found: building a CUDA kernel needs the CUDA toolkit's nvcc "
                     "on PATH", hint=NVCC_HINT)


def find_cuobjdump(nvcc: str | None = None) -> str:
    """cuobjdump: on PATH, beside nvcc, in CUDA_HOME, or from the nvidia-cuda-cuobjdump wheel."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    folders = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            folders.append(Path(os.environ[var]) / "bin")
    try:
        folders.append(Path(nvcc or find_nvcc()).resolve().parent)
    except BuildError:
        pass
    folders.append(Path("/usr/local/cuda/bin"))
    try:
        import nvidia  # the namespace package of NVIDIA's CUDA wheels

        for root in getattr(nvidia, "__path__", []):
            folders += sorted(Path(root).glob("*/bin"))
    except ImportError:
        pass
    for folder in folders:
        if os.access(folder / "cuobjdump", os.X_OK):
            return str(folder / "cuobjdump")
    raise BuildError("cuobjdump not found (it prints the SASS of a built kernel)",
                     hint="install the CUDA toolkit's cuobjdump, or "
                          "`pip install nvidia-cuda-cuobjdump`")


CUBIN = "kernel.cubin"           # a check's build: the kernel's device code alone


class NvccToolchain(Toolchain):
    def find(self, arch: str) -> Compiler:
        return Compiler(find_nvcc(), "nvcc", "nvcc")

    def default(self, arch: str) -> Compiler:
        return Compiler("nvcc", "nvcc", "nvcc")

    def steps(self, arch: str, compiler: Compiler) -> tuple[Step, ...]:
        """The three compiles at once (ptxas -v reports the kernel's resources), then the
        library, then the executable."""
        kernel, harness, tables, library, executable = nvcc_commands(arch, compiler.shown)
        return (Step("kernel.o", ("kernel.cu",), tuple(kernel), 0),
                Step("harness.o", ("harness.cu", "npy.h", "ptc_signature.h"), tuple(harness), 0),
                Step("signature.o", ("signature.cc", "ptc_signature.h"), tuple(tables), 0),
                Step(LIBRARY, tuple(OBJECTS), tuple(library), 1),
                Step(EXECUTABLE, tuple(OBJECTS), tuple(executable), 2))

    def check(self, arch: str, compiler: Compiler,
              folder: Path | None = None) -> tuple[tuple[Step, ...], str]:
        """The kernel's device code alone (-cubin: ptxas -v and the SASS without nvcc's host
        pass, a third of kernel.o's time), with the flags kernel.o's device code gets."""
        command = (compiler.shown, *STANDARD, "-gencode", f"arch={virtual_arch(arch)},code={arch}",
                   "-lineinfo", "-Xptxas", "-v", "-cubin", "kernel.cu", "-o", CUBIN)
        return (Step(CUBIN, ("kernel.cu",), command, 0),), CUBIN

    def retried(self, step: Step, attempt: int) -> Step | None:
        """kernel.cu's PTC_REGISTER_TRY: where ptxas spilled within the registers the
        lowering's MIN_BLOCKS left it, ask for the plan's blocks per SM (1), then for one
        block (2): ptxas's own budget is an occupancy heuristic that spills a few bytes
        where a few more registers would do (docs/lowering.md, "Registers")."""
        if attempt > 2:
            return None
        flag = f"-DPTC_REGISTER_TRY={attempt}"
        command = [c for c in step.command if not c.startswith("-DPTC_REGISTER_TRY=")]
        at = command.index("-lineinfo")
        return replace(step, command=tuple(command[:at] + [flag] + command[at:]))

    def find_gpus(self) -> list:
        return driver.find_gpus()

    def can_run(self, gpu, arch: str) -> bool:
        return driver.can_run(gpu, arch)

    def family(self, arch: str) -> str:
        return driver.family(arch)

    def why_no_device(self) -> str | None:
        try:
            driver.find_gpus()
        except NoDevice as exc:
            return exc.reason
        return None

    def parse(self, report: str):
        return parse_ptxas(report)

    def disassemble(self, folder: Path) -> str:
        return sass(folder)

    def release(self, path: str | None = None) -> str:
        try:
            path = path or find_nvcc()
            out = subprocess.run([path, "--version"], capture_output=True, text=True,
                                 timeout=60).stdout
        except (BuildError, OSError, subprocess.SubprocessError):
            return ""
        return parse_nvcc_release(out)


def parse_nvcc_release(text: str) -> str:
    """`Cuda compilation tools, release 13.0, V13.0.88` -> `13.0.88`."""
    m = re.search(r"\bV(\d+\.\d+\.\d+)", text) or re.search(r"release (\d+\.\d+)", text)
    return m.group(1) if m else ""


TOOLCHAIN = NvccToolchain(
    backend="cuda", language="CUDA", kernel_file="kernel.cu", harness_file="harness.cu",
    harness_template="harness.cu.j2", log_file="nvcc.log",
    report_file="ptxas.txt", report_name="ptxas", report_step="kernel.o", hint=NVCC_HINT,
    gpu="an NVIDIA GPU", runs=True, reads_sass=True)


def _tail_of(text: str, lines: int = 80) -> str:
    kept = text.rstrip().splitlines()
    if len(kept) > lines:
        kept = [f"... ({len(kept) - lines} lines above)"] + kept[-lines:]
    return "\n".join(kept)


def sass(directory: str | Path) -> str:
    """The SASS of the built kernel (`cuobjdump --dump-sass` of kernel.o, which holds the
    same device code as libptc_kernel.so and dumps in half its time; of kernel.cubin after
    a `build(report_only=True)`; else of the library)."""
    folder = Path(directory)
    library = next((folder / name for name in ("kernel.o", "kernel.cubin")
                    if (folder / name).is_file()), folder / LIBRARY)
    if not library.is_file():
        raise BuildError(f"{library} does not exist", hint="build it first (ptc build)")
    tool = find_cuobjdump()
    # cuobjdump runs nvdisasm, which the nvidia-cuda-nvdisasm wheel puts beside it
    env = {**os.environ, "PATH": f"{Path(tool).parent}{os.pathsep}{os.environ.get('PATH', '')}"}

    def dump() -> str:
        proc = subprocess.run([tool, "--dump-sass", str(library)], capture_output=True,
                              text=True, errors="replace", env=env)
        if proc.returncode != 0:
            raise BuildError(f"cuobjdump failed on {library} (exit {proc.returncode}):\n"
                             f"{_tail_of(proc.stderr + proc.stdout)}")
        return proc.stdout

    return object_cache.disassembly(tool, ("--dump-sass",), library, dump)

