"""The `ptc` command line: check, run and compile .pt kernels.

Exit status: 0 ok; 1 an error in the user's program or data (rendered by `ptc.report`);
2 a usage error (click); 3 an internal error (a bug in ptc: never a traceback unless
PTC_DEBUG=1); 130 interrupted.
"""
from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Mapping

import click

from . import __version__, driver
from .diagnostics import NOWHERE, CompileError, Diagnostic
from .dims import DimBinder, DimError
from .grammar import parse
from .report import render_error
from .sema import check as _sema_check
from .sema.typed import Program, ScalarParam, TensorParam, TypedKernel

EXIT_USER, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 1, 2, 3, 130


def check_source(text: str, filename: str, shapes: Mapping[str, int] | None = None) -> Program:
    """The check stage on source text: parse, then type-check (what `ptc check` runs)."""
    return _sema_check(parse(text, filename), dict(shapes or {}))


# ---- errors --------------------------------------------------------------------------
class Reported(Exception):
    """An error in the user's input that has already been shown: exit 1."""


def report(error: CompileError, filename: str, source: str = "") -> None:
    """Render `error`: located diagnostics at `filename`, unlocated ones as `ptc: error:`."""
    render_error(error, filename, source, unlocated="ptc")


def fail(message: str, hint: str | None = None) -> Reported:
    """Show one unlocated error now; the caller raises what this returns."""
    report(CompileError(Diagnostic(message, NOWHERE, hint)), "ptc")
    return Reported()


class PtcGroup(click.Group):
    """Turns every failure into an exit status and a message, never a traceback."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except Reported:
            raise click.exceptions.Exit(EXIT_USER) from None
        except KeyboardInterrupt:
            raise click.exceptions.Exit(EXIT_INTERRUPTED) from None
        except BrokenPipeError:  # `ptc check ... | head`: stop quietly
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
            except (OSError, ValueError, AttributeError):
                pass
            raise click.exceptions.Exit(141) from None
        except RecursionError:  # deeper nesting than any stage's recursion can take
            fail("the program nests expressions too deeply for ptc",
                 "split the expression into several assignments")
            raise click.exceptions.Exit(EXIT_USER) from None
        except Exception as exc:
            if os.environ.get("PTC_DEBUG"):
                raise
            click.echo(f"ptc: internal error: {type(exc).__name__}: {exc} "
                       "(set PTC_DEBUG=1 for the traceback)", err=True)
            raise click.exceptions.Exit(EXIT_INTERNAL) from None


# ---- NAME=INT options ----------------------------------------------------------------
_NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]*\Z")


class Assignments(click.ParamType):
    """`M=4096` or `M=4096,N=128`: a list of (name, positive int)."""

    name = "NAME=INT[,NAME=INT...]"

    def convert(self, value, param, ctx):
        if isinstance(value, list):
            return value
        pairs = []
        for item in str(value).split(","):
            item = item.strip()
            if "=" not in item:
                self.fail(f"{item!r} is not NAME=INT (for example M=4096)"
                          if item else f"{value!r} has an empty item; write NAME=INT,NAME=INT",
                          param, ctx)
            name, _, number = (part.strip() for part in item.partition("="))
            if not name:
                self.fail(f"{item!r} has no name before '='; write NAME=INT, e.g. M=4096",
                          param, ctx)
            if not _NAME.match(name):
                self.fail(f"{name!r} in {item!r} is not a name", param, ctx)
            if not re.fullmatch(r"[+-]?[0-9]+", number):
                self.fail(f"{number!r} in {item!r} is not an integer", param, ctx)
            if len(number.lstrip("+-0")) > 18:
                self.fail(f"{name}={number} is too large", param, ctx)
            if int(number) <= 0:
                self.fail(f"{name} must be a positive integer, not {int(number)}", param, ctx)
            pairs.append((name, int(number)))
        return pairs


def _merge(ctx, param, values) -> dict[str, int]:
    merged: dict[str, int] = {}
    for pairs in values:
        for name, number in pairs:
            if merged.get(name, number) != number:
                raise click.BadParameter(f"{name} is given twice ({merged[name]} and {number})",
                                         ctx, param)
            merged[name] = number
    return merged


def shape_option(f):
    return click.option(
        "--shape", "shapes", type=Assignments(), multiple=True, callback=_merge,
        help="Size of a dim, e.g. --shape M=4096 or --shape M=4096,N=128 (repeatable). "
             "Dims not given are runtime values (their `dims` default when run).")(f)


def tile_option(f):
    return click.option(
        "--tile", "tiles", type=Assignments(), multiple=True, callback=_merge,
        help="Pick a tile size, e.g. --tile BM=64,BN=64 (repeatable); "
             "default: the first candidate of each `tile` line.")(f)


# ---- reading and checking ------------------------------------------------------------
def _display_text(path: str) -> str:
    """The file's text for showing a caret, however broken its encoding."""
    try:
        return Path(path).read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return ""


