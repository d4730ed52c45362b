"""The commands that leave Python: build (write the directory and run the target's compiler:
nvcc, hipcc or clang) and bench (run on the GPU, check against the reference interpreter,
time). `write_output` is what
`ptc compile -o DIR` runs."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from .common import (Reported, checked_kernel, chosen_target, cli, fail, kernel_option,
                     no_tiles_with_schedule, shape_option, target_options, terminal_width,
                     tile_option, user_errors)

KERNEL_SOURCE_HELP = ("Use this kernel source (kernel.cu, or kernel.hip for a HIP target) "
                      "instead of rendering one (hand-written or edited; it must follow the "
                      "kernel ABI: ptc_launch and ptc_kernel_name).")


def _options(f):
    from .tune import tuning_options

    f = tuning_options(f)
    f = click.option("--kernel-source", "kernel_source", metavar="FILE.cu",
                     help=KERNEL_SOURCE_HELP)(f)
    f = click.option("--schedule", "schedule_file", metavar="PLAN.json",
                     help="Pin this plan instead of searching (it is verified like any other).")(f)
    f = tile_option(f)
    f = shape_option(f)
    f = kernel_option(f)
    f = target_options(f)
    return f


def _read_kernel_source(path: str | None) -> str | None:
    if path is None:
        return None
    try:
        return Path(path).read_text()
    except FileNotFoundError:
        raise fail(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise fail(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None


def _prepare(file, target, device_file, kernel_name, shapes, tiles, schedule_file,
             kernel_source, tuning=None):
    from .. import runtime
    from .tune import pin_or_search, tuning_choice

    no_tiles_with_schedule(tiles, schedule_file)
    chosen = chosen_target(target, device_file)
    kernel, text = checked_kernel(file, kernel_name, shapes)   # located errors, with the source
    source = _read_kernel_source(kernel_source)
    choice = tuning_choice(file, kernel, chosen, shapes, tiles, schedule_file, tuning)
    prepared = user_errors(lambda: pin_or_search(choice, schedule_file, lambda s: runtime.prepare(
        file, chosen, shapes=shapes, tiles=tiles, kernel=kernel.name, schedule=s,
        kernel_source=source, progress=sys.stderr.isatty())), file, text)
    for note in prepared.notes:
        click.echo(f"note: {note}", err=True)
    return prepared


def default_output(prepared) -> Path:
    return Path("build") / f"{prepared.kernel.name}.{prepared.device.name}"


def write_output(file, target, device_file, kernel_name, shapes, tiles, schedule_file, output,
                 kernel_source=None, tuning=None):
    """`ptc compile FILE -o DIR`: write the build directory (no compiler runs); returns its
    path."""
    from .. import runtime
    from ..runtime.toolchains import toolchain
    from ..runtime.harness import SIGNATURE_SOURCE

    prepared = _prepare(file, target, device_file, kernel_name, shapes, tiles, schedule_file,
                        kernel_source, tuning)
    backend = prepared.device.backend
    folder = user_errors(lambda: runtime.write_build_dir(
        output, kernel_source=prepared.source, signature=prepared.signature,
        arch=prepared.device.arch, target=prepared.target, plan_json=prepared.plan_json,
        backend=backend))
    chain = toolchain(backend)
    click.echo(f"wrote {folder}: {chain.kernel_file}, {chain.harness_file}, {SIGNATURE_SOURCE}, "
               f"plan.json, build.sh (build it with `sh {folder}/build.sh` or `ptc build`)")
    return folder


# ---- ptc build --------------------------------------------------------------------------
@cli.command("build", epilog="""\b
Examples:
  ptc build samples/gemm.pt --target sm80 -o build/gemm
  ptc build samples/flash_attn.pt -t sm90 --shape D=128 --tile BM=128,BN=64
  ptc build samples/gemm.pt -t sm80 --kernel-source my_gemm.cu -o build/mine
  ptc build samples/gemm.pt --target gfx942 -o build/gemm.gfx942""")
@click.argument("file")
@_options
@click.option("--output", "-o", "output", metavar="DIR",
              help="The build directory (default: build/KERNEL.TARGET). An existing one is "
                   "replaced only by a complete new one.")
@click.option("--json", "as_json", is_flag=True, help="Print the build report as JSON.")
def build_(file, target, device_file, kernel_name, shapes, tiles, schedule_file, kernel_source,
           output, as_json, tuning):
    """Compile FILE for a target and build it: libptc_kernel.so (for Python) and ptc_run
    (runs it on .npy files), with the kernel's registers, shared memory and spills -- with
    nvcc and ptxas's report for CUDA targets, with hipcc or clang 19 and the ISA's report
    (VGPRs, AGPRs, LDS, scratch, occupancy, main-loop instructions) for HIP targets
    ($PTC_HIPCC picks the compiler). Needs the compiler, not a GPU. A matching entry of the
    tuning database (ptc-tuning.json beside FILE, written by `ptc tune`) pins its measured
    plan."""
    build_and_report(file, target, device_file, kernel_name, shapes, tiles, schedule_file,
                     kernel_source, output, as_json, tuning)


def build_and_report(file, target, device_file, kernel_name, shapes, tiles, schedule_file,
                     kernel_source, output, as_json=False, tuning=None) -> None:
    """`ptc build` (and `ptc compile --build -o DIR`): write the directory, run the
    compiler, print the resources and the main-loop report."""
    from .. import runtime
    from ..runtime.toolchains import toolchain

    prepared = _prepare(file, target, device_file, kernel_name, shapes, tiles, schedule_file,
                        kernel_source, tuning)
    folder = Path(output) if output else default_output(prepared)
    echo = None if as_json else (lambda line: click.echo(f"  {line}", err=True))
    compiled = user_errors(lambda: runtime.build_prepared(prepared, folder, shapes=shapes,
                                                           echo=echo))
    result = compiled.build
    if as_json:
        click.echo(json.dumps({"directory": str(folder), "arch": result.arch,
                               "seconds": round(result.seconds, 3),
                               "library": str(result.library),
                               "executable": str(result.executable),
                               toolchain(result.backend).report_name:
                                   result.resources.to_json()}, indent=2))
        return
    print_resources(result)
    if toolchain(result.backend).reads_sass:
        print_main_loop(folder)
    click.echo(f"built {folder} ({result.library.name}, {result.executable.name}) for "
               f"{result.arch} in {result.seconds:.1f} s")


def print_main_loop(folder) -> None:
    """What the main loop of each kernel variant issues per warp and iteration, read from
    the SASS (ptc.runtime.mainloop); silent where cuobjdump is missing."""
    from ..runtime.build import sass
    from ..runtime.errors import BuildError
    from ..runtime.mainloop import MainLoopError, format_reports, mainloop_reports
    from ..runtime.symbols import kernel_name

    try:
        reports = mainloop_reports(sass(folder))
    except (BuildError, MainLoopError):
        return
    click.echo("main loop, per warp and iteration (SASS):")
    click.echo(format_reports(reports, [kernel_name(r.kernel) for r in reports]))


def print_resources(result) -> None:
    """The build's resource report as tables (the toolchain's report says which), then its
    warnings, and its alerts (spills, scratch) in red."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    report = result.resources
    console = Console(file=sys.stdout, highlight=False, soft_wrap=False,
                      width=max(100, terminal_width()))
    for title, columns, rows in report.tables(result.arch):
        table = Table(title=title, title_justify="left")
        for col in columns:
            table.add_column(col, justify="left" if col == "kernel" else "right")
        for row in rows:
            table.add_row(*(f"[bold red]{escape(text)}[/]" if bad else escape(text)
                            for text, bad in row))
        console.print(table)
    for warning in report.warnings:
        console.print(warning, markup=False)
    for alert in report.alerts():
        console.print(f"[bold red]warning:[/] {escape(alert)}")


