"""The build directory: writing it (atomically) and building it with nvcc.

A directory holds everything needed to rebuild and run one kernel without ptc:

    kernel.cu        the kernel (from the renderer, or hand-written), with the ABI entry
                     points ptc_launch / ptc_kernel_name
    harness.cu       the host side: a C ABI for ctypes and `ptc_run DIR` (templates/cuda)
    *.cuh, *.h       the headers of templates/cuda that the sources include (npy.h, ...)
    plan.json        the plan the kernel was rendered from (empty object for a hand-written one)
    signature.json   the kernel's calling convention (`ptc.runtime.signature`)
    manifest.json    kernel, target, arch, ptc version
    build.sh         the exact nvcc commands; Makefile: the same as make rules

and after `build`: kernel.o, harness.o, libptc_kernel.so, ptc_run, ptxas.txt (the raw
`ptxas -v` report) and build.json (the commands, the parsed report, the time taken).

Writing goes to DIR.tmp-XXXX, renamed to DIR when complete: nothing half-written is left
when a step fails, and an existing build directory is only replaced by a complete one.
When nvcc fails, the sources stay in DIR for inspection and the error names the directory.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from ..version import __version__
from .errors import BuildError
from .harness import TEMPLATES, render_harness
from .ptxas import PtxasReport, parse_ptxas
from .signature import Signature

LIBRARY = "libptc_kernel.so"
EXECUTABLE = "ptc_run"
PRODUCTS = ("kernel.o", "harness.o", LIBRARY, EXECUTABLE, "ptxas.txt", "build.json", "nvcc.log")
MARKER = "signature.json"   # what makes a directory a ptc build directory
NVCC_HINT = ("install the CUDA toolkit (nvcc), or put its bin/ folder on PATH "
             "(e.g. export PATH=/usr/local/cuda/bin:$PATH) or set CUDA_HOME")


# ---- writing --------------------------------------------------------------------------
def is_build_dir(path: Path) -> bool:
    return (path / MARKER).is_file() and (path / "kernel.cu").is_file()


def headers(backend: str = "cuda") -> list[Path]:
    """The device and host headers that kernel.cu and harness.cu may include."""
    folder = TEMPLATES / backend
    return sorted(p for p in folder.iterdir() if p.suffix in (".cuh", ".h") and p.is_file())


def write_build_dir(directory: str | Path, *, kernel_source: str, signature: Signature,
                    arch: str, target: str = "", plan_json: str = "{}\n") -> Path:
    """Write a complete build directory at `directory` (replacing an earlier one)."""
    target_dir = Path(directory)
    if target_dir.exists():
        if not target_dir.is_dir():
            raise BuildError(f"cannot write {target_dir}: it is a file, not a directory")
        if any(target_dir.iterdir()) and not is_build_dir(target_dir):
            raise BuildError(f"{target_dir} exists and is not a ptc build directory "
                             f"(it has no {MARKER}); ptc will not replace it",
                             hint="choose another -o directory, or remove this one")
    parent = target_dir.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f"{target_dir.name}.tmp-", dir=parent))
    except OSError as exc:
        raise BuildError(f"cannot write {target_dir}: {exc.strerror or exc}") from None
    try:
        files = {
            "kernel.cu": kernel_source,
            "harness.cu": render_harness(signature),
            "plan.json": plan_json if plan_json.endswith("\n") else plan_json + "\n",
            MARKER: signature.to_json(),
            "manifest.json": json.dumps({"kernel": signature.kernel, "target": target,
                                         "arch": arch, "ptc": __version__}, indent=2) + "\n",
            "build.sh": build_script(arch),
            "Makefile": makefile(arch),
        }
        for name, text in files.items():
            (tmp / name).write_text(text)
        (tmp / "build.sh").chmod(0o755)
        _copy_headers(tmp)
        _swap_in(tmp, target_dir)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError):
            raise BuildError(f"cannot write {target_dir}: {exc.strerror or exc}") from None
        raise
    return target_dir


def _copy_headers(folder: Path) -> None:
    for header in headers():
        shutil.copyfile(header, folder / header.name)


def build_staged(directory: str | Path, write: Callable[[Path], None], arch: str, *,
                 echo: Callable[[str], None] | None = None) -> BuildResult:
    """Write (`write(folder)`) and build `directory`. Where it holds an earlier build, the
    new one is built beside it, in DIR.new, and put in its place only when nvcc succeeded:
    a failed build leaves the earlier one untouched, and its sources in DIR.new for
    inspection (the error names it)."""
    target = Path(directory)
    if target.exists() and not target.is_dir():
        raise BuildError(f"cannot write {target}: it is a file, not a directory")
    if target.is_dir() and any(target.iterdir()) and not is_build_dir(target):
        raise BuildError(f"{target} exists and is not a ptc build directory (it has no "
                         f"{MARKER}); ptc will not replace it",
                         hint="choose another -o directory, or remove this one")
    if not target.exists() or not any(target.iterdir()):   # nothing to keep: build in place
        write(target)
        return build(target, arch, echo=echo)
    stage = target.parent / f"{target.name}.new"
    if stage.exists() and not is_build_dir(stage):
        raise BuildError(f"{stage} exists and is not a ptc build directory; ptc builds there "
                         "before replacing " + str(target), hint="remove it")
    write(stage)
    result = build(stage, arch, echo=echo)
    try:
        _swap_in(stage, target)
    except OSError as exc:
        raise BuildError(f"cannot replace {target}: {exc.strerror or exc}") from None
    return replace(result, directory=target)


def _swap_in(tmp: Path, target: Path) -> None:
    """Rename the finished `tmp` to `target`; an old `target` is removed only after."""
    if not target.exists():
        os.rename(tmp, target)
        return
    old = Path(tempfile.mkdtemp(prefix=f"{target.name}.old-", dir=target.parent))
    os.rmdir(old)
    os.rename(target, old)
    try:
        os.rename(tmp, target)
    except OSError:
        os.rename(old, target)
        raise
    shutil.rmtree(old, ignore_errors=True)


# ---- the commands ----------------------------------------------------------------------
def nvcc_commands(arch: str, nvcc: str = "nvcc") -> list[list[str]]:
    """The build, in order: the kernel and the harness compile to objects (each once, with
    -fPIC, so both products share them; ptxas -v reports the kernel's resources), then the
    shared library for ctypes and the `ptc_run` executable link from the same objects."""
    common = [nvcc, "-O3", "-std=c++17", *gencode(arch), "-lineinfo"]
    return [
        common + ["-Xptxas", "-v", "-Xcompiler", "-fPIC", "-c", "kernel.cu", "-o", "kernel.o"],
        common + ["-Xcompiler", "-fPIC", "-c", "harness.cu", "-o", "harness.o"],
        common + ["-shared", "kernel.o", "harness.o", "-o", LIBRARY],
        common + ["kernel.o", "harness.o", "-o", EXECUTABLE],
    ]


def gencode(arch: str) -> list[str]:
    """The machine code for `arch` and its PTX (for a newer GPU's JIT). Spelled out: plain
    `-arch=sm_90a` also compiles compute_90 PTX, which rejects wgmma and setmaxnreg."""
    virtual = arch.replace("sm_", "compute_")
    return ["-gencode", f"arch={virtual},code=[{arch},{virtual}]"]


def build_script(arch: str) -> str:
    lines = ["#!/bin/sh",
             "# The exact commands `ptc build` runs (written by ptc). Run from anywhere:",
             "#   sh build.sh            then   ./ptc_run DIR",
             "set -e", 'cd "$(dirname "$0")"']
    lines += [shlex.join(cmd) for cmd in nvcc_commands(arch)]
    return "\n".join(lines) + "\n"


def makefile(arch: str) -> str:
    compile_kernel, compile_harness, link_lib, link_exe = nvcc_commands(arch)
    rules = [
        ("all", [LIBRARY, EXECUTABLE], None),
        ("kernel.o", ["kernel.cu"] + [h.name for h in headers()], compile_kernel),
        ("harness.o", ["harness.cu", "npy.h"], compile_harness),
        (LIBRARY, ["kernel.o", "harness.o"], link_lib),
        (EXECUTABLE, ["kernel.o", "harness.o"], link_exe),
    ]
    out = ["# Written by ptc: the commands of build.sh as make rules (`make -j2`).", ""]
    for name, deps, cmd in rules:
        out.append(f"{name}: {' '.join(deps)}")
        if cmd:
            out.append("\t" + shlex.join(cmd))
        out.append("")
    out += ["clean:", f"\trm -f kernel.o harness.o {LIBRARY} {EXECUTABLE}", "",
            ".PHONY: all clean", ""]
    return "\n".join(out)


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


# ---- building --------------------------------------------------------------------------
@dataclass(frozen=True)
class BuildResult:
    directory: Path
    arch: str
    commands: tuple[tuple[str, ...], ...]
    ptxas: PtxasReport
    seconds: float

    @property
    def library(self) -> Path:
        return self.directory / LIBRARY

    @property
    def executable(self) -> Path:
        return self.directory / EXECUTABLE


def read_manifest(directory: Path) -> dict:
    try:
        return json.loads((directory / "manifest.json").read_text())
    except (OSError, ValueError):
        return {}


def build(directory: str | Path, arch: str | None = None, *,
          echo: Callable[[str], None] | None = None) -> BuildResult:
    """Run nvcc on a build directory: libptc_kernel.so and ptc_run, and ptxas's report.

    `arch` (e.g. sm_80, sm_90a) defaults to the one in the directory's manifest. `echo`, if
    given, gets each command line before it runs.
    """
    folder = Path(directory)
    if not is_build_dir(folder):
        raise BuildError(f"{folder} is not a ptc build directory (no kernel.cu and {MARKER})",
                         hint="write one with `ptc compile FILE -o DIR` or ptc.compile()")
    arch = arch or read_manifest(folder).get("arch") or "sm_80"
    nvcc = find_nvcc()
    for name in PRODUCTS:                 # a failed rebuild must not leave old products
        try:
            (folder / name).unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise BuildError(f"cannot write {folder}: {exc.strerror or exc}") from None
    commands = nvcc_commands(arch, nvcc)
    start = time.perf_counter()
    outputs = _run_parallel(commands[:2], folder, echo)      # the two compiles at once
    outputs += _run_parallel(commands[2:3], folder, echo)
    outputs += _run_parallel(commands[3:], folder, echo)
    seconds = time.perf_counter() - start
    report = parse_ptxas(outputs[0])
    (folder / "ptxas.txt").write_text(outputs[0])
    result = BuildResult(folder, arch, tuple(tuple(c) for c in nvcc_commands(arch)), report,
                         seconds)
    (folder / "build.json").write_text(json.dumps({
        "arch": arch, "nvcc": nvcc, "seconds": round(seconds, 3),
        "commands": [shlex.join(c) for c in result.commands],
        "ptxas": report.to_json()}, indent=2) + "\n")
    return result


def _run_parallel(commands: list[list[str]], folder: Path,
                  echo: Callable[[str], None] | None) -> list[str]:
    """Run commands at once in `folder`; their combined stdout+stderr, in order. The first
    failure (in order) raises BuildError with its output, the sources kept."""
    procs = []
    try:
        for cmd in commands:
            if echo:
                echo(shlex.join(cmd))
            procs.append(subprocess.Popen(cmd, cwd=folder, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True,
                                          errors="replace"))
        outputs = [p.communicate()[0] for p in procs]
    except OSError as exc:
        raise BuildError(f"cannot run {commands[0][0]}: {exc.strerror or exc}",
                         hint=NVCC_HINT) from None
    except BaseException:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        raise
    for cmd, p, out in zip(commands, procs, outputs):
        if p.returncode != 0:
            with open(folder / "nvcc.log", "a") as log:
                log.write(f"$ {shlex.join(cmd)}\n{out}\n")
            raise BuildError(
                f"nvcc failed building {folder} (exit {p.returncode}):\n"
                f"$ {shlex.join(cmd)}\n{_tail(out)}",
                hint=f"the sources are kept in {folder} for inspection (nvcc.log has the "
                     f"output); `sh {folder / 'build.sh'}` reruns the build")
    return outputs


def _tail(text: str, lines: int = 80) -> str:
    kept = text.rstrip().splitlines()
    if len(kept) > lines:
        kept = [f"... ({len(kept) - lines} lines above, in nvcc.log)"] + kept[-lines:]
    return "\n".join(kept)


def sass(directory: str | Path) -> str:
    """The SASS of the built kernel (`cuobjdump --dump-sass libptc_kernel.so`)."""
    library = Path(directory) / LIBRARY
    if not library.is_file():
        raise BuildError(f"{library} does not exist", hint="build it first (ptc build)")
    tool = find_cuobjdump()
    # cuobjdump runs nvdisasm, which the nvidia-cuda-nvdisasm wheel puts beside it
    env = {**os.environ, "PATH": f"{Path(tool).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run([tool, "--dump-sass", str(library)], capture_output=True, text=True,
                          errors="replace", env=env)
    if proc.returncode != 0:
        raise BuildError(f"cuobjdump failed on {library} (exit {proc.returncode}):\n"
                         f"{_tail(proc.stderr + proc.stdout)}")
    return proc.stdout

