"""How long the schedule search takes: every sample (and the W4A16 kernel of
tests/kernels) x every target at its default dims, searched afresh as `ptc compile` would
without the stage cache. Prints a table (seconds per search, the slowest first) and the
worst figure; no GPU needed.

    .venv/bin/python benchmarks/search_time.py [--targets sm80,sm90] [--repeat 1]

Issue 19's bar: every sample x target <= 2 s, the W4A16 kernel <= 5 s, on an idle machine.
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["PTC_STAGE_CACHE"] = "0"           # the search itself, not a cached answer

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from ptc.devices import get_device  # noqa: E402
from ptc.driver import build_options, check_file, grids, problem_dims  # noqa: E402
from ptc.sched.search import search  # noqa: E402
from ptc.sched.verify_order import forget_checked  # noqa: E402

TARGETS = ("sm80", "sm90", "gfx90a", "gfx942")
KERNELS = sorted((ROOT / "samples").glob("*.pt")) + [ROOT / "tests" / "kernels" / "w4a16.pt"]


def search_seconds(path: Path, target: str) -> float:
    kernel = check_file(path).kernels[0]
    device = get_device(target)
    forget_checked()          # as a new process: no structure checked by an earlier search
    gc.collect()              # ... and no garbage of the earlier searches to collect
    start = time.perf_counter()
    for part in grids(kernel):
        search(part, device, problem_dims(part, None), **build_options(device))
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--repeat", type=int, default=1, help="best of this many")
    args = parser.parse_args()
    targets = [t for t in args.targets.split(",") if t]
    rows = []
    for path in KERNELS:
        for target in targets:
            best = min(search_seconds(path, target) for _ in range(max(1, args.repeat)))
            rows.append((path.stem, target, best))
    table = Table(title="schedule search, default dims, stage cache off")
    for column in ("kernel", "target", "seconds"):
        table.add_column(column, justify="right" if column == "seconds" else "left")
    for name, target, secs in sorted(rows, key=lambda r: -r[2]):
        table.add_row(name, target, f"{secs:.2f}")
    Console().print(table)
    samples = [r for r in rows if r[0] != "w4a16"]
    w4 = [r for r in rows if r[0] == "w4a16"]
    print(f"slowest sample search: {max(r[2] for r in samples):.2f} s "
          f"({len(samples)} searches, total {sum(r[2] for r in samples):.1f} s)")
    if w4:
        print(f"slowest W4A16 search: {max(r[2] for r in w4):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
