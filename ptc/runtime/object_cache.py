"""Compiled objects kept by content: a compile step whose command, compiler and inputs were
built before is copied from the cache instead of run again. The harness of a signature
(nvcc takes ~4 s for it) is compiled once per machine, whatever kernel it is linked with,
and a kernel built again compiles nothing.

A step's key is the sha256 of its command line, its compiler (path, size and modification
time: a reinstalled compiler is a new key), and the bytes of its inputs and of every header
in the build folder (what its #includes can reach: the device headers are copied there),
sources with their comment-only lines blanked (stage_cache.code_text: a kernel rendered at
another shape differs only in its header's estimate). An entry holds the output file and
what the compiler printed (ptxas -v's report is nvcc's output for kernel.o). Only compiles
are cached (to objects and to assembly), never links: a link's inputs are these objects. A
disassembly of a built file (cuobjdump's SASS: each check of a kernel's machine code reads
it) is kept in the stage cache, keyed by the tool and the file's bytes (`disassembly`). Entries
live in the stage cache's root (ptc.stage_cache: $PTC_CACHE_DIR or ~/.cache/ptc, `objects/`)
and PTC_STAGE_CACHE=0 turns this off with it.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable

from ..stage_cache import STAGES, cache_root, code_text, enabled
from .toolchain import Compiler, Step

HEADER_SUFFIXES = (".h", ".cuh", ".hpp", ".inc")
# sources whose comment-only lines are not part of the key (stage_cache.code_text)
CODE_SUFFIXES = HEADER_SUFFIXES + (".cu", ".hip", ".cc", ".cpp")
OUTPUT_TEXT = "output.txt"


def cacheable(step: Step) -> bool:
    """A compile to an object, to assembly (HIP's kernel.s, the ISA report: every
    sample's check reads it) or to a cubin (a CUDA check's), not a link (its inputs are
    objects)."""
    return ("-c" in step.command and step.output.endswith(".o")) or \
        ("-S" in step.command and step.output.endswith(".s")) or \
        ("-cubin" in step.command and step.output.endswith(".cubin"))


def tool_identity(h, tool: str) -> None:
    """A tool's identity in a key: its path, size and modification time."""
    path = Path(tool)
    try:
        st = path.stat()
        h.update(f"{path.resolve()} {st.st_size} {st.st_mtime_ns}".encode())
    except OSError:
        h.update(tool.encode())


def step_key(step: Step, compiler: Compiler, folder: Path) -> str:
    h = hashlib.sha256()
    tool_identity(h, compiler.path)
    h.update(b"\0" + "\0".join(step.command).encode() + b"\0")
    headers = sorted(p.name for p in folder.iterdir() if p.suffix in HEADER_SUFFIXES)
    for name in sorted(set(step.inputs) | set(headers)):
        h.update(name.encode() + b"\0")
        data = (folder / name).read_bytes()
        if Path(name).suffix in CODE_SUFFIXES:
            data = code_text(data.decode(errors="surrogateescape")).encode(
                errors="surrogateescape")
        h.update(data)
        h.update(b"\0")
    return h.hexdigest()


def entry(key: str) -> Path:
    return cache_root() / "objects" / key[:2] / key


def fetch(step: Step, key: str, folder: Path) -> str | None:
    """Copy the cached output of `step` into `folder`; what the compiler printed, or None
    when there is no entry."""
    if not enabled():
        return None
    where = entry(key)
    try:
        text = (where / OUTPUT_TEXT).read_text()
        shutil.copyfile(where / step.output, folder / step.output)
    except OSError:
        return None
    return text


def store(step: Step, key: str, folder: Path, output: str) -> None:
    """Keep what a successful compile made (a failure to store costs time, not results)."""
    if not enabled():
        return
    where = entry(key)
    if where.is_dir():
        return
    try:
        where.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=where.parent, prefix=".tmp-"))
        shutil.copyfile(folder / step.output, tmp / step.output)
        (tmp / OUTPUT_TEXT).write_text(output)
        os.rename(tmp, where)         # atomic; another writer's entry wins
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True) if "tmp" in locals() else None


def disassembly(tool: str, args: tuple[str, ...], file: Path, run: Callable[[], str]) -> str:
    """What `tool args file` prints (`run` runs it), kept by the tool and the file's bytes in
    the stage cache (`disassembly` entries): the same built kernel is disassembled once per
    machine."""
    h = hashlib.sha256()
    tool_identity(h, tool)
    h.update(b"\0" + "\0".join(args).encode() + b"\0" + file.read_bytes())
    return STAGES.get_or_compute("disassembly", h.hexdigest(), run)
