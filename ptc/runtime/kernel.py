"""CompiledKernel: a built kernel that Python calls.

    k = ptc.compile("samples/gemm.pt", target="sm80")
    out = k(A, B)                 # NumPy in, NumPy out: {"C": array}
    out = k(A=a_gpu, B=b_gpu)     # torch/CuPy device arrays: no copies; outputs are
                                  # DeviceArrays, or pass them: out={"C": c_gpu}
    t = k.time(A, B)              # Timing: per-run milliseconds, median

Every argument is checked against the signature (ptc.runtime.binding) before anything
touches CUDA; a problem is an ArgumentError naming the parameter. Outputs start at zero
(ptc's semantics; atomic_add relies on it): the runtime zeroes them before every launch,
`out=` arrays included.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..interp import NUMPY_DTYPES
from . import arrays as A
from .binding import BoundCall, bind_call, nbytes_of
from .build import LIBRARY, BuildResult, sass
from .library import HarnessLibrary
from .errors import ArgumentError, BuildError, NoDevice
from .signature import Signature
from .toolchains import toolchain


@dataclass(frozen=True)
class Timing:
    ms: tuple[float, ...]        # each timed run, in milliseconds
    warmup: int
    flushed: bool = False        # the L2 cache was flushed before every timed run

    @property
    def median_ms(self) -> float:
        return statistics.median(self.ms)

    @property
    def min_ms(self) -> float:
        return min(self.ms)

    @property
    def mean_ms(self) -> float:
        return statistics.fmean(self.ms)


class CompiledKernel:
    def __init__(self, directory: str | Path, signature: Signature, *, arch: str = "",
                 target: str = "", plans=(), build: BuildResult | None = None,
                 shapes: Mapping[str, int] | None = None, backend: str = "cuda"):
        self.directory = Path(directory)
        self.backend = build.backend if build is not None else backend
        self.signature = signature
        self.arch = arch
        self.target = target
        self.plans = tuple(plans)           # one per grid, in launch order
        self.build = build
        self.shapes = dict(shapes or {})    # problem sizes given at compile time (defaults)
        self._library: HarnessLibrary | None = None

    @property
    def name(self) -> str:
        return self.signature.kernel

    @property
    def tiles(self) -> dict[str, int]:
        """Every grid's tile sizes (the interpreter takes them together)."""
        return {k: v for plan in self.plans for k, v in plan.tiles}

    def __repr__(self) -> str:
        return f"<CompiledKernel {self.signature} for {self.target or self.arch} in {self.directory}>"

    # ---- calling ---------------------------------------------------------------------
    def __call__(self, *args, out=None, **named) -> dict[str, Any]:
        """Run once; the outputs by name (NumPy arrays, or DeviceArrays / the `out=` arrays
        when any argument is a device array)."""
        call = self.bind(*args, out=out, **named)
        return self.run(call)

    def time(self, *args, warmup: int = 10, iters: int = 100, out=None,
             flush_bytes: int = 0, **named) -> Timing:
        """Time `iters` launches (after `warmup`) with CUDA events, one by one; the outputs
        are zeroed between launches, outside the timed region. `flush_bytes` > 0: before
        every timed launch, outside the timed region, write a scratch buffer of that many
        bytes (a few times the L2) so that no launch finds its inputs in the L2 cache."""
        if warmup < 0 or iters < 1:
            raise ArgumentError(f"time() needs warmup >= 0 and iters >= 1, not {warmup}, {iters}")
        if flush_bytes < 0:
            raise ArgumentError(f"time() needs flush_bytes >= 0, not {flush_bytes}")
        call = self.bind(*args, out=out, **named)
        lib = self.library()
        with _Buffers(lib) as buffers:
            pointers = self._prepare(lib, call, buffers, poison=())
            dims = self._dims(call)
            if not flush_bytes:
                ms = lib.time(pointers, call.scalars, dims, warmup, iters)
            else:
                scratch = buffers.alloc(flush_bytes)
                if warmup:
                    lib.time(pointers, call.scalars, dims, warmup - 1, 1)
                ms = []
                for n in range(iters):
                    lib.memset(scratch, n & 0xFF, flush_bytes)
                    ms += lib.time(pointers, call.scalars, dims, 0, 1)
        return Timing(tuple(ms), warmup, flushed=bool(flush_bytes))

    def run(self, call: BoundCall, *, poison: tuple[str, ...] = ()) -> dict[str, Any]:
        """Launch a bound call once. Outputs named in `poison` are filled with 0xFF bytes
        (NaN for floats) instead of zeros, to catch elements a kernel fails to store."""
        lib = self.library()
        results: dict[str, Any] = {}
        with _Buffers(lib) as buffers:
            pointers = self._prepare(lib, call, buffers, poison=poison)
            lib.run_once(pointers, call.scalars, self._dims(call))
            for bound, ptr in zip(call.tensors, pointers):
                p = bound.param
                if not p.is_output:
                    continue
                if p.name in call.given_outputs:
                    if bound.host is not None:
                        _copy_out(lib, bound.host, ptr)
                    results[p.name] = bound.value
                elif call.on_device:
                    results[p.name] = buffers.keep(ptr, bound.shape, p.dtype)
                else:
                    host = np.empty(bound.shape, NUMPY_DTYPES[p.dtype])
                    _copy_out(lib, host, ptr)
                    results[p.name] = host
        return results

    def enqueue(self, pointers, scalars, dims, stream: int) -> None:
        """Launch on `stream` and return at once: every tensor already on the device
        (`pointers` in ABI order: tensor inputs, then outputs; `dims` in the signature's
        order), the outputs zeroed on that stream first. Nothing is copied and nothing
        waits: what follows on the stream is ordered after the kernel (ptc.torch's path)."""
        self.library().launch_async(pointers, scalars, dims, stream)

    def library(self) -> HarnessLibrary:
        """The loaded harness library, on a GPU it can run on (else NoDevice)."""
        if self._library is None:
            lib = HarnessLibrary(self.directory / LIBRARY, toolchain(self.backend))
            if lib.signature() != str(self.signature):
                raise BuildError(f"{self.directory / LIBRARY} was built for "
                                 f"{lib.signature()}, not {self.signature}",
                                 hint="rebuild the directory (ptc build)")
            self._library = lib
        gpu, chain = self._library.device(), self._library.toolchain
        if self.arch and not chain.can_run(gpu, self.arch):
            raise NoDevice(f"no {chain.language} device for {self.arch}: the GPU is {gpu.name} "
                           f"({gpu.arch}), which cannot run code built for {self.arch}",
                           hint="compile for the GPU's target (e.g. --target sm90 on an H100)")
        return self._library

    def sass(self) -> str:
        return sass(self.directory)
    def bind(self, *args, out=None, **named) -> BoundCall:
        """Check a call's arguments (no CUDA); run() launches it."""
        return bind_call(self.signature, self.shapes, args, named, out)

    # ---- launching -------------------------------------------------------------------
    def _dims(self, call: BoundCall) -> list[int]:
        return [call.dims[d.name] for d in self.signature.dims]

    def _prepare(self, lib: HarnessLibrary, call: BoundCall, buffers: "_Buffers",
                 poison) -> list[int]:
        """Device pointers for every tensor, inputs copied, outputs cleared (or poisoned)."""
        pointers = []
        for bound in call.tensors:
            p = bound.param
            nbytes = nbytes_of(bound.shape, p.dtype)
            if bound.device is not None:
                ptr = bound.device.ptr
            else:
                ptr = buffers.alloc(nbytes)
                if not p.is_output and nbytes:
                    lib.h2d(ptr, bound.host.ctypes.data, nbytes)
            if p.is_output and nbytes:
                lib.memset(ptr, 0xFF if p.name in poison else 0, nbytes)
            pointers.append(ptr)
        for stream in call.streams:
            lib.stream_synchronize(stream)
        return pointers


class _Buffers:
    """Device allocations of one call, freed at the end unless kept (returned outputs)."""

    def __init__(self, lib: HarnessLibrary):
        self.lib = lib
        self.owned: list[int] = []

    def alloc(self, nbytes: int) -> int:
        ptr = self.lib.malloc(nbytes)
        self.owned.append(ptr)
        return ptr

    def keep(self, ptr: int, shape, dtype: str) -> A.DeviceArray:
        self.owned.remove(ptr)
        return A.DeviceArray(self.lib, ptr, shape, dtype)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for ptr in self.owned:
            self.lib.free(ptr)
        self.owned.clear()
        return False


def _copy_out(lib: HarnessLibrary, host: np.ndarray, ptr: int) -> None:
    if host.nbytes:
        lib.d2h(host.ctypes.data, ptr, host.nbytes)
