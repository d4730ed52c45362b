"""The tuning database: a plain JSON file of measured winners, one entry per kernel, problem
size and target, that users can read, diff and commit.

    {
      "format": "ptc-tuning/1",
      "entries": [
        {"id": "3f2a...", "key": {...TuningKey...}, "plan": {...plan JSON...},
         "measured": {"date", "gpu", "median_ms", "runs", "l2_flushed", "model_ms",
                      "model_rank"},
         "candidates": [{"label", "model_rank", "model_ms", "measured_ms", "check"}]}
      ]
    }

The file is written with sorted keys and entries (by kernel, target, dims), two-space
indents and a final newline, so a re-tune changes only the lines that changed. The default
file is `ptc-tuning.json` beside the kernel's .pt file. Reading it needs no GPU.

An entry *matches* a compilation when its whole key does (ptc.tune.key). Entries of the same
kernel, target and dims whose key differs otherwise are *stale*, each with the reason
(`lookup`); they are ignored, and a new `ptc tune` replaces them.
"""
from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from ..diagnostics import CompileError, Diagnostic
from .key import TuningKey

FORMAT = "ptc-tuning/1"
DEFAULT_NAME = "ptc-tuning.json"


class TuningError(CompileError):
    """A tuning database that cannot be read or written."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(Diagnostic(message, hint=hint))


@dataclass(frozen=True)
class Candidate:
    """One plan `ptc tune` measured."""

    label: str
    model_rank: int              # 1: the model's own first choice
    model_ms: float
    measured_ms: float | None    # None: not timed (its check failed or it did not build)
    check: str                   # "ok", or why it was refused

    def to_json(self) -> dict:
        return {"label": self.label, "model_rank": self.model_rank, "model_ms": self.model_ms,
                "measured_ms": self.measured_ms, "check": self.check}


@dataclass(frozen=True)
class Measurement:
    """The winner's measurement."""

    date: str                    # ISO date, e.g. 2026-12-01
    gpu: str                     # the GPU's name, e.g. NVIDIA H100 80GB HBM3
    median_ms: float
    runs: int
    l2_flushed: bool
    model_ms: float
    model_rank: int

    def to_json(self) -> dict:
        return {"date": self.date, "gpu": self.gpu, "median_ms": self.median_ms,
                "runs": self.runs, "l2_flushed": self.l2_flushed, "model_ms": self.model_ms,
                "model_rank": self.model_rank}


@dataclass(frozen=True)
class Entry:
    key: TuningKey
    plan_json: str               # plans_to_json text: what `--schedule` would pin
    measured: Measurement
    candidates: tuple[Candidate, ...] = ()

    @property
    def slot(self) -> tuple:
        """What one entry is kept per: a newer tune of the same slot replaces the older."""
        return (self.key.kernel, self.key.device, self.key.dims)

    def to_json(self) -> dict:
        return {"id": self.key.id, "key": self.key.to_json(),
                "plan": json.loads(self.plan_json), "measured": self.measured.to_json(),
                "candidates": [c.to_json() for c in self.candidates]}

    def describe(self) -> str:
        m = self.measured
        return f"measured {m.date} on {m.gpu}"


@dataclass(frozen=True)
class TuningDatabase:
    path: str
    entries: tuple[Entry, ...] = ()


@dataclass(frozen=True)
class Lookup:
    """What a database holds for one key."""

    entry: Entry | None                          # the match, if any
    stale: tuple[tuple[Entry, str], ...] = ()    # same kernel, target and dims; and why not
    other_dims: tuple[Entry, ...] = ()           # same kernel and target, other dims
    unchecked: str = ""                          # what could not be compared, and why


# ---- reading ---------------------------------------------------------------------------
def default_path(kernel_file: str | Path) -> Path:
    return Path(kernel_file).parent / DEFAULT_NAME


def load(path: str | Path) -> TuningDatabase:
    """The database at `path`; an empty one where there is no such file."""
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return TuningDatabase(name)
    except (OSError, UnicodeDecodeError) as exc:
        raise TuningError(f"cannot read the tuning database {name}: "
                          f"{getattr(exc, 'strerror', None) or exc}") from None
    return loads(text, name)