# ---- ptc bench ---------------------------------------------------------------------------
@cli.command(epilog="""\b
Examples:
  ptc bench samples/gemm.pt --target sm90 --shape M=8192,N=8192,K=8192
  ptc bench samples/flash_attn.pt -t sm90 --baseline none --json
  ptc bench samples/rmsnorm.pt -t sm80 --shape M=16384 --no-check""")
@click.argument("file")
@_options
@click.option("--output", "-o", "output", metavar="DIR",
              help="Build in this directory (default: the cache, ~/.cache/ptc).")
@click.option("--baseline", type=click.Choice(["torch", "none"]), default="torch",
              show_default=True,
              help="Also time the same operator in PyTorch, where torch is installed and "
                   "the kernel is a known sample.")
@click.option("--warmup", type=click.IntRange(0, 100000), default=10, show_default=True,
              help="Untimed runs first.")
@click.option("--iters", type=click.IntRange(1, 100000), default=100, show_default=True,
              help="Timed runs (the median is reported).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seed for the inputs.")
@click.option("--check/--no-check", default=True, show_default=True,
              help="Compare every output with the reference interpreter (slow at large "
                   "shapes).")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
def bench(file, target, device_file, kernel_name, shapes, tiles, schedule_file, kernel_source,
          output, baseline, warmup, iters, seed, check, as_json, tuning):
    """Build FILE, run it on the GPU on random inputs, check the outputs against the
    reference interpreter and time it: median time, TFLOP/s or GB/s, % of the target's
    peak (from its YAML) and the speed-up over a torch baseline. Exit 1 if a check fails."""
    from .. import runtime
    from ..runtime import bench as B
    from ..runtime.toolchains import toolchain

    chosen = chosen_target(target, device_file)
    checked_kernel(file, kernel_name, shapes)              # the program's errors come first
    from ..devices import get_device

    device = user_errors(lambda: get_device(chosen))   # then the target's
    chain = toolchain(device.backend)
    if not chain.runs:
        raise fail(f"{chosen} is a {device.backend} target; ptc bench runs CUDA targets "
                   "(sm80, sm90)")
    gpus = user_errors(chain.find_gpus)
    if not chain.can_run(gpus[0], device.arch):
        raise fail(f"the GPU is {gpus[0].name} ({gpus[0].arch}), which cannot run code built "
                   f"for {device.arch} ({device.name})",
                   hint="choose the target of this GPU (sm90 for an H100, sm80 for an A100)")
    prepared = _prepare(file, target, device_file, kernel_name, shapes, tiles, schedule_file,
                        kernel_source, tuning)
    say = (lambda message: None) if as_json else (lambda m: click.echo(f"  {m}", err=True))
    say(f"building for {prepared.device.arch}")
    compiled = user_errors(lambda: runtime.build_prepared(
        prepared, Path(output) if output else None, shapes=shapes))
    result = user_errors(lambda: B.run_bench(
        compiled, prepared, shapes=shapes, seed=seed, warmup=warmup, iters=iters, check=check,
        baseline=None if baseline == "none" else baseline, progress=say), file)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        print_bench(result)
    if not result.ok:
        raise Reported()


