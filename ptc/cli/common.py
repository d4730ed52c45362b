"""What the `ptc` commands share: the command group itself (its error handling and exit
statuses), the NAME=INT, target and kernel options, reading and checking a file with its
errors shown, and writing files atomically. The commands live in ptc.cli.check (check),
ptc.cli.run (run), ptc.cli.schedule (compile, devices, explain), ptc.cli.build (build,
bench), ptc.cli.tune (tune, calibrate) and ptc.cli.coverage (coverage); the package ptc.cli
gathers them.

Exit status: 0 ok; 1 an error in the user's program or data (rendered by `ptc.report`);
2 a usage error (click); 3 an internal error (a bug in ptc: never a traceback unless
PTC_DEBUG=1); 130 interrupted.
"""
from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Mapping

import click

from .. import driver
from ..diagnostics import NOWHERE, CompileError, Diagnostic, FlagError
from ..grammar import parse
from ..report import render_error
from ..sema import check as sema_check
from ..sema.typed import Program
from ..version import __version__

EXIT_USER, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 1, 2, 3, 130


def check_source(text: str, filename: str, shapes: Mapping[str, int] | None = None) -> Program:
    """The check stage on source text: parse, then type-check (what `ptc check` runs)."""
    return sema_check(parse(text, filename), dict(shapes or {}))


# ---- errors --------------------------------------------------------------------------
class Reported(Exception):
    """An error that has already been shown: exit 1 (the user's input) or 2 (a flag)."""

    def __init__(self, status: int = 1):
        super().__init__(status)
        self.status = status


def reported(exc: CompileError) -> Reported:
    return Reported(EXIT_USAGE if isinstance(exc, FlagError) else EXIT_USER)


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
        except Reported as exc:
            raise click.exceptions.Exit(exc.status) from None
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
        help="Pick a tile size, e.g. --tile BM=64,BN=64 (repeatable); default: the "
             "first candidate of each `tile` line, and for a tile size the kernel uses "
             "without one, the first of its role's candidates (64 for a matmul's rows or "
             "columns, 32 for its k, else 16; the search narrows them per target).")(f)


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
        raise reported(exc) from None


# ---- the command group ---------------------------------------------------------------
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


# ---- targets and kernels -------------------------------------------------------------
TARGET_HELP = ("A builtin target (sm80, sm90, gfx90a, gfx942; see `ptc devices`) "
               "or a device description YAML file.")


def target_options(f):
    f = click.option("--device", "device_file", metavar="FILE.yaml",
                     help="Your own device description (instead of --target).")(f)
    f = click.option("--target", "-t", metavar="TARGET", help=TARGET_HELP)(f)
    return f


def kernel_option(f):
    return click.option("--kernel", "kernel_name", metavar="NAME",
                        help="The kernel to use when FILE holds several.")(f)


def chosen_target(target: str | None, device_file: str | None,
                  required: bool = True) -> str | None:
    """The --target name or --device file the user chose (one of them, if `required`)."""
    if target and device_file:
        raise click.UsageError("give either --target or --device, not both")
    chosen = device_file or target
    if chosen is None and required:
        raise click.UsageError("this needs --target (e.g. --target sm90) or --device FILE.yaml")
    return chosen


def user_errors(fn, filename: str = "ptc", source: str = ""):
    """Run fn(); show any CompileError (device files render against their own text)."""
    from ..devices import DeviceError

    try:
        return fn()
    except DeviceError as exc:
        click.echo(exc.render(), err=True)
        raise Reported() from None
    except CompileError as exc:
        report(exc, filename, source)
        raise reported(exc) from None


def checked_kernel(file: str, kernel_name: str | None, shapes):
    """(the typed kernel --kernel picks from FILE, FILE's text); errors shown."""
    program, text = checked(file, shapes)
    return user_errors(lambda: driver.select_kernel(program, kernel_name), file, text), text


# ---- writing files -------------------------------------------------------------------
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


def terminal_width() -> int:
    import shutil
    return shutil.get_terminal_size((120, 24)).columns


def no_tiles_with_schedule(tiles, schedule_file) -> None:
    """A pinned plan fixes its tile sizes: --tile beside --schedule is a usage error, not
    something to ignore."""
    if tiles and schedule_file:
        raise click.UsageError("--tile does not apply with --schedule: the pinned plan "
                               "fixes the tile sizes (edit its \"tiles\" instead)")
