"""The homes of a warp-specialized plan's values and the consumer role's ops (sm90a;
ptc.lower.specialized): its loops (rotated ones too), steps between mbarriers, wgmmas with
their operands staged where they are computed in registers, and stores by TMA."""
from __future__ import annotations

from dataclasses import replace

from ..devices.model import UnitKind
from ..sched.plan import LoopBlock, Step
from ..sema import typed as T
from ..sema.dtypes import DTYPE_BYTES
from ..stask.graph import TaskOp
from . import ir
from .atoms import wgmma_k, why_not_k_major
from .capabilities import LoweringError
from .conversions import mma_operand_var
from .lowering import Builder, align_up
from .pairs import pair_axis
from .program import Stmt, mma_parts, reads
from .registers import defines
from .specialized_plan import ROW0, RoleView, SpecializedPlan
from .stmatrix import stmatrix_blocks
from .swizzle import ALIGN, SmemLayout, smem_layout, tma_layout
from .sync import op_reads
from .tiles import (add, const, dim_expr, extent_value, global_tile, index, mul, point_index,
                    rows_vector_layout, stored_rows, until_bound)
from .tma import TmaBox, copy_rules, rows_addressed_each, tma_box, tma_store_box


class SpecializedBuilder(Builder):
    """The consumer role through the single-role Builder (its computes, reductions,
    conversions and stores), and the homes the producer's loads fill; the kernel around
    them is ptc.lower.specialized's."""

    def __init__(self, spec: SpecializedPlan, consumer: RoleView):
        super().__init__(consumer)
        self.spec = spec
        self.maps: dict[str, ir.TensorMap] = {}
        self.slot_of: dict[str, ir.Buffer] = {}
        self.barrier_sets: dict[str, ir.MbarrierSet] = {}

    # ---- homes ---------------------------------------------------------------------------
    def split_rows(self, value: T.TExpr) -> bool:
        """Whether a tile's first axis holds the rows the consumers divide."""
        return self.spec.holds_rows(value.type.shape)

    def load_unit(self, task: str) -> str:
        return next(s.unit for r, s in self.plan.steps() if s.task == task)

    def box(self, task: str) -> TmaBox:
        (s,) = self.low.tasks[task].stmts
        box = tma_box(self.low.kernel, self.spec.tiles, s.value, copy_rules(self.device))
        if isinstance(box, str):
            raise LoweringError(f"{task}: the plan loads it by TMA, but {box}")
        return box

    @staticmethod
    def threads_layout(task, rows: int, cols: int, dtype: str) -> SmemLayout:
        """The layout of a tile the producer's threads copy: gathered or strided rows go
        where wgmma can read them, the layout TMA would write (construct.py checked that a
        strided tile has one)."""
        lay = tma_layout(rows, cols, dtype) if rows_addressed_each(task.stmts[0].value) else None
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
                lay = rows_vector_layout(self.low.kernel, self.spec.tiles, task.stmts[0].value) \
                    or self.threads_layout(task, rows, cols, b.dtype)
            slot = align_up(lay.bytes, ALIGN)
            self.buffers[b.name] = ir.Buffer(b.name, b.dtype, shape, b.stages, lay, slot, 0,
                                             f"ring of {b.producer}" if b.stages > 1
                                             else f"tile of {b.producer}", b.name)
            self.values[b.value] = ir.InShared(b.name, task.region,
                                               self.split_rows(task.stmts[0].value))
        self.register_homes()

    # ---- the consumer's steps ---------------------------------------------------------------
    def loop(self, block: LoopBlock, loops) -> ir.Loop:
        region = next(r for r in self.graph.loop_regions() if r.name == block.var)
        loop = region.loop
        size = self.spec.tiles.get(loop.axis.size, loop.axis.size) \
            if isinstance(loop.axis.size, str) else loop.axis.size
        if any(isinstance(s, Step) and s.offset for s in block.body):
            fill, body, drain = self.rotated(block, loops + (block.var,))
            return ir.Loop(block.var, size, loop.axis.dim, until_bound(self.low.kernel, loop),
                           body, fill=fill, drain=drain, peel=1)
        body = self.items(block.body, loops + (block.var,))
        return ir.Loop(block.var, size, loop.axis.dim, until_bound(self.low.kernel, loop),
                       tuple(body))

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
        if not step.is_sync:
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
            on_wgmma = s.kind == TaskOp.MMA and step is not None and \
                self.device.unit(step.unit).kind == UnitKind.MMA
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
                first = index(ROW0) if self.spec.inner == 1 else T.Elementwise(
                    "floordiv", (index(ROW0), const(self.spec.inner)), T.TileType("i32"))
                return T.Elementwise("add", (e, first), e.type)
            if isinstance(e, T.IndexVec) and e.var is None and self.spec.inner > 1 and \
                    len(T.extent_factors(e.size)) == 2:
                # the row form's positions of a tile of rank 3's rows (`arange(G*BM)`, which
                # the row form makes and a program cannot write): from the warpgroup's first
                # row, so that `// BM` gives the row's head (ptc.sema.batched_index)
                return T.Elementwise("add", (e, index(ROW0)), e.type)
            return e
        if isinstance(s.stmt, T.Let):
            return replace(s, stmt=replace(s.stmt, value=fix(s.stmt.value)))
        return replace(s, stmt=replace(s.stmt, value=fix(s.stmt.value)))

    def wgmma(self, s: Stmt, step: Step) -> list:
        addend, mm = mma_parts(s.stmt.value)
        unit = self.device.unit(step.unit)
        if unit.kind != UnitKind.MMA:
            return [self.mma(s, step)]          # CUDA cores: the single role's SIMT matmul
        add_name = addend.name if isinstance(addend, T.Var) else None
        if s.task in self.low.swapped:
            return self.swapped_wgmma(s, mm, add_name)
        c, a_lay, _ = self.low.mma_layouts[s.task]
        m, n = c.shape
        k = a_lay.shape[1]
        operands, staged = [], []
        for which, operand in (("a", mm.lhs), ("b", mm.rhs)):
            name, transposed = mma_operand_var(operand, self.renames)
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

    def swapped_wgmma(self, s: Stmt, mm, add_name: str | None) -> list:
        """out = a @ b multiplied as out^T = b^T a^T (SpecializedPlan.rs_swap): the
        instruction's A is b^T from its fragment registers, its B a's shared tile read
        K-major (the consumer's rows of it where they divide them), its N a's rows."""
        c, a_lay, b_lay = self.low.mma_layouts[s.task]
        m, n = c.shape
        k = a_lay.shape[1]
        a_name = mma_operand_var(mm.lhs, self.renames)[0]
        b_name = mma_operand_var(mm.rhs, self.renames)[0]
        home = self.values.get(b_name)
        if not (isinstance(home, ir.RegTile) and self.layouts[home.layout].same_map(b_lay)):
            raise LoweringError(f"{s.task}: the swapped wgmma reads {b_name} from registers "
                                "in its A-fragment layout, which it is not in")
        tile = self.values.get(a_name)
        if not isinstance(tile, ir.InShared) or \
                self.buffers[tile.buffer].layout.swizzle != "tma":
            raise LoweringError(f"{s.task}: the swapped wgmma reads {a_name} from shared "
                                "memory in a layout TMA writes")
        self.note_swapped(s.task)
        instruction_a = ir.WgmmaOperand(b_name, True)
        instruction_b = ir.WgmmaOperand(a_name, False, False, self.split_rows(mm.lhs))
        return [ir.Wgmma(s.task, s.stmt.name, add_name, instruction_a, instruction_b, m,
                         n // 64, k // wgmma_k(mm.lhs.type.dtype), mm.lhs.type.dtype,
                         swapped=True),
                ir.WgmmaWait(0, (s.stmt.name, b_name))]

    def note_swapped(self, task: str) -> None:
        """One note for the kernel's swapped products (a rotated loop lowers a step twice)."""
        said = " (B computed in registers, A loaded): wgmma multiplies out^T = b^T a^T, " \
               "b^T from registers, nothing staged in shared memory"
        old = next((n for n in self.low.notes if n.endswith(said)), None)
        tasks = old[:-len(said)].split(", ") if old else []
        if task not in tasks:
            note = ", ".join(tasks + [task]) + said
            self.low.notes[:] = [note if n is old else n for n in self.low.notes] \
                if old else self.low.notes + [note]

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
        lay = self.layouts[home.layout]
        blocks = stmatrix_blocks(lay, home.shape, home.dtype, self.buffers[buffer].layout)
        # a 16-bit register's two values side by side in a row of the tile: one store
        pairs = not blocks and DTYPE_BYTES[home.dtype] == 2 and lay.size % 2 == 0 and \
            pair_axis(lay) == 1 and not any(lay.exceeds(home.shape))
        return ir.StageOperand(task, name, buffer, blocks or (), pairs)

    def store(self, s: Stmt) -> ir.StoreTile:
        op = super().store(s)
        if not self.spec.split:
            return op
        st: T.Store = s.stmt
        tile = global_tile(self.low.kernel, self.spec.tiles, st.tensor, st.index,
                           (self.spec.split, index(ROW0), self.spec.rows), stored_rows(st))
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
        box = tma_store_box(kernel, self.spec.tiles, st, copy_rules(self.device), self.spec.parts)
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
                coords.append(point_index(kernel, item))
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
