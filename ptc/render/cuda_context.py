"""What the CUDA renderer hands `templates/cuda/kernel.cu.j2` (a `KernelContext`, with the
shared-memory `Array`s and kernel `Param`s in it), and the error it raises when a plan
cannot be rendered.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..stask.propagate import DTYPE_BYTES
from .cexpr import CTYPES


class RenderError(Exception):
    """This plan cannot be rendered by this backend (the message says why)."""


@dataclass(frozen=True)
class Array:
    name: str          # C name
    dtype: str
    shape: tuple[int, ...]
    ld: int            # elements between rows (2-D) — padded
    slots: int
    offset: int = 0    # bytes into dynamic shared memory

    @property
    def ctype(self) -> str:
        return CTYPES[self.dtype]

    @property
    def slot_elems(self) -> int:
        if len(self.shape) == 2:
            return self.shape[0] * self.ld
        return self.shape[0] if self.shape else 1

    @property
    def bytes(self) -> int:
        return align(self.slot_elems * self.slots * DTYPE_BYTES[self.dtype], 16)


@dataclass(frozen=True)
class Param:
    ctype: str
    name: str


@dataclass(frozen=True)
class KernelContext:
    kernel: str
    func: str
    summary: tuple[str, ...]
    constants: tuple[tuple[str, int], ...]
    params: tuple[Param, ...]
    tensor_args: tuple[tuple[str, str, int], ...]   # (C name, C type, index into tensors[])
    scalar_args: tuple[tuple[str, str, int], ...]   # (C name, C type, index into scalars[])
    dim_args: tuple[tuple[str, int, int | None], ...]  # (C name, index into dims[], static)
    grid: tuple[tuple[str, str], ...]               # (C index name, count expression)
    threads: int
    smem_bytes: int
    arrays: tuple[Array, ...]
    body: tuple[str, ...]


def align(n: int, a: int) -> int:
    return (n + a - 1) // a * a
