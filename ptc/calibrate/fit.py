"""The fit: multipliers on the estimated figures that make the cost model's times agree
with measured ones.

The error of a device on a set of observations is the mean of |log(model / measured)| --
the typical factor by which the model is off, each plan counting once, robust to a few
outliers (an L1 fit). It is minimized by coordinate search over each figure's
log-multiplier, within [1/8, 8] of its estimate: try each figure up and down by a step,
keep the better move where it lowers the error, and halve the step when no figure's does,
from a factor of 2 down to 1 %. A small prior (PRIOR per unit of |log multiplier|) keeps
a figure at its estimate unless the measurements ask for a change. Integer figures (cycles) are rounded inside the error, so the error
reported is that of the figures written. No derivatives, no scipy; a few hundred
evaluations of the model.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Callable, Sequence

from .figures import Figure, with_values

BOUND = math.log(8.0)
FIRST_STEP = math.log(2.0)
LAST_STEP = math.log(1.01)
PRIOR = 0.002    # per unit of |log multiplier|: a figure moves only where the data ask for it


@dataclass(frozen=True)
class Observation:
    """One timed plan: what the model needs to estimate it again, and the measured time."""

    label: str
    measured_seconds: float
    model: Callable[[object], float]      # device -> the model's seconds
    inputs: tuple = ()                    # what `model` reads besides the device (plans,
                                          # graphs, dims): part of the fit's cache key


@dataclass(frozen=True)
class Error:
    """How far the model is from the measurements: ratios model / measured."""

    ratios: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.ratios)

    @property
    def worst(self) -> float:
        """The ratio farthest from 1 (either way)."""
        return max(self.ratios, key=lambda r: abs(math.log(r)))

    @property
    def typical(self) -> float:
        """exp(mean |log ratio|): the factor the model is typically off by (1: exact)."""
        return math.exp(statistics.fmean(abs(math.log(r)) for r in self.ratios))

    def to_json(self) -> dict:
        return {"median": self.median, "worst": self.worst, "typical_factor": self.typical,
                "ratios": list(self.ratios)}


@dataclass(frozen=True)
class FitResult:
    figures: tuple[Figure, ...]
    values: tuple[float, ...]            # fitted, in the order of `figures`
    before: Error
    after: Error
    insensitive: tuple[str, ...]         # figures no observation's estimate depends on
    evaluations: int


def values_of(figures: Sequence[Figure], logs: Sequence[float]) -> dict[tuple, float]:
    out = {}
    for f, m in zip(figures, logs):
        v = f.value * math.exp(m)
        out[f.path] = max(1, round(v)) if f.is_int else v
    return out


def error_of(observations: Sequence[Observation], device) -> Error:
    ratios = []
    for o in observations:
        model = o.model(device)
        if not (model > 0 and math.isfinite(model)):
            raise ValueError(f"the model has no finite time for {o.label}")
        ratios.append(model / o.measured_seconds)
    return Error(tuple(ratios))


def fit(observations: Sequence[Observation], device, figures: Sequence[Figure]) -> FitResult:
    """Fit `figures` of `device` to `observations` (see the module's docstring)."""
    figures = tuple(figures)
    evaluations = 0
    seen: dict[tuple[float, ...], float] = {}

    def loss(logs) -> float:
        # the pattern search steps back to points it has been at (a move of +step is tried
        # -step on the next sweep): each point is simulated once
        key = tuple(round(m, 12) for m in logs)
        if key not in seen:
            seen[key] = simulated_loss(logs)
        return seen[key]

    def simulated_loss(logs) -> float:
        nonlocal evaluations
        evaluations += 1
        dev = with_values(device, values_of(figures, logs))
        total = 0.0
        for o in observations:
            model = o.model(dev)
            if not (model > 0 and math.isfinite(model)):
                return math.inf
            total += abs(math.log(model / o.measured_seconds))
        return total / len(observations)

    logs = [0.0] * len(figures)
    best = loss(logs)
    base = best
    insensitive = tuple(f.name for i, f in enumerate(figures)
                        if all(loss(_moved(logs, i, d)) == base for d in (FIRST_STEP, -FIRST_STEP)))
    step = FIRST_STEP
    best += PRIOR * sum(abs(m) for m in logs)
    while step >= LAST_STEP:
        improved = False
        for i, f in enumerate(figures):
            if f.name in insensitive:
                continue
            tries = []
            for direction in (step, -step):
                trial = _moved(logs, i, direction)
                if abs(trial[i]) <= BOUND + 1e-12:
                    tries.append((loss(trial) + PRIOR * sum(abs(m) for m in trial), trial))
            if tries:
                value, trial = min(tries, key=lambda t: t[0])
                if value < best - 1e-12:
                    logs, best, improved = trial, value, True
        if not improved:
            step /= 2
    fitted = values_of(figures, logs)
    before = error_of(observations, device)
    after = error_of(observations, with_values(device, fitted))
    return FitResult(figures, tuple(fitted[f.path] for f in figures), before, after,
                     insensitive, evaluations)


def _moved(logs, i: int, delta: float) -> list[float]:
    out = list(logs)
    out[i] += delta
    return out
