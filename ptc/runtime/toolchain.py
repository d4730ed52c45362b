"""What a build directory is built with: one Toolchain per backend (each backend package's
toolchain.py, ptc.targets; ptc.runtime.toolchains finds it), chosen by the device
description's `backend`. A toolchain finds its compiler (with a hint when there is
none), spells the build as Steps -- which build.sh, the Makefile and `ptc build` all run --
and says where the resource report comes from and how to read it. ptc.runtime.build knows
no backend by name.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .errors import BuildError, NoDevice

LIBRARY = "libptc_kernel.so"     # every backend's products, for ctypes and for the shell
EXECUTABLE = "ptc_run"

@dataclass(frozen=True)
class Compiler:
    path: str          # the executable that runs
    shown: str         # how build.sh and the Makefile name it (as found on PATH, or the path)
    flavour: str       # decides the flags: nvcc, hipcc or clang


@dataclass(frozen=True)
class Step:
    output: str                  # the file it makes (a Makefile target)
    inputs: tuple[str, ...]      # the files it reads (the target's prerequisites)
    command: tuple[str, ...]
    stage: int                   # the steps of one stage run at once, the stages in order


@dataclass(frozen=True)
class Toolchain:
    backend: str                 # the device YAML's `backend`
    language: str                # CUDA, HIP: for messages
    kernel_file: str             # the rendered kernel's name in the build directory
    harness_file: str
    harness_template: str        # in its backend's templates folder (ptc.targets)
    log_file: str                # the failing command's output is appended here
    report_file: str             # the raw resource report, kept in the directory
    report_name: str             # its key in build.json and `ptc build --json`: ptxas, isa
    report_step: str             # the step whose output is the report ("": a step writes
                                 # report_file itself)
    hint: str                    # what to do when the compiler is missing
    gpu: str                     # what runs its kernels: "an NVIDIA GPU", "an AMD GPU"
    runs: bool = False           # ptc bench and ptc.compile()'s kernels run them on that GPU
    reads_sass: bool = False     # the built library's SASS can be read (cuobjdump)

    def release(self, path: str | None = None) -> str:
        """The release of its compiler (`path`, else the one it finds), for keys that a new
        compiler must invalidate (ptc.tune's); "" where there is none or it does not say."""
        return ""

    def disassemble(self, folder: Path) -> str:
        """The machine code of the kernel built in `folder` (where `reads_sass`)."""
        raise BuildError(f"ptc reads no {self.language} machine code here")

    def find(self, arch: str) -> Compiler:
        """The compiler that builds for `arch`; BuildError (with `hint`) when there is none."""
        raise NotImplementedError

    def default(self, arch: str) -> Compiler:
        """The compiler a build directory names when none is installed where it is written."""
        raise NotImplementedError

    def named(self, arch: str) -> Compiler:
        """find(), else default(): build.sh can be written without a compiler."""
        try:
            return self.find(arch)
        except BuildError:
            return self.default(arch)

    def steps(self, arch: str, compiler: Compiler) -> tuple[Step, ...]:
        raise NotImplementedError

    def check(self, arch: str, compiler: Compiler,
              folder: Path | None = None) -> tuple[tuple[Step, ...], str]:
        """(the steps a check of the kernel's machine code needs alone, the step whose
        output is the report, "" where a step writes report_file): `build(report_only=True)`
        of `folder`. By default the full build's kernel step that the report comes from."""
        steps = tuple(s for s in self.steps(arch, compiler)
                      if s.output in (self.report_step, self.report_file))
        return steps, self.report_step

    def environment(self, compiler: Compiler) -> dict[str, str]:
        """Variables the commands need (exported by build.sh and the Makefile too)."""
        return {}

    def find_gpus(self) -> list:
        """This backend's GPUs on this machine, as its driver lists them
        (ptc.runtime.library.GpuInfo); NoDevice saying why where there are none."""
        raise NoDevice(f"ptc finds no {self.language} GPUs",
                       hint=f"ptc builds {self.language} here; running needs {self.gpu}")

    def can_run(self, gpu, arch: str) -> bool:
        """Whether code built for `arch` runs on `gpu` (a GpuInfo of this backend)."""
        return gpu.arch == arch

    def family(self, arch: str) -> str:
        """What GPUs of `arch` share with the device description whose peaks describe
        them (ptc.runtime.measured.peaks_target)."""
        return arch

    def why_no_device(self) -> str | None:
        """Why the driver sees no GPU, where it can say (asked when the runtime sees none)."""
        return None

    def retried(self, step: Step, attempt: int) -> Step | None:
        """The kernel's compile asked again, where the report shows spills (attempt 1, 2,
        ..), or None: no other attempt (the default: a backend without retries)."""
        return None

    def parse(self, report: str):
        """The resource report (a PtxasReport, an IsaReport) from report_file's text."""
        raise NotImplementedError