def print_bench(r) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(file=sys.stdout, highlight=False, soft_wrap=False,
                      width=max(100, terminal_width()))
    dims = ", ".join(f"{k}={v}" for k, v in r.dims.items())
    tiles = ", ".join(f"{k}={v}" for k, v in r.tiles.items())
    table = Table(title=f"{r.kernel} on {r.gpu}, target {r.target}\n{dims}; tiles {tiles}",
                  title_justify="left")
    for col in ("time", "TFLOP/s", "GB/s", "% of peak", "model", "baseline", "speed-up"):
        table.add_column(col, justify="right")
    peak = f"{100 * r.peak_fraction:.1f} % ({'mma ' + r.work.mma_dtype if r.bound == 'compute' else 'DRAM'})"
    table.add_row(
        _ms(r.timing.median_ms),
        f"{r.tflops:.1f}" if r.work.flops else "-",
        f"{r.gbs:.0f}",
        peak,
        _ms(r.work.model_seconds * 1e3),
        f"{r.baseline_label} {_ms(r.baseline_ms)}" if r.baseline_ms else "-",
        f"{r.speedup:.2f}x" if r.speedup else "-")
    console.print(table)
    if r.checks:
        checks = Table(title="outputs vs the reference interpreter", title_justify="left")
        for col in ("output", "dtype", "rel. L2 error", "tolerance", "NaN/inf", "result"):
            checks.add_column(col, justify="left" if col in ("output", "dtype") else "right")
        for c in r.checks:
            checks.add_row(c.name, c.dtype, f"{c.rel_l2:.2e}", f"{c.tolerance:.0e}",
                           str(c.bad_nan), "[green]ok[/]" if c.ok else "[bold red]FAIL[/]")
        console.print(checks)
    for note in r.notes:
        console.print(f"note: {note}", markup=False)


