"""`ptc calibrate`: fit the cost model's estimated figures (the `[EST]`-tagged latencies,
issue costs and L2 bandwidth of a device YAML) to plans timed on a GPU, and write a
calibrated device YAML whose fitted figures are tagged `[MEASURED <date> <gpu>]`.

    figures.py   the [EST] figures of a YAML text; a Device with other values
    observe.py   measured rows -> observations (plan, graph, dims, measured time)
    fit.py       the robust fit (coordinate search on log-multipliers) and its error
    write.py     the calibrated YAML text

    cal = calibrate([measured.load("bench.json")], "sm90", date="2026-12-01")
    cal.fit.before.median, cal.fit.after.worst, cal.yaml_text
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..diagnostics import CompileError, Diagnostic
from .figures import Figure, estimated, scan, with_values
from .fit import Error, FitResult, Observation, error_of, fit
from .observe import Skipped, observations
from .write import calibrated_yaml, number_text

__all__ = ["Calibration", "CalibrationError", "Error", "Figure", "FitResult", "Observation",
           "Skipped", "calibrate", "calibrated_yaml", "error_of", "estimated", "fit",
           "number_text", "observations", "scan", "with_values"]


class CalibrationError(CompileError):
    def __init__(self, message: str, hint: str | None = None):
        super().__init__(Diagnostic(message, hint=hint))


@dataclass(frozen=True)
class Calibration:
    device: object
    fit: FitResult
    observations: tuple[Observation, ...]
    skipped: tuple[Skipped, ...]
    yaml_text: str
    gpu: str
    date: str

    def changes(self) -> list[tuple[Figure, float]]:
        return [(f, v) for f, v in zip(self.fit.figures, self.fit.values)
                if number_text(v, f.is_int) != number_text(f.value, f.is_int)]

    def to_json(self) -> dict:
        return {"device": self.device.name, "gpu": self.gpu, "date": self.date,
                "observations": [o.label for o in self.observations],
                "skipped": [{"row": s.label, "reason": s.reason} for s in self.skipped],
                "before": self.fit.before.to_json(), "after": self.fit.after.to_json(),
                "figures": [{"figure": f.name, "estimate": f.value, "fitted": v,
                             "changed": number_text(v, f.is_int) != number_text(f.value, f.is_int),
                             "no_effect": f.name in self.fit.insensitive}
                            for f, v in zip(self.fit.figures, self.fit.values)]}


def calibrate(docs, target: str, *, date: str, gpu: str | None = None) -> Calibration:
    """Fit the [EST] figures of `target` (a builtin name or a device YAML path) to the
    timed rows of `docs` (ptc.runtime.measured Documents) that ran its plans."""
    from ..devices import get_device

    device = get_device(target)
    docs = list(docs)
    gpu = gpu or next((d.gpu for d in docs if d.gpu), "unknown GPU")
    text = Path(device.path).read_text(encoding="utf-8")
    figures = estimated(text)
    if not figures:
        raise CalibrationError(f"{device.path} has no figure tagged [EST] to calibrate")
    obs, skipped = observations(docs, device.name, target)
    if not obs:
        why = f" ({skipped[0].label}: {skipped[0].reason})" if skipped else ""
        raise CalibrationError(f"no timed plan of target {device.name} in "
                               f"{', '.join(d.path or '?' for d in docs)}{why}",
                               hint="record measurements with benchmarks/run.py or "
                                    "ptc tune --record on a GPU")
    # memoized on disk like a search (ptc.stage_cache): the fit is a pure function of the
    # device description and the timed rows it uses, and takes seconds of cost-model runs
    from ..stage_cache import STAGES, content_key

    key = content_key("calibrate", device, text, figures,
                      [(o.label, o.measured_seconds, o.inputs) for o in obs])
    result = STAGES.get_or_compute("calibrate", key, lambda: fit(obs, device, figures))
    cal = Calibration(device, result, obs, skipped, "", gpu, date)
    fabricated = any(d.fabricated for d in docs)
    header = [f"Calibrated by ptc calibrate on {date} from {len(obs)} timed plan(s) on {gpu}"
              + (" -- FABRICATED TEST DATA, NOT A MEASUREMENT" if fabricated else "") + ".",
              "model/measured before: " + _summary(result.before),
              "model/measured after:  " + _summary(result.after),
              f"Fitted figures are tagged [MEASURED {date} {gpu}; was <estimate>].", ""]
    yaml_text = calibrated_yaml(text, cal.changes(), date=date, gpu=gpu, header=header)
    return Calibration(device, result, obs, skipped, yaml_text, gpu, date)


def _summary(e: Error) -> str:
    return (f"median {e.median:.3f}, worst {e.worst:.3f}, typically off by "
            f"x{e.typical:.3f}")
