"""The results of one benchmarks/gpu.sh run, as tables: reads the run's folder and writes
results.md (every table), results.csv (the performance table, one row per plan timed) and
summary.txt (what gpu.sh prints at the end).

    python benchmarks/report.py benchmarks/results/2026-12-01-NVIDIA-H100-80GB-HBM3
    python benchmarks/report.py DIR --dry-run      # say what it would read and write

It reads what is there of: steps.tsv, env.json, bench.json and tune-*.json (tables of
measurements, ptc.runtime.measured), sanitizer.json, pytest.xml (JUnit), calibration.json.
The performance table has, per plan: time, TFLOP/s, GB/s, % of the device's peak, the
ratio of each baseline's time to ptc's (above 1: ptc is faster), the model's estimate and
estimate/measured. Results marked "fabricated" (test data) say so at the top of each file.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import math
import statistics
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ptc.runtime import measured as M  # noqa: E402

FABRICATED = "**FABRICATED TEST DATA: NOT A MEASUREMENT.**"
BASELINE_ORDER = ("torch", "torch-flash", "torch-cudnn", "triton")


@dataclass(frozen=True)
class Results:
    folder: str
    bench: M.Document | None
    tunes: tuple[M.Document, ...]
    steps: tuple[dict, ...] = ()
    env: dict = field(default_factory=dict)
    sanitizer: tuple[dict, ...] = ()
    pytest: dict | None = None
    calibration: dict | None = None

    @property
    def fabricated(self) -> bool:
        return any(d.fabricated for d in self.docs)

    @property
    def docs(self) -> tuple[M.Document, ...]:
        return ((self.bench,) if self.bench else ()) + self.tunes

    @property
    def gpu(self) -> str:
        return next((d.gpu for d in self.docs if d.gpu), "") or \
            ((self.env.get("gpu") or {}).get("name") or "unknown GPU")

    @property
    def date(self) -> str:
        return next((d.date for d in self.docs if d.date), "")

    def baselines(self) -> list[str]:
        seen = {name for d in self.docs for r in d.rows for name, _ in r.baselines}
        return [b for b in BASELINE_ORDER if b in seen] + sorted(seen - set(BASELINE_ORDER))


# ---- reading -----------------------------------------------------------------------------------
def load(folder: str | Path) -> Results:
    folder = Path(folder)
    bench = M.load(folder / "bench.json") if (folder / "bench.json").is_file() else None
    tunes = tuple(M.load(p) for p in sorted(folder.glob("tune-*.json")))
    return Results(str(folder), bench, tunes, read_steps(folder / "steps.tsv"),
                   _json(folder / "env.json") or {},
                   tuple((_json(folder / "sanitizer.json") or {}).get("results", [])),
                   read_junit(folder / "pytest.xml"), _json(folder / "calibration.json"))


def _json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def read_steps(path: Path) -> tuple[dict, ...]:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return ()
    head = lines[0].split("\t") if lines else []
    return tuple(dict(zip(head, line.split("\t", len(head) - 1))) for line in lines[1:] if line)


def read_junit(path: Path) -> dict | None:
    """{tests, failures, errors, skipped, failed: [names]} of a JUnit XML file."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    out = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0, "failed": []}
    for s in suites:
        for k in ("tests", "failures", "errors", "skipped"):
            out[k] += int(s.get(k, 0))
        for case in s.iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                out["failed"].append(f"{case.get('classname', '')}::{case.get('name', '')}")
    out["passed"] = out["tests"] - out["failures"] - out["errors"] - out["skipped"]
    return out


# ---- formatting --------------------------------------------------------------------------------
def ms_text(ms: float | None) -> str:
    if ms is None:
        return "-"
    return f"{ms * 1e3:.1f} us" if ms < 1 else f"{ms:.3f} ms"


def num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def ratio_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def table(head: list[str], rows: list[list[str]]) -> str:
    def cell(text) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def worst_of(ratios) -> float:
    return max(ratios, key=lambda r: abs(math.log(r)))


# ---- the tables ------------------------------------------------------------------------------
def perf_rows(r: Results) -> list[list[str]]:
    rows = []
    names = r.baselines()
    for row in (r.bench.rows if r.bench else ()):
        peak = row.peak_fraction
        cells = [row.workload, row.target, row.plan_label or "-", ms_text(row.median_ms),
                 num(row.tflops, ".1f") if row.bound == "compute" else "-",
                 num(row.gbs, ".0f"),
                 "-" if peak is None else f"{100 * peak:.1f} % ({'mma ' + row.mma_dtype if row.bound == 'compute' else 'DRAM'})"]
        cells += [ratio_text(row.speedup(n)) for n in names]
        cells += [ms_text(row.model_ms), num(row.model_ratio, ".2f"),
                  row.error or row.check]
        rows.append(cells)
    return rows


