"""Measured rows: what `benchmarks/run.py` and `ptc tune` write and `ptc calibrate` and
`benchmarks/report.py` read -- one row per plan timed on a GPU, with everything needed to
rebuild the plan and re-estimate it (the .pt file, kernel, target, the --shape it was
built with, the problem dims and the plan JSON).

    {"format": "ptc-measured/1", "gpu": "NVIDIA H100 80GB HBM3", "arch": "sm_90",
     "date": "2026-12-01", "fabricated": false, "source": "benchmarks/run.py",
     "peaks_from": "sm90", "rows": [ROW, ...]}

ROW: workload, file, kernel, target, shapes (as built), dims (of the problem), plan (JSON),
plan_label, median_ms, min_ms, runs, l2_flushed, model_ms, flops, bytes, mma_dtype,
peak_flops, peak_bytes_per_s (of the GPU the row was timed on), baselines ({label: median
ms}), check ("ok", "FAIL ...", "skipped"), error ("" or why the row has no time).

A document marked "fabricated": true is test data, never a measurement: every rendering
of it says so.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping

from ..diagnostics import CompileError, Diagnostic

FORMAT = "ptc-measured/1"


class MeasuredError(CompileError):
    def __init__(self, message: str, hint: str | None = None):
        super().__init__(Diagnostic(message, hint=hint))


@dataclass(frozen=True)
class Row:
    workload: str
    file: str
    kernel: str
    target: str
    shapes: tuple[tuple[str, int], ...]
    dims: tuple[tuple[str, int], ...]
    plan_json: str
    plan_label: str
    median_ms: float | None          # None: not timed (error says why)
    min_ms: float | None = None
    runs: int = 0
    l2_flushed: bool = False
    model_ms: float | None = None
    flops: float = 0.0
    bytes: float = 0.0
    mma_dtype: str = "f16"
    peak_flops: float = 0.0
    peak_bytes_per_s: float = 0.0
    baselines: tuple[tuple[str, float], ...] = ()
    check: str = "skipped"
    error: str = ""

    # ---- derived figures ---------------------------------------------------------------
    @property
    def timed(self) -> bool:
        return self.median_ms is not None and self.median_ms > 0

    @property
    def tflops(self) -> float | None:
        return self.flops / (self.median_ms * 1e-3) / 1e12 if self.timed and self.flops else None

    @property
    def gbs(self) -> float | None:
        return self.bytes / (self.median_ms * 1e-3) / 1e9 if self.timed and self.bytes else None

    @property
    def bound(self) -> str:
        """compute where the FLOPs per byte reach the ridge point of the peaks, else memory"""
        if not self.flops or not self.peak_flops or not self.peak_bytes_per_s:
            return "memory"
        ridge = self.peak_flops / self.peak_bytes_per_s
        return "compute" if self.flops / max(self.bytes, 1.0) >= ridge else "memory"

    @property
    def peak_fraction(self) -> float | None:
        if not self.timed:
            return None
        if self.bound == "compute":
            return self.tflops * 1e12 / self.peak_flops
        if self.gbs is None or not self.peak_bytes_per_s:
            return None
        return self.gbs * 1e9 / self.peak_bytes_per_s

    @property
    def model_ratio(self) -> float | None:
        """The model's estimate over the measured time (1: exact; below 1: optimistic)."""
        if not self.timed or not self.model_ms:
            return None
        return self.model_ms / self.median_ms

    def speedup(self, baseline: str) -> float | None:
        """baseline time / ptc time (above 1: ptc is faster)."""
        ms = dict(self.baselines).get(baseline)
        return ms / self.median_ms if ms and self.timed else None

    def to_json(self) -> dict:
        return {"workload": self.workload, "file": self.file, "kernel": self.kernel,
                "target": self.target, "shapes": dict(self.shapes), "dims": dict(self.dims),
                "plan": json.loads(self.plan_json) if self.plan_json else None,
                "plan_label": self.plan_label, "median_ms": self.median_ms,
                "min_ms": self.min_ms, "runs": self.runs, "l2_flushed": self.l2_flushed,
                "model_ms": self.model_ms, "flops": self.flops, "bytes": self.bytes,
                "mma_dtype": self.mma_dtype, "peak_flops": self.peak_flops,
                "peak_bytes_per_s": self.peak_bytes_per_s,
                "baselines": dict(self.baselines), "check": self.check, "error": self.error}


