"""What benchmarks/run.py times: DESIGN.md section 6's problems, each with the baselines
it is compared with on the same GPU. Plain data; nothing here needs a GPU.

Baselines (benchmarks/baselines.py runs them):
  torch        the operator in PyTorch: torch.matmul (cuBLAS), SDPA with its default
               dispatch (FlashAttention-2 or cuDNN), torch rms_norm / softmax,
               torch._scaled_mm (FP8) and torch._int_mm (INT8)
  torch-flash  SDPA restricted to its FlashAttention-2 backend
  torch-cudnn  SDPA restricted to its cuDNN backend
  triton       benchmarks/baselines/triton_*.py, the best of a few configurations
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Workload:
    label: str
    sample: str                           # samples/<sample>.pt
    shapes: tuple[tuple[str, int], ...]   # --shape (empty: the sample's `dims` defaults)
    baselines: tuple[str, ...]
    quick: bool = False                   # also in --quick runs

    @property
    def shape_text(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.shapes)


def _w(label, sample, baselines, quick=False, **shapes) -> Workload:
    return Workload(label, sample, tuple(shapes.items()), tuple(baselines), quick)


GEMM = ("torch", "triton")
ATTN = ("torch", "torch-flash", "torch-cudnn", "triton")

# FlashAttention at FA3's shapes: B*S = 16k, H*D = 2048, d 64 / 128 / 256, causal and not.
WORKLOADS: tuple[Workload, ...] = (
    _w("gemm 4096^3", "gemm", GEMM, True, M=4096, N=4096, K=4096),
    _w("gemm 8192^3", "gemm", GEMM, M=8192, N=8192, K=8192),
    _w("matmul_sum 4096^3", "matmul_sum", ("torch",), M=4096, N=4096, K=4096),
    _w("flash_attn d64 8k", "flash_attn", ATTN, B=2, H=32, S=8192, T=8192, D=64),
    _w("flash_attn d128 8k", "flash_attn", ATTN, True, B=2, H=16, S=8192, T=8192, D=128),
    _w("flash_attn d256 8k", "flash_attn", ATTN, B=2, H=8, S=8192, T=8192, D=256),
    _w("flash_attn_causal d64 8k", "flash_attn_causal", ATTN, B=2, H=32, S=8192, D=64),
    _w("flash_attn_causal d128 8k", "flash_attn_causal", ATTN, B=2, H=16, S=8192, D=128),
    _w("flash_attn_causal d256 8k", "flash_attn_causal", ATTN, B=2, H=8, S=8192, D=256),
    # Mamba2 at b8 h80 chunk 256 hd 64 dstate 128, seq 4k (NC 16 chunks); mamba_ssm's
    # Triton kernels are not installed where we run, so there is no baseline yet
    _w("mamba2_chunk_state seq 4k", "mamba2_chunk_state", (), NC=16),
    _w("mamba2_chunk_scan seq 4k", "mamba2_chunk_scan", (), NC=16),
    _w("gemm_chain 4096", "gemm_chain", ("torch",)),
    _w("rmsnorm 16k x 4096", "rmsnorm", ("torch",)),
    _w("softmax 16k x 4096", "softmax", ("torch",), True),
    # low precision (issue 21): cuBLASLt's FP8 and INT8 GEMMs through torch
    _w("fp8_gemm 4096^3", "fp8_gemm", ("torch",), M=4096, N=4096, K=4096),
    _w("w8a8_gemm 4096^3", "w8a8_gemm", ("torch",), M=4096, N=4096, K=4096),
)
TARGETS = ("sm90", "sm80")           # sm80 code runs on an H100 too
QUICK_TARGETS = ("sm90",)


def select(*, quick: bool = False, only: str = "", targets=None) -> list[tuple[Workload, str]]:
    """(workload, target) pairs to run, in order."""
    chosen = tuple(targets) if targets else (QUICK_TARGETS if quick else TARGETS)
    return [(w, t) for w in WORKLOADS if (w.quick or not quick) and only in w.label
            for t in chosen]
