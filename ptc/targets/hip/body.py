"""The ops of a lowered kernel (ptc.lower.ir) that HIP spells its own way (gfx90a, gfx942):
register-staged tile copies landing at the plan's waits, MFMA tiles with operands from LDS
or registers, wave64 lane exchanges, and clang builtins in place of HIP's device library
(targets/hip/templates; the rest: ptc.render.c_body)."""
from __future__ import annotations

from ptc.lower import ir
from ptc.render.c_body import CBodyPrinter, RenderError
from ptc.sema.dtypes import DTYPE_BYTES
from ptc.render.cexpr import CTYPES, literal
from ptc.render.layouts import SIXTEEN_BIT

HIP_CTYPES = {**CTYPES, "f16": "ptc::f16", "bf16": "ptc::bf16"}

# the MFMA instruction (mfma.h) of an atom and its input dtype
MFMA_INSTRUCTIONS = {("mfma.f32.16x16x16", "f16"): "ptc::Mfma<16, 16, 16, false>",
                     ("mfma.f32.16x16x16", "bf16"): "ptc::Mfma<16, 16, 16, true>",
                     ("mfma.f32.32x32x8", "f16"): "ptc::Mfma<32, 32, 8, false>",
                     ("mfma.f32.32x32x8", "bf16"): "ptc::Mfma<32, 32, 8, true>",
                     ("mfma.i32.16x16x16i8", "i8"): "ptc::MfmaI8<16, 16, 16>",
                     ("mfma.i32.32x32x8i8", "i8"): "ptc::MfmaI8<32, 32, 8>",
                     ("mfma.i32.16x16x32i8", "i8"): "ptc::MfmaI8<16, 16, 32>",
                     ("mfma.i32.32x32x16i8", "i8"): "ptc::MfmaI8<32, 32, 16>"}


