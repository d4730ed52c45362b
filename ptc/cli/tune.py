"""`ptc tune` (measure the best-ranked plans on a GPU, keep the fastest in the tuning
database), `ptc calibrate` (fit the cost model's estimated figures to measurements), and
how compile, build, bench and explain use the tuning database (`tuning_options`,
`tuning_choice`, `pin_or_search`, `promote`)."""
from __future__ import annotations

import datetime
import functools
import json
import sys
from dataclasses import dataclass, replace

import click

from ..diagnostics import CompileError
from .common import (checked_kernel, chosen_target, cli, fail, kernel_option, shape_option,
                     target_options, terminal_width, user_errors)


# ---- the tuning database in compile, build, bench and explain ----------------------------
@dataclass(frozen=True)
class TuningOpts:
    database: str | None = None   # --tuning FILE (default: ptc-tuning.json beside the .pt)
    enabled: bool = True          # --no-tuning turns it off
    verbose: bool = False


def tuning_options(f):
    """--tuning FILE, --no-tuning and --verbose, passed on as `tuning=TuningOpts(...)`."""
    @functools.wraps(f)
    def wrapper(*args, tuning_file=None, no_tuning=False, verbose=False, **kwargs):
        return f(*args, tuning=TuningOpts(tuning_file, not no_tuning, verbose), **kwargs)

    wrapper = click.option("--verbose", is_flag=True,
                           help="Also say why no tuning entry applies (stale entries, "
                                "entries for other problem sizes).")(wrapper)
    wrapper = click.option("--no-tuning", "no_tuning", is_flag=True,
                           help="Ignore the tuning database: take the model's best plan.")(wrapper)
    wrapper = click.option("--tuning", "tuning_file", metavar="FILE.json",
                           help="The tuning database to use (default: ptc-tuning.json "
                                "beside FILE, where `ptc tune` writes it).")(wrapper)
    return wrapper


def tuning_choice(file, kernel, chosen, shapes, tiles, schedule_file,
                  opts: TuningOpts | None, say=None):
    """The database's entry for this compilation (ptc.tune.use), its notes shown on
    stderr (or given to `say`); None when the database is turned off."""
    from ..devices import get_device
    from ..tune import choose

    if opts is None or not opts.enabled:
        return None
    device = user_errors(lambda: get_device(chosen))
    choice = user_errors(lambda: choose(file, kernel, device, shapes,
                                        database=opts.database, tiles=tiles,
                                        schedule=schedule_file), file)
    if say is None:
        def say(note: str) -> None:
            click.echo(f"note: {note}", err=True)
    if opts.database and choice.skipped.startswith("there is no"):
        raise fail(f"{opts.database}: no such file", hint="write it with `ptc tune`")
    if choice.entry is not None:
        say(choice.used_note())
    for note in choice.stale_notes():
        say(note + (" (re-run ptc tune)" if not opts.verbose else ""))
    if opts.verbose:
        for note in choice.verbose_notes():
            say(note)
    return choice


def pin_or_search(choice, schedule_file, run):
    """run(schedule) with the tuning entry's plan pinned where there is one; if that plan no
    longer builds (ptc changed under the same version), say so and run the search."""
    if choice is None or choice.entry is None:
        return run(schedule_file)
    try:
        return run(choice.plan)
    except CompileError as exc:
        text = str(exc).strip().splitlines()
        click.echo(f"note: ignoring the tuning entry {choice.entry.key.id}: its plan no "
                   f"longer builds ({text[0] if text else exc}); using the model's best plan",
                   err=True)
        return run(None)


def _identity(plan) -> tuple:
    return (plan.tiles, plan.style, plan.stages, plan.launch.persistent,
            tuple((r.name, r.warps, r.instances) for r in plan.roles))


