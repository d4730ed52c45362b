"""A Mamba2 block from ptc kernels (block.pt and three samples), with a torch reference.

    python examples/mamba2/block.py [--backend interp|emulate]

runs both at small shapes on the CPU, eager and under torch.compile(fullgraph=True), and
prints the largest difference. The block (mamba_ssm's Mamba2, ngroups G): in_proj (its
z, x, B, C and dt parts as separate projections, so that no output needs slicing), the
causal depthwise conv1d with SiLU on x, B and C (depthwise: per part), the SSD scan in
chunks (dt and the chunk cumsum, C B^T per chunk, each chunk's state, the states passed
from chunk to chunk, the chunk scan with the D skip), the gated RMSNorm and out_proj.
The reference is the plain recurrence h_t = exp(dt_t A) h_{t-1} + dt_t x_t B_t^T,
y_t = h_t C_t + D x_t, step by step. Forward only.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

import ptc.torch

HERE = Path(__file__).resolve().parent
SAMPLES = HERE.parents[1] / "samples"
sys.path.insert(0, str(HERE.parent))
from compare import against, main  # noqa: E402  (examples/compare.py)


@dataclass(frozen=True)
class Config:
    d_model: int = 16
    heads: int = 4
    head_dim: int = 8           # P
    groups: int = 1             # G
    d_state: int = 16           # N
    chunk: int = 8              # L
    conv: int = 4               # W
    eps: float = 1e-5


def parameters(cfg: Config, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    inner, bc = cfg.heads * cfg.head_dim, cfg.groups * cfg.d_state

    def w(*shape):
        return (torch.randn(*shape, generator=g) * shape[-1] ** -0.5).half()

    def conv(c):
        return torch.randn(c, cfg.conv, generator=g) * 0.5, torch.randn(c, generator=g) * 0.1

    p = {"w_z": w(inner, cfg.d_model), "w_x": w(inner, cfg.d_model),
         "w_B": w(bc, cfg.d_model), "w_C": w(bc, cfg.d_model), "w_dt": w(cfg.heads, cfg.d_model),
         "dt_bias": torch.randn(cfg.heads, generator=g) * 0.5 - 1.0,
         "A_log": torch.rand(cfg.heads, generator=g) * 2.0,
         "D": torch.randn(cfg.heads, generator=g),
         "norm": (1 + 0.1 * torch.randn(inner, generator=g)).half(),
         "w_out": w(cfg.d_model, inner)}
    for part, c in (("x", inner), ("B", bc), ("C", bc)):
        p[f"conv_{part}"], p[f"conv_bias_{part}"] = conv(c)
    return p


class PtcMamba2:
    def __init__(self, cfg: Config, backend: str = "interp"):
        self.cfg = cfg

        def k(name, file=HERE / "block.pt"):
            return ptc.torch.kernel(file, kernel=name, backend=backend)

        self.linear, self.cumsum, self.cb = k("linear"), k("chunk_cumsum"), k("chunk_cb")
        self.passing, self.norm = k("state_passing"), k("gated_rmsnorm")
        self.conv = k("causal_conv1d", SAMPLES / "causal_conv1d.pt")
        self.state = k("mamba2_chunk_state", SAMPLES / "mamba2_chunk_state.pt")
        self.scan = k("mamba2_chunk_scan", SAMPLES / "mamba2_chunk_scan.pt")

    def __call__(self, u: torch.Tensor, p: dict) -> torch.Tensor:
        cfg = self.cfg
        b, t, d = u.shape
        nc, L, H, P, G, N = t // cfg.chunk, cfg.chunk, cfg.heads, cfg.head_dim, cfg.groups, \
            cfg.d_state
        rows = u.reshape(b * t, d)
        z = self.linear(rows, p["w_z"])

        def conv(part, channels):
            proj = self.linear(rows, p[f"w_{part}"]).view(b, t, channels)
            return self.conv(proj, p[f"conv_{part}"], p[f"conv_bias_{part}"])

        x = conv("x", H * P).view(b, nc, L, H, P)
        Bm = conv("B", G * N).view(b, nc, L, G, N)
        C = conv("C", G * N).view(b, nc, L, G, N)
        dt_raw = self.linear(rows, p["w_dt"]).view(b, nc, L, H)
        dt, dA_cs = self.cumsum(dt_raw, p["dt_bias"], p["A_log"])
        states = self.state(x, Bm, dt, dA_cs)
        prev = self.passing(states, dA_cs)
        y = self.scan(self.cb(C, Bm), x, dt, dA_cs, C, prev, p["D"])
        out = self.norm(y.view(b * t, H * P), z, p["norm"], cfg.eps)
        return self.linear(out, p["w_out"]).view(b, t, d)


def torch_mamba2(cfg: Config, u: torch.Tensor, p: dict) -> torch.Tensor:
    """The reference: torch alone, f32 arithmetic (f16 where ptc stores a projection or the
    conv's output), and the SSM as its recurrence, one position at a time."""
    def f(t):
        return t.float()

    b, t, d = u.shape
    H, P, G, N = cfg.heads, cfg.head_dim, cfg.groups, cfg.d_state
    proj = {k: (f(u) @ f(p[f"w_{k}"]).T).half() for k in ("z", "x", "B", "C", "dt")}

    def conv(part):
        x = f(proj[part]).transpose(1, 2)                              # [b, channels, t]
        y = F.conv1d(x, p[f"conv_{part}"][:, None, :], p[f"conv_bias_{part}"],
                     padding=cfg.conv - 1, groups=x.shape[1])[..., :t]
        return F.silu(y).transpose(1, 2).half()

    x = f(conv("x")).view(b, t, H, P)
    Bm, C = (f(conv(part)).view(b, t, G, N) for part in ("B", "C"))
    dt = F.softplus(f(proj["dt"]).view(b, t, H) + p["dt_bias"])
    A = -torch.exp(p["A_log"])
    heads_of = torch.arange(H) // (H // G)
    h = torch.zeros(b, H, P, N)
    ys = []
    for s in range(t):
        decay = torch.exp(dt[:, s] * A)[:, :, None, None]
        h = decay * h + (dt[:, s, :, None] * x[:, s])[..., None] * Bm[:, s, heads_of][:, :, None, :]
        ys.append((h * C[:, s, heads_of][:, :, None, :]).sum(-1) + p["D"][:, None] * x[:, s])
    y = torch.stack(ys, 1).reshape(b, t, H * P).half()
    z = f(proj["z"]).view(b, t, H * P)
    g = f(y) * F.silu(z)
    out = (g * torch.rsqrt(g.pow(2).mean(-1, keepdim=True) + cfg.eps) * f(p["norm"])).half()
    return (f(out) @ f(p["w_out"]).T).half()


def segment_sums(a: torch.Tensor) -> torch.Tensor:
    """[..., L] -> [..., L, L]: entry (i, j) the sum of a[j+1 .. i] for j <= i, -inf above."""
    cs = torch.cumsum(a, dim=-1)
    out = cs[..., :, None] - cs[..., None, :]
    keep = torch.tril(torch.ones(a.shape[-1], a.shape[-1], dtype=torch.bool, device=a.device))
    return out.masked_fill(~keep, -torch.inf)


def ssd_chunked(x, dt, A, Bm, C, chunk: int) -> torch.Tensor:
    """The SSM of torch_mamba2's recurrence in chunks (the Mamba2 paper's minimal SSD
    listing, f32): x [b, t, H, P], dt [b, t, H], A [H], Bm / C [b, t, H, N] (already per
    head). What torch users run, and what Inductor fuses: the baseline of
    benchmarks/layers.py."""
    b, t, H, P = x.shape
    nc = t // chunk
    X = (x * dt[..., None]).reshape(b, nc, chunk, H, P)
    Ad = (dt * A).reshape(b, nc, chunk, H).permute(0, 3, 1, 2)          # [b, H, c, l]
    Bc, Cc = (m.reshape(b, nc, chunk, H, -1) for m in (Bm, C))
    a_cs = torch.cumsum(Ad, dim=-1)
    decay = torch.exp(segment_sums(Ad))                                   # [b, H, c, l, s]
    y_diag = torch.einsum("bclhn,bcshn,bhcls,bcshp->bclhp", Cc, Bc, decay, X)
    to_end = torch.exp(a_cs[..., -1:] - a_cs)
    states = torch.einsum("bclhn,bhcl,bclhp->bchpn", Bc, to_end, X)
    states = torch.cat([torch.zeros_like(states[:, :1]), states], dim=1)
    passing = torch.exp(segment_sums(torch.nn.functional.pad(a_cs[..., -1], (1, 0))))
    states = torch.einsum("bhzc,bchpn->bzhpn", passing, states)[:, :-1]
    y_off = torch.einsum("bclhn,bchpn,bhcl->bclhp", Cc, states, torch.exp(a_cs))
    return (y_diag + y_off).reshape(b, t, H, P)


def torch_mamba2_chunked(cfg: Config, u: torch.Tensor, p: dict,
                         compute=torch.float32) -> torch.Tensor:
    """torch_mamba2 with the SSM in chunks (ssd_chunked) instead of one position at a time:
    the same function, written as a PyTorch user would for speed (`compute`: the dtype of
    the projections and the convolution; the SSM in f32)."""
    def f(t):
        return t.to(compute)

    b, t, d = u.shape
    H, P, G, N = cfg.heads, cfg.head_dim, cfg.groups, cfg.d_state
    proj = {k: (f(u) @ f(p[f"w_{k}"]).T).half() for k in ("z", "x", "B", "C", "dt")}

    def conv(part):
        x = f(proj[part]).transpose(1, 2)
        y = F.conv1d(x, f(p[f"conv_{part}"])[:, None, :], f(p[f"conv_bias_{part}"]),
                     padding=cfg.conv - 1, groups=x.shape[1])[..., :t]
        return F.silu(y).transpose(1, 2).half()

    x = conv("x").float().view(b, t, H, P)
    heads_of = torch.arange(H, device=u.device) // (H // G)
    Bm, C = (conv(part).float().view(b, t, G, N)[:, :, heads_of] for part in ("B", "C"))
    dt = F.softplus(proj["dt"].float().view(b, t, H) + p["dt_bias"])
    y = ssd_chunked(x, dt, -torch.exp(p["A_log"]), Bm, C, cfg.chunk)
    y = (y + p["D"][:, None] * x).reshape(b, t, H * P).half()
    g = y.float() * F.silu(proj["z"].float().view(b, t, H * P))
    out = (g * torch.rsqrt(g.pow(2).mean(-1, keepdim=True) + cfg.eps) * p["norm"].float()).half()
    return (f(out) @ f(p["w_out"]).T).half()


def compare(backend: str = "interp", batch: int = 2, chunks: int = 3, seed: int = 0) -> dict:
    cfg = Config()
    p = parameters(cfg, seed)
    u = torch.randn(batch, chunks * cfg.chunk, cfg.d_model,
                    generator=torch.Generator().manual_seed(seed + 1)).half()
    block = PtcMamba2(cfg, backend)
    return against(lambda u: block(u, p), torch_mamba2(cfg, u, p), u)


if __name__ == "__main__":
    main(compare, __doc__)
