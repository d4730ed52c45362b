"""The commands that look past the type checker: compile (every stage), devices, explain."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from .. import driver
from ..grammar import parse
from .common import (checked, checked_kernel, chosen_target, cli, kernel_option,
                     no_tiles_with_schedule, read, save_text_atomic, shape_option,
                     target_options, terminal_width, tile_option, user_errors)
from .tune import pin_or_search, promote, tuning_choice, tuning_options


@cli.command("compile", epilog="""\b
Examples:
  ptc compile samples/gemm.pt --emit ast
  ptc compile samples/flash_attn.pt --emit typed --shape D=128
  ptc compile samples/flash_attn.pt --target sm90 --emit stask
  ptc compile samples/gemm.pt --target sm80 --emit plan > plan.json
  ptc compile samples/gemm.pt --target sm80 --emit plan --schedule plan.json
  ptc compile samples/gemm.pt --target sm80 -o build/gemm
  ptc compile samples/gemm.pt --target sm80 -o build/gemm --build""")
@click.argument("file")
@click.option("--emit", "stage",
              type=click.Choice(driver.STAGES + ("dot",)),
              help="The stage to print: ast (canonical .pt), typed (the typed tile program), "
                   "stask (the sTask-graph), dot (the sTask-graph for Graphviz), "
                   "plan (the scheduled plan as JSON; needs --target), lowered (the "
                   "lowered kernel: layouts, shared memory, every op, wait and barrier), "
                   "source (the generated kernel source).")
@target_options
@kernel_option
@shape_option
@tile_option
@click.option("--schedule", "schedule_file", metavar="PLAN.json",
              help="Pin this plan instead of searching (it is verified like any other).")
@click.option("--after", "after_pass", metavar="PASS",
              help="With --emit lowered: the ops as lowering pass PASS left them (steps, "
                   "hoist_fragments, shared_reads_once, place_sync, staged_waits, "
                   "hoist_copies; warp-specialized plans: steps, shared_reads_once, "
                   "place_sync, named_barriers, one_group_in_flight, overlapped_wgmmas, "
                   "pin_accumulators, take_turns).")
@click.option("--output", "-o", "output", metavar="DIR",
              help="Instead of printing a stage, write the build directory (kernel.cu or "
                   "kernel.hip, the harness, headers, plan.json, build.sh); needs --target.")
@click.option("--build", "run_build", is_flag=True,
              help="With -o DIR: also build it (nvcc, or hipcc / clang for HIP), as "
                   "`ptc build` does.")
@tuning_options
def compile_(file, stage, target, device_file, kernel_name, shapes, tiles, schedule_file,
             after_pass, output, run_build, tuning):
    """Print a stage of the compilation of FILE in its canonical text form, or (-o DIR)
    write the build directory that `ptc build` compiles (--build: and build it).

    From --emit plan on, a matching entry of the tuning database (ptc-tuning.json beside
    FILE, written by `ptc tune`) pins its measured plan instead of the model's best."""
    no_tiles_with_schedule(tiles, schedule_file)
    if after_pass is not None and stage != "lowered":
        raise click.UsageError("--after PASS applies to --emit lowered")
    if run_build and output is None:
        raise click.UsageError("--build needs -o DIR (or use `ptc build`, which picks one)")
    if output is not None:              # -o DIR: the build directory, not a stage
        if stage:
            raise click.UsageError("give either --emit STAGE or -o DIR, not both")
        _write_build_dir(file, target, device_file, kernel_name, shapes, tiles,
                         schedule_file, output, run_build, tuning)
        return
    if stage is None:
        raise click.UsageError("give --emit STAGE to print a stage, or -o DIR to write the "
                               "build directory")
    if stage == "ast":
        click.echo(_ast_text(file), nl=False)
        return
    if stage == "typed":
        from ..sema.printer import print_program

        program, _ = checked(file, shapes)
        click.echo(print_program(program), nl=False)
        return
    kernel, text = checked_kernel(file, kernel_name, shapes)
    if stage in ("stask", "dot"):
        click.echo(_graph_text(stage, file, text, kernel, tiles, schedule_file), nl=False)
        return
    chosen = chosen_target(target, device_file)
    choice = tuning_choice(file, kernel, chosen, shapes, tiles, schedule_file, tuning)
    click.echo(_scheduled_text(stage, kernel, chosen, shapes, tiles, schedule_file, choice,
                               after_pass), nl=False)