def read(path: str) -> tuple[str, str]:
    try:
        return driver.read_source(path)
    except CompileError as exc:
        report(exc, str(path), _display_text(path))
        raise Reported() from None


def checked(path: str, shapes: Mapping[str, int]) -> tuple[Program, str]:
    """(typed program, source text) of a file; shows the diagnostics and raises Reported."""
    filename, text = read(path)
    try:
        return check_source(text, filename, shapes), text
    except CompileError as exc:
        report(exc, filename, text)
        raise Reported() from None


def _signature(k: TypedKernel) -> str:
    ins = ", ".join(str(p) for p in k.inputs)
    outs = ", ".join(str(p) for p in k.outputs)
    return f"{k.name}({ins}) -> ({outs})"


def _dim_size(d, shapes: Mapping[str, int]) -> int | None:
    """A dim's compile-time size: from --shape, or the one the program needs; else None."""
    return shapes.get(d.name, d.static)


def _summary(k: TypedKernel, shapes: Mapping[str, int]) -> str:
    line = _signature(k)
    if k.dims:
        sizes = []
        for d in k.dims:
            size = _dim_size(d, shapes)
            sizes.append(f"{d.name}={'runtime' if size is None else size}")
        line += "  dims " + ", ".join(sizes)
    return line


def _kernel_json(k: TypedKernel, shapes: Mapping[str, int]) -> dict:
    def tensor(p: TensorParam) -> dict:
        return {"name": p.name, "dtype": p.dtype, "dims": list(p.dims)}

    return {
        "name": k.name,
        "signature": _signature(k),
        "params": [tensor(p) for p in k.inputs if isinstance(p, TensorParam)],
        "scalars": [{"name": p.name, "dtype": p.dtype}
                    for p in k.inputs if isinstance(p, ScalarParam)],
        "inputs": [p.name for p in k.inputs],
        "outputs": [tensor(p) for p in k.outputs],
        "dims": [{"name": d.name, "default": d.default, "size": _dim_size(d, shapes)}
                 for d in k.dims],
        "tiles": [{"name": t.name, "choices": list(t.choices)} for t in k.tiles],
    }


def _diag_json(d: Diagnostic) -> dict:
    return {"message": d.message, "line": d.span.line, "col": d.span.col,
            "end_line": d.span.end_line, "end_col": d.span.end_col, "hint": d.hint}


# ---- commands ------------------------------------------------------------------------
@click.group(cls=PtcGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", "-V", prog_name="ptc",
                      message="%(prog)s %(version)s")
def cli():
    """ptc: a compiler for tile-level GPU kernels written in .pt.

    \b
    Examples:
      ptc check samples/*.pt
      ptc run samples/gemm.pt --shape M=200,N=136,K=72 --tile BM=64,BN=64,BK=32
      ptc compile samples/gemm.pt --emit typed
    """


@cli.command(epilog="""\b
Examples:
  ptc check samples/*.pt
  ptc check samples/flash_attn.pt --shape D=128 --json""")
@click.argument("files", nargs=-1, required=True)
@shape_option
@click.option("--json", "as_json", is_flag=True,
              help="Print the kernels' signatures as JSON (for tools), not a summary.")
def check(files, shapes, as_json):
    """Parse and type-check FILE..., one summary line per kernel.

    Every file is checked and every error reported; the exit status is 1 if any failed.
    """
    failed = False
    results = []
    for path in files:
        try:
            program, _ = checked(path, shapes)
        except Reported:
            failed = True
            results.append({"file": str(path), "ok": False})
            continue
        if as_json:
            results.append({"file": str(path), "ok": True,
                            "kernels": [_kernel_json(k, shapes) for k in program.kernels]})
        else:
            for k in program.kernels:
                click.echo(f"{path}: {_summary(k, shapes)}")
    if as_json:
        click.echo(json.dumps({"files": results}, indent=2))
    if failed:
        raise Reported()


