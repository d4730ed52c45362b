"""compute-sanitizer on every sample's harness at a small shape: memcheck, racecheck and
synccheck on `ptc_run` (the build folder's main), for each line of samples/SMOKE, each
target and two plans:

  smoke       the plan the search picks at the SMOKE shape and tiles (as pytest -m gpu runs)
  bench-plan  the plan the search picks at the sample's benchmark shape (its `dims`
              defaults: what benchmarks/run.py times), pinned and built at the SMOKE shape

    python benchmarks/sanitize.py --out DIR [--targets sm90,sm80] [--tools memcheck,...]
    python benchmarks/sanitize.py --dry-run          # say what would run; no GPU needed

Each run's outputs are also compared with the reference interpreter. Writes
DIR/sanitizer.json (one record per harness and tool) and, for every run that was not
clean, its log under DIR/sanitize/logs/. Builds run in parallel first, in --work (default
DIR/sanitize; gpu.sh keeps them out of the results folder).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TOOLS = ("memcheck", "racecheck", "synccheck")
VARIANTS = ("smoke", "bench-plan")
ERROR_EXIT = 86
TOOL_FLAGS = {"memcheck": ["--leak-check", "no"], "racecheck": ["--racecheck-report", "all"],
              "synccheck": [], "initcheck": []}


@dataclass(frozen=True)
class Harness:
    sample: str
    shapes: tuple[tuple[str, int], ...]
    tiles: tuple[tuple[str, int], ...]
    target: str
    variant: str

    @property
    def name(self) -> str:
        return f"{self.sample}.{self.target}.{self.variant}"


@dataclass(frozen=True)
class Result:
    harness: str
    sample: str
    target: str
    variant: str
    tool: str
    status: str           # ok | errors | failed | timeout | not built | skipped
    errors: int
    seconds: float
    detail: str = ""      # the summary line, or why it did not run
    log: str = ""
    reference: str = ""   # the outputs against the reference interpreter (memcheck's run)


def smoke_lines() -> list[tuple[str, dict, dict]]:
    out = []
    for line in (ROOT / "samples" / "SMOKE").read_text().splitlines():
        parts = line.split()
        if not parts or parts[0].startswith("#"):
            continue
        pairs = [dict((k, int(v)) for k, v in (p.split("=") for p in text.split(",")))
                 if text else {} for text in (parts[1:] + ["", ""])[:2]]
        out.append((parts[0].removesuffix(".pt"), pairs[0], pairs[1]))
    return out


def priority(h: Harness) -> tuple:
    """What runs first when time is short: the plans the benchmarks run, sm90 first."""
    return (h.variant != "bench-plan", h.target != "sm90")


def harnesses(targets, variants) -> list[Harness]:
    return [Harness(sample, tuple(shapes.items()), tuple(tiles.items()), t, v)
            for sample, shapes, tiles in smoke_lines() for t in targets for v in variants]


# ---- building (worker processes) ------------------------------------------------------------
def build(h: Harness, folder: str) -> str:
    """Build `h` into folder/build and write its inputs to folder/in; "" or the error."""
    import numpy as np

    from ptc import driver, runtime
    from ptc.diagnostics import CompileError
    from ptc.sema import typed as T

    path = ROOT / "samples" / f"{h.sample}.pt"
    shapes, tiles = dict(h.shapes), dict(h.tiles)
    try:
        if h.variant == "bench-plan":
            prepared = runtime.prepare(path, h.target, shapes=shapes, schedule=driver.PlanText(
                f"{h.sample}'s benchmark plan", bench_plan_at(path, h.target, shapes)))
        else:
            prepared = runtime.prepare(path, h.target, shapes=shapes, tiles=tiles)
        runtime.build_prepared(prepared, Path(folder) / "build", shapes=shapes)
    except CompileError as exc:
        return str(exc).strip().splitlines()[0]
    inputs = sample_inputs(h.sample, prepared.kernel, shapes)
    data = Path(folder) / "in"
    data.mkdir(parents=True, exist_ok=True)
    scalars = []
    for p in prepared.kernel.inputs:
        if isinstance(p, T.TensorParam):
            a = np.asarray(inputs[p.name])
            np.save(data / f"{p.name}.npy", a.astype(np.float32) if p.dtype == "bf16" else a)
        else:
            scalars.append(f"{p.name} {float(inputs[p.name])!r}")
    (data / "scalars.txt").write_text("".join(s + "\n" for s in scalars))
    (data / "dims.txt").write_text("".join(f"{k} {v}\n" for k, v in shapes.items()))
    (Path(folder) / "plan.label").write_text(" | ".join(
        " ".join(f"{k}={v}" for k, v in p.tiles) + f"; {p.style}" for p in prepared.plans))
    np.savez(Path(folder) / "reference.npz", **_reference(prepared, inputs, shapes))
    return ""


def bench_plan_at(path: Path, target: str, shapes: dict) -> str:
    """The plan JSON of the tiles and pipeline choice that the search picks at the sample's
    benchmark shape (its `dims` defaults), made at `shapes` instead (a head dim and the
    like differ between the two, so the plan itself cannot be pinned as it is)."""
    from ptc import driver
    from ptc.diagnostics import CompileError, Diagnostic
    from ptc.sched.plan import plans_to_json

    bench = driver.schedule_grids(driver.check_file(path).kernels[0], target)
    small = driver.check_file(path, shapes).kernels[0]
    plans = []
    for big, part in zip(bench, driver.grids(small)):
        best = big.best
        result = driver.schedule(part, target, shapes=shapes, tiles=dict(best.tiles))
        same = [c for c in result.ranked if c.choice == best.choice]
        if not same:
            raise CompileError(Diagnostic(f"the benchmark plan ({best.label()}) does not "
                                          "apply at this shape"))
        plans.append(same[0].plan)
    return plans_to_json(plans)


def sample_inputs(sample: str, kernel, shapes) -> dict:
    """The sample's own random inputs (tests/formulas.py, as the emulated tests draw them:
    moe_gemm's routing writes each row of Y once), else ptc's random ones."""
    import numpy as np

    from ptc.interp import bind_dims, random_inputs

    if str(ROOT / "tests") not in sys.path:
        sys.path.insert(0, str(ROOT / "tests"))
    import formulas

    try:
        return formulas.make_inputs(sample, bind_dims(kernel, {}, shapes),
                                    np.random.default_rng(1))
    except KeyError:     # a sample formulas.py does not know
        return random_inputs(kernel, shapes, seed=1)


def _reference(prepared, inputs, shapes) -> dict:
    import numpy as np

    from ptc.interp import run_kernel

    with np.errstate(all="ignore"):
        out = run_kernel(prepared.kernel, inputs, shapes=shapes,
                         grid_tiles=[dict(p.tiles) for p in prepared.plans])
    return {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}


# ---- running the sanitizer ------------------------------------------------------------------
def find_sanitizer() -> str | None:
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for folder in [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"]:
        for rel in ("bin/compute-sanitizer", "compute-sanitizer/compute-sanitizer"):
            if folder and os.access(Path(folder) / rel, os.X_OK):
                return str(Path(folder) / rel)
    nvcc = shutil.which("nvcc")
    if nvcc and os.access(Path(nvcc).resolve().parent / "compute-sanitizer", os.X_OK):
        return str(Path(nvcc).resolve().parent / "compute-sanitizer")
    return None


def command(sanitizer: str, tool: str, folder: Path) -> list[str]:
    return [sanitizer, "--tool", tool, "--error-exitcode", str(ERROR_EXIT), "--print-limit",
            "20", *TOOL_FLAGS.get(tool, []), str(folder / "build" / "ptc_run"),
            str(folder / "in"), "--warmup", "0", "--iters", "1"]


def summary(tool: str, text: str) -> tuple[int, str]:
    """(errors, the summary line) from a sanitizer's output."""
    m = re.search(r"RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) "
                  r"warnings?\)", text)
    if m:
        return int(m.group(2)), m.group(0)
    m = re.search(r"ERROR SUMMARY: (\d+) errors?", text)
    if m:
        return int(m.group(1)), m.group(0)
    return -1, ""


