"""`python -m ptc.fuzz` (`make fuzz SECONDS=N SEED=S`): generate programs from seed S on,
check each one on every target against the interpreter (ptc.fuzz.check), for N seconds on
every core, and reduce each new kind of finding to a small reproducer written to
--corpus (tests/generated/ by default: the suite runs every file there on every target).

A line per finding as it comes; at the end a table of programs checked per kind and
findings per target and kind, then the refusals over a device limit
(ptc.fuzz.check.Refusal: not findings, listed for review). Exit 1 when anything was found.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from ..render import emulate
from .check import TARGETS, Finding, Refusal, check_program
from .generate import generate
from .program import Program
from .reduce import reduce

ROOT = Path(__file__).resolve().parent.parent.parent


def _worker_init(cache: str) -> None:
    # builds and searches of throwaway programs: not worth keeping, and 20,000 of them
    # would fill a disk. A folder per worker: `_clean` after one worker's program must not
    # remove a kernel another worker has built and not loaded yet
    os.environ["PTC_STAGE_CACHE"] = "0"
    mine = Path(cache) / f"worker-{os.getpid()}"
    mine.mkdir(parents=True, exist_ok=True)
    os.environ["PTC_EMULATE_CACHE"] = str(mine)


def _clean(cache: str) -> None:
    for path in Path(cache).glob("kernel-*.so"):
        try:
            path.unlink()
        except OSError:
            pass


def run_seed(seed: int, targets: tuple[str, ...]
             ) -> tuple[int, str, list[Finding], list[Refusal]]:
    program = generate(seed)
    refusals: list[Refusal] = []
    try:
        found = check_program(program, targets, seed=seed, refusals=refusals)
        return seed, program.kind, found, refusals
    finally:
        _clean(os.environ.get("PTC_EMULATE_CACHE", ""))


def bug_key(f: Finding) -> tuple[str, str, str]:
    """What makes two findings the same bug, roughly: target, kind and the message's
    words without numbers."""
    words = " ".join(w for w in f.message.split() if not any(c.isdigit() for c in w))
    return f.target, f.kind, words[:80]


def write_reproducer(corpus: Path, program: Program, finding: Finding) -> Path:
    text = program.text
    shapes = ",".join(f"{k}={v}" for k, v in program.shapes)
    header = (f"# reduced from seed {program.seed}: {finding.line()}\n"
              f"# shapes: {shapes}\n")
    digest = hashlib.sha256(text.encode()).hexdigest()[:10]
    path = corpus / f"{finding.kind}-{digest}.pt"
    path.write_text(header + text)
    return path


def main(argv=None) -> int:
    # its kernels are used once, in a folder of its own; each backend's prelude and runtime
    # object are the same for every kernel: in the shared cache
    before = os.environ.get("PTC_EMULATE_RUNTIME_CACHE")
    os.environ["PTC_EMULATE_RUNTIME_CACHE"] = before or str(emulate.cache_dir())
    cache = tempfile.mkdtemp(prefix="ptc-fuzz-")
    try:
        return fuzz(argv, cache)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
        if before is None:
            del os.environ["PTC_EMULATE_RUNTIME_CACHE"]


def fuzz(argv, cache: str) -> int:
    args = _parser().parse_args(argv)
    targets = tuple(t for t in args.targets.split(",") if t)
    corpus = Path(args.corpus) if args.corpus else None
    if corpus:
        corpus.mkdir(parents=True, exist_ok=True)
    tally = _check_seeds(args, targets, cache)
    _print_summary(tally, args.seed, targets)
    if not tally.found:
        return 0
    if corpus and not args.no_reduce:
        _write_reproducers(corpus, tally.first_of, cache)
    return 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m ptc.fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=0, help="the first seed")
    parser.add_argument("--count", type=int, default=0, help="stop after this many programs")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--corpus", default=str(ROOT / "tests" / "generated"),
                        help="where reduced reproducers go ('' : nowhere)")
    parser.add_argument("--no-reduce", action="store_true")
    return parser


@dataclass
class Tally:
    """What a fuzz run checked and found so far."""

    next_seed: int                     # the first seed not yet submitted
    checked: Counter = field(default_factory=Counter)        # programs per kind
    found: Counter = field(default_factory=Counter)          # programs per (target, kind)
    first_of: dict[tuple, tuple[int, Finding]] = field(default_factory=dict)  # per bug_key
    refused: list[tuple[int, Refusal]] = field(default_factory=list)

    def record(self, seed: int, kind: str, findings: list[Finding],
               refusals: list[Refusal]) -> list[Finding]:
        """Count one checked program; its findings of a bug not seen before."""
        self.checked[kind] += 1
        self.refused += [(seed, r) for r in refusals]
        new = []
        for f in findings:
            self.found[(f.target, f.kind)] += 1
            key = bug_key(f)
            if key not in self.first_of:
                self.first_of[key] = (seed, f)
                new.append(f)
        return new


def _check_seeds(args, targets: tuple[str, ...], cache: str) -> Tally:
    """Check programs from seed args.seed on, on every core, until the time or the count
    runs out; a line per new kind of finding as it comes."""
    deadline = time.monotonic() + args.seconds
    tally = Tally(next_seed=args.seed)
    with ProcessPoolExecutor(max_workers=args.jobs, initializer=_worker_init,
                             initargs=(cache,)) as pool:
        running = set()

        def more() -> bool:
            return time.monotonic() < deadline and (
                not args.count or tally.next_seed < args.seed + args.count)
        while True:
            while more() and len(running) < args.jobs:
                running.add(pool.submit(run_seed, tally.next_seed, targets))
                tally.next_seed += 1
            if not running:
                break
            done, running = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                seed, kind, findings, refusals = future.result()
                for f in tally.record(seed, kind, findings, refusals):
                    print(f"seed {seed} ({kind}): {f.line()}", flush=True)
    return tally


def _print_summary(tally: Tally, first_seed: int, targets: tuple[str, ...]) -> None:
    """Programs checked per kind, findings per target and kind, then the refusals."""
    checked, found, refused = tally.checked, tally.found, tally.refused
    total = sum(checked.values())
    print(f"\n{total} programs ({', '.join(f'{k} {n}' for k, n in sorted(checked.items()))}) "
          f"x {len(targets)} targets = {total * len(targets)} kernels, seeds "
          f"{first_seed}..{tally.next_seed - 1}")
    for (target, kind), n in sorted(found.items()):
        print(f"  {target:7} {kind:10} {n} program(s)")
    if not found:
        print("  no findings")
    if refused:
        print(f"{len(refused)} refusal(s) over a device limit, pinned tiles checked again at "
              "the search's (not findings; review that each asked for too much):")
        for seed, r in refused:
            print(f"  seed {seed}: {r.line()}")


def _write_reproducers(corpus: Path, first_of: dict[tuple, tuple[int, Finding]],
                       cache: str) -> None:
    """Reduce the first program of each kind of finding and write it to the corpus."""
    _worker_init(cache)
    written: set[str] = set()
    for seed, f in sorted({first_of[k][0]: first_of[k][1] for k in first_of}.items()):
        small = reduce(generate(seed), f, seed=seed)
        if small.text in written:
            continue
        written.add(small.text)
        path = write_reproducer(corpus, small, f)
        shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        print(f"reduced seed {seed} ({f.target} {f.kind}) to {shown}")
        _clean(os.environ["PTC_EMULATE_CACHE"])


if __name__ == "__main__":
    sys.exit(main())