def _ms(ms: float | None) -> str:
    if ms is None:
        return "-"
    return f"{ms * 1e3:.1f} us" if ms < 1 else f"{ms:.3f} ms"


# ---- ptc run --emulate ---------------------------------------------------------------------
def run_emulated(file, kernel, text, inputs, shapes, tiles, seed, target, order, eager):
    """`ptc run --emulate`: render the kernel for `target` as `ptc compile -o` does, run that
    kernel.cu / kernel.hip on the CPU emulator of its backend (ptc.render.emulate) on the
    inputs the interpreter would take, and print its shared-memory bank conflicts to stderr.
    Returns (outputs by name, seconds the emulated run took, the label of the timing line)."""
    import time

    from .. import driver
    from ..devices import get_device
    from ..diagnostics import CompileError
    from ..interp import prepare as bind_call
    from ..render import renderer
    from ..render.emulate import EmulationError, backend_of, build_emulated, compiler
    from ..sema.typed import TensorParam

    device = user_errors(lambda: get_device(target))
    if renderer(device.backend) is None:
        raise fail(f"ptc has no renderer for {device.backend} targets such as {device.name} "
                   "yet, so there is no kernel to emulate")
    try:
        backend = backend_of(device)
        compiler()
    except EmulationError as exc:
        raise fail(str(exc)) from None
    # the dims the interpreter would run with: --shape, then the input arrays' shapes
    module = user_errors(lambda: driver.parse_file(file), file, text)
    sizes = {**driver.dims_from_inputs(module, kernel.name, inputs), **shapes}
    prepared = _prepare(file, target, None, kernel.name, sizes, tiles, None, None)
    typed = prepared.kernel
    try:
        call = bind_call(typed, inputs, shapes=sizes, tiles=tiles, seed=seed)
    except CompileError as exc:
        from .common import report, reported

        report(exc, file, text)
        raise reported(exc) from None
    args = {p.name: call.arrays[p.name] if isinstance(p, TensorParam) else call.scalars[p.name]
            for p in typed.inputs}
    name = prepared.device.name
    try:
        emulated = build_emulated(prepared.source, backend=backend)
        start = time.perf_counter()
        outputs = emulated(typed, args, call.dims, order=order, eager_cp_async=eager,
                           seed=seed)
        elapsed = time.perf_counter() - start
    except EmulationError as exc:
        raise fail(str(exc).splitlines()[0].rstrip(":")) from None
    counts = emulated.last_run.bank_conflicts
    click.echo(f"emulated {name}: {counts['total']} shared-memory bank conflicts ("
               + ", ".join(f"{kind} {counts[kind]}" for kind in backend.access_kinds) + ")",
               err=True)
    return outputs, elapsed, f"emulated on the CPU for {name}"
