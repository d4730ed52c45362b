"""Independent NumPy formulas for the user-style kernel corpus in this folder.

Nothing here uses ptc: each reference is written from the math (einsum, softmax, tanh, ...)
in float64, from the inputs as they were rounded to their own dtypes. One entry per kernel:

    KERNELS[name] = Entry(make_inputs(shapes, rng) -> inputs by parameter name,
                          reference(inputs, shapes) -> outputs by name (float64 / int),
                          SHAPES: an odd, ragged shape (edge tiles everywhere),
                          TOLERANCE: the largest relative L2 error per output)

Not in the corpus: an int8 x int8 -> i32 GEMM. `i8` tiles load, store and convert, but `@`
refuses them until the integer tensor-core paths of issue 21 (docs/low-precision.md), and
takes only f16, bf16 or f32 tiles (so not i32 @ i32 either).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import ml_dtypes
import numpy as np

BF16 = ml_dtypes.bfloat16
F16 = np.float16
F32 = np.float32


def _tf32(x):
    """f32 rounded to TF32 from the format's definition: keep 10 mantissa bits, add half of
    the dropped part's weight first (ties away from zero); the bit pattern says it all."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x1000) & 0xFFFFE000).astype(np.uint32).view(np.float32)


def f64(a) -> np.ndarray:
    return np.asarray(a).astype(np.float64)


def randn(rng, shape, dtype, scale=1.0, shift=0.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale + shift).astype(dtype)


@dataclass(frozen=True)
class Entry:
    make_inputs: Callable[[Mapping[str, int], np.random.Generator], dict]
    reference: Callable[[Mapping[str, np.ndarray], Mapping[str, int]], dict]
    shapes: dict
    tolerance: dict          # output name -> relative L2 bound (0: exact)


# ---- the math -----------------------------------------------------------------------------
def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def silu(x):
    return x / (1.0 + np.exp(-x))


def softmax(s, axis=-1):
    s = s - s.max(axis=axis, keepdims=True)
    p = np.exp(s)
    return p / p.sum(axis=axis, keepdims=True)


def attention(q, k, v, bias=None):
    """softmax(q k^T / sqrt(D) + bias) v over [B, H, S, D] x [B, H, T, D]; bias [.., S, T]
    with -inf where a key is hidden."""
    s = np.einsum("bhsd,bhtd->bhst", f64(q), f64(k)) / np.sqrt(q.shape[-1])
    if bias is not None:
        s = s + bias
    return np.einsum("bhst,bhtd->bhsd", softmax(s), f64(v))


def mask_bias(visible):
    return np.where(visible, 0.0, -np.inf)


# ---- inputs and references, one per kernel --------------------------------------------------
def _gemm_inputs(dtype, bias=None):
    def make(d, rng):
        M, N, K = d["M"], d["N"], d["K"]
        out = {"A": randn(rng, (M, K), dtype), "B": randn(rng, (K, N), dtype, K ** -0.5)}
        if bias:
            out[bias] = randn(rng, (N,), dtype, 0.5)
        return out
    return make


def _attn_inputs(dtype, kv_heads="H", T="S", q_scale=1.5):
    def make(d, rng):
        B, H, S, D = d["B"], d["H"], d["S"], d["D"]
        G, Tn = d[kv_heads], d[T]
        return {"Q": randn(rng, (B, H, S, D), dtype, q_scale),
                "K": randn(rng, (B, G, Tn, D), dtype),
                "V": randn(rng, (B, G, Tn, D), dtype)}
    return make


def _sliding_inputs(d, rng):
    out = _attn_inputs(F16)(d, rng)
    out["window"] = np.int32(40)               # tokens each side
    return out


def _sliding_ref(i, d):
    S = d["S"]
    rows, cols = np.arange(S)[:, None], np.arange(S)[None, :]
    return {"O": attention(i["Q"], i["K"], i["V"], mask_bias(abs(rows - cols) <= int(i["window"])))}


def _alibi_inputs(d, rng):
    out = _attn_inputs(BF16)(d, rng)
    H = d["H"]
    out["slope"] = (2.0 ** (-8.0 * np.arange(1, H + 1) / H)).astype(F32)   # the paper's slopes
    return out


