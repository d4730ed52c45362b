"""Using the tuning database when compiling: which entry applies, and what to say about it.

`choose` finds the database (`ptc-tuning.json` beside the kernel, or the one given), looks
up the kernel's key and returns a TuningChoice: the plan to pin where an entry matches,
the stale entries with their reasons, and the notes to show. It reads files only: no GPU.
An explicit --schedule or --tile wins over the database (it is then not consulted).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from .db import Entry, Lookup, default_path, load, lookup
from .key import TuningKey, make_key


@dataclass(frozen=True)
class TuningChoice:
    path: str                      # the database consulted (or that would have been)
    entry: Entry | None = None     # the matching entry: its plan is pinned
    found: Lookup | None = None    # what the lookup found (None: not consulted)
    key: TuningKey | None = None
    skipped: str = ""              # why the database was not consulted

    @property
    def plan(self):
        """The entry's plan as a PlanText to pin, or None."""
        from ..driver import PlanText

        if self.entry is None:
            return None
        return PlanText(f"{self.path} (entry {self.entry.key.id})", self.entry.plan_json)

    def used_note(self) -> str:
        if self.entry is None:
            return ""
        m = self.entry.measured
        return (f"plan from tuning database {self.path} ({self.entry.describe()}: "
                f"{m.median_ms:.4g} ms; the model ranked it {ordinal(m.model_rank)})")

    def stale_notes(self) -> list[str]:
        if self.found is None:
            return []
        return [f"ignoring the stale entry {e.key.id} of {self.path} ({e.describe()}): {why}"
                for e, why in self.found.stale]

    def verbose_notes(self) -> list[str]:
        """What --verbose adds: why nothing was used, and the entries for other dims."""
        if self.skipped:
            return [f"tuning database not consulted: {self.skipped}"]
        if self.found is None:
            return []
        out = []
        if self.entry is None and not self.found.stale:
            dims = self.key.dims_text() if self.key else ""
            out.append(f"no entry in {self.path} for {self.key.kernel} on {self.key.device} "
                       f"at {dims}" if self.key else f"no entry in {self.path}")
        for e in self.found.other_dims:
            out.append(f"{self.path} has an entry for {e.key.dims_text()} (not this problem)")
        if self.found.unchecked:
            out.append(self.found.unchecked)
        return out

    def to_json(self) -> dict:
        return {"database": self.path, "used": self.entry is not None,
                "entry": self.entry.key.id if self.entry else None,
                "measured": self.entry.measured.to_json() if self.entry else None,
                "stale": [{"entry": e.key.id, "reason": why}
                          for e, why in (self.found.stale if self.found else ())],
                "skipped": self.skipped or None}


def ordinal(n: int) -> str:
    if 10 <= n % 100 <= 20:
        return f"{n}th"
    return f"{n}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def choose(file: str | Path, kernel, device, shapes: Mapping[str, int] | None, *,
           database: str | Path | None = None, tiles: Mapping[str, int] | None = None,
           schedule=None, nvcc: str | None = None) -> TuningChoice:
    """The tuning choice for the typed `kernel` of `file` on `device` at `shapes`.
    `database`: the file (default: ptc-tuning.json beside `file`); `nvcc`: the toolchain
    release to compare (default: ask nvcc, "" to not compare)."""
    path = Path(database) if database else default_path(file)
    if schedule is not None:
        return TuningChoice(str(path), skipped="--schedule pins a plan")
    if tiles:
        return TuningChoice(str(path), skipped="--tile fixes tile sizes")
    if not path.is_file():
        return TuningChoice(str(path), skipped=f"there is no {path}")
    db = load(path)
    if not any(e.key.kernel == kernel.name for e in db.entries):
        return TuningChoice(str(path), found=Lookup(None))
    from ..diagnostics import CompileError
    from ..driver import parse_file, problem_dims

    try:
        dims = problem_dims(kernel, shapes)
    except CompileError:          # the search will say which size is missing
        return TuningChoice(str(path), skipped="the problem size is not known")
    module = parse_file(file)
    kernel_ast = next(k for k in module.kernels if k.name == kernel.name)
    key = make_key(kernel_ast, kernel.name, dims, device, nvcc)
    found = lookup(db, key)
    return TuningChoice(str(path), found.entry, found, key)
