"""`ptc run`: a kernel on the reference interpreter (NumPy, no GPU) or, with --emulate, its
rendered CUDA or HIP kernel on the CPU emulator; its inputs read from an .npz and checked
against the kernel's signature, its outputs summarized or saved."""
from __future__ import annotations

import sys
import time
import zipfile
from pathlib import Path
from typing import Mapping

import click

from .. import driver
from ..diagnostics import CompileError
from ..dims import DimBinder, DimError
from ..npy_dtypes import accepted_text, to_param_dtype
from ..sema.typed import ScalarParam, TypedKernel
from .common import (checked, cli, fail, report, reported, save_atomic, shape_option,
                     tile_option, user_errors)


@cli.command(epilog="""\b
Examples:
  ptc run samples/gemm.pt --shape M=200,N=136,K=72 --tile BM=64,BN=64,BK=32
  ptc run samples/gemm.pt --shape M=256,N=256,K=64 --inputs in.npz --output out.npz
  ptc run samples/gemm.pt --shape M=200,N=136,K=72 --target sm80 --emulate
  ptc run samples/gemm.pt --shape M=64,N=64,K=64 -t sm80 --emulate --order random --eager
  ptc run samples/gemm.pt --shape M=200,N=136,K=72 --target gfx942 --emulate""")
@click.argument("file")
@click.option("--kernel", "kernel_name", metavar="NAME",
              help="The kernel to run (needed when FILE holds several).")
@shape_option
@tile_option
@click.option("--inputs", "inputs_path", metavar="IN.npz",
              help="Input arrays and scalars by parameter name (np.savez); each one the "
                   "kernel takes must be there, unless --random-inputs. Each array holds "
                   "its parameter's dtype; bf16 may also be raw bits (uint16) or float32 "
                   "(rounded), as for the build's ptc_run. Without --inputs every input is "
                   "random (--seed).")
@click.option("--random-inputs", is_flag=True,
              help="With --inputs: draw the inputs it lacks at random (--seed).")
@click.option("--output", "-o", "output_path", metavar="OUT.npz",
              help="Save the outputs by name (bf16 and FP8 as exact float32) instead of "
                   "printing a summary.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Seed for the random inputs (and for --order random).")
@click.option("--emulate", is_flag=True,
              help="Run the kernel that ptc renders for --target (the kernel.cu or "
                   "kernel.hip of `ptc compile -o`) on the CPU, in the emulator (needs g++, "
                   "no GPU), "
                   "instead of the reference interpreter; prints its shared-memory bank "
                   "conflicts to stderr. It checks nothing by itself: compare its outputs "
                   "with a plain `ptc run`.")
@click.option("--target", "-t", metavar="TARGET",
              help="With --emulate: the target to render for (sm80, sm90, gfx90a, gfx942) "
                   "or a device description YAML file.")
@click.option("--order", type=click.Choice(["forward", "reverse", "random"]),
              help="With --emulate: the order in which the emulator runs warps (waves) and "
                   "lanes "
                   "between barriers (default forward; random draws from --seed).")
@click.option("--eager", is_flag=True,
              help="With --emulate: cp.async copies land when issued, not at the "
                   "cp.async.wait that covers them.")
def run(file, kernel_name, shapes, tiles, inputs_path, random_inputs, output_path, seed,
        emulate, target, order, eager):
    """Run a kernel of FILE on the reference interpreter (NumPy, no GPU), or with
    --emulate its rendered CUDA or HIP kernel on the CPU emulator.

    Prints each output's dtype, shape, min, max and mean and the time taken, or saves
    the outputs with --output.
    """
    if not emulate and target is not None:
        _no_gpu_runner(target)
    if not emulate:
        given = [name for name, value in (("--target", target), ("--order", order),
                                          ("--eager", eager)) if value]
        if given:
            raise click.UsageError(f"{given[0]} applies with --emulate")
    elif target is None:
        raise click.UsageError("--emulate needs --target (e.g. --target sm80)")
    program, text = checked(file, shapes)
    try:
        kernel = driver.select_kernel(program, kernel_name)
    except CompileError as exc:
        report(exc, file, text)
        raise reported(exc) from None
    if random_inputs and not inputs_path:
        raise click.UsageError("--random-inputs applies with --inputs (without it every "
                               "input is random)")
    inputs = load_inputs(inputs_path, kernel, shapes) if inputs_path else {}
    missing = [str(p) for p in kernel.inputs if p.name not in inputs]
    if inputs_path and missing and not random_inputs:
        raise fail(f"{inputs_path} lacks {'input' if len(missing) == 1 else 'inputs'} "
                   f"{', '.join(missing)} of kernel {kernel.name}",
                   hint="add them to the file, or pass --random-inputs to draw them "
                        "at random (--seed)")
    if output_path and not Path(output_path).resolve().parent.is_dir():
        raise fail(f"cannot write {output_path}: no such directory")
    if emulate:
        from .build import run_emulated

        outputs, elapsed, label = run_emulated(file, kernel, text, inputs, shapes, tiles, seed,
                                               target, order or "forward", eager)
        _write_outputs(kernel, outputs, output_path, elapsed, label)
        return
    start = time.perf_counter()
    try:
        outputs = driver.interpret(file, inputs, kernel=kernel.name, shapes=shapes,
                                   tiles=tiles, seed=seed)
    except CompileError as exc:
        report(exc, file, text)
        raise reported(exc) from None
    except MemoryError as exc:
        raise fail(f"out of memory running {kernel.name} ({exc})",
                   hint="the reference interpreter holds every tensor in memory; "
                        "use smaller --shape sizes") from None
    except ValueError as exc:
        if "array is too big" not in str(exc) and "maximum" not in str(exc).lower():
            raise
        raise fail(f"the tensors of {kernel.name} are too large for NumPy ({exc})",
                   hint="use smaller --shape sizes") from None
    elapsed = time.perf_counter() - start
    _write_outputs(kernel, outputs, output_path, elapsed)


