"""The contenders of benchmarks/run.py on the GPU (the baselines), and one way of timing every contender:
CUDA events around each launch, the L2 cache flushed before every timed launch (outside
the timed region), the median of the runs. ptc's kernels are timed the same way by
ptc.runtime.kernel.CompiledKernel.time(flush_bytes=...).

Each baseline takes the inputs as torch tensors by parameter name and the scalars, and
returns its outputs in the kernel's output order (for the cross-check), or None where it
does not apply (a backend that refuses the shape, a Triton configuration that does not
fit): then it is left out.
"""
from __future__ import annotations

import statistics
import sys
from pathlib import Path

TRITON_DIR = Path(__file__).resolve().parent / "baselines"    # the Triton kernels

FLUSH_BYTES = 256 << 20      # written before every timed launch: over 4x an H100's L2


def time_fn(fn, *, warmup: int, iters: int, flush=None) -> list[float]:
    """Milliseconds of `iters` calls of fn() after `warmup`, CUDA events around each, the
    `flush` tensor (a scratch buffer) rewritten before each timed call."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(iters)]
    for n, (start, stop) in enumerate(events):
        if flush is not None:
            flush.fill_(n & 0xFF)
        start.record()
        fn()
        stop.record()
    torch.cuda.synchronize()
    return [a.elapsed_time(b) for a, b in events]


def flush_buffer():
    import torch

    return torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")


# ---- the baselines ----------------------------------------------------------------------
def _torch(kernel):
    from ptc.runtime.baselines import BASELINES

    base = BASELINES.get(kernel)
    if base is None:
        return None

    def run(t, s):
        out = base.fn(t, s)
        return out if isinstance(out, tuple) else (out,)
    return run


def _sdpa(backend: str, causal: bool):
    def run(t, s):
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel

        chosen = {"flash": SDPBackend.FLASH_ATTENTION,
                  "cudnn": SDPBackend.CUDNN_ATTENTION}[backend]
        with sdpa_kernel([chosen]):
            return (F.scaled_dot_product_attention(t["Q"], t["K"], t["V"], is_causal=causal),)
    return run


GEMM_CONFIGS = ((128, 128, 64, 4, 3), (128, 256, 64, 8, 3))          # BM, BN, BK, warps, stages
ATTN_CONFIGS = {64: ((128, 64, 4, 3), (128, 128, 8, 2)),             # BM, BN, warps, stages
                128: ((128, 64, 8, 2), (128, 128, 8, 2)),
                256: ((64, 32, 4, 2), (64, 64, 8, 1))}


def _triton(kernel, t):
    """One callable per configuration of the Triton baseline (None: no such baseline)."""
    if str(TRITON_DIR) not in sys.path:
        sys.path.insert(0, str(TRITON_DIR))
    if kernel == "gemm":
        import triton_gemm as tg

        return [lambda t, s, c=c: (tg.run(t["A"], t["B"], *c[:3], num_warps=c[3],
                                          num_stages=c[4]),) for c in GEMM_CONFIGS]
    if kernel in ("flash_attn", "flash_attn_causal"):
        import triton_flash_attn as ta

        causal = kernel == "flash_attn_causal"
        d = t["Q"].shape[-1]
        return [lambda t, s, c=c: (ta.run(t["Q"], t["K"], t["V"], causal, BM=c[0], BN=c[1],
                                          num_warps=c[2], num_stages=c[3]),)
                for c in ATTN_CONFIGS.get(d, ATTN_CONFIGS[128])]
    return None


def candidates(name: str, kernel: str, t) -> list:
    """The callables that stand for baseline `name` (several: the fastest counts)."""
    if name == "torch":
        fn = _torch(kernel)
        return [fn] if fn else []
    if name in ("torch-flash", "torch-cudnn") and kernel.startswith("flash_attn"):
        return [_sdpa(name.split("-")[1], kernel == "flash_attn_causal")]
    if name == "triton":
        return _triton(kernel, t) or []
    return []


def run_baseline(name: str, kernel: str, t, s, *, warmup: int, iters: int, flush):
    """(median ms, outputs, note) of baseline `name`: its fastest configuration; median
    None where none ran (the note says why)."""
    import torch

    best, outputs, why = None, None, f"no {name} baseline for {kernel}"
    try:
        fns = candidates(name, kernel, t)
    except ImportError as exc:
        return None, None, f"{name}: {exc}"
    for fn in fns:
        try:
            with torch.no_grad():
                out = fn(t, s)
                ms = statistics.median(time_fn(lambda: fn(t, s), warmup=warmup, iters=iters,
                                               flush=flush))
        except Exception as exc:      # a backend or configuration that does not apply
            text = str(exc).strip().splitlines()
            why = f"{name}: {type(exc).__name__}: {text[0] if text else ''}"
            torch.cuda.synchronize()
            continue
        if best is None or ms < best:
            best, outputs = ms, out
    return best, outputs, "" if best is not None else why