def _alibi_ref(i, d):
    S = d["S"]
    dist = np.arange(S)[:, None] - np.arange(S)[None, :]                     # i - j
    bias = -f64(i["slope"])[:, None, None] * dist[None] + mask_bias(dist >= 0)[None]
    return {"O": attention(i["Q"], i["K"], i["V"], bias[None])}


def _padmask_inputs(d, rng):
    out = _attn_inputs(F16)(d, rng)
    B, S = d["B"], d["S"]
    lengths = rng.integers(1, S + 1, B)
    lengths[0] = S                                  # one unpadded sequence
    keep = np.arange(S)[None, :] < lengths[:, None]
    keep[-1] = rng.random(S) < 0.6                  # and one with holes, not only a suffix
    keep[-1, 0] = True
    out["keep"] = keep
    return out


def _padmask_ref(i, d):
    bias = mask_bias(i["keep"])[:, None, None, :]   # [B, 1, 1, T]
    return {"O": attention(i["Q"], i["K"], i["V"], bias)}


def _gqa_ref(i, d):
    rep = d["H"] // d["G"]
    k, v = np.repeat(f64(i["K"]), rep, axis=1), np.repeat(f64(i["V"]), rep, axis=1)
    return {"O": attention(i["Q"], k, v)}


def _gqa_lse_ref(i, d):
    """O as gqa_attn's, and each query's log-sum-exp of its scaled scores."""
    rep = d["H"] // d["G"]
    k = np.repeat(f64(i["K"]), rep, axis=1)
    s = np.einsum("bhsd,bhtd->bhst", f64(i["Q"]), k) / np.sqrt(i["Q"].shape[-1])
    m = s.max(axis=-1)
    return {**_gqa_ref(i, d), "LSE": m + np.log(np.exp(s - m[..., None]).sum(axis=-1))}


def _gqa_bias_inputs(d, rng):
    """An additive bias [B, S, T] shared by the heads: N(0, 2) with a quarter of the keys
    of each query hidden by -inf (never all of them: key 0 stays)."""
    out = _attn_inputs(F16, kv_heads="G", T="T")(d, rng)
    shape = (d["B"], d["S"], d["T"])
    hidden = rng.random(shape) < 0.25
    hidden[..., 0] = False
    out["Bias"] = np.where(hidden, -np.inf, randn(rng, shape, F32, 2.0)).astype(F16)
    return out


def _gqa_bias_ref(i, d):
    rep = d["H"] // d["G"]
    k, v = np.repeat(f64(i["K"]), rep, axis=1), np.repeat(f64(i["V"]), rep, axis=1)
    return {"O": attention(i["Q"], k, v, f64(i["Bias"])[:, None])}


def _gqa_alibi_inputs(d, rng):
    out = _attn_inputs(F16, kv_heads="G", T="S")(d, rng)
    out["Slopes"] = (2.0 ** (-8.0 * np.arange(1, d["H"] + 1) / d["H"])).astype(F32)
    return out


def _gqa_alibi_ref(i, d):
    """Causal attention whose head h adds Slopes[h] * (n - m) to the score of (m, n)."""
    rep, S = d["H"] // d["G"], d["S"]
    k, v = np.repeat(f64(i["K"]), rep, axis=1), np.repeat(f64(i["V"]), rep, axis=1)
    dist = np.arange(S)[None, :] - np.arange(S)[:, None]
    bias = f64(i["Slopes"])[:, None, None] * dist + mask_bias(dist <= 0)
    return {"O": attention(i["Q"], k, v, bias[None])}


def _gqa_bwd_inputs(d, rng):
    """Q, K, V and dO, with the forward's LSE and Delta = rowsum(dO * O) computed here from
    them in float64 (what the forward and the preprocessing kernels would have stored)."""
    out = _attn_inputs(BF16, kv_heads="G", T="T")(d, rng)
    out["dO"] = randn(rng, out["Q"].shape, BF16)
    rep = d["H"] // d["G"]
    k, v = np.repeat(f64(out["K"]), rep, axis=1), np.repeat(f64(out["V"]), rep, axis=1)
    s = np.einsum("bhsd,bhtd->bhst", f64(out["Q"]), k) / np.sqrt(d["D"])
    lse = np.log(np.exp(s).sum(axis=-1))
    o = np.exp(s - lse[..., None]) @ v
    out["LSE"] = lse.astype(F32)
    out["Delta"] = (f64(out["dO"]) * o).sum(axis=-1).astype(F32)
    return out


