"""Matrix multiplies printed as C++ statements: the frame of a tensor-core tile (its
accumulator, operands and fragment loads) that each backend completes with its own
instruction and tile types, and the CUDA-core product. A mixin of CBodyPrinter (c_body.py)."""
from __future__ import annotations

from ..lower import ir
from .errors import RenderError
from .layouts import struct_name


class MatmulOps:
    """Mma, LoadFragments and SimtMatmul ops; subclasses name the instruction and tiles."""

    WARP = "warp"                   # what the backend calls the threads of one atom
    MMA_TILE = ""                   # the helper that runs a warp's atoms (mma_tile, mfma_tile)
    MMA_WORD = "mma"                # what the comments call the instruction

    # ---- the accumulator ---------------------------------------------------------------------
    def mma_prologue(self, op: ir.Mma) -> ir.RegTile:
        """Say what `op` multiplies and start its accumulator (zeros, or the addend's
        registers); return the accumulator's register tile."""
        out, _ = self.register_tile(op.out)
        product = (f"({op.a.value}^T @ {op.b.value}^T)^T" if op.swapped else
                   f"{op.a.value} @ {op.b.value}")
        self.emit(f"// {op.task}: {op.out} = {op.addend + ' + ' if op.addend else ''}{product}"
                  f" on {op.atom.describe()}, {op.mi}x{op.ni} atoms per {self.WARP}, "
                  f"{op.ks} k-steps"
                  + (" (computed transposed: the instruction's A is b^T, its B a^T)"
                     if op.swapped else ""))
        if op.addend is None:
            with self.unrolled(struct_name(out.layout)):
                self.emit(f"{out.name}[r] = {'0' if out.dtype == 'i32' else '0.0f'};")
        else:
            self.copy_addend(op.addend, out)
        return out

    def copy_addend(self, addend: str, out: ir.RegTile) -> None:
        """Start the accumulator `out` from `addend`'s registers, unless it is already there
        (the same value, or one stored in the accumulator's registers: ptc.lower.inplace)."""
        add, _ = self.register_tile(addend)
        if add.name != out.name:
            with self.unrolled(struct_name(out.layout)):
                self.emit(f"{out.name}[r] = {add.name}[r];")

    # ---- tensor-core tiles: one frame, each backend spells its instruction and tiles ----------
    def instruction(self, mma: ir.Mma) -> str:
        """The C++ type of `mma`'s instruction (its atom and input dtype)."""
        raise RenderError(f"{type(self).__name__} prints no matrix instruction")

    def shared_tile(self, value: str) -> tuple[str, str]:
        """(C type, its address) of the shared tile that holds `value`."""
        raise RenderError(f"{type(self).__name__} reads no operand tiles")

    def operand_dtype(self, op: ir.Operand) -> str:
        """The dtype of an mma operand: its registers', or its shared tile's."""
        home = self.values[op.value]
        return self.buffers[home.buffer].dtype if isinstance(home, ir.InShared) else home.dtype

    def register_operand(self, value: str, which: str, mma: ir.Mma) -> str:
        """The registers of an operand already in the atom's layout, as the helper takes them."""
        return self.fragment_registers(self.values[value].name, which, mma)

    @staticmethod
    def fragment_registers(regs: str, which: str, mma: ir.Mma, suffix: str = "") -> str:
        """`suffix` "8": the registers are int8_t values the loader packs four to a word."""
        if which == "a":
            return f"ptc::RegA{suffix}<{mma.mi}, {mma.ks}>{{{regs}}}"
        return f"ptc::RegB{suffix}<{mma.ni}, {mma.ks}>{{{regs}}}"

    @staticmethod
    def warp_base(out_layout: str, which: str, mma: ir.Mma) -> str:
        """The first row (A) or column (B) of this warp's part of the instruction's
        accumulator: out's rows and columns, or its columns and rows where the product is
        computed transposed."""
        axis = (0 if which == "a" else 1) ^ int(mma.swapped)
        return f"{struct_name(out_layout)}::wbase{axis}(warp)"

    def operand(self, o: ir.Operand, which: str, mma: ir.Mma, out_layout: str) -> str:
        if o.in_registers:
            return self.register_operand(o.value, which, mma)
        trans = "true" if o.transposed else "false"
        tile, addr = self.shared_tile(o.value)
        base = self.warp_base(out_layout, which, mma)
        if which == "a":
            return f"ptc::SharedA<{mma.mi}, {trans}, {tile}>{{{{{addr}}}, {base}}}"
        return f"ptc::SharedB<{mma.ni}, {trans}, {tile}>{{{{{addr}}}, {base}}}"

    def Mma(self, op: ir.Mma) -> None:
        out = self.mma_prologue(op)
        a = self.operand(op.a, "a", op, out.layout)
        b = self.operand(op.b, "b", op, out.layout)
        self.emit(f"{self.MMA_TILE}<{op.mi}, {op.ni}, {op.ks}, {self.instruction(op)}>"
                  f"({out.name}, {a}, {b}, lane);")

    def fragment_loader_args(self, mma: ir.Mma) -> str:
        """Template arguments the fragment loaders take before the atom counts."""
        return ""

    def LoadFragments(self, op: ir.LoadFragments) -> None:
        home, _ = self.register_tile(op.target)
        user = self.fragment_user(op)
        out = self.values[user.out]
        tile_type, addr = self.shared_tile(op.source)
        tile = f"{tile_type}{{{addr}}}"
        trans = "true" if op.transposed else "false"
        base = self.warp_base(out.layout, op.operand, user)
        atoms = user.mi if op.operand == "a" else user.ni
        self.emit(f"// {op.target}: {op.source} as {self.MMA_WORD} operand {op.operand}, "
                  "read once")
        self.emit(f"ptc::load_{op.operand}_fragments<{self.fragment_loader_args(user)}{atoms}, "
                  f"{user.ks}, {trans}>({home.name}, {tile}, {base}, lane);")

    def fragment_user(self, op: ir.LoadFragments) -> ir.Mma:
        """The mma that reads the fragments `op` loads."""
        return next(m for m in ir.walk(self.low.body) if isinstance(m, ir.Mma)
                    and op.target in (m.a.value, m.b.value))

    # ---- on CUDA cores -----------------------------------------------------------------------
    def SimtMatmul(self, op: ir.SimtMatmul) -> None:
        out, lay = self.register_tile(op.out)
        s = struct_name(out.layout)
        self.emit(f"// {op.task}: {op.out} = ... on CUDA cores")
        r = self.renderer(out.layout)
        a = r.render(op.a, ["c0", "kk"])
        b = r.render(op.b, ["kk", "c1"])
        cond = self.inside(out.layout, lay.exceeds(out.shape), out.shape)
        if op.addend:
            self.copy_addend(op.addend, out)
        else:
            with self.unrolled(s):
                self.emit(f"{out.name}[r] = {'0' if out.dtype == 'i32' else '0.0f'};")
        # k outermost: a thread's registers share rows (columns) of the output, so the
        # unrolled inner loop reads each A (B) element once per k for all of them
        with self.block(f"for (int kk = 0; kk < {op.k}; ++kk)"):
            with self.unrolled(s):
                self.coords(out.layout, a, b, cond)
                if out.dtype == "i32":   # i8 operands: exact products, sums modulo 2^32
                    update = (f"{out.name}[r] = (int)((unsigned)({out.name}[r]) + "
                              f"(unsigned)((int)({a}) * (int)({b})));")
                else:
                    update = f"{out.name}[r] = {self.FMA}({a}, {b}, {out.name}[r]);"
                self.emit(f"if ({cond}) {update}" if cond else update)
