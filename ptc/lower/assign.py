"""Where each tile value lives: the tensor-core tilings and the register layouts.

1. Every mma the plan puts on tensor cores gets a *tiling*: the atom, the warps over its
   output (wm x wn) and the atoms per warp (mi x ni), and with it three layouts -- the
   accumulator's and the two operands' (`tiling_layouts`).
2. Every value a statement computes gets a layout (`assign_layouts`): an mma's output
   takes the accumulator layout; a value read as an mma's addend takes that layout; a value
   read as an mma operand takes the operand layout; the rest follow the statements that
   relate them -- an elementwise statement computes in its target's layout and reads
   same-shape operands in it, a reduction's result is the slice of its operand's layout,
   a broadcast `v[:, None]` reads v in the slice of the statement's layout. What nothing
   decides gets a blocked layout. Loaded tiles stay in shared memory and are read at the
   coordinates of whatever layout reads them.
3. A use whose value sits in another layout is a *conversion*: through shared memory.

Different tilings give different conversions and costs; `lower` tries the tilings of
every mma and keeps the cheapest (`ptc.lower.tiling_choice`).

Layout assignment is a pure function of a `LayoutProblem` and is memoized on it: the
schedule search lowers many plans with the same tiles, warps and tilings (they differ in
pipeline stages or style, which it does not read), and each lowering tries many tilings.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from functools import cached_property
from types import MappingProxyType
from typing import Mapping

from ..sema import typed as T
from ..stask.graph import TaskOp
from .atoms import Tiling, tilings  # noqa: F401 (re-exported)
from .layout import Layout, blocked, digits, read_layout, scalar
from .program import Stmt, mma_parts


@functools.lru_cache(maxsize=1024)   # shared Layouts also share their `table`s
def tiling_layouts(t: Tiling, name: str) -> tuple[Layout, Layout, Layout]:
    """(accumulator [m, n], A operand [m, k], B operand [k, n]) of a tiling. Register order
    within a warp: the atom's registers, then the atoms along n, then along m (A: along k,
    then m; B: along k, then n) -- the order of ptc's mma helpers' fragment arrays.

    A swapped tiling's instructions compute out^T = b^T a^T: the statement's out, a and b
    are the transposes of the instruction's accumulator, B and A operand, held in the
    same registers."""
    if t.swapped:
        c, lhs, rhs = tiling_layouts(replace(t, swapped=False), name)
        return (c.transposed(f"{name}_c", f"{c.note}, computed transposed"),
                rhs.transposed(f"{name}_a", f"{rhs.note} (the swapped product's B)"),
                lhs.transposed(f"{name}_b", f"{lhs.note} (the swapped product's A)"))
    a = t.atom
    c = Layout(f"{name}_c", (t.m, t.n),
               a.c.regs + digits((t.ni, (0, a.n)), (t.mi, (a.m, 0))), a.c.lanes,
               digits((t.wn, (0, a.n * t.ni)), (t.wm, (a.m * t.mi, 0)), (t.replicas, (0, 0))),
               note=f"{a.name} accumulator: {t.describe()}")
    lhs = Layout(f"{name}_a", (t.m, t.k),
                 a.a.regs + digits((t.ks, (0, a.k)), (t.mi, (a.m, 0))), a.a.lanes,
                 digits((t.wn, (0, 0)), (t.wm, (a.m * t.mi, 0)), (t.replicas, (0, 0))),
                 note=f"{a.name} A operand")
    rhs = Layout(f"{name}_b", (t.k, t.n),
                 a.b.regs + digits((t.ks, (a.k, 0)), (t.ni, (0, a.n))), a.b.lanes,
                 digits((t.wn, (0, a.n * t.ni)), (t.wm, (0, 0)), (t.replicas, (0, 0))),
                 note=f"{a.name} B operand")
    return c, lhs, rhs


# ---- value layouts -----------------------------------------------------------------------
@dataclass(frozen=True)
class ExprReads:
    """What layout assignment reads of one expression (a statement's value, or the operand
    of a reduction)."""

    shape: tuple[int, ...]
    direct: tuple[tuple[str, bool], ...]               # direct_reads
    expanded: tuple[tuple[str, tuple[int, ...]], ...]  # reads_with_expands
    transposed: tuple[str, ...]     # Vars read directly under a transpose, with repeats


@dataclass(frozen=True)
class RoleStatements:
    """A role's statements and what layout assignment reads besides the tilings. A lowering
    builds one and tries every tiling with it: it is hashed and analysed once."""

    stmts: tuple[Stmt, ...]             # in program order
    shared: frozenset[str]              # values that stay in shared memory (loaded tiles)
    warps: int
    warp_size: int
    # the value of every extent name in the shapes the solver reads (statement values and
    # reduction operands): the tile sizes, less the rows other consumer warpgroups hold
    extents: tuple[tuple[str, int], ...]

    def __hash__(self) -> int:
        return self.hash_value

    @cached_property
    def hash_value(self) -> int:
        return hash((self.stmts, self.shared, self.warps, self.warp_size, self.extents))

    @cached_property
    def analysed(self) -> dict[int, ExprReads]:
        """ExprReads of every expression the solver reads, by id (the statements hold
        them, so the ids stay theirs)."""
        sizes = dict(self.extents)
        return {id(e): ExprReads(tuple(x if isinstance(x, int) else sizes[x]
                                       for x in e.type.shape),
                                 tuple(direct_reads(e)), tuple(reads_with_expands(e)),
                                 tuple(transposed_reads(e)))
                for e in shaped_exprs(self.stmts)}

    def of(self, e: T.TExpr) -> ExprReads:
        return self.analysed[id(e)]


MmaLayouts = tuple[tuple[str, tuple[Layout, Layout, Layout]], ...]


@dataclass(frozen=True)
class LayoutProblem:
    """Everything layout assignment reads, hashable (it is the memo's key): the role's
    statements and the (c, a, b) layouts of every tensor-core mma."""

    role: RoleStatements
    mma_layouts: MmaLayouts = ()


def layout_problem(stmts, shared, mma_layouts: Mapping[str, tuple[Layout, Layout, Layout]],
                   warps: int, warp_size: int, shape_of) -> LayoutProblem:
    """The LayoutProblem of a role's statements; `shape_of` gives an extent's size."""
    names = dict.fromkeys(x for e in shaped_exprs(stmts) for x in e.type.shape
                          if not isinstance(x, int))
    role = RoleStatements(tuple(stmts), frozenset(shared), warps, warp_size,
                          tuple((x, shape_of(x)) for x in names))
    return LayoutProblem(role, tuple(mma_layouts.items()))


def shaped_exprs(stmts):
    """The expressions whose shapes the solver reads: every Let's value, and the operand of
    a reduction."""
    for s in stmts:
        if isinstance(s.stmt, T.Let):
            yield s.stmt.value
            if isinstance(s.stmt.value, T.Reduce):
                yield s.stmt.value.arg


@dataclass(frozen=True)
class Solution:
    layouts: Mapping[str, Layout]       # value name -> its layout
    shared: frozenset[str]              # values that stay in shared memory (loaded tiles)
    conversions: tuple[tuple[int, str], ...]  # (statement position, value) read in another layout
    defaults: tuple[str, ...]           # values nothing decided (blocked layouts)
    # every reduction's operand: the layout it is computed in, by the reduction's name
    reduce_sources: Mapping[str, Layout]


def _operand_var(e: T.TExpr) -> tuple[str | None, bool]:
    """(value name, transposed) of an mma operand expression."""
    if isinstance(e, T.Transpose):
        name, t = _operand_var(e.arg)
        return name, not t
    if isinstance(e, T.Var):
        return e.name, False
    return None, False


class _Solver:
    def __init__(self, problem: LayoutProblem):
        role = problem.role
        self.of = role.of
        self.stmts = role.stmts
        self.shared = role.shared
        self.mma_layouts = dict(problem.mma_layouts)     # task -> (c, a, b) layouts
        self.warps = role.warps
        self.warp_size = role.warp_size
        self.layout: dict[str, Layout] = {}
        self.defaults: list[str] = []
        self.reduce_sources: dict[str, Layout] = {}
        self.slice_of: dict[str, tuple[Layout, int]] = {}   # reduction -> (source, axis)
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.reduced: set[str] = set()      # values a reduction computes
        self.reduced_from: set[str] = set()  # values a reduction reads element for element
        for s in self.stmts:
            if isinstance(s.stmt, T.Let):
                self.shapes[s.stmt.name] = self.of(s.stmt.value).shape
        for s in self.stmts:
            if isinstance(s.stmt, T.Let) and isinstance(s.stmt.value, T.Reduce):
                self.reduced.add(s.stmt.name)
                self.reduced_from.update(self.full_reads(s.stmt.value))

    def is_register(self, name: str) -> bool:
        return name not in self.shared

    def put(self, name: str, layout: Layout) -> bool:
        if name in self.layout or not self.is_register(name):
            return False
        self.layout[name] = layout
        return True

    # the rules --------------------------------------------------------------------------
    def anchors(self) -> None:
        for s in self.stmts:
            if s.kind != TaskOp.MMA or s.task not in self.mma_layouts:
                continue
            c, a, b = self.mma_layouts[s.task]
            addend, mm = mma_parts(s.stmt.value)
            self.put(s.stmt.name, c)
        for s in self.stmts:
            if s.kind != TaskOp.MMA or s.task not in self.mma_layouts:
                continue
            c, a, b = self.mma_layouts[s.task]
            addend, mm = mma_parts(s.stmt.value)
            if isinstance(addend, T.Var):
                self.put(addend.name, c)
            for operand, lay in ((mm.lhs, a), (mm.rhs, b)):
                name, transposed = _operand_var(operand)
                if name is not None and not transposed:
                    self.put(name, lay)

    def full_reads(self, value: T.Reduce) -> list[str]:
        """The register values a reduction's operand reads element for element: of its
        shape, not broadcast."""
        arg = self.of(value.arg)
        return [r for r, direct in arg.direct
                if direct and self.is_register(r) and self.shapes.get(r) == arg.shape]

    def reduce_source(self, e: T.Reduce) -> Layout | None:
        """The layout a reduction's operand is computed in: that of a value it reads
        element for element."""
        for name in self.full_reads(e):
            if name in self.layout:
                return self.layout[name]
        return None

    def reads_no_register_tile(self, value: T.Reduce) -> bool:
        return not self.full_reads(value)

    def broadcast_reads(self, value: T.Reduce):
        """(register value, axes it is broadcast along) the reduction's operand reads:
        under an expand, or narrower than the operand (a lower rank, extents of 1)."""
        arg = self.of(value.arg)
        return [(r, axes) for r, axes in arg.expanded
                if self.is_register(r) and r in self.shapes
                and (axes or self.shapes[r] != arg.shape)]

    def pull_broadcasts(self, target: Layout, shape: tuple[int, ...], reads) -> bool:
        """Values a statement computing in `target` reads broadcast, that nothing placed
        yet, take the layout it reads them in (no conversion); a reduction's result keeps
        the slice of its operand's layout, and its reader converts it instead."""
        changed = False
        for r, axes in reads:
            if not self.is_register(r) or r in self.layout or r not in self.shapes \
                    or r in self.reduced:
                continue
            changed |= self.put(r, read_layout(target, shape, axes, self.shapes[r]))
        return changed

    def new_source(self, name: str, value: T.Reduce) -> Layout:
        """The layout a reduction of loaded tiles computes its operand in: the one its
        broadcast operands are slices of (no conversion), else a blocked one."""
        arg_shape = self.of(value.arg).shape
        src = None
        for r, axes in self.broadcast_reads(value):
            parent = self.slice_of.get(r)
            if parent is not None and (parent[1],) == tuple(axes) and \
                    parent[0].shape == arg_shape:
                src = parent[0]
                break
        if src is None:
            src = blocked(arg_shape, self.warps, self.warp_size, 4,
                          name=f"blocked_{'x'.join(map(str, arg_shape))}")
        return src

    def put_reduction(self, name: str, value: T.Reduce, src: Layout) -> bool:
        self.slice_of[name] = (src, value.axis)
        self.reduce_sources[name] = src
        changed = self.put(name, src.slice(value.axis, f"{src.name}_s{value.axis}"))
        return self.pull_broadcasts(src, self.of(value.arg).shape,
                                    self.broadcast_reads(value)) or changed

    def step(self) -> bool:
        changed = False
        for s in self.stmts:
            if not isinstance(s.stmt, T.Let) or s.kind == TaskOp.LOAD:
                continue
            name, value = s.stmt.name, s.stmt.value
            if s.kind == TaskOp.MMA:
                continue
            shape = self.shapes[name]
            if isinstance(value, T.Reduce):
                if name in self.reduce_sources:
                    continue
                src = self.reduce_source(value)
                if src is None and self.reads_no_register_tile(value):
                    # it reads loaded tiles, scalars and broadcasts only: compute it in the
                    # layout the reductions it reads broadcast are slices of, else in a
                    # blocked layout (its other broadcast operands then follow it)
                    if all(r in self.layout for r, _ in self.broadcast_reads(value)
                           if r in self.reduced):
                        src = self.new_source(name, value)
                if src is not None:
                    changed |= self.put_reduction(name, value, src)
                continue
            if name not in self.layout:
                for r, direct in self.of(value).direct:
                    if direct and r in self.layout and self.shapes.get(r) == shape:
                        changed |= self.put(name, self.layout[r])
                        break
            if name in self.layout:
                changed |= self.pull_broadcasts(self.layout[name], shape,
                                                self.of(value).expanded)
        return changed

    def default(self) -> bool:
        # a reduction's operand first: its slice then reaches the values that use the
        # reduction's result, which would otherwise convert it
        order = sorted((s for s in self.stmts if isinstance(s.stmt, T.Let)),
                       key=lambda s: s.stmt.name not in self.reduced_from)
        for s in order:
            name = s.stmt.name
            if name in self.layout or not self.is_register(name) or name in self.reduced:
                continue
            shape = self.shapes[name]
            if len(shape) == 0:
                lay = scalar(self.warps, self.warp_size)
            else:
                lay = blocked(shape, self.warps, self.warp_size, 4,
                              name=f"blocked_{'x'.join(map(str, shape))}")
            self.put(name, lay)
            self.defaults.append(name)
            return True
        for s in order:      # a reduction still waiting on a broadcast operand's layout
            if s.stmt.name in self.reduced and s.stmt.name not in self.layout and \
                    self.reads_no_register_tile(s.stmt.value):
                self.put_reduction(s.stmt.name, s.stmt.value,
                                   self.new_source(s.stmt.name, s.stmt.value))
                return True
        return False

    def solve(self) -> dict[str, Layout]:
        self.anchors()
        while True:
            while self.step():
                pass
            if not self.default():
                break
        return self.layout


def direct_reads(e: T.TExpr, direct: bool = True):
    """(name, read at the expression's own element?) for every Var an expression reads
    outside reductions; reads under a broadcast or a transpose are not direct."""
    if isinstance(e, T.Var):
        yield e.name, direct
        return
    if isinstance(e, T.Reduce):
        return
    keep = isinstance(e, (T.Elementwise, T.Convert))
    for c in T.children(e):
        yield from direct_reads(c, direct and keep)


def reads_with_expands(e: T.TExpr, axes: list[int] | None = None, rank: int = 0):
    """(name, the statement's axes it is broadcast along) for every Var read directly or
    under broadcasts only (not under a transpose or inside a reduction)."""
    if axes is None:
        axes, rank = list(range(e.type.rank)), e.type.rank
    if isinstance(e, T.Var):
        yield e.name, tuple(a for a in range(rank) if a not in axes)
        return
    if isinstance(e, (T.Reduce, T.Transpose, T.Load)):
        return
    if isinstance(e, T.Expand):
        yield from reads_with_expands(
            e.arg, [a for i, a in enumerate(axes) if i not in e.axes], rank)
        return
    if isinstance(e, (T.Elementwise, T.Convert, T.Fill)):
        for c in T.children(e):
            yield from reads_with_expands(c, axes, rank)


def transposes_read(e: T.TExpr):
    """The transposes an elementwise statement computes directly (where reads_with_expands
    stops): each one's argument is computed in the statement's layout transposed."""
    if isinstance(e, T.Transpose):
        yield e
        return
    if isinstance(e, (T.Elementwise, T.Convert, T.Fill)):
        for c in T.children(e):
            yield from transposes_read(c)


def assign_layouts(problem: LayoutProblem) -> Solution:
    """`solve_layouts(problem)`, memoized."""
    # Layout equality leaves out the note, which the printed kernel shows: a solution
    # holds the mma layouts themselves, so their notes are part of the key
    notes = tuple(lay.note for _, layouts in problem.mma_layouts for lay in layouts)
    return _memoized(problem, notes)


@functools.lru_cache(maxsize=4096)
def _memoized(problem: LayoutProblem, notes: tuple[str, ...]) -> Solution:
    return solve_layouts(problem)


def solve_layouts(problem: LayoutProblem) -> Solution:
    """The layout of every register value of `problem`, and the reads that convert."""
    solver = _Solver(problem)
    layouts = solver.solve()
    conversions = []
    for s in problem.role.stmts:
        if not isinstance(s.stmt, T.Let) or s.kind == TaskOp.LOAD:
            continue
        if s.kind == TaskOp.MMA:
            continue
        target = layouts.get(s.stmt.name)
        value = s.stmt.value
        if isinstance(value, T.Reduce):
            src = solver.reduce_sources.get(s.stmt.name)
            # the reduction writes its result in the slice of the layout it reads
            assert src is None or target is None or target.same_map(src.slice(value.axis)), \
                f"{s.stmt.name} is a reduction of {src.name} but lives in {target.name}"
            arg = solver.of(value.arg)
            expanded = dict(arg.expanded)
            for r, direct in arg.direct:
                if r not in layouts:
                    continue
                if src is None or r not in expanded or not layouts[r].same_map(
                        read_layout(src, arg.shape, expanded[r], solver.shapes[r])):
                    conversions.append((s.position, r))
            continue
        shape = solver.of(value).shape
        for r, axes in solver.of(value).expanded:
            if r not in layouts or target is None:
                continue
            if not layouts[r].same_map(read_layout(target, shape, axes, solver.shapes[r])):
                conversions.append((s.position, r))
        for r in solver.of(value).transposed:
            if r in layouts:
                conversions.append((s.position, r))
    return Solution(MappingProxyType(layouts), problem.role.shared, tuple(_unique(conversions)),
                    tuple(solver.defaults), MappingProxyType(solver.reduce_sources))


def transposed_reads(e: T.TExpr) -> list[str]:
    """The Vars read directly under a transpose, in order, with repeats."""
    if isinstance(e, T.Transpose):
        return [r for r, _ in direct_reads(e.arg)]
    return [r for c in T.children(e) for r in transposed_reads(c)]


def _unique(xs):
    seen, out = set(), []
    for x in xs:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out


def register_words(layout: Layout, dtype: str) -> int:
    """32-bit registers one thread needs for a value of this layout and dtype."""
    from ..sema.dtypes import DTYPE_BYTES
    return math.ceil(layout.size * max(DTYPE_BYTES[dtype], 2) / 4)