def promote(results, choice):
    """`ptc explain`: the searches `results` with the tuning entry's plans ranked first
    (so the explanation is of the plan that gets built); (results, note or "")."""
    from ..sched.plan import plans_from_json

    if choice is None or choice.entry is None:
        return results, ""
    plans = plans_from_json(choice.entry.plan_json, choice.path)
    out = []
    for result, plan in zip(results, plans):
        index = next((i for i, c in enumerate(result.ranked)
                      if _identity(c.plan) == _identity(plan)), None)
        if index is None:
            return results, (f"the tuning entry {choice.entry.key.id}'s plan is not among the "
                             "plans the search proposes now (ptc changed since it was "
                             "tuned?): explaining the model's best plan")
        ranked = (result.ranked[index],) + result.ranked[:index] + result.ranked[index + 1:]
        out.append(replace(result, ranked=ranked))
    return tuple(out), ""


# ---- ptc tune --------------------------------------------------------------------------------
def make_measurer(**options):
    """The measurer `ptc tune` uses (the tests put a fake one here)."""
    from ..tune.measure import GpuMeasurer

    return GpuMeasurer(**options)


def find_gpu(chain, arch: str):
    """The GPU to tune on; exit 1 with one line where there is none (or it cannot run
    `arch`). Asks the backend's driver (`chain`'s find_gpus; the tests replace it)."""
    from ..runtime.errors import NoDevice

    try:
        gpus = chain.find_gpus()
    except NoDevice as exc:
        raise fail(f"ptc tune measures plans on a GPU, and this machine has none "
                   f"({exc.reason or exc})",
                   hint=f"run it where there is {chain.gpu}; ptc compile, build and explain "
                        "read the tuning database without one") from None
    if not chain.can_run(gpus[0], arch):
        raise fail(f"the GPU is {gpus[0].name} ({gpus[0].arch}), which cannot run code built "
                   f"for {arch}", hint="tune for this GPU's target (sm90 on an H100)")
    return gpus[0]


def peaks_device(gpu, chain, fallback):
    """The builtin device whose peaks describe `gpu` (ptc.runtime.measured.peaks_target),
    else `fallback`."""
    from ..devices import get_device
    from ..runtime.measured import peaks_target

    name = peaks_target(gpu, chain)
    return get_device(name) if name else fallback


@cli.command(epilog="""\b
Examples:
  ptc tune samples/gemm.pt --target sm90 --shape M=8192,N=8192,K=8192
  ptc tune samples/flash_attn.pt -t sm90 --top 6 --record fa.measured.json
  ptc tune samples/gemm.pt -t sm90 --check-shape M=300,N=200,K=100 --tuning my-tuning.json""")
@click.argument("file")
@target_options
@kernel_option
@shape_option
@click.option("--top", type=click.IntRange(1, 64), default=4, show_default=True,
              help="Measure the K plans the cost model ranks best.")
@click.option("--neighbours/--no-neighbours", default=True, show_default=True,
              help="Also measure the first choice's tile neighbours (one tile size one "
                   "candidate smaller or larger) that the model puts within 25% of it.")
@click.option("--check-shape", "check_shapes", type=click.types.StringParamType(),
              multiple=True, metavar="NAME=INT[,NAME=INT...]",
              help="The small problem each plan is checked on against the reference "
                   "interpreter (default: 2.5 tiles of each tiled dim, 2 of each grid-only "
                   "dim).")
@click.option("--no-check", "no_check", is_flag=True,
              help="Do not check the plans against the reference interpreter.")
@click.option("--warmup", type=click.IntRange(0, 100000), default=10, show_default=True,
              help="Untimed runs first.")
@click.option("--iters", type=click.IntRange(1, 100000), default=50, show_default=True,
              help="Timed runs, each after flushing the L2 cache (the median counts).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Seed for the inputs.")
@click.option("--tuning", "database", metavar="FILE.json",
              help="The tuning database to write (default: ptc-tuning.json beside FILE).")
@click.option("--record", "record", metavar="OUT.json",
              help="Also write every timed plan as a table of measurements "
                   "(for ptc calibrate).")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
