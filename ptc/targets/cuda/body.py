"""The ops of a lowered kernel (ptc.lower.ir) that CUDA spells its own way: cp.async tile
copies and their groups, mma.sync tiles and ldmatrix fragments (the rest: ptc.render.c_body;
warp-specialized kernels: specialized.py)."""
from __future__ import annotations

from ptc.lower import ir
from ptc.sema import typed as T
from ptc.sema.dtypes import DTYPE_BYTES
from ptc.render.c_body import CBodyPrinter, RenderError
from ptc.render.cexpr import CTYPES, literal
from ptc.render.layouts import SIXTEEN_BIT
from .specialized import SpecializedOps

# the instruction mma_sync.cuh issues for an atom and its input dtype
MMA_INSTRUCTIONS = {("mma.sync.m16n8k16", "f16"): "ptc::Mma16816<false>",
                    ("mma.sync.m16n8k16", "bf16"): "ptc::Mma16816<true>",
                    ("mma.sync.m16n8k8", "tf32"): "ptc::Mma1688Tf32",
                    ("mma.sync.m16n8k32", "i8"): "ptc::Mma16832S8"}


class BodyPrinter(SpecializedOps, CBodyPrinter):
    def prologue(self) -> None:
        for op in ir.walk(self.low.body):
            if isinstance(op, ir.CopyTile):
                self.copy_state(op)

    def CommitGroup(self, op: ir.CommitGroup) -> None:
        self.emit("ptc::cp_async_commit();")

    def WaitGroups(self, op: ir.WaitGroups) -> None:
        self.emit(f"ptc::cp_async_wait<{op.pending}>();  // {', '.join(op.buffers)}")

    def sync_copy(self, op: ir.CopyTile, dst: str, rs: str, cs: str) -> str:
        rows, cols, row_bytes, swz = self.tile_shape(self.buffers[op.buffer])
        if op.tile.gather is not None:
            return (f"ptc::copy_gathered_sync<{CTYPES[op.tile.dtype]}, {rows}, {cols}, "
                    f"THREADS, {row_bytes}, {'true' if swz else 'false'}>({dst}, g, "
                    f"(long long)({rs}), (int)({cs}), rows, cols_left, "
                    f"{literal(op.pad, 'f32')}, tid{self.gathered_args(op.tile)});")
        # unrolled twice, but not at all in the element-wise variant (global_to_shared.cuh)
        return (f"ptc::copy_tile_sync<{CTYPES[op.tile.dtype]}, {rows}, {cols}, THREADS, "
                f"{row_bytes}, {'true' if swz else 'false'}, ALIGNED ? 2 : 1>({dst}, g, "
                f"(int)({rs}), (int)({cs}), rows_left, cols_left, {literal(op.pad, 'f32')}, tid"
                f"{self.first_args(op.tile)});")

    def async_copy(self, op: ir.CopyTile, dst: str, rs: str) -> str:
        if op.tile.gather is not None:
            rows, cols, row_bytes, swz = self.tile_shape(self.buffers[op.buffer])
            return (f"ptc::copy_gathered_async<{CTYPES[op.tile.dtype]}, {rows}, {cols}, "
                    f"{op.vector}, THREADS, {row_bytes}, {'true' if swz else 'false'}>({dst}, "
                    f"g, (long long)({rs}), rows, cols_left, tid"
                    f"{self.gathered_args(op.tile)});")
        state = self.copy_states.get(op.task)
        if state is not None:
            return (f"{state}.async({dst}, g, (int)({rs}), rows_left, cols_left"
                    f"{self.first_args(op.tile)});")
        rows, cols, row_bytes, swz = self.tile_shape(self.buffers[op.buffer])
        return (f"ptc::copy_tile_async<{CTYPES[op.tile.dtype]}, {rows}, {cols}, {op.vector}, "
                f"THREADS, {row_bytes}, {'true' if swz else 'false'}>({dst}, g, (int)({rs}), "
                f"rows_left, cols_left, tid{self.first_args(op.tile)});")

    def copy_state(self, op: ir.CopyTile) -> None:
        """Declare the per-thread offsets of an async copy whose row stride does not change
        (it depends on dims only): computed once, used by every iteration."""
        if not op.asynchronous or op.task in self.copy_states or op.tile.gather or \
                _mentions_index(op.tile.row_stride):
            return
        b = self.buffers[op.buffer]
        rows, cols, row_bytes, swz = self.tile_shape(b)
        ctype = CTYPES[op.tile.dtype]
        name = f"copy_{op.task}"
        self.emit(f"const ptc::TileCopy<{ctype}, {rows}, {cols}, {op.vector}, THREADS, "
                  f"{row_bytes}, {'true' if swz else 'false'}> {name}("
                  f"(int)({self.scalar_expr(op.tile.row_stride)}), tid);  // {op.task}'s offsets")
        self.copy_states[op.task] = name

    MMA_TILE = "ptc::mma_tile"

    def instruction(self, mma: ir.Mma) -> str:
        if mma.atom.widens_to:      # FP8 widened to f16: each operand's format
            e5m2 = [str(self.operand_dtype(op) == "f8e5m2").lower() for op in (mma.a, mma.b)]
            return f"ptc::Mma16832F8<{e5m2[0]}, {e5m2[1]}>"
        return MMA_INSTRUCTIONS[mma.atom.name, mma.dtype]

    def shared_tile(self, value: str) -> tuple[str, str]:
        home = self.values[value]
        b = self.buffers[home.buffer]
        _, _, row_bytes, swz = self.tile_shape(b)
        # 8-bit operands say so: the loaders read them by ldmatrix or byte by byte
        eb = "" if DTYPE_BYTES[b.dtype] == 2 else f", {DTYPE_BYTES[b.dtype]}"
        return (f"ptc::SharedTile<{row_bytes}, {'true' if swz else 'false'}{eb}>",
                self.slot_address(home.buffer, home.loop))

    def register_operand(self, value: str, which: str, mma: ir.Mma) -> str:
        home = self.values[value]
        if home.dtype in SIXTEEN_BIT:
            return super().register_operand(value, which, mma)
        if DTYPE_BYTES[home.dtype] == 1:     # i8 (FP8) values, packed four to a register
            regs = home.name if home.dtype == "i8" else \
                f"reinterpret_cast<const int8_t*>({home.name})"
            return self.fragment_registers(regs, which, mma, "8")
        # 32-bit operands (tf32) are float registers the instruction reads as bits
        return self.fragment_registers(f"reinterpret_cast<const uint32_t*>({home.name})",
                                       which, mma)


def _mentions_index(e: T.TExpr) -> bool:
    if isinstance(e, T.Scalar):
        return e.kind == "index"
    return any(_mentions_index(c) for c in T.children(e))


__all__ = ["BodyPrinter", "RenderError"]