def _write_build_dir(file, target, device_file, kernel_name, shapes, tiles, schedule_file,
                     output, run_build, tuning) -> None:
    """`compile -o DIR`: write the build directory (ptc/cli/build.py); --build: build it."""
    from .build import build_and_report, write_output

    if run_build:
        build_and_report(file, target, device_file, kernel_name, shapes, tiles,
                         schedule_file, None, output, tuning=tuning)
    else:
        write_output(file, target, device_file, kernel_name, shapes, tiles,
                     schedule_file, output, tuning=tuning)


def _ast_text(file) -> str:
    """`--emit ast`: FILE parsed and printed back in canonical form."""
    from ..grammar.printer import print_module

    filename, text = read(file)
    module = user_errors(lambda: parse(text, filename), filename, text)
    return print_module(module)


def _graph_text(stage, file, text, kernel, tiles, schedule_file) -> str:
    """`--emit stask` or `--emit dot`: the sTask-graph of each grid."""
    from ..stask import print_graph, to_dot

    if schedule_file:
        raise click.UsageError("--schedule applies to --emit plan")
    graphs = user_errors(lambda: driver.stask_graphs(kernel, tiles), file, text)
    printer = print_graph if stage == "stask" else to_dot
    return per_grid([printer(g) for g in graphs], kernel, "//" if stage == "dot" else "#")


def _scheduled_text(stage, kernel, chosen, shapes, tiles, schedule_file, choice,
                    after_pass=None) -> str:
    """`--emit plan`, `lowered` or `source`: a stage past scheduling, of the tuned plan,
    the pinned one or the model's best."""
    from ..sched.plan import plans_to_json

    if stage in ("lowered", "source"):
        from ..lower import print_lowered

        if stage == "lowered":
            header = _after_header(after_pass)
            lows = user_errors(lambda: pin_or_search(choice, schedule_file, lambda s: driver.lowered(
                kernel, chosen, shapes=shapes, tiles=tiles, schedule_file=s,
                progress=sys.stderr.isatty(), after=after_pass)))[0]
            return per_grid([header + print_lowered(low) for low in lows], kernel, "#")
        return user_errors(lambda: pin_or_search(choice, schedule_file, lambda s: driver.render(
            kernel, chosen, shapes=shapes, tiles=tiles, schedule_file=s,
            progress=sys.stderr.isatty())))[0]

    def plans_for(schedule):
        if schedule:
            return driver.pinned_as_built(kernel, chosen, schedule, shapes)
        results = driver.schedule_grids(kernel, chosen, shapes=shapes, tiles=tiles,
                                        progress=sys.stderr.isatty())
        return [r.best.plan for r in results]

    plans = user_errors(lambda: pin_or_search(choice, schedule_file, plans_for))
    return plans_to_json(plans)


def _after_header(after_pass: str | None) -> str:
    """The line above a lowered kernel dumped after a pass (PASS checked here: the names
    are ptc.lower.passes')."""
    if after_pass is None:
        return ""
    from ..lower.passes import PASSES

    if after_pass not in PASSES:
        raise click.BadParameter(f"no lowering pass {after_pass!r}; the passes: "
                                 f"{', '.join(PASSES)}", param_hint="--after")
    return (f"# after pass {after_pass}: the ops as it left them; the launch, shared memory, "
            "values and costs are the finished kernel's\n")


def per_grid(texts: list[str], kernel, comment: str) -> str:
    """One text per grid; with several, each under a `# grid 2 of 2: ...` header."""
    if len(texts) == 1:
        return texts[0]
    out = []
    for n, (text, grid) in enumerate(zip(texts, kernel.body)):
        axes = ", ".join(a.var if a.size is None else f"{a.var}: {a.size} of {a.dim}"
                         for a in grid.axes)
        out.append(f"{comment} grid {n + 1} of {len(texts)}: parallel {axes}\n{text}")
    return "\n".join(out)


@cli.command(epilog="""\b
Examples:
  ptc devices
  ptc devices --device my_gpu.yaml""")
@click.option("--device", "device_file", metavar="FILE.yaml",
              help="Also load and list your own device description.")
