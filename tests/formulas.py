"""Independent NumPy formulas of the operators in samples/ -- the oracle the reference
interpreter is checked against. Nothing here uses ptc: each formula is written straight
from the math (einsum, softmax, ...) in float64, from the inputs as they were rounded to
their own dtypes (f16 / bf16 / f32).

`make_inputs(sample, shapes, rng)` draws realistic random inputs for a sample (named as its
file and kernel) and `REFERENCE[sample](inputs)` gives its outputs, by name, in float64.
"""
from __future__ import annotations

from typing import Callable, Mapping

import ml_dtypes
import numpy as np

BF16 = ml_dtypes.bfloat16
E4M3 = ml_dtypes.float8_e4m3fn
F16 = np.float16
F32 = np.float32


def f64(a) -> np.ndarray:
    return np.asarray(a).astype(np.float64)


# ---- the formulas --------------------------------------------------------------------
def gemm(A, B) -> np.ndarray:
    """C = A @ B."""
    return f64(A) @ f64(B)


def matmul_sum(A, B) -> tuple[np.ndarray, np.ndarray]:
    """C = A @ B and S = the row sums of C (of the exact product, not of C rounded)."""
    C = gemm(A, B)
    return C, C.sum(axis=1)


def attention(Q, K, V, causal: bool = False) -> np.ndarray:
    """softmax(Q K^T / sqrt(D)) V over [B, H, S, D] queries and [B, H, T, D] keys/values.

    causal: query i sees keys 0..i (top-left aligned).
    """
    q, k, v = f64(Q), f64(K), f64(V)
    scores = np.einsum("bhsd,bhtd->bhst", q, k) / np.sqrt(q.shape[-1])
    if causal:
        S, T = scores.shape[-2:]
        visible = np.arange(T)[None, :] <= np.arange(S)[:, None]
        scores = np.where(visible, scores, -np.inf)
    scores = scores - scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("bhst,bhtd->bhsd", p, v)


def fp8_attention(Q, K, Vt, q_descale, k_descale, v_descale) -> np.ndarray:
    """FlashAttention-3's FP8 forward, non-causal: softmax(q k^T / sqrt(D)) v for the
    e4m3 codes Q, K [B, H, S|T, D] and Vt [B, H, D, T] (V transposed) times their per-tensor
    descales, with the softmax's numerator P = exp(s - rowmax) rounded to e4m3 before it
    multiplies v (the kernel's `p as f8e4m3`) and its row sum taken before the rounding.

    The kernel rounds exp(s - m) with m the running max of the key blocks seen so far, then
    rescales by exp(m - rowmax); this formula rounds at the final row max. The two differ by
    e4m3 roundings (docs/low-precision.md, part 4b, gives the tolerance this sets).
    """
    q = f64(Q) * float(np.asarray(q_descale).reshape(-1)[0])
    k = f64(K) * float(np.asarray(k_descale).reshape(-1)[0])
    v = np.swapaxes(f64(Vt), -1, -2) * float(np.asarray(v_descale).reshape(-1)[0])
    scores = np.einsum("bhsd,bhtd->bhst", q, k) / np.sqrt(q.shape[-1])
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    p = e.astype(E4M3).astype(np.float64)        # round to nearest even; all in [0, 1]
    return np.einsum("bhst,bhtd->bhsd", p, v) / e.sum(axis=-1, keepdims=True)


