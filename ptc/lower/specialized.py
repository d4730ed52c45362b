"""Warp-specialized plans (sm90a): a producer warpgroup issuing TMA loads into the plan's
rings and consumer warpgroups multiplying with wgmma (docs/lowering.md, docs/sm90.md).

    lowered = lower_specialized(plan, graph, device, capabilities)

Decided here, once:
- the plan's barriers become mbarriers, one per ring slot: a `full` barrier takes the
  producer's one arrive.expect_tx plus the TMA transaction bytes, an `empty` barrier one
  arrival per consumer warpgroup (the plan's arrival counts);
- shared memory: every tile the plan loads by TMA in the layout TMA writes (`tma_layout`:
  128-byte column panels, swizzled), the others (scalars, odd rows: ptc.lower.tma says
  which) in ptc's own layout, copied by the producer warpgroup's threads; 1024-aligned,
  rings first, then the consumers' scratch (one copy per consumer warpgroup), then the
  mbarriers;
- a tensor map per TMA load (its tensor, one panel's box), encoded before the launch;
- the consumers' values in registers, in the wgmma accumulator and A-fragment layouts
  and what follows from them (ptc.lower.assign). With several consumer warpgroups each
  computes its own rows of every tile of the split grid index (the mma outputs' rows):
  rows [part * R, (part + 1) * R); a plan whose consumer work is not row by row is refused;
- every wgmma with its descriptors, fenced, committed and waited for before the slots it
  reads are released (one group in flight; the pipelining is the ring's);
- named barriers among a consumer warpgroup's threads where they exchange values through
  scratch (ptc.lower.sync, as for a single role).
"""
from __future__ import annotations

from dataclasses import replace

from ..devices import Device
from ..sched.plan import LoopBlock, Plan, Step
from ..sched.turns import Turns, turns
from ..sema import typed as T
from ..sema.dtypes import DTYPE_BYTES
from ..stask.graph import STaskGraph
from . import ir
from .assign import assign_layouts, layout_problem
from .atoms import wgmma_k, why_no_wgmma, why_not_k_major
from .layout import Layout, digits
from .lowering import Builder, Capabilities, LoweringError, align_up, c_name, mma_operand_var
from .program import Stmt, flatten, mma_parts, reads
from .registers import defines
from .sync import op_reads
from .stmatrix import stmatrix_blocks
from .swizzle import ALIGN, SmemLayout, smem_layout, tma_layout
from .tiles import (TileError, add, const, dim_expr, divisible, extent_value, global_tile,
                    index, mul, tile_start)
from .tma import TmaBox, tma_box, tma_store_box

WARPGROUP = 4          # warps
PART = "%part"         # the consumer warpgroup's index among the role's instances
ROW0 = "%row0"         # its first row in the split tile: PART * rows


def lower_specialized(plan: Plan, graph: STaskGraph, device: Device,
                      caps: Capabilities | None) -> ir.LoweredKernel:
    return _Specialized(plan, graph, device, caps).run()


