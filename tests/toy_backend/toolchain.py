"""The toy has no compiler: a build says so in one line, and the emulator runs its kernels."""
from pathlib import Path

from ptc.runtime.errors import BuildError
from ptc.runtime.toolchain import Compiler, Toolchain


class NoCompiler(Toolchain):
    def find(self, arch: str) -> Compiler:
        raise BuildError(f"there is no compiler for {arch} (the toy backend)", hint=self.hint)

    def default(self, arch: str) -> Compiler:
        return Compiler("toycc", "toycc", "toycc")

    def disassemble(self, folder: Path) -> str:
        raise BuildError("the toy backend has no machine code", hint=self.hint)


TOOLCHAIN = NoCompiler(
    backend="toy", language="toy CUDA", kernel_file="kernel.cu", harness_file="harness.cu",
    harness_template="harness.cu.j2", log_file="toy.log", report_file="", report_name="",
    report_step="", hint="run it on the CPU emulator: ptc run --emulate", gpu="a toy GPU")
