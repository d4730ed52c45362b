"""torch tensors as the runtime sees them: ptc dtypes, DeviceRefs for the call checks
(ptc.runtime.binding checks a torch tensor exactly as it checks any device array), and
NumPy views of CPU tensors for the interpreter and the emulator (no copies)."""
from __future__ import annotations

import numpy as np
import torch

from ..interp import NUMPY_DTYPES
from ..runtime import arrays as A

TORCH_DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32,
                "i32": torch.int32, "i8": torch.int8, "u8": torch.uint8,
                "f8e4m3": torch.float8_e4m3fn, "f8e5m2": torch.float8_e5m2, "bool": torch.bool}
PTC_DTYPES = {v: k for k, v in TORCH_DTYPES.items()}
# dtypes NumPy has no native type for: viewed as bits, then as ml_dtypes' type
_BITS = {"bf16": torch.int16, "f8e4m3": torch.uint8, "f8e5m2": torch.uint8}


class TorchArray(A.ArrayAdapter):
    """One tensor argument; `fake`: a FakeTensor while torch.compile traces (no memory)."""

    def __init__(self, tensor: torch.Tensor, fake: bool = False):
        self.tensor = tensor
        self.fake = fake

    def ref(self) -> A.DeviceRef:
        t = self.tensor
        dtype = PTC_DTYPES.get(t.dtype, str(t.dtype))   # no ptc dtype: the mismatch says it
        if t.device.type == "cuda" and (t.device.index or 0) != 0:
            A.check_device_index(t.device.index)
        if dtype in NUMPY_DTYPES:
            A.check_contiguous(tuple(t.shape), tuple(s * t.element_size() for s in t.stride()),
                               t.element_size())
        stream = None
        if t.device.type == "cuda" and not self.fake:
            stream = torch.cuda.current_stream(t.device).cuda_stream or None
        ptr = 0 if self.fake else t.data_ptr()
        return A.DeviceRef(ptr, tuple(int(n) for n in t.shape), dtype, stream, t, "tensor")


def arguments(args, fake: bool = False) -> list:
    """A call's arguments as the runtime's binding takes them: tensors wrapped, scalars
    as they are."""
    return [TorchArray(a, fake) if isinstance(a, torch.Tensor) else a for a in args]


def host_view(t: torch.Tensor, dtype: str) -> np.ndarray:
    """A CPU tensor's memory as a NumPy array of ptc dtype `dtype` (shared, not copied)."""
    t = t.detach()
    if dtype in _BITS:
        return t.view(_BITS[dtype]).numpy().view(NUMPY_DTYPES[dtype])
    return t.numpy()
