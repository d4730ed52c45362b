"""The ops of a lowered kernel (ptc.lower.ir) printed as C++ statements: what the CUDA and
HIP renderers print alike (CBodyPrinter), each subclass spelling its own instructions
(copies, waits, matrix multiplies) and naming its barrier, lane exchange and functions.

Every decision was made by the lowering; this module only spells it: a register tile is
an array indexed through its layout's struct (layouts.py) inside fully unrolled loops, a
shared tile is an offset into dynamic shared memory read through its swizzle, and every
wait and barrier is the op that says so.
"""
from __future__ import annotations

import contextlib
import math
import re

from ..lower import ir
from ..lower.layout import Layout
from ..ops import ELEMENTWISE
from ..sema import typed as T
from ..sema.dtypes import DTYPE_BYTES, FP8
from .cexpr import CTYPES, ExprRenderer
from .layouts import SIXTEEN_BIT, c_storage, owner_expr, struct_name

IDENTITY = {"sum": "0.0f", "max": "(-INFINITY)", "min": "INFINITY"}
INT_IDENTITY = {"sum": "0", "max": "INT_MIN", "min": "INT_MAX"}


class RenderError(Exception):
    """The lowered kernel uses something this renderer cannot print (a lowering bug)."""


class CBodyPrinter:
    """A grid's ops as C++ statements; subclasses print the backend's own ops."""

    ctypes = CTYPES                 # C types of the dtypes
    SPELLING = "c"                  # the attribute of ptc.ops.Op that spells its function
    BARRIER = "__syncthreads();"
    BLOCK_ID = "blockIdx.x"
    FMA = "fmaf"
    FLOAT_FN = {"max": "fmaxf", "min": "fminf"}
    INT_FN = {"max": "max", "min": "min"}

    def combine(self, op: str, a: str, b: str, dtype: str) -> str:
        if op == "sum":
            return f"{a} + {b}"
        if dtype in ("f32", "f16", "bf16"):
            return f"{self.FLOAT_FN[op]}({a}, {b})"
        return f"{self.INT_FN[op]}({a}, {b})"

    WARP = "warp"                   # what the backend calls the threads of one atom

    def mma_prologue(self, op: ir.Mma) -> ir.RegTile:
        """Say what `op` multiplies and start its accumulator (zeros, or the addend's
        registers); return the accumulator's register tile."""
        out, _ = self.register_tile(op.out)
        product = (f"({op.a.value}^T @ {op.b.value}^T)^T" if op.swapped else
                   f"{op.a.value} @ {op.b.value}")
        self.emit(f"// {op.task}: {op.out} = {op.addend + ' + ' if op.addend else ''}{product}"
                  f" on {op.atom.name}, {op.mi}x{op.ni} atoms per {self.WARP}, {op.ks} k-steps"
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

    def prologue(self) -> None:
        """What the kernel sets up after its register declarations, before its ops."""

    def lane_xor(self, value: str, mask: int) -> str:
        """`value` of the lane whose id differs from this one's in `mask`."""
        return f"__shfl_xor_sync(0xffffffffu, {value}, {mask})"

    def __init__(self, low: ir.LoweredKernel, kernel: T.TypedKernel, tiles: dict[str, int]):
        self.low = low
        self.kernel = kernel
        self.tiles = tiles
        self.values = dict(low.values)
        self.layouts = {lay.name: lay for lay in low.layouts}
        self.buffers = {b.name: b for b in low.buffers}
        self.lines: list[str] = []
        self.depth = 1
        self.index_override: dict[str, str] = {}
        # loops whose ring slots and mbarrier phases count uses across enclosing loops
        self.use_counters: set[str] = set()
        self.copy_states: dict[str, str] = {}    # task -> its TileCopy, built before the loops
        self.loop_trips: dict[str, str] = {}
        # the value, layout and register variable that the element being computed belongs to
        self.current: tuple[str, str] | None = None

    # ---- output ---------------------------------------------------------------------------
    def emit(self, line: str = "") -> None:
        self.lines.append("  " * self.depth + line if line else "")

    def block(self, head: str):
        printer = self

        class _Block:
            def __enter__(self):
                printer.emit(head + " {" if head else "{")
                printer.depth += 1

            def __exit__(self, *exc):
                printer.depth -= 1
                printer.emit("}")
        return _Block()

    def iteration(self, loop: str) -> str:
        """What picks a ring slot in `loop`: its index, or its count of uses so far."""
        return f"u_{loop}" if loop in self.use_counters else f"i_{loop}"

    # ---- names ------------------------------------------------------------------------------
    def scalar(self, name: str) -> str:
        if name in self.index_override:
            return self.index_override[name]
        if name in self.tiles:
            return str(self.tiles[name])
        for d in self.kernel.dims:
            if d.name == name:
                return str(d.static) if d.static is not None else f"d_{name}"
        for p in self.kernel.inputs:
            if p.name == name:
                return f"p_{name}"
        return f"i_{name}"

    def extent(self, e) -> int:
        if isinstance(e, int):
            return e
        if e in self.tiles:
            return self.tiles[e]
        static = self.kernel.dim(e).static
        if static is None:
            raise RenderError(f"{e} is not known at compile time")
        return static

    def scalar_expr(self, e: T.TExpr) -> str:
        """A scalar expression: index arithmetic (sizes, offsets, bounds) in C's own
        integer promotion -- dims are 64-bit, so offsets that involve them are too --
        and anything else with the language's semantics (cexpr)."""
        if e.type.dtype in ("i32", "bool") and not e.type.shape:
            out = self.index_expr(e)
            if out is not None:
                return out
        return ExprRenderer(self.read_error, self.scalar, self.extent, self.SPELLING).render(e, [])

    INDEX_OPS = {"add": "+", "sub": "-", "mul": "*", "lt": "<", "le": "<=", "gt": ">",
                 "ge": ">=", "eq": "==", "ne": "!=", "and": "&&", "or": "||"}
    BIT_OPS = {"bitand": "&", "bitor": "|", "xor": "^"}

    def function(self, op: str) -> str:
        """The backend's spelling of a function of the op table."""
        return getattr(ELEMENTWISE[op], self.SPELLING)

    def index_expr(self, e: T.TExpr) -> str | None:
        if isinstance(e, T.Const):
            return str(int(e.value)) if e.type.dtype == "i32" else ("true" if e.value else "false")
        if isinstance(e, T.Scalar):
            return self.scalar(e.name)
        if isinstance(e, T.Elementwise):
            args = [self.index_expr(a) for a in e.args]
            if any(a is None for a in args):
                return None
            if e.op in self.INDEX_OPS:
                return f"({args[0]} {self.INDEX_OPS[e.op]} {args[1]})"
            if e.op in self.BIT_OPS:        # on i32 values, as the language defines them
                return f"((int)({args[0]}) {self.BIT_OPS[e.op]} (int)({args[1]}))"
            if e.op in ("shl", "shr"):
                return f"{self.function(e.op)}((int)({args[0]}), (int)({args[1]}))"
            if e.op == "floordiv":
                return f"ptc::floordiv({args[0]}, {args[1]})"
            if e.op == "mod":
                return f"ptc::floormod({args[0]}, {args[1]})"
            if e.op in ("min", "max"):
                return f"{self.INT_FN[e.op]}((long long){args[0]}, (long long){args[1]})"
            if e.op == "not":
                return f"(!{args[0]})"
            if e.op == "neg":
                return f"(-{args[0]})"
        return None

    @staticmethod
    def read_error(name, idx):
        raise RenderError(f"{name} read in a scalar expression")

    def home(self, name: str):
        return self.values[name]

    def register_tile(self, name: str) -> tuple[ir.RegTile, Layout]:
        home = self.values[name]
        if not isinstance(home, ir.RegTile):
            raise RenderError(f"{name} is not in registers")
        return home, self.layouts[home.layout]

    # ---- shared memory ----------------------------------------------------------------------
    def slot_address(self, buffer: str, loop: str = "", ahead: int = 0) -> str:
        b = self.buffers[buffer]
        base = f"smem + {b.offset}u" if b.offset else "smem"
        if b.slots > 1 and not b.plan_buffer:   # scratch: one copy per consumer warpgroup
            return f"{base} + part * {b.slot_bytes}u"
        if b.slots > 1 and loop:
            it = self.iteration(loop) if not ahead else f"(i_{loop} + {ahead})"
            return f"{base} + ({it} % {b.slots}) * {b.slot_bytes}u"
        return base

    @staticmethod
    def tile_shape(b: ir.Buffer) -> tuple[int, int, int, bool]:
        """(rows, cols, row bytes, swizzled) of a buffer's slot."""
        esize = DTYPE_BYTES[b.dtype]
        if b.layout is not None:
            return b.layout.rows, b.layout.cols, b.layout.row_bytes, b.layout.swizzle == "xor"
        cols = b.shape[-1] if b.shape else 1
        rows = math.prod(b.shape[:-1]) if len(b.shape) > 1 else 1
        return rows, cols, cols * esize, False

    def shared_read(self, home: ir.InShared, name: str, coords: list[str]) -> str:
        b = self.buffers[home.buffer]
        rows, cols, row_bytes, swz = self.tile_shape(b)
        esize = DTYPE_BYTES[b.dtype]
        coords = list(coords)
        if home.split and coords:   # the consumer warpgroup's rows of the tile
            coords[0] = f"({coords[0]}) + {self.index_override['%row0']}"
        if len(b.shape) == 2:
            row, col = coords
        elif len(b.shape) == 1:
            row, col = "0", coords[0]
        else:
            row, col = "0", "0"
        if b.layout is not None and b.layout.swizzle == "tma":
            addr = (f"{self.slot_address(home.buffer, home.loop)} + "
                    f"ptc::tma_offset<{b.layout.span}, {b.layout.panel_bytes}>({row}, "
                    f"({col}) * {esize})")
            return f"ptc::ld_shared<{self.ctypes[b.dtype]}>({addr})"
        addr = (f"{self.slot_address(home.buffer, home.loop)} + "
                f"ptc::tile_offset<{row_bytes}, {'true' if swz else 'false'}>({row}, "
                f"({col}) * {esize})")
        return f"ptc::ld_shared<{self.ctypes[b.dtype]}>({addr})"

    # ---- expressions over a layout's elements -------------------------------------------------
    def renderer(self, layout: str, r: str = "r") -> ExprRenderer:
        """Expressions for the element that register `r` of `layout` holds."""
        lay = self.layouts[layout]
        coords = [f"c{a}" for a in range(lay.rank)]

        def read(name: str, idx: list[str]) -> str:
            home = self.values.get(name)
            if isinstance(home, ir.InShared):
                return self.shared_read(home, name, idx)
            if isinstance(home, ir.RegTile):
                vlay = self.layouts[home.layout]
                ctype, _, packed = c_storage(home, vlay)
                if home.layout == layout and list(idx) == coords:
                    reg = r
                else:
                    slots = []
                    for axis, token in enumerate(idx):
                        if token in coords and vlay.shape[axis] == 1 < \
                                lay.shape[coords.index(token)]:
                            slots.append("0")           # broadcast along this axis
                        elif token in coords:
                            slots.append(f"{struct_name(layout)}::slot{coords.index(token)}({r})")
                        elif token == "0":
                            slots.append("0")
                        else:
                            raise RenderError(f"{name} is read at {token}: not a slot of "
                                              f"{layout} (the lowering should convert it)")
                    reg = f"{struct_name(home.layout)}::reg({', '.join(slots)})"
                c = home.name
                if home.dtype in SIXTEEN_BIT:
                    t = self.ctypes[home.dtype]
                    return (f"ptc::unpack<{t}>({c}, {reg})" if packed
                            else f"ptc::Half16<{t}>::lo({c}[{reg}])")
                return f"{c}[{reg}]"
            if isinstance(home, T.TileType) or home is None:
                return f"v_{name}"
            raise RenderError(f"cannot read {name}")

        return ExprRenderer(read, self.scalar, self.extent, self.SPELLING)

    def coords(self, layout: str, *used: str) -> None:
        """Declare c0, c1: the coordinates of register r (those the `used` texts mention;
        all of them when none is given)."""
        lay = self.layouts[layout]
        s = struct_name(layout)
        for a in range(lay.rank):
            if not used or any(re.search(rf"\bc{a}\b", text) for text in used):
                self.emit(f"const int c{a} = {s}::base{a}(lane, warp) + {s}::off{a}({s}::slot{a}(r));")

    def inside(self, layout: str, mask: tuple[bool, ...], shape: tuple[int, ...]) -> str:
        conds = [f"c{a} < {shape[a]}" for a, m in enumerate(mask) if m]
        return " && ".join(conds)

    def value_expr(self, e: T.TExpr, layout: str) -> str:
        lay = self.layouts[layout]
        idx = [f"c{a}" for a in range(lay.rank)]
        return self.renderer(layout).render(e, idx)

    # ---- ops --------------------------------------------------------------------------------
    def ops(self, ops) -> None:
        for op in ops:
            getattr(self, type(op).__name__)(op)

    def Barrier(self, op: ir.Barrier) -> None:
        self.emit(f"{self.BARRIER}  // {op.why}")

    def Loop(self, op: ir.Loop) -> None:
        extent = self.scalar(op.dim)
        if op.until is not None:
            extent = f"min((long long)({extent}), (long long)({self.scalar_expr(op.until)}))"
        trips = f"trips_{op.var}"
        self.emit(f"// for {op.var}: {op.size} of {op.dim}"
                  + (f", {op.stages} stages" if op.stages > 1 else ""))
        with self.block(""):
            self.emit(f"const int {trips} = (int)ptc::tiles({extent}, {op.size});")
            self.loop_trips[op.var] = trips
            if op.fill:
                with self.block(""):
                    self.emit(f"const int i_{op.var} = 0;  // the first stages - 1 iterations' copies")
                    self.ops(op.fill)
            bound = f"{trips} - {op.peel}" if op.peel else trips
            with self.block(f"for (int i_{op.var} = 0; i_{op.var} < {bound}; ++i_{op.var})"):
                self.ops(op.body)
                if op.var in self.use_counters:
                    self.emit(f"++u_{op.var};")
            self.ops(op.drain)

    def Iteration(self, op: ir.Iteration) -> None:
        """Another iteration's ops in a rotated loop: its index and ring uses shadow the
        loop's own inside the block."""
        var, trips = f"i_{op.var}", self.loop_trips[op.var]
        uses = f"u_{op.var}" if op.var in self.use_counters else None
        if op.which == "first":                # in the fill, where i_<var> is 0
            with self.block(f"if ({trips} > 0)"):
                self.ops(op.body)
        elif op.which == "last":
            with self.block(f"if ({trips} > 0)"):
                self.emit(f"const int {var} = {trips} - 1;  // the last iteration")
                self.emit(f"(void){var};")
                self.ops(op.body)
                if uses:
                    self.emit(f"++{uses};")
        else:
            names = [var] + ([uses] if uses else [])
            with self.block(""):
                self.emit(f"// iteration {op.var} + 1 (the loop is rotated)")
                self.emit("const int " + ", ".join(f"{n}_next = {n} + 1" for n in names) + ";")
                with self.block(""):
                    self.emit("const int " + ", ".join(f"{n} = {n}_next" for n in names) + ";")
                    self.emit("(void)" + "; (void)".join(names) + ";")
                    self.ops(op.body)

    # ---- copies -----------------------------------------------------------------------------
    def CopyTile(self, op: ir.CopyTile) -> None:
        """The frame of a tile copy: its guard, origin and extents; the backend spells the
        copy itself (sync_copy, async_copy), and an async one falls back to the element-
        wise copy where the launch found the vector copies' alignment missing."""
        tile = op.tile
        origin, rs, cs, rows_left, cols_left = self.tile_bounds(tile, op.loop or None, op.ahead)
        dst = self.slot_address(op.buffer, op.loop, op.ahead)
        guard = None
        if op.guard and op.loop:
            guard = f"i_{op.loop} + {op.ahead} < {self.loop_trips[op.loop]}" if op.ahead \
                else f"0 < {self.loop_trips[op.loop]}"
        self.emit(f"// {op.task}: {tile.tensor}[{tile.rows}x{tile.cols}] -> {op.buffer}"
                  + (f", {op.ahead} iteration(s) ahead" if op.ahead else ""))
        with self.block(f"if ({guard})" if guard else ""):
            self.emit(f"const {self.ctypes[tile.dtype]}* g = g_{tile.tensor} + ({origin});")
            self.emit(f"const int rows_left = {rows_left}, cols_left = {cols_left};")
            firsts = self.tile_firsts(tile, op.loop or None, op.ahead)
            if firsts:
                self.emit(f"const int rows_first = {firsts[0]}, cols_first = {firsts[1]};")
            if tile.gather is not None:
                self.gather_rows(tile, op.loop or None, op.ahead)
            sync = self.sync_copy(op, dst, rs, cs)
            if not op.asynchronous:
                self.emit(sync)
                return
            fast = self.async_copy(op, dst, rs)
            if op.fallback_vector:
                self.emit(f"if (ALIGNED) {fast}")
                self.emit(f"else {sync}")
            else:
                self.emit(fast)

    def gather_rows(self, tile: ir.GlobalTile, ahead_var: str | None = None,
                    ahead: int = 0) -> None:
        """Declare `rows`, the positions of a gathered tile's rows (GatherRows in the copy
        headers): its index tile's address, stride and length, the index load's pad and
        the gathered dim."""
        index = tile.gather.tile
        if index.row_low or index.col_low or index.col_step != 1:
            raise RenderError(f"the positions of {tile.tensor}'s gathered rows are an offset "
                              "tile (not supported yet)")
        origin, _, cs, rows_left, cols_left = self.tile_bounds(index, ahead_var, ahead)
        with self.iteration_ahead(ahead_var, ahead):
            bound = self.scalar_expr(tile.gather.bound)
        self.emit(f"const ptc::GatherRows rows{{g_{index.tensor} + ({origin}), (int)({cs}), "
                  f"({rows_left}) > 0 ? {cols_left} : 0, {tile.gather.pad}, "
                  f"(long long)({bound})}};")

    @staticmethod
    def gathered_args(tile: ir.GlobalTile) -> str:
        """A gathered copy's arguments after the thread: its first column."""
        return ", cols_first" if tile.col_low else ", 0"

    @staticmethod
    def first_args(tile: ir.GlobalTile) -> str:
        """The arguments a copy of an offset tile takes after the thread (rows_first and
        cols_first, in scope where CopyTile declared them); none for other tiles."""
        return ", rows_first, cols_first" if tile.row_low or tile.col_low else ""

    def sync_copy(self, op: ir.CopyTile, dst: str, rs: str, cs: str) -> str:
        """The statement of an element-wise copy of `op`'s tile (g, rows_left, cols_left
        are in scope, and rows_first, cols_first for an offset tile)."""
        raise RenderError(f"{type(self).__name__} prints no element-wise copy")

    def async_copy(self, op: ir.CopyTile, dst: str, rs: str) -> str:
        """The statement of `op`'s vector copy."""
        raise RenderError(f"{type(self).__name__} prints no asynchronous copy")

    # ---- tensor-core tiles: one frame, each backend spells its instruction and tiles ----------
    MMA_TILE = ""                   # the helper that runs a warp's atoms (mma_tile, mfma_tile)

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

    MMA_WORD = "mma"                # what the comments call the instruction

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

    @contextlib.contextmanager
    def iteration_ahead(self, ahead_var: str | None, ahead: int):
        """Scalar expressions rendered inside read loop `ahead_var`'s index `ahead`
        iterations on (a prefetch's)."""
        saved = dict(self.index_override)
        if ahead_var is not None and ahead:
            self.index_override[ahead_var] = f"(i_{ahead_var} + {ahead})"
        try:
            yield
        finally:
            self.index_override = saved

    def tile_firsts(self, tile: ir.GlobalTile, ahead_var: str | None = None,
                    ahead: int = 0) -> tuple[str, str] | None:
        """(rows, cols) of an offset tile that lie before the tensor, as C expressions
        (None for a tile that never starts before it)."""
        if not (tile.row_low or tile.col_low):
            return None
        with self.iteration_ahead(ahead_var, ahead):
            return tuple(self.first(start, step) if low else "0"
                         for start, low, step in ((tile.row_start, tile.row_low, tile.row_step),
                                                  (tile.col_start, tile.col_low, tile.col_step)))

    def first(self, start: T.TExpr, step: int) -> str:
        """The first of a tile's rows (columns) at or after the tensor's start: those
        before it are ceil(-start / step) where start < 0."""
        before = f"{self.INT_FN['max']}(-(long long)({self.scalar_expr(start)}), 0LL)"
        return f"(int)({before} + {step - 1}) / {step}" if step != 1 else f"(int){before}"

    def tile_bounds(self, tile: ir.GlobalTile, ahead_var: str | None, ahead: int) -> tuple[str, str, str, str, str]:
        """(origin, row stride, col stride, rows left, cols left) as C expressions."""
        with self.iteration_ahead(ahead_var, ahead):
            origin = self.scalar_expr(tile.origin)
            rs = self.scalar_expr(tile.row_stride)
            cs = self.scalar_expr(tile.col_stride)
            rows_left = self.left(tile.row_bound, tile.row_start, tile.rows, tile.row_step)
            cols_left = self.left(tile.col_bound, tile.col_start, tile.cols, tile.col_step)
            if tile.valid is not None:
                rows_left = f"(({self.scalar_expr(tile.valid)}) ? {rows_left} : 0)"
        return origin, rs, cs, rows_left, cols_left

    def left(self, bound: T.TExpr, start: T.TExpr, n: int, step: int = 1) -> str:
        """Rows (or columns) of the tile inside the tensor, at most n (negative: none);
        a strided tile's every step-th: ceil((bound - start) / step), which C's division
        keeps at most 0 where the difference is."""
        if isinstance(bound, T.Const) and isinstance(start, T.Const) and \
                bound.value - start.value >= n * step:
            return str(n)
        gap = f"(long long)({self.scalar_expr(bound)}) - (long long)({self.scalar_expr(start)})"
        if step != 1:
            gap = f"({gap} + {step - 1}) / {step}"
        return f"(int){self.INT_FN['min']}({gap}, {n}LL)"

    # ---- elementwise --------------------------------------------------------------------------
    def Compute(self, op: ir.Compute) -> None:
        home, lay = self.register_tile(op.target)
        s = struct_name(home.layout)
        ctype, _, packed = c_storage(home, lay)
        self.emit(f"// {op.target} = ...  ({op.task})")
        cond = self.inside(home.layout, op.mask, home.shape)
        value = op.expr
        if home.dtype in SIXTEEN_BIT and isinstance(value, T.Convert) and \
                value.type.dtype == home.dtype:
            value = value.arg     # packing rounds to the dtype: no second rounding
        expr = self.value_expr(value, home.layout)
        if home.dtype in SIXTEEN_BIT:
            t = self.ctypes[home.dtype]
            if packed:
                with self.block(f"#pragma unroll\n{'  ' * self.depth}for (int j = 0; j < {s}::SIZE / 2; ++j)"):
                    self.emit("float x[2];")
                    with self.block("#pragma unroll\n" + "  " * self.depth + "for (int h = 0; h < 2; ++h)"):
                        self.emit("const int r = 2 * j + h;")
                        self.coords(home.layout, expr, cond)
                        self.emit(f"x[h] = {f'({cond}) ? {expr} : 0.0f' if cond else expr};")
                    self.emit(f"{home.name}[j] = ptc::Half16<{t}>::pack(x[0], x[1]);")
                return
            with self.unrolled(s):
                self.coords(home.layout, expr)
                self.emit(f"{home.name}[r] = ptc::Half16<{t}>::one({expr});")
            return
        if home.dtype in FP8:
            if isinstance(value, T.Convert) and value.type.dtype == home.dtype and \
                    value.arg.type.dtype != home.dtype:
                # the conversion's code itself, not its value (round_f8*) coded again
                arg = self.value_expr(value.arg, home.layout)
                expr = f"ptc::to_{home.dtype}((float)({arg}))"
            else:
                expr = f"ptc::from_f32<{ctype}>({expr})"
        elif ctype != "float":
            expr = f"({ctype})({expr})"
        with self.unrolled(s):
            self.coords(home.layout, expr, cond)
            value = expr
            if cond:
                self.emit(f"if ({cond}) {home.name}[r] = {value};")
            else:
                self.emit(f"{home.name}[r] = {value};")

    def unrolled(self, struct: str, var: str = "r", count: str | None = None):
        n = count or f"{struct}::SIZE"
        return self.block(f"#pragma unroll\n{'  ' * self.depth}for (int {var} = 0; {var} < {n}; ++{var})")

    def store_register(self, home: ir.RegTile, reg: str, value: str) -> str:
        lay = self.layouts[home.layout]
        _, _, packed = c_storage(home, lay)
        if home.dtype in SIXTEEN_BIT:
            t = self.ctypes[home.dtype]
            if packed:
                return f"ptc::set_half<{t}>({home.name}, {reg}, {value});"
            return f"{home.name}[{reg}] = ptc::Half16<{t}>::one({value});"
        if home.dtype in FP8:     # a value of the dtype, as f32: its code
            return f"{home.name}[{reg}] = ptc::from_f32<{self.ctypes[home.dtype]}>({value});"
        return f"{home.name}[{reg}] = {value};"

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

    # ---- matrix multiplies -------------------------------------------------------------------
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

    # ---- stores --------------------------------------------------------------------------------
    def StoreTile(self, op: ir.StoreTile) -> None:
        home, lay = self.register_tile(op.value)
        s = struct_name(home.layout)
        tile = op.tile
        ctype = self.ctypes[tile.dtype]
        origin, rs, cs, rows_left, cols_left = self.tile_bounds(tile, None, 0)
        _, _, packed = c_storage(home, lay)
        self.emit(f"// {op.task}: {tile.tensor}[{tile.rows}x{tile.cols}] <- {op.value}"
                  + (" (atomic add)" if op.atomic else ""))
        rank = lay.rank
        row = "c0" if rank == 2 else "0"
        col = "c1" if rank == 2 else ("c0" if rank == 1 else "0")
        shape = home.shape
        extra = [f"c{a} < {shape[a]}" for a, m in enumerate(lay.exceeds(shape)) if m]
        with self.block(""):
            self.emit(f"{ctype}* g = g_{tile.tensor} + ({origin});")
            if tile.gather is not None:     # scattered rows: anywhere in the tensor
                self.emit(f"const long long rs = (long long)({rs});")
                self.emit(f"const int cs = (int)({cs});")
                self.gather_rows(tile)
            else:
                self.emit(f"const int rs = (int)({rs}), cs = (int)({cs});  // offsets in the tile: 32-bit")
            self.emit(f"const int rows_left = {rows_left}, cols_left = {cols_left};")
            owner = f"if ({s}::owner(lane, warp))" if "true" not in \
                self.owner_text(lay) else ""
            with self.block(owner):
                variants = [(op.vector, "ALIGNED")] if op.vector > 1 else []
                if op.fallback_vector or op.vector == 1:
                    variants.append((1, None))
                for k, (vec, when) in enumerate(variants):
                    head = ("if (ALIGNED)" if when else ("else" if k else "")) if len(variants) > 1 else ""
                    with self.block(head):
                        with self.block(f"#pragma unroll\n{'  ' * self.depth}for (int r = 0; r < {s}::SIZE; r += {vec})"):
                            self.coords(home.layout)
                            conds = [f"{row} < rows_left", f"{col} < cols_left"] + extra
                            self.emit(f"if (!({' && '.join(conds)})) continue;")
                            at = row
                            if tile.gather is not None:   # its row's position, or none
                                self.emit(f"const int at = rows.at({row});")
                                self.emit("if (at < 0) continue;")
                                at = "at"
                            self.emit_store(op, home, vec, packed, at, col, ctype)

    def owner_text(self, lay: Layout) -> str:
        return owner_expr(lay)

    def emit_store(self, op, home, vec, packed, row, col, ctype) -> None:
        where = f"g + ({row} * rs + {col} * cs)"
        dtype = op.tile.dtype
        if home.dtype in SIXTEEN_BIT:
            t = self.ctypes[home.dtype]
            if vec == 1:
                value = f"ptc::unpack<{t}>({home.name}, r)" if packed \
                    else f"ptc::Half16<{t}>::lo({home.name}[r])"
            elif vec == 2 and packed and dtype == home.dtype:
                self.emit(f"*PTC_GLOBAL(reinterpret_cast<uint32_t*>({where})) = {home.name}[r >> 1];")
                return
            else:
                words = vec // 2
                vt = {1: "uint32_t", 2: "uint2", 4: "uint4"}[words]
                if words == 1:
                    self.emit(f"*PTC_GLOBAL(reinterpret_cast<uint32_t*>({where})) = {home.name}[r >> 1];")
                else:
                    parts = ", ".join(f"{home.name}[(r >> 1) + {w}]" for w in range(words))
                    self.emit(f"*PTC_GLOBAL(reinterpret_cast<{vt}*>({where})) = make_{vt}({parts});")
                return
        else:
            value = f"{home.name}[r]"
        if vec == 1:
            if home.dtype == dtype and dtype in ("i32", "i8", "u8", "f8e4m3", "f8e5m2", "bool"):
                v = value     # as it is: through f32, an i32 past 2^24 would be rounded
            elif ctype != "float":
                v = f"ptc::from_f32<{ctype}>(ptc::f32({value}))"
            else:
                v = f"ptc::f32({value})"
            if op.atomic:
                self.emit(f"atomicAdd({where}, {v});")
            else:
                self.emit(f"*PTC_GLOBAL({where}) = {v};")
            return
        if ctype == "float":
            vt = {2: "float2", 4: "float4"}[vec]
            parts = ", ".join(f"{home.name}[r + {i}]" for i in range(vec))
            self.emit(f"*PTC_GLOBAL(reinterpret_cast<{vt}*>({where})) = make_{vt}({parts});")
            return
        raise RenderError(f"a {vec}-wide store of {home.dtype} registers as {dtype}")

    # ---- layout conversions --------------------------------------------------------------------
    def scratch_tile(self, home: ir.RegTile, scratch: str, layout: str,
                     transposed: bool = False) -> tuple[str, str, str]:
        """(C condition that element (c0, c1) is in the tile -- "" where the layout covers
        the tile exactly --, its word address, word type); `transposed`: the scratch holds
        the tile's transpose."""
        lay = self.layouts[layout]
        b = self.buffers[scratch]
        shape = b.shape
        conds = [f"c{a} < {home.shape[a]}" for a, m in enumerate(lay.exceeds(home.shape)) if m]
        index = "0"
        if lay.rank == 2:
            index = f"(c1 * {shape[1]} + c0)" if transposed else f"(c0 * {shape[1]} + c1)"
        elif lay.rank == 1:
            index = "c0"
        word = "int" if b.dtype == "i32" else "float"
        return " && ".join(conds), f"{self.slot_address(scratch)} + {index} * 4u", word

    @staticmethod
    def only_if(cond: str) -> str:
        return f"if ({cond}) " if cond else ""

    def SpillTile(self, op: ir.SpillTile) -> None:
        home, lay = self.register_tile(op.value)
        s = struct_name(home.layout)
        cond, addr, word = self.scratch_tile(home, op.scratch, home.layout)
        rd = self.renderer(home.layout)
        coords = [f"c{a}" for a in range(lay.rank)]
        self.emit(f"// {op.task}: spill {op.value} (layout {home.layout}) to {op.scratch}")
        if op.vector == 2:   # registers r, r + 1 hold (c0, c1), (c0, c1 + 1)
            var = T.Var(op.value, T.TileType(home.dtype))
            value = rd.render(var, coords)
            nxt = self.renderer(home.layout, "r + 1").render(var, coords)
            with self.block(f"#pragma unroll\n{'  ' * self.depth}for (int r = 0; r < {s}::SIZE; r += 2)"):
                self.coords(home.layout)
                self.emit(f"{self.only_if(cond)}ptc::st_shared<float2>({addr}, "
                          f"make_float2({value}, {nxt}));")
            return
        value = rd.render(T.Var(op.value, T.TileType(home.dtype)), coords)
        with self.unrolled(s):
            self.coords(home.layout)
            self.emit(f"{self.only_if(cond)}ptc::st_shared<{word}>({addr}, ({word})({value}));")

    def FillTile(self, op: ir.FillTile) -> None:
        home, lay = self.register_tile(op.target)
        s = struct_name(home.layout)
        cond, addr, word = self.scratch_tile(home, op.scratch, home.layout, op.transposed)
        self.emit(f"// {op.task}: {op.target} = the spilled values"
                  + (", transposed," if op.transposed else "") + f" in layout {home.layout}")
        if op.vector == 2:
            with self.block(f"#pragma unroll\n{'  ' * self.depth}for (int r = 0; r < {s}::SIZE; r += 2)"):
                self.coords(home.layout)
                load = f"ptc::ld_shared<float2>({addr})"
                self.emit(f"const float2 x = ({cond}) ? {load} : make_float2(0.0f, 0.0f);"
                          if cond else f"const float2 x = {load};")
                self.emit(self.store_register(home, "r", "x.x"))
                self.emit(self.store_register(home, "r + 1", "x.y"))
            return
        with self.unrolled(s):
            self.coords(home.layout)
            load = f"(float)ptc::ld_shared<{word}>({addr})"
            self.emit(f"const float x = ({cond}) ? {load} : 0.0f;" if cond
                      else f"const float x = {load};")
            self.emit(self.store_register(home, "r", "x"))
