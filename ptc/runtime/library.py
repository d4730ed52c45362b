"""ctypes bindings of the built harness library (libptc_kernel.so, CUDA or HIP: the
harness's C ABI is the same). Whether a machine has a GPU at all, before anything is
built, each backend's toolchain says (`Toolchain.find_gpus`, its package's driver.py).

Loading a CUDA libptc_kernel.so needs no GPU and no driver (nvcc links the CUDA runtime
statically; a HIP one needs libamdhip64); the first call that needs a device finds out
there is none.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

from .errors import BuildError, LaunchError, NoDevice

_c_ptr_array = ctypes.POINTER(ctypes.c_void_p)
_c_double_p = ctypes.POINTER(ctypes.c_double)
_c_longlong_p = ctypes.POINTER(ctypes.c_longlong)
_c_float_p = ctypes.POINTER(ctypes.c_float)
_c_int_p = ctypes.POINTER(ctypes.c_int)

# name: (restype, argtypes) of everything the harness and kernel.cu export
_ABI = {
    "ptc_launch": (ctypes.c_int, [_c_ptr_array, _c_double_p, _c_longlong_p, ctypes.c_void_p]),
    "ptc_kernel_name": (ctypes.c_char_p, []),
    "ptc_last_error": (ctypes.c_char_p, []),
    "ptc_signature": (ctypes.c_char_p, []),
    "ptc_error_string": (ctypes.c_char_p, [ctypes.c_int]),
    "ptc_device_count": (ctypes.c_int, [_c_int_p]),
    "ptc_device_info": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                                       ctypes.c_int]),
    "ptc_malloc": (ctypes.c_void_p, [ctypes.c_size_t]),
    "ptc_free": (ctypes.c_int, [ctypes.c_void_p]),
    "ptc_memcpy_h2d": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]),
    "ptc_memcpy_d2h": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]),
    "ptc_memset": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]),
    "ptc_synchronize": (ctypes.c_int, []),
    "ptc_stream_synchronize": (ctypes.c_int, [ctypes.c_void_p]),
    "ptc_run_once": (ctypes.c_int, [_c_ptr_array, _c_double_p, _c_longlong_p, ctypes.c_void_p]),
    "ptc_launch_async": (ctypes.c_int, [_c_ptr_array, _c_double_p, _c_longlong_p,
                                        ctypes.c_void_p]),
    "ptc_time": (ctypes.c_int, [_c_ptr_array, _c_double_p, _c_longlong_p, ctypes.c_int,
                                ctypes.c_int, _c_float_p]),
}
ABI_SYMBOLS = tuple(_ABI)


@dataclass(frozen=True)
class GpuInfo:
    """A GPU as its backend's driver or the harness reports it."""

    index: int
    name: str
    arch: str        # as the backend's device descriptions spell it: sm_90, gfx942