def _gqa_bwd_dq_ref(i, d):
    """dQ = (P * (dO V^T - Delta)) K / sqrt(D), P = exp(Q K^T / sqrt(D) - LSE)."""
    rep, scale = d["H"] // d["G"], 1.0 / np.sqrt(d["D"])
    k, v = np.repeat(f64(i["K"]), rep, axis=1), np.repeat(f64(i["V"]), rep, axis=1)
    p = np.exp(np.einsum("bhsd,bhtd->bhst", f64(i["Q"]), k) * scale - f64(i["LSE"])[..., None])
    dp = np.einsum("bhsd,bhtd->bhst", f64(i["dO"]), v)
    return {"dQ": (p * (dp - f64(i["Delta"])[..., None])) @ k * scale}


def _gqa_bwd_dkdv_ref(i, d):
    """dV = sum over a group's heads of P^T dO, dK = the sum of dS^T Q / sqrt(D), with
    dS = P * (dO V^T - Delta)."""
    B, H, G, D = d["B"], d["H"], d["G"], d["D"]
    rep, scale = H // G, 1.0 / np.sqrt(D)
    k, v = np.repeat(f64(i["K"]), rep, axis=1), np.repeat(f64(i["V"]), rep, axis=1)
    q, do = f64(i["Q"]), f64(i["dO"])
    p = np.exp(np.einsum("bhsd,bhtd->bhst", q, k) * scale - f64(i["LSE"])[..., None])
    ds = p * (np.einsum("bhsd,bhtd->bhst", do, v) - f64(i["Delta"])[..., None])
    per_head = {"dK": np.einsum("bhst,bhsd->bhtd", ds, q) * scale,
                "dV": np.einsum("bhst,bhsd->bhtd", p, do)}
    return {n: x.reshape(B, G, rep, *x.shape[2:]).sum(axis=2) for n, x in per_head.items()}


def _gqa_causal_ref(i, d):
    rep, S = d["H"] // d["G"], d["S"]
    k, v = np.repeat(f64(i["K"]), rep, axis=1), np.repeat(f64(i["V"]), rep, axis=1)
    seen = np.arange(S)[:, None] >= np.arange(S)[None, :]
    return {"O": attention(i["Q"], k, v, mask_bias(seen))}


def _conv_pad_dilation(d) -> tuple[int, int]:
    """Padding 1, and the dilation whose output the shapes give (OH = H + 2 - 2 D)."""
    return 1, (d["H"] + 2 - d["OH"]) // 2


def _conv_inputs(d, rng):
    pad, dil = _conv_pad_dilation(d)
    return {"x": randn(rng, (d["N"], d["H"], d["W"], d["C"]), F16),
            "w": randn(rng, (3, 3, d["C"], d["CO"]), F16, (9 * d["C"]) ** -0.5),
            "P": np.int32(pad), "D": np.int32(dil)}


def _conv_ref(i, d):
    """Channels-last conv2d on a zero-padded copy of x (stride 1)."""
    x, w = f64(i["x"]), f64(i["w"])
    pad, dil = _conv_pad_dilation(d)
    N, H, W, C = x.shape
    OH, OW = d["OH"], d["OW"]
    padded = np.zeros((N, H + 2 * pad + 2 * dil, W + 2 * pad + 2 * dil, C))
    padded[:, pad:pad + H, pad:pad + W] = x
    y = np.zeros((N, OH, OW, w.shape[3]))
    for r in range(3):
        for s in range(3):
            y += padded[:, r * dil:r * dil + OH, s * dil:s * dil + OW] @ w[r, s]
    return {"y": y}


