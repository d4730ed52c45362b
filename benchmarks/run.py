"""The performance table: every workload of benchmarks/workloads.py (DESIGN.md section 6's
shapes) built for each target and timed on this machine's GPU beside its baselines (torch:
cuBLAS, SDPA -- FlashAttention-2 or cuDNN --, and the Triton kernels of
benchmarks/baselines/), each with the L2 flushed before every timed launch.

    python benchmarks/run.py                        # everything, targets sm90 and sm80
    python benchmarks/run.py --quick                # gemm 4096, flash_attn d128, softmax; sm90
    python benchmarks/run.py --only gemm --out DIR  # workloads whose label contains "gemm"
    python benchmarks/run.py --dry-run              # say what would run; no GPU needed

Writes OUT/bench.json, a table of measurements (ptc.runtime.measured: one row per plan
timed, with the plan, the model's estimate, the peaks and each baseline's time), which
benchmarks/report.py renders and `ptc calibrate` fits the cost model to. OUT defaults to
benchmarks/results/DATE-GPU/. Every ptc output is compared with the torch baseline's on the
GPU (the reference interpreter is too slow at these sizes; `pytest -m gpu` checks against
it at small shapes). Builds run in parallel (--jobs) before anything is timed.
"""
from __future__ import annotations

import argparse
import datetime
import math
import os
import re
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from workloads import select  # noqa: E402

DEFAULT_ITERS, QUICK_ITERS = 50, 20


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="results folder (default benchmarks/results/DATE-GPU)")
    parser.add_argument("--quick", action="store_true", help="the few quick workloads, sm90")
    parser.add_argument("--only", default="", help="workloads whose label contains this")
    parser.add_argument("--targets", help="comma-separated targets (default sm90,sm80)")
    parser.add_argument("--iters", type=int, help="timed runs per contender")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0, help="seed for the inputs")
    parser.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1),
                        help="parallel builds")
    parser.add_argument("--baselines", default="torch,torch-flash,torch-cudnn,triton",
                        help="which baselines to time (comma-separated; 'none' for none)")
    parser.add_argument("--budget", type=float, default=0.0,
                        help="seconds for everything: workloads not started by then are "
                             "left out (0: no limit); bench.json is rewritten after each")
    parser.add_argument("--dry-run", action="store_true", help="say what would run")
    args = parser.parse_args(argv)
    if args.iters is not None and args.iters < 1:
        parser.error("--iters must be at least 1")
    args.iters = args.iters or (QUICK_ITERS if args.quick else DEFAULT_ITERS)
    args.targets = tuple(args.targets.split(",")) if args.targets else None
    args.baselines = () if args.baselines == "none" else tuple(args.baselines.split(","))
    return args


def gpu_slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", name).strip("-") or "gpu"


# ---- builds, in worker processes -----------------------------------------------------------
def build_job(sample: str, target: str, shapes: dict):
    """(prepared, build folder, "") or (None, None, error): prepare and build one plan."""
    from ptc import runtime
    from ptc.diagnostics import CompileError

    try:
        prepared = runtime.prepare(ROOT / "samples" / f"{sample}.pt", target,
                                   shapes=shapes or None)
        compiled = runtime.build_prepared(prepared, shapes=shapes or None)
    except CompileError as exc:
        return None, None, str(exc).strip().splitlines()[0]
    return prepared, str(compiled.directory), ""


def build_all(pairs, jobs: int, say) -> dict:
    started = time.perf_counter()
    out = {}
    with ProcessPoolExecutor(max_workers=max(1, jobs), mp_context=get_context("spawn")) as pool:
        futures = {(w.label, t): pool.submit(build_job, w.sample, t, dict(w.shapes))
                   for w, t in pairs}
        for key, future in futures.items():
            out[key] = future.result()
            if out[key][2]:
                say(f"{key[0]} {key[1]}: {out[key][2]}")
    say(f"built {len(pairs)} kernel(s) in {time.perf_counter() - started:.0f} s")
    return out


# ---- timing ------------------------------------------------------------------------------------
def relative_error(got, want) -> float:
    import torch

    g, w = got.double(), want.double()
    finite = torch.isfinite(w)
    bad = int((~torch.isfinite(g) & finite).sum())
    if bad:
        return float("inf")
    diff = torch.where(finite, g - w, torch.zeros_like(g))
    ref = torch.where(finite, w, torch.zeros_like(w))
    denom = float(torch.linalg.vector_norm(ref))
    return float(torch.linalg.vector_norm(diff)) / (denom or 1.0)


