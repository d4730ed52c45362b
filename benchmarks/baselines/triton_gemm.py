"""A tiled GEMM in Triton (C = A @ B, f16 in, f32 accumulate, f16 out): the baseline
ptc's GEMM main loop is compared with (benchmarks/mainloop.py, ahead of time, no GPU)
and timed against (on a GPU). Nothing imports torch at module level."""
import triton
import triton.language as tl


@triton.jit
def gemm_kernel(A, B, C, M, N, K, stride_am, stride_bk, stride_cm,
                BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptr = A + rm[:, None] * stride_am + rk[None, :]
    b_ptr = B + rk[:, None] * stride_bk + rn[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptr, mask=(rm[:, None] < M) & (rk[None, :] + k * BK < K), other=0.0)
        b = tl.load(b_ptr, mask=(rk[:, None] + k * BK < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
        a_ptr += BK
        b_ptr += BK * stride_bk
    tl.store(C + rm[:, None] * stride_cm + rn[None, :], acc.to(tl.float16),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


SIGNATURE = {"A": "*fp16", "B": "*fp16", "C": "*fp16", "M": "i32", "N": "i32", "K": "i32",
             "stride_am": "i32", "stride_bk": "i32", "stride_cm": "i32",
             "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
# what a launch with 16-aligned pointers, sizes and strides specializes on
DIVISIBLE = tuple(range(9))


def run(a, b, BM=128, BN=128, BK=64, num_warps=4, num_stages=3):
    """C = a @ b on the GPU (torch tensors)."""
    import torch
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
    gemm_kernel[grid](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0),
                      BM=BM, BN=BN, BK=BK, num_warps=num_warps, num_stages=num_stages)
    return c
