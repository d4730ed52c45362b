"""A .pt kernel as a torch.library custom op: its schema and fake (meta) implementation
come from the kernel's signature; every call is checked by the runtime's call checks
(ptc.runtime.binding) and runs on the tensors' device (ptc.torch.run)."""
from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import torch

from ..dims import describe
from ..runtime.binding import BoundCall, bind_call
from ..runtime.errors import ArgumentError
from ..runtime.signature import ScalarArg, Signature, signature_of
from .run import Runner
from .tensors import TORCH_DTYPES, arguments

NAMESPACE = "ptc"
BACKENDS = ("interp", "emulate")
_SCHEMA_TYPES = {"bool": "bool", "i32": "int"}       # every other scalar dtype is a float
_REGISTERED: dict[str, "Kernel"] = {}


def make_kernel(path, *, kernel, target, backend, shapes, tiles) -> "Kernel":
    from .. import driver

    if backend not in BACKENDS:
        raise ArgumentError(f"backend={backend!r} is not a CPU path of ptc.torch",
                            hint="backend='interp' (the reference interpreter) or 'emulate' "
                                 "(the target's CPU emulator)")
    shapes, tiles = dict(shapes or {}), dict(tiles or {})
    typed = driver.select_kernel(driver.check_file(path, shapes or None), kernel)
    key = hashlib.sha256(repr((Path(path).read_text(), typed.name, target, backend,
                               sorted(shapes.items()), sorted(tiles.items()))).encode())
    name = f"{typed.name}_{key.hexdigest()[:12]}"
    if name not in _REGISTERED:
        _REGISTERED[name] = Kernel(name, Runner(str(path), typed, target, backend, shapes,
                                                tiles))
    return _REGISTERED[name]


def schema(sig: Signature) -> str:
    params = ", ".join(f"{_SCHEMA_TYPES.get(p.dtype, 'float')} {p.name}"
                       if isinstance(p, ScalarArg) else f"Tensor {p.name}" for p in sig.inputs)
    outs = "Tensor" if len(sig.outputs) == 1 else \
        "(" + ", ".join("Tensor" for _ in sig.outputs) + ")"
    return f"({params}) -> {outs}"


class Kernel:
    """A ptc kernel callable on torch tensors: `k(*inputs)` gives its output tensor (a tuple
    when it has several), through the custom op `ptc::<name>` (`k.op`)."""

    def __init__(self, name: str, runner: Runner):
        self.name = name
        self.runner = runner                    # at the dims the kernel was checked with
        self.signature = signature_of(runner.typed)
        # the dims any call may choose: a compile-time dim (a `:` extent) is specialized
        self.free = replace(self.signature, dims=tuple(replace(d, static=None)
                                                       for d in self.signature.dims))
        self.static = self.free != self.signature
        self.runners: dict[tuple, Runner] = {}
        self.op = self.register(name)

    @property
    def qualname(self) -> str:
        return f"{NAMESPACE}::{self.name}"

    @property
    def inputs(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.signature.inputs)

    @property
    def outputs(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.signature.outputs)

    def __repr__(self) -> str:
        return f"<ptc.torch kernel {self.qualname}: {self.signature}>"

    def __call__(self, *args, **named):
        return self.op(*args, **named)

    def register(self, name: str):
        """A new custom op `ptc::name` running this kernel (autograd pairs register their
        own, so that a kernel's op keeps no autograd formula it was not given)."""
        op = torch.library.custom_op(f"{NAMESPACE}::{name}", self.run, mutates_args=(),
                                     schema=schema(self.signature))
        op.register_fake(self.fake)
        return op

    # ---- the implementations -------------------------------------------------------------
    def run(self, *args):
        runner, call = self.bind(args, fake=False)
        device = call_device(self.signature, args)
        # ptc's outputs start at zero: on CUDA the harness zeroes them on the launch's stream
        outputs = self.empty_outputs(call, device, zeroed=device.type != "cuda")
        runner(call, args, outputs, device)
        return self.result(outputs)

    def fake(self, *args):
        _, call = self.bind(args, fake=True)
        return self.result(self.empty_outputs(call, call_device(self.signature, args),
                                              zeroed=False))

    def bind(self, args, *, fake: bool) -> tuple[Runner, BoundCall]:
        """The runtime's checks of a call (names, dtypes, shapes, dims, contiguity), against
        the kernel specialized to the call's compile-time dims; and its runner."""
        values = arguments(args, fake)
        call = bind_call(self.free, self.runner.shapes, values, {}, None)
        if not self.static:                      # no compile-time dims: checked already
            return self.runner, call
        runner = self.specialized(call.dims)
        return runner, bind_call(runner.signature, runner.shapes, values, {}, None)

    def specialized(self, dims) -> Runner:
        """The runner of the kernel checked with the call's compile-time dims."""
        static = {d.name: dims[d.name] for d in self.signature.dims if d.static is not None}
        if all(d.static == dims[d.name] for d in self.signature.dims if d.static is not None):
            return self.runner
        key = tuple(sorted(static.items()))
        if key not in self.runners:
            self.runners[key] = self.runner.specialized(static)
        return self.runners[key]

    def empty_outputs(self, call: BoundCall, device, *, zeroed: bool) -> dict:
        make = torch.zeros if zeroed else torch.empty     # ptc's outputs start at zero
        return {b.param.name: make(b.shape, dtype=TORCH_DTYPES[b.param.dtype], device=device)
                for b in call.tensors if b.param.is_output}

    def result(self, outputs: dict):
        values = tuple(outputs[p.name] for p in self.signature.outputs)
        return values[0] if len(values) == 1 else values


def call_device(sig: Signature, args) -> torch.device:
    """The one device every tensor argument is on (ArgumentError naming the odd one)."""
    tensors = [(p, a) for p, a in zip(sig.inputs, args) if isinstance(a, torch.Tensor)]
    if not tensors:
        return torch.device("cpu")
    first, device = tensors[0][0], tensors[0][1].device
    for p, a in tensors[1:]:
        if a.device != device:
            raise ArgumentError(f"{describe(p)} is on {a.device}, but {first.name} is on "
                                f"{device}", hint="move every tensor argument to one device")
    return device