def loads(text: str, name: str = DEFAULT_NAME) -> TuningDatabase:
    hint = "fix or delete it (`ptc tune` writes it), or pass --no-tuning"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TuningError(f"{name}:{exc.lineno}:{exc.colno}: the tuning database is not valid "
                          f"JSON: {exc.msg}", hint) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        found = data.get("format") if isinstance(data, dict) else None
        raise TuningError(f"{name} is not a ptc tuning database (\"format\" is "
                          f"{json.dumps(found)}, expected \"{FORMAT}\")", hint)
    raw = data.get("entries")
    if not isinstance(raw, list):
        raise TuningError(f"{name}: \"entries\" must be a list", hint)
    entries = []
    for n, item in enumerate(raw):
        try:
            entries.append(_entry(item))
        except (KeyError, TypeError, ValueError) as exc:
            what = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
            raise TuningError(f"{name}: entries[{n}] is malformed: {what}", hint) from None
    return TuningDatabase(name, tuple(entries))


def _entry(item) -> Entry:
    if not isinstance(item, dict):
        raise ValueError("expected an object")
    key = TuningKey.from_json(item["key"])
    if not isinstance(item["plan"], dict):
        raise ValueError("plan must be an object")
    m = item["measured"]
    measured = Measurement(str(m["date"]), str(m["gpu"]), _number(m["median_ms"]),
                           int(m["runs"]), bool(m["l2_flushed"]), _number(m["model_ms"]),
                           int(m["model_rank"]))
    candidates = tuple(Candidate(str(c["label"]), int(c["model_rank"]),
                                 _number(c["model_ms"]),
                                 None if c["measured_ms"] is None else _number(c["measured_ms"]),
                                 str(c["check"]))
                       for c in item.get("candidates", []))
    return Entry(key, json.dumps(item["plan"], indent=2) + "\n", measured, candidates)


def _number(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"expected a number, got {json.dumps(value)}")
    return float(value)


# ---- writing ---------------------------------------------------------------------------
def dumps(db: TuningDatabase) -> str:
    entries = sorted(db.entries, key=lambda e: (e.key.kernel, e.key.device, e.key.dims,
                                                e.key.id))
    return json.dumps({"format": FORMAT, "entries": [e.to_json() for e in entries]},
                      indent=2, sort_keys=True) + "\n"


def with_entry(db: TuningDatabase, entry: Entry) -> TuningDatabase:
    """`db` with `entry`, replacing any entry of the same slot (kernel, target, dims)."""
    kept = tuple(e for e in db.entries if e.slot != entry.slot)
    return replace(db, entries=kept + (entry,))


def save(db: TuningDatabase, path: str | Path | None = None) -> Path:
    """Write `db` (to `path`, default its own) atomically: never a half-written file."""
    target = Path(path or db.path)
    text = dumps(db)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp",
                                   dir=str(target.parent) if str(target.parent) else ".")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, target)
    except OSError as exc:
        raise TuningError(f"cannot write the tuning database {target}: "
                          f"{exc.strerror or exc}") from None
    return target


# ---- lookup ------------------------------------------------------------------------------
def lookup(db: TuningDatabase, key: TuningKey) -> Lookup:
    """The entry whose key is `key`, the stale entries of its slot (each with why), and
    the entries of the same kernel and target at other dims. A key without an nvcc release
    (the reader has no nvcc) does not compare the toolchain: `unchecked` says so."""
    match, stale, other = None, [], []
    for e in db.entries:
        if e.key.kernel != key.kernel or e.key.device != key.device:
            continue
        if e.key.dims != key.dims:
            other.append(e)
            continue
        why = stale_reason(e.key, key)
        if why:
            stale.append((e, why))
        elif match is None:
            match = e
    unchecked = "" if key.nvcc else "no nvcc here, so the toolchain it was tuned with " \
                                    "is not compared"
    return Lookup(match, tuple(stale), tuple(other), unchecked if match else "")


def stale_reason(stored: TuningKey, wanted: TuningKey) -> str:
    """Why an entry of the same slot does not apply ("" if it does)."""
    reasons = []
    if stored.source_sha256 != wanted.source_sha256:
        reasons.append(f"kernel {wanted.kernel}'s source changed since it was tuned")
    if stored.device_sha256 != wanted.device_sha256:
        reasons.append(f"the {wanted.device} device description changed since it was tuned")
    if stored.ptc != wanted.ptc:
        reasons.append(f"it was tuned with ptc {stored.ptc}, this is ptc {wanted.ptc}")
    if wanted.nvcc and stored.nvcc != wanted.nvcc:
        reasons.append(f"it was tuned with nvcc {stored.nvcc or '(unknown)'}, this is nvcc "
                       f"{wanted.nvcc}")
    return "; ".join(reasons)


def entry_from(key: TuningKey, plan_json: str, measured: Measurement,
               candidates: tuple[Candidate, ...] = ()) -> Entry:
    """An entry, its plan normalized to the form the file holds."""
    return Entry(key, json.dumps(json.loads(plan_json), indent=2) + "\n", measured,
                 tuple(candidates))
