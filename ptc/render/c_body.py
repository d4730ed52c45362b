"""The ops of a lowered kernel (ptc.lower.ir) printed as C++ statements: what the CUDA and
HIP renderers print alike (CBodyPrinter), each subclass spelling its own instructions
(copies, waits, matrix multiplies) and naming its barrier, lane exchange and functions.

Every decision was made by the lowering; this module only spells it: a register tile is
an array indexed through its layout's struct (layouts.py) inside fully unrolled loops, a
shared tile is an offset into dynamic shared memory read through its swizzle, and every
wait and barrier is the op that says so. The op families print in their own modules:
global tile copies and stores (c_tiles.py), matrix multiplies (c_matmul.py) and
reductions (c_reduce.py); this one holds the printer's state, names and expressions, the
loops, elementwise ops and layout conversions.
"""
from __future__ import annotations

import math
import re

from ..lower import ir, pairs
from ..lower.layout import Layout
from ..ops import ELEMENTWISE
from ..sema import typed as T
from ..sema.dtypes import DTYPE_BYTES, FP8
from .c_matmul import MatmulOps
from .c_reduce import ReduceOps
from .c_tiles import GlobalTileOps
from .cexpr import CTYPES, ExprRenderer
from .errors import RenderError
from .layouts import SIXTEEN_BIT, c_storage, struct_name


