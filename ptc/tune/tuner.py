"""`ptc tune`'s core: measure the trials, pick the fastest that passed its check, and make
the database entry for it. The GPU (the measurer), the date and the GPU's name come in as
arguments, so everything here runs (and is tested) without one.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .db import Candidate, Entry, Measurement, entry_from
from .key import TuningKey
from .measure import Measured


@dataclass(frozen=True)
class Outcome:
    trial: object                 # ptc.tune.select.Trial
    measured: Measured

    @property
    def ok(self) -> bool:
        return self.measured.check == "ok" and self.measured.median_ms is not None

    def candidate(self) -> Candidate:
        t = self.trial
        return Candidate(t.label, t.rank, t.model_seconds * 1e3, self.measured.median_ms,
                         self.measured.check)


@dataclass(frozen=True)
class TuneResult:
    key: TuningKey
    outcomes: tuple[Outcome, ...]
    winner: Outcome | None
    entry: Entry | None           # None when no trial passed its check

    @property
    def rows(self) -> tuple:
        """Every timed trial as a measured row (for ptc calibrate)."""
        return tuple(o.measured.row for o in self.outcomes if o.measured.row is not None)


def run_trials(trials, measure: Callable[[object], Measured], key: TuningKey, *, gpu: str,
               date: str, flushed: bool = True,
               progress: Callable[[Outcome], None] = lambda outcome: None) -> TuneResult:
    """Measure every trial in order; the winner is the fastest whose check passed (ties:
    the model's better-ranked one)."""
    outcomes = []
    for trial in trials:
        outcome = Outcome(trial, measure(trial))
        outcomes.append(outcome)
        progress(outcome)
    good = [o for o in outcomes if o.ok]
    if not good:
        return TuneResult(key, tuple(outcomes), None, None)
    winner = min(good, key=lambda o: (o.measured.median_ms, o.trial.rank))
    m = winner.measured
    measurement = Measurement(date, gpu, m.median_ms, m.runs, flushed,
                              winner.trial.model_seconds * 1e3, winner.trial.rank)
    candidates = tuple(sorted((o.candidate() for o in outcomes),
                              key=lambda c: (c.model_rank, c.label)))
    entry = entry_from(key, winner.trial.plan_json, measurement, candidates)
    return TuneResult(key, tuple(outcomes), winner, entry)