def tune(file, target, device_file, kernel_name, shapes, top, neighbours, check_shapes,
         no_check, warmup, iters, seed, database, record, as_json):
    """Measure the plans the cost model ranks best for FILE on this machine's GPU, each
    checked against the reference interpreter on a small problem and timed (median of
    --iters runs, L2 flushed) at --shape, and store the fastest in the tuning database,
    which ptc compile, build, bench and explain then use. Needs a CUDA GPU and nvcc."""
    from .. import driver
    from ..devices import get_device
    from ..runtime.toolchains import toolchain
    from ..tune import db as D
    from ..tune import compiler_release, make_key, select_trials
    from ..tune.tuner import run_trials
    from .common import Assignments

    checks = {}
    for text in check_shapes:
        for name, value in Assignments().convert(text, None, None):
            checks[name] = value
    chosen = chosen_target(target, device_file)
    kernel, text = checked_kernel(file, kernel_name, shapes)
    device = user_errors(lambda: get_device(chosen))
    chain = toolchain(device.backend)
    if not chain.runs:
        raise fail(f"{chosen} is a {device.backend} target; ptc tune measures CUDA targets "
                   "(sm80, sm90)")
    gpu = find_gpu(chain, device.arch)
    nvcc = user_errors(lambda: chain.find(device.arch).path)
    path = database or str(D.default_path(file))
    db = user_errors(lambda: D.load(path))
    say = (lambda message: None) if as_json else (lambda m: click.echo(f"  {m}", err=True))
    results = user_errors(lambda: driver.schedule_grids(kernel, chosen, shapes=shapes,
                                                        progress=sys.stderr.isatty()),
                          file, text)
    trials = select_trials(results, top, neighbours)
    dims = user_errors(lambda: driver.problem_dims(kernel, shapes), file, text)
    module = user_errors(lambda: driver.parse_file(file), file, text)
    kernel_ast = next(k for k in module.kernels if k.name == kernel.name)
    key = make_key(kernel_ast, kernel.name, dims, device,
                   compiler_release(device.backend, nvcc))
    measure = make_measurer(file=str(file), kernel=kernel.name, target=chosen,
                            shapes=dict(shapes), dims=dims, check_shapes=checks or None,
                            gpu_name=gpu.name, peaks=peaks_device(gpu, chain, device),
                            warmup=warmup, iters=iters, seed=seed, check=not no_check,
                            progress=say)
    say(f"measuring {len(trials)} plan(s) of {kernel.name} on {gpu.name}")
    result = user_errors(lambda: run_trials(trials, measure, key, gpu=gpu.name,
                                            date=datetime.date.today().isoformat()), file)
    if result.entry is not None:
        user_errors(lambda: D.save(D.with_entry(db, result.entry), path))
    if record:
        _record(record, result, gpu, chain)
    if as_json:
        click.echo(json.dumps(_tune_json(result, path), indent=2))
    else:
        _print_tune(result, path, kernel.name, gpu.name)
    if result.entry is None:
        raise fail(f"no plan of {kernel.name} passed its check; the tuning database is "
                   "unchanged", hint="the table above says why each was refused")


def _record(path, result, gpu, chain) -> None:
    from ..runtime import measured as M
    from .common import save_text_atomic

    doc = M.Document(gpu.name, gpu.arch, datetime.date.today().isoformat(), result.rows,
                     source="ptc tune", peaks_from=M.peaks_target(gpu, chain))
    save_text_atomic(path, M.dumps(doc))


def _tune_json(result, path) -> dict:
    return {"database": path, "key": result.key.to_json(),
            "entry": result.entry.key.id if result.entry else None,
            "winner": result.winner.trial.rank if result.winner else None,
            "trials": [{"rank": o.trial.rank, "why": o.trial.why, "label": o.trial.label,
                        "model_ms": o.trial.model_seconds * 1e3,
                        "measured_ms": o.measured.median_ms, "runs": o.measured.runs,
                        "check": o.measured.check} for o in result.outcomes]}