class CBodyPrinter(GlobalTileOps, MatmulOps, ReduceOps):
    """A grid's ops as C++ statements; subclasses print the backend's own ops."""

    ctypes = CTYPES                 # C types of the dtypes
    SPELLING = "c"                  # the attribute of ptc.ops.Op that spells its function
    BARRIER = "__syncthreads();"
    BLOCK_ID = "blockIdx.x"
    FMA = "fmaf"
    FLOAT_FN = {"max": "fmaxf", "min": "fminf"}
    INT_FN = {"max": "max", "min": "min"}

    def packed_words(self, tile: str) -> str | None:
        """A declaration the renderer adds beside register tile `tile` (None: none)."""
        return None

    def prologue(self) -> None:
        """What the kernel sets up after its register declarations, before its ops."""

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
        self.hoisted_copies: dict[int, tuple[str, str, str]] = {}
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
        if len(T.extent_factors(e)) > 1:
            return math.prod(self.extent(f) for f in T.extent_factors(e))
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
        return self.expressions(self.read_error).render(e, [])

    def expressions(self, read) -> ExprRenderer:
        """The expression renderer over `read`, with the lowering's 16-bit arithmetic."""
        return ExprRenderer(read, self.scalar, self.extent, self.SPELLING,
                            {d: self.ctypes[d] for d in self.low.arith16},
                            dict(self.low.int_ranges))

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
        if isinstance(e, T.ElementAt):      # read only where its indices are inside
            # 64-bit, as dims are: it may be multiplied by a stride
            at = f"(long long)g_{e.tensor}[{self.index_expr(e.offset)}]"
            return at if e.valid is None else \
                f"({self.index_expr(e.valid)} ? {at} : {e.pad}LL)"
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

    def shared_read(self, home: ir.InShared, name: str, coords: list[str],
                    row_step: tuple[str, str] | None = None) -> str:
        """A read of `home` at `coords`; `row_step`: the row as (a base, a constant of the
        unrolled register loop), where the row is a register's own coordinate."""
        b = self.buffers[home.buffer]
        rows, cols, row_bytes, swz = self.tile_shape(b)
        esize = DTYPE_BYTES[b.dtype]
        coords = list(coords)
        if home.split and coords:   # the consumer warpgroup's rows of the tile
            coords[0] = f"({coords[0]}) + {self.index_override['%row0']}"
            if row_step:
                row_step = (f"{row_step[0]} + {self.index_override['%row0']}", row_step[1])
        if len(b.shape) == 2:
            row, col = coords
        elif len(b.shape) == 1:
            row, col = "0", coords[0]
        else:
            row, col = "0", "0"
        if b.layout is not None and b.layout.swizzle == "tma":
            offset, shape = "tma_offset", f"{b.layout.span}, {b.layout.panel_bytes}"
        else:
            offset, shape = "tile_offset", f"{row_bytes}, {'true' if swz else 'false'}"
        at = (f"{offset}_at<{shape}>({row_step[0]}, {row_step[1]}, "
              if row_step and len(b.shape) == 2 else f"{offset}<{shape}>({row}, ")
        addr = f"{self.slot_address(home.buffer, home.loop)} + ptc::{at}({col}) * {esize})"
        return f"ptc::ld_shared<{self.ctypes[b.dtype]}>({addr})"

    # ---- expressions over a layout's elements -------------------------------------------------
    def renderer(self, layout: str, r: str = "r") -> ExprRenderer:
        """Expressions for the element that register `r` of `layout` holds."""
        lay = self.layouts[layout]
        coords = [f"c{a}" for a in range(lay.rank)]

        def read(name: str, idx: list[str]) -> str:
            home = self.values.get(name)
            if isinstance(home, ir.InShared):
                own_row = self.row_step(layout, r) if idx and idx[0] == "c0" else None
                return self.shared_read(home, name, idx, own_row)
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

        return self.expressions(read)

    def coords(self, layout: str, *used: str) -> None:
        """Declare c0, c1: the coordinates of register r (those the `used` texts mention;
        all of them when none is given)."""
        lay = self.layouts[layout]
        s = struct_name(layout)
        for a in range(lay.rank):
            if not used or any(re.search(rf"\bc{a}\b", text) for text in used):
                self.emit(f"const int c{a} = {s}::base{a}(lane, warp) + {s}::off{a}({s}::slot{a}(r));")

    def row_step(self, layout: str, r: str = "r") -> tuple[str, str]:
        """c0 of register `r` as (its base: the thread's, its step: a constant of the
        unrolled register loop), as `coords` sums them."""
        s = struct_name(layout)
        return f"{s}::base0(lane, warp)", f"{s}::off0({s}::slot0({r}))"

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
            self.hoist_copies(op)
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

    # ---- elementwise --------------------------------------------------------------------------
    def Compute(self, op: ir.Compute) -> None:
        home, lay = self.register_tile(op.target)
        s = struct_name(home.layout)
        ctype, _, packed = c_storage(home, lay)
        self.emit(f"// {op.target} = ...  ({op.task})")
        cond = self.inside(home.layout, op.mask, home.shape)
        value = op.expr
        if home.dtype in SIXTEEN_BIT:
            self.compute16(op, home, packed, cond)
            return
        expr = self.value_expr(value, home.layout)
        if home.dtype in FP8:
            encodes = isinstance(value, T.Convert) and value.type.dtype == home.dtype and \
                value.arg.type.dtype != home.dtype
            if encodes and self.low.fp8_cvt and lay.size % 2 == 0:
                self.convert_fp8_pairs(home, value.arg, cond)
                return
            if encodes:
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

    def convert_fp8_pairs(self, home: ir.RegTile, arg: T.TExpr, cond: str) -> None:
        """An FP8 tile converted from f32 by the instruction, two values an instruction
        (LoweredKernel.fp8_cvt: ptc::to_fp8x2); a value outside the tile converts 0."""
        s = struct_name(home.layout)
        expr = self.value_expr(arg, home.layout)
        with self.block(f"#pragma unroll\n{'  ' * self.depth}for (int j = 0; j < {s}::SIZE / 2; ++j)"):
            self.emit("float x[2];")
            with self.block("#pragma unroll\n" + "  " * self.depth + "for (int h = 0; h < 2; ++h)"):
                self.emit("const int r = 2 * j + h;")
                self.coords(home.layout, expr, cond)
                value = f"(float)({expr})"
                self.emit(f"x[h] = {f'({cond}) ? {value} : 0.0f' if cond else value};")
            self.emit(f"ptc::to_fp8x2(&{home.name}[2 * j], x[0], x[1]);")

    def compute16(self, op: ir.Compute, home: ir.RegTile, packed: bool, cond: str) -> None:
        """A 16-bit register tile's elements: computed in 16 bits where the renderer does
        so, otherwise in f32 and rounded once by the packing."""
        s, t = struct_name(home.layout), self.ctypes[home.dtype]
        rd = self.renderer(home.layout)
        idx = [f"c{a}" for a in range(self.layouts[home.layout].rank)]
        value = op.expr
        if op.pairs:
            self.compute_pairs(op, home, rd, idx)
            return
        if rd.computes_in_16_bits(value):
            expr, kind, zero = rd.native(value, idx), t, f"ptc::from_bits<{t}>(0)"
            pack, one = f"ptc::pack16<{t}>(x[0], x[1])", "ptc::one16<" + t + ">({})"
        else:
            if isinstance(value, T.Convert) and value.type.dtype == home.dtype:
                value = value.arg     # packing rounds to the dtype: no second rounding
            expr, kind, zero = rd.render(value, idx), "float", "0.0f"
            pack, one = f"ptc::Half16<{t}>::pack(x[0], x[1])", "ptc::Half16<" + t + ">::one({})"
        if not packed:
            with self.unrolled(s):
                self.coords(home.layout, expr)
                self.emit(f"{home.name}[r] = {one.format(expr)};")
            return
        with self.block(f"#pragma unroll\n{'  ' * self.depth}for (int j = 0; j < {s}::SIZE / 2; ++j)"):
            self.emit(f"{kind} x[2];")
            with self.block("#pragma unroll\n" + "  " * self.depth + "for (int h = 0; h < 2; ++h)"):
                self.emit("const int r = 2 * j + h;")
                self.coords(home.layout, expr, cond)
                self.emit(f"x[h] = {f'({cond}) ? {expr} : {zero}' if cond else expr};")
            self.emit(f"{home.name}[j] = {pack};")

    def compute_pairs(self, op: ir.Compute, home: ir.RegTile, rd: ExprRenderer,
                      idx: list[str]) -> None:
        """A packed 16-bit tile computed a register word at a time (ir.Compute.pairs): the
        values the pair form needs one at a time (its leaves) for both halves, then the
        word."""
        s = struct_name(home.layout)
        leaves: list[tuple[str, str]] = []
        word = rd.pair(pairs.form(op.expr, home.dtype, dict(self.low.int_ranges)), idx, leaves)
        with self.block(f"#pragma unroll\n{'  ' * self.depth}for (int j = 0; j < {s}::SIZE / 2; ++j)"):
            for k, (ctype, _) in enumerate(leaves):
                self.emit(f"{ctype} l{k}[2];")
            with self.block("#pragma unroll\n" + "  " * self.depth + "for (int h = 0; h < 2; ++h)"):
                self.emit("const int r = 2 * j + h;")
                self.coords(home.layout, *(text for _, text in leaves))
                for k, (_, text) in enumerate(leaves):
                    self.emit(f"l{k}[h] = {text};")
            self.emit(f"{home.name}[j] = {word};")

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


__all__ = ["CBodyPrinter", "RenderError"]
