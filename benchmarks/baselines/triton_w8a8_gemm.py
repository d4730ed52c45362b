"""A W8A8 GEMM in Triton (SmoothQuant: C = (A @ W^T) * sa[:, None] * sw[None, :], i8 in,
i32 accumulate, f16 out; W in nn.Linear's [N, K] layout): the baseline of ptc's
samples/w8a8_gemm.pt main loop (benchmarks/mainloop.py, ahead of time, no GPU).
Nothing imports torch at module level."""
import triton
import triton.language as tl


@triton.jit
def w8a8_gemm_kernel(A, W, SA, SW, C, M, N, K, stride_am, stride_wn, stride_cm,
                     BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptr = A + rm[:, None] * stride_am + rk[None, :]
    w_ptr = W + rn[None, :] * stride_wn + rk[:, None]          # [BK, BN] view of W^T
    acc = tl.zeros((BM, BN), dtype=tl.int32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptr, mask=(rm[:, None] < M) & (rk[None, :] + k * BK < K), other=0)
        w = tl.load(w_ptr, mask=(rk[:, None] + k * BK < K) & (rn[None, :] < N), other=0)
        acc += tl.dot(a, w, out_dtype=tl.int32)
        a_ptr += BK
        w_ptr += BK
    sa = tl.load(SA + rm, mask=rm < M, other=0.0)
    sw = tl.load(SW + rn, mask=rn < N, other=0.0)
    c = acc.to(tl.float32) * sa[:, None] * sw[None, :]
    tl.store(C + rm[:, None] * stride_cm + rn[None, :], c.to(tl.float16),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


SIGNATURE = {"A": "*i8", "W": "*i8", "SA": "*fp32", "SW": "*fp32", "C": "*fp16",
             "M": "i32", "N": "i32", "K": "i32",
             "stride_am": "i32", "stride_wn": "i32", "stride_cm": "i32",
             "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
# what a launch with 16-aligned pointers, sizes and strides specializes on
DIVISIBLE = tuple(range(11))


def run(a, w, sa, sw, BM=128, BN=128, BK=128, num_warps=4, num_stages=3):
    """C = (a @ w.T) * sa[:, None] * sw[None, :] on the GPU (torch tensors)."""
    import torch
    M, K = a.shape
    N = w.shape[0]
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
    w8a8_gemm_kernel[grid](a, w, sa, sw, c, M, N, K, a.stride(0), w.stride(0), c.stride(0),
                           BM=BM, BN=BN, BK=BK, num_warps=num_warps, num_stages=num_stages)
    return c