def _no_gpu_runner(target: str) -> None:
    """`ptc run --target T` without --emulate, for a target whose kernels ptc does not run
    on a GPU (HIP): say what running it would take, in one line."""
    from ..devices import get_device
    from ..runtime.toolchains import toolchain

    device = user_errors(lambda: get_device(target))
    chain = user_errors(lambda: toolchain(device.backend))
    if not chain.runs:
        raise fail(f"running the {chain.language} kernel of {device.name} needs {chain.gpu}, "
                   "which ptc does not drive; add --emulate to run it on the CPU emulator")


def _write_outputs(kernel: TypedKernel, outputs: Mapping, output_path: str | None,
                   elapsed: float, label: str = "reference interpreter") -> None:
    """What `ptc run` shows: the outputs saved to --output, or their summary table."""
    import numpy as np

    if output_path:
        save_atomic(output_path, {name: _savable(np.asarray(a)) for name, a in outputs.items()})
        click.echo(f"{kernel.name}: wrote {', '.join(outputs)} to {output_path} "
                   f"in {elapsed:.3f} s")
    else:
        _print_table(kernel, outputs, elapsed, label)


# ---- run: inputs and outputs ---------------------------------------------------------
def load_inputs(path: str, kernel: TypedKernel, shapes: Mapping[str, int]) -> dict:
    """Arrays from an .npz by parameter name, checked against the kernel's signature."""
    import numpy as np

    try:
        loaded = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise fail(f"{path}: no such file") from None
    except IsADirectoryError:
        raise fail(f"{path} is a directory, not an .npz file") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise fail(f"{path} is not a readable .npz file ({exc})") from None
    if not isinstance(loaded, np.lib.npyio.NpzFile):
        raise fail(f"{path} holds one array, not arrays by name",
                   hint="save the inputs with np.savez(path, A=..., B=...)")
    try:
        with loaded:
            arrays = {name: loaded[name] for name in loaded.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise fail(f"{path} is not a readable .npz file ({exc})",
                   hint="np.save writes an ml_dtypes.float8_e5m2 array as '<f1', which NumPy "
                   "cannot read back: save its bits, x.view(np.uint8)"
                   if "'<f1'" in str(exc) else None) from None

    params = {p.name: p for p in kernel.inputs}
    outputs = {p.name for p in kernel.outputs}
    for name in arrays:
        if name not in params:
            what = f"{name!r} is an output of kernel {kernel.name}, not an input" \
                if name in outputs else f"{path} has an array {name!r}, which is not an input " \
                                        f"of kernel {kernel.name}"
            raise fail(what, hint="inputs: " + (", ".join(params) or "none"))
    binder = DimBinder()
    binder.give(shapes, "--shape")
    binder.give({d.name: d.static for d in kernel.dims
                 if d.static is not None and d.name not in shapes}, "its compile-time size")
    for name, array in arrays.items():
        p = params[name]
        if isinstance(p, ScalarParam):
            if array.ndim != 0:
                raise fail(f"{path}: {name} has shape {array.shape}, but {p} is a scalar",
                           hint=f"save it as a 0-d array, e.g. {name}=np.float32(1.0)")
            continue
        try:
            array = arrays[name] = to_param_dtype(array, p.dtype)
        except ValueError as exc:
            raise fail(f"{path}: {name} {exc}", hint=accepted_text(p.dtype) +
                       " (docs/language.md, Inputs and outputs)") from None
        try:
            binder.bind(p, array.shape)
        except DimError as exc:
            raise fail(f"{path}: {exc.message}") from None
    return arrays


def _savable(array):
    """bf16 and FP8 as exact float32, so any NumPy can read the file."""
    import ml_dtypes
    import numpy as np

    if array.dtype in (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2):
        return array.astype(np.float32)
    return array


def _print_table(kernel: TypedKernel, outputs: Mapping, elapsed: float,
                 label: str = "reference interpreter") -> None:
    import numpy as np
    from rich.console import Console
    from rich.table import Table

    dtypes = {p.name: p.dtype for p in kernel.outputs}
    table = Table(title=f"{kernel.name}: outputs", title_justify="left")
    for column in ("output", "dtype", "shape", "min", "max", "mean"):
        table.add_column(column, justify="left" if column in ("output", "dtype") else "right")
    for name, array in outputs.items():
        values = np.asarray(array, dtype=np.float64)
        if values.size:
            stats = [f"{values.min():.6g}", f"{values.max():.6g}", f"{values.mean():.6g}"]
        else:
            stats = ["-", "-", "-"]
        shape = "[" + ", ".join(str(n) for n in array.shape) + "]"
        table.add_row(name, dtypes.get(name, str(array.dtype)), shape, *stats)
    console = Console(file=sys.stdout, highlight=False, soft_wrap=False)
    console.print(table)
    console.print(f"time: {elapsed:.3f} s ({label})", highlight=False)
