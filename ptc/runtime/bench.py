"""`ptc bench`: run a built kernel on random inputs, check every output against the
reference interpreter, time it, and put the time next to the device's peak and a baseline.

Correctness: the relative L2 error ||out - ref|| / ||ref|| of each output must be within the
tolerance of its dtype, and no output may hold a NaN (or inf) where the reference does not.
Outputs that no atomic_add writes are poisoned (0xFF bytes: NaN) before the checked run,
so an element the kernel never stores shows up; atomic outputs start at zero.

Work: FLOPs are the mma FLOPs of the plan (the cost model's count at these dims), bytes the
unique bytes of every input and output. A kernel whose FLOPs per byte are below the
device's ridge point (peak FLOP/s / DRAM bytes/s) is memory-bound: its % of peak is of
DRAM bandwidth, otherwise of the mma peak for its input dtype.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from ..interp import bind_dims, random_inputs, run_kernel  # noqa: F401  (random_inputs re-exported)
from ..stask.graph import TaskKind
from .kernel import CompiledKernel, Timing

TOLERANCE = {"f32": 1e-3, "f16": 5e-3, "bf16": 2e-2, "i32": 0.0, "i8": 0.0, "u8": 0.0,
             # FP8 outputs: an f32 value that rounds the other way is one ulp off, at most
             # 2^-3 (e4m3) or 2^-2 (e5m2) of it; half that over a whole tensor
             "f8e4m3": 6.25e-2, "f8e5m2": 1.25e-1,
             "bool": 0.0}


@dataclass(frozen=True)
class OutputCheck:
    name: str
    dtype: str
    rel_l2: float
    tolerance: float
    bad_nan: int          # elements that are NaN/inf in the output but not in the reference

    @property
    def ok(self) -> bool:
        return self.bad_nan == 0 and self.rel_l2 <= self.tolerance


@dataclass(frozen=True)
class Work:
    flops: float
    bytes: float
    mma_dtype: str
    model_seconds: float   # the cost model's estimate at these dims


@dataclass
class BenchResult:
    kernel: str
    target: str
    gpu: str
    dims: dict[str, int]
    tiles: dict[str, int]
    timing: Timing
    work: Work
    peak_flops: float          # of the target's YAML (0 when it has no mma for the dtype)
    peak_bytes_per_s: float
    checks: list[OutputCheck] = field(default_factory=list)
    baseline_label: str = ""
    baseline_ms: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return self.timing.median_ms / 1e3

    @property
    def tflops(self) -> float:
        return self.work.flops / self.seconds / 1e12 if self.seconds else 0.0

    @property
    def gbs(self) -> float:
        return self.work.bytes / self.seconds / 1e9 if self.seconds else 0.0

    @property
    def bound(self) -> str:
        if not self.work.flops or not self.peak_flops:
            return "memory"
        ridge = self.peak_flops / self.peak_bytes_per_s
        return "compute" if self.work.flops / max(self.work.bytes, 1.0) >= ridge else "memory"

    @property
    def peak_fraction(self) -> float:
        if self.bound == "compute":
            return self.tflops * 1e12 / self.peak_flops
        return self.gbs * 1e9 / self.peak_bytes_per_s

    @property
    def speedup(self) -> float | None:
        """baseline time / ptc time: above 1 means ptc is faster."""
        return self.baseline_ms / self.timing.median_ms if self.baseline_ms else None

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def to_json(self) -> dict:
        return {
            "kernel": self.kernel, "target": self.target, "gpu": self.gpu, "dims": self.dims,
            "tiles": self.tiles, "median_ms": self.timing.median_ms,
            "min_ms": self.timing.min_ms, "runs": len(self.timing.ms),
            "flops": self.work.flops, "bytes": self.work.bytes, "bound": self.bound,
            "tflops": self.tflops, "gbs": self.gbs, "peak_fraction": self.peak_fraction,
            "model_ms": self.work.model_seconds * 1e3,
            "checks": [{"output": c.name, "dtype": c.dtype, "rel_l2": c.rel_l2,
                        "tolerance": c.tolerance, "bad_nan": c.bad_nan, "ok": c.ok}
                       for c in self.checks],
            "ok": self.ok, "baseline": self.baseline_label or None,
            "baseline_ms": self.baseline_ms, "speedup": self.speedup, "notes": self.notes,
        }


def compare(name: str, dtype: str, got: np.ndarray, want: np.ndarray) -> OutputCheck:
    g = np.asarray(got, dtype=np.float64)
    w = np.asarray(want, dtype=np.float64)
    finite = np.isfinite(w)
    bad = int(np.count_nonzero(~np.isfinite(g) & finite))
    # where the reference is NaN or inf, the output must be the same
    special = ~finite
    bad += int(np.count_nonzero(special & ~((np.isnan(g) & np.isnan(w)) | (g == w))))
    diff = np.where(finite, g - w, 0.0)
    diff = np.where(np.isfinite(diff), diff, 0.0)
    ref = np.where(finite, w, 0.0)
    denom = float(np.linalg.norm(ref))
    num = float(np.linalg.norm(diff))
    rel = num / denom if denom > 0 else num
    return OutputCheck(name, dtype, rel, TOLERANCE.get(dtype, 1e-3), bad)


def work_of(prepared, dims: Mapping[str, int]) -> Work:
    """The whole kernel's work and modelled time: its grids run one after the other."""
    from ..sched.cost import plan_estimate

    ests = [plan_estimate(plan, graph, prepared.device, dict(dims))
            for plan, graph in zip(prepared.plans, prepared.graphs)]
    return Work(float(sum(e.flops for e in ests)), float(sum(e.bytes for e in ests)),
                mma_dtype(prepared.graphs), float(sum(e.seconds for e in ests)))