def wgmma_layouts(name: str, m: int, n: int, k: int,
                  dtype: str = "f16") -> tuple[Layout, Layout, Layout]:
    """(accumulator [m, n], A fragments [m, k], B [k, n]) of m64nNk atoms over one
    warpgroup, m / 64 of them along m (docs/sm90.md: warp w holds rows 16w.., as
    mma.sync's m16n8 per warp). A's fragment is mma.sync's A per warp: m16n8k16's pairs of
    16-bit values, or for 8-bit inputs (k32) m16n8k32's runs of four bytes (PTX ISA,
    "Register Fragments" for wgmma .m64nNk32: a register holds four consecutive k)."""
    kk = wgmma_k(dtype)
    mi, ks = m // 64, k // kk
    lanes = digits((4, (0, 2)), (8, (1, 0)))
    warps = digits((4, (16, 0)))
    c = Layout(f"{name}_c", (m, n), digits((2, (0, 1)), (2, (8, 0)), (n // 8, (0, 8)),
                                           (mi, (64, 0))), lanes, warps,
               note=f"wgmma m64n{n}k{kk} accumulator: {mi} atom(s) along m")
    run = kk // 8                   # consecutive k per register: 2 (16-bit) or 4 (8-bit)
    a = Layout(f"{name}_a", (m, k), digits((run, (0, 1)), (2, (8, 0)), (2, (0, kk // 2)),
                                           (ks, (0, kk)), (mi, (64, 0))),
               digits((4, (0, run)), (8, (1, 0))), warps,
               note="wgmma A from registers")
    # B is read from shared memory; computed in registers, a warp holds k / 4 of its rows
    # and a lane its columns (j, j + 32, ...) before they are staged there
    b = Layout(f"{name}_b", (k, n), digits((k // 4, (1, 0)), (n // 32 or 1, (0, 32))),
               digits((32, (0, 1))) if n >= 32 else digits((n, (0, 1))),
               digits((4, (k // 4, 0))), note="wgmma B (staged to shared memory)")
    return c, a, b


class _RoleView:
    """What the single-role Builder reads of a lowering, for one role of the plan: its
    statements, one warpgroup, and tile extents with the split tile's rows divided."""

    def __init__(self, spec: "_Specialized", role: str, rows: dict[str, int]):
        self.plan, self.graph, self.device = spec.plan, spec.graph, spec.device
        self.kernel = spec.graph.kernel
        self.tiles = dict(spec.graph.tiles or {})
        self.local = {**self.tiles, **rows}
        self.warps = WARPGROUP
        self.warp_size = spec.device.resources.warp_size
        self.threads = self.warps * self.warp_size
        self.tasks = {t.name: t for t in spec.graph.tasks}
        self.steps = {s.task: s for r, s in spec.plan.steps() if r.name == role}
        self.stmts = flatten(spec.plan, spec.graph, role)
        self.buffer_of = {b.value: b for b in spec.plan.buffers}
        self.notes: list[str] = []
        self.tiling: dict = {}
        self.mma_layouts: dict = {}
        self.solution = None

    def extent(self, e) -> int:
        try:
            return extent_value(self.kernel, self.local, e)
        except TileError as exc:
            raise LoweringError(str(exc)) from None

    def shape(self, e: T.TExpr) -> tuple[int, ...]:
        return tuple(self.extent(x) for x in e.type.shape)


class _Specialized:
    def __init__(self, plan: Plan, graph: STaskGraph, device: Device, caps):
        self.plan, self.graph, self.device, self.caps = plan, graph, device, caps
        self.kernel = graph.kernel
        self.tiles = dict(graph.tiles or {})
        roles = {r.name: r for r in plan.roles}
        if set(roles) != {"producer", "consumer"}:
            raise LoweringError(f"a warp-specialized plan has a producer and a consumer role, "
                                f"not {', '.join(roles)}")
        self.producer, self.consumer = roles["producer"], roles["consumer"]
        for r in plan.roles:
            if r.warps != WARPGROUP:
                raise LoweringError(f"role {r.name} has {r.warps} warps; roles are warpgroups "
                                    f"of {WARPGROUP}")
        if self.producer.instances != 1:
            raise LoweringError("one producer warpgroup issues the loads")
        self.parts = self.consumer.instances
        self.split, self.rows = self.split_rows()

    # ---- which rows each consumer warpgroup computes ------------------------------------
    def split_rows(self) -> tuple[str, int]:
        """(grid index, rows per consumer warpgroup) when the consumers divide the rows of
        the mma outputs' tiles; ("", 0) with one consumer."""
        if self.parts == 1:
            return "", 0
        mmas = [t for t in self.graph.tasks if t.kind == "mma"]
        if not mmas:
            raise LoweringError("several consumer warpgroups divide an mma's rows; this plan "
                                "has no mma")
        first = mmas[0].mma.type.shape[0]
        axis = next((a for a in self.graph.grid.axes if a.size == first), None)
        if axis is None or not isinstance(first, str):
            raise LoweringError(f"the mma rows ({first}) are not a tile of the grid: the "
                                "consumer warpgroups cannot divide them")
        total = self.tiles[first]
        if total % self.parts or (total // self.parts) % 64:
            raise LoweringError(f"{total} rows do not divide into {self.parts} consumer "
                                "warpgroups of whole 64-row wgmma atoms")
        return axis.var, total // self.parts

    # ---- the whole lowering ------------------------------------------------------------
    def run(self) -> ir.LoweredKernel:
        rows = {}
        if self.split:
            tile = next(a.size for a in self.graph.grid.axes if a.var == self.split)
            rows = {tile: self.rows}
        consumer = _RoleView(self, "consumer", rows)
        self.check_rows(consumer)
        layouts = self.tilings(consumer)
        shared = {b.value for b in self.plan.buffers}
        consumer.mma_layouts = layouts
        consumer.tiling = {t: True for t in layouts}
        consumer.solution = assign_layouts(layout_problem(
            consumer.stmts, shared, layouts, WARPGROUP, consumer.warp_size, consumer.extent))
        return _Build(self, consumer).build()

    def tilings(self, view: _RoleView) -> dict[str, tuple[Layout, Layout, Layout]]:
        out = {}
        for s in view.stmts:
            if s.kind != "mma":
                continue
            unit = self.device.unit(view.steps[s.task].unit)
            if unit.kind != "mma":
                continue
            _, mm = mma_parts(s.stmt.value)
            m, k = view.shape(mm.lhs)
            n = view.shape(mm.rhs)[1]
            why = why_no_wgmma(mm.lhs.type.dtype, m, n, k)
            if why:
                raise LoweringError(f"{s.task}: the plan puts it on the tensor cores, but {why}")
            out[s.task] = wgmma_layouts(s.task.removeprefix("mma_"), m, n, k,
                                        mm.lhs.type.dtype)
        return out

    def check_rows(self, view: _RoleView) -> None:
        """With divided rows, every consumer value must be computed row by row: an operand
        that holds the split rows makes a result that does too, along its first axis."""
        if not self.split:
            return
        tile = next(a.size for a in self.graph.grid.axes if a.var == self.split)
        for s in view.stmts:
            if not isinstance(s.stmt, T.Let):
                continue
            v = s.stmt.value
            if isinstance(v, T.Reduce) and v.axis == 0 and v.arg.type.shape[:1] == (tile,):
                raise LoweringError(f"{s.stmt.name} sums over the rows the consumer "
                                    "warpgroups divide")
            if isinstance(v, T.MmaAccumulate) and v.b.type.shape[:1] == (tile,):
                raise LoweringError(f"{s.task} multiplies by the rows the consumer "
                                    "warpgroups divide")
            if isinstance(v, T.Transpose) and v.arg.type.shape[:1] == (tile,):
                raise LoweringError(f"{s.stmt.name} transposes the divided rows")


class _Build(Builder):
    """The consumer role through the single-role Builder (its computes, reductions,
    conversions and stores), the producer's loads, and the kernel around them."""

    def __init__(self, spec: _Specialized, consumer: _RoleView):
        super().__init__(consumer)
        self.spec = spec
        self.maps: dict[str, ir.TensorMap] = {}
        self.slot_of: dict[str, ir.Buffer] = {}
        self.barrier_sets: dict[str, ir.MbarrierSet] = {}

    # ---- homes ---------------------------------------------------------------------------
    def split_rows(self, value: T.TExpr) -> bool:
        """Whether a tile's first axis holds the rows the consumers divide."""
        if not self.spec.split:
            return False
        tile = next(a.size for a in self.graph.grid.axes if a.var == self.spec.split)
        return bool(value.type.shape) and value.type.shape[0] == tile

    def load_unit(self, task: str) -> str:
        return next(s.unit for r, s in self.plan.steps() if s.task == task)

    def box(self, task: str) -> TmaBox:
        (s,) = self.low.tasks[task].stmts
        box = tma_box(self.low.kernel, self.spec.tiles, s.value)
        if isinstance(box, str):
            raise LoweringError(f"{task}: the plan loads it by TMA, but {box}")
        return box

    @staticmethod
    def threads_layout(task, rows: int, cols: int, dtype: str) -> SmemLayout:
        """The layout of a tile the producer's threads copy: gathered rows go where wgmma
        can read them, the layout TMA would write (construct.py checked it has one)."""
        lay = tma_layout(rows, cols, dtype) if task.gathered else None
        return lay if lay is not None and lay.swizzle == "tma" else \
            smem_layout(rows, cols, dtype)

    def homes(self) -> None:
        for b in self.plan.buffers:
            task = self.low.tasks[b.producer]
            shape = tuple(b.shape)
            rows, cols = shape if len(shape) == 2 else ((1, shape[0]) if shape else (1, 1))
            if self.device.unit(self.load_unit(b.producer)).is_bulk_tensor_copy:
                lay = self.box(b.producer).layout
            else:
                lay = self.threads_layout(task, rows, cols, b.dtype)
            slot = align_up(lay.bytes, ALIGN)
            self.buffers[b.name] = ir.Buffer(b.name, b.dtype, shape, b.stages, lay, slot, 0,
                                             f"ring of {b.producer}" if b.stages > 1
                                             else f"tile of {b.producer}", b.name)
            self.values[b.value] = ir.InShared(b.name, task.region,
                                               self.split_rows(task.stmts[0].value))
        sol = self.low.solution
        for s in self.low.stmts:
            if not isinstance(s.stmt, T.Let) or s.stmt.name in self.values:
                continue
            name = s.stmt.name
            lay = sol.layouts.get(name)
            if lay is None:
                raise LoweringError(f"no layout for {name}")
            self.values[name] = ir.RegTile(c_name(name), s.stmt.value.type.dtype,
                                           self.low.shape(s.stmt.value), self.layout_name(lay))

    # ---- the kernel --------------------------------------------------------------------
    def build(self) -> ir.LoweredKernel:
        from .costs import task_costs
        from .inplace import in_place_addends
        from .memory import over_shared_memory
        from .registers import estimate_registers
        from .sync import place_sync

        self.homes()
        self.per_warp = self.cuda_core_readers()
        consumer = tuple(self.items(self.spec.consumer.body, ()))
        producer_items = _Producer(self)
        producer = tuple(producer_items.items(self.spec.producer.body, ()))
        offset = 0
        placed = []
        rings = [b for b in self.buffers.values() if b.plan_buffer]
        scratch = [b for b in self.buffers.values() if not b.plan_buffer]
        for b in rings + scratch:
            if not b.plan_buffer:        # one copy per consumer warpgroup
                b = replace(b, slots=self.spec.parts, slot_bytes=align_up(b.slot_bytes, 16))
            offset = align_up(offset, ALIGN if b.layout is not None else 16)
            placed.append(replace(b, offset=offset))
            offset += b.bytes
        offset = align_up(offset, 8)
        sets = []
        stages = {b.name: b.stages for b in self.plan.buffers}
        for bar in self.plan.barriers:
            slots = stages.get(bar.buffer, 1)
            arrivals = bar.arrivals * (WARPGROUP if bar.name in self.per_warp else 1)
            sets.append(ir.MbarrierSet(bar.name, slots, arrivals, offset))
            offset += 8 * slots
        total = align_up(offset, 16)
        too_big = over_shared_memory(total, placed, self.device)
        if too_big:
            raise LoweringError(too_big)
        buffers = {b.name: b for b in placed}
        consumer = _named_barriers(place_sync(consumer, buffers, self.values))
        consumer = _one_group_in_flight(consumer)
        consumer = _pinned(consumer, {op.out for op in ir.walk(consumer)
                                      if isinstance(op, ir.Wgmma)})
        if self.spec.consumer.pingpong:
            where = turns(self.spec.consumer, self.plan.pipelined,
                          lambda unit: self.device.unit(unit).kind)
            if isinstance(where, str):
                raise LoweringError(f"ping-pong: {where}")
            consumer = _taking_turns(consumer, where, self.spec.parts)
        self.values = in_place_addends(consumer, self.values)
        registers = estimate_registers(consumer, self)
        budget = self.spec.consumer.registers
        if registers > budget:
            raise LoweringError(f"the consumers need ~{registers} registers per thread, over "
                                f"the plan's {budget}")
        res = self.device.resources
        threads = sum(r.warps * r.instances for r in self.plan.roles) * res.warp_size
        launch_regs = min(res.max_registers_per_thread,
                          res.registers // threads // 8 * 8)
        roles = (ir.Role("producer", 0, 1, self.spec.producer.registers, producer,
                         issuer=True),
                 ir.Role("consumer", 1, self.spec.parts, budget, consumer, self.spec.split,
                         self.spec.rows))
        body = (ir.InitBarriers(tuple(sets)), ir.Specialized(launch_regs, roles))
        alignment = tuple(dict.fromkeys(self.alignment))
        # every thread starts with the launch's registers; setmaxnreg moves them between
        # the roles within the block's allocation
        blocks = res.resident_blocks(threads, launch_regs * threads, total)
        launch = ir.Launch(self.grid(), threads, threads // res.warp_size, total, launch_regs,
                           blocks, self.plan.launch.persistent, min_blocks_elementwise=1,
                           min_blocks=1)
        dev = self.device
        kernel = ir.LoweredKernel(
            self.low.kernel.name, dev.name, dev.backend, self.plan.style, launch,
            tuple(self.layouts.values()), tuple(buffers.values()), tuple(self.values.items()),
            body, tuple(self.units.items()), (), alignment, tuple(self.low.notes),
            tuple(self.maps.values()))
        return replace(kernel, costs=task_costs(kernel, self.graph, dev))

    def grid(self) -> tuple:
        out = []
        for a in self.graph.grid.axes:
            d = dim_expr(self.low.kernel, a.dim)
            if a.size is None:
                count = d
            else:
                size = self.spec.tiles[a.size] if isinstance(a.size, str) else a.size
                count = T.Elementwise("floordiv", (add(d, const(size - 1)), const(size)),
                                      T.TileType("i32"))
            out.append((a.var, count))
        return tuple(out)

    # ---- the consumer's steps ---------------------------------------------------------------
    def loop(self, block: LoopBlock, loops) -> ir.Loop:
        region = next(r for r in self.graph.loop_regions() if r.name == block.var)
        loop = region.loop
        size = self.spec.tiles.get(loop.axis.size, loop.axis.size) \
            if isinstance(loop.axis.size, str) else loop.axis.size
        if any(isinstance(s, Step) and s.offset for s in block.body):
            fill, body, drain = self.rotated(block, loops + (block.var,))
            return ir.Loop(block.var, size, loop.axis.dim, loop.until, body, fill=fill,
                           drain=drain, peel=1)
        body = self.items(block.body, loops + (block.var,))
        return ir.Loop(block.var, size, loop.axis.dim, loop.until, tuple(body))

    def rotated(self, block: LoopBlock, inner) -> tuple[tuple, tuple, tuple]:
        """(fill, body, drain) of a loop the plan rotates (ptc.sched.rotate: `M1@+1 M2
        C@+1`): iteration 0's M1 and C before the loop; then in iteration n, M1 of n + 1
        and M2 of n issued back to back, M1 waited for (`wait_group 1`: M2 stays in
        flight), C of n + 1 up to its first touch of M2's registers under M2, M2 waited
        for, and the rest of C; the loop stops one iteration early and the last M2 runs
        after it (no guards inside the loop). FlashAttention-3's intra-warpgroup overlap."""
        steps = list(block.body)
        if any(not isinstance(s, Step) or s.offset not in (0, 1) for s in steps) or \
                sum(1 for s in steps if s.offset == 0) != 1:
            raise LoweringError(f"loop {block.var}: a rotated loop has one step at offset 0 "
                                "and the others at offset 1")
        at = next(i for i, s in enumerate(steps) if s.offset == 0)
        head, last, tail = steps[:at], steps[at], steps[at + 1:]
        plain = [replace(s, offset=0) for s in head + tail]
        fill = (ir.Iteration(block.var, "first", tuple(self.items(plain, inner))),)
        issued, settled, pinned = [], [], ()
        for s in head:
            issue, pins, rest, _ = _issue_and_rest(self.step(s, inner), s.task)
            issued += issue
            settled += rest
            pinned += pins
        issue_last, pins_last, rest_last, in_flight = _issue_and_rest(
            self.step(last, inner), last.task)
        tail_ops = [op for s in tail for op in self.step(s, inner)]
        cut = next((i for i, op in enumerate(tail_ops)
                    if in_flight & (set(op_reads(op)) | set(defines(op)))), len(tail_ops))
        body = (ir.Iteration(block.var, "next", tuple(issued)), *issue_last,
                ir.Iteration(block.var, "next", (ir.WgmmaWait(1, pinned), *settled,
                                                 *tail_ops[:cut])),
                ir.WgmmaWait(0, pins_last), *rest_last,
                ir.Iteration(block.var, "next", tuple(tail_ops[cut:])))
        drain = (ir.Iteration(block.var, "last", (*issue_last, ir.WgmmaWait(0, pins_last),
                                                  *rest_last)),)
        return fill, tuple(op for op in body if not (isinstance(op, ir.Iteration) and
                                                     not op.body)), drain

    def barrier_loop(self, name: str, loops: tuple[str, ...]) -> tuple[str, int]:
        """(the loop whose iteration picks the slot, slots) of a plan barrier."""
        bar = self.plan.barrier(name)
        buf = next(b for b in self.plan.buffers if b.name == bar.buffer)
        home = self.values.get(buf.value)
        loop = home.loop if isinstance(home, ir.InShared) and buf.stages > 1 else ""
        if not loop and isinstance(home, ir.InShared) and home.loop in loops:
            loop = home.loop
        return loop, buf.stages

    def step(self, step: Step, loops) -> list:
        out: list = []
        for w in step.waits:
            loop, slots = self.barrier_loop(w, loops)
            out.append(ir.MbarrierWait(w, loop, slots))
        if step.task != "sync":
            t = self.low.tasks[step.task]
            self.units[t.name] = step.unit
            for s in (x for x in self.low.stmts if x.task == t.name):
                out.extend(self.statement(self.localized(s), step))
        for a in step.arrives:
            loop, slots = self.barrier_loop(a, loops)
            out.append(ir.MbarrierArrive(a, loop, slots, a in self.per_warp))
        return out

    def cuda_core_readers(self) -> set[str]:
        """The plan barriers released after CUDA cores read their slots: every warp then
        arrives (a wgmma's reads are over for the whole warpgroup once one thread's wait
        returns; a warp's loads only once its lanes meet)."""
        read = set()
        for s in self.low.stmts:
            step = self.low.steps.get(s.task)
            on_wgmma = s.kind == "mma" and step is not None and \
                self.device.unit(step.unit).kind == "mma"
            if not on_wgmma and isinstance(s.stmt, (T.Let, T.Store)):
                read.update(reads(s.stmt.value))
        out = set()
        for bar in self.plan.barriers:
            buf = next((b for b in self.plan.buffers if b.name == bar.buffer), None)
            if bar.name.startswith("empty:") and buf is not None and buf.value in read:
                out.add(bar.name)
        return out

    def localized(self, s: Stmt) -> Stmt:
        """The statement as one consumer warpgroup computes it: positions along the split
        rows (index(m)) start at the warpgroup's first row."""
        if not self.spec.split:
            return s

        def fix(e: T.TExpr) -> T.TExpr:
            e = T.map_children(e, fix)
            if isinstance(e, T.IndexVec) and e.var == self.spec.split:
                return T.Elementwise("add", (e, index(ROW0)), e.type)
            return e
        if isinstance(s.stmt, T.Let):
            return replace(s, stmt=replace(s.stmt, value=fix(s.stmt.value)))
        return replace(s, stmt=replace(s.stmt, value=fix(s.stmt.value)))

    def wgmma(self, s: Stmt, step: Step) -> list:
        addend, mm = mma_parts(s.stmt.value)
        unit = self.device.unit(step.unit)
        if unit.kind != "mma":
            return [self.mma(s, step)]          # CUDA cores: the single role's SIMT matmul
        add_name = addend.name if isinstance(addend, T.Var) else None
        c, a_lay, _ = self.low.mma_layouts[s.task]
        m, n = c.shape
        k = a_lay.shape[1]
        operands, staged = [], []
        for which, operand in (("a", mm.lhs), ("b", mm.rhs)):
            name, transposed = mma_operand_var(operand)
            name = self.renames.get(name, name)
            transposed = transposed and name not in self.pre_transposed
            home = self.values.get(name)
            if isinstance(home, ir.InShared) and \
                    self.buffers[home.buffer].layout.swizzle != "tma":
                raise LoweringError(f"{s.task}: wgmma reads {name} from shared memory in a "
                                    "layout TMA writes; it is stored densely")
            if isinstance(home, ir.InShared):
                # a tile [rows][cols] in shared memory: A's rows are m (K-major) unless it is
                # read transposed; B's rows are k (MN-major) unless read transposed
                mn_major = transposed if which == "a" else not transposed
                why = mn_major and why_not_k_major(mm.lhs.type.dtype, which, name)
                if why:
                    raise LoweringError(f"{s.task}: {why}")
                split = which == "a" and self.split_rows(mm.lhs)
                operands.append(ir.WgmmaOperand(name, False, mn_major, split))
            elif isinstance(home, ir.RegTile) and which == "a" and not transposed and \
                    self.layouts[home.layout].same_map(a_lay):
                operands.append(ir.WgmmaOperand(name, True))
            elif isinstance(home, ir.RegTile) and which == "b" and not transposed and \
                    home.dtype in ("f16", "bf16"):
                staged.extend(self.stage(s.task, name, home))
                operands.append(ir.WgmmaOperand(f"{name}@shared", False, True, False))
            else:
                raise LoweringError(f"{s.task}: wgmma reads B from shared memory and A from "
                                    f"shared memory or its fragment registers; {name} is "
                                    "neither")
        return staged + [ir.Wgmma(s.task, s.stmt.name, add_name, operands[0], operands[1], n,
                                  m // 64, k // wgmma_k(mm.lhs.type.dtype),
                                  mm.lhs.type.dtype),
                         ir.WgmmaWait(0, (s.stmt.name,) + tuple(
                             o.value for o in operands if o.in_registers))]

    def stage(self, task: str, name: str, home: ir.RegTile) -> list:
        """B computed in registers: written to shared memory where wgmma reads it (each
        consumer warpgroup its own copy), fenced, and the warpgroup meets."""
        k, n = home.shape
        lay = tma_layout(k, n, home.dtype)
        if lay is None or lay.swizzle != "tma":
            raise LoweringError(f"{task}: wgmma reads {name} from shared memory, and no layout "
                                f"it reads holds a {home.dtype}[{k}, {n}] tile")
        staged = self.values.get(f"{name}@shared")
        if staged is not None:      # a rotated loop lowers the step twice: one buffer
            buffer = staged.buffer
        else:
            self.scratch_count += 1
            buffer = f"scratch{self.scratch_count}"
            self.buffers[buffer] = ir.Buffer(buffer, home.dtype, (k, n), 1, lay,
                                             align_up(lay.bytes, ALIGN), 0,
                                             f"{name} staged for wgmma")
            self.values[f"{name}@shared"] = ir.InShared(buffer, "")
        return [self.stage_operand(task, name, buffer),
                ir.NamedBarrier(f"{name} is in shared memory for wgmma")]

    def stage_operand(self, task: str, name: str, buffer: str) -> ir.StageOperand:
        """Registers to a shared tile in the TMA layout: by stmatrix where it fits."""
        home = self.values[name]
        blocks = stmatrix_blocks(self.layouts[home.layout], home.shape, home.dtype,
                                 self.buffers[buffer].layout)
        return ir.StageOperand(task, name, buffer, blocks or ())

    def store(self, s: Stmt) -> ir.StoreTile:
        op = super().store(s)
        if not self.spec.split:
            return op
        st: T.Store = s.stmt
        tile = global_tile(self.low.kernel, self.spec.tiles, st.tensor, st.index,
                           (self.spec.split, index(ROW0), self.spec.rows))
        return replace(op, tile=tile)

    def store_op(self, s: Stmt, step: Step):
        return self.epilogue(s, step)

    def mma_ops(self, s: Stmt, step: Step) -> list:
        return self.wgmma(s, step)

    def epilogue(self, s: Stmt, step: Step) -> ir.StoreTile | ir.TmaStore:
        """The store as the plan says: from the registers, or through shared memory by TMA
        (with the register store for launches whose alignment checks fail)."""
        op = self.store(s)
        if not self.device.unit(step.unit).is_bulk_tensor_copy:
            return op
        st: T.Store = s.stmt
        kernel = self.low.kernel
        box = tma_store_box(kernel, self.spec.tiles, st, self.spec.parts)
        if isinstance(box, str):
            raise LoweringError(f"{s.task}: the plan stores it by TMA, but {box}")
        lay = box.layout
        tensor = kernel.tensor(st.tensor)
        self.scratch_count += 1
        buffer = f"scratch{self.scratch_count}"
        self.buffers[buffer] = ir.Buffer(buffer, tensor.dtype, (lay.rows, lay.cols), 1, lay,
                                         align_up(lay.bytes, ALIGN), 0,
                                         f"{st.tensor}'s tile, stored by TMA")
        coords = []
        for item in st.index:
            if isinstance(item, T.TileSlice):
                size = extent_value(kernel, self.spec.tiles, item.size)
                c = mul(index(item.var), const(size))
                coords.append(add(c, index(ROW0)) if item.var == self.spec.split else c)
            elif isinstance(item, T.Point):
                coords.append(item.index)
            else:
                coords.append(const(0))
        name = f"map_{s.task}"
        dims = tuple(reversed([dim_expr(kernel, d) for d in tensor.dims]))
        self.maps[name] = ir.TensorMap(name, tensor.name, tensor.dtype, dims, box.strides,
                                       tuple(reversed(box.box)),
                                       lay.span if lay.swizzled else 0)
        esize = DTYPE_BYTES[tensor.dtype]
        self.alignment.extend(("dim", c.name, 16 // esize) for c in box.conditions)
        self.alignment.append(("tensor", tensor.name, 16))
        return ir.TmaStore(s.task, st.value.name, buffer, name, tuple(reversed(coords)),
                           lay.panels, lay.panel_cols, lay.panel_bytes,
                           self.stage_operand(s.task, st.value.name, buffer), op)


class _Producer:
    """The producer role: one thread waits for each slot to be free, then loads it."""

    def __init__(self, build: _Build):
        self.b = build

    def items(self, items, loops: tuple[str, ...]) -> list:
        out: list = []
        for it in items:
            if isinstance(it, LoopBlock):
                region = next(r for r in self.b.graph.loop_regions() if r.name == it.var)
                loop = region.loop
                size = self.b.spec.tiles[loop.axis.size] if isinstance(loop.axis.size, str) \
                    else loop.axis.size
                out.append(ir.Loop(it.var, size, loop.axis.dim, loop.until,
                                   tuple(self.items(it.body, loops + (it.var,)))))
            else:
                out.extend(self.step(it, loops))
        return out

    def step(self, step: Step, loops) -> list:
        out: list = []
        for w in step.waits:
            loop, slots = self.b.barrier_loop(w, loops)
            out.append(ir.MbarrierWait(w, loop, slots, free=True))
        if step.task == "sync":
            return out
        t = self.b.low.tasks[step.task]
        if t.op != "load":
            raise LoweringError(f"the producer runs loads only, not {t.name}")
        self.b.units[t.name] = step.unit
        (full,) = [a for a in step.arrives if a.startswith("full:")] or [None]
        if full is None:
            raise LoweringError(f"{t.name}: nothing waits for the load (no full barrier)")
        if self.b.device.unit(step.unit).is_bulk_tensor_copy:
            return [replace(self.load(t, full, loops), waits=tuple(out))]
        out.append(self.copy(t, full))
        return out

    def copy(self, t, full: str) -> ir.ProducerCopy:
        (s,) = t.stmts
        kernel = self.b.low.kernel
        buf = self.b.buffers[self.b.low.buffer_of[s.name].name]
        home = self.b.values[s.name]
        tile = global_tile(kernel, self.b.spec.tiles, s.value.tensor, s.value.index)
        return ir.ProducerCopy(t.name, buf.name, tile, full, home.loop if buf.slots > 1 else "",
                               self.gathered_vector(tile))

    def gathered_vector(self, tile: ir.GlobalTile) -> int:
        """16-byte chunks (in elements) for a gathered tile whose rows are whole chunks
        where the launch checks the row stride and the tensor (else element copies);
        1 for every other tile."""
        vec = 16 // DTYPE_BYTES[tile.dtype]
        if tile.gather is None or tile.cols % vec:
            return 1
        conds: list = []
        for e in (tile.row_stride, tile.origin):
            known, c = divisible(e, vec)
            if not known:
                return 1
            conds += [x for x in c if isinstance(x, T.Scalar)]
        self.b.alignment.extend(("dim", c.name, vec) for c in conds)
        self.b.alignment.append(("tensor", tile.tensor, 16))
        return vec

    def load(self, t, full: str, loops) -> ir.TmaLoad:
        (s,) = t.stmts
        kernel = self.b.low.kernel
        buf = self.b.buffers[self.b.low.buffer_of[s.name].name]
        lay = buf.layout
        tensor = kernel.tensor(s.value.tensor)
        tma = self.b.box(t.name)
        dims = [dim_expr(kernel, d) for d in tensor.dims]
        coords = []
        for item in s.value.index:
            if isinstance(item, T.TileSlice):     # an offset tile's may be below 0: TMA
                size = extent_value(kernel, self.b.spec.tiles, item.size)   # zero-fills
                coords.append(tile_start(item, size))
            elif isinstance(item, T.Point):
                coords.append(item.index)
            else:
                coords.append(const(0))
        name = f"map_{t.name}"
        self.b.maps[name] = ir.TensorMap(name, tensor.name, tensor.dtype,
                                         tuple(reversed(dims)), tma.strides,
                                         tuple(reversed(tma.box)),
                                         lay.span if lay.swizzled else 0)
        # a tensor map needs 16-byte multiples of strides and a 16-byte aligned tensor;
        # where the launch finds otherwise, the element-wise variant copies the tile itself
        esize = DTYPE_BYTES[tensor.dtype]
        self.b.alignment.extend(("dim", c.name, 16 // esize) for c in tma.conditions)
        self.b.alignment.append(("tensor", tensor.name, 16))
        home = self.b.values[s.name]
        loop = home.loop if buf.slots > 1 else ""
        tile = global_tile(kernel, self.b.spec.tiles, s.value.tensor, s.value.index)
        return ir.TmaLoad(t.name, buf.name, name, tuple(reversed(coords)), lay.panels,
                          lay.panel_cols, lay.panel_bytes, lay.bytes, full, loop, tile)


def _issue_and_rest(ops, task: str) -> tuple[list, tuple, list, set[str]]:
    """A tensor-core step's ops split at its wgmma: (up to the issue, the values its wait
    pins, what follows the wait, the registers the wgmma writes or reads)."""
    mmas = [i for i, op in enumerate(ops) if isinstance(op, ir.Wgmma)]
    if len(mmas) != 1 or not (mmas[0] + 1 < len(ops) and
                              isinstance(ops[mmas[0] + 1], ir.WgmmaWait)):
        raise LoweringError(f"{task}: a rotated loop's tensor-core step issues one wgmma")
    i = mmas[0]
    mma = ops[i]
    values = {mma.out} | ({mma.addend} if mma.addend else set()) | \
        {o.value for o in (mma.a, mma.b) if o.in_registers}
    return ops[:i + 1], ops[i + 1].values, ops[i + 2:], values


def _one_group_in_flight(ops) -> tuple:
    """A loop that only feeds one wgmma (waits for its slots, multiplies into an
    accumulator, releases the slots) keeps that wgmma in flight while the next is issued:
    it waits for all but the newest group and releases the slots of the use before; after
    the loop it waits for the last and releases its slots (FlashAttention-3 and CUTLASS's
    mainloops). The tensor cores then never wait for the issue of the next wgmma."""
    out = []
    for op in ops:
        if isinstance(op, ir.Loop):
            op = replace(op, body=_one_group_in_flight(op.body))
            op = _deferred_release(op) or op
        out.append(op)
    return tuple(out)


def _deferred_release(loop: ir.Loop) -> ir.Loop | None:
    body = loop.body
    kinds = (ir.MbarrierWait, ir.Wgmma, ir.WgmmaWait, ir.MbarrierArrive)
    if not all(isinstance(op, kinds) for op in body):
        return None
    mmas = [i for i, op in enumerate(body) if isinstance(op, ir.Wgmma)]
    if len(mmas) != 1:
        return None
    i = mmas[0]
    mma = body[i]
    rest = body[i + 1:]
    if mma.addend != mma.out or mma.a.in_registers or not rest or \
            not isinstance(rest[0], ir.WgmmaWait) or rest[0].pending != 0 or \
            any(isinstance(op, ir.MbarrierWait) for op in rest):
        return None
    arrives = [op for op in rest[1:] if isinstance(op, ir.MbarrierArrive)]
    if any(a.per_warp or a.lag or a.loop != loop.var for a in arrives) or \
            len(arrives) != len(rest) - 1:
        return None
    return replace(loop, body=body[:i + 1] + (ir.WgmmaWait(1, (mma.out,)),) +
                   tuple(replace(a, lag=1) for a in arrives),
                   drain=loop.drain + (ir.WgmmaWait(0, (mma.out,)),) +
                   tuple(replace(a, lag=1, after_loop=True) for a in arrives))


def _pinned(ops, accumulators: set[str]) -> tuple:
    """Pin a wgmma accumulator after each CUDA-core definition of it (its zero fill, a
    rescale): ir.PinAccumulators."""
    out = []
    for op in ops:
        if isinstance(op, ir.Loop):
            op = replace(op, body=_pinned(op.body, accumulators),
                         fill=_pinned(op.fill, accumulators),
                         drain=_pinned(op.drain, accumulators))
        elif isinstance(op, ir.Iteration):
            op = replace(op, body=_pinned(op.body, accumulators))
        out.append(op)
        if isinstance(op, ir.Compute) and op.target in accumulators:
            out.append(ir.PinAccumulators((op.target,)))
    return tuple(out)


TURN_BARRIER = 3       # instance p's turn barrier is 3 + p (1 + p: its own; 15: producer)


def _taking_turns(ops, where: Turns, parts: int) -> tuple:
    """Ping-pong (ptc.sched.turns) with named barriers, FlashAttention-3's way: in each
    iteration an instance waits at its own barrier before its first wgmma and arrives at
    the next instance's after issuing the wgmma that hands over, 128 threads each. The last
    instance arrives once before the loop (instance 0 holds the first turn), and instance 0
    waits once after it for that last hand-over, so every barrier completes as often as it
    is used, whatever the trip count."""
    threads = 2 * WARPGROUP * 32
    out = []
    for op in ops:
        if isinstance(op, ir.Loop) and op.var == where.loop:
            body = []
            # in a rotated loop the first wgmma is issued for the next iteration, inside an
            # Iteration: the turn is taken before it all the same, in every iteration
            first = next(i for i, o in enumerate(op.body) if _issues(o, where.take))
            last = max(i for i, o in enumerate(op.body) if _issues(o, where.handover))
            for i, o in enumerate(op.body):
                if i == first:
                    body.append(ir.NamedBarrier("this warpgroup's turn at the tensor cores",
                                                TURN_BARRIER, threads))
                body.append(o)
                if i == last:
                    body.append(ir.NamedBarrier("the other warpgroup's turn: its wgmmas run "
                                                "under this one's CUDA-core work",
                                                TURN_BARRIER, threads, arrive=True,
                                                next_instance=True))
            out.append(ir.NamedBarrier("warpgroup 0 takes the first turn", TURN_BARRIER,
                                       threads, arrive=True, next_instance=True,
                                       only=parts - 1))
            out.append(replace(op, body=tuple(body)))
            out.append(ir.NamedBarrier(f"the turn warpgroup {parts - 1} handed over last",
                                       TURN_BARRIER, threads, only=0))
            continue
        if isinstance(op, ir.Loop):
            op = replace(op, body=_taking_turns(op.body, where, parts))
        out.append(op)
    return tuple(out)


def _issues(op, task: str) -> bool:
    """Whether `op` is (or holds, for an Iteration) the wgmma of `task`."""
    return any(isinstance(o, ir.Wgmma) and o.task == task for o in ir.walk([op]))


def _named_barriers(ops) -> tuple:
    """A consumer warpgroup's barriers are among its own threads."""
    out = []
    for op in ops:
        if isinstance(op, ir.Barrier):
            op = ir.NamedBarrier(op.why)
        elif isinstance(op, ir.Loop):
            op = replace(op, body=_named_barriers(op.body), fill=_named_barriers(op.fill))
        elif isinstance(op, ir.Iteration):
            op = replace(op, body=_named_barriers(op.body))
        out.append(op)
    return tuple(out)


__all__ = ["lower_specialized", "wgmma_layouts"]