def cross_check(outputs: dict, reference, signature) -> str:
    """ptc's outputs against the torch baseline's (in output order)."""
    from ptc.runtime.bench import TOLERANCE

    if reference is None:
        return "skipped (no torch output to compare)"
    worst = []
    for p, want in zip(signature.outputs, reference):
        err = relative_error(outputs[p.name], want.reshape(outputs[p.name].shape))
        tol = TOLERANCE.get(p.dtype, 1e-3)
        worst.append((err / tol if tol else (0 if err == 0 else float("inf")), p.name, err, tol))
    ratio, name, err, tol = max(worst)
    verdict = "ok" if ratio <= 1 else "FAIL"
    return f"{verdict} vs torch ({name}: rel. L2 {err:.1e}, tolerance {tol:.0e})"


def run_workload(w, targets, builds, args, gpu, peaks, flush, say):
    """The rows of one workload: its inputs drawn once, its baselines timed once, then
    each target's build."""
    import torch

    from ptc import runtime
    from ptc.interp import bind_dims, random_inputs
    from ptc.runtime.baselines import to_torch
    from ptc.runtime.bench import work_of
    from ptc.runtime.measured import Row
    from ptc.sema import typed as T
    from ptc.tune.measure import first_line, measured_row

    import contenders

    built = [(t, builds[(w.label, t)]) for t in targets]
    ok = [(t, b) for t, b in built if b[0] is not None]
    rows = [Row(w.label, f"samples/{w.sample}.pt", w.sample, t, w.shapes, (), "", "", None,
                error=b[2]) for t, b in built if b[0] is None]
    if not ok:
        return rows
    kernel = ok[0][1][0].kernel
    dims = bind_dims(kernel, {}, dict(w.shapes))
    inputs = random_inputs(kernel, dims, args.seed)
    tensors = to_torch({p.name: inputs[p.name] for p in kernel.inputs
                        if isinstance(p, T.TensorParam)})
    scalars = {p.name: float(inputs[p.name]) for p in kernel.inputs
               if isinstance(p, T.ScalarParam)}
    baselines, reference, notes = [], None, []
    for name in (b for b in args.baselines if b in w.baselines):
        ms, outputs, why = contenders.run_baseline(name, kernel.name, tensors, scalars,
                                                   warmup=args.warmup, iters=args.iters,
                                                   flush=flush)
        if ms is None:
            if why and not why.startswith("no "):
                notes.append(why)
            continue
        baselines.append((name, ms))
        if name == "torch":
            reference = outputs
    for target, (prepared, folder, _) in ok:
        compiled = runtime.load(folder)
        label = " | ".join(_label(p) for p in prepared.plans)
        try:
            outs = {p.name: torch.empty(tuple(p.shape_in(dims)), dtype=_torch_dtype(p.dtype),
                                        device="cuda") for p in kernel.outputs}
            compiled(**tensors, **scalars, out=outs)
            check = cross_check(outs, reference, compiled.signature)
            timing = compiled.time(warmup=args.warmup, iters=args.iters,
                                   flush_bytes=contenders.FLUSH_BYTES, **tensors, **scalars)
        except Exception as exc:     # a launch that fails is a row with its error
            torch.cuda.synchronize()
            rows.append(Row(w.label, f"samples/{w.sample}.pt", kernel.name, target, w.shapes,
                            tuple(sorted(dims.items())), prepared.plan_json, label, None,
                            error=f"{type(exc).__name__}: {first_line(exc)}"))
            say(f"{w.label:28s} {target}: {rows[-1].error}")
            continue
        row = measured_row(w.label, f"samples/{w.sample}.pt", prepared, dict(w.shapes), dims,
                           timing, work_of(prepared, dims), peaks, check=check, label=label,
                           baselines=baselines)
        rows.append(row)
        rate = (f"{row.tflops:.0f} TFLOP/s" if row.bound == "compute" and row.tflops
                else f"{row.gbs:.0f} GB/s")
        vs = ", ".join(f"{n} {row.speedup(n):.2f}x" for n, _ in baselines)
        say(f"{w.label:28s} {target}: {row.median_ms:.3f} ms, {rate}, "
            f"{100 * (row.peak_fraction or 0):.0f}% of peak, model {row.model_ms:.3f} ms"
            + (f"; {vs}" if vs else "") + f"; {check.split(' (')[0]}")
    for note in notes:
        say(f"{w.label:28s} note: {note}")
    return rows


