"""Loads and stores for the CUDA renderer: tiles of global tensors moved to shared memory
(cp.async, global_to_shared.cuh) and back (shared_to_global.cuh).
"""
from __future__ import annotations

import math

from ..sched.plan import Step
from ..sema import typed as T
from .cuda_context import RenderError


class TransferMixin:
    """The load and store tasks of CudaRenderer."""

    def _tensor_tile(self, tensor: str, index) -> dict:
        """Base pointer, rows and columns of a tile of `tensor` in global memory."""
        p = self.k.tensor(tensor)
        dims = [str(d) if isinstance(d, int) else f"d_{d}" for d in p.dims]
        strides = []
        for j in range(len(dims)):
            rest = dims[j + 1:]
            strides.append(" * ".join(rest) if rest else "1")
        offset, valid, axes = [], [], []
        for item, dim, stride in zip(index, dims, strides):
            if isinstance(item, T.Point):
                v = self.exprs.render(item.index, [])
                offset.append(f"({v}) * ({stride})")
                valid.append(f"({v}) >= 0 && ({v}) < {dim}")
            elif isinstance(item, T.TileSlice):
                size = self._extent(item.size)
                axes.append((f"i_{item.var} * {size}", dim, stride, size))
            else:
                axes.append(("0", dim, stride, self._extent(item.extent)))
        if len(axes) > 2:
            raise RenderError(f"a tile of {tensor} spans {len(axes)} dims; at most 2 are supported")
        while len(axes) < 2:
            axes.insert(0, ("0", "1", "0", 1))
        (r0, nr, rs, rows), (c0, nc, cs, cols) = axes
        if valid:
            nr = f"(({' && '.join(valid)}) ? {nr} : 0)"
        base = f"{param_name(tensor)}" + (f" + {' + '.join(offset)}" if offset else "")
        return dict(base=base, row0=r0, nrows=nr, rstride=rs, col0=c0, ncols=nc, cstride=cs,
                    rows=rows, cols=cols)

    def _load(self, t, step: Step, loop: str | None) -> None:
        (s,) = t.stmts
        b = self.buffer_of_value[s.name]
        arr = self.arrays[b.name]
        tile = self._tensor_tile(s.value.tensor, s.value.index)
        slot = ""
        if arr.slots > 1 or self.tasks[b.producer].region:
            slot = f" + ((ring_{b.name} + i_{loop}) % {b.stages}) * {arr.slot_elems}"
        ld = arr.ld if len(arr.shape) == 2 else max(tile["cols"], 1)
        self.emit(f"ptc::global_to_shared<{arr.ctype}, {tile['rows']}, {tile['cols']}, {ld}, THREADS>("
                  f"{arr.name}{slot}, {tile['base']}, {tile['row0']}, {tile['nrows']}, "
                  f"{tile['rstride']}, {tile['col0']}, {tile['ncols']}, {tile['cstride']}, "
                  f"{_pad_literal(s.value.pad)});")

    def _store(self, t) -> None:
        (s,) = t.stmts
        src = self.arrays[self.value_name(s.value.name)]
        tile = self._tensor_tile(s.tensor, s.index)
        ld = src.ld if len(src.shape) == 2 else max(tile["cols"], 1)
        atomic = "true" if s.atomic else "false"
        self.emit(f"ptc::shared_to_global<{src.ctype}, {tile['rows']}, {tile['cols']}, {ld}, "
                  f"THREADS, {atomic}>({tile['base']}, {src.name}, {tile['row0']}, "
                  f"{tile['nrows']}, {tile['rstride']}, {tile['col0']}, {tile['ncols']}, "
                  f"{tile['cstride']});")
        self.sync()


def param_name(tensor: str) -> str:
    return f"g_{tensor}"


def _pad_literal(pad: float) -> str:
    if math.isinf(pad):
        return "-INFINITY" if pad < 0 else "INFINITY"
    return f"{float(pad)!r}f"