def _per_head(a, H: int, axis: int) -> np.ndarray:
    """Expand a [.., G, ..] group axis to H heads: head h uses group h // (H // G)."""
    G = a.shape[axis]
    assert H % G == 0, f"H={H} is not a multiple of G={G}"
    return np.repeat(f64(a), H // G, axis=axis)


def mamba2_chunk_state(x, Bm, dt, dA_cs) -> np.ndarray:
    """mamba_ssm's chunk state (SSD), with the sequence laid out as [NC chunks, L]:

    states[b,c,h,p,n] = sum_l x[b,c,l,h,p] * exp(dA_cs[b,h,c,L-1] - dA_cs[b,h,c,l])
                              * dt[b,h,c,l] * Bm[b,c,l,h // (H//G),n]

    x: [B,NC,L,H,P], Bm: [B,NC,L,G,N], dt and dA_cs: [B,H,NC,L] -> states [B,NC,H,P,N].
    """
    H = x.shape[3]
    Bh = _per_head(Bm, H, axis=3)                            # [B,NC,L,H,N]
    cs = f64(dA_cs)
    weight = np.exp(cs[..., -1:] - cs) * f64(dt)             # [B,H,NC,L]
    return np.einsum("bclhp,bhcl,bclhn->bchpn", f64(x), weight, Bh)


def mamba2_chunk_scan(cb, x, dt, dA_cs, C, prev_states, D) -> np.ndarray:
    """mamba_ssm's chunk scan (SSD) output, per chunk c, head h (group g = h // (H//G)):

    out[l,p] = sum_{s<=l} cb[g,l,s] * exp(cs[l] - cs[s]) * dt[s] * x[s,p]
             + exp(cs[l]) * sum_n C[l,g,n] * prev_states[p,n]  +  D[h] * x[l,p]

    cb: [B,NC,G,L,L], x: [B,NC,L,H,P], dt and dA_cs (= cs): [B,H,NC,L], C: [B,NC,L,G,N],
    prev_states: [B,NC,H,P,N], D: [H] -> out [B,NC,L,H,P].
    """
    H = x.shape[3]
    L = x.shape[2]
    cbh = _per_head(cb, H, axis=2)                           # [B,NC,H,L,L]
    Ch = _per_head(C, H, axis=3)                             # [B,NC,L,H,N]
    cs = f64(dA_cs)                                          # [B,H,NC,L]
    causal = np.tril(np.ones((L, L), dtype=bool))            # [l, s]: s <= l
    seg = np.where(causal, cs[..., :, None] - cs[..., None, :], -np.inf)   # [B,H,NC,l,s]
    decay = np.exp(seg).transpose(0, 2, 1, 3, 4)             # [B,NC,H,l,s]
    dt_s = f64(dt).transpose(0, 2, 1, 3)[:, :, :, None, :]   # [B,NC,H,1,s]
    weight = cbh * decay * dt_s
    intra = np.einsum("bchls,bcshp->bclhp", weight, f64(x))
    carried = np.einsum("bclhn,bchpn->bclhp", Ch, f64(prev_states))
    carried *= np.exp(cs).transpose(0, 2, 3, 1)[..., None]   # exp(cs[l]) as [B,NC,L,H,1]
    skip = f64(D)[None, None, None, :, None] * f64(x)
    return intra + carried + skip


def gemm_chain(A, B, D) -> np.ndarray:
    """E = (A @ B) @ D."""
    return (f64(A) @ f64(B)) @ f64(D)


def rmsnorm(X, W, eps) -> np.ndarray:
    """Y = X / sqrt(mean(X^2, axis=-1) + eps) * W."""
    x = f64(X)
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + float(eps)) * f64(W)


def w8a8_gemm(A, W, sa, sw) -> np.ndarray:
    """C = (A @ W^T) * sa[:, None] * sw[None, :]: the integer product is exact (int64),
    then scaled per row and per column (SmoothQuant's dequantization)."""
    product = np.asarray(A, np.int64) @ np.asarray(W, np.int64).T
    return f64(product) * f64(sa)[:, None] * f64(sw)[None, :]


def w4a16_gemm(A, W, S, Z) -> np.ndarray:
    """C = A @ ((q - z) * s) over the full K = 8 * KP: the 4-bit weights q unpacked from W
    (nibble p of W[kp, n] is q[p * KP + kp, n]), z and s one row per group of 128 k."""
    M, P, KP = A.shape
    N = W.shape[1]
    words = np.asarray(W).astype(np.int64) & 0xFFFFFFFF         # the 32 bits, unsigned
    q = np.concatenate([(words >> (4 * p)) & 15 for p in range(P)], axis=0)   # [K, N]
    group = np.arange(P * KP) // 128
    z = np.asarray(Z).reshape(-1, N)[group]                      # [K, N]
    scale = f64(S).reshape(-1, N)[group]
    return f64(A).reshape(M, P * KP) @ ((q - z) * scale)