# ---- the harness library ------------------------------------------------------------------
class HarnessLibrary:
    """libptc_kernel.so through ctypes: every call checks its status and raises LaunchError
    with the harness's message (ptc_last_error)."""

    def __init__(self, path: str | Path, toolchain):
        self.path = Path(path)
        self.toolchain = toolchain      # what built it (ptc.runtime.toolchain): for messages
        try:
            self.lib = ctypes.CDLL(str(self.path.absolute()))
        except OSError as exc:
            raise BuildError(f"cannot load {self.path}: {exc}",
                             hint="rebuild it with `ptc build` (or sh build.sh in its folder)") \
                from None
        for name, (restype, argtypes) in _ABI.items():
            try:
                fn = getattr(self.lib, name)
            except AttributeError:
                raise BuildError(f"{self.path} does not export {name}",
                                 hint="kernel.cu must define ptc_launch and ptc_kernel_name "
                                      "(the kernel ABI); harness.cu defines the rest") from None
            fn.restype, fn.argtypes = restype, argtypes
        self._gpu: GpuInfo | None = None

    # -- facts
    def kernel_name(self) -> str:
        return self.lib.ptc_kernel_name().decode()

    def signature(self) -> str:
        return self.lib.ptc_signature().decode()

    def last_error(self) -> str:
        return (self.lib.ptc_last_error() or b"").decode(errors="replace")

    def device(self) -> GpuInfo:
        """The GPU the harness runs on; NoDevice("no CUDA device: ...", or HIP) if there is none."""
        if self._gpu is not None:
            return self._gpu
        count = ctypes.c_int(0)
        if self.lib.ptc_device_count(ctypes.byref(count)) != 0 or count.value == 0:
            language = self.toolchain.language
            # the driver's own account is clearer, when it has one
            why = (self.toolchain.why_no_device() or self.last_error()
                   or f"the {language} runtime sees no device")
            raise NoDevice(f"no {language} device: {why}",
                           hint="ptc can build here without a GPU; running needs one")
        name, arch = ctypes.create_string_buffer(256), ctypes.create_string_buffer(64)
        self.check(self.lib.ptc_device_info(name, 256, arch, 64), "querying the device")
        self._gpu = GpuInfo(0, name.value.decode(errors="replace"),
                            arch.value.decode(errors="replace"))
        return self._gpu

    # -- calls
    def check(self, status: int, what: str) -> None:
        if status != 0:
            why = self.last_error() or f"{self.toolchain.language} error {status}"
            raise LaunchError(f"{what} failed: {why}")

    def malloc(self, nbytes: int) -> int:
        ptr = self.lib.ptc_malloc(nbytes)
        if not ptr:
            raise LaunchError(f"cannot allocate {nbytes} bytes on the GPU: {self.last_error()}")
        return ptr

    def free(self, ptr: int) -> None:
        self.lib.ptc_free(ptr)

    def h2d(self, dst: int, src: int, nbytes: int) -> None:
        self.check(self.lib.ptc_memcpy_h2d(dst, src, nbytes), "copying to the GPU")

    def d2h(self, dst: int, src: int, nbytes: int) -> None:
        self.check(self.lib.ptc_memcpy_d2h(dst, src, nbytes), "copying from the GPU")

    def memset(self, ptr: int, value: int, nbytes: int) -> None:
        self.check(self.lib.ptc_memset(ptr, value, nbytes), "clearing GPU memory")

    def stream_synchronize(self, stream: int) -> None:
        self.check(self.lib.ptc_stream_synchronize(stream), "waiting for the array's stream")

    def run_once(self, tensors, scalars, dims) -> None:
        t, s, d = _abi_arrays(tensors, scalars, dims)
        self.check(self.lib.ptc_run_once(t, s, d, None), f"running {self.kernel_name()}")

    def launch_async(self, tensors, scalars, dims, stream: int) -> None:
        """Zero the outputs and launch on `stream`, without waiting (ptc_launch_async)."""
        t, s, d = _abi_arrays(tensors, scalars, dims)
        self.check(self.lib.ptc_launch_async(t, s, d, stream or None),
                   f"launching {self.kernel_name()}")

    def time(self, tensors, scalars, dims, warmup: int, iters: int) -> list[float]:
        t, s, d = _abi_arrays(tensors, scalars, dims)
        ms = (ctypes.c_float * max(iters, 1))()
        self.check(self.lib.ptc_time(t, s, d, warmup, iters, ms), f"timing {self.kernel_name()}")
        return [float(x) for x in ms[:iters]]


def _abi_arrays(tensors, scalars, dims):
    t = (ctypes.c_void_p * (len(tensors) + 1))(*tensors, None)
    s = (ctypes.c_double * (len(scalars) + 1))(*scalars, 0.0)
    d = (ctypes.c_longlong * (len(dims) + 1))(*dims, 0)
    return (ctypes.cast(t, _c_ptr_array), ctypes.cast(s, _c_double_p),
            ctypes.cast(d, _c_longlong_p))
