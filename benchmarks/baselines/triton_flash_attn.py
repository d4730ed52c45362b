"""FlashAttention forward in Triton (bf16 Q, K, V [B*H, S|T, D], online softmax in exp2,
f32 accumulate): the baseline for ptc's flash_attn sample. Nothing imports torch at
module level."""
import triton
import triton.language as tl


@triton.jit
def attn_fwd_kernel(Q, K, V, O, S, T, sm_scale,
                    BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr,
                    CAUSAL: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rd = tl.arange(0, D)
    q = tl.load(Q + bh * S * D + rm[:, None] * D + rd[None, :], mask=rm[:, None] < S, other=0.0)
    m_i = tl.full((BM,), float("-inf"), tl.float32)
    l_i = tl.zeros((BM,), tl.float32)
    acc = tl.zeros((BM, D), tl.float32)
    scale = sm_scale * 1.4426950408889634
    end = tl.minimum((pid_m + 1) * BM, T) if CAUSAL else T
    for start in range(0, end, BN):
        rn = start + tl.arange(0, BN)
        k = tl.load(K + bh * T * D + rn[None, :] * D + rd[:, None], mask=rn[None, :] < T,
                    other=0.0)
        s = tl.dot(q, k) * scale
        keep = rn[None, :] < T
        if CAUSAL:
            keep = keep & (rm[:, None] >= rn[None, :])
        s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(V + bh * T * D + rn[:, None] * D + rd[None, :], mask=rn[:, None] < T,
                    other=0.0)
        acc += tl.dot(p.to(tl.bfloat16), v)
        m_i = m_new
    acc = acc / l_i[:, None]
    tl.store(O + bh * S * D + rm[:, None] * D + rd[None, :], acc.to(tl.bfloat16),
             mask=rm[:, None] < S)


SIGNATURE = {"Q": "*bf16", "K": "*bf16", "V": "*bf16", "O": "*bf16", "S": "i32", "T": "i32",
             "sm_scale": "fp32", "BM": "constexpr", "BN": "constexpr", "D": "constexpr",
             "CAUSAL": "constexpr"}
DIVISIBLE = tuple(range(6))


def run(q, k, v, causal=False, BM=128, BN=64, num_warps=4, num_stages=2):
    """softmax(q k^T / sqrt(D)) v on the GPU; q, k, v torch bf16 [B, H, S|T, D]."""
    import torch
    B, H, S, D = q.shape
    T = k.shape[2]
    o = torch.empty_like(q)
    grid = (triton.cdiv(S, BM), B * H)
    attn_fwd_kernel[grid](q, k, v, o, S, T, D ** -0.5, BM=BM, BN=BN, D=D, CAUSAL=causal,
                          num_warps=num_warps, num_stages=num_stages)
    return o
