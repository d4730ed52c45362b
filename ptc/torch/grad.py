"""ptc.torch.autograd: a forward kernel paired with backward kernels, all written in .pt,
as one differentiable custom op (torch.library's register_autograd). Values flow by name:
a backward kernel's input `dY` is the gradient of forward output `Y`, an input named in
`save` is that forward input or output, any other input is an earlier backward kernel's
output; a backward output `dX` is (added to) the gradient of forward input `X`. A step
`(kernel, {"param": "name"})` gives a kernel's parameters other names, so that one
kernel (a linear layer's weight gradient) serves several steps."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Mapping

import torch

from ..runtime.errors import ArgumentError
from .op import Kernel

_REGISTERED: dict[str, "Autograd"] = {}
_USE = "forward=ptc.torch.kernel(PATH, kernel=NAME), backward=[kernel, (kernel, {PARAM: NAME})]"


def grad_name(name: str) -> str:
    return "d" + name


@dataclass(frozen=True)
class Step:
    """One backward kernel and the names its parameters take in the backward pass."""

    kernel: Kernel
    rename: tuple[tuple[str, str], ...] = ()

    def name(self, param: str) -> str:
        return dict(self.rename).get(param, param)

    @property
    def inputs(self) -> tuple[str, ...]:
        return tuple(self.name(p) for p in self.kernel.inputs)

    @property
    def outputs(self) -> tuple[str, ...]:
        return tuple(self.name(p) for p in self.kernel.outputs)

    @property
    def label(self) -> str:
        return self.kernel.signature.kernel


def step_of(entry) -> Step:
    kernel, rename = entry if isinstance(entry, tuple) else (entry, {})
    if not isinstance(kernel, Kernel) or not isinstance(rename, Mapping):
        raise ArgumentError(f"a backward step is a ptc.torch.kernel(...) or (kernel, "
                            f"{{param: name}}), not {entry!r}", hint=_USE)
    params = set(kernel.inputs) | set(kernel.outputs)
    for param in rename:
        if param not in params:
            raise ArgumentError(f"backward kernel {kernel.signature.kernel} has no parameter "
                                f"{param} to rename", hint=str(kernel.signature))
    return Step(kernel, tuple(sorted(rename.items())))


def make_autograd(forward: Kernel, backward: list, save: tuple[str, ...],
                  outputs) -> "Autograd":
    if not isinstance(forward, Kernel):
        raise ArgumentError(f"forward= is a ptc.torch.kernel(...), not "
                            f"{type(forward).__name__}", hint=_USE)
    steps = [step_of(entry) for entry in backward]
    outputs = tuple(forward.outputs if outputs is None else outputs)
    check_pairing(forward, steps, save, outputs)
    key = hashlib.sha256(repr((forward.name, [(s.kernel.name, s.rename) for s in steps], save,
                               outputs)).encode()).hexdigest()[:12]
    name = f"{forward.name}_grad_{key}"
    if name not in _REGISTERED:
        _REGISTERED[name] = Autograd(name, forward, steps, save, outputs)
    return _REGISTERED[name]


def check_pairing(forward: Kernel, steps: list[Step], save, outputs) -> None:
    """Every name resolves: what each backward kernel reads is saved, a gradient of a
    forward output, or computed before; what it writes is a gradient or read later."""
    known = set(forward.inputs) | set(forward.outputs)
    for name in save:
        if name not in known:
            raise ArgumentError(f"save= names {name}, which is neither an input nor an output "
                                f"of {forward.signature.kernel}", hint=str(forward.signature))
    for name in outputs:
        if name not in forward.outputs:
            raise ArgumentError(f"outputs= names {name}, which is not an output of "
                                f"{forward.signature.kernel}", hint=str(forward.signature))
    available = set(save) | {grad_name(o) for o in forward.outputs}
    gradients = {grad_name(p.name) for p in forward.signature.tensor_inputs}
    for i, step in enumerate(steps):
        for name in step.inputs:
            if name not in available:
                raise ArgumentError(
                    f"backward kernel {step.label} reads {name}, which is not saved, "
                    f"not the gradient of a forward output and not an earlier backward "
                    f"kernel's output", hint=f"add it to save= (saved: "
                                             f"{', '.join(save) or 'none'}), or name a "
                                             f"gradient d<output> ({', '.join(forward.outputs)})")
        later = {n for s in steps[i + 1:] for n in s.inputs}
        for name in step.outputs:
            if name not in gradients and name not in later:
                raise ArgumentError(
                    f"backward kernel {step.label} writes {name}, which is neither "
                    f"the gradient of a forward tensor input nor read by a later backward "
                    f"kernel", hint="gradients are named d<input>: "
                                    + ", ".join(sorted(gradients)))
        available |= set(step.outputs)


class Autograd:
    """The paired operator: `f(*inputs)` returns the forward outputs named in `outputs`."""

    def __init__(self, name: str, forward: Kernel, steps: list[Step], save, outputs):
        self.name = name
        self.forward = forward
        self.steps = steps
        self.save = save
        self.outputs = outputs
        read = {n for s in steps for n in s.inputs}
        self.differentiable = tuple(o for o in forward.outputs if grad_name(o) in read)
        self.op = forward.register(name)
        self.op.register_autograd(self.backward, setup_context=self.setup)

    def __repr__(self) -> str:
        return (f"<ptc.torch autograd {self.op}: {self.forward.signature.kernel} backward by "
                + ", ".join(s.label for s in self.steps) + ">")

    def __call__(self, *args):
        result = self.op(*args)
        values = dict(zip(self.forward.outputs, result if isinstance(result, tuple)
                          else (result,)))
        picked = tuple(values[n] for n in self.outputs)
        return picked[0] if len(picked) == 1 else picked

    def setup(self, ctx, inputs, output) -> None:
        outs = output if isinstance(output, tuple) else (output,)
        values = {**dict(zip(self.forward.inputs, inputs)),
                  **dict(zip(self.forward.outputs, outs))}
        tensors = [n for n in self.save if isinstance(values[n], torch.Tensor)]
        ctx.save_for_backward(*(values[n] for n in tensors))
        ctx.ptc_tensors = tensors
        ctx.ptc_scalars = {n: values[n] for n in self.save if n not in tensors}
        ctx.mark_non_differentiable(*(t for n, t in zip(self.forward.outputs, outs)
                                      if n not in self.differentiable))

    def backward(self, ctx, *grads):
        values = {**dict(zip(ctx.ptc_tensors, ctx.saved_tensors)), **ctx.ptc_scalars}
        # kernels take contiguous tensors: a gradient may be an expanded view (sum's)
        values.update((grad_name(n), g.contiguous()) for n, g in zip(self.forward.outputs, grads)
                      if n in self.differentiable)
        gradients: dict[str, torch.Tensor] = {}
        for step in self.steps:
            result = step.kernel(*(values[n] for n in step.inputs))
            for name, t in zip(step.outputs, result if isinstance(result, tuple) else (result,)):
                values[name] = t
                gradients[name] = gradients[name] + t if name in gradients else t
        return tuple(gradients.get(grad_name(n)) for n in self.forward.inputs)
