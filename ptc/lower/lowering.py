"""plan + sTask-graph + device -> LoweredKernel: the lowering stage (docs/lowering.md).

    lowered = lower(plan, graph, device, capabilities)

Decided here, once, for the whole kernel:
- the unit of every task: an mma the plan puts on an mma unit runs on the atom the device
  offers and the renderer prints (`ptc.lower.atoms`), tiled over the warps; one the plan
  puts on CUDA cores is a SIMT matmul. A plan that asks tensor cores for a tile no atom
  fits is refused (the search never builds one: ptc.sched.construct asks `mma_tiling`);
- where every value lives (`ptc.lower.assign`): loaded tiles in their plan buffers in
  shared memory, read where they are used; the rest in registers in named layouts; a
  loop-invariant shared operand of an mma is read into registers once, before its loop,
  when the register budget allows; a value read in another layout than its home's goes
  through shared memory into a copy in that layout (`ptc.lower.conversions`);
- the ops in program order, with every copy, commit, wait and barrier explicit
  (`ptc.lower.sync`), shared memory placed by lifetimes (`ptc.lower.memory`), a register
  estimate, the launch, and what each task issues (`ptc.lower.costs`).

Multistage rings (the plan's `stages`): the copies of a pipelined loop's first
`stages - 1` iterations are issued before it; inside it, the copies for iteration
it + stages - 1 are issued right after the loop's first wait, whose barrier is what frees
the slot they overwrite (every thread has finished the iteration that read it).
"""
from __future__ import annotations

import functools
import math
from dataclasses import replace

from ..devices import Device, UnitKind
from ..sched.plan import LoopBlock, Plan, Step
from ..sema import typed as T
from ..sema.dtypes import DTYPE_BYTES
from ..sema.ranges import named_ranges
from ..stask.graph import STaskGraph, TaskOp
from . import ir
from .arith import base2_exponentials
from .assign import LayoutProblem, Tiling, assign_layouts, layout_problem, tiling_layouts
from .atoms import fitting_atoms, mma_atom, mma_tilings
from .capabilities import BUFFER_BYTES, Capabilities, LoweringError
from .conversions import contiguous_run, layout_conversions, mma_operand_var
from .layout import Layout
from .pairs import computes_in_pairs
from .passes import PassTrace
from .program import Stmt, flatten, mma_parts, reads
from .staged_copies import staged_waits
from .storage import c_name
from .swizzle import ALIGN, transposed_layout
from .tiles import (TileError, copy_layout, divisible_all, extent_value, global_tile, stored_rows,
                    until_bound)
from .tiling_choice import cheapest_tilings, tiling_cost


def fp8_by_cvt(device: Device, values, buffers) -> bool:
    """Whether a kernel converts to FP8 by the device's instruction (feature cvt_fp8: sm89+'s
    cvt.rn.satfinite, its NaN made 0x7F) rather than ptc's bit manipulation: where it holds
    FP8 values in registers or shared memory. What the renderer defines (PTC_CVT_FP8), the
    cost model counts and `--emit lowered` prints (LoweredKernel.fp8_cvt)."""
    return "cvt_fp8" in device.features and any(
        getattr(v, "dtype", "") in ("f8e4m3", "f8e5m2") for v in [*values, *buffers])