def mma_dtype(graphs) -> str:
    """The input dtype of the kernel's matmuls (f16 when it has none)."""
    return next((t.mma_dtype for g in graphs for t in g.tasks if t.kind == TaskKind.MMA), "f16")


def run_bench(compiled: CompiledKernel, prepared, *, shapes: Mapping[str, int] | None = None,
              seed: int = 0, warmup: int = 10, iters: int = 100, check: bool = True,
              baseline: str | None = "torch", progress=None) -> BenchResult:
    """Bench `compiled` (built from `prepared`) at the problem size `shapes` (the `dims`
    defaults elsewhere). `progress(message)` hears about the slow steps."""
    say = progress or (lambda message: None)
    kernel = prepared.kernel
    dims = bind_dims(kernel, {}, dict(shapes or {}))
    tiles = prepared.tiles
    inputs = random_inputs(kernel, dims, seed)
    gpu = compiled.library().device()
    device = prepared.device
    work = work_of(prepared, dims)
    try:
        peak_flops = device.peak_flops(work.mma_dtype)
    except ValueError:
        peak_flops = 0.0
    notes = []
    if device.arch.removesuffix("a") != gpu.arch:
        notes.append(f"peaks are {device.name}'s ({device.description}); this GPU is "
                     f"{gpu.name} ({gpu.arch})")

    checks: list[OutputCheck] = []
    if check:
        say("running once on the GPU (outputs poisoned)")
        poison = tuple(p.name for p in compiled.signature.outputs
                       if not p.atomic and p.dtype in ("f16", "bf16", "f32"))
        call = compiled.bind(**inputs)
        got = compiled.run(call, poison=poison)
        say("running the reference interpreter")
        with np.errstate(all="ignore"):
            # each grid at its own plan's tile sizes (a pad that enters a reduction makes
            # the result depend on them)
            want = run_kernel(kernel, inputs, shapes=dims, tiles=tiles,
                              grid_tiles=[dict(p.tiles) for p in compiled.plans])
        checks = [compare(p.name, p.dtype, got[p.name], want[p.name])
                  for p in compiled.signature.outputs]

    say(f"timing: {warmup} warm-up runs, then {iters}")
    timing = compiled.time(warmup=warmup, iters=iters, **inputs)
    result = BenchResult(kernel.name, prepared.target, f"{gpu.name} ({gpu.arch})", dims, tiles,
                         timing, work, peak_flops, device.peak_dram_bytes_per_s(), checks,
                         notes=notes)
    if baseline == "torch":
        _torch_baseline(result, kernel, inputs, warmup, iters, say)
    return result


def _torch_baseline(result: BenchResult, kernel, inputs, warmup, iters, say) -> None:
    from . import baselines
    from ..sema import typed as T

    if kernel.name not in baselines.BASELINES:
        result.notes.append(f"no torch baseline for {kernel.name}")
        return
    why = baselines.torch_available()
    if why:
        result.notes.append(f"no torch baseline: {why}")
        return
    tensors = {p.name: inputs[p.name] for p in kernel.inputs if isinstance(p, T.TensorParam)}
    scalars = {p.name: float(inputs[p.name]) for p in kernel.inputs
               if isinstance(p, T.ScalarParam)}
    say(f"timing the torch baseline ({baselines.BASELINES[kernel.name].label})")
    timed = baselines.time_baseline(kernel.name, tensors, scalars, warmup=warmup, iters=iters)
    if timed is not None:
        result.baseline_label, result.baseline_ms = timed.label, timed.median_ms
