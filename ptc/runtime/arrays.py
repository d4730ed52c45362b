"""Arrays in and out of a kernel call: device arrays of other frameworks (through
`__cuda_array_interface__` or DLPack, without copies) and `DeviceArray`, the runtime's own
device memory for outputs.

Device arrays must be C-contiguous, on the current GPU (device 0 as CUDA numbers the
visible ones), and exactly of the kernel's dtype: nothing is converted on the device.
bf16 has no `__cuda_array_interface__` typestr of its own: PyTorch shows it as raw 2-byte
elements ('<V2'), which are taken as bf16 only where the array's own `dtype` says bfloat16
(else through DLPack, which names it). Likewise FP8: raw bytes ('|V1') are f8e4m3 or
f8e5m2 where the array's dtype says float8_e4m3fn or float8_e5m2; DLPack 1.1 names them.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..interp import NUMPY_DTYPES

# __cuda_array_interface__ typestr -> ptc dtype
_TYPESTR = {"<f2": "f16", "<f4": "f32", "<i4": "i32", "|i1": "i8", "|u1": "u8", "|b1": "bool",
            "<b1": "bool"}
_RAW_TWO_BYTES = ("<V2", "|V2")   # bf16 as torch and ml_dtypes export it: untyped 2-byte words
_RAW_BYTES = ("<V1", "|V1")       # FP8 as ml_dtypes exports it: untyped bytes
# what the array's own dtype is called (torch.float8_e4m3fn, ml_dtypes' float8_e4m3fn)
_FP8_NAMES = {"float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2"}
# DLPack (type code, bits) -> ptc dtype: kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLBool 6,
# and DLPack 1.1's kDLFloat8_e4m3fn 10 and kDLFloat8_e5m2 12 (torch exports its float8 so)
_DLPACK = {(2, 16): "f16", (4, 16): "bf16", (2, 32): "f32", (0, 32): "i32", (0, 8): "i8",
           (1, 8): "u8", (10, 8): "f8e4m3", (12, 8): "f8e5m2", (6, 8): "bool"}
_DLPACK_NAMES = {0: "int", 1: "uint", 2: "float", 3: "opaque", 4: "bfloat", 5: "complex",
                 6: "bool", 7: "float8_e3m4", 8: "float8_e4m3", 9: "float8_e4m3b11fnuz",
                 10: "float8_e4m3fn", 11: "float8_e4m3fnuz", 12: "float8_e5m2",
                 13: "float8_e5m2fnuz", 14: "float8_e8m0fnu", 15: "float6_e2m3fn",
                 16: "float6_e3m2fn", 17: "float4_e2m1fn"}
KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED = 1, 2, 3, 13
ALIGNMENT = 16   # bytes: what vectorized and asynchronous copies need


class ArrayProblem(Exception):
    """What is wrong with one array (the caller names the parameter)."""


class RawElements(ArrayProblem):
    """Untyped elements ('<V2') whose array does not say what they are."""


@dataclass
class DeviceRef:
    """A device array passed in: its pointer, shape and ptc dtype, and what keeps it alive."""

    ptr: int
    shape: tuple[int, ...]
    dtype: str
    stream: int | None = None     # a stream the producer may still be writing on
    keepalive: Any = None
    what: str = "device array"    # what the caller passed, as errors call it


class ArrayAdapter:
    """A framework's array that reads its own pointer, shape and dtype (ptc.torch's tensors):
    `ref()` gives the DeviceRef or raises ArrayProblem. The runtime checks the result as it
    checks any device array; the memory may be the host's (the CPU emulator's calls)."""

    def ref(self) -> DeviceRef:
        raise NotImplementedError


def is_device_array(obj) -> bool:
    if isinstance(obj, (DeviceArray, ArrayAdapter)):
        return True
    if _has_cai(obj):
        return True
    return _dlpack_device(obj) in (KDL_CUDA, KDL_CUDA_MANAGED)


def _has_cai(obj) -> bool:
    try:
        return isinstance(obj.__cuda_array_interface__, dict)
    except Exception:   # torch raises for bf16 and CPU tensors: not usable this way
        return False


def _dlpack_device(obj) -> int | None:
    fn = getattr(obj, "__dlpack_device__", None)
    if fn is None or isinstance(obj, np.ndarray):
        return None
    try:
        return int(fn()[0])
    except Exception:
        return None


def device_ref(obj) -> DeviceRef:
    """The device pointer behind `obj` (which is_device_array); ArrayProblem if unusable."""
    if isinstance(obj, DeviceArray):
        return DeviceRef(obj.ptr, obj.shape, obj.dtype, None, obj)
    if isinstance(obj, ArrayAdapter):
        return obj.ref()
    if _has_cai(obj):
        try:
            return _from_cai(obj)
        except RawElements:
            if _dlpack_device(obj) is None:
                raise
    return _from_dlpack(obj)


def _contiguous_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def check_device_index(index: int) -> None:
    if index != 0:
        raise ArrayProblem(f"is on CUDA device {index}; ptc runs on device 0 "
                           "(select the GPU with CUDA_VISIBLE_DEVICES)")


def check_contiguous(shape, strides, itemsize) -> None:
    """ArrayProblem unless `strides` (bytes; None: C order) are C-contiguous for `shape`."""
    if strides is None:
        return
    want = _contiguous_strides(shape, itemsize)
    if any(n > 1 and s != w for n, s, w in zip(shape, strides, want)):
        raise ArrayProblem("is not C-contiguous (make it contiguous first, e.g. "
                           "tensor.contiguous())")


def _from_cai(obj) -> DeviceRef:
    cai = obj.__cuda_array_interface__
    shape = tuple(int(n) for n in cai["shape"])
    typestr = cai["typestr"]
    if typestr in _RAW_TWO_BYTES:
        if "bfloat16" not in str(getattr(obj, "dtype", "")):
            raise RawElements(f"holds untyped 2-byte elements ({typestr!r} through "
                              "__cuda_array_interface__) and its dtype does not say bfloat16")
        dtype = "bf16"
    elif typestr in _RAW_BYTES:
        name = str(getattr(obj, "dtype", "")).rsplit(".", 1)[-1]
        if name not in _FP8_NAMES:
            raise RawElements(f"holds untyped bytes ({typestr!r} through "
                              "__cuda_array_interface__) and its dtype does not say "
                              "float8_e4m3fn or float8_e5m2")
        dtype = _FP8_NAMES[name]
    elif typestr in _TYPESTR:
        dtype = _TYPESTR[typestr]
    else:
        raise ArrayProblem(f"holds {typestr!r} (__cuda_array_interface__), which no ptc dtype "
                           f"matches")
    if cai.get("mask") is not None:
        raise ArrayProblem("is a masked array")
    ptr = int(cai["data"][0] or 0)
    check_contiguous(shape, cai.get("strides"), NUMPY_DTYPES[dtype].itemsize)
    stream = cai.get("stream")
    return DeviceRef(ptr, shape, dtype, stream if stream not in (None, 1, 2) else None, obj)


# ---- DLPack ----------------------------------------------------------------------------
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _from_dlpack(obj) -> DeviceRef:
    """Read the DLTensor of an (unversioned) DLPack capsule. The capsule is not consumed:
    it stays alive with the DeviceRef and its destructor releases the tensor."""
    device_type = _dlpack_device(obj)
    try:
        capsule = obj.__dlpack__()
        address = _capsule_pointer(capsule, b"dltensor")
    except Exception as exc:
        raise ArrayProblem(f"cannot be exported through DLPack ({exc})") from None
    t = _DLManagedTensor.from_address(address).dl_tensor
    check_device_index(t.device.device_id)
    shape = tuple(int(t.shape[i]) for i in range(t.ndim))
    key = (t.dtype.code, t.dtype.bits)
    if key not in _DLPACK or t.dtype.lanes != 1:
        name = f"{_DLPACK_NAMES.get(t.dtype.code, t.dtype.code)}{t.dtype.bits}"
        raise ArrayProblem(f"holds {name} (DLPack), which no ptc dtype matches")
    dtype = _DLPACK[key]
    itemsize = NUMPY_DTYPES[dtype].itemsize
    strides = (tuple(int(t.strides[i]) * itemsize for i in range(t.ndim))
               if t.strides else None)
    check_contiguous(shape, strides, itemsize)
    ptr = int(t.data or 0) + int(t.byte_offset)
    assert device_type in (KDL_CUDA, KDL_CUDA_MANAGED)
    return DeviceRef(ptr, shape, dtype, None, (obj, capsule))


# ---- the runtime's own device arrays ------------------------------------------------------
class DeviceArray:
    """An output in GPU memory, allocated by the runtime; freed when it is garbage-collected.

    It exposes `__cuda_array_interface__` (so torch.as_tensor(x, device="cuda") and
    cupy.asarray(x) see it without a copy; bf16 shows as raw 2-byte '<V2' there, FP8 as raw
    bytes '|V1'), and `.numpy()` copies it to the host (bf16 as ml_dtypes.bfloat16, FP8 as
    ml_dtypes.float8_e4m3fn / float8_e5m2).
    """

    def __init__(self, library, ptr: int, shape: tuple[int, ...], dtype: str):
        self._library = library
        self.ptr = ptr
        self.shape = tuple(shape)
        self.dtype = dtype

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * NUMPY_DTYPES[self.dtype].itemsize

    @property
    def __cuda_array_interface__(self) -> dict:
        typestr = {"f16": "<f2", "bf16": "<V2", "f32": "<f4", "i32": "<i4", "i8": "|i1",
                   "u8": "|u1", "f8e4m3": "|V1", "f8e5m2": "|V1", "bool": "|b1"}
        return {"shape": self.shape, "typestr": typestr[self.dtype], "data": (self.ptr, False),
                "strides": None, "version": 3}

    def numpy(self) -> np.ndarray:
        host = np.empty(self.shape, NUMPY_DTYPES[self.dtype])
        if host.nbytes:
            self._library.d2h(host.ctypes.data, self.ptr, host.nbytes)
        return host

    def __array__(self, dtype=None, copy=None):
        host = self.numpy()
        return host if dtype is None else host.astype(dtype)

    def __repr__(self) -> str:
        return (f"DeviceArray({self.dtype}[{', '.join(str(n) for n in self.shape)}], "
                f"ptr=0x{self.ptr:x})")

    def __del__(self):
        ptr, self.ptr = self.ptr, 0
        if ptr and self._library is not None:
            try:
                self._library.free(ptr)
            except Exception:
                pass
