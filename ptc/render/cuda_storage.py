"""Shared memory for the CUDA renderer: where each tile value lives and how C code
indexes it.

Loaded tiles live in ring buffers (`stages` slots, rows padded by 16 bytes so ldmatrix
rows spread over the banks); every other tile value, and the scratch array of each
reduction nested in a simt statement, gets an array of its own, sharing bytes with others
where their live ranges allow (ptc.render.smem).
"""
from __future__ import annotations

from ..sema import typed as T
from ..stask.propagate import DTYPE_BYTES
from .cuda_context import Array, RenderError, align
from .smem import plan_storage, program_order


def _pad(cols: int, dtype: str) -> int:
    """Row length in elements: 16 bytes more than needed, so ldmatrix rows hit other banks."""
    per16 = 16 // DTYPE_BYTES[dtype]
    return align(cols, per16) + per16


class StorageMixin:
    """The storage part of CudaRenderer: fills `self.arrays`, `self.smem` and
    `self.reductions`, and renders reads of tile values."""

    def _read(self, name: str, idx: list[str]) -> str:
        arr, slot = self._array_of(name)
        return f"{arr.name}[{slot}{self._linear(arr, idx)}]"

    def _array_of(self, name: str) -> tuple[Array, str]:
        if name in self.buffer_of_value:
            b = self.buffer_of_value[name]
            arr = self.arrays[b.name]
            return arr, f"{self._slot(b)} * {arr.slot_elems} + " if arr.slots > 1 else ""
        return self.arrays[self.value_name(name)], ""

    def _linear(self, arr: Array, idx: list[str]) -> str:
        if len(arr.shape) == 2:
            return f"({idx[0]}) * {arr.ld} + ({idx[1]})"
        if len(arr.shape) == 1:
            return f"({idx[0]})"
        return "0"

    def _slot(self, b) -> str:
        task = self.tasks[b.producer]
        return f"ring_{b.name}_slot" if task.region else "0"

    def _layout(self) -> None:
        """Ring buffers first, each its own; then tile values, sharing bytes where their
        live ranges allow (ptc.render.smem)."""
        offset = 0
        placed: dict[str, Array] = {}
        for b in self.plan.buffers:
            shape = tuple(b.shape)
            if len(shape) > 2:
                raise RenderError(f"buffer {b.name} has {len(shape)} dims; tiles have at most 2")
            arr = Array(b.name, b.dtype, shape, _pad(shape[-1], b.dtype) if len(shape) == 2 else 0,
                        b.stages, offset)
            placed[b.name] = arr
            offset += arr.bytes
        for t in self.g.tasks:
            for s in t.stmts:
                if isinstance(s, T.Let) and s.name not in self.buffer_of_value:
                    self._value_array(self.value_name(s.name), s.value.type)
        values = {n: a for n, a in self.arrays.items() if n not in placed}
        order, loops = program_order(self.role, self.tasks)
        named = []
        for pos, st in order:
            if st.name in self.buffer_of_value:
                continue
            for r in nested_reductions(st.value):   # scratch arrays live just for their statement
                if id(r) in self.reductions:
                    named.append((pos, T.Let(self.reductions[id(r)], T.Const(0, r.type), st.span)))
            named.append((pos, T.Let(self.value_name(st.name),
                                     _rename(st.value, self.value_name), st.span)))
        named.sort(key=lambda x: x[0])
        cls, offsets, total = plan_storage(
            named, loops, None, {n: a.bytes for n, a in values.items()},
            {n: a.dtype for n, a in values.items()}, {n: a.shape for n, a in values.items()})
        for n, a in values.items():
            placed[n] = Array(a.name, a.dtype, a.shape, a.ld, a.slots, offset + offsets[cls[n]])
        self.arrays = placed
        self.smem = align(offset + total, 16)
        limit = self.device.resources.shared_memory_bytes
        if self.smem > limit:
            raise RenderError(f"the tiles of this plan need {self.smem // 1024} KB of shared "
                              f"memory, over the {limit // 1024} KB a block may use")

    def _value_array(self, name: str, ty: T.TileType) -> Array:
        if name not in self.arrays:
            shape = tuple(self._extent(e) for e in ty.shape)
            if len(shape) > 2:
                raise RenderError(f"{name} has {len(shape)} dims; tiles have at most 2")
            ld = _pad(shape[-1], ty.dtype) if len(shape) == 2 else 0
            self.arrays[name] = Array(name, ty.dtype, shape, ld, 1)
        return self.arrays[name]

    def _prepare_scratch(self) -> None:
        """Reductions nested in simt statements get arrays of their own."""
        self.reductions: dict[int, str] = {}
        for t in self.g.tasks:
            if t.kind != "simt":
                continue
            for s in t.stmts:
                for r in nested_reductions(s.value if isinstance(s, T.Let) else s.value):
                    name = f"r_{len(self.reductions)}"
                    self.reductions[id(r)] = name
                    self._value_array(name, r.type)


def _rename(e, name_of):
    """The expression with every Var renamed by name_of (for liveness by C array name)."""
    if isinstance(e, T.Var):
        from dataclasses import replace
        return replace(e, name=name_of(e.name))
    return T.map_children(e, lambda c: _rename(c, name_of))


def nested_reductions(e) -> list[T.Reduce]:
    """Reduce nodes of an expression, innermost first."""
    out: list[T.Reduce] = []
    for c in T.children(e):
        out.extend(nested_reductions(c))
    if isinstance(e, T.Reduce):
        out.append(e)
    return out