def perf_head(r: Results) -> list[str]:
    return (["workload", "target", "plan", "time", "TFLOP/s", "GB/s", "% of peak"]
            + [f"vs {n}" for n in r.baselines()]
            + ["model", "model/measured", "check"])


def model_rows(r: Results) -> list[list[str]]:
    """Per source and target: how far the model is from the measurements."""
    out = []
    for doc in r.docs:
        for target in sorted({row.target for row in doc.rows}):
            ratios = [row.model_ratio for row in doc.rows
                      if row.target == target and row.model_ratio]
            if not ratios:
                continue
            out.append([doc.source or Path(doc.path).name, target, str(len(ratios)),
                        f"{statistics.median(ratios):.2f}", f"{worst_of(ratios):.2f}",
                        f"{min(ratios):.2f} .. {max(ratios):.2f}"])
    return out


def tune_rows(r: Results) -> list[list[str]]:
    return [[row.workload, row.plan_label, ms_text(row.median_ms), ms_text(row.model_ms),
             num(row.model_ratio, ".2f")] for d in r.tunes for row in d.rows]


def sanitizer_rows(r: Results) -> tuple[list[str], list[list[str]]]:
    tools = []
    by: dict[str, dict] = {}
    for x in r.sanitizer:
        if x["tool"] not in tools:
            tools.append(x["tool"])
        by.setdefault(x["harness"], {})[x["tool"]] = x
    rows = []
    for harness, runs in by.items():
        cells = [harness]
        for tool in tools:
            x = runs.get(tool)
            if x is None:
                cells.append("-")
            elif x["status"] == "errors":
                cells.append(f"{x['errors']} error(s)")
            elif x["status"] in ("not built", "skipped"):
                cells.append(f"{x['status']}: {x.get('detail', '')}")
            else:
                cells.append(x["status"])
        cells.append(next((x.get("reference") for x in runs.values() if x.get("reference")),
                          "-"))
        rows.append(cells)
    return ["harness"] + tools + ["outputs vs reference"], rows


def calibration_lines(cal: dict) -> list[str]:
    out = []
    for label in ("before", "after"):
        e = cal.get(label) or {}
        if e:
            out.append(f"- model/measured {label}: median {e['median']:.3f}, worst "
                       f"{e['worst']:.3f}, typically off by x{e['typical_factor']:.3f}")
    changed = [f for f in cal.get("figures", []) if f.get("changed")]
    if changed:
        out.append("")
        out.append(table(["figure", "estimate", "fitted"],
                         [[f["figure"], f"{f['estimate']:g}", f"{f['fitted']:g}"]
                          for f in changed]))
    return out


# ---- the documents ----------------------------------------------------------------------------
def markdown(r: Results) -> str:
    lines = [f"# ptc on {r.gpu}, {r.date or 'undated'}", ""]
    if r.fabricated:
        lines += [FABRICATED, ""]
    env = r.env
    if env:
        pk = env.get("packages", {})
        gpu = env.get("gpu") or {}
        lines += [f"Driver {gpu.get('driver_version', '?')}, {env.get('nvcc') or 'nvcc ?'}; "
                  f"Python {env.get('python', '?')}, torch {pk.get('torch')}, "
                  f"triton {pk.get('triton')}.", ""]
    peaks = r.bench.peaks_from if r.bench else ""
    runs = next((row.runs for row in (r.bench.rows if r.bench else ()) if row.runs), 0)
    lines += ["Times are medians of "
              + (f"{runs} runs" if runs else "the runs")
              + ", CUDA events around each launch, the L2 cache flushed before each; "
              f"% of peak is of the {peaks or 'target'} YAML's peaks. "
              "`vs X` is X's time over ptc's (above 1: ptc is faster); model/measured is the "
              "cost model's estimate over the measured time.", ""]
    for note in (r.bench.notes if r.bench else ()):
        lines += [f"Note: {note}", ""]
    if r.steps:
        lines += ["## Steps", "", table(["step", "status", "seconds", "limit"],
                                        [[s.get("step", ""), s.get("status", ""),
                                          s.get("seconds", ""), s.get("limit", "")]
                                         for s in r.steps]), ""]
    if r.bench:
        lines += ["## Performance", "", table(perf_head(r), perf_rows(r)), ""]
    if model_rows(r):
        lines += ["## The cost model against the measurements", "",
                  table(["from", "target", "plans", "median model/measured", "worst",
                         "range"], model_rows(r)), ""]
    if r.tunes:
        lines += ["## ptc tune: every plan measured", "",
                  table(["trial", "plan", "measured", "model", "model/measured"],
                        tune_rows(r)), ""]
    if r.calibration:
        lines += ["## Calibration (ptc calibrate)", ""] + calibration_lines(r.calibration) + [""]
    if r.sanitizer:
        head, rows = sanitizer_rows(r)
        clean = sum(x["status"] == "ok" for x in r.sanitizer)
        lines += ["## compute-sanitizer", "",
                  f"{clean} of {len(r.sanitizer)} runs clean.", "", table(head, rows), ""]
    if r.pytest:
        p = r.pytest
        lines += ["## pytest -m gpu", "",
                  f"{p['passed']} passed, {p['failures'] + p['errors']} failed, "
                  f"{p['skipped']} skipped."]
        lines += [f"- FAILED {name}" for name in p["failed"]]
        lines += [""]
    return "\n".join(lines).rstrip() + "\n"


