"""The layer's SwiGLU MLP with its backward pass in .pt (mlp_grad.pt), in f32 so that
torch.autograd.gradcheck can check it (ptc has no f64):

    Y = X + silu(X Wg^T) * (X Wu^T) @ Wd^T

    python examples/llama3/mlp.py [--backend interp|emulate]

runs gradcheck and compares the gradients with torch's float64 autograd of `torch_mlp`.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import torch

import ptc.torch

KERNELS = Path(__file__).resolve().with_name("mlp_grad.pt")


class PtcMLP:
    """Two differentiable ops: the gate/up projections with SwiGLU, and the down projection
    plus the residual; each backward kernel is a .pt kernel."""

    def __init__(self, backend: str = "interp"):
        def k(name):
            return ptc.torch.kernel(KERNELS, kernel=name, backend=backend)

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


def inputs(rows: int = 6, hidden: int = 8, ffn: int = 12, seed: int = 0):
    g = torch.Generator().manual_seed(seed)

    def t(*shape):
        return (torch.randn(*shape, generator=g) * shape[-1] ** -0.5).requires_grad_()

    return t(rows, hidden), t(ffn, hidden), t(ffn, hidden), t(hidden, ffn)


# f32 finite differences at eps=1e-3 carry ~1e-4 relative error (docs/torch.md)
GRADCHECK = dict(eps=1e-3, atol=1e-2, rtol=1e-2)


def check(backend: str = "interp") -> dict:
    import warnings

    mlp = PtcMLP(backend)
    args = inputs()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Input #", UserWarning)   # f32, not f64: see above
        passed = torch.autograd.gradcheck(mlp, args, **GRADCHECK)
    seed = torch.randn(args[0].shape, generator=torch.Generator().manual_seed(9))
    mlp(*args).backward(seed)
    ours = [a.grad.double() for a in args]
    wide = [a.detach().double().requires_grad_() for a in args]
    torch_mlp(*wide).backward(seed.double())
    return {"gradcheck": passed,
            "max_grad_difference": max((o - w.grad).abs().max().item()
                                       for o, w in zip(ours, wide))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("interp", "emulate"), default="interp")
    for name, value in check(parser.parse_args().backend).items():
        print(f"{name}: {value}")


if __name__ == "__main__":
    main()
