"""FlashAttention forward with FP8 operands in Triton (FA3-FP8's recipe, as
samples/fp8_flash_attn.pt computes it): Q and K e4m3 [B*H, S|T, D], V transposed e4m3
[B*H, D, T], one f32 descale per tensor, f32 scores and accumulator, P rounded to e4m3
for the second product, bf16 out. The baseline of the sample's main loop
(benchmarks/mainloop.py, ahead of time, no GPU). Nothing imports torch at module level."""
import triton
import triton.language as tl


@triton.jit
def fp8_attn_fwd_kernel(Q, K, Vt, O, QD, KD, VD, S, T,
                        BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rd = tl.arange(0, D)
    q = tl.load(Q + bh * S * D + rm[:, None] * D + rd[None, :], mask=rm[:, None] < S,
                other=0.0)
    scale = tl.load(QD) * tl.load(KD) * (1.0 / tl.sqrt(D * 1.0)) * 1.4426950408889634
    m_i = tl.full((BM,), float("-inf"), tl.float32)
    l_i = tl.zeros((BM,), tl.float32)
    acc = tl.zeros((BM, D), tl.float32)
    for start in range(0, T, BN):
        rn = start + tl.arange(0, BN)
        k = tl.load(K + bh * T * D + rn[None, :] * D + rd[:, None], mask=rn[None, :] < T,
                    other=0.0)                                        # [D, BN] view of K^T
        s = tl.dot(q, k) * scale                                     # e4m3 x e4m3 -> f32
        s = tl.where(rn[None, :] < T, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(Vt + bh * D * T + rd[None, :] * T + rn[:, None], mask=rn[:, None] < T,
                    other=0.0)                                        # [BN, D] view of Vt^T
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float8e4nv), v)
        m_i = m_new
    acc = acc * (tl.load(VD) / l_i[:, None])
    tl.store(O + bh * S * D + rm[:, None] * D + rd[None, :], acc.to(tl.bfloat16),
             mask=rm[:, None] < S)


SIGNATURE = {"Q": "*fp8e4nv", "K": "*fp8e4nv", "Vt": "*fp8e4nv", "O": "*bf16",
             "QD": "*fp32", "KD": "*fp32", "VD": "*fp32", "S": "i32", "T": "i32",
             "BM": "constexpr", "BN": "constexpr", "D": "constexpr"}
# what a launch with 16-aligned pointers and sizes specializes on
DIVISIBLE = tuple(range(9))
