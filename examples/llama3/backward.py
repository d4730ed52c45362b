"""The layer's backward pass in .pt: the SwiGLU MLP (mlp_grad.pt), causal GQA attention
(attention_grad.pt), RMSNorm, the projections and RoPE (layer_grad.pt), in f32 so that
torch.autograd.gradcheck can check them (ptc has no f64), each paired with its backward
kernels by ptc.torch.autograd; and the whole layer (layer.py's) chained from them.

    python examples/llama3/backward.py [--backend interp|emulate]

runs gradcheck on each and compares the gradients with torch's float64 autograd of the
torch references `torch_mlp`, `torch_attention` and layer.py's `torch_layer`.
"""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import torch

import ptc.torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from layer import Config, PtcLayer, rope_tables, torch_layer  # noqa: E402  (beside this file)
# f32 finite differences at eps=1e-3 carry ~1e-4 relative error (docs/torch.md)
GRADCHECK = dict(eps=1e-3, atol=1e-2, rtol=1e-2)


def kernels(file: str, backend: str):
    return lambda name: ptc.torch.kernel(HERE / file, kernel=name, backend=backend)


class PtcMLP:
    """Y = X + silu(X Wg^T) * (X Wu^T) @ Wd^T: the gate/up projections with SwiGLU, and
    the down projection plus the residual, as two differentiable ops."""

    def __init__(self, backend: str = "interp"):
        k = kernels("mlp_grad.pt", backend)
        weight_grad = k("linear_bwd_w")            # dW = dY^T X, once per weight
        self.swiglu = ptc.torch.autograd(
            forward=k("swiglu_fwd"),
            backward=[k("swiglu_bwd_gates"), k("swiglu_bwd_x"),
                      (weight_grad, {"dY": "dG", "dW": "dWg"}),
                      (weight_grad, {"dY": "dU", "dW": "dWu"})],
            save=("X", "Wg", "Wu", "G", "U"), outputs=("Hd",))
        self.down = ptc.torch.autograd(
            forward=k("linear_residual_fwd"),
            backward=[k("linear_bwd_x"), weight_grad, k("copy")], save=("X", "W"))

    def __call__(self, x, wg, wu, wd):
        return self.down(self.swiglu(x, wg, wu), wd, x)


def torch_mlp(x, wg, wu, wd):
    return x + (torch.nn.functional.silu(x @ wg.T) * (x @ wu.T)) @ wd.T


class PtcAttention:
    """O = softmax(Q K^T / sqrt(D), causal) V per query head, on [B, S, heads, D]."""

    def __init__(self, backend: str = "interp"):
        k = kernels("attention_grad.pt", backend)
        self.op = ptc.torch.autograd(
            forward=k("attention_fwd"),
            backward=[k("attention_bwd_delta"), k("attention_bwd_dq"), k("attention_bwd_dkv")],
            save=("Q", "K", "V", "O", "L"), outputs=("O",))

    def __call__(self, q, k, v):
        return self.op(q, k, v)


def torch_attention(q, k, v):
    o = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True,
        enable_gqa=True)
    return o.transpose(1, 2)


class PtcTrainableLayer(PtcLayer):
    """layer.py's decoder layer in f32 with every step differentiable: RMSNorm, the
    projections, RoPE, attention, the residual projections and the MLP (PtcLayer's
    forward pass over these ops)."""

    NAMES = ("attn_norm", "wq", "wk", "wv", "wo", "mlp_norm", "w_gate", "w_up", "w_down")

    def __init__(self, cfg: Config, backend: str = "interp"):
        self.cfg = cfg
        k, m = kernels("layer_grad.pt", backend), kernels("mlp_grad.pt", backend)
        self.rmsnorm = ptc.torch.autograd(
            forward=k("rmsnorm_fwd"), backward=[k("rmsnorm_bwd_x"), k("rmsnorm_bwd_w")],
            save=("X", "W", "R"), outputs=("Y",))
        self.linear = ptc.torch.autograd(
            forward=k("linear_fwd"), backward=[m("linear_bwd_x"), m("linear_bwd_w")],
            save=("X", "W"))
        self.rope = ptc.torch.autograd(forward=k("rope_fwd"), backward=[k("rope_bwd")],
                                       save=("cos_t", "sin_t"))
        self.attention = PtcAttention(backend)
        mlp = PtcMLP(backend)
        self.swiglu, self.linear_residual = mlp.swiglu, mlp.down

    def __call__(self, x, cos, sin, *weights):
        return super().__call__(x, dict(zip(self.NAMES, weights)), cos, sin)


TINY = Config(hidden=8, heads=2, kv_heads=1, head_dim=4, ffn=12)


def layer_inputs(seq: int = 4):
    cfg = TINY
    q, kv = cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
    shapes = [(1, seq, cfg.hidden), (cfg.hidden,), (q, cfg.hidden), (kv, cfg.hidden),
              (kv, cfg.hidden), (cfg.hidden, q), (cfg.hidden,), (cfg.ffn, cfg.hidden),
              (cfg.ffn, cfg.hidden), (cfg.hidden, cfg.ffn)]
    args = random(*shapes, seed=1)
    with torch.no_grad():
        for norm in (args[1], args[6]):
            norm.add_(1.0)
    return args


def bind_tables(fn, seq: int = 4):
    """fn(x, cos, sin, *weights) as fn(x, *weights) with the RoPE tables of `seq`."""
    cos, sin = rope_tables(TINY, seq)
    return lambda x, *weights: fn(x, cos, sin, *weights)


def torch_trainable_layer(x, cos, sin, *weights):
    return torch_layer(TINY, x, dict(zip(PtcTrainableLayer.NAMES, weights)), cos, sin,
                       compute=x.dtype, store=x.dtype)


def random(*shapes, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return tuple((torch.randn(*s, generator=g) * s[-1] ** -0.25).requires_grad_()
                 for s in shapes)


CASES = {   # (ptc op, torch reference, small inputs)
    "mlp": (PtcMLP, torch_mlp, lambda: random((6, 8), (12, 8), (12, 8), (8, 12))),
    "attention": (PtcAttention, torch_attention,
                  lambda: random((1, 6, 4, 4), (1, 6, 2, 4), (1, 6, 2, 4))),
    "layer": (lambda backend: bind_tables(PtcTrainableLayer(TINY, backend)),
              bind_tables(torch_trainable_layer), layer_inputs),
}


def check(name: str, backend: str = "interp") -> dict:
    """gradcheck of the ptc op, and its gradients against float64 autograd of the
    reference (for an upstream gradient drawn at random)."""
    make, reference, draw = CASES[name]
    op, args = make(backend), draw()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Input #", UserWarning)   # f32, not f64: see above
        passed = torch.autograd.gradcheck(op, args, **GRADCHECK)
    out = op(*args)
    upstream = torch.randn(out.shape, generator=torch.Generator().manual_seed(9))
    out.backward(upstream)
    wide = [a.detach().double().requires_grad_() for a in args]
    reference(*wide).backward(upstream.double())
    # each gradient's largest error relative to its largest element (the layer's reach 77)
    return {"gradcheck": passed,
            "max_relative_grad_difference": max(
                ((a.grad.double() - w.grad).abs().max() / w.grad.abs().max()).item()
                for a, w in zip(args, wide))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("interp", "emulate"), default="interp")
    backend = parser.parse_args().backend
    for name in CASES:
        for key, value in check(name, backend).items():
            print(f"{name} {key}: {value}")


if __name__ == "__main__":
    main()
