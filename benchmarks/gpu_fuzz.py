"""Generated programs (ptc.fuzz) on a real GPU: the emulator's judgement checked against the
hardware's. Each program is rendered for sm80 and sm90, built with nvcc (in parallel on the
CPUs) and run on the GPU on the same inputs as the reference interpreter; the result is
compared as ptc.fuzz.check compares the emulator's. The emulator's verdict on the same
program is recorded beside it where `--emulate` is given, so a disagreement between the
two shows.

    python benchmarks/gpu_fuzz.py --seed 0 --count 200 --seconds 240 --out DIR

Writes DIR/gpu_fuzz.json (one row per program and target: seed, kind, target, verdict,
message) and prints a summary table. Exit 1 when a program is wrong on the GPU.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGETS = ("sm80", "sm90")


def build(seed: int, target: str, folder: str):
    """Render and build one program for one target (a worker process): (seed, target,
    build directory or None, message)."""
    from ptc import runtime as R
    from ptc.diagnostics import CompileError
    from ptc.fuzz.generate import generate

    program = generate(seed)
    path = Path(folder) / f"gen{seed}-{target}.pt"    # one per build: they run at once
    path.write_text(program.text)
    try:
        kernel = R.compile(path, target, shapes=program.shape_dict,
                           out_dir=Path(folder) / f"gen{seed}-{target}")
    except CompileError as exc:
        return seed, target, None, f"build: {str(exc).splitlines()[0][:200]}"
    except Exception as exc:  # noqa: BLE001
        return seed, target, None, f"internal: {type(exc).__name__}: {exc}"[:240]
    return seed, target, str(kernel.directory), ""


def run(seed: int, target: str, directory: str) -> tuple[str, str]:
    """Run a built program on the GPU: (verdict, message)."""
    from ptc import runtime as R
    from ptc.fuzz.check import compare, typed_kernel
    from ptc.fuzz.generate import generate
    from ptc.interp import bind_dims, random_inputs, run_kernel

    program = generate(seed)
    kernel = typed_kernel(program)
    dims = bind_dims(kernel, {}, program.shape_dict)
    inputs = random_inputs(kernel, dims, seed=seed)
    compiled = R.load(directory)
    got = compiled.run(compiled.bind(**inputs),
                       poison=tuple(p.name for p in compiled.signature.outputs if not p.atomic))
    want = run_kernel(kernel, inputs, shapes=dims, grid_tiles=plan_tiles(Path(directory)))
    why = compare(kernel, got, want)
    return ("mismatch", why) if why else ("ok", "")


def plan_tiles(directory: Path) -> list[dict[str, int]]:
    """Per grid, the tile sizes of the plan built in `directory`: a pad that enters a
    reduction makes the result depend on them, and grids may choose differently."""
    from ptc.sched.plan import plans_from_json
    plans = plans_from_json((directory / "plan.json").read_text(), str(directory))
    return [dict(p.tiles) for p in plans]


def emulated_verdict(seed: int, target: str) -> str:
    from ptc.fuzz.check import check_program
    from ptc.fuzz.generate import generate
    found = check_program(generate(seed), (target,), seed=seed)
    return found[0].kind if found else "ok"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=240)
    parser.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    parser.add_argument("--out", default=".")
    parser.add_argument("--emulate", action="store_true",
                        help="also the emulator's verdict on each (needs g++; slower)")
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    if args.dry_run:
        print(f"would build and run seeds {args.seed}..{args.seed + args.count - 1} for "
              f"{', '.join(TARGETS)} on the GPU within {args.seconds:.0f} s")
        return 0
    os.environ["PTC_STAGE_CACHE"] = "0"
    deadline = time.monotonic() + args.seconds
    folder = tempfile.mkdtemp(prefix="ptc-gpu-fuzz-")
    rows = []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(build, s, t, folder) for s in range(args.seed, args.seed + args.count)
                   for t in TARGETS]
        for future in as_completed(futures):
            if time.monotonic() > deadline:
                break
            seed, target, directory, message = future.result()
            from ptc.fuzz.generate import generate
            row = {"seed": seed, "kind": generate(seed).kind, "target": target}
            if directory is None:
                row.update(verdict=message.split(":")[0], message=message)
            else:
                try:
                    verdict, why = run(seed, target, directory)
                except Exception as exc:  # noqa: BLE001 -- a launch failure is a finding
                    verdict, why = "run-error", f"{type(exc).__name__}: {exc}"[:240]
                row.update(verdict=verdict, message=why)
            if args.emulate:
                row["emulator"] = emulated_verdict(seed, target)
            rows.append(row)
            if row["verdict"] != "ok":
                print(f"seed {seed} {target}: {row['verdict']}: {row['message']}", flush=True)
        for f in futures:
            f.cancel()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_fuzz.json").write_text(json.dumps(rows, indent=1) + "\n")
    from collections import Counter
    counts = Counter((r["target"], r["verdict"]) for r in rows)
    print(f"{len(rows)} program x target runs on the GPU")
    for (target, verdict), n in sorted(counts.items()):
        print(f"  {target:5} {verdict:10} {n}")
    return 1 if any(r["verdict"] in ("mismatch", "run-error") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
