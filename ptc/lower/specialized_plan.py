"""What a warp-specialized plan asks of its roles (sm90a; ptc.lower.specialized): a
producer and a consumer role of warpgroups, the rows each consumer warpgroup computes, the
wgmma tilings of the consumer's mmas and the consumer's view for the single-role Builder."""
from __future__ import annotations

from ..devices import Device, UnitKind
from ..sched.plan import Plan
from ..sema import typed as T
from ..stask.graph import STaskGraph, TaskKind, TaskOp
from .assign import assign_layouts, layout_problem
from .atoms import wgmma_k, why_no_wgmma
from .layout import Layout, digits
from .capabilities import LoweringError
from .conversions import mma_operand_var
from .passes import PassTrace
from .program import flatten, mma_parts
from .tiles import TileError, extent_value

WARPGROUP = 4          # warps
PART = "%part"         # the consumer warpgroup's index among the role's instances
ROW0 = "%row0"         # its first row in the split tile: PART * rows


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
    # and a lane its columns before they are staged there: pairs (2j, 2j + 1), 64 apart,
    # where n is a multiple of 64 (a 16-bit pair is one 4-byte store of the row), else
    # (j, j + 32, ...)
    if n % 64 == 0:
        b = Layout(f"{name}_b", (k, n), digits((2, (0, 1)), (k // 4, (1, 0)),
                                               (n // 64, (0, 64))),
                   digits((32, (0, 2))), digits((4, (k // 4, 0))),
                   note="wgmma B (staged to shared memory), column pairs")
    else:
        b = Layout(f"{name}_b", (k, n), digits((k // 4, (1, 0)), (n // 32 or 1, (0, 32))),
                   digits((32, (0, 1))) if n >= 32 else digits((n, (0, 1))),
                   digits((4, (k // 4, 0))), note="wgmma B (staged to shared memory)")
    return c, a, b



class RoleView:
    """What the single-role Builder reads of a lowering, for one role of the plan: its
    statements, one warpgroup, and tile extents with the split tile's rows divided."""

    def __init__(self, spec: "SpecializedPlan", role: str, rows: dict[str, int]):
        self.plan, self.graph, self.device = spec.plan, spec.graph, spec.device
        self.caps = spec.caps
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
        self.swapped: frozenset[str] = frozenset()    # mmas multiplied as out^T = b^T a^T
        self.solution = None

    def extent(self, e) -> int:
        try:
            return extent_value(self.kernel, self.local, e)
        except TileError as exc:
            raise LoweringError(str(exc)) from None

    def shape(self, e: T.TExpr) -> tuple[int, ...]:
        return tuple(self.extent(x) for x in e.type.shape)


class SpecializedPlan:
    """The plan's roles, checked: one producer warpgroup and `parts` consumer warpgroups,
    which divide the rows of the split grid index's tile (`rows` each)."""

    def __init__(self, plan: Plan, graph: STaskGraph, device: Device, caps,
                 trace: PassTrace | None = None):
        self.plan, self.graph, self.device, self.caps = plan, graph, device, caps
        self.trace = trace or PassTrace()
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
        self.inner = 1      # rows per element of the split axis (a tile of rank 3's BM)
        self.split, self.rows = self.split_rows()

    # ---- which rows each consumer warpgroup computes ------------------------------------
    def split_rows(self) -> tuple[str, int]:
        """(grid index, rows per consumer warpgroup) when the consumers divide the rows of
        the mma outputs' tiles; ("", 0) with one consumer."""
        if self.parts == 1:
            return "", 0
        mmas = [t for t in self.graph.tasks if t.kind == TaskKind.MMA]
        if not mmas:
            raise LoweringError("several consumer warpgroups divide an mma's rows; this plan "
                                "has no mma")
        first = mmas[0].mma.type.shape[0]
        # the rows of a tile of rank 3 (GH*BM): the consumers divide its outer axis (heads)
        outer = T.extent_factors(first)[0]
        axis = next((a for a in self.graph.grid.axes if a.size == outer), None)
        if axis is None or not isinstance(outer, str) or len(T.extent_factors(first)) > 2:
            raise LoweringError(f"the mma rows ({first}) are not a tile of the grid: the "
                                "consumer warpgroups cannot divide them")
        total = extent_value(self.kernel, self.tiles, first)
        self.inner = total // self.tiles[outer]
        if self.tiles[outer] % self.parts or (total // self.parts) % 64:
            raise LoweringError(f"{total} rows do not divide into {self.parts} consumer "
                                "warpgroups of whole 64-row wgmma atoms")
        return axis.var, total // self.parts

    def holds_rows(self, shape) -> bool:
        """Whether a value's first axis holds the rows the consumers divide (the split
        tile's, or a tile of rank 3's rows GH*BM whose outer axis is the split tile)."""
        if not self.split or not shape:
            return False
        tile = next(a.size for a in self.graph.grid.axes if a.var == self.split)
        factors = T.extent_factors(shape[0])
        return shape[0] == tile or len(factors) == 2 and factors[0] == tile

    # ---- the consumer's view ------------------------------------------------------------
    def consumer_view(self) -> RoleView:
        """The consumer role as the single-role Builder reads it: its rows, wgmma tilings
        and the layouts assigned to its values."""
        rows = {}
        if self.split:
            tile = next(a.size for a in self.graph.grid.axes if a.var == self.split)
            rows = {tile: self.rows // self.inner}
        consumer = RoleView(self, "consumer", rows)
        self.check_rows(consumer)
        layouts = self.tilings(consumer)
        shared = {b.value for b in self.plan.buffers}
        consumer.mma_layouts = layouts
        consumer.tiling = {t: True for t in layouts}
        consumer.swapped = frozenset(self.swapped)
        consumer.solution = assign_layouts(layout_problem(
            consumer.stmts, shared, layouts, WARPGROUP, consumer.warp_size, consumer.extent))
        return consumer

    def tilings(self, view: RoleView) -> dict[str, tuple[Layout, Layout, Layout]]:
        """Per tensor-core mma, the layouts of (its result, a, b): wgmma's accumulator and
        A fragments; swapped (`rs_swap`), the transposes of out^T = b^T a^T's."""
        out = {}
        self.swapped = set()
        for s in view.stmts:
            if s.kind != TaskOp.MMA:
                continue
            unit = self.device.unit(view.steps[s.task].unit)
            if unit.kind != UnitKind.MMA:
                continue
            _, mm = mma_parts(s.stmt.value)
            m, k = view.shape(mm.lhs)
            n = view.shape(mm.rhs)[1]
            why = why_no_wgmma(mm.lhs.type.dtype, m, n, k)
            if why:
                raise LoweringError(f"{s.task}: the plan puts it on the tensor cores, but {why}")
            name = s.task.removeprefix("mma_")
            if self.rs_swap(mm, m, n, k):
                self.swapped.add(s.task)
                c, a, b = wgmma_layouts(name, n, m, k, mm.lhs.type.dtype)
                out[s.task] = (c.transposed(f"{name}_c", f"{c.note}, of out^T = b^T a^T"),
                               b.transposed(f"{name}_a", "wgmma B (the swapped product's)"),
                               a.transposed(f"{name}_b", "wgmma A from registers (the "
                                                         "swapped product's)"))
            else:
                out[s.task] = wgmma_layouts(name, m, n, k, mm.lhs.type.dtype)
        return out

    def rs_swap(self, mm, m: int, n: int, k: int) -> bool:
        """Whether to multiply out^T = b^T a^T: where b is computed in registers (not a
        loaded tile) and a is loaded, b^T is the instruction's A read from registers in its
        fragment layout, and a's shared tile its B (K-major), so b is not staged in shared
        memory (a store, a fence and a barrier per product) -- the dequantized weights of a
        W4A16 GEMM. wgmma's rows are then n (64 each) and its N the consumer's m."""
        dtype = mm.lhs.type.dtype
        if dtype not in ("f16", "bf16") or n % 64:
            return False
        a, a_transposed = mma_operand_var(mm.lhs)
        b, b_transposed = mma_operand_var(mm.rhs)
        loaded = {buf.value for buf in self.plan.buffers}
        return a in loaded and b not in loaded and not b_transposed and not a_transposed \
            and why_no_wgmma(dtype, n, m, k) is None

    def check_rows(self, view: RoleView) -> None:
        """With divided rows, every consumer value must be computed row by row: an operand
        that holds the split rows makes a result that does too, along its first axis."""
        if not self.split:
            return
        for s in view.stmts:
            if not isinstance(s.stmt, T.Let):
                continue
            v = s.stmt.value
            if isinstance(v, T.Reduce) and v.axis == 0 and self.holds_rows(v.arg.type.shape):
                raise LoweringError(f"{s.stmt.name} sums over the rows the consumer "
                                    "warpgroups divide")
            if isinstance(v, T.MmaAccumulate) and self.holds_rows(v.b.type.shape):
                raise LoweringError(f"{s.task} multiplies by the rows the consumer "
                                    "warpgroups divide")
            if isinstance(v, T.Transpose) and self.holds_rows(v.arg.type.shape):
                raise LoweringError(f"{s.stmt.name} transposes the divided rows")
