"""An FP8 GEMM with per-tensor scales in Triton (C = (A @ W^T) * sa * sw, e4m3 in, f32
accumulate, bf16 out; W in nn.Linear's [N, K] layout): the baseline of ptc's
samples/fp8_gemm.pt main loop (benchmarks/mainloop.py, ahead of time, no GPU).
Written out in full like the other baselines: with the pointer and load code in shared
@triton.jit helpers, Triton 3.9's AMD back end laid out a main loop the static report
does not find. Nothing imports torch at module level."""
import triton
import triton.language as tl


@triton.jit
def fp8_gemm_kernel(A, W, SA, SW, C, M, N, K, stride_am, stride_wn, stride_cm,
                    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptr = A + rm[:, None] * stride_am + rk[None, :]
    w_ptr = W + rn[None, :] * stride_wn + rk[:, None]          # [BK, BN] view of W^T
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptr, mask=(rm[:, None] < M) & (rk[None, :] + k * BK < K), other=0.0)
        w = tl.load(w_ptr, mask=(rk[:, None] + k * BK < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, w, acc)                                 # e4m3 x e4m3 -> f32
        a_ptr += BK
        w_ptr += BK
    c = acc * (tl.load(SA) * tl.load(SW))
    tl.store(C + rm[:, None] * stride_cm + rn[None, :], c.to(tl.bfloat16),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


SIGNATURE = {"A": "*fp8e4nv", "W": "*fp8e4nv", "SA": "*fp32", "SW": "*fp32", "C": "*bf16",
             "M": "i32", "N": "i32", "K": "i32",
             "stride_am": "i32", "stride_wn": "i32", "stride_cm": "i32",
             "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
# what a launch with 16-aligned pointers, sizes and strides specializes on
DIVISIBLE = tuple(range(11))


def run(a, w, sa, sw, BM=128, BN=128, BK=128, num_warps=8, num_stages=3):
    """C = (a @ w.T) * sa * sw on the GPU (torch tensors, a and w float8_e4m3fn)."""
    import torch
    M, K = a.shape
    N = w.shape[0]
    c = torch.empty((M, N), device=a.device, dtype=torch.bfloat16)
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
    fp8_gemm_kernel[grid](a, w, sa, sw, c, M, N, K, a.stride(0), w.stride(0), c.stride(0),
                          BM=BM, BN=BN, BK=BK, num_warps=num_warps, num_stages=num_stages)
    return c
