"""What the Triton baselines of linear layers (activations A [M, K] times weights W in
nn.Linear's [N, K] layout) share: the tile's pointers, its masked loads and the launch."""
import triton
import triton.language as tl


@triton.jit
def tile_pointers(A, W, stride_am, stride_wn, BM: tl.constexpr, BN: tl.constexpr,
                  BK: tl.constexpr):
    """The program's rows and columns, and the first k tile of A and of W^T ([BK, BN])."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    return (rm, rn, rk, A + rm[:, None] * stride_am + rk[None, :],
            W + rn[None, :] * stride_wn + rk[:, None])


@triton.jit
def load_tiles(a_ptr, w_ptr, rm, rn, rk, k, M, N, K, BK: tl.constexpr):
    """k tile k of A and W^T, zero past the edges."""
    a = tl.load(a_ptr, mask=(rm[:, None] < M) & (rk[None, :] + k * BK < K), other=0.0)
    w = tl.load(w_ptr, mask=(rk[:, None] + k * BK < K) & (rn[None, :] < N), other=0.0)
    return a, w


@triton.jit
def store_tile(C, c, rm, rn, M, N, stride_cm):
    tl.store(C + rm[:, None] * stride_cm + rn[None, :], c,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def launch(kernel, a, w, scales, extra, out_dtype, BM, BN, BK, num_warps, num_stages):
    """C [M, N] of out_dtype from kernel[grid](a, w, *scales, c, M, N, K, *extra, strides)
    on the GPU (torch tensors)."""
    import torch
    M, K = a.shape
    N = w.shape[0]
    c = torch.empty((M, N), device=a.device, dtype=out_dtype)
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
    kernel[grid](a, w, *scales, c, M, N, K, *extra, a.stride(0), w.stride(0), c.stride(0),
                 BM=BM, BN=BN, BK=BK, num_warps=num_warps, num_stages=num_stages)
    return c
