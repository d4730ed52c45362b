"""DeepSeek-V3's block-scaled FP8 GEMM in Triton (the per-k-block scaling of DeepSeek-V3's
inference kernel, written here for ptc's layouts): A e4m3 [M, K] with a scale per row and
128 k (SA [K/128, M], transposed as samples/fp8_blockscaled_gemm.pt takes it), W e4m3 [N, K]
with a scale per 128 x 128 block (SW [N/128, K/128]); each k tile's product is scaled and
added to the f32 accumulator; bf16 out. The baseline of ptc's sample main loop
(benchmarks/mainloop.py, ahead of time, no GPU). A k tile lies in one scale block (BK
divides 128) and an n tile in one weight block (BN divides 128), as in ptc's sample, so the
weight scale is one value per tile. Nothing imports torch at module level."""
import triton
import triton.language as tl

from linear_tiles import launch, load_tiles, store_tile, tile_pointers


@triton.jit
def fp8_blockscaled_gemm_kernel(A, W, SA, SW, C, M, N, K, KB, stride_am, stride_wn,
                                stride_cm, BM: tl.constexpr, BN: tl.constexpr,
                                BK: tl.constexpr):
    rm, rn, rk, a_ptr, w_ptr = tile_pointers(A, W, stride_am, stride_wn, BM, BN, BK)
    sw_row = SW + (tl.program_id(1) * BN // 128) * KB
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        g = k * BK // 128                                       # the scale block
        a, w = load_tiles(a_ptr, w_ptr, rm, rn, rk, k, M, N, K, BK)
        sa = tl.load(SA + g * M + rm, mask=rm < M, other=0.0)
        sw = tl.load(sw_row + g)
        acc += tl.dot(a, w) * (sa[:, None] * sw)                # promoted to f32 per block
        a_ptr += BK
        w_ptr += BK
    store_tile(C, acc.to(tl.bfloat16), rm, rn, M, N, stride_cm)


SIGNATURE = {"A": "*fp8e4nv", "W": "*fp8e4nv", "SA": "*fp32", "SW": "*fp32", "C": "*bf16",
             "M": "i32", "N": "i32", "K": "i32", "KB": "i32",
             "stride_am": "i32", "stride_wn": "i32", "stride_cm": "i32",
             "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
# what a launch with 16-aligned pointers, sizes and strides specializes on
DIVISIBLE = tuple(range(12))


def run(a, w, sa, sw, BM=128, BN=128, BK=128, num_warps=8, num_stages=3):
    """The block-scaled product on the GPU (torch tensors: a, w float8_e4m3fn; sa [K/128, M],
    sw [N/128, K/128] float32)."""
    import torch
    return launch(fp8_blockscaled_gemm_kernel, a, w, (sa, sw), (sw.shape[1],),
                  torch.bfloat16, BM, BN, BK, num_warps, num_stages)
