"""A precompiled prelude for the HIP machine-code checks: the device compile of kernel.hip
to kernel.s reads the kernel's leading system headers (and the HIP wrapper header every
HIP compile includes first, most of a small kernel's time) from a precompiled header.

Only a check's compile (`build(report_only=True)`: the ISA report) takes it; build.sh and a
whole build run the plain commands. The assembly is the same, byte for byte
(tests/test_hip_build.py checks it): a precompiled header holds the declarations the
kernel's own `#include <...>` lines would have parsed, and is taken only where those lines
come first in kernel.hip. One header per compiler, flags and include lines, kept in the
stage cache's root (`objects/pch/`) with the size and modification time of every header
it read (from the compiler's dependency list): a header changed since (a package
upgrade) builds it again, where clang would refuse the stale one. Where it cannot be
built, the check compiles as build.sh does, and the failure is kept so that it is not
tried before every build.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from ptc.stage_cache import cache_root, enabled
from ptc.runtime.object_cache import tool_identity
from ptc.runtime.toolchain import Compiler, Step

PRELUDE = "prelude.h"
PCH = "prelude.pch"
INPUTS = "inputs.txt"          # each header the precompiled one read: path, size, mtime
FAILED = "failed.txt"
ABANDONED_SECONDS = 600       # a folder without its header this long: its builder died
_COMMENT_OR_BLANK = re.compile(r"\s*(//.*)?$")
_SYSTEM_INCLUDE = re.compile(r"\s*#\s*include\s*<[^>]+>\s*$")


def leading_system_includes(source: str) -> str:
    """The `#include <...>` lines a source starts with (after its comment lines), as
    text; "" where it starts with anything else."""
    lines = []
    for line in source.splitlines():
        if _SYSTEM_INCLUDE.match(line):
            lines.append(line.strip())
        elif lines or not _COMMENT_OR_BLANK.match(line):
            break
    return "".join(f"{line}\n" for line in lines)


def with_prelude(step: Step, compiler: Compiler, folder: Path, env: dict[str, str]) -> Step:
    """`step` (kernel.hip -> kernel.s) reading the kernel's leading system headers from a
    precompiled header; `step` itself where there is none (no such lines, the stage cache
    off, or a header the compiler could not precompile)."""
    kernel = folder / "kernel.hip"
    if not enabled() or "kernel.hip" not in step.command or not kernel.is_file():
        return step
    text = leading_system_includes(kernel.read_text(errors="replace"))
    if not text:
        return step
    at = step.command.index("kernel.hip")
    flags = list(step.command[1:at])
    where = _entry(compiler, flags, text)
    if not _current(where):
        _precompile(where, compiler, flags, text, env)
    if not _current(where):
        return step
    command = (*step.command[:at], "-include-pch", str(where / PCH), *step.command[at:])
    return Step(step.output, step.inputs, command, step.stage)


def _entry(compiler: Compiler, flags: list[str], text: str) -> Path:
    h = hashlib.sha256()
    tool_identity(h, compiler.path)
    h.update(b"\0" + "\0".join(flags).encode() + b"\0" + text.encode())
    return cache_root() / "objects" / "pch" / h.hexdigest()[:40]


def _stamp(path: str) -> str:
    st = os.stat(path)
    return f"{path}\t{st.st_size}\t{st.st_mtime_ns}"


def _current(where: Path) -> bool:
    """Whether `where` holds a precompiled header whose headers are as it read them."""
    try:
        recorded = (where / INPUTS).read_text().splitlines()
        return (where / PCH).is_file() and \
            all(_stamp(line.split("\t")[0]) == line for line in recorded)
    except OSError:
        return False


def _dependencies(deps: str) -> list[str]:
    """The headers of a make-style dependency file (its target and the prelude dropped)."""
    words = deps.replace("\\\n", " ").split()
    return sorted({w for w in words[1:] if not w.endswith(":") and Path(w).name != PRELUDE})


def _precompile(where: Path, compiler: Compiler, flags: list[str], text: str,
                env: dict[str, str]) -> None:
    """Build the precompiled header in `where` itself (the header names its prelude.h by
    path: it stays beside it), or its failure note. The folder is the lock: a process
    that finds it being built compiles without the header meanwhile."""
    if (where / FAILED).is_file():
        return
    if where.is_dir() and not (where / PCH).is_file():
        try:          # being built, or left half-built by a process that died
            if time.time() - where.stat().st_mtime < ABANDONED_SECONDS:
                return
        except OSError:
            return
    shutil.rmtree(where, ignore_errors=True)        # stale: a header changed since
    try:
        where.mkdir(parents=True)
    except OSError:
        return                                      # another process builds it
    try:
        (where / PRELUDE).write_text(text)
        # -x hip: a hipcc takes the language from the file's name, a header's is not .hip
        cmd = [compiler.path, *(flags if "-x" in flags else ["-x", "hip", *flags]),
               "-Xclang", "-emit-pch", "-MD", "-MF", "deps.d", PRELUDE, "-o", PCH + ".tmp"]
        proc = subprocess.run(cmd, cwd=where, capture_output=True, text=True,
                              errors="replace", env={**env, "TMPDIR": str(where)})
        if proc.returncode == 0 and (where / (PCH + ".tmp")).is_file():
            deps = _dependencies((where / "deps.d").read_text())
            (where / INPUTS).write_text("".join(_stamp(d) + "\n" for d in deps))
            os.rename(where / (PCH + ".tmp"), where / PCH)     # complete, or absent
        else:
            (where / FAILED).write_text(proc.stdout[-2000:] + proc.stderr[-4000:])
    except OSError:
        shutil.rmtree(where, ignore_errors=True)
