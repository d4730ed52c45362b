"""Matrix multiplies for the CUDA renderer: tensor cores (ldmatrix + mma.sync,
mma_sync.cuh) when the shapes and dtype allow, a simt loop otherwise, and accumulators
kept in registers over a loop.
"""
from __future__ import annotations

from ..sched.plan import LoopBlock, Step
from ..sema import typed as T
from .cexpr import CTYPES

# an accumulator stays in registers over a loop when its fragments take at most this many
MAX_ACCUMULATOR_REGISTERS = 128


class MmaMixin:
    """The mma tasks of CudaRenderer."""

    def _register_accumulators(self, block: LoopBlock) -> list:
        """mma steps of this loop that accumulate into a value nothing else in the loop
        touches: their accumulator stays in mma fragments for the whole loop."""
        inside = {t.name for t in self.g.tasks if block.var in self.g.region_path(t.region)}
        held = []
        for step in block.body:
            if not isinstance(step, Step) or step.offset or step.task not in self.tasks:
                continue
            t = self.tasks[step.task]
            spec = self._mma_spec(t)
            if spec is None or not spec["tensor_core"] or spec["addend"] != t.stmts[0].name:
                continue
            x = t.stmts[0].name
            others = [o for o in inside if o != t.name
                      and (x in self.tasks[o].uses or x in self.tasks[o].defines)]
            fragments = spec["m"] // 16 * spec["n"] // 8 // self.warps + 1
            if others or fragments * 4 > MAX_ACCUMULATOR_REGISTERS:
                continue
            arr = self.arrays[self.value_name(x)]
            self.in_registers[t.name] = f"acc_{self.value_name(x)}"
            held.append((t.name, self.value_name(x), arr, (spec["m"], spec["n"])))
        return held

    def _operand(self, e) -> tuple[str, int, bool]:
        """(pointer, leading dim, transposed) of an mma operand held in shared memory."""
        transposed = isinstance(e, T.Transpose)
        var = e.arg if transposed else e
        arr, slot = self._array_of(var.name)
        ld = arr.ld if len(arr.shape) == 2 else arr.shape[-1]
        ptr = f"{arr.name} + {slot.rstrip(' +')}" if slot else arr.name
        return ptr, ld, transposed

    def _mma_spec(self, t) -> dict | None:
        """How an mma task runs: operands, extents, and whether tensor cores take it."""
        if t.kind != "mma":
            return None
        (s,) = t.stmts
        v = s.value
        addend, mm = v.acc, v                                    # a T.MmaAccumulate
        a_ptr, lda, a_t = self._operand(mm.a)
        b_ptr, ldb, b_t = self._operand(mm.b)
        m, kk = (self._extent(x) for x in mm.a.type.shape)     # a transposed operand's type
        n = self._extent(mm.b.type.shape[1])                     # is already the transpose
        dtype = mm.a.type.dtype
        tensor_core = (dtype in ("f16", "bf16") and m % 16 == 0 and n % 8 == 0
                       and kk % 16 == 0 and lda % 8 == 0 and ldb % 8 == 0)
        return dict(a=a_ptr, lda=lda, a_t=a_t, b=b_ptr, ldb=ldb, b_t=b_t, m=m, n=n, k=kk,
                    dtype=dtype, tensor_core=tensor_core,
                    addend=addend.name if addend is not None else None)

    def _mma(self, t) -> None:
        (s,) = t.stmts
        spec = self._mma_spec(t)
        ctype = CTYPES[spec["dtype"]]
        flags = f"{'true' if spec['a_t'] else 'false'}, {'true' if spec['b_t'] else 'false'}"
        dims = f"{spec['m']}, {spec['n']}, {spec['k']}"
        operands = f"{spec['a']}, {spec['lda']}, {spec['b']}, {spec['ldb']}"
        if t.name in self.in_registers:
            self.emit(f"ptc::mma_accumulate<{ctype}, {dims}, {flags}, WARPS>("
                      f"{self.in_registers[t.name]}, {operands});")
            return
        out = self._value_array(self.value_name(s.name), s.value.type)
        add_ptr, add_ld = "nullptr", 0
        if spec["addend"] is not None:
            add_arr, _ = self._array_of(spec["addend"])
            add_ptr, add_ld = add_arr.name, add_arr.ld
        helper = ("mma_tile", "WARPS") if spec["tensor_core"] else ("matmul_simt", "THREADS")
        self.emit(f"ptc::{helper[0]}<{ctype}, {dims}, {flags}, {helper[1]}>({out.name}, "
                  f"{out.ld}, {add_ptr}, {add_ld}, {operands});")
        self.sync()
