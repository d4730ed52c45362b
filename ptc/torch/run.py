"""Where a ptc.torch op runs: on CPU tensors the reference interpreter or a target's CPU
emulator, on CUDA tensors the kernel built for the target. Builds are specialized per
dims (a schedule is searched for each problem size; the tuning database's plan is pinned
where it has an entry) and cached for the life of the op."""
from __future__ import annotations

import functools
from typing import Mapping

import torch

from ..diagnostics import CompileError
from ..runtime.binding import BoundCall, check_multiples
from ..runtime.errors import ArgumentError, LaunchError
from ..runtime.signature import signature_of
from ..sema import typed as T
from .tensors import host_view

DEFAULT_EMULATED_TARGET = "sm80"


class Runner:
    def __init__(self, path: str, typed: T.TypedKernel, target: str | None, backend: str,
                 shapes: Mapping[str, int], tiles: Mapping[str, int]):
        self.path = path
        self.typed = typed
        self.signature = signature_of(typed)
        self.target = target
        self.backend = backend
        self.shapes = dict(shapes)
        self.tiles = dict(tiles)
        self.builds: dict[tuple, object] = {}    # (kind, target, dims) -> build

    def specialized(self, static: Mapping[str, int]) -> "Runner":
        """This kernel checked again with compile-time dims `static` (`:` extents)."""
        from .. import driver

        shapes = {**self.shapes, **static}
        typed = driver.select_kernel(driver.check_file(self.path, shapes), self.typed.name)
        return Runner(self.path, typed, self.target, self.backend, shapes, self.tiles)

    def __call__(self, call: BoundCall, args, outputs: dict, device: torch.device) -> None:
        if device.type == "cpu":
            (self.interpret if self.backend == "interp" else self.emulate)(call, args, outputs)
        elif device.type == "cuda":
            self.launch(call, args, outputs, device)
        else:
            raise ArgumentError(f"ptc.torch runs on CPU and CUDA tensors, not on {device}",
                                hint="move the tensors to the CPU or to a CUDA device")

    # ---- CPU --------------------------------------------------------------------------
    def host_inputs(self, args) -> dict:
        return {p.name: host_view(a, p.dtype) if isinstance(p, T.TensorParam) else a
                for p, a in zip(self.typed.inputs, args)}

    def interpret(self, call: BoundCall, args, outputs: dict) -> None:
        from ..interp import run_kernel

        results = run_kernel(self.typed, self.host_inputs(args), shapes=call.dims,
                             tiles=self.tiles)
        for p in self.typed.outputs:
            host_view(outputs[p.name], p.dtype)[...] = results[p.name]

    def emulate(self, call: BoundCall, args, outputs: dict) -> None:
        from ..render.emulate import EmulationError

        target = self.target or DEFAULT_EMULATED_TARGET
        prepared, emulated = self.build(("emulate", target), call.dims, self.emulated)
        sig = prepared.signature
        check_multiples(sig, call.dims)                   # this build's `divides` lines
        inputs = self.host_inputs(args)
        tensors = [inputs[p.name] for p in sig.tensor_inputs] + \
                  [host_view(outputs[p.name], p.dtype) for p in sig.outputs]
        try:
            emulated.launch(tensors, call.scalars, [call.dims[d.name] for d in sig.dims],
                            what=sig.kernel)
        except EmulationError as exc:
            raise LaunchError(str(exc).splitlines()[0].rstrip(":")) from None

    def emulated(self, target: str, dims: Mapping[str, int]):
        from ..render.emulate import build_emulated

        prepared = self.prepare(target, dims)
        return prepared, build_emulated(prepared.source, backend=prepared.device)

    # ---- CUDA -------------------------------------------------------------------------
    def launch(self, call: BoundCall, args, outputs: dict, device: torch.device) -> None:
        """Queue the kernel on the tensors' current stream and return, as a torch op does:
        no copies, no waiting (the harness zeroes the outputs on that stream first)."""
        from ..runtime import build_prepared

        target = self.target or gpu_target(device.index or 0)
        kernel = self.build(("cuda", target), call.dims, lambda t, d: build_prepared(
            self.prepare(t, d), shapes=d))
        sig = kernel.signature
        check_multiples(sig, call.dims)                   # this build's `divides` lines
        given = dict(zip((p.name for p in self.typed.inputs), args))
        pointers = [(outputs if p.is_output else given)[p.name].data_ptr() for p in sig.tensors]
        kernel.enqueue(pointers, call.scalars, [call.dims[d.name] for d in sig.dims],
                       current_stream(device))

    # ---- builds, per dims -------------------------------------------------------------
    def build(self, kind: tuple, dims: Mapping[str, int], make):
        key = kind + tuple(sorted(dims.items()))
        if key not in self.builds:
            self.builds[key] = make(kind[1], dict(dims))
        return self.builds[key]

    def prepare(self, target: str, dims: Mapping[str, int]):
        """check -> schedule at `dims` (the tuning database's plan where it has one) ->
        render, as ptc.compile does."""
        from ..devices import get_device
        from ..runtime import prepare
        from ..tune import choose

        def run(schedule):
            return prepare(self.path, target, shapes=dims, tiles=self.tiles or None,
                           kernel=self.typed.name, schedule=schedule)

        choice = choose(self.path, self.typed, get_device(target), dims,
                        tiles=self.tiles or None, nvcc="")
        if choice.entry is None:
            return run(None)
        try:
            return run(choice.plan)
        except CompileError:          # the entry's plan no longer builds: the search's
            return run(None)


def current_stream(device: torch.device) -> int:
    """The handle of torch's current stream on `device` (0, the default stream, off CUDA:
    tests stand CPU tensors in for CUDA ones on a fake runtime)."""
    if device.type != "cuda":
        return 0
    return torch.cuda.current_stream(device).cuda_stream


@functools.lru_cache(maxsize=None)
def gpu_target(index: int = 0) -> str:
    """The ptc target of CUDA device `index` (sm80 code for sm8x, sm90 for sm90); asked once
    per device, not per launch."""
    from ..devices import builtin_targets

    major, minor = torch.cuda.get_device_capability(index)
    for name in (f"sm{major}{minor}", f"sm{major}0"):
        if name in builtin_targets():
            return name
    raise ArgumentError(f"ptc has no target for this GPU (compute capability {major}.{minor})",
                        hint="pass target= to ptc.torch.kernel")