@cli.command(epilog="""\b
Examples:
  ptc run samples/gemm.pt --shape M=200,N=136,K=72 --tile BM=64,BN=64,BK=32
  ptc run samples/gemm.pt --shape M=256,N=256,K=64 --inputs in.npz --output out.npz""")
@click.argument("file")
@click.option("--kernel", "kernel_name", metavar="NAME",
              help="The kernel to run (needed when FILE holds several).")
@shape_option
@tile_option
@click.option("--inputs", "inputs_path", metavar="IN.npz",
              help="Input arrays by parameter name (np.savez); missing ones are random. "
                   "bf16 inputs may be float32 (rounded) or ml_dtypes.bfloat16.")
@click.option("--output", "-o", "output_path", metavar="OUT.npz",
              help="Save the outputs by name (bf16 as exact float32) instead of "
                   "printing a summary.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Seed for the random inputs.")
def run(file, kernel_name, shapes, tiles, inputs_path, output_path, seed):
    """Run a kernel of FILE on the reference interpreter (NumPy, no GPU).

    Prints each output's dtype, shape, min, max and mean and the time taken, or saves
    the outputs with --output.
    """
    import numpy as np

    program, text = checked(file, shapes)
    try:
        kernel = driver.select_kernel(program, kernel_name)
    except CompileError as exc:
        report(exc, file, text)
        raise Reported() from None
    inputs = load_inputs(inputs_path, kernel, shapes) if inputs_path else {}
    if output_path and not Path(output_path).resolve().parent.is_dir():
        raise fail(f"cannot write {output_path}: no such directory")
    start = time.perf_counter()
    try:
        outputs = driver.interpret(file, inputs, kernel=kernel.name, shapes=shapes,
                                   tiles=tiles, seed=seed)
    except CompileError as exc:
        report(exc, file, text)
        raise Reported() from None
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
    if output_path:
        save_atomic(output_path, {name: _savable(np.asarray(a)) for name, a in outputs.items()})
        click.echo(f"{kernel.name}: wrote {', '.join(outputs)} to {output_path} "
                   f"in {elapsed:.3f} s")
    else:
        _print_table(kernel, outputs, elapsed)


# ---- run: inputs and outputs ---------------------------------------------------------
def load_inputs(path: str, kernel: TypedKernel, shapes: Mapping[str, int]) -> dict:
    """Arrays from an .npz by parameter name, checked against the kernel's signature."""
    import ml_dtypes
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
        raise fail(f"{path} is not a readable .npz file ({exc})") from None

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
        if p.dtype == "bf16" and array.dtype.kind == "V" and array.dtype.itemsize == 2:
            array = arrays[name] = array.view(ml_dtypes.bfloat16)  # np.savez's bf16
        if array.dtype.kind not in "biuf" and array.dtype != ml_dtypes.bfloat16:
            raise fail(f"{path}: {name} has dtype {array.dtype}, not numbers for {p}")
        try:
            binder.bind(p, array.shape)
        except DimError as exc:
            raise fail(f"{path}: {exc.message}") from None
    return arrays


def _savable(array):
    """bf16 as exact float32, so any NumPy can read the file."""
    import ml_dtypes
    import numpy as np

    if array.dtype == ml_dtypes.bfloat16:
        return array.astype(np.float32)
    return array


def save_atomic(path: str, arrays: Mapping) -> None:
    """np.savez to a temporary file beside `path`, then rename: never a half-written file."""
    import numpy as np

    write_atomic(path, lambda f: np.savez(f, **arrays))


def save_text_atomic(path: str, text: str) -> None:
    write_atomic(path, lambda f: f.write(text.encode()))


def write_atomic(path: str, write) -> None:
    """write(file) into a temporary file beside `path`, then rename it into place."""
    target = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp",
                                   dir=target.parent if str(target.parent) else ".")
    except OSError as exc:
        raise fail(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, target)
    except OSError as exc:
        raise fail(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _print_table(kernel: TypedKernel, outputs: Mapping, elapsed: float) -> None:
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
    console.print(f"time: {elapsed:.3f} s (reference interpreter)", highlight=False)


from . import cli_schedule  # noqa: E402,F401  (registers compile, devices, explain)
from . import cli_build  # noqa: E402,F401  (registers build, bench)


def main(argv: list[str] | None = None) -> None:
    """The `ptc` console script."""
    cli.main(args=argv, prog_name="ptc")


if __name__ == "__main__":
    main()
