"""DeepSeek-V3's block-scaled FP8 GEMM in Triton (the per-k-block scaling of DeepSeek-V3's
inference kernel, written here for ptc's sample): A e4m3 [M, K] with a scale per row and
128 k (SA [M, K/128]), W e4m3 [N, K] with a scale per 128 x 128 block (SW [N/128, K/128]);
each k tile's product is scaled and added to the f32 accumulator; bf16 out. The baseline of
samples/fp8_blockscaled_gemm.pt's main loop (benchmarks/mainloop.py, ahead of time, no
GPU). A k tile lies in one scale block (BK divides 128) and an n tile in one weight block
(BN divides 128), as in ptc's sample, so the weight scale is one value per tile. Written out
in full like the other baselines (see triton_fp8_gemm.py). Nothing imports torch at module
level."""
import triton
import triton.language as tl


@triton.jit
def fp8_blockscaled_gemm_kernel(A, W, SA, SW, C, M, N, K, KB, stride_am, stride_wn,
                                stride_cm, BM: tl.constexpr, BN: tl.constexpr,
                                BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptr = A + rm[:, None] * stride_am + rk[None, :]
    w_ptr = W + rn[None, :] * stride_wn + rk[:, None]          # [BK, BN] view of W^T
    sw_row = SW + (pid_n * BN // 128) * KB
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        g = k * BK // 128                                       # the scale block
        a = tl.load(a_ptr, mask=(rm[:, None] < M) & (rk[None, :] + k * BK < K), other=0.0)
        w = tl.load(w_ptr, mask=(rk[:, None] + k * BK < K) & (rn[None, :] < N), other=0.0)
        sa = tl.load(SA + rm * KB + g, mask=rm < M, other=0.0)
        sw = tl.load(sw_row + g)
        acc += tl.dot(a, w) * (sa[:, None] * sw)                # promoted to f32 per block
        a_ptr += BK
        w_ptr += BK
    tl.store(C + rm[:, None] * stride_cm + rn[None, :], acc.to(tl.bfloat16),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


SIGNATURE = {"A": "*fp8e4nv", "W": "*fp8e4nv", "SA": "*fp32", "SW": "*fp32", "C": "*bf16",
             "M": "i32", "N": "i32", "K": "i32", "KB": "i32",
             "stride_am": "i32", "stride_wn": "i32", "stride_cm": "i32",
             "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
# what a launch with 16-aligned pointers, sizes and strides specializes on
DIVISIBLE = tuple(range(12))


def run(a, w, sa, sw, BM=128, BN=128, BK=128, num_warps=8, num_stages=3):
    """The block-scaled product on the GPU (torch tensors: a, w float8_e4m3fn; sa [M, K/128],
    sw [N/128, K/128] float32)."""
    import torch
    M, K = a.shape
    N = w.shape[0]
    c = torch.empty((M, N), device=a.device, dtype=torch.bfloat16)
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
    fp8_blockscaled_gemm_kernel[grid](a, w, sa, sw, c, M, N, K, sw.shape[1], a.stride(0),
                                      w.stride(0), c.stride(0), BM=BM, BN=BN, BK=BK,
                                      num_warps=num_warps, num_stages=num_stages)
    return c