@dataclass(frozen=True)
class Document:
    gpu: str
    arch: str
    date: str
    rows: tuple[Row, ...]
    source: str = ""
    peaks_from: str = ""
    fabricated: bool = False
    notes: tuple[str, ...] = field(default=())
    path: str = ""

    def to_json(self) -> dict:
        return {"format": FORMAT, "gpu": self.gpu, "arch": self.arch, "date": self.date,
                "source": self.source, "peaks_from": self.peaks_from,
                "fabricated": self.fabricated, "notes": list(self.notes),
                "rows": [r.to_json() for r in self.rows]}


def dumps(doc: Document) -> str:
    return json.dumps(doc.to_json(), indent=2, sort_keys=True) + "\n"


def load(path: str | Path) -> Document:
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MeasuredError(f"{name}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise MeasuredError(f"cannot read {name}: {getattr(exc, 'strerror', None) or exc}") \
            from None
    return loads(text, name)


def loads(text: str, name: str = "measured.json") -> Document:
    hint = "write it with benchmarks/run.py or ptc tune --record"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MeasuredError(f"{name}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}",
                            hint) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise MeasuredError(f"{name} is not a table of measurements (its \"format\" is not "
                            f"\"{FORMAT}\")", hint)
    rows = []
    for n, item in enumerate(data.get("rows") or []):
        try:
            rows.append(_row(item))
        except (KeyError, TypeError, ValueError) as exc:
            what = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
            raise MeasuredError(f"{name}: rows[{n}] is malformed: {what}", hint) from None
    return Document(str(data.get("gpu", "")), str(data.get("arch", "")),
                    str(data.get("date", "")), tuple(rows), str(data.get("source", "")),
                    str(data.get("peaks_from", "")), bool(data.get("fabricated", False)),
                    tuple(str(x) for x in data.get("notes", [])), name)


def _opt(value) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"expected a number, got {json.dumps(value)}")
    return float(value)


def _pairs(data: Mapping, what: str) -> tuple[tuple[str, int], ...]:
    if not isinstance(data, dict):
        raise ValueError(f"{what} must be an object")
    return tuple(sorted((str(k), int(v)) for k, v in data.items()))


def _row(item: Mapping) -> Row:
    plan = item.get("plan")
    return Row(
        str(item["workload"]), str(item["file"]), str(item["kernel"]), str(item["target"]),
        _pairs(item.get("shapes") or {}, "shapes"), _pairs(item["dims"], "dims"),
        json.dumps(plan, indent=2) + "\n" if plan else "", str(item.get("plan_label", "")),
        _opt(item.get("median_ms")), _opt(item.get("min_ms")), int(item.get("runs", 0)),
        bool(item.get("l2_flushed", False)), _opt(item.get("model_ms")),
        float(item.get("flops", 0.0)), float(item.get("bytes", 0.0)),
        str(item.get("mma_dtype", "f16")), float(item.get("peak_flops", 0.0)),
        float(item.get("peak_bytes_per_s", 0.0)),
        tuple(sorted((str(k), float(v)) for k, v in (item.get("baselines") or {}).items()
                     if v is not None)),
        str(item.get("check", "skipped")), str(item.get("error", "")))


def peaks_target(gpu, chain) -> str:
    """The builtin target whose YAML describes `gpu` (a GpuInfo of `chain`'s backend; its
    peaks are what % of peak is of): the one whose arch is of the GPU's family (sm90 for
    Hopper, sm80 for an A100 or an L4, gfx942 for an MI300X); "" where none is."""
    from ..devices import builtin_targets, get_device

    for name in builtin_targets():
        device = get_device(name)
        if device.backend == chain.backend and \
                chain.family(device.arch) == chain.family(gpu.arch):
            return name
    return ""


def merged(docs) -> Document:
    """One document of the rows of several (the first one's GPU and date)."""
    docs = list(docs)
    first = docs[0]
    return replace(first, rows=tuple(r for d in docs for r in d.rows),
                   fabricated=any(d.fabricated for d in docs))