def _norm_inputs(dtype, *extra):
    def make(d, rng):
        M, N = d["M"], d["N"]
        out = {"X": randn(rng, (M, N), dtype, 2.0, 0.3)}
        for name in extra:
            if name == "eps":
                out["eps"] = F32(1e-5)
            elif name == "W":
                out["W"] = (1.0 + 0.1 * rng.standard_normal(N)).astype(dtype)
            elif name == "bias":
                out["bias"] = randn(rng, (N,), dtype, 0.1)
            elif name == "R":
                out["R"] = randn(rng, (M, N), dtype)
        return out
    return make


def _layernorm_ref(i, d):
    x = f64(i["X"])
    mu = x.mean(axis=1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
    return {"Y": (x - mu) / np.sqrt(var + float(i["eps"])) * f64(i["W"]) + f64(i["bias"])}


def _log_softmax_ref(i, d):
    x = f64(i["X"])
    m = x.max(axis=1, keepdims=True)
    return {"Y": x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))}


def _swiglu_inputs(d, rng):
    M, N, K = d["M"], d["N"], d["K"]
    return {"A": randn(rng, (M, K), F16), "B1": randn(rng, (K, N), F16, K ** -0.5),
            "B2": randn(rng, (K, N), F16, K ** -0.5)}


def _linear_attn_inputs(d, rng):
    B, H, T, D, E = d["B"], d["H"], d["T"], d["D"], d["E"]
    return {"K": randn(rng, (B, H, T, D), F16), "V": randn(rng, (B, H, T, E), F16)}


def _linear_attn_ref(i, d):
    k = f64(i["K"])
    phi = np.where(k > 0, k + 1.0, np.exp(k))       # elu + 1
    return {"S": np.einsum("bhtd,bhte->bhde", phi, f64(i["V"]))}


def _mlp2_inputs(d, rng):
    M, K, N, L = d["M"], d["K"], d["N"], d["L"]
    return {"X": randn(rng, (M, K), F16), "W1": randn(rng, (K, N), F16, K ** -0.5),
            "b1": randn(rng, (N,), F16, 0.2), "W2": randn(rng, (N, L), F16, N ** -0.5)}


def _mlp2_ref(i, d):
    h = np.maximum(f64(i["X"]) @ f64(i["W1"]) + f64(i["b1"]), 0.0)
    return {"Y": h @ f64(i["W2"])}


def _residual_inputs(d, rng):
    B, S, D = d["B"], d["S"], d["D"]
    return {"X": randn(rng, (B, S, D), BF16, 2.0), "gamma": randn(rng, (D,), BF16, 0.3)}


def _gemv_inputs(d, rng):
    M, K = d["M"], d["K"]
    return {"A": randn(rng, (M, K), F16), "x": randn(rng, (K,), F16, K ** -0.5)}


def _bmm_inputs(d, rng):
    Z, M, N, K = d["Z"], d["M"], d["N"], d["K"]
    return {"A": randn(rng, (Z, M, K), F16), "B": randn(rng, (K, N), F16, K ** -0.5)}


def _rope_inputs(d, rng):
    B, S, H, DH = d["B"], d["S"], d["H"], d["DH"]
    inv_freq = 10000.0 ** (-np.arange(DH) / DH)          # theta_i = 10000^(-2i/D), D = 2 DH
    angle = np.arange(S)[:, None] * inv_freq[None, :]
    return {"X": randn(rng, (B, S, H, 2 * DH), BF16).reshape(B, S, H, 2, DH),
            "cos_t": np.cos(angle).astype(F32), "sin_t": np.sin(angle).astype(F32)}


def _rope_ref(i, d):
    B, S, H, DH = d["B"], d["S"], d["H"], d["DH"]
    x = f64(i["X"]).reshape(B, S, H, 2 * DH)               # the [.., D] row as PyTorch has it
    c = np.concatenate([f64(i["cos_t"])] * 2, axis=-1)[None, :, None, :]
    s = np.concatenate([f64(i["sin_t"])] * 2, axis=-1)[None, :, None, :]
    rotate_half = np.concatenate([-x[..., DH:], x[..., :DH]], axis=-1)
    return {"Y": (x * c + rotate_half * s).reshape(B, S, H, 2, DH)}