def csv_text(r: Results) -> str:
    names = r.baselines()
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["source", "workload", "target", "plan", "dims", "median_ms", "min_ms", "runs",
                "l2_flushed", "tflops", "gbs", "bound", "peak_fraction", "model_ms",
                "model_over_measured", "check", "error", "fabricated"]
               + [f"{n}_ms" for n in names] + [f"vs_{n}" for n in names])
    for doc in r.docs:
        for row in doc.rows:
            base = dict(row.baselines)
            w.writerow([doc.source, row.workload, row.target, row.plan_label,
                        ",".join(f"{k}={v}" for k, v in row.dims), _c(row.median_ms),
                        _c(row.min_ms), row.runs, row.l2_flushed, _c(row.tflops), _c(row.gbs),
                        row.bound, _c(row.peak_fraction), _c(row.model_ms),
                        _c(row.model_ratio), row.check, row.error, doc.fabricated]
                       + [_c(base.get(n)) for n in names] + [_c(row.speedup(n)) for n in names])
    return out.getvalue()


def _c(value) -> str:
    return "" if value is None else f"{value:.6g}"


def summary(r: Results) -> str:
    lines = [f"ptc on {r.gpu}, {r.date}" + ("  [FABRICATED TEST DATA]" if r.fabricated else "")]
    if r.steps:
        lines.append("steps: " + ", ".join(f"{s.get('step')} {s.get('status')}"
                                           for s in r.steps))
    for row in (r.bench.rows if r.bench else ()):
        vs = " ".join(f"{n} {ratio_text(row.speedup(n))}" for n in r.baselines()
                      if row.speedup(n))
        peak = f"{100 * row.peak_fraction:.0f}%" if row.peak_fraction else "-"
        lines.append(f"  {row.workload:28s} {row.target}  {ms_text(row.median_ms):>11s}  "
                     f"{peak:>4s} of peak  model/meas {num(row.model_ratio, '.2f'):>5s}  {vs}"
                     + (f"  {row.error}" if row.error else "")
                     + ("" if row.check.startswith(("ok", "skipped")) else f"  {row.check}"))
    ratios = [row.model_ratio for d in r.docs for row in d.rows if row.model_ratio]
    if ratios:
        lines.append(f"model/measured over {len(ratios)} plans: median "
                     f"{statistics.median(ratios):.2f}, worst {worst_of(ratios):.2f}")
    if r.calibration and r.calibration.get("after"):
        b, a = r.calibration["before"], r.calibration["after"]
        lines.append(f"calibrated: median {b['median']:.2f} -> {a['median']:.2f}, worst "
                     f"{b['worst']:.2f} -> {a['worst']:.2f}")
    if r.sanitizer:
        clean = sum(x["status"] == "ok" for x in r.sanitizer)
        lines.append(f"compute-sanitizer: {clean} of {len(r.sanitizer)} runs clean")
    if r.pytest:
        p = r.pytest
        lines.append(f"pytest -m gpu: {p['passed']} passed, {p['failures'] + p['errors']} "
                     f"failed, {p['skipped']} skipped")
    return "\n".join(lines) + "\n"


INPUTS = ("steps.tsv", "env.json", "bench.json", "tune-*.json", "sanitizer.json",
          "pytest.xml", "calibration.json")
OUTPUTS = ("results.md", "results.csv", "summary.txt")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", help="the results folder of a gpu.sh run")
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)
    folder = Path(args.folder)
    if args.dry_run:
        found = [name for name in INPUTS if list(folder.glob(name))]
        print(f"benchmarks/report.py --dry-run: would read {', '.join(INPUTS)} from {folder}"
              f" ({len(found)} there now)")
        print(f"  would write: {', '.join(str(folder / o) for o in OUTPUTS)}")
        return 0
    if not folder.is_dir():
        print(f"report: {folder}: no such folder", file=sys.stderr)
        return 1
    try:
        results = load(folder)
    except M.MeasuredError as exc:
        print(f"report: {exc}", file=sys.stderr)
        return 1
    (folder / "results.md").write_text(markdown(results))
    (folder / "results.csv").write_text(csv_text(results))
    (folder / "summary.txt").write_text(summary(results))
    print(f"wrote {', '.join(str(folder / o) for o in OUTPUTS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