def _label(plan) -> str:
    tiles = " ".join(f"{k}={v}" for k, v in plan.tiles)
    style = plan.style.replace("_", "-")
    extra = f", {plan.stages} stages" if plan.stages > 1 else ""
    return f"{tiles}; {style}{extra}" + (", persistent" if plan.launch.persistent else "")


def _torch_dtype(dtype: str):
    import torch

    return {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32,
            "i32": torch.int32, "bool": torch.bool}[dtype]


# ---- main ----------------------------------------------------------------------------------------
def dry_run(pairs, args) -> int:
    print(f"benchmarks/run.py --dry-run: {len(pairs)} build(s), then per workload: inputs, "
          f"baselines, ptc ({args.warmup} warm-up + {args.iters} timed runs, L2 flushed)")
    for w, target in pairs:
        shapes = f" --shape {w.shape_text}" if w.shapes else ""
        print(f"  would build: ptc build samples/{w.sample}.pt --target {target}{shapes}")
    seen = set()
    for w, _ in pairs:
        if w.label in seen:
            continue
        seen.add(w.label)
        names = [b for b in w.baselines if b in args.baselines]
        print(f"  would time: {w.label}: ptc" + "".join(f", {b}" for b in names))
    out = args.out or "benchmarks/results/DATE-GPU"
    print(f"  would write: {out}/bench.json")
    return 0


def main(argv=None) -> int:
    args = parse_args(argv)
    pairs = select(quick=args.quick, only=args.only, targets=args.targets)
    if not pairs:
        print("benchmarks/run.py: no workload matches", file=sys.stderr)
        return 2
    if args.dry_run:
        return dry_run(pairs, args)
    from ptc.diagnostics import CompileError
    from ptc.devices import get_device
    from ptc.runtime import measured as M
    from ptc.runtime.toolchains import toolchain

    chain = toolchain("cuda")        # the baselines are CUDA's: cuBLAS, FlashAttention
    try:
        gpu = chain.find_gpus()[0]
    except CompileError as exc:
        print(f"benchmarks/run.py: {exc}", file=sys.stderr)
        return 1
    today = datetime.date.today().isoformat()
    out = Path(args.out) if args.out else \
        ROOT / "benchmarks" / "results" / f"{today}-{gpu_slug(gpu.name)}"
    out.mkdir(parents=True, exist_ok=True)

    def say(message: str) -> None:
        print(message, flush=True)

    deadline = time.perf_counter() + args.budget if args.budget > 0 else float("inf")

    builds = build_all(pairs, args.jobs, say)        # before CUDA is touched here
    import contenders
    import torch

    peaks_name = M.peaks_target(gpu, chain) or pairs[0][1]
    peaks = get_device(peaks_name)
    flush = contenders.flush_buffer()
    rows, notes = [], []
    if "H100" not in gpu.name and peaks_name == "sm90":
        notes.append(f"% of peak is of {peaks.description} (sm90.yaml); this GPU is {gpu.name}")
    targets_of: dict = {}
    for w, t in pairs:
        targets_of.setdefault(w, []).append(t)
    for w, targets in targets_of.items():
        if time.perf_counter() > deadline:
            notes.append(f"out of time (--budget {args.budget:.0f} s): {w.label} and the "
                         "workloads after it were not run")
            say(notes[-1])
            break
        rows += run_workload(w, targets, builds, args, gpu, peaks, flush, say)
        torch.cuda.empty_cache()
        doc = M.Document(gpu.name, gpu.arch, today, tuple(rows), source="benchmarks/run.py",
                         peaks_from=peaks_name, notes=tuple(notes))
        (out / "bench.json").write_text(M.dumps(doc))     # so far: kept if stopped later
    doc = M.Document(gpu.name, gpu.arch, today, tuple(rows), source="benchmarks/run.py",
                     peaks_from=peaks_name, notes=tuple(notes))
    (out / "bench.json").write_text(M.dumps(doc))
    timed = [r for r in rows if r.timed]
    ratios = [r.model_ratio for r in timed if r.model_ratio]
    if ratios:
        say(f"model/measured over {len(ratios)} plan(s): median "
            f"{statistics.median(ratios):.2f}, worst "
            f"{max(ratios, key=lambda r: abs(math.log(r))):.2f}")
    say(f"wrote {out / 'bench.json'} ({len(timed)} of {len(rows)} row(s) timed)")
    return 0 if len(timed) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
