"""The pipeline, in one place: each stage is one function; `STAGES` lists them in order.

    source bytes --decode/parse--> ast.Module --check--> typed.Program --interpret--> arrays

Later issues append stask / plan / render / build here.
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

import numpy as np

from . import ast
from .diagnostics import CompileError, Diagnostic
from .grammar import decode_source, parse
from .sema import check
from .sema.typed import Program, TypedKernel

STAGES = ("ast", "typed")


def read_source(path: str | Path) -> tuple[str, str]:
    """(filename, text) of a .pt file; a missing or unreadable file is a diagnostic."""
    filename = str(path)
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise CompileError(Diagnostic(f"{filename}: no such file")) from None
    except IsADirectoryError:
        raise CompileError(Diagnostic(f"{filename} is a directory, not a .pt file")) from None
    except OSError as exc:
        raise CompileError(Diagnostic(f"cannot read {filename}: {exc.strerror}")) from None
    return filename, decode_source(data, filename)


def parse_file(path: str | Path) -> ast.Module:
    filename, text = read_source(path)
    return parse(text, filename)


def check_file(path: str | Path, shapes: Mapping[str, int] | None = None) -> Program:
    return check(parse_file(path), dict(shapes or {}))


def select_kernel(program: Program, name: str | None) -> TypedKernel:
    if name is None:
        if len(program.kernels) == 1:
            return program.kernels[0]
        names = ", ".join(k.name for k in program.kernels) or "none"
        raise CompileError(Diagnostic(
            f"{program.filename} holds {len(program.kernels)} kernels ({names})",
            hint="choose one with --kernel NAME"))
    for k in program.kernels:
        if k.name == name:
            return k
    names = ", ".join(k.name for k in program.kernels) or "none"
    raise CompileError(Diagnostic(f"no kernel named {name!r} in {program.filename}",
                                  hint=f"kernels here: {names}"))


def interpret(path: str | Path, inputs: Mapping[str, np.ndarray] | None = None, *,
              kernel: str | None = None, shapes: Mapping[str, int] | None = None,
              tiles: Mapping[str, int] | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """Run a kernel of a .pt file on the reference interpreter; returns outputs by name.

    Dims not in `shapes` come from the inputs' shapes, then from the kernel's `dims` line.
    Inputs not given are drawn at random (seeded).
    """
    from .interp import run_kernel

    inputs = dict(inputs or {})
    module = parse_file(path)
    shapes = {**dims_from_inputs(module, kernel, inputs), **(shapes or {})}
    program = check(module, shapes)
    return run_kernel(select_kernel(program, kernel), inputs, shapes=shapes,
                      tiles=tiles or {}, seed=seed)


def dims_from_inputs(module: ast.Module, kernel: str | None,
                     inputs: Mapping[str, object]) -> dict[str, int]:
    """Dim sizes that the given input arrays imply, so that a dim needed at compile time
    can come from the data; conflicts are left for the interpreter to report."""
    sizes: dict[str, int] = {}
    for k in module.kernels:
        if kernel is not None and k.name != kernel or kernel is None and len(module.kernels) > 1:
            continue
        for p in k.params:
            if p.name not in inputs or not isinstance(p.type, ast.TensorType):
                continue
            shape = np.shape(inputs[p.name])
            if len(shape) == len(p.type.dims):
                for d, n in zip(p.type.dims, shape):
                    if isinstance(d.name, str):
                        sizes.setdefault(d.name, int(n))
    return sizes
