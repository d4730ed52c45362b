"""Printing the ops of warp-specialized kernels (sm90a; ptc.lower.specialized,
docs/sm90.md): mbarrier setup, the role branches with setmaxnreg, TMA loads, mbarrier
waits and arrivals, wgmma tiles and waits, named barriers. A mixin of BodyPrinter."""
from __future__ import annotations

from ptc.lower import ir
from ptc.lower.atoms import wgmma_k, wgmma_operand_bytes
from ptc.sema import typed as T
from ptc.render.cexpr import CTYPES
from ptc.render.layouts import c_storage, struct_name


# the 8-bit wgmma input kinds of wgmma.cuh, by dtype
WGMMA8 = {("i8", "i8"): "Wgmma8Kind::S8",
          ("f8e4m3", "f8e4m3"): "Wgmma8Kind::E4M3_E4M3",
          ("f8e4m3", "f8e5m2"): "Wgmma8Kind::E4M3_E5M2",
          ("f8e5m2", "f8e4m3"): "Wgmma8Kind::E5M2_E4M3",
          ("f8e5m2", "f8e5m2"): "Wgmma8Kind::E5M2_E5M2"}


class SpecializedOps:
    """The ops of warp-specialized kernels (sm90a; ptc.lower.specialized, docs/sm90.md)."""

    barrier_sets: dict = {}
    split_rows: int = 0
    rs8_words: dict | None = None     # packed_words' declarations, by tile

    def barrier_address(self, name: str, loop: str, slots: int, lag: int = 0) -> str:
        b = self.barrier_sets[name]
        it = f"({self.iteration(loop)} - {lag})" if lag else self.iteration(loop)
        slot = f" + 8u * ({it} % {slots})" if loop and slots > 1 else ""
        return f"smem + {b.offset}u{slot}"

    def parity(self, loop: str, slots: int, free: bool) -> str:
        """The phase a slot's use waits for: the k-th use of a slot of an S-slot ring waits
        parity (k / S) & 1 for its data, and the producer the other parity for the slot to
        be free (the phase before the first counts as complete)."""
        p = f"(uint32_t)(({self.iteration(loop)} / {slots}) & 1)" if loop else "0u"
        return f"({p} ^ 1u)" if free else p

    def InitBarriers(self, op: ir.InitBarriers) -> None:
        self.barrier_sets = {b.name: b for b in op.barriers}
        with self.block("if (tid == 0)"):
            for b in op.barriers:
                count = (f"ALIGNED ? {b.arrivals} : {b.elementwise_arrivals}"
                         if b.elementwise_arrivals else f"{b.arrivals}")
                self.emit(f"for (int s = 0; s < {b.slots}; ++s) ptc::mbarrier_init(smem + "
                          f"{b.offset}u + 8u * s, {count});  // {b.name}")
            self.emit("ptc::mbarrier_init_fence();")
        self.emit("__syncthreads();  // the mbarriers are set up")

    def Specialized(self, op: ir.Specialized) -> None:
        self.emit("const int warpgroup = ptc::warpgroup_index();  // the same in every lane")
        for n, role in enumerate(op.roles):
            last = n == len(op.roles) - 1
            cond = f"warpgroup < {role.first_warpgroup + role.instances}"
            head = "else" if last else ("if" if n == 0 else "else if") + f" ({cond})"
            with self.block(head):
                what = (f"warpgroup{'s' if role.instances > 1 else ''} "
                        f"{role.first_warpgroup}" + (f"-{role.first_warpgroup + role.instances - 1}"
                                                     if role.instances > 1 else ""))
                self.emit(f"// {role.name}: {what}, {role.registers} registers per thread"
                          + (f", rows {role.rows} each" if role.rows else ""))
                if role.registers < op.launch_registers:
                    self.emit(f"ptc::setmaxnreg_dec<{role.registers}, LAUNCH_REGISTERS>();")
                elif role.registers > op.launch_registers:
                    self.emit(f"ptc::setmaxnreg_inc<{role.registers}, LAUNCH_REGISTERS>();")
                self.emit(f"const int part = warpgroup - {role.first_warpgroup};")
                self.emit("const int warp = (tid >> 5) & 3;  // within the warpgroup")
                self.emit("(void)part; (void)warp;")
                self.index_override["%part"] = "part"
                self.index_override["%row0"] = f"(part * {role.rows})"
                self.split_rows = role.rows
                self.parts = role.instances
                # ring uses are counted across enclosing loops (a loop inside a loop starts
                # again at 0, its ring and barrier phases do not)
                loops = [op.var for op in ir.walk(role.body) if isinstance(op, ir.Loop)]
                self.use_counters = set(loops)
                if loops:
                    self.emit("int " + ", ".join(f"u_{v} = 0" for v in loops) +
                              ";  // uses of each loop's ring slots so far")
                self.ops(role.body)

    def TmaLoad(self, op: ir.TmaLoad) -> None:
        b = self.buffers[op.buffer]
        bar = self.barrier_address(op.barrier, op.loop, b.slots)
        slot = self.slot_address(op.buffer, op.loop)
        self.emit(f"// {op.task}: {op.panels} box(es) of {op.map}, {op.bytes} bytes")
        with self.block("if (ALIGNED)"):
            with self.block("if (tid % 128 == 0)"):   # one thread waits and issues
                for w in op.waits:
                    self.MbarrierWait(w)
                self.emit(f"ptc::mbarrier_arrive_expect_tx({bar}, {op.bytes}u);")
                for p in range(op.panels):
                    at, coords = self.panel(op, slot, p)
                    self.emit(f"ptc::tma_load<{len(op.coords)}>({at}, &{op.map}, {bar}, {coords});")
        with self.block("else"):   # no tensor map: the warpgroup copies, fences, arrives
            for w in op.waits:
                self.MbarrierWait(w)
            tile = op.tile
            lay = b.layout
            ctype = CTYPES[tile.dtype]
            origin, rs, cs, rows_left, cols_left = self.tile_bounds(tile, None, 0)
            firsts = self.inline_firsts(tile)
            self.emit(f"const {ctype}* g = g_{tile.tensor} + ({origin});")
            if tile.gather is not None:     # a tile of rank 3: each row's position
                self.gathered_rows_copy(tile, 1, b, slot, (rs, cs, cols_left))
            elif lay.swizzle == "tma":
                self.emit(f"ptc::copy_tile_to_tma_layout<{ctype}, {lay.rows}, {lay.cols}, "
                          f"{lay.span}, {lay.panel_bytes}>({slot}, g, (int)({rs}), "
                          f"(int)({cs}), {rows_left}, {cols_left}, tid % 128{firsts});")
            else:       # stored densely, as TMA without a swizzle does
                self.emit(f"ptc::copy_tile_sync<{ctype}, {lay.rows}, {lay.cols}, 128, "
                          f"{lay.row_bytes}, false>({slot}, g, (int)({rs}), (int)({cs}), "
                          f"{rows_left}, {cols_left}, 0.0f, tid % 128{firsts});")
            self.emit("ptc::fence_proxy_async();  // generic stores, read by the tensor cores")
            self.emit(f"ptc::mbarrier_arrive({bar});  // each thread: its copies are in")

    def inline_firsts(self, tile: ir.GlobalTile) -> str:
        """An offset tile's rows_first, cols_first arguments, as expressions."""
        firsts = self.tile_firsts(tile)
        return f", {firsts[0]}, {firsts[1]}" if firsts else ""

    def ProducerCopy(self, op: ir.ProducerCopy) -> None:
        b = self.buffers[op.buffer]
        tile = op.tile
        rows, cols, row_bytes, swz = self.tile_shape(b)
        ctype = CTYPES[tile.dtype]
        bar = self.barrier_address(op.barrier, op.loop, b.slots)
        slot = self.slot_address(op.buffer, op.loop)
        origin, rs, cs, rows_left, cols_left = self.tile_bounds(tile, None, 0)
        self.emit(f"// {op.task}: {tile.tensor}[{tile.rows}x{tile.cols}] -> {op.buffer}, "
                  "by the producer warpgroup's cp.async (no TMA box takes it)")
        swizzled = 'true' if swz else 'false'
        with self.block(""):
            self.emit(f"const {ctype}* g = g_{tile.tensor} + ({origin});")
            firsts = self.inline_firsts(tile)
            if tile.gather is not None:
                self.gathered_rows_copy(tile, op.vector, b, slot, (rs, cs, cols_left))
            elif b.layout.swizzle == "tma":     # strided rows, where wgmma reads them
                self.producer_strided(op, b, slot, (rs, cs, rows_left, cols_left), firsts)
            elif tile.cols == 1 or (isinstance(tile.col_stride, T.Const)
                                  and tile.col_stride.value == 1):
                self.emit(f"ptc::copy_tile_async<{ctype}, {rows}, {cols}, 1, 128, {row_bytes}, "
                          f"{swizzled}>({slot}, g, (int)({rs}), {rows_left}, {cols_left}, "
                          f"tid % 128{firsts});")
            else:       # a column of the tensor: one element per copy at its stride
                self.emit(f"ptc::copy_tile_async_strided<{ctype}, {rows}, {cols}, 128, "
                          f"{row_bytes}, {swizzled}>({slot}, g, (int)({rs}), (int)({cs}), "
                          f"{rows_left}, {cols_left}, tid % 128{firsts});")
            self.emit("ptc::cp_async_commit();")
            self.emit("ptc::cp_async_wait<0>();")
            if tile.gather is not None or b.layout.swizzle == "tma":   # wgmma may read them
                self.emit("ptc::fence_proxy_async();  // the copies' bytes, read by the "
                          "tensor cores")
            self.emit(f"ptc::mbarrier_arrive({bar});  // each thread: its copies are in")

    def producer_strided(self, op: ir.ProducerCopy, b: ir.Buffer, slot: str, bounds: tuple,
                         firsts: str) -> None:
        """The producer's copy of every n-th row into the layout TMA would write: 16-byte
        cp.async chunks where the launch found the rows aligned, else element copies."""
        rs, cs, rows_left, cols_left = bounds
        lay = b.layout
        shape = f"{CTYPES[op.tile.dtype]}, {lay.rows}, {lay.cols}, {lay.span}, {lay.panel_bytes}"
        slow = (f"ptc::copy_tile_to_tma_layout<{shape}>({slot}, g, (int)({rs}), (int)({cs}), "
                f"{rows_left}, {cols_left}, tid % 128{firsts});")
        if op.vector > 1:
            self.emit(f"if (ALIGNED) ptc::copy_tile_to_tma_layout_async<{shape}>({slot}, g, "
                      f"(long long)({rs}), {rows_left}, {cols_left}, tid % 128{firsts});")
            self.emit(f"else {slow}")
        else:
            self.emit(slow)

    def gathered_rows_copy(self, tile: ir.GlobalTile, vector: int, b: ir.Buffer, slot: str,
                           bounds: tuple[str, str, str]) -> None:
        """The warpgroup's copy of rows at computed positions (gathered rows, a tile of rank
        3's BatchRows): 16-byte cp.async chunks where `vector` > 1 and the launch found the
        rows aligned, else element copies; into the layout TMA would write where wgmma
        reads the tile. The producer's copy (ProducerCopy fences their bytes for the async
        proxy after the wait) and a TMA load's element-wise variant take it."""
        rs, cs, cols_left = bounds
        lay = b.layout
        ctype = CTYPES[tile.dtype]
        self.emit(f"const int cols_left = {cols_left};")
        if tile.col_low:
            self.emit(f"const int cols_first = {self.tile_firsts(tile)[1]};")
        self.gather_rows(tile)
        args = f"(long long)({rs}), rows, cols_left, tid % 128{self.gathered_args(tile)}"
        if lay.swizzle == "tma":
            shape = f"{ctype}, {lay.rows}, {lay.cols}, {lay.span}, {lay.panel_bytes}"
            fast = f"ptc::copy_gathered_to_tma_layout_async<{shape}>({slot}, g, {args});"
            slow = (f"ptc::copy_gathered_to_tma_layout<{shape}>({slot}, g, (long long)({rs}), "
                    f"(int)({cs}), rows, cols_left, tid % 128{self.gathered_args(tile)});")
        else:
            rows, cols, row_bytes, swz = self.tile_shape(b)
            shape = f"{ctype}, {rows}, {cols}"
            tail = f"128, {row_bytes}, {'true' if swz else 'false'}"
            fast = (f"ptc::copy_gathered_async<{shape}, {vector}, {tail}>({slot}, g, "
                    f"{args});")
            slow = (f"ptc::copy_gathered_sync<{shape}, {tail}>({slot}, g, (long long)({rs}), "
                    f"(int)({cs}), rows, cols_left, 0.0f, tid % 128"
                    f"{self.gathered_args(tile)});")
        if vector > 1:
            self.emit(f"if (ALIGNED) {fast}")
            self.emit(f"else {slow}")
        else:
            self.emit(slow)

    def StageOperand(self, op: ir.StageOperand) -> None:
        home, lay = self.register_tile(op.value)
        b = self.buffers[op.buffer]
        sl = b.layout
        ctype = CTYPES[b.dtype]
        if op.stmatrix:
            atoms, blocks = op.stmatrix
            self.emit(f"// {op.task}: {op.value} to {op.buffer} by stmatrix, 16 x 16 per warp "
                      "and instruction")
            self.emit("#pragma unroll")
            with self.block(f"for (int b = 0; b < {atoms * blocks}; ++b)"):
                self.emit(f"const int row = (b / {blocks}) * 64 + warp * 16 + "
                          "ptc::stmatrix_row(lane);")
                self.emit(f"const int col = (b % {blocks}) * 16 + ptc::stmatrix_col(lane);")
                self.emit(f"ptc::stmatrix_x4({self.slot_address(op.buffer)} + "
                          f"ptc::tma_offset<{sl.span}, {sl.panel_bytes}>(row, col * "
                          f"{sl.elem_bytes}), &{home.name}[4 * b]);")
            self.emit("ptc::fence_proxy_async();  // generic stores, read by the async proxy")
            return
        rd = self.renderer(home.layout)
        value = f"ptc::from_f32<{ctype}>({rd.render(T.Var(op.value, T.TileType(home.dtype)), ['c0', 'c1'])})"
        if c_storage(home, lay)[2]:          # a packed 16-bit tile: its halves' bits as they are
            value = f"ptc::half_at<{ctype}>({home.name}, r)"
        self.emit(f"// {op.task}: {op.value} to {op.buffer}, where wgmma reads it")
        base, step = self.row_step(home.layout)
        offset = (f"ptc::tma_offset_at<{sl.span}, {sl.panel_bytes}>({base}, {step}, "
                  f"c1 * {sl.elem_bytes})"
                  if sl.swizzle == "tma" else f"(c0 * {sl.row_bytes} + c1 * {sl.elem_bytes})")
        extra = [f"c{a} < {home.shape[a]}" for a, m in enumerate(lay.exceeds(home.shape)) if m]
        if op.pairs:      # a register's two values are neighbours in a row: one 4-byte store
            with self.unrolled(struct_name(home.layout), "j", f"{struct_name(home.layout)}::SIZE / 2"):
                self.emit("const int r = 2 * j;")
                self.coords(home.layout)
                self.emit(f"ptc::st_shared<uint32_t>({self.slot_address(op.buffer)} + {offset}, "
                          f"{home.name}[j]);")
            self.emit("ptc::fence_proxy_async();  // generic stores, read by the tensor cores")
            return
        with self.unrolled(struct_name(home.layout)):
            self.coords(home.layout)
            if extra:      # registers past the tile's edge
                self.emit(f"if (!({' && '.join(extra)})) continue;")
            self.emit(f"ptc::st_shared<{ctype}>({self.slot_address(op.buffer)} + {offset}, "
                      f"{value});")
        self.emit("ptc::fence_proxy_async();  // generic stores, read by the tensor cores")

    def panel(self, op, slot: str, p: int) -> tuple[str, str]:
        """(shared address, coordinates) of box `p` of a TMA load or store: the panels of a
        wide tile are boxes side by side along the innermost dim."""
        coords = [f"(int)({self.scalar_expr(c)})" for c in op.coords]
        if p:
            coords[0] = f"{coords[0]} + {p * op.panel_cols}"
        at = f"{slot} + {p * op.panel_bytes}u" if p else slot
        return at, "{" + ", ".join(coords) + "}"

    def TmaStore(self, op: ir.TmaStore) -> None:
        slot = self.slot_address(op.buffer)
        self.emit(f"// {op.task}: {op.value} -> {op.buffer} -> {op.panels} box(es) of "
                  f"{op.map}")
        with self.block("if (ALIGNED)"):
            self.StageOperand(op.stage)
            self.emit("ptc::named_barrier(1 + part, 128);  // the tile is in shared memory")
            with self.block("if (tid % 128 == 0)"):   # one thread stores
                for p in range(op.panels):
                    at, coords = self.panel(op, slot, p)
                    self.emit(f"ptc::tma_store<{len(op.coords)}>(&{op.map}, {at}, {coords});")
                self.emit("ptc::bulk_commit_group();")
                self.emit("ptc::bulk_wait_group_read<0>();  // the boxes are out of shared "
                          "memory")
            self.emit(f"ptc::named_barrier(1 + part, 128);  // {op.buffer} may be written "
                      "again")
        with self.block("else"):   # no tensor map: from the registers
            self.StoreTile(op.fallback)

    def MbarrierWait(self, op: ir.MbarrierWait) -> None:
        self.emit(f"ptc::mbarrier_wait_parity({self.barrier_address(op.barrier, op.loop, op.slots)}, "
                  f"{self.parity(op.loop, op.slots, op.free)});  // {op.barrier}"
                  + (" is free" if op.free else ""))

    def MbarrierArrive(self, op: ir.MbarrierArrive) -> None:
        bar = self.barrier_address(op.barrier, op.loop, op.slots, op.lag)
        if op.lag:
            first = f"trips_{op.loop}" if op.after_loop else f"i_{op.loop}"
            with self.block(f"if ({first} >= {op.lag})"):
                self.emit(f"if (tid % 128 == 0) ptc::mbarrier_arrive({bar});  // {op.barrier}: "
                          f"the use {op.lag} before" + (", the loop's last" if op.after_loop
                                                        else ""))
            return
        if op.per_warp:
            self.emit("__syncwarp();  // this warp's reads of the slot are done")
            self.emit(f"if (lane == 0) ptc::mbarrier_arrive({bar});  // {op.barrier}, per warp")
        else:
            self.emit(f"if (tid % 128 == 0) ptc::mbarrier_arrive({bar});  // {op.barrier}")

    def packed_words(self, tile: str) -> str | None:
        """The registers of an 8-bit tile that an RS wgmma reads as its A: its bytes packed
        four a register (wgmma.cuh, pack_bytes), written before the wgmma's fence and pinned
        until its wait."""
        if self.rs8_words is None:          # the kernel's RS 8-bit A tiles, found once
            self.rs8_words = {}
            for op in ir.walk(self.low.body):
                if isinstance(op, ir.Wgmma) and op.a.in_registers and \
                        wgmma_operand_bytes(op.dtype) == 1:
                    home, lay = self.register_tile(op.a.value)
                    self.rs8_words[home.name] = (
                        f"uint32_t {home.name}_words[{c_storage(home, lay)[1] // 4}];  // "
                        f"{op.a.value}'s bytes, four a register, as wgmma reads them")
        return self.rs8_words.get(tile)

    def smem_operand(self, o: ir.WgmmaOperand, rows: int) -> str:
        home = self.values[o.value]
        b = self.buffers[home.buffer]
        lay = b.layout
        mn0 = f", part * {rows}" if o.split else ", 0"
        size = wgmma_operand_bytes(b.dtype)
        elem = "" if size == 2 else f", {size}"
        return (f"ptc::SmemOperand<{'true' if o.mn_major else 'false'}, {lay.span}, "
                f"{lay.panel_bytes}{elem}>{{{self.slot_address(home.buffer, home.loop)}{mn0}}}")

    def Wgmma(self, op: ir.Wgmma) -> None:
        out, _ = self.register_tile(op.out)
        product = f"{op.b.value} @ {op.a.value}" if op.swapped else f"{op.a.value} @ {op.b.value}"
        swap = " as out^T = b^T a^T" if op.swapped else ""
        self.emit(f"// {op.task}: {op.out} {'= ' + op.addend + ' +' if op.addend else '='} "
                  f"{product} on wgmma m64n{op.n}k{wgmma_k(op.dtype)}{swap}, {op.mi} "
                  f"atom(s) along {'n' if op.swapped else 'm'}, {op.ks} k-steps")
        if op.addend is not None:
            self.copy_addend(op.addend, out)
        bf16 = "true" if op.dtype == "bf16" else "false"
        accumulate = "true" if op.addend is not None else "false"
        rows = self.split_rows
        b = self.smem_operand(op.b, rows)
        eight_bit = wgmma_operand_bytes(op.dtype) == 1
        if op.a.in_registers:
            home, lay = self.register_tile(op.a.value)
            regs = home.name
            if eight_bit:
                regs = f"{home.name}_words"
                self.emit(f"ptc::pack_bytes<{c_storage(home, lay)[1] // 4}>({regs}, "
                          f"{home.name});  // before the fence")
            a = f"ptc::RegOperand<{op.ks}>{{{regs}}}"
        else:
            a = self.smem_operand(op.a, rows)
        if eight_bit:      # 8-bit: K-major only, no transposes
            kind = WGMMA8[op.dtype, self.buffers[self.values[op.b.value].buffer].dtype]
            self.emit(f"ptc::wgmma_tile8<{op.n}, {op.mi}, {op.ks}, ptc::{kind}>("
                      f"{out.name}, {a}, {b}, {accumulate});")
            return
        self.emit(f"ptc::wgmma_tile<{op.n}, {op.mi}, {op.ks}, {bf16}, {int(op.a.mn_major)}, "
                  f"{int(op.b.mn_major)}>({out.name}, {a}, {b}, {accumulate});")

    def WgmmaWait(self, op: ir.WgmmaWait) -> None:
        self.emit(f"ptc::wgmma_wait<{op.pending}>();")
        if op.values:
            self.PinAccumulators(ir.PinAccumulators(op.values))

    def PinAccumulators(self, op: ir.PinAccumulators) -> None:
        for v in op.values:
            home, lay = self.register_tile(v)
            _, length, _ = c_storage(home, lay)
            name = home.name
            if self.packed_words(name):         # an 8-bit A: the registers wgmma reads
                name, length = f"{name}_words", length // 4
            self.emit(f"ptc::wgmma_fence_operands<{length}>({name});  // {v} stays in "
                      "its registers here")

    def NamedBarrier(self, op: ir.NamedBarrier) -> None:
        part = f"(part + 1) % {self.parts}" if op.next_instance else "part"
        call = "named_barrier_arrive" if op.arrive else "named_barrier"
        line = f"ptc::{call}({op.base} + {part}, {op.threads});  // {op.why}"
        self.emit(f"if (part == {op.only}) {line}" if op.only >= 0 else line)


