"""Measuring one trial on the GPU: build its plans, check them against the reference
interpreter on a small problem, then time them at the problem being tuned.

Timing follows `ptc bench` (ptc.runtime.kernel.CompiledKernel.time: CUDA events around each
launch, outputs zeroed outside the timed region) with the L2 cache flushed before every
timed launch, so a plan whose inputs fit in L2 is not timed on a warm cache; the median of
`iters` runs after `warmup` untimed ones is what counts.

`GpuMeasurer` is what `ptc tune` uses; anything with the same call (trial -> Measured)
can stand in for it (the tests measure without a GPU that way).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from ..diagnostics import CompileError
from ..runtime.measured import Row

FLUSH_MIN_BYTES = 256 << 20     # flushed per timed run: twice the L2, at least this


@dataclass(frozen=True)
class Measured:
    check: str                    # "ok", or why the trial was refused
    median_ms: float | None = None
    runs: int = 0
    row: Row | None = None        # the measurement as a row of ptc.runtime.measured


Measurer = Callable[[object], Measured]     # Trial -> Measured


def flush_bytes_for(device) -> int:
    return max(FLUSH_MIN_BYTES, 2 * device.memory.l2_bytes)


@dataclass
class GpuMeasurer:
    file: str
    kernel: str                        # the kernel's name
    target: str
    shapes: Mapping[str, int]          # --shape, as the kernel will be built
    dims: Mapping[str, int]            # the problem
    check_shapes: Mapping[str, int] | None   # None: ptc.tune.checkshape per trial
    gpu_name: str
    peaks: object                      # the Device whose peaks the rows quote
    warmup: int = 10
    iters: int = 50
    seed: int = 0
    check: bool = True
    progress: Callable[[str], None] = lambda message: None

    def __post_init__(self):
        self._inputs = None

    def __call__(self, trial) -> Measured:
        from ..driver import PlanText

        plan = PlanText(f"trial {trial.rank} ({trial.label})", trial.plan_json)
        if self.check:
            why = self._check(trial, plan)
            if why != "ok":
                return Measured(why)
        try:
            return self._time(trial, plan)
        except CompileError as exc:
            return Measured(f"failed to build or run: {first_line(exc)}")

    # ---- the check -------------------------------------------------------------------
    def _check(self, trial, plan) -> str:
        import numpy as np

        from .. import runtime
        from ..interp import random_inputs, run_kernel
        from ..runtime.bench import compare
        from .checkshape import check_dims

        shapes = dict(self.check_shapes or check_dims(trial.graphs, self.dims))
        self.progress(f"checking trial {trial.rank} at "
                      + ",".join(f"{k}={v}" for k, v in sorted(shapes.items())))
        try:
            prepared = runtime.prepare(self.file, self.target, shapes=shapes,
                                       kernel=self.kernel, schedule=plan)
            compiled = runtime.build_prepared(prepared, shapes=shapes)
            inputs = random_inputs(prepared.kernel, shapes, self.seed + 1)
            poison = tuple(p.name for p in compiled.signature.outputs
                           if not p.atomic and p.dtype in ("f16", "bf16", "f32"))
            got = compiled.run(compiled.bind(**inputs), poison=poison)
        except CompileError as exc:
            return f"failed at the check shape: {first_line(exc)}"
        with np.errstate(all="ignore"):
            want = run_kernel(prepared.kernel, inputs, shapes=shapes, tiles=prepared.tiles)
        bad = [c for c in (compare(p.name, p.dtype, got[p.name], want[p.name])
                           for p in compiled.signature.outputs) if not c.ok]
        if bad:
            c = bad[0]
            return (f"wrong result: {c.name} differs from the reference (rel. L2 error "
                    f"{c.rel_l2:.2e} > {c.tolerance:.0e}, {c.bad_nan} NaN/inf)")
        return "ok"

    # ---- the time ----------------------------------------------------------------------
    def _time(self, trial, plan) -> Measured:
        from .. import runtime
        from ..interp import random_inputs
        from ..runtime.bench import work_of

        self.progress(f"timing trial {trial.rank}: {trial.label}")
        prepared = runtime.prepare(self.file, self.target, shapes=dict(self.shapes) or None,
                                   kernel=self.kernel, schedule=plan)
        compiled = runtime.build_prepared(prepared, shapes=dict(self.shapes) or None)
        if self._inputs is None:
            self._inputs = random_inputs(prepared.kernel, dict(self.dims), self.seed)
        timing = compiled.time(warmup=self.warmup, iters=self.iters,
                               flush_bytes=flush_bytes_for(prepared.device), **self._inputs)
        work = work_of(prepared, dict(self.dims))
        row = measured_row(f"{self.kernel} trial {trial.rank}", self.file, prepared,
                           self.shapes, self.dims, timing, work, self.peaks,
                           check="ok" if self.check else "skipped", label=trial.label)
        return Measured("ok", timing.median_ms, len(timing.ms), row)


def measured_row(workload: str, file: str, prepared, shapes, dims, timing, work, peaks, *,
                 check: str = "skipped", label: str = "", baselines=()) -> Row:
    """A Row of ptc.runtime.measured for a timed build; `peaks`: the Device of the GPU it
    ran on (whose peaks % of peak is of)."""
    try:
        peak_flops = peaks.peak_flops(work.mma_dtype)
    except ValueError:
        peak_flops = 0.0
    return Row(workload, str(file), prepared.kernel.name, prepared.target,
               tuple(sorted(dict(shapes or {}).items())), tuple(sorted(dict(dims).items())),
               prepared.plan_json, label, timing.median_ms, timing.min_ms, len(timing.ms),
               timing.flushed, work.model_seconds * 1e3, work.flops, work.bytes,
               work.mma_dtype, peak_flops, peaks.peak_dram_bytes_per_s(),
               tuple(sorted(baselines)), check)


def first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