class Lowering:
    def __init__(self, plan: Plan, graph: STaskGraph, device: Device,
                 caps: Capabilities | None, trace: PassTrace | None = None):
        self.plan, self.graph, self.device, self.caps = plan, graph, device, caps
        self.trace = trace or PassTrace()
        self.kernel = graph.kernel
        self.tiles = dict(graph.tiles or {})
        self.role = plan.roles[0]
        self.warps = self.role.warps
        self.warp_size = device.resources.warp_size
        self.threads = self.warps * self.warp_size
        self.tasks = {t.name: t for t in graph.tasks}
        self.steps = {s.task: s for _, s in plan.steps()}
        self.stmts = flatten(plan, graph)
        self.buffer_of = {b.value: b for b in plan.buffers}
        self.notes: list[str] = []

    def extent(self, e) -> int:
        try:
            return extent_value(self.kernel, self.tiles, e)
        except TileError as exc:
            raise LoweringError(str(exc)) from None

    def shape(self, e: T.TExpr) -> tuple[int, ...]:
        return tuple(self.extent(x) for x in e.type.shape)

    # ---- units and tilings -------------------------------------------------------------
    def mma_stmts(self) -> list[Stmt]:
        return [s for s in self.stmts if s.kind == TaskOp.MMA]

    def unit_kind(self, task: str) -> UnitKind:
        step = self.steps[task]
        return self.device.unit(step.unit).kind

    def tiling_options(self) -> dict[str, list[Tiling]]:
        supported = self.caps.atoms if self.caps is not None else None
        out = {}
        for s in self.mma_stmts():
            if self.unit_kind(s.task) != UnitKind.MMA:
                continue
            _, mm = mma_parts(s.stmt.value)
            m, k = self.shape(mm.lhs)
            n = self.shape(mm.rhs)[1]
            dtype = mm.lhs.type.dtype
            if mma_atom(self.device, dtype, m, n, k, self.warps, supported) is None:
                raise LoweringError(
                    f"{s.task} is placed on {self.steps[s.task].unit}, but no matrix "
                    f"instruction of {self.device.name} takes {dtype} {m}x{n}x{k} on "
                    f"{self.warps} warps")
            swaps = (False, True) if self.caps is not None and self.caps.swapped_operands \
                else (False,)
            out[s.task] = mma_tilings(fitting_atoms(self.device, dtype, supported), m, n, k,
                                      self.warps, swaps)
        return out

    # ---- the whole lowering -----------------------------------------------------------
    def run(self) -> ir.LoweredKernel:
        shared = {s.stmt.name for s in self.stmts if s.kind == TaskOp.LOAD}
        problem = layout_problem(self.stmts, shared, {}, self.warps, self.warp_size,
                                 self.extent)
        options = self.tiling_options()
        layouts = {t: [tiling_layouts(tl, t.removeprefix("mma_")) for tl in tls]
                   for t, tls in options.items()}

        def solve(picks: tuple[int, ...]):
            chosen = tuple((t, layouts[t][p]) for t, p in zip(options, picks))
            return dict(chosen), assign_layouts(LayoutProblem(problem.role, chosen))

        picks = cheapest_tilings([[tiling_cost(tl) for tl in tls] for tls in options.values()],
                                 lambda picks: self.layout_cost(solve(picks)[1]))
        picks = picks if picks is not None else ()    # None: no tensor-core mma at all
        self.tiling = {t: options[t][p] for t, p in zip(options, picks)}
        self.mma_layouts, self.solution = solve(picks)
        return Builder(self).build()

    def layout_cost(self, sol) -> tuple[int, int, int]:
        """The part of a tiling combination's score its layouts decide (ptc.lower.
        tiling_choice has the rest): layout conversions, then cross-warp reduction steps,
        then lane exchanges in reductions."""
        cross = shuffles = 0
        for s in self.stmts:
            v = s.stmt.value if isinstance(s.stmt, T.Let) else None
            if isinstance(v, T.Reduce):
                for name in reads(v.arg):
                    lay = sol.layouts.get(name)
                    if lay is not None and lay.rank == v.arg.type.rank:
                        masks, warp_digits = lay.replicating(v.axis)
                        cross += len(warp_digits)
                        shuffles += len(masks)
                        break
        return len(sol.conversions), cross, shuffles