def fp8_gemm(A, W, sa, sw) -> np.ndarray:
    """C = (A @ W^T) * sa * sw: the e4m3 codes' values, one scale per tensor."""
    return (f64(A) @ f64(W).T) * f64(sa)[0] * f64(sw)[0]


def fp8_blockscaled_gemm(A, W, SA, SW) -> np.ndarray:
    """C[m, n] = sum over k blocks b of SA[m, b] * SW[n // 128, b] * (A[m, b] . W[n, b]),
    each block's product of the e4m3 values scaled (DeepSeek-V3's 1 x 128 activation and
    128 x 128 weight blocks; the last block may be short)."""
    a, w = f64(A), f64(W)
    N, K = w.shape
    C = np.zeros((a.shape[0], N))
    for b in range(0, K, 128):
        blk = b // 128
        part = a[:, b:b + 128] @ w[:, b:b + 128].T
        C += part * f64(SA)[:, blk, None] * f64(SW)[np.arange(N) // 128, blk][None, :]
    return C
def causal_conv1d(x, w, bias) -> np.ndarray:
    """Mamba2's causal depthwise conv1d with SiLU, channels last: x [B, L, C] left-padded
    with W - 1 zero rows, each output row the W rows ending at it weighted by w [C, W]."""
    B, L, C = x.shape
    W = w.shape[1]
    padded = np.concatenate([np.zeros((B, W - 1, C)), f64(x)], axis=1)
    out = f64(bias) + sum(padded[:, r:r + L, :] * f64(w)[:, r] for r in range(W))
    return out / (1.0 + np.exp(-out))


def conv2d(x, w, pad, dilation, stride=1) -> np.ndarray:
    """NHWC conv2d: x [N, H, W, C] zero-padded by `pad` on every side, filter w [R, S, C, CO]
    with its taps `dilation` apart, outputs every `stride`-th position (PyTorch's
    conv2d(x, w, stride, padding, dilation) in channels-last layout)."""
    N, H, W, C = x.shape
    R, S = w.shape[:2]
    OH = (H + 2 * pad - dilation * (R - 1) - 1) // stride + 1
    OW = (W + 2 * pad - dilation * (S - 1) - 1) // stride + 1
    padded = np.zeros((N, H + 2 * pad, W + 2 * pad, C))
    padded[:, pad:pad + H, pad:pad + W, :] = f64(x)
    out = np.zeros((N, OH, OW, w.shape[3]))
    for r in range(R):
        for s in range(S):
            h0, w0 = r * dilation, s * dilation
            window = padded[:, h0:h0 + stride * (OH - 1) + 1:stride,
                            w0:w0 + stride * (OW - 1) + 1:stride, :]
            out += window @ f64(w[r, s])
    return out


def depthwise_conv2d(x, w, pad, dilation) -> np.ndarray:
    """Channels-last depthwise conv2d, stride 1: channel c of x [N, H, W, C] (zero-padded by
    `pad`) filtered by w[:, :, c] of w [R, S, C], its taps `dilation` apart."""
    N, H, W, C = x.shape
    R, S = w.shape[:2]
    OH, OW = H + 2 * pad - dilation * (R - 1), W + 2 * pad - dilation * (S - 1)
    padded = np.zeros((N, H + 2 * pad, W + 2 * pad, C))
    padded[:, pad:pad + H, pad:pad + W, :] = f64(x)
    return sum(padded[:, r * dilation:r * dilation + OH, s * dilation:s * dilation + OW, :]
               * f64(w[r, s]) for r in range(R) for s in range(S))
def moe_gemm(X, W, src, dst, gate, R: int) -> np.ndarray:
    """The experts' products in the capacity layout: for every slot (e, c) whose source
    row 0 <= src[e, c] < T and destination row 0 <= dst[e, c] < R,
    Y[dst] = gate * X[src] @ W[e]; rows no slot names stay 0."""
    x, w = f64(X), f64(W)
    Y = np.zeros((R, w.shape[2]))
    for e in range(w.shape[0]):
        for c in range(src.shape[1]):
            s, d = int(src[e, c]), int(dst[e, c])
            if 0 <= s < x.shape[0] and 0 <= d < R:
                Y[d] = float(gate[e, c]) * (x[s] @ w[e])
    return Y


def paged_decode(Q, K, V, table, lens) -> np.ndarray:
    """Decoding attention per request b and KV head h over its lens[b] tokens, token t
    being row t % PAGE of page table[b, t // PAGE]: each of the G query heads of the
    group, softmax(q K^T / sqrt(D)) V."""
    q, k, v = f64(Q), f64(K), f64(V)
    B, HK, G, D = q.shape
    PAGE = K.shape[1]
    out = np.zeros((B, HK, G, D))
    for b in range(B):
        t = np.arange(lens[b])
        pages, rows = table[b, t // PAGE], t % PAGE
        for h in range(HK):
            s = q[b, h] @ k[pages, rows, h].T / np.sqrt(D)
            p = np.exp(s - s.max(axis=1, keepdims=True))
            out[b, h] = (p / p.sum(axis=1, keepdims=True)) @ v[pages, rows, h]
    return out


def _moe_rows(src, T: int) -> int:
    """R: every (token, k) pair has one slot, so Y has a row per filled slot."""
    return int(((src >= 0) & (src < T)).sum())


def softmax(X) -> np.ndarray:
    """Row-wise softmax."""
    x = f64(X)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# ---- outputs by sample ---------------------------------------------------------------
def _matmul_sum_outputs(i):
    C, S = matmul_sum(i["A"], i["B"])
    return {"C": C, "S": S}


REFERENCE: dict[str, Callable[[Mapping[str, np.ndarray]], dict[str, np.ndarray]]] = {
    "gemm": lambda i: {"C": gemm(i["A"], i["B"])},
    "matmul_sum": _matmul_sum_outputs,
    "flash_attn": lambda i: {"O": attention(i["Q"], i["K"], i["V"], causal=False)},
    "flash_attn_causal": lambda i: {"O": attention(i["Q"], i["K"], i["V"], causal=True)},
    "mamba2_chunk_state": lambda i: {
        "states": mamba2_chunk_state(i["x"], i["Bm"], i["dt"], i["dA_cs"])},
    "mamba2_chunk_scan": lambda i: {"out": mamba2_chunk_scan(
        i["cb"], i["x"], i["dt"], i["dA_cs"], i["C"], i["prev_states"], i["D"])},
    "gemm_chain": lambda i: {"E": gemm_chain(i["A"], i["B"], i["D"])},
    "rmsnorm": lambda i: {"Y": rmsnorm(i["X"], i["W"], i["eps"])},
    "softmax": lambda i: {"Y": softmax(i["X"])},
    "causal_conv1d": lambda i: {"y": causal_conv1d(i["x"], i["w"], i["bias"])},
    "conv2d": lambda i: {"y": conv2d(i["x"], i["w"], int(i["P"]), int(i["D"]))},
    "conv2d_stride2": lambda i: {"y": conv2d(i["x"], i["w"], int(i["P"]), int(i["D"]), 2)},
    "depthwise_conv2d": lambda i: {"y": depthwise_conv2d(i["x"], i["w"], int(i["P"]),
                                                         int(i["D"]))},
    "moe_gemm": lambda i: {"Y": moe_gemm(i["X"], i["W"], i["src"], i["dst"], i["gate"],
                                         _moe_rows(i["src"], i["X"].shape[0]))},
    "paged_decode": lambda i: {"O": paged_decode(i["Q"], i["K"], i["V"], i["table"],
                                                 i["lens"])},
    "w8a8_gemm": lambda i: {"C": w8a8_gemm(i["A"], i["W"], i["sa"], i["sw"])},
    "w4a16_gemm": lambda i: {"C": w4a16_gemm(i["A"], i["W"], i["S"], i["Z"])},
    "fp8_gemm": lambda i: {"C": fp8_gemm(i["A"], i["W"], i["sa"], i["sw"])},
    "fp8_blockscaled_gemm": lambda i: {
        "C": fp8_blockscaled_gemm(i["A"], i["W"], i["SA"], i["SW"])},
    "fp8_flash_attn": lambda i: {"O": fp8_attention(
        i["Q"], i["K"], i["Vt"], i["q_descale"], i["k_descale"], i["v_descale"])},
}

# The dtype of every output, as the kernels declare them.
OUTPUT_DTYPES: dict[str, dict[str, str]] = {
    "gemm": {"C": "f16"},
    "matmul_sum": {"C": "f16", "S": "f32"},
    "flash_attn": {"O": "bf16"},
    "flash_attn_causal": {"O": "bf16"},
    "mamba2_chunk_state": {"states": "f32"},
    "mamba2_chunk_scan": {"out": "f16"},
    "gemm_chain": {"E": "f16"},
    "rmsnorm": {"Y": "f16"},
    "softmax": {"Y": "f16"},
    "causal_conv1d": {"y": "f16"},
    "conv2d": {"y": "f16"},
    "conv2d_stride2": {"y": "f16"},
    "depthwise_conv2d": {"y": "f16"},
    "moe_gemm": {"Y": "f16"},
    "paged_decode": {"O": "bf16"},
    "w8a8_gemm": {"C": "f16"},
    "w4a16_gemm": {"C": "f16"},
    "fp8_gemm": {"C": "bf16"},
    "fp8_blockscaled_gemm": {"C": "bf16"},
    "fp8_flash_attn": {"O": "bf16"},
}


# ---- realistic random inputs ---------------------------------------------------------
def _randn(rng, shape, dtype, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def _mamba_dt_dA(rng, B, H, NC, L):
    """dt > 0 around 0.01..0.1 (as softplus(dt + dt_bias) comes out) and dA_cs = the
    cumulative sum, within each chunk, of dt * A with A < 0 per head (mamba's dA_cumsum).

    The heads' A are spread log-uniformly over [-16, -0.1] (mamba initializes A in
    [-16, -1]; trained long-memory heads go smaller), so a test has both a fast-decaying
    head and one whose every position still reaches the end of a chunk.
    """
    dt = np.exp(rng.uniform(np.log(0.01), np.log(0.1), (B, H, NC, L))).astype(F32)
    A = -np.geomspace(16.0, 0.1, H) if H > 1 else np.array([-1.0])
    dA_cs = np.cumsum(dt * A.astype(F32)[None, :, None, None], axis=-1, dtype=F32)
    return dt, dA_cs


def _conv_padding_dilation(d: Mapping[str, int], stride: int) -> tuple[int, int]:
    """A convolution's padding and dilation, read off its shapes: padding 1 (the issue's), and
    the dilation whose output size is the shapes' OH and OW (1 for OH = H at stride 1, 2 for
    OH = H - 2)."""
    for dilation in (1, 2, 3):
        sizes = [(size + 2 - dilation * (taps - 1) - 1) // stride + 1
                 for size, taps in ((d["H"], d["R"]), (d["W"], d["S"]))]
        if sizes == [d["OH"], d["OW"]]:
            return 1, dilation
    raise ValueError(f"no dilation gives OH, OW = {d['OH']}, {d['OW']} from {dict(d)}")


def make_inputs(sample: str, shapes: Mapping[str, int], rng: np.random.Generator) -> dict:
    """Random inputs, by parameter name, for `sample` at the dims `shapes`."""
    d = dict(shapes)
    if sample in ("gemm", "matmul_sum"):
        M, N, K = d["M"], d["N"], d["K"]
        return {"A": _randn(rng, (M, K), F16), "B": _randn(rng, (K, N), F16, K ** -0.5)}
    if sample in ("flash_attn", "flash_attn_causal"):
        B, H, S, D = d["B"], d["H"], d["S"], d["D"]
        T = d["T"] if sample == "flash_attn" else S
        return {"Q": _randn(rng, (B, H, S, D), BF16, 1.5),   # a little peakier than N(0, 1)
                "K": _randn(rng, (B, H, T, D), BF16),
                "V": _randn(rng, (B, H, T, D), BF16)}
    if sample == "mamba2_chunk_state":
        B, NC, L, H, G, P, N = (d[k] for k in ("B", "NC", "L", "H", "G", "P", "N"))
        dt, dA_cs = _mamba_dt_dA(rng, B, H, NC, L)
        return {"x": _randn(rng, (B, NC, L, H, P), F16),
                "Bm": _randn(rng, (B, NC, L, G, N), F16, N ** -0.25),
                "dt": dt, "dA_cs": dA_cs}
    if sample == "mamba2_chunk_scan":
        B, NC, L, H, G, P, N = (d[k] for k in ("B", "NC", "L", "H", "G", "P", "N"))
        dt, dA_cs = _mamba_dt_dA(rng, B, H, NC, L)
        Bm = _randn(rng, (B, NC, L, G, N), F16, N ** -0.25)
        C = _randn(rng, (B, NC, L, G, N), F16, N ** -0.25)
        cb = np.einsum("bclgn,bcsgn->bcgls", f64(C), f64(Bm)).astype(F16)   # C[l] . B[s]
        return {"cb": cb, "x": _randn(rng, (B, NC, L, H, P), F16), "dt": dt, "dA_cs": dA_cs,
                "C": C, "prev_states": _randn(rng, (B, NC, H, P, N), F16, 0.5),
                "D": rng.uniform(0.5, 1.5, H).astype(F32)}
    if sample == "gemm_chain":
        M, N, K, L = d["M"], d["N"], d["K"], d["L"]
        return {"A": _randn(rng, (M, K), F16),
                "B": _randn(rng, (K, N), F16, K ** -0.5),
                "D": _randn(rng, (N, L), F16, N ** -0.5)}
    if sample == "rmsnorm":
        M, N = d["M"], d["N"]
        return {"X": (rng.standard_normal((M, N)) * 2.0 + 0.3).astype(F16),
                "W": (1.0 + 0.1 * rng.standard_normal(N)).astype(F16),
                "eps": F32(1e-5)}
    if sample == "softmax":
        M, N = d["M"], d["N"]
        return {"X": _randn(rng, (M, N), F16, 3.0)}
    if sample == "causal_conv1d":
        B, L, C, W = d["B"], d["L"], d["C"], d["W"]
        return {"x": _randn(rng, (B, L, C), F16), "w": _randn(rng, (C, W), F32, W ** -0.5),
                "bias": _randn(rng, (C,), F32, 0.1)}
    if sample in ("conv2d", "conv2d_stride2"):
        N, H, W, C, CO, R, S = (d[k] for k in ("N", "H", "W", "C", "CO", "R", "S"))
        pad, dilation = _conv_padding_dilation(d, 2 if sample == "conv2d_stride2" else 1)
        return {"x": _randn(rng, (N, H, W, C), F16),
                "w": _randn(rng, (R, S, C, CO), F16, (R * S * C) ** -0.5),
                "P": np.int32(pad), "D": np.int32(dilation)}
    if sample == "depthwise_conv2d":
        N, H, W, C, R, S = (d[k] for k in ("N", "H", "W", "C", "R", "S"))
        pad, dilation = _conv_padding_dilation(d, 1)
        return {"x": _randn(rng, (N, H, W, C), F16), "w": _randn(rng, (R, S, C), F32, 1 / 3),
                "P": np.int32(pad), "D": np.int32(dilation)}
    if sample == "moe_gemm":
        return _moe_routing(rng, d["T"], d["K"], d["N"], d["E"], d["C"], d["R"])
    if sample == "paged_decode":
        return _paged_cache(rng, *(d[k] for k in ("B", "HK", "G", "D", "NP", "PAGE", "MP")))
    if sample == "w4a16_gemm":
        return _gptq_4bit(rng, d["M"], d["N"], d["P"], d["KP"], d["KG"])
    if sample == "w8a8_gemm":
        M, N, K = d["M"], d["N"], d["K"]
        return _smoothquant(rng, M, N, K)
    if sample == "fp8_gemm":
        return _fp8_per_tensor(rng, d["M"], d["N"], d["K"])
    if sample == "fp8_blockscaled_gemm":
        return _fp8_blockscaled(rng, d["M"], d["N"], d["K"], d["KB"], d["NB"])
    if sample == "fp8_flash_attn":
        B, H, S, T, D = d["B"], d["H"], d["S"], d["T"], d["D"]
        Q, qd = _e4m3_per_tensor(rng.standard_normal((B, H, S, D)) * 1.5)
        K, kd = _e4m3_per_tensor(rng.standard_normal((B, H, T, D)))
        Vt, vd = _e4m3_per_tensor(rng.standard_normal((B, H, D, T)))
        return {"Q": Q, "K": K, "Vt": Vt, "q_descale": qd, "k_descale": kd, "v_descale": vd}
    raise KeyError(f"no inputs for sample {sample!r}")


def _paged_cache(rng, B, HK, G, D, NP, PAGE, MP):
    """A cache of NP pages of PAGE tokens; request b holds lens[b] tokens (request 0 all
    MP * PAGE, the last 1, the others 1..MP * PAGE) in distinct random pages, its table
    -1 past its last page."""
    assert NP >= B * MP, f"NP = {NP} pages do not hold {B} requests of {MP} pages"
    lens = rng.integers(1, MP * PAGE + 1, B)
    lens[0], lens[-1] = MP * PAGE, 1 if B > 1 else lens[-1]
    pages = rng.permutation(NP)[:B * MP].reshape(B, MP)
    used = (lens[:, None] + PAGE - 1) // PAGE
    table = np.where(np.arange(MP)[None, :] < used, pages, -1).astype(np.int32)
    return {"Q": _randn(rng, (B, HK, G, D), BF16, 1.5),
            "K": _randn(rng, (NP, PAGE, HK, D), BF16), "V": _randn(rng, (NP, PAGE, HK, D), BF16),
            "table": table, "lens": lens.astype(np.int32)}


def _moe_routing(rng, T, K, N, E, C, R):
    """Each token routed to TOPK = R / T distinct experts (softmax weights), each expert's
    slots filled in a shuffled order up to its count, the rest empty: src -1, dst past R
    (src past T, dst -1: both ends of the ranges). Redrawn until no expert overflows C (every row of Y is
    written, so no output is left as the caller initialized it)."""
    topk = R // T
    assert topk * T == R and 0 < topk <= E, f"R = {R} is not T = {T} times a top-k <= E"
    for _ in range(100):
        experts = np.argsort(rng.random((T, E)), axis=1)[:, :topk]      # distinct per token
        if np.bincount(experts.ravel(), minlength=E).max() <= C:
            break
    else:
        raise ValueError(f"C = {C} slots do not hold {T * topk} rows over {E} experts")
    logits = rng.standard_normal((T, topk))
    weights = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    src = np.full((E, C), T + 3, np.int32)
    dst = np.full((E, C), -1, np.int32)
    gate = np.zeros((E, C), F32)
    for e in range(E):
        t, k = np.nonzero(experts == e)
        order = rng.permutation(len(t))
        t, k = t[order], k[order]
        src[e, :len(t)], dst[e, :len(t)] = t, t * topk + k
        gate[e, :len(t)] = weights[t, k]
    return {"X": _randn(rng, (T, K), F16), "W": _randn(rng, (E, K, N), F16, K ** -0.5),
            "src": src, "dst": dst, "gate": gate}


def _gptq_4bit(rng, M, N, P, KP, KG):
    """Weights N(0, 1/K) quantized to 4 bits per group of 128 k and column (asymmetric:
    a scale and a zero point from the group's min and max), packed eight to an i32 in
    blocks of KP (nibble p of W[kp, n] is q[p * KP + kp, n]); A viewed as [M, P, KP]."""
    K, G = P * KP, 128
    assert KG * G == KP, f"KG = KP / 128 is {KP / G}, not {KG}"
    w = rng.standard_normal((K, N)) / np.sqrt(K)
    groups = w.reshape(K // G, G, N)
    lo, hi = groups.min(axis=1), groups.max(axis=1)
    scale = ((hi - lo) / 15.0).astype(F16)
    zero = np.clip(np.rint(-lo / scale.astype(np.float64)), 0, 15).astype(np.uint8)
    q = np.clip(np.rint(groups / scale[:, None].astype(np.float64)) + zero[:, None], 0, 15)
    q = q.reshape(K, N).astype(np.int64)
    packed = sum(q[p * KP:(p + 1) * KP] << (4 * p) for p in range(P))     # [KP, N]
    packed = np.where(packed >= 1 << 31, packed - (1 << 32), packed).astype(np.int32)
    return {"A": _randn(rng, (M, P, KP), F16), "W": packed,
            "S": scale.reshape(P, KG, N), "Z": zero.reshape(P, KG, N)}


def _quantize(x, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric i8 quantization with one scale per slice along `axis` (absmax / 127)."""
    scale = np.maximum(np.abs(x).max(axis=axis), 1e-8) / 127.0
    q = np.clip(np.rint(x / np.expand_dims(scale, axis)), -127, 127).astype(np.int8)
    return q, scale.astype(F32)


def _smoothquant(rng, M, N, K):
    """Activations with a few outlier tokens and weights N(0, 1/K), quantized per token
    and per output channel as SmoothQuant's W8A8 layers are."""
    x, w = _linear_layer(rng, M, N, K)
    A, sa = _quantize(x, axis=1)
    W, sw = _quantize(w, axis=1)
    return {"A": A, "W": W, "sa": sa, "sw": sw}


E4M3 = ml_dtypes.float8_e4m3fn
E4M3_MAX = 448.0


def _to_e4m3(x, scale) -> np.ndarray:
    """x / scale rounded to e4m3 (scale = absmax / 448, so nothing saturates)."""
    return np.clip(x / scale, -E4M3_MAX, E4M3_MAX).astype(E4M3)


def _linear_layer(rng, M, N, K):
    """Activations with a few outlier tokens and weights N(0, 1/K) with per-channel spread,
    in float64 (the values an FP8 pipeline then quantizes)."""
    x = rng.standard_normal((M, K)) * np.exp(rng.uniform(-1.0, 1.0, (M, 1)))
    w = rng.standard_normal((N, K)) / np.sqrt(K) * np.exp(rng.uniform(-0.5, 0.5, (N, 1)))
    return x, w


def _fp8_per_tensor(rng, M, N, K):
    """One f32 scale per tensor (absmax / 448), the values rounded to e4m3."""
    x, w = _linear_layer(rng, M, N, K)
    sa, sw = (np.array([np.abs(t).max() / E4M3_MAX], F32) for t in (x, w))
    return {"A": _to_e4m3(x, f64(sa)[0]), "W": _to_e4m3(w, f64(sw)[0]), "sa": sa, "sw": sw}


def _blocks(n: int) -> int:
    return -(-n // 128)


def _fp8_blockscaled(rng, M, N, K, KB, NB):
    """DeepSeek-V3's quantization: A per row and 128 columns of K, W per 128 x 128 block,
    each scale the block's absmax / 448 in f32; the last blocks of K and N may be short."""
    assert (KB, NB) == (_blocks(K), _blocks(N)), f"KB, NB should be {_blocks(K)}, {_blocks(N)}"
    x, w = _linear_layer(rng, M, N, K)
    pad_k, pad_n = KB * 128 - K, NB * 128 - N
    xb = np.pad(np.abs(x), ((0, 0), (0, pad_k))).reshape(M, KB, 128)
    wb = np.pad(np.abs(w), ((0, pad_n), (0, pad_k))).reshape(NB, 128, KB, 128)
    SA = np.maximum(xb.max(axis=2), 1e-12) / E4M3_MAX                 # [M, KB]
    SW = np.maximum(wb.max(axis=(1, 3)), 1e-12) / E4M3_MAX            # [NB, KB]
    SA, SW = SA.astype(F32), SW.astype(F32)
    cols = np.arange(K) // 128
    A = _to_e4m3(x, f64(SA)[:, cols])
    W = _to_e4m3(w, f64(SW)[np.arange(N)[:, None] // 128, cols[None, :]])
    return {"A": A, "W": W, "SA": SA, "SW": SW}
def _e4m3_per_tensor(x) -> tuple[np.ndarray, np.ndarray]:
    """x as e4m3 codes with one descale for the tensor, as FA3's FP8 callers quantize:
    descale = absmax / 448 (e4m3's largest), codes = x / descale rounded to nearest even."""
    descale = max(float(np.abs(x).max()), 1e-8) / 448.0
    return (x / descale).astype(E4M3), np.array([descale], F32)


def rel_l2(got, want) -> float:
    """||got - want|| / ||want|| in float64 over the finite entries of `want`, whose
    infinities `got` must hold exactly (inf where they differ; NaN if got holds a NaN)."""
    got, want = f64(got), f64(want)
    finite = np.isfinite(want)
    if not np.array_equal(got[~finite], want[~finite]):
        return float("inf")
    got, want = got[finite], want[finite]
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))