class HipBodyPrinter(CBodyPrinter):
    ctypes = HIP_CTYPES
    SPELLING = "hip"
    BARRIER = "ptc::syncthreads();"
    BLOCK_ID = "ptc::block_id()"
    FMA = "__builtin_fmaf"
    FLOAT_FN = {"max": "__builtin_fmaxf", "min": "__builtin_fminf"}
    INT_FN = {"max": "ptc::max", "min": "ptc::min"}
    WARP = "wave"
    MMA_TILE = "ptc::mfma_tile"
    MMA_WORD = "MFMA"

    def lane_xor(self, value: str, mask: int) -> str:
        return f"ptc::lane_xor<{mask}>({value})"

    # ---- copies -------------------------------------------------------------------------------
    def staged_copies(self) -> dict[str, ir.CopyTile]:
        return {op.task: op for op in ir.walk(self.low.body)
                if isinstance(op, ir.CopyTile) and op.staged}

    def transposed(self, buffer: str) -> bool:
        lay = self.buffers[buffer].layout
        return lay is not None and lay.transposed

    def staged_type(self, op: ir.CopyTile) -> str:
        rows, cols, row_bytes, swz = self.tile_shape(self.buffers[op.buffer])
        if self.transposed(op.buffer):
            return (f"ptc::StagedTileK8<{self.ctypes[op.tile.dtype]}, {rows}, {cols}, "
                    f"{op.vector}, THREADS, {row_bytes}>")
        return (f"ptc::StagedTile<{self.ctypes[op.tile.dtype]}, {rows}, {cols}, {op.vector}, "
                f"THREADS, {row_bytes}, {'true' if swz else 'false'}>")

    def prologue(self) -> None:
        for task, op in self.staged_copies().items():
            self.emit(f"{self.staged_type(op)} staged_{task};  // {task}'s copy in flight")
            self.emit(f"staged_{task}.live = false;")

    def CommitGroup(self, op: ir.CommitGroup) -> None:
        """A group is what the next wait lands: nothing to issue."""

    def WaitGroups(self, op: ir.WaitGroups) -> None:
        self.emit(f"// wait for {', '.join(op.buffers)}: the copies in flight land in LDS"
                  + (f" (the plan lets {op.pending} group(s) stay in flight)" if op.pending else ""))
        for task in op.lands:
            self.emit(f"staged_{task}.land(tid);")

    def sync_copy(self, op: ir.CopyTile, dst: str, rs: str, cs: str) -> str:
        rows, cols, row_bytes, swz = self.tile_shape(self.buffers[op.buffer])
        ctype = self.ctypes[op.tile.dtype]
        if op.tile.gather is not None:
            args = (f"({dst}, g, (long long)({rs}), (int)({cs}), rows, cols_left, "
                    f"{literal(op.pad, 'f32')}, tid{self.gathered_args(op.tile)});")
            k8 = ", true" if self.transposed(op.buffer) else ""
            return (f"ptc::copy_gathered_sync<{ctype}, {rows}, {cols}, THREADS, {row_bytes}, "
                    f"{'true' if swz else 'false'}{k8}>" + args)
        args = (f"({dst}, g, (int)({rs}), (int)({cs}), rows_left, cols_left, "
                f"{literal(op.pad, 'f32')}, tid{self.first_args(op.tile)});")
        if self.transposed(op.buffer):
            return f"ptc::copy_tile_sync_k8<{ctype}, {rows}, {cols}, THREADS, {row_bytes}>" + args
        return (f"ptc::copy_tile_sync<{ctype}, {rows}, {cols}, THREADS, {row_bytes}, "
                f"{'true' if swz else 'false'}>" + args)

    def async_copy(self, op: ir.CopyTile, dst: str, rs: str) -> str:
        if not op.staged:
            raise RenderError(f"{op.task}: an asynchronous copy that is not staged (HIP has "
                              "no async global -> LDS copy of this width)")
        if op.tile.gather is not None:
            return (f"staged_{op.task}.load_gathered({dst}, g, (long long)({rs}), rows, "
                    f"cols_left, tid{self.gathered_args(op.tile)});")
        if op.resource:     # through a buffer resource (global_to_shared.h)
            by_range = "true" if op.resource == "tile" else "false"
            return (f"staged_{op.task}.load_buffered<{by_range}>({dst}, g, (int)({rs}), "
                    f"rows_left, cols_left, tid, g_{op.tile.tensor}{self.first_args(op.tile)});")
        return (f"staged_{op.task}.load({dst}, g, (int)({rs}), rows_left, cols_left, tid"
                f"{self.first_args(op.tile)});")

    # ---- matrix multiplies ----------------------------------------------------------------------
    def instruction(self, mma: ir.Mma) -> str:
        a = mma.atom
        if not a.full:
            return self.full_instruction(mma)
        # a narrow atom: the instruction, for the part of it the atom uses
        return f"ptc::Narrow<{self.full_instruction(mma)}, {a.m}, {a.n}>"

    def full_instruction(self, mma: ir.Mma) -> str:
        a = mma.atom
        m, n = a.full or (a.m, a.n)
        if a.widens_to or a.fnuz:     # FP8: each operand's format
            e5m2 = [str(self.operand_dtype(op) == "f8e5m2").lower() for op in (mma.a, mma.b)]
            kind = "MfmaFnuz" if a.fnuz else "MfmaF8"   # widened (CDNA2), or FNUZ (CDNA3)
            return f"ptc::{kind}<{m}, {n}, {a.k}, {e5m2[0]}, {e5m2[1]}>"
        try:
            return MFMA_INSTRUCTIONS[a.name, mma.dtype]
        except KeyError:
            raise RenderError(f"no MFMA for {a.name} with {mma.dtype} inputs") from None

    def shared_tile(self, value: str) -> tuple[str, str]:
        home = self.values[value]
        b = self.buffers[home.buffer]
        _, _, row_bytes, swz = self.tile_shape(b)
        addr = self.slot_address(home.buffer, home.loop)
        if self.transposed(home.buffer):
            return f"ptc::SharedTileK8<{row_bytes}>", addr
        eb = "" if DTYPE_BYTES[b.dtype] == 2 else f", {DTYPE_BYTES[b.dtype]}"   # i8: bytes
        return f"ptc::SharedTile<{row_bytes}, {'true' if swz else 'false'}{eb}>", addr

    def register_operand(self, value: str, which: str, mma: ir.Mma) -> str:
        dtype = self.values[value].dtype
        if DTYPE_BYTES[dtype] == 1:     # i8 (FP8) values, packed four to a register
            name = self.values[value].name
            regs = name if dtype == "i8" else f"reinterpret_cast<const int8_t*>({name})"
            return self.fragment_registers(regs, which, mma, "8")
        if dtype not in SIXTEEN_BIT:
            raise RenderError(f"MFMA operand {value} is {dtype}, not 16-bit")
        return super().register_operand(value, which, mma)

    def fragment_loader_args(self, mma: ir.Mma) -> str:
        return f"{self.instruction(mma)}, "


__all__ = ["HipBodyPrinter", "RenderError"]