class Builder:
    """Turns the chosen layouts into the op list and the kernel."""

    def __init__(self, low: Lowering):
        self.low = low
        self.plan, self.graph, self.device = low.plan, low.graph, low.device
        self.layouts: dict[str, Layout] = {}
        self.values: dict[str, object] = {}
        self.buffers: dict[str, ir.Buffer] = {}
        self.scratch_count = 0
        self.renames: dict[str, str] = {}   # this statement: value -> its converted copy
        self.pre_transposed: set[str] = set()   # copies that hold a value transposed
        self.units: dict[str, str] = {}
        self.hoisted: dict[tuple[str, str], str] = {}   # (task, value) -> fragments value
        self.alignment: list[str] = []
        self.copy_tiles: dict[str, tuple] = {}    # load task -> copy_tile(task)

    # ---- homes ------------------------------------------------------------------------
    def k_along_rows(self, value: str) -> bool:
        """Is `value` read only as operands of atoms that read k faster along a row, with
        its k along its rows (B as loaded, or A transposed)? Then, where the renderer
        takes it, the tile is stored transposed (swizzle.transposed_layout)."""
        caps = self.low.caps
        if caps is None or not caps.transposed_operands:
            return False
        uses = [s for s in self.low.stmts if value in reads(s.stmt.value)]
        for s in uses:
            if s.kind != TaskOp.MMA or s.task not in self.low.tiling:
                return False
            tiling = self.low.tiling[s.task]
            atom = tiling.atom
            _, mm = mma_parts(s.stmt.value)
            a_name, a_transposed = mma_operand_var(mm.lhs)
            b_name, b_transposed = mma_operand_var(mm.rhs)
            # (its reads' costs: k-contiguous, strided; is its k along its rows?); a
            # swapped product reads a as the instruction's B and b as its A
            a_side = (atom.b_loads, a_transposed) if tiling.swapped else \
                (atom.a_loads, a_transposed)
            b_side = (atom.a_loads, not b_transposed) if tiling.swapped else \
                (atom.b_loads, not b_transposed)
            sides = ([a_side] if a_name == value else []) + \
                    ([b_side] if b_name == value else [])
            if not sides or not all(along and loads[1] > loads[0] for loads, along in sides):
                return False
        return bool(uses)

    def layout_name(self, lay: Layout) -> str:
        for name, other in self.layouts.items():
            if other.same_map(lay) and other.shape == lay.shape:
                return name
        name = lay.name.replace(".", "_")
        while name in self.layouts:
            name += "_"
        self.layouts[name] = lay.renamed(name)
        return name

    def homes(self) -> None:
        for b in self.plan.buffers:
            task = self.low.tasks[b.producer]
            shape = tuple(b.shape)
            rows, cols = (shape if len(shape) == 2 else (1, shape[0]) if shape else (1, 1))
            lay = copy_layout(self.low.kernel, self.low.tiles, task.stmts[0].value, shape, b.dtype)
            if lay is not None and self.k_along_rows(b.value):
                lay = transposed_layout(rows, cols, b.dtype) or lay
            slot = lay.bytes if lay else max(math.prod(shape), 1) * DTYPE_BYTES[b.dtype]
            slot = align_up(slot, ALIGN if lay is not None and lay.swizzle == "xor" else 16)
            self.buffers[b.name] = ir.Buffer(b.name, b.dtype, shape, b.stages, lay, slot, 0,
                                             f"ring of {b.producer}" if b.stages > 1
                                             else f"tile of {b.producer}", b.name)
            self.values[b.value] = ir.InShared(b.name, task.region)
        self.register_homes()

    def register_homes(self) -> None:
        """Every let-bound value not in shared memory lives in registers, in the layout
        the layout solution gave it."""
        for s in self.low.stmts:
            if not isinstance(s.stmt, T.Let) or s.stmt.name in self.values:
                continue
            name = s.stmt.name
            lay = self.low.solution.layouts.get(name)
            if lay is None:
                raise LoweringError(f"no layout for {name}")
            shape = self.low.shape(s.stmt.value)
            dtype = s.stmt.value.type.dtype
            self.values[name] = ir.RegTile(c_name(name), dtype, shape, self.layout_name(lay))

    # ---- ops -----------------------------------------------------------------------------
    def build(self) -> ir.LoweredKernel:
        from .costs import task_costs
        from .hoist_copies import hoist_copies
        from .inplace import in_place_addends
        from .memory import over_shared_memory, place_buffers
        from .registers import estimate_registers, register_bound_blocks
        from .shared_once import shared_reads_once
        from .sync import place_sync

        trace = self.low.trace
        self.homes()
        body = trace.after("steps", tuple(self.items(self.plan.roles[0].body, ())))
        self.base_registers = estimate_registers(body, self)
        self.reserved_registers = 0
        body = trace.after("hoist_fragments", self.hoist_fragments(body))
        body = trace.after("shared_reads_once", shared_reads_once(body, self))
        buffers, total = place_buffers(body, list(self.buffers.values()), self.values)
        too_big = over_shared_memory(total, buffers, self.device)
        if too_big:
            raise LoweringError(too_big)
        body = trace.after("place_sync", place_sync(body, {b.name: b for b in buffers},
                                                    self.values))
        body = trace.after("staged_waits", staged_waits(body))
        self.values = in_place_addends(body, self.values)
        registers = estimate_registers(body, self)
        dev = self.device
        res = dev.resources
        most = res.max_registers_per_thread
        cap = res.registers // (max(self.resident_blocks(registers, total), 1) * self.low.threads)
        body, registers = hoist_copies(body, registers, min(cap, most), most, self.low.caps)
        body = trace.after("hoist_copies", body)
        blocks = self.resident_blocks(registers, total)
        min_blocks = (self.alu_accumulator_blocks(body, registers, blocks)
                      or register_bound_blocks(res, self.low.threads, total, blocks))
        launch = ir.Launch(self.grid(), self.low.threads, self.low.warps, total, registers,
                           blocks, self.plan.launch.persistent, min_blocks=min_blocks)
        kernel = ir.LoweredKernel(
            self.low.kernel.name, dev.name, dev.backend, self.plan.style, launch,
            tuple(self.layouts.values()), tuple(buffers), tuple(self.values.items()), body,
            tuple(self.units.items()), (), tuple(dict.fromkeys(self.alignment)),
            tuple(self.low.notes), arith16=self.low.caps.arith16() if self.low.caps else (),
            int_ranges=tuple(self.int_ranges.items()),
            fp8_cvt=fp8_by_cvt(dev, self.values.values(), buffers))
        return replace(kernel, costs=task_costs(kernel, self.graph, dev))

    def resident_blocks(self, registers: int, shared_bytes: int) -> int:
        """Blocks per EU at `registers` per thread (allocated in eights)."""
        regs = align_up(max(registers, 16), 8) * self.low.threads
        return self.device.resources.resident_blocks(self.low.threads, regs, shared_bytes)

    def alu_accumulator_blocks(self, body, registers: int, blocks: int) -> int:
        """The blocks per EU the register allocator is told to leave room for (0: its own
        choice). Where the device has registers only matrix-core accumulators use (CDNA's
        AGPRs, past alu_registers_per_thread) and the vector ALU updates an accumulator in
        a loop (flash attention's rescale of o), the budget is bounded to the ALU's
        registers: given more, the allocator puts the accumulators in AGPRs and moves them
        to VGPRs and back every iteration. Only where the plan's own occupancy and
        estimate allow it."""
        res = self.device.resources
        alu = res.alu_registers
        if alu >= res.max_registers_per_thread or registers > alu:
            return 0
        accumulators = {op.out for op in ir.walk(body) if isinstance(op, ir.Mma)}
        touched = [name for loop in ir.walk(body) if isinstance(loop, ir.Loop)
                   for op in ir.walk(loop.body) if isinstance(op, ir.Compute)
                   for name in (op.target, *reads(op.expr)) if name in accumulators]
        need = -(-res.registers // (alu * self.low.threads))
        if not touched or need > blocks:
            return 0
        self.low.notes.append(
            f"{need} block(s) per EU for the register allocator: the vector ALU reads "
            f"accumulators in the loop ({', '.join(dict.fromkeys(touched))}), so they stay "
            f"in the {alu} registers it reads")
        return need

    def grid(self) -> tuple:
        from .tiles import add, const, dim_expr
        out = []
        for a in self.graph.grid.axes:
            d = dim_expr(self.low.kernel, a.dim)
            if a.size is None:
                count = d
            else:
                size = self.low.extent(a.size)
                count = T.Elementwise("floordiv", (add(d, const(size - 1)), const(size)),
                                      T.TileType("i32"))
            out.append((a.var, count))
        return tuple(out)

    def items(self, items, loops: tuple[str, ...]) -> list:
        out: list = []
        for it in items:
            if isinstance(it, LoopBlock):
                out.append(self.loop(it, loops))
            else:
                out.extend(self.step(it, loops))
        return out

    def loop(self, block: LoopBlock, loops) -> ir.Loop:
        region = next(r for r in self.graph.loop_regions() if r.name == block.var)
        loop = region.loop
        inner = loops + (block.var,)
        direct = [s for s in block.body if isinstance(s, Step)]
        depth = max((s.offset for s in direct), default=0) + 1
        body: list = []
        deferred: list = []
        fill: list = []
        for k in range(depth - 1):     # iteration by iteration, as the loop commits them
            for it in direct:
                if it.offset > k:
                    fill.extend(self.copy(self.low.tasks[it.task], inner, ahead=k, guard=True))
        for it in block.body:
            if isinstance(it, LoopBlock):
                body.append(self.loop(it, inner))
            elif it.offset > 0:
                copy = self.copy(self.low.tasks[it.task], inner, ahead=it.offset, guard=True)
                # a prefetch into a ring is issued just after the body's first wait: the
                # barrier that follows the wait frees the slot it overwrites. A prefetch
                # into a single buffer overwrites the tile still read this iteration: it
                # goes where the plan put it, after that tile's last reader.
                (deferred if self.ring_slots(it.task) > 1 else body).extend(copy)
            else:
                body.extend(self.step(it, inner))
        if deferred:
            at = next((i + 1 for i, op in enumerate(body) if isinstance(op, ir.PlanWait)), 0)
            body[at:at] = deferred
        return ir.Loop(block.var, self.low.extent(loop.axis.size), loop.axis.dim,
                       until_bound(self.low.kernel, loop),
                       tuple(body), depth, tuple(fill))

    def ring_slots(self, task: str) -> int:
        (s,) = self.low.tasks[task].stmts
        return self.low.buffer_of[s.name].stages

    def step(self, step: Step, loops) -> list:
        out: list = []
        if step.waits:
            out.append(ir.PlanWait(tuple(self.plan.barrier(b).buffer for b in step.waits)))
        if step.is_sync:
            return out
        t = self.low.tasks[step.task]
        self.units[t.name] = step.unit
        if t.op == TaskOp.LOAD:
            out.extend(self.copy(t, loops))
            return out
        for s in (x for x in self.low.stmts if x.task == t.name):
            out.extend(self.statement(s, step))
        return out

    def statement(self, s: Stmt, step: Step) -> list:
        """The ops of one statement of a task: its conversions, then what computes it."""
        out = list(layout_conversions(self, s))
        if s.kind in (TaskOp.STORE, TaskOp.ATOMIC_ADD):
            out.append(self.store_op(s, step))
        elif s.kind == TaskOp.MMA:
            out.extend(self.mma_ops(s, step))
        elif isinstance(s.stmt.value, T.Reduce):
            op = self.reduce(s)
            out.append(op)
            if op.scratch:
                out.append(ir.WarpCombine(s.task, op.target, op.op, op.scratch,
                                          op.cross_warps))
        else:
            out.append(self.compute(s))
        return out

    def store_op(self, s: Stmt, step: Step):
        return self.store(s)

    def mma_ops(self, s: Stmt, step: Step) -> list:
        return [self.mma(s, step)]

    # ---- copies ---------------------------------------------------------------------------
    def copy(self, t, loops, ahead: int = 0, guard: bool = False) -> list:
        (s,) = t.stmts
        buf = self.low.buffer_of[s.name]
        unit = self.device.unit(self.low.steps[t.name].unit)
        tile, (vector, fallback, conditions) = self.copy_tile(t)
        self.alignment.extend(conditions)
        op = ir.CopyTile(t.name, buf.name, tile, vector, unit.is_async and vector > 0,
                         s.value.pad, loops[-1] if loops and (buf.stages > 1 or ahead) else "",
                         ahead, guard, fallback)
        if not op.asynchronous:
            op = replace(op, vector=1)
        elif self.low.caps is not None and self.low.caps.staged_copies:
            op = replace(op, staged=True, resource=self.low.caps.buffers(tile))
            if op.resource:
                self.alignment.append(("bytes", tile.tensor, BUFFER_BYTES))
        return [op] + ([ir.CommitGroup()] if op.asynchronous else [])

    def copy_tile(self, t) -> tuple[ir.GlobalTile, tuple[int, int, list]]:
        """(the global tile a load task copies, its `vector`): once per task, however many
        copies of it the pipeline issues."""
        if t.name not in self.copy_tiles:
            (s,) = t.stmts
            try:
                tile = global_tile(self.low.kernel, self.low.tiles, s.value.tensor,
                                   s.value.index)
            except TileError as exc:
                raise LoweringError(str(exc)) from None
            unit = self.device.unit(self.low.steps[t.name].unit)
            self.copy_tiles[t.name] = tile, self.vector(tile, s.value.pad, unit.is_async)
        return self.copy_tiles[t.name]

    def vector(self, tile: ir.GlobalTile, pad: float, is_async: bool,
               widest: int = 0) -> tuple[int, int, list]:
        """(elements per vector instruction -- a cp.async of 4-16 bytes, or a store of at
        most `widest` elements --, elements when the alignment conditions fail (0: no
        variant needed), runtime conditions)."""
        esize = DTYPE_BYTES[tile.dtype]
        if not is_async or pad != 0.0 or not (isinstance(tile.col_stride, T.Const)
                                              and tile.col_stride.value == 1):
            return 0, 0, []
        sizes = (16, 8, 4) if not widest else tuple(widest * esize >> i for i in range(4)
                                                    if (widest >> i) >= 2)
        for nbytes in sizes:
            vec = nbytes // esize
            if vec < 1 or tile.cols % vec:
                continue
            # an offset tile's columns may start before the tensor: a vector is all
            # outside or all inside only where its start is a multiple too
            ok, conds = divisible_all((tile.row_stride, tile.origin, tile.col_bound) +
                                      ((tile.col_start,) if tile.col_low else ()), vec)
            if not ok:
                continue
            conditions = [("dim", c.name, vec) for c in conds if isinstance(c, T.Scalar)]
            conditions.append(("tensor", tile.tensor, nbytes))
            # the pointer's alignment is a launch-time condition too: always a variant
            return vec, 1, conditions
        return 0, 0, []

    # ---- compute ---------------------------------------------------------------------------
    def renamed(self, e: T.TExpr) -> T.TExpr:
        if not self.renames:
            return e
        if isinstance(e, T.Var) and e.name in self.renames:
            return T.Var(self.renames[e.name], e.type)
        return T.map_children(e, self.renamed)

    def reduce_layout(self, value: T.Reduce, name: str) -> Layout | None:
        """The layout the reduction `name` computes its operand in (layout assignment
        decided it)."""
        return self.low.solution.reduce_sources.get(name)

    @functools.cached_property
    def int_ranges(self) -> dict[str, tuple[int, int]]:
        """The ranges of the kernel's named i32 values (sema.ranges.named_ranges)."""
        return named_ranges(self.low.kernel)

    def compute(self, s: Stmt) -> ir.Compute:
        name = s.stmt.name
        home = self.values[name]
        lay = self.layouts[home.layout]
        expr = base2_exponentials(self.renamed(s.stmt.value))
        mask = lay.exceeds(home.shape)
        packed16 = self.low.caps.packed16 if self.low.caps else frozenset()
        return ir.Compute(s.task, name, expr, mask,
                          pairs=not any(mask) and computes_in_pairs(
                              expr, home.dtype, lay, packed16, self.int_ranges))

    def reduce(self, s: Stmt) -> ir.Reduce:
        value: T.Reduce = s.stmt.value
        src = self.reduce_layout(value, s.stmt.name)
        if src is None:
            raise LoweringError(f"the reduction {s.stmt.name} reads no register tile")
        masks, warp_digits = src.replicating(value.axis)
        cross = math.prod(src.warps[i].size for i in warp_digits)
        scratch = ""
        if cross > 1:
            result = self.values[s.stmt.name]
            extent = math.prod(self.layouts[result.layout].shape)
            dtype = "i32" if value.type.dtype in ("i32", "bool") else "f32"
            scratch = self.scratch_buffer(f"cross-warp {value.op} of {s.stmt.name}", dtype,
                                          (extent, cross))
        shape = self.low.shape(value.arg)
        return ir.Reduce(s.task, s.stmt.name, base2_exponentials(self.renamed(value.arg)),
                         value.op, value.axis, self.layout_name(src), tuple(masks), scratch,
                         cross, src.exceeds(shape))

    def scratch_buffer(self, purpose: str, dtype: str, shape: tuple[int, ...]) -> str:
        self.scratch_count += 1
        name = f"scratch{self.scratch_count}"
        nbytes = align_up(math.prod(shape) * DTYPE_BYTES[dtype], 16)
        self.buffers[name] = ir.Buffer(name, dtype, shape, 1, None, nbytes, 0, purpose)
        return name

    def mma(self, s: Stmt, step: Step):
        addend, mm = mma_parts(s.stmt.value)
        add_name = addend.name if isinstance(addend, T.Var) else None
        if s.task not in self.low.tiling:
            return ir.SimtMatmul(s.task, s.stmt.name, add_name, self.renamed(mm.lhs),
                                 self.renamed(mm.rhs), self.low.shape(mm.lhs)[1])
        t = self.low.tiling[s.task]
        c, a_lay, b_lay = self.low.mma_layouts[s.task]
        ops = []
        for operand, lay in ((mm.lhs, a_lay), (mm.rhs, b_lay)):
            name, transposed = mma_operand_var(operand, self.renames)
            transposed = transposed and name not in self.pre_transposed
            home = self.values.get(name)
            if isinstance(home, ir.InShared):
                stored = self.buffers[home.buffer].layout
                flipped = stored is not None and stored.transposed
                # the instruction's operand of a swapped product is this one's transpose
                ops.append(ir.Operand(name, False, (transposed != t.swapped) != flipped))
            elif isinstance(home, ir.RegTile) and not transposed and \
                    self.layouts[home.layout].same_map(lay):
                ops.append(ir.Operand(name, True, False))
            else:
                raise LoweringError(f"{s.task}: operand {name} is in registers in another "
                                    "layout (conversions through shared memory come next)")
        a, b = ops[::-1] if t.swapped else ops
        return ir.Mma(s.task, s.stmt.name, add_name, a, b, t.atom, t.mi, t.ni, t.ks, t.wm,
                      t.wn, mm.lhs.type.dtype, t.swapped, t.replicas)

    def store(self, s: Stmt) -> ir.StoreTile:
        st: T.Store = s.stmt
        try:
            tile = global_tile(self.low.kernel, self.low.tiles, st.tensor, st.index,
                               column_of_rows=stored_rows(st))
        except TileError as exc:
            raise LoweringError(str(exc)) from None
        if not isinstance(st.value, T.Var):
            raise LoweringError(f"store to {st.tensor} of an expression (the sTask builder "
                                "binds stored values to names)")
        home = self.values[st.value.name]
        vector, fallback = 1, 0
        if not st.atomic and isinstance(home, ir.RegTile) and tile.rows * tile.cols > 1 \
                and tile.dtype in ("f32", "f16", "bf16"):
            run = contiguous_run(self.layouts[home.layout])
            esize = DTYPE_BYTES[tile.dtype]
            widest = max((v for v in (8, 4, 2) if run % v == 0 and v * esize <= 16), default=1)
            if widest > 1:
                vec, fb, conditions = self.vector(tile, 0.0, True, widest)
                if vec > 1:
                    vector, fallback = vec, fb
                    self.alignment.extend(conditions)
        return ir.StoreTile(s.task, tile, st.value.name, st.atomic, vector, fallback)

    # ---- hoisting loop-invariant operands into registers --------------------------------
    def hoist_fragments(self, body):
        from .hoist import hoist_operands
        return hoist_operands(body, self)

    def register_budget(self) -> int:
        res = self.device.resources
        return min(res.max_registers_per_thread, res.registers // self.low.threads)

    def register_room(self, words: int) -> bool:
        """Do `words` more registers per thread fit, with a margin for what the estimate
        does not see (addresses, the compiler's temporaries)?"""
        need = self.base_registers + self.reserved_registers + words
        return need <= self.register_budget()

    def reserve_registers(self, words: int) -> None:
        self.reserved_registers += words


def align_up(n: int, a: int) -> int:
    return (n + a - 1) // a * a