TMA_DTYPES = {"f16": "CU_TENSOR_MAP_DATA_TYPE_FLOAT16", "bf16": "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16",
              "f32": "CU_TENSOR_MAP_DATA_TYPE_FLOAT32", "i32": "CU_TENSOR_MAP_DATA_TYPE_INT32",
              "i8": "CU_TENSOR_MAP_DATA_TYPE_UINT8", "u8": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
              "f8e4m3": "CU_TENSOR_MAP_DATA_TYPE_UINT8", "f8e5m2": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
              "bool": "CU_TENSOR_MAP_DATA_TYPE_UINT8"}    # bytes: TMA copies, never converts
TMA_SWIZZLES = {0: "CU_TENSOR_MAP_SWIZZLE_NONE", 32: "CU_TENSOR_MAP_SWIZZLE_32B",
                64: "CU_TENSOR_MAP_SWIZZLE_64B", 128: "CU_TENSOR_MAP_SWIZZLE_128B"}


def tensor_map_setup(m: ir.TensorMap, tensor_index: int, scalar_expr) -> list[str]:
    """The host lines of ptc_launch that encode tensor map `m` (ptc::tensor_map)."""
    rank = len(m.dims)
    dims = ", ".join(f"(cuuint64_t)({scalar_expr(d)})" for d in m.dims)
    strides = ", ".join(f"(cuuint64_t)({scalar_expr(s)})" for s in m.strides) or "0"
    box = ", ".join(str(b) for b in m.box)
    return [f"CUtensorMap {m.name}{{}};  // {m.tensor}, boxes of "
            f"{' x '.join(map(str, reversed(m.box)))}",
            "if (aligned) {",
            f"  const cuuint64_t dims[{rank}] = {{{dims}}};",
            f"  const cuuint64_t strides[{max(rank - 1, 1)}] = {{{strides}}};",
            f"  const cuuint32_t box[{rank}] = {{{box}}};",
            f"  if (ptc::tensor_map(&{m.name}, {TMA_DTYPES[m.dtype]}, {rank}, "
            f"tensors[{tensor_index}], dims, strides, box, {TMA_SWIZZLES[m.swizzle]}) != 0)",
            "    return (int)cudaErrorInvalidValue;  // strides or base not 16-byte multiples",
            "}"]
