"""An FP8 GEMM with per-tensor scales in Triton (C = (A @ W^T) * sa * sw, e4m3 in, f32
accumulate, bf16 out; W in nn.Linear's [N, K] layout): the baseline of ptc's
samples/fp8_gemm.pt main loop (benchmarks/mainloop.py, ahead of time, no GPU).
Nothing imports torch at module level."""
import triton
import triton.language as tl

from linear_tiles import launch, load_tiles, store_tile, tile_pointers


@triton.jit
def fp8_gemm_kernel(A, W, SA, SW, C, M, N, K, stride_am, stride_wn, stride_cm,
                    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm, rn, rk, a_ptr, w_ptr = tile_pointers(A, W, stride_am, stride_wn, BM, BN, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a, w = load_tiles(a_ptr, w_ptr, rm, rn, rk, k, M, N, K, BK)
        acc = tl.dot(a, w, acc)                                 # e4m3 x e4m3 -> f32
        a_ptr += BK
        w_ptr += BK
    c = acc * (tl.load(SA) * tl.load(SW))
    store_tile(C, c.to(tl.bfloat16), rm, rn, M, N, stride_cm)


SIGNATURE = {"A": "*fp8e4nv", "W": "*fp8e4nv", "SA": "*fp32", "SW": "*fp32", "C": "*bf16",
             "M": "i32", "N": "i32", "K": "i32",
             "stride_am": "i32", "stride_wn": "i32", "stride_cm": "i32",
             "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
# what a launch with 16-aligned pointers, sizes and strides specializes on
DIVISIBLE = tuple(range(11))


def run(a, w, sa, sw, BM=128, BN=128, BK=128, num_warps=8, num_stages=3):
    """C = (a @ w.T) * sa * sw on the GPU (torch tensors, a and w float8_e4m3fn)."""
    import torch
    return launch(fp8_gemm_kernel, a, w, (sa, sw), (), torch.bfloat16, BM, BN, BK,
                  num_warps, num_stages)