def _argmax_inputs(d, rng):
    M, N = d["M"], d["N"]
    x = randn(rng, (M, N), F16, 3.0)
    x[1, :] = 0.0                            # a row of ties: the first column wins
    x[2, -1] = 100.0                         # the maximum in the last, ragged column tile
    x[3, 5] = x[3, N - 3] = 90.0             # a tie across two tiles
    return {"X": x}


def _argmax_ref(i, d):
    x = f64(i["X"])
    return {"idx": np.argmax(x, axis=1).astype(np.int64), "val": x.max(axis=1)}


def _rownorm_ref(i, d):
    x = f64(i["X"])
    return {"Y": x / np.sqrt((x * x).sum(axis=1, keepdims=True) + float(i["eps"]))}


def _fused_add_rmsnorm_ref(i, d):
    h = f64(i["X"]) + f64(i["R"])
    y = h / np.sqrt((h * h).mean(axis=1, keepdims=True) + float(i["eps"])) * f64(i["W"])
    return {"Y": y, "Rout": h}


def _cross_entropy_inputs(d, rng):
    M, N = d["M"], d["N"]
    target = rng.integers(0, N, M).astype(np.int32)
    target[0], target[1] = 0, N - 1          # the first and the last column
    return {"X": randn(rng, (M, N), F16, 2.0), "target": target}


def _cross_entropy_ref(i, d):
    x = f64(i["X"])
    m = x.max(axis=1)
    lse = m + np.log(np.exp(x - m[:, None]).sum(axis=1))
    return {"loss": lse - x[np.arange(x.shape[0]), i["target"]]}


def _w4a16_inputs(d, rng):
    """Packed words over the whole i32 range: half of them negative."""
    P, M, N, KP = d["P"], d["M"], d["N"], d["KP"]
    return {"A": randn(rng, (P, M, KP), F16, (P * KP) ** -0.5),
            "W": rng.integers(-2 ** 31, 2 ** 31, size=(KP, N)).astype(np.int32),
            "S": (rng.random(N) + 0.5).astype(F16)}


def _w4a16_ref(i, d):
    """Nibble p of a word is its bits 4p..4p+3 (two's complement), less 8."""
    words = i["W"].astype(np.int64)
    acc = sum(f64(i["A"][p]) @ (((words >> (4 * p)) & 15) - 8) for p in range(d["P"]))
    return {"C": acc * f64(i["S"])[None, :]}


def _moe_sorted_inputs(d, rng):
    """Rows sorted by expert in blocks of 64, a padding row here and there (token -1), a
    block with no expert (-1) and one past eids' end; dst a permutation of Y's rows, the
    rows past R outside."""
    T, K, N, E, EM, NB, R = (d[n] for n in ("T", "K", "N", "E", "EM", "NB", "R"))
    tok = rng.integers(0, T, EM).astype(np.int32)
    tok[::7] = -1
    eids = rng.integers(0, E, NB).astype(np.int32)
    eids[1] = -1
    dst = rng.permutation(EM).astype(np.int32)
    dst[dst >= R] = -1
    return {"X": randn(rng, (T, K), F16), "W": randn(rng, (E, K, N), F16, K ** -0.5),
            "tok": tok, "eids": eids, "dst": dst,
            "gate": rng.random(EM).astype(F32)}


