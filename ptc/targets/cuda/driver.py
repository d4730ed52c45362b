"""The CUDA driver, asked whether there is a GPU before anything is built (libcuda through
ctypes: no build and no toolkit needed), and which GPUs run code built for an arch."""
from __future__ import annotations

import ctypes

from ptc.runtime.errors import NoDevice
from ptc.runtime.library import GpuInfo

COMPUTE_CAPABILITY_MAJOR, COMPUTE_CAPABILITY_MINOR = 75, 76     # CUdevice_attribute


def find_gpus() -> list[GpuInfo]:
    """The CUDA GPUs the driver sees; raises NoDevice("no CUDA GPU found (why)") if none."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        raise no_gpu("libcuda.so.1 cannot be loaded: no NVIDIA driver on this machine") \
            from None
    count = ctypes.c_int(0)
    rc = cuda.cuInit(0)
    if rc != 0:
        raise no_gpu(f"cuInit failed: {driver_error(cuda, rc)}")
    rc = cuda.cuDeviceGetCount(ctypes.byref(count))
    if rc != 0:
        raise no_gpu(f"cuDeviceGetCount failed: {driver_error(cuda, rc)}")
    if count.value == 0:
        raise no_gpu("the driver sees no device; check CUDA_VISIBLE_DEVICES")
    return [_gpu(cuda, i) for i in range(count.value)]


def _gpu(cuda, index: int) -> GpuInfo:
    dev = ctypes.c_int(0)
    name = ctypes.create_string_buffer(256)
    major, minor = ctypes.c_int(0), ctypes.c_int(0)
    cuda.cuDeviceGet(ctypes.byref(dev), index)
    cuda.cuDeviceGetName(name, 256, dev)
    cuda.cuDeviceGetAttribute(ctypes.byref(major), COMPUTE_CAPABILITY_MAJOR, dev)
    cuda.cuDeviceGetAttribute(ctypes.byref(minor), COMPUTE_CAPABILITY_MINOR, dev)
    return GpuInfo(index, name.value.decode(errors="replace"), f"sm_{major.value}{minor.value}")


def no_gpu(reason: str) -> NoDevice:
    return NoDevice(f"no CUDA GPU found ({reason})", reason=reason)


def driver_error(cuda, rc: int) -> str:
    name, text = ctypes.c_char_p(), ctypes.c_char_p()
    try:
        cuda.cuGetErrorName(rc, ctypes.byref(name))
        cuda.cuGetErrorString(rc, ctypes.byref(text))
    except AttributeError:
        return f"error {rc}"
    if name.value is None:
        return f"error {rc}"
    return f"{name.value.decode()}: {(text.value or b'').decode()}"


def capability(arch: str) -> tuple[int, int, str] | None:
    """`sm_90a` -> (9, 0, "a"); None for a name that is not sm_XY[a|f] (or compute_XY)."""
    digits = arch.removeprefix("sm_").removeprefix("compute_")
    suffix = digits[-1] if digits[-1:] in ("a", "f") else ""
    digits = digits.removesuffix(suffix)
    if len(digits) < 2 or not digits.isdigit():
        return None
    return int(digits[:-1]), int(digits[-1]), suffix


def can_run(gpu: GpuInfo, arch: str) -> bool:
    """Whether code built with `nvcc -arch=ARCH` runs on `gpu`: sm_XYa only on X.Y itself;
    sm_XY (which embeds PTX) on X.Y and every later GPU."""
    built, found = capability(arch), capability(gpu.arch)
    if built is None or found is None:
        return built is None
    if built[2] == "a":
        return found[:2] == built[:2]
    return found[:2] >= built[:2]


def family(arch: str) -> str:
    """The GPUs one device description's peaks describe: a compute capability's major
    (sm_89, an L4, is timed against sm80's description)."""
    cap = capability(arch)
    return str(cap[0]) if cap else arch
