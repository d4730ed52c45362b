"""ptc kernels as PyTorch operators (issue 23; docs/torch.md).

    import ptc.torch
    rmsnorm = ptc.torch.kernel("samples/rmsnorm.pt")       # a torch.library custom op
    y = rmsnorm(x, w, 1e-6)                                # eager, or inside torch.compile

`import ptc.torch` does not import torch: `kernel` and `autograd` do, on first use, so ptc
itself needs no torch (it is the optional extra `ptc[torch]`).
"""
from __future__ import annotations

__all__ = ["kernel", "autograd"]


def kernel(path, *, kernel: str | None = None, target: str | None = None,
           backend: str = "interp", shapes=None, tiles=None):
    """Kernel `kernel` (default: the only one) of the .pt file at `path` as the custom op
    `ptc::<kernel>_<hash>`. On CPU tensors it runs the reference interpreter
    (`backend="interp"`) or the kernel rendered for `target` on that target's CPU emulator
    (`backend="emulate"`, target default sm80); on CUDA tensors the kernel built for
    `target` (default: the GPU's). `shapes` gives dims no input has; `tiles` pins tile
    sizes. Raises CompileError subclasses (located in the .pt file) as ptc.compile does."""
    need_torch()
    from .op import make_kernel

    return make_kernel(path, kernel=kernel, target=target, backend=backend, shapes=shapes,
                       tiles=tiles)


def autograd(*, forward, backward, save=(), outputs=None):
    """A differentiable operator: `forward` (a ptc.torch.kernel) paired with the kernels of
    `backward` (a list, run in order). `save` names the forward inputs and outputs kept
    for backward; a backward kernel's input `dY` is the gradient of forward output `Y`, an
    input named in `save` is that saved value, any other input is an earlier backward
    kernel's output; its output `dX` is (added to) the gradient of forward input `X`.
    `outputs` names the forward outputs the operator returns (default: all)."""
    need_torch()
    from .grad import make_autograd

    return make_autograd(forward, list(backward), tuple(save), outputs)


MINIMUM = (2, 4)      # torch.library.custom_op and register_autograd


def need_torch() -> None:
    """A RuntimeFailure saying how to get torch, where it is missing or too old."""
    from ..runtime.errors import RuntimeFailure

    try:
        import torch
    except ImportError:
        raise RuntimeFailure("ptc.torch needs PyTorch, which is not installed",
                             hint="pip install 'ptc[torch]' (or `make torch`)") from None
    release = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2])
    if release < MINIMUM:
        raise RuntimeFailure(f"ptc.torch needs PyTorch {MINIMUM[0]}.{MINIMUM[1]} or later "
                             f"(torch.library.custom_op), not {torch.__version__}",
                             hint="pip install 'ptc[torch]'")
