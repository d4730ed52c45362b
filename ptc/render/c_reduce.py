"""Reductions printed as C++ statements: over a register tile's slots, across lanes by
exchange, and across warps through a shared scratch. A mixin of CBodyPrinter (c_body.py)."""
from __future__ import annotations

from ..lower import ir
from ..lower.layout import Layout
from .layouts import struct_name

# what a reduction's accumulator starts from, by op (float and integer dtypes)
IDENTITY = {"sum": "0.0f", "max": "(-INFINITY)", "min": "INFINITY"}
INT_IDENTITY = {"sum": "0", "max": "INT_MIN", "min": "INT_MAX"}


class ReduceOps:
    """Reduce and WarpCombine ops; subclasses spell the lane exchange."""

    def combine(self, op: str, a: str, b: str, dtype: str) -> str:
        """`a` and `b` combined by reduction `op` ("sum", "max", "min") in `dtype`."""
        if op == "sum":
            return f"{a} + {b}"
        if dtype in ("f32", "f16", "bf16"):
            return f"{self.FLOAT_FN[op]}({a}, {b})"
        return f"{self.INT_FN[op]}({a}, {b})"

    def lane_xor(self, value: str, mask: int) -> str:
        """`value` of the lane whose id differs from this one's in `mask`."""
        return f"__shfl_xor_sync(0xffffffffu, {value}, {mask})"

    # ---- reductions ------------------------------------------------------------------------
    def Reduce(self, op: ir.Reduce) -> None:
        src = self.layouts[op.source_layout]
        s = struct_name(op.source_layout)
        home, dst = self.register_tile(op.target)
        d = struct_name(home.layout)
        dtype = "f32" if home.dtype in ("f32", "f16", "bf16") else "i32"
        acc_t = "float" if dtype == "f32" else "int"
        ident = IDENTITY[op.op] if dtype == "f32" else INT_IDENTITY[op.op]
        expr = self.value_expr(op.expr, op.source_layout)
        shape = tuple(self.extent(x) for x in op.expr.type.shape)
        cond = self.inside(op.source_layout, op.mask, shape)
        keep = [a for a in range(src.rank) if a != op.axis]
        self.emit(f"// {op.target} = {op.op} over axis {op.axis}  ({op.task})")
        outer = self.block(f"#pragma unroll\n{'  ' * self.depth}for (int sk = 0; sk < {s}::SLOTS{keep[0]}; ++sk)") \
            if keep else self.block("")
        with outer:
            self.emit(f"{acc_t} acc = {ident};")
            with self.block(f"#pragma unroll\n{'  ' * self.depth}for (int sr = 0; sr < {s}::SLOTS{op.axis}; ++sr)"):
                slots = ["sr" if a == op.axis else "sk" for a in range(src.rank)]
                self.emit(f"const int r = {s}::reg({', '.join(slots)});")
                self.coords(op.source_layout, expr, cond)
                step = f"acc = {self.combine(op.op, 'acc', f'({expr})', dtype)};"
                self.emit(f"if ({cond}) {step}" if cond else step)
            for m in op.lane_masks:
                self.emit(f"acc = {self.combine(op.op, 'acc', self.lane_xor('acc', m), dtype)};")
            reg = f"{d}::reg(sk)" if keep else "0"
            self.emit(self.store_register(home, reg, "acc"))
            if op.scratch:
                coord = f"{s}::base{keep[0]}(lane, warp) + {s}::off{keep[0]}(sk)" if keep else "0"
                widx = self.warp_index(src, op.axis)
                addr = (f"{self.slot_address(op.scratch)} + "
                        f"(({coord}) * {op.cross_warps} + {widx}) * 4u")
                self.emit(f"ptc::st_shared<{acc_t}>({addr}, acc);")

    @staticmethod
    def warp_index(lay: Layout, axis: int) -> str:
        """The index, among the warps that share a value, of this warp (reduction order)."""
        parts, radix, weight = [], 1, 1
        for dgt in lay.warps:
            if dgt.along() == axis:
                v = "warp" if radix == 1 else f"(warp / {radix})"
                v = f"({v} % {dgt.size})"
                parts.append(v if weight == 1 else f"{v} * {weight}")
                weight *= dgt.size
            radix *= dgt.size
        return " + ".join(parts) or "0"

    def WarpCombine(self, op: ir.WarpCombine) -> None:
        home, lay = self.register_tile(op.target)
        d = struct_name(home.layout)
        dtype = "f32" if home.dtype in ("f32", "f16", "bf16") else "i32"
        acc_t = "float" if dtype == "f32" else "int"
        self.emit(f"// {op.target}: {op.op} of {op.cross_warps} warps' partials  ({op.task})")
        loop = self.block(f"#pragma unroll\n{'  ' * self.depth}for (int s = 0; s < {d}::SLOTS0; ++s)") \
            if lay.rank else self.block("")
        with loop:
            coord = f"{d}::base0(lane, warp) + {d}::off0(s)" if lay.rank else "0"
            self.emit(f"const uint32_t at = {self.slot_address(op.scratch)} + "
                      f"({coord}) * {op.cross_warps * 4}u;")
            self.emit(f"{acc_t} acc = ptc::ld_shared<{acc_t}>(at);")
            for w in range(1, op.cross_warps):
                self.emit(f"acc = {self.combine(op.op, 'acc', f'ptc::ld_shared<{acc_t}>(at + {w * 4}u)', dtype)};")
            self.emit(self.store_register(home, f"{d}::reg(s)" if lay.rank else "0", "acc"))
