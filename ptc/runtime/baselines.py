"""What `ptc bench --baseline torch` compares a sample kernel with: the same operator in
PyTorch (cuBLAS, cuDNN / FlashAttention through SDPA), keyed by the sample's kernel name.

Each baseline gets the bench's inputs as CUDA tensors by parameter name (plus the scalar
params as Python numbers) and returns nothing: only its time counts.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np


@dataclass(frozen=True)
class Baseline:
    label: str
    fn: Callable[[Mapping, Mapping], object]


def _gemm(t, s):
    return t["A"] @ t["B"]


def _matmul_sum(t, s):
    c = t["A"] @ t["B"]
    return c, c.float().sum(dim=1)


def _gemm_chain(t, s):
    return (t["A"] @ t["B"]) @ t["D"]


def _sdpa(causal: bool):
    def run(t, s):
        import torch.nn.functional as F

        return F.scaled_dot_product_attention(t["Q"], t["K"], t["V"], is_causal=causal)
    return run


def _rmsnorm(t, s):
    import torch

    x, w = t["X"], t["W"]
    if hasattr(torch.nn.functional, "rms_norm"):
        return torch.nn.functional.rms_norm(x, (x.shape[-1],), w, float(s["eps"]))
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + float(s["eps"])) * w.float()).half()


def _fp8_gemm(t, s):
    """torch's FP8 linear: cuBLASLt's e4m3 GEMM with one f32 scale per tensor."""
    import torch

    return torch._scaled_mm(t["A"], t["W"].t(), scale_a=t["sa"].reshape(()),
                            scale_b=t["sw"].reshape(()), out_dtype=torch.bfloat16)


def _w8a8_gemm(t, s):
    """torch's INT8 GEMM (cuBLASLt, s32 results), then SmoothQuant's per-row and
    per-column scales."""
    import torch

    acc = torch._int_mm(t["A"], t["W"].t())
    return (acc.float() * t["sa"][:, None] * t["sw"][None, :]).half()


def _softmax(t, s):
    import torch

    return torch.softmax(t["X"], dim=-1)


BASELINES: dict[str, Baseline] = {
    "gemm": Baseline("torch.matmul", _gemm),
    "matmul_sum": Baseline("torch matmul + sum", _matmul_sum),
    "gemm_chain": Baseline("torch.matmul x2", _gemm_chain),
    "flash_attn": Baseline("torch SDPA", _sdpa(False)),
    "flash_attn_causal": Baseline("torch SDPA causal", _sdpa(True)),
    "rmsnorm": Baseline("torch rms_norm", _rmsnorm),
    "softmax": Baseline("torch.softmax", _softmax),
    "fp8_gemm": Baseline("torch._scaled_mm", _fp8_gemm),
    "w8a8_gemm": Baseline("torch._int_mm + scales", _w8a8_gemm),
}


@dataclass(frozen=True)
class BaselineTiming:
    label: str
    ms: tuple[float, ...]

    @property
    def median_ms(self) -> float:
        return statistics.median(self.ms)


def torch_available() -> str | None:
    """None if torch with CUDA can be used, else why not."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device (a CPU build?)"
    return None


def to_torch(arrays: Mapping[str, np.ndarray], device: str = "cuda"):
    """NumPy arrays as torch tensors on `device`; bf16 by value, FP8 by its codes."""
    import ml_dtypes
    import torch

    fp8 = {np.dtype(ml_dtypes.float8_e4m3fn): torch.float8_e4m3fn,
           np.dtype(ml_dtypes.float8_e5m2): torch.float8_e5m2}
    out = {}
    for name, a in arrays.items():
        if a.dtype == ml_dtypes.bfloat16:
            out[name] = torch.from_numpy(a.astype(np.float32)).to(device).to(torch.bfloat16)
        elif a.dtype in fp8:
            codes = torch.from_numpy(np.ascontiguousarray(a).view(np.uint8)).to(device)
            out[name] = codes.view(fp8[a.dtype])
        else:
            out[name] = torch.from_numpy(np.ascontiguousarray(a)).to(device)
    return out


def time_baseline(kernel: str, tensors: Mapping[str, np.ndarray], scalars: Mapping[str, float],
                  *, warmup: int = 10, iters: int = 100) -> BaselineTiming | None:
    """Time the baseline of `kernel` (None if it has none) with CUDA events per run."""
    import torch

    baseline = BASELINES.get(kernel)
    if baseline is None:
        return None
    t = to_torch(tensors)
    with torch.no_grad():
        for _ in range(warmup):
            baseline.fn(t, scalars)
        torch.cuda.synchronize()
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(iters)]
        for start, stop in events:
            start.record()
            baseline.fn(t, scalars)
            stop.record()
        torch.cuda.synchronize()
    return BaselineTiming(baseline.label, tuple(a.elapsed_time(b) for a, b in events))