def _moe_sorted_ref(i, d):
    BM = 64                       # the kernel's block of rows: one expert each
    X, W = f64(i["X"]), f64(i["W"])
    y = np.zeros((d["R"], d["N"]))
    for r in range(d["EM"]):
        t, e, out = i["tok"][r], (i["eids"][r // BM] if r // BM < d["NB"] else -1), i["dst"][r]
        if 0 <= t < d["T"] and 0 <= e < d["E"] and 0 <= out < d["R"]:
            y[out] = i["gate"][r] * (X[t] @ W[e])
    return {"Y": y}


def _varlen_inputs(d, rng):
    """Packed sequences, one of them empty; the last runs past the rows there are."""
    lens = rng.integers(1, 70, d["B"]).astype(np.int32)
    lens[2] = 0
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int32)
    return {"X": randn(rng, (d["TT"], d["D"]), BF16), "starts": starts, "lens": lens}


def _varlen_ref(i, d):
    X = f64(i["X"])
    return {"Y": np.stack([X[s:s + n].sum(axis=0) / max(n, 1)
                           for s, n in zip(i["starts"], i["lens"])])}


HALF = 1e-2      # an f16 / bf16 result (or one computed through f16 / bf16 values)
SINGLE = 1e-4    # an f32 result from exact f16 / bf16 / f32 inputs

def _flash_decode_inputs(d, rng):
    """A cache of NP pages of PAGE tokens; request b holds lens[b] tokens in distinct random
    pages (request 0 all MP * PAGE, the last one token), its table -1 past its last page."""
    B, HK, G, D, NP, PAGE, MP = (d[k] for k in ("B", "HK", "G", "D", "NP", "PAGE", "MP"))
    lens = rng.integers(1, MP * PAGE + 1, B)
    lens[0], lens[-1] = MP * PAGE, 1
    pages = rng.permutation(NP)[:B * MP].reshape(B, MP)
    used = (lens[:, None] + PAGE - 1) // PAGE
    table = np.where(np.arange(MP)[None, :] < used, pages, -1).astype(np.int32)
    return {"Q": randn(rng, (B, HK, G, D), BF16, 1.5), "K": randn(rng, (NP, PAGE, HK, D), BF16),
            "V": randn(rng, (NP, PAGE, HK, D), BF16), "table": table,
            "lens": lens.astype(np.int32)}


def _decode(q, k, v, D):
    """softmax(q k^T / sqrt(D)) v of each query row, and each row's log-sum-exp."""
    s = q @ k.T / np.sqrt(D)
    m = s.max(axis=1, keepdims=True)
    p = np.exp(s - m)
    return (p / p.sum(axis=1, keepdims=True)) @ v, (m + np.log(p.sum(axis=1, keepdims=True)))[:, 0]


def _flash_decode_ref(i, d):
    """Token t of request b is row t % PAGE of page table[b, t // PAGE]. O: attention over
    the request's lens[b] tokens; split s of SPLITS takes pages s * pps .. s * pps + pps - 1
    (pps = ceil(MP / SPLITS)): Opart its tokens' attention, LSE their log-sum-exp (zeros
    and -inf for a split past the request's end)."""
    q, k, v = f64(i["Q"]), f64(i["K"]), f64(i["V"])
    B, HK, G, D = q.shape
    PAGE, MP, S = k.shape[1], d["MP"], d["SPLITS"]
    pps = -(-MP // S)
    out = {"O": np.zeros((B, HK, G, D)), "Opart": np.zeros((B, HK, S, G, D)),
           "LSE": np.full((B, HK, S, G), -np.inf)}
    for b in range(B):
        n = int(i["lens"][b])
        for s in range(-1, S):          # -1: the whole request
            t = np.arange(n) if s < 0 else np.arange(s * pps * PAGE, min((s + 1) * pps * PAGE, n))
            if not len(t):
                continue
            pages, rows = i["table"][b, t // PAGE], t % PAGE
            for h in range(HK):
                o, lse = _decode(q[b, h], k[pages, rows, h], v[pages, rows, h], D)
                if s < 0:
                    out["O"][b, h] = o
                else:
                    out["Opart"][b, h, s], out["LSE"][b, h, s] = o, lse
    return out


KERNELS: dict[str, Entry] = {
    "gemm_bias_gelu": Entry(
        _gemm_inputs(F16, bias="bias"),
        lambda i, d: {"C": gelu_tanh(f64(i["A"]) @ f64(i["B"]) + f64(i["bias"]))},
        dict(M=200, N=136, K=72), {"C": HALF}),
    "gemm_silu": Entry(
        _gemm_inputs(BF16),
        lambda i, d: {"C": silu(f64(i["A"]) @ f64(i["B"]))},
        dict(M=150, N=100, K=88), {"C": HALF}),
    "linear_abt": Entry(
        lambda d, rng: {"X": randn(rng, (d["M"], d["K"]), F16),
                        "W": randn(rng, (d["N"], d["K"]), F16, d["K"] ** -0.5),
                        "b": randn(rng, (d["N"],), F16, 0.5)},
        lambda i, d: {"Y": f64(i["X"]) @ f64(i["W"]).T + f64(i["b"])},
        dict(M=130, N=72, K=104), {"Y": HALF}),
    "gqa_attn": Entry(
        _attn_inputs(BF16, kv_heads="G", T="T"), _gqa_ref,
        dict(B=1, H=4, G=2, S=100, T=90, D=64), {"O": HALF}),
    "gqa_packed_attn": Entry(      # a group of 4 query heads, packed 4 or 2 to a tile
        _attn_inputs(BF16, kv_heads="G", T="T"), _gqa_lse_ref,
        dict(B=1, H=8, G=2, S=50, T=90, D=64), {"O": HALF, "LSE": 1e-5}),
    "gqa_packed_alibi": Entry(     # a [GH] vector of slopes broadcast over each head's rows
        _gqa_alibi_inputs, _gqa_alibi_ref,
        dict(B=1, H=8, G=2, S=70, D=64), {"O": HALF}),
    "gqa_packed_bias": Entry(      # a [BM, BN] bias tile broadcast over the packed heads
        _gqa_bias_inputs, _gqa_bias_ref,
        dict(B=1, H=8, G=2, S=50, T=90, D=64), {"O": HALF}),
    "gqa_packed_bwd_dkdv": Entry(  # products over the packed heads' rows: rows(p).T @ ..
        _gqa_bwd_inputs, _gqa_bwd_dkdv_ref,
        dict(B=1, H=8, G=2, S=50, T=90, D=64), {"dK": HALF, "dV": HALF}),
    "gqa_packed_bwd_dq": Entry(    # row values loaded: the forward's LSE and Delta
        _gqa_bwd_inputs, _gqa_bwd_dq_ref,
        dict(B=1, H=8, G=2, S=50, T=90, D=64), {"dQ": HALF}),
    "gqa_packed_causal": Entry(    # a named causal mask over the packed heads
        _attn_inputs(F16, kv_heads="G", T="S"), _gqa_causal_ref,
        dict(B=1, H=8, G=2, S=70, D=64), {"O": HALF}),
    "conv2d_pixels": Entry(        # 2-D pixel tiles; padding 1, dilation 2: taps outside
        _conv_inputs, _conv_ref,
        dict(N=2, H=9, W=7, C=40, CO=72, R=3, S=3, OH=7, OW=5),
        {"y": HALF}),
    "sliding_window_attn": Entry(
        _sliding_inputs, _sliding_ref,
        dict(B=1, H=2, S=200, D=64), {"O": HALF}),
    "alibi_attn": Entry(
        _alibi_inputs, _alibi_ref,
        dict(B=1, H=2, S=100, D=64), {"O": HALF}),
    "padmask_attn": Entry(
        _padmask_inputs, _padmask_ref,
        dict(B=3, H=2, S=100, D=64), {"O": HALF}),
    "layernorm": Entry(
        _norm_inputs(F16, "W", "bias", "eps"), _layernorm_ref,
        dict(M=100, N=300), {"Y": HALF}),
    "log_softmax": Entry(
        lambda d, rng: {"X": randn(rng, (d["M"], d["N"]), BF16, 3.0)}, _log_softmax_ref,
        dict(M=50, N=300), {"Y": SINGLE}),
    "swiglu": Entry(
        _swiglu_inputs,
        lambda i, d: {"Hd": silu(f64(i["A"]) @ f64(i["B1"])) * (f64(i["A"]) @ f64(i["B2"]))},
        dict(M=200, N=136, K=72), {"Hd": HALF}),
    "colsum": Entry(
        lambda d, rng: {"X": randn(rng, (d["M"], d["N"]), F16, 1.0, 0.2)},
        lambda i, d: {"S": f64(i["X"]).sum(axis=0)},
        dict(M=300, N=200), {"S": SINGLE}),
    "linear_attn_state": Entry(
        _linear_attn_inputs, _linear_attn_ref,
        dict(B=1, H=2, T=100, D=64, E=40), {"S": 2e-3}),   # phi is rounded to f16
    "kv_state": Entry(
        lambda d, rng: {"K": randn(rng, (d["B"], d["H"], d["T"], d["D"]), BF16),
                        "V": randn(rng, (d["B"], d["H"], d["T"], d["E"]), BF16)},
        lambda i, d: {"S": np.einsum("bhtd,bhte->bhde", f64(i["K"]), f64(i["V"]))},
        dict(B=2, H=2, T=100, D=72, E=40), {"S": SINGLE}),
    "mlp2": Entry(
        _mlp2_inputs, _mlp2_ref,
        dict(M=200, K=72, N=136, L=40), {"Y": HALF}),
    "gemm_f32": Entry(
        _gemm_inputs(F32),
        lambda i, d: {"C": f64(i["A"]) @ f64(i["B"])},
        dict(M=100, N=72, K=40), {"C": SINGLE}),
    "gemm_tf32": Entry(
        _gemm_inputs(F32),
        lambda i, d: {"C": f64(_tf32(i["A"])) @ f64(_tf32(i["B"]))},
        dict(M=100, N=72, K=40), {"C": SINGLE}),
    "residual_silu": Entry(
        _residual_inputs,
        lambda i, d: {"Y": f64(i["X"]) + f64(i["gamma"]) * silu(f64(i["X"]))},
        dict(B=2, S=50, D=300), {"Y": HALF}),
    "gemv": Entry(
        _gemv_inputs,
        lambda i, d: {"y": f64(i["A"]) @ f64(i["x"])},
        dict(M=100, K=600), {"y": HALF}),
    "bmm_bcast": Entry(
        _bmm_inputs,
        lambda i, d: {"C": np.einsum("zmk,kn->zmn", f64(i["A"]), f64(i["B"]))},
        dict(Z=3, M=100, N=72, K=40), {"C": HALF}),
    "rope": Entry(
        _rope_inputs, _rope_ref,
        dict(B=1, S=50, H=3, DH=64), {"Y": HALF}),
    "row_argmax": Entry(
        _argmax_inputs, _argmax_ref,
        dict(M=50, N=1000), {"idx": 0.0, "val": 0.0}),
    "rownorm": Entry(
        _norm_inputs(F16, "eps"), _rownorm_ref,
        dict(M=50, N=600), {"Y": HALF}),
    "colsum_rowmax": Entry(
        lambda d, rng: {"X": randn(rng, (d["M"], d["N"]), F16, 1.0, 0.2)},
        lambda i, d: {"S": f64(i["X"]).sum(axis=0), "R": f64(i["X"]).max(axis=1)},
        dict(M=150, N=200), {"S": SINGLE, "R": 0.0}),
    "fused_add_rmsnorm": Entry(
        _norm_inputs(BF16, "R", "W", "eps"), _fused_add_rmsnorm_ref,
        dict(M=50, N=300), {"Y": HALF, "Rout": HALF}),
    "cross_entropy": Entry(
        _cross_entropy_inputs, _cross_entropy_ref,
        dict(M=50, N=1000), {"loss": SINGLE}),
    "w4a16": Entry(
        _w4a16_inputs, _w4a16_ref,
        dict(P=8, M=100, N=72, KP=40), {"C": HALF}),
    "moe_sorted": Entry(
        _moe_sorted_inputs, _moe_sorted_ref,
        dict(T=50, K=72, N=136, E=3, EM=200, NB=3, R=150), {"Y": HALF}),
    "varlen_mean": Entry(
        _varlen_inputs, _varlen_ref,
        dict(TT=300, D=100, B=7), {"Y": SINGLE}),
    # splits past a request's end (lse -inf), a split of two pages, the last of one page;
    # Opart is f32, but P is rounded to bf16 for its product with V (as in O)
    "flash_decode": Entry(
        _flash_decode_inputs, _flash_decode_ref,
        dict(B=3, HK=2, G=8, D=64, NP=21, PAGE=16, MP=7, SPLITS=3),
        {"O": HALF, "Opart": 2e-3, "LSE": SINGLE}),
}

