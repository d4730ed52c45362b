"""The build directory: writing it (atomically) and building it with the target's toolchain.

A directory holds everything needed to rebuild and run one kernel without ptc:

    kernel.cu / .hip the kernel (from the renderer, or hand-written), with the ABI entry
                     points ptc_launch / ptc_kernel_name
    harness.cu / .hip  the host side: a C ABI for ctypes and `ptc_run DIR`
                     (templates/host/harness.j2, in the backend's runtime names), the same
                     text for every kernel
    signature.cc     the kernel's signature as the tables the harness reads
    *.cuh, *.h       the backend's device headers (ptc/targets/<backend>/templates) and the
                     harness's npy.h and ptc_signature.h (templates/host)
    plan.json        the plan the kernel was rendered from (empty object for a hand-written one)
    signature.json   the kernel's calling convention (`ptc.runtime.signature`)
    manifest.json    kernel, target, arch, backend, ptc version
    build.sh         the exact commands; Makefile: the same as make rules

and after `build`: kernel.o, harness.o, signature.o, libptc_kernel.so, ptc_run, the raw
resource report (ptxas.txt: nvcc's `ptxas -v`; kernel.s: the HIP kernel's device assembly)
and build.json (the commands, the parsed report, the time taken). Which compiler, which
commands and which report is the backend's Toolchain (ptc.runtime.toolchains); nothing here
names a backend.

Writing goes to DIR.tmp-XXXX, renamed to DIR when complete: nothing half-written is left
when a step fails, and an existing build directory is only replaced by a complete one.
When the compiler fails, the sources stay in DIR for inspection and the error names it.
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

from .. import targets
from ..device_headers import SUFFIXES as HEADER_SUFFIXES
from ..device_headers import device_headers as shared_device_headers
from ..version import __version__
from . import object_cache
from .errors import BuildError
from .harness import SIGNATURE_SOURCE, TEMPLATES, render_harness, render_signature
from .signature import Signature
from .toolchain import EXECUTABLE, LIBRARY, Compiler, Step, Toolchain
from .toolchains import toolchain, toolchains

MARKER = "signature.json"   # what makes a directory a ptc build directory


# ---- writing --------------------------------------------------------------------------
def is_build_dir(path: Path) -> bool:
    return (path / MARKER).is_file() and any((path / t.kernel_file).is_file()
                                             for t in toolchains())


def backend_of(directory: Path) -> str:
    """The backend a build directory was written for (directories before HIP: cuda)."""
    return read_manifest(directory).get("backend", "cuda")


def device_headers(backend: str = "cuda") -> list[Path]:
    """The headers the kernel may include: its backend's templates folder's and the shared
    ones."""
    return shared_device_headers(targets.backend(backend).template_folders())


def host_headers() -> list[Path]:
    """The harness's headers (templates/host: npy.h, ptc_signature.h), the same for every
    backend."""
    folder = TEMPLATES / "host"
    return sorted(p for p in folder.iterdir() if p.suffix in HEADER_SUFFIXES and p.is_file())


def headers(backend: str = "cuda") -> list[Path]:
    """Every header a build directory holds beside its sources."""
    return device_headers(backend) + host_headers()


def write_build_dir(directory: str | Path, *, kernel_source: str, signature: Signature,
                    arch: str, target: str = "", plan_json: str = "{}\n",
                    backend: str = "cuda") -> Path:
    """Write a complete build directory at `directory` (replacing an earlier one). Its
    build.sh names the compiler `ptc build` would use here (or, where there is none, the
    toolchain's usual one)."""
    chain = toolchain(backend)
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
        compiler = chain.named(arch)
        files = {
            chain.kernel_file: kernel_source,
            chain.harness_file: render_harness(backend),
            SIGNATURE_SOURCE: render_signature(signature),
            "plan.json": plan_json if plan_json.endswith("\n") else plan_json + "\n",
            MARKER: signature.to_json(),
            "manifest.json": json.dumps({"kernel": signature.kernel, "target": target,
                                         "arch": arch, "backend": backend,
                                         "ptc": __version__}, indent=2) + "\n",
            "build.sh": build_script(arch, backend, compiler),
            "Makefile": makefile(arch, backend, compiler),
        }
        for name, text in files.items():
            (tmp / name).write_text(text)
        (tmp / "build.sh").chmod(0o755)
        _copy_headers(tmp, backend)
        _swap_in(tmp, target_dir)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError):
            raise BuildError(f"cannot write {target_dir}: {exc.strerror or exc}") from None
        raise
    return target_dir


