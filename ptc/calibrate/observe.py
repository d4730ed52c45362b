"""Observations for the fit from tables of measurements (ptc.runtime.measured): each timed
row of the device's target becomes its plans (pinned from the row's plan JSON, verified
against the kernel in the row's .pt file) and the measured time."""
from __future__ import annotations

from dataclasses import dataclass

from ..diagnostics import CompileError
from .fit import Observation


@dataclass(frozen=True)
class Skipped:
    label: str
    reason: str


def observations(docs, device_name: str, target: str):
    """(observations, skipped rows with why) for `target` (a builtin name or YAML path
    whose device is named `device_name`)."""
    from .. import driver
    from ..sched.cost import plan_estimate

    obs, skipped = [], []
    for doc in docs:
        for row in doc.rows:
            label = f"{row.workload} ({row.target})"
            if row.target != device_name:
                continue
            if not row.timed or not row.plan_json:
                skipped.append(Skipped(label, row.error or "not timed"))
                continue
            if row.check.startswith("FAIL"):
                skipped.append(Skipped(label, "its check failed"))
                continue
            try:
                kernel = driver.select_kernel(driver.check_file(row.file, dict(row.shapes)),
                                              row.kernel)
                pairs = driver.pinned_plans(kernel, target, driver.PlanText(
                    f"{doc.path or 'measurements'}: {row.workload}", row.plan_json))
            except CompileError as exc:
                text = str(exc).strip().splitlines()
                skipped.append(Skipped(label, text[0] if text else "its plan does not load"))
                continue
            dims = dict(row.dims)

            def model(device, pairs=pairs, dims=dims) -> float:
                return sum(plan_estimate(p, g, device, dims).seconds for p, g in pairs)

            obs.append(Observation(label, row.median_ms * 1e-3, model,
                                   (tuple(pairs), tuple(sorted(dims.items())))))
    return tuple(obs), tuple(skipped)