def devices(device_file):
    """List the devices ptc can target, with their peak figures."""
    from rich.console import Console
    from rich.table import Table

    from ..devices import builtin_targets, get_device

    names = builtin_targets() + ([device_file] if device_file else [])
    table = Table(title="ptc devices", title_justify="left")
    for col in ("target", "device", "EUs", "clock GHz", "f16 TFLOP/s", "DRAM TB/s",
                "smem/LDS KB", "units"):
        table.add_column(col, justify="left" if col in ("target", "device", "units") else "right")
    for name in names:
        dev = user_errors(lambda: get_device(name))
        f16 = dev.peak_flops("f16") / 1e12 if "f16" in dev.mma_dtypes() else 0.0
        table.add_row(name if name in builtin_targets() else str(dev.path), dev.description,
                      str(dev.eu_count), f"{dev.clock_ghz:g}", f"{f16:.0f}",
                      f"{dev.peak_dram_bytes_per_s() / 1e12:.2f}",
                      f"{dev.resources.shared_memory_bytes // 1024}",
                      " ".join(u.name for u in dev.units))
    Console(file=sys.stdout, highlight=False, width=max(100, terminal_width())).print(table)


@cli.command(epilog="""\b
Examples:
  ptc explain samples/flash_attn.pt --target sm90
  ptc explain samples/gemm.pt --target sm80 --shape M=8192,N=8192,K=8192 --svg gemm.svg
  ptc explain samples/gemm.pt --target sm90 --json""")
@click.argument("file")
@target_options
@kernel_option
@shape_option
@tile_option
@click.option("--svg", "svg_path", metavar="FILE.svg", help="Also draw the timeline as SVG.")
@click.option("--json", "as_json", is_flag=True, help="Print the explanation as JSON.")
@tuning_options
def explain(file, target, device_file, kernel_name, shapes, tiles, svg_path, as_json, tuning):
    """Explain the schedule ptc picks for FILE: the sTask-graph, the chosen tiles, a
    per-unit timeline, the estimate, the runner-ups and why the winner won.

    Where the tuning database (ptc-tuning.json beside FILE) has a matching entry, its
    measured plan is the one explained, and the explanation says so; stale entries are
    named with the reason they do not apply."""
    from rich.console import Console

    from .. import explain as ex

    chosen = chosen_target(target, device_file)
    kernel, text = checked_kernel(file, kernel_name, shapes)
    notes: list[str] = []
    choice = tuning_choice(file, kernel, chosen, shapes, tiles, None, tuning,
                           say=notes.append)
    results = user_errors(lambda: driver.schedule_grids(
        kernel, chosen, shapes=shapes, tiles=tiles, progress=sys.stderr.isatty()))
    results, missing = promote(results, choice)
    if missing:
        notes = [n for n in notes if not n.startswith("plan from")] + [missing]
    expls = [ex.explain(r) for r in results]
    if svg_path:     # several grids: FILE.svg for the first, FILE.grid2.svg, ... after it
        for n, expl in enumerate(expls):
            path = svg_path if n == 0 else str(Path(svg_path).with_suffix(f".grid{n + 1}.svg"))
            save_text_atomic(path, ex.to_svg(expl))
    if as_json:
        text_json = ex.to_json(expls[0]) if len(expls) == 1 else ex.grids_to_json(expls)
        if choice is not None:
            data = json.loads(text_json)
            data["tuning"] = {**choice.to_json(), "notes": notes,
                              "used": choice.entry is not None and not missing}
            text_json = json.dumps(data, indent=2) + "\n"
        click.echo(text_json, nl=False)
        return
    console = Console(file=sys.stdout, highlight=False, width=max(100, terminal_width()))
    for note in notes:
        console.print(f"note: {note}", markup=False, soft_wrap=True)
    for n, expl in enumerate(expls):
        if len(expls) > 1:
            console.rule(f"grid {n + 1} of {len(expls)}: parallel "
                         + ", ".join(a.var for a in kernel.body[n].axes), style="bold")
        ex.render_text(expl, console)
    if len(expls) > 1:
        total = sum(e.performance.seconds for e in expls)
        console.print(f"the {len(expls)} grids run one after the other: "
                      f"{ex.fmt_seconds(total)} in all")