def _copy_headers(folder: Path, backend: str) -> None:
    for header in headers(backend):
        shutil.copyfile(header, folder / header.name)


def build_staged(directory: str | Path, write: Callable[[Path], None], arch: str, *,
                 echo: Callable[[str], None] | None = None) -> BuildResult:
    """Write (`write(folder)`) and build `directory`. Where it holds an earlier build, the
    new one is built beside it, in DIR.new, and put in its place only when the build
    succeeded:
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
def tried_steps(chain: Toolchain, steps, attempt: int) -> tuple[Step, ...]:
    """The steps with the kernel's compiles asked again (`attempt` > 0: the toolchain's
    retry where the report showed spills)."""
    if not attempt:
        return tuple(steps)
    return tuple(chain.retried(s, attempt) or s if chain.kernel_file in s.inputs else s
                 for s in steps)


def build_script(arch: str, backend: str = "cuda", compiler: Compiler | None = None,
                 attempt: int = 0) -> str:
    chain = toolchain(backend)
    compiler = compiler or chain.named(arch)
    lines = ["#!/bin/sh",
             "# The exact commands `ptc build` runs (written by ptc). Run from anywhere:",
             "#   sh build.sh            then   ./ptc_run DIR",
             "set -e", 'cd "$(dirname "$0")"']
    lines += [f"export {k}={shlex.quote(v)}" for k, v in chain.environment(compiler).items()]
    lines += [shlex.join(step.command)
              for step in tried_steps(chain, chain.steps(arch, compiler), attempt)]
    return "\n".join(lines) + "\n"


def makefile(arch: str, backend: str = "cuda", compiler: Compiler | None = None,
             attempt: int = 0) -> str:
    chain = toolchain(backend)
    compiler = compiler or chain.named(arch)
    steps = tried_steps(chain, chain.steps(arch, compiler), attempt)
    kernel_deps = [h.name for h in device_headers(backend)]
    out = ["# Written by ptc: the commands of build.sh as make rules (`make -j2`).", ""]
    out += [f"export {k} = {v}\n" for k, v in chain.environment(compiler).items()]
    report = [s.output for s in steps if s.output == chain.report_file]
    out += [f"all: {' '.join([LIBRARY, EXECUTABLE] + report)}", ""]
    for step in steps:
        deps = list(step.inputs) + (kernel_deps if chain.kernel_file in step.inputs else [])
        out += [f"{step.output}: {' '.join(deps)}", "\t" + shlex.join(step.command), ""]
    out += ["clean:", f"\trm -f {' '.join(step.output for step in steps)}", "",
            ".PHONY: all clean", ""]
    return "\n".join(out)


# ---- building --------------------------------------------------------------------------
@dataclass(frozen=True)
class BuildResult:
    directory: Path
    arch: str
    commands: tuple[tuple[str, ...], ...]
    resources: object         # the toolchain's parsed report: PtxasReport, IsaReport
    seconds: float
    backend: str = "cuda"

    @property
    def library(self) -> Path:
        return self.directory / LIBRARY

    @property
    def executable(self) -> Path:
        return self.directory / EXECUTABLE

    @property
    def ptxas(self):
        """The resource report under its CUDA name (a PtxasReport for CUDA builds)."""
        return self.resources


def read_manifest(directory: Path) -> dict:
    try:
        return json.loads((directory / "manifest.json").read_text())
    except (OSError, ValueError):
        return {}


def build(directory: str | Path, arch: str | None = None, *,
          echo: Callable[[str], None] | None = None, report_only: bool = False) -> BuildResult:
    """Build a build directory with its backend's toolchain: libptc_kernel.so and ptc_run,
    and the resource report (ptxas's, or the HIP kernel's assembly).

    `arch` (e.g. sm_80, sm_90a, gfx942) defaults to the one in the directory's manifest.
    `echo`, if given, gets each command line before it runs. `report_only`: only what a check
    of the kernel's machine code needs (the toolchain's `check`: CUDA's kernel.cubin,
    HIP's kernel.s; `sass` reads the cubin then): no harness, no host pass, no links.
    """
    folder = Path(directory)
    if not is_build_dir(folder):
        raise BuildError(f"{folder} is not a ptc build directory (no kernel source and "
                         f"{MARKER})",
                         hint="write one with `ptc compile FILE -o DIR` or ptc.compile()")
    backend = backend_of(folder)
    chain = toolchain(backend)
    arch = arch or read_manifest(folder).get("arch") or "sm_80"
    compiler = chain.find(arch)
    steps = chain.steps(arch, compiler)
    # (the folder only for a check: its steps may read the kernel, e.g. for a prelude)
    check_steps, report_step = chain.check(arch, compiler, folder if report_only else None)
    products = [s.output for s in steps + check_steps] + [chain.report_file, "build.json",
                                                         chain.log_file]
    if report_only:
        steps = check_steps
    else:
        report_step = chain.report_step
    for name in products:                 # a failed rebuild must not leave old products
        try:
            (folder / name).unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise BuildError(f"cannot write {folder}: {exc.strerror or exc}") from None
    _write_commands(folder, arch, backend, compiler, 0)
    start = time.perf_counter()
    outputs, attempt = _run_stages(steps, report_step, folder, echo, chain, compiler)
    if attempt:
        steps = list(tried_steps(chain, steps, attempt))
        _write_commands(folder, arch, backend, compiler, attempt)
    seconds = time.perf_counter() - start
    if report_step:
        (folder / chain.report_file).write_text(outputs[report_step])
    report = chain.parse((folder / chain.report_file).read_text(errors="replace"))
    result = BuildResult(folder, arch, tuple(s.command for s in steps), report, seconds,
                         backend)
    (folder / "build.json").write_text(json.dumps({
        "arch": arch, "backend": backend, "compiler": compiler.path,
        "seconds": round(seconds, 3),
        "commands": [shlex.join(c) for c in result.commands],
        chain.report_name: report.to_json()}, indent=2) + "\n")
    return result


def _write_commands(folder: Path, arch: str, backend: str, compiler: Compiler,
                    attempt: int) -> None:
    for name, text in (("build.sh", build_script(arch, backend, compiler, attempt)),
                       ("Makefile", makefile(arch, backend, compiler, attempt))):
        if not (folder / name).is_file() or (folder / name).read_text() != text:
            (folder / name).write_text(text)      # the commands that run here, exactly


def _run_stages(steps, report_step: str, folder: Path, echo, chain: Toolchain,
                compiler: Compiler) -> tuple[dict[str, str], int]:
    """Each stage's steps at once, the stages in order: (each step's output by the file it
    makes, the kernel compile's attempt kept: `_fewest_spills`)."""
    outputs: dict[str, str] = {}
    attempt = 0
    for stage in sorted({s.stage for s in steps}):
        outputs.update(_run_parallel([s for s in steps if s.stage == stage], folder, echo,
                                     chain, compiler))
        kernel = next((s for s in steps if s.stage == stage and s.output == report_step), None)
        if kernel is not None:
            attempt, outputs[report_step] = _fewest_spills(kernel, outputs[report_step],
                                                           folder, echo, chain, compiler)
    return outputs, attempt