def run_tool(sanitizer: str, tool: str, h: Harness, folder: Path, logs: Path,
             timeout: float) -> Result:
    started = time.perf_counter()
    try:
        proc = subprocess.run(command(sanitizer, tool, folder), capture_output=True, text=True,
                              timeout=timeout)
        text = proc.stdout + proc.stderr
        code = proc.returncode
    except subprocess.TimeoutExpired as exc:
        text = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) \
            else (exc.stdout or "")
        code = None
    seconds = time.perf_counter() - started
    errors, line = summary(tool, text)
    if code is None:
        status = "timeout"
    elif code == 0 and errors <= 0:
        status = "ok"
    elif errors > 0 or code == ERROR_EXIT:
        status = "errors"
    else:
        status = "failed"
    log = ""
    if status != "ok":
        logs.mkdir(parents=True, exist_ok=True)
        log_path = logs / f"{h.name}.{tool}.txt"
        log_path.write_text("\n".join(text.splitlines()[-300:]) + "\n")
        log = str(log_path)
    detail = line or (f"exit {code}" if code is not None else f"over {timeout:.0f} s")
    return Result(h.name, h.sample, h.target, h.variant, tool, status, max(errors, 0),
                  round(seconds, 2), detail, log)


def check_outputs(folder: Path) -> str:
    """The outputs ptc_run wrote (under the sanitizer) against the reference."""
    import numpy as np

    from ptc.runtime.bench import TOLERANCE, compare

    want = np.load(folder / "reference.npz")
    sig = json.loads((folder / "build" / "signature.json").read_text())
    dtypes = {t["name"]: t["dtype"] for t in sig.get("outputs", [])}
    worst = "ok"
    for name in want.files:
        path = folder / "in" / f"{name}.npy"
        if not path.exists():
            return f"no {name}.npy written"
        c = compare(name, dtypes.get(name, "f32"), np.load(path), want[name])
        if not c.ok:
            return (f"FAIL: {name} rel. L2 {c.rel_l2:.1e} > "
                    f"{TOLERANCE.get(c.dtype, 1e-3):.0e}, {c.bad_nan} NaN/inf")
    return worst


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=False, default=str(ROOT / "build" / "sanitize"),
                    help="results folder (sanitizer.json, sanitize/)")
    ap.add_argument("--work", help="where the harnesses are built and run (default: "
                                   "OUT/sanitize; logs always go to OUT/sanitize/logs)")
    ap.add_argument("--targets", default="sm90,sm80")
    ap.add_argument("--tools", default=",".join(TOOLS))
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--only", default="", help="samples whose name contains this")
    ap.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1))
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per sanitizer run")
    ap.add_argument("--budget", type=float, default=0.0,
                    help="seconds for everything: runs not started by then are skipped "
                         "(0: no limit); sanitizer.json is rewritten as results come in")
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)
    variants = tuple(args.variants.split(","))
    bad = [v for v in variants if v not in VARIANTS]
    if bad:
        ap.error(f"unknown variant {bad[0]} (expected {', '.join(VARIANTS)})")
    tools = tuple(args.tools.split(","))
    bad = [t for t in tools if t not in TOOL_FLAGS]
    if bad:
        ap.error(f"unknown tool {bad[0]} (expected {', '.join(TOOL_FLAGS)})")
    todo = sorted((h for h in harnesses(tuple(args.targets.split(",")), variants)
                   if args.only in h.sample), key=priority)
    out = Path(args.out)
    work = Path(args.work) if args.work else out / "sanitize"
    logs = out / "sanitize" / "logs"
    sanitizer = find_sanitizer() or "compute-sanitizer"
    if args.dry_run:
        print(f"benchmarks/sanitize.py --dry-run: {len(todo)} harness(es) x {len(tools)} "
              f"tool(s), with {sanitizer}")
        for h in todo:
            shapes = ",".join(f"{k}={v}" for k, v in h.shapes)
            print(f"  would build: {h.name} (samples/{h.sample}.pt --target {h.target} "
                  f"--shape {shapes}, {h.variant} plan)")
        for h in todo[:1]:
            for tool in tools:
                print("  would run: " + " ".join(command(sanitizer, tool, work / h.name)))
        print(f"  would write: {out / 'sanitizer.json'}")
        return 0
    if find_sanitizer() is None:
        results = [Result(h.name, h.sample, h.target, h.variant, tool, "skipped", 0, 0.0,
                          "compute-sanitizer not found") for h in todo for tool in tools]
        _write(out, results)
        print("sanitize: compute-sanitizer not found", file=sys.stderr)
        return 1
    started = time.perf_counter()
    deadline = started + args.budget if args.budget > 0 else float("inf")
    with ProcessPoolExecutor(max_workers=max(1, args.jobs),
                             mp_context=get_context("spawn")) as pool:
        built = dict(zip(todo, pool.map(build, todo, [str(work / h.name) for h in todo])))
    print(f"sanitize: built {len(todo)} harness(es) in {time.perf_counter() - started:.0f} s",
          flush=True)

    done: dict[Harness, list[Result]] = {}
    lock = threading.Lock()

    def one(h: Harness) -> None:
        rows = []
        for n, tool in enumerate(tools):          # one at a time: they share the outputs
            if built[h]:
                r = Result(h.name, h.sample, h.target, h.variant, tool, "not built", 0, 0.0,
                           built[h])
            elif time.perf_counter() + min(args.timeout, 10) > deadline:
                r = Result(h.name, h.sample, h.target, h.variant, tool, "skipped", 0, 0.0,
                           "out of time (--budget)")
            else:
                r = run_tool(sanitizer, tool, h, work / h.name, logs,
                             min(args.timeout, max(1.0, deadline - time.perf_counter())))
                if n == 0 and r.status in ("ok", "errors"):
                    r = Result(**{**asdict(r), "reference": check_outputs(work / h.name)})
            rows.append(r)
            print(f"  {h.name:42s} {tool:10s} {r.status:8s} {r.detail}", flush=True)
        with lock:                 # what is done so far is on disk, whatever happens next
            done[h] = rows
            _write(out, [r for k in todo if k in done for r in done[k]])

    with ThreadPoolExecutor(max_workers=max(1, min(args.jobs, 8))) as pool:
        list(pool.map(one, todo))
    results = [r for h in todo for r in done[h]]
    _write(out, results)
    clean = sum(r.status == "ok" for r in results)
    print(f"sanitize: {clean} of {len(results)} run(s) clean "
          f"({time.perf_counter() - started:.0f} s); wrote {out / 'sanitizer.json'}")
    return 0 if clean == len(results) else 1


def _write(out: Path, results) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "sanitizer.json").write_text(json.dumps(
        {"format": "ptc-sanitizer/1", "results": [asdict(r) for r in results]},
        indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    sys.exit(main())
