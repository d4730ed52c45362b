"""`make samples`, in parallel: check every sample, run the SMOKE lines on the reference
interpreter, and for every sample and target build it (CUDA: out/cuda/ and out/cuda-sm90/;
HIP: out/hip-gfx90a/, out/hip-gfx942/, built where a HIP compiler is installed, else
written with their build.sh) and keep its plan (out/plans/NAME.TARGET.json: the build
folder's plan.json, which `ptc compile --emit plan` prints; copying it saves a process and
a render per sample and target).

The `ptc` commands run at once on every core. A line per finished command says where the
run is: `[7/46] 3.2 s  ptc build ...`. The first failure prints its output and stops the
run (exit 1); outputs are written whole or not at all (a plan goes through a .tmp file).

    python tools/samples.py [--ptc .venv/bin/ptc] [--jobs N] [--out out]
"""
from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted((ROOT / "samples").glob("*.pt"))
TARGETS = ("sm80", "sm90", "gfx90a", "gfx942")
CUDA_OUT = {"sm80": "cuda", "sm90": "cuda-sm90"}
# the commands run a process per core: NumPy's OpenBLAS threads (one per core, spinning
# between calls) in each would take the CPU the others' compilers need (tests/conftest.py)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


@dataclass(frozen=True)
class Command:
    argv: tuple[str, ...]
    log: str = ""             # write stdout+stderr here; show its last line when done
    plan: tuple[str, str] = ("", "")   # then copy this file (the build's plan) to that one


class Failed(Exception):
    pass


def smoke_lines() -> list[list[str]]:
    path = ROOT / "samples" / "SMOKE"
    if not path.is_file():
        raise SystemExit("samples.py: samples/SMOKE is missing")
    lines = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if parts and not parts[0].startswith("#"):
            lines.append(parts)
    return lines


def hip_compiler_here() -> bool:
    return bool(os.environ.get("PTC_HIPCC") or any(
        shutil.which(c) for c in ("hipcc", "clang++-19", "clang++")))


def commands(ptc: str, out_dir: str = "out") -> list[Command]:
    out, o = [], out_dir
    for file, *rest in smoke_lines():
        argv = [ptc, "run", f"samples/{file}"]
        if rest:
            argv += ["--shape", rest[0]]
        if len(rest) > 1:
            argv += ["--tile", rest[1]]
        out.append(Command(tuple(argv)))
    verb = "build" if hip_compiler_here() else "compile"
    for path in SAMPLES:
        name, rel = path.stem, f"samples/{path.name}"
        for target in TARGETS:
            folder = CUDA_OUT.get(target, f"hip-{target}")
            argv = (ptc, "build" if target in CUDA_OUT else verb, rel, "--target", target,
                    "-o", f"{o}/{folder}/{name}")
            out.append(Command(argv, log=f"{o}/{folder}.{name}.log",
                               plan=(f"{o}/{folder}/{name}/plan.json",
                                     f"{o}/plans/{name}.{target}.json")))
    return out


class Progress:
    def __init__(self, total: int):
        self.total, self.done = total, 0
        self.lock = threading.Lock()

    def say(self, seconds: float, command: Command, tail: str = "") -> None:
        with self.lock:
            self.done += 1
            shown = shlex.join(command.argv[1:])
            print(f"[{self.done}/{self.total}] {seconds:5.1f} s  ptc {shown}"
                  + (f"\n      {tail}" if tail else ""), flush=True)


def run_command(command: Command, progress: Progress, stop: threading.Event) -> None:
    if stop.is_set():
        raise Failed("")
    start = time.perf_counter()
    # a log keeps stdout and stderr in the order they were written
    proc = subprocess.run(command.argv, cwd=ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT if command.log else subprocess.PIPE,
                          text=True, errors="replace")
    seconds = time.perf_counter() - start
    text = proc.stdout + (proc.stderr or "")
    tail = ""
    if command.log:
        (ROOT / command.log).write_text(text)
        tail = (text.strip().splitlines() or [""])[-1]
    if proc.returncode != 0:
        raise Failed(f"samples.py: `{shlex.join(command.argv)}` failed (exit "
                     f"{proc.returncode}):\n{text.rstrip()}")
    if command.plan[0]:
        write_whole(ROOT / command.plan[1], (ROOT / command.plan[0]).read_text())
    progress.say(seconds, command, tail)


def write_whole(target: Path, text: str) -> None:
    part = target.with_name(target.name + ".tmp")
    part.write_text(text)
    part.replace(target)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ptc", default=str(ROOT / ".venv" / "bin" / "ptc"))
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--out", default="out", help="the output folder (relative to the "
                                                     "repository, or absolute)")
    args = parser.parse_args(argv)
    for folder in ("plans", *CUDA_OUT.values(), *(f"hip-{t}" for t in TARGETS
                                                  if t not in CUDA_OUT)):
        (ROOT / args.out / folder).mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    check = subprocess.run([args.ptc, "check", *(f"samples/{p.name}" for p in SAMPLES)],
                           cwd=ROOT)
    if check.returncode != 0:
        return 1
    todo = commands(args.ptc, args.out)
    progress = Progress(len(todo))
    stop = threading.Event()
    failure = None
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(run_command, command, progress, stop) for command in todo]
        for future in as_completed(futures):
            try:
                future.result()
            except Failed as exc:
                if failure is None and str(exc):
                    failure = str(exc)
                stop.set()
    if failure:
        print(failure, file=sys.stderr)
        return 1
    print(f"samples.py: {progress.done} commands in {time.perf_counter() - started:.0f} s "
          f"on {args.jobs} job(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