def _fewest_spills(step: Step, report: str, folder: Path, echo, chain: Toolchain,
                   compiler: Compiler) -> tuple[int, str]:
    """(attempt, its report): the kernel compiled again while its report shows spills, as
    the toolchain asks (`retried`), keeping the first attempt without spills, else the one
    with the fewest; its object is the one left in the folder."""
    if chain.retried(step, 1) is None:
        return 0, report
    best = (chain.parse(report).spills, 0, report)
    attempt = 1
    while best[0] and (again := chain.retried(step, attempt)) is not None:
        if echo:
            echo(f"# ptxas spilled {best[0]} bytes: {step.output} again, attempt {attempt}")
        text = _run_parallel([again], folder, echo, chain, compiler)[again.output]
        spills = chain.parse(text).spills
        if spills < best[0]:
            best = (spills, attempt, text)
        attempt += 1
    if attempt > 1 and best[1] != attempt - 1:     # the folder holds the last attempt's
        chosen = chain.retried(step, best[1]) if best[1] else step
        _run_parallel([chosen], folder, echo, chain, compiler)
    return best[1], best[2]


def _run_parallel(steps: list[Step], folder: Path, echo: Callable[[str], None] | None,
                  chain: Toolchain, compiler: Compiler) -> dict[str, str]:
    """Run steps at once in `folder`; each one's combined stdout+stderr by its output. The
    first failure (in order) raises BuildError with its output, the sources kept."""
    # the compilers' own temporaries (clang's HIP driver leaves empty `kernel-XXXXXX`
    # folders in $TMPDIR) go to a folder of ours that is removed after the steps
    scratch = tempfile.mkdtemp(prefix=".compiler-tmp-", dir=Path(folder).resolve())
    env = {**os.environ, **chain.environment(compiler), "TMPDIR": scratch}
    try:
        return _run_steps(steps, folder, echo, chain, compiler, env)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _run_steps(steps: list[Step], folder: Path, echo: Callable[[str], None] | None,
               chain: Toolchain, compiler: Compiler, env: dict[str, str]) -> dict[str, str]:
    keys = {s.output: object_cache.step_key(s, compiler, folder) for s in steps
            if object_cache.cacheable(s)}
    cached = {}
    for step in steps:        # compiled before, from the same inputs: copied, not run
        if step.output in keys:
            text = object_cache.fetch(step, keys[step.output], folder)
            if text is not None:
                cached[step.output] = text
                if echo:
                    echo(f"# {step.output}: compiled before from the same inputs "
                         "(ptc.runtime.object_cache)")
    steps_run = [s for s in steps if s.output not in cached]
    procs = []
    try:
        for step in steps_run:
            if echo:
                echo(shlex.join(step.command))
            cmd = list(step.command)
            if cmd[0] == compiler.shown:      # build.sh's name for it, found here at path
                cmd[0] = compiler.path
            procs.append(subprocess.Popen(cmd, cwd=folder, env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          text=True, errors="replace"))
        outputs = [p.communicate()[0] for p in procs]
    except OSError as exc:
        raise BuildError(f"cannot run {compiler.path}: {exc.strerror or exc}",
                         hint=chain.hint) from None
    except BaseException:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        raise
    for step, p, out in zip(steps_run, procs, outputs):
        if p.returncode != 0:
            with open(folder / chain.log_file, "a") as log:
                log.write(f"$ {shlex.join(step.command)}\n{out}\n")
            raise BuildError(
                f"{Path(compiler.shown).name} failed building {folder} (exit {p.returncode}):\n"
                f"$ {shlex.join(step.command)}\n{_tail(out, chain.log_file)}",
                hint=f"the sources are kept in {folder} for inspection ({chain.log_file} has "
                     f"the output); `sh {folder / 'build.sh'}` reruns the build")
    for step, out in zip(steps_run, outputs):
        if step.output in keys:
            object_cache.store(step, keys[step.output], folder, out)
    return {**cached, **{step.output: out for step, out in zip(steps_run, outputs)}}


def _tail(text: str, log: str = "nvcc.log", lines: int = 80) -> str:
    kept = text.rstrip().splitlines()
    if len(kept) > lines:
        kept = [f"... ({len(kept) - lines} lines above, in {log})"] + kept[-lines:]
    return "\n".join(kept)


def sass(directory: str | Path) -> str:
    """The machine code of the kernel built in `directory`, as its backend's toolchain
    disassembles it (CUDA: cuobjdump's SASS); BuildError where it cannot."""
    return toolchain(backend_of(Path(directory))).disassemble(Path(directory))
