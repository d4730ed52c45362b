"""A LLaMA-3-style decoder layer from ptc kernels (layer.pt), with a torch reference.

    python examples/llama3/layer.py [--backend interp|emulate]

runs both at small shapes on the CPU, eager and under torch.compile(fullgraph=True), and
prints the largest difference. The layer: RMSNorm, Q/K/V projections, RoPE, causal flash
attention with grouped-query heads, the output projection plus the residual, RMSNorm, and
the SwiGLU MLP (gate and up in one kernel, down plus the residual). Forward only: the
backward kernels are what's left (docs/torch.md).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import torch

import ptc.torch

KERNELS = Path(__file__).resolve().with_name("layer.pt")
sys.path.insert(0, str(KERNELS.parents[1]))
from compare import against, main  # noqa: E402  (examples/compare.py)


@dataclass(frozen=True)
class Config:
    hidden: int = 64
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 16
    ffn: int = 96
    eps: float = 1e-5
    theta: float = 500000.0      # LLaMA-3's RoPE base


def parameters(cfg: Config, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)

    def w(*shape, scale=None):
        scale = scale if scale is not None else shape[-1] ** -0.5
        return (torch.randn(*shape, generator=g) * scale).to(torch.bfloat16)

    q, kv = cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
    return {"attn_norm": (1 + 0.1 * torch.randn(cfg.hidden, generator=g)).to(torch.bfloat16),
            "wq": w(q, cfg.hidden), "wk": w(kv, cfg.hidden), "wv": w(kv, cfg.hidden),
            "wo": w(cfg.hidden, q),
            "mlp_norm": (1 + 0.1 * torch.randn(cfg.hidden, generator=g)).to(torch.bfloat16),
            "w_gate": w(cfg.ffn, cfg.hidden), "w_up": w(cfg.ffn, cfg.hidden),
            "w_down": w(cfg.hidden, cfg.ffn)}


def rope_tables(cfg: Config, seq: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin [S, D/2] of each position's angles (f32)."""
    inv = cfg.theta ** (-torch.arange(0, cfg.head_dim, 2, dtype=torch.float64) / cfg.head_dim)
    angles = torch.arange(seq, dtype=torch.float64)[:, None] * inv[None, :]
    return angles.cos().float(), angles.sin().float()


class PtcLayer:
    """The layer's forward pass, every step a ptc kernel (torch only reshapes, for free)."""

    def __init__(self, cfg: Config, backend: str = "interp"):
        self.cfg = cfg

        def k(name):
            return ptc.torch.kernel(KERNELS, kernel=name, backend=backend)

        self.rmsnorm, self.linear, self.linear_residual = (
            k("rmsnorm"), k("linear"), k("linear_residual"))
        self.swiglu, self.rope, self.attention = k("swiglu"), k("rope"), k("attention")

    def __call__(self, x: torch.Tensor, p: dict, cos: torch.Tensor, sin: torch.Tensor):
        cfg = self.cfg
        b, s, hidden = x.shape
        rows = x.reshape(b * s, hidden)
        h = self.rmsnorm(rows, p["attn_norm"], cfg.eps)
        half = cfg.head_dim // 2
        q = self.rope(self.linear(h, p["wq"]).view(b, s, cfg.heads, 2, half), cos, sin)
        k = self.rope(self.linear(h, p["wk"]).view(b, s, cfg.kv_heads, 2, half), cos, sin)
        v = self.linear(h, p["wv"]).view(b, s, cfg.kv_heads, cfg.head_dim)
        o = self.attention(q.view(b, s, cfg.heads, cfg.head_dim),
                           k.view(b, s, cfg.kv_heads, cfg.head_dim), v)
        rows = self.linear_residual(o.view(b * s, cfg.heads * cfg.head_dim), p["wo"], rows)
        h = self.rmsnorm(rows, p["mlp_norm"], cfg.eps)
        rows = self.linear_residual(self.swiglu(h, p["w_gate"], p["w_up"]), p["w_down"], rows)
        return rows.view(b, s, hidden)


def torch_layer(cfg: Config, x: torch.Tensor, p: dict, cos: torch.Tensor, sin: torch.Tensor,
                compute=torch.float32, store=torch.bfloat16):
    """The reference, written with torch alone: `compute` arithmetic, rounded to `store`
    where each step's result is stored (as the kernels store theirs)."""
    def bf(t):
        return t.to(store)

    def f(t):
        return t.to(compute)

    def norm(t, w):
        t = f(t)
        return bf(t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + cfg.eps) * f(w))

    def rope(t):                        # [B, S, heads, D], rotate half
        t1, t2 = f(t).chunk(2, dim=-1)
        c, s_ = f(cos)[None, :, None, :], f(sin)[None, :, None, :]
        return bf(torch.cat([t1 * c - t2 * s_, t2 * c + t1 * s_], dim=-1))

    b, s, hidden = x.shape
    h = norm(x, p["attn_norm"])
    q = rope(bf(f(h) @ f(p["wq"]).T).view(b, s, cfg.heads, cfg.head_dim))
    k = rope(bf(f(h) @ f(p["wk"]).T).view(b, s, cfg.kv_heads, cfg.head_dim))
    v = bf(f(h) @ f(p["wv"]).T).view(b, s, cfg.kv_heads, cfg.head_dim)
    o = torch.nn.functional.scaled_dot_product_attention(
        f(q).transpose(1, 2), f(k).transpose(1, 2), f(v).transpose(1, 2), is_causal=True,
        enable_gqa=True)
    o = bf(o).transpose(1, 2).reshape(b, s, cfg.heads * cfg.head_dim)
    x = bf(f(x) + f(o) @ f(p["wo"]).T)
    h = f(norm(x, p["mlp_norm"]))
    gate, up = h @ f(p["w_gate"]).T, h @ f(p["w_up"]).T
    mlp = bf(torch.nn.functional.silu(gate) * up)
    return bf(f(x) + f(mlp) @ f(p["w_down"]).T)


def compare(backend: str = "interp", batch: int = 2, seq: int = 24, seed: int = 0) -> dict:
    """The layer against the reference: max |difference|, eager and compiled."""
    cfg = Config()
    p = parameters(cfg, seed)
    x = torch.randn(batch, seq, cfg.hidden, generator=torch.Generator().manual_seed(seed + 1)
                    ).to(torch.bfloat16)
    cos, sin = rope_tables(cfg, seq)
    layer = PtcLayer(cfg, backend)
    return against(lambda x: layer(x, p, cos, sin), torch_layer(cfg, x, p, cos, sin), x)


if __name__ == "__main__":
    main(compare, __doc__)