def _print_tune(result, path, kernel, gpu) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(f"ptc tune: {kernel} at {result.key.dims_text()} on {gpu}"),
                  title_justify="left")
    for col in ("", "model rank", "plan", "why", "model", "measured", "model/measured",
                "check"):
        table.add_column(col, justify="left" if col in ("", "plan", "why", "check")
                         else "right")
    for o in result.outcomes:
        m = o.measured
        model_ms = o.trial.model_seconds * 1e3
        table.add_row(*(Text(c) for c in (
            "*" if o is result.winner else "", str(o.trial.rank), o.trial.label, o.trial.why,
            f"{model_ms:.4g} ms", f"{m.median_ms:.4g} ms" if m.median_ms else "-",
            f"{model_ms / m.median_ms:.2f}" if m.median_ms else "-", m.check)))
    console = Console(file=sys.stdout, highlight=False, soft_wrap=False,
                      width=max(120, terminal_width()))
    console.print(table)
    if result.entry is not None:
        console.print(f"stored the fastest (* above) in {path} as entry {result.entry.key.id}",
                      markup=False)


# ---- ptc calibrate ----------------------------------------------------------------------------
@cli.command(epilog="""\b
Examples:
  ptc calibrate benchmarks/results/2026-12-01-NVIDIA-H100/bench.json --target sm90 \\
      -o sm90.calibrated.yaml
  ptc calibrate bench.json tune-gemm.json --device sm90 -o sm90.calibrated.yaml --json""")
@click.argument("results", nargs=-1, required=True)
@target_options
@click.option("--output", "-o", "output", metavar="OUT.yaml", required=True,
              help="Where to write the calibrated device description.")
@click.option("--date", metavar="YYYY-MM-DD",
              help="The date the tags say (default: the measurements' date).")
@click.option("--json", "as_json", is_flag=True, help="Print the fit as JSON.")
def calibrate(results, target, device_file, output, date, as_json):
    """Fit the cost model's estimated figures ([EST] in the device YAML: latencies, issue
    costs, L2 bandwidth) to the plans timed in RESULTS (tables of measurements written by
    benchmarks/run.py or ptc tune --record), write the device YAML with the fitted figures
    tagged [MEASURED <date> <gpu>], and report the model's error (model / measured time:
    median and worst) before and after. Needs no GPU."""
    from .. import calibrate as C
    from ..devices import load_device
    from ..runtime import measured as M
    from .common import save_text_atomic

    chosen = chosen_target(target, device_file)
    docs = [user_errors(lambda p=p: M.load(p)) for p in results]
    when = date or next((d.date for d in docs if d.date), "") \
        or datetime.date.today().isoformat()
    cal = user_errors(lambda: C.calibrate(docs, chosen, date=when))
    save_text_atomic(output, cal.yaml_text)
    user_errors(lambda: load_device(output))       # what we wrote must load
    if as_json:
        click.echo(json.dumps({**cal.to_json(), "output": output}, indent=2))
        return
    _print_calibration(cal, output)


def _print_calibration(cal, output) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from ..calibrate import number_text

    console = Console(file=sys.stdout, highlight=False, soft_wrap=False,
                      width=max(100, terminal_width()))
    table = Table(title=Text(f"ptc calibrate: {cal.device.name} from "
                             f"{len(cal.observations)} timed plan(s) on {cal.gpu}"),
                  title_justify="left")
    for col in ("figure", "estimate", "fitted", "change"):
        table.add_column(col, justify="left" if col == "figure" else "right")
    for f, v in zip(cal.fit.figures, cal.fit.values):
        if f.name in cal.fit.insensitive:
            change = "no effect on these plans"
        elif number_text(v, f.is_int) == number_text(f.value, f.is_int):
            change = "kept"
        else:
            change = f"x{v / f.value:.2f}"
        table.add_row(*(Text(c) for c in (f.name, number_text(f.value, f.is_int),
                                          number_text(v, f.is_int), change)))
    console.print(table)
    for label, e in (("before", cal.fit.before), ("after", cal.fit.after)):
        console.print(f"model/measured {label + ':':7s} median {e.median:.3f}, worst {e.worst:.3f}, "
                      f"typically off by x{e.typical:.3f}", markup=False)
    for s in cal.skipped:
        console.print(f"skipped {s.label}: {s.reason}", markup=False)
    console.print(f"wrote {output}", markup=False)
