"""Layout conversions through shared memory (docs/lowering.md): a statement that reads a
register tile in another layout than the one its elements need reads a copy in the wanted
layout instead -- every thread writes its values of the tile to a scratch tile
(SpillTile), a barrier, then each reads back the values the wanted layout gives it
(FillTile). A matmul on CUDA cores reads its register operands from shared memory.

    ops = layout_conversions(build, stmt)    # build: the single-role lowering's Builder

The functions extend the Builder's values, layouts and scratch buffers, and set its
`renames` (value -> its converted copy) for the statement.
"""
from __future__ import annotations

from typing import Mapping

from ..sema import typed as T
from ..stask.graph import TaskOp
from . import ir
from .assign import reads_with_expands, transposes_read
from .capabilities import LoweringError
from .layout import Layout, read_layout
from .program import Stmt, mma_parts
from .storage import c_name
from .swizzle import scratch_pad


def layout_conversions(build, s: Stmt) -> list:
    """Register values this statement reads in another layout than the one its
    elements need: each goes through shared memory into a copy in the wanted layout
    (SpillTile, barrier, FillTile), and the statement reads the copy."""
    build.renames = {}
    if not isinstance(s.stmt, T.Let) or s.kind == TaskOp.LOAD:
        return []
    if s.kind == TaskOp.MMA:
        if s.task not in build.low.tiling:
            return simt_operands(build, s)
        wanted = mma_reads(build, s)
    else:
        wanted = elementwise_reads(build, s)
    ops: list = []
    for r, want, transposed in {(r, t): (r, w, t) for r, w, t in wanted}.values():
        ops += converted(build, s.task, r, want, transposed)
    return ops


def mma_reads(build, s: Stmt) -> list[tuple[str, Layout, bool]]:
    """(value, layout, transposed) of each register operand of a tensor-core mma that is
    not already in its atom's layout as the atom reads it."""
    _, mm = mma_parts(s.stmt.value)
    _, a_lay, b_lay = build.low.mma_layouts[s.task]
    wanted = []
    for operand, lay in ((mm.lhs, a_lay), (mm.rhs, b_lay)):
        name, transposed = mma_operand_var(operand)
        home = build.values.get(name)
        if isinstance(home, ir.RegTile) and (
                transposed or not build.layouts[home.layout].same_map(lay)):
            wanted.append((name, lay, transposed))
    return wanted


def elementwise_reads(build, s: Stmt) -> list[tuple[str, Layout, bool]]:
    """(value, layout, False) of each register tile an elementwise statement (or a
    reduction's operand) reads in another layout than its elements need."""
    value = s.stmt.value
    if isinstance(value, T.Reduce):
        target = build.reduce_layout(value, s.stmt.name)
        expr = value.arg
    else:
        target = build.layouts[build.values[s.stmt.name].layout]
        expr = value
    if target is None:
        return []
    # what each value is read in: the statement's layout, or under a transpose
    # (`o.T`, rendered as o's element (c, r) in the thread computing (r, c)) its
    # transpose
    parts = [(expr, target)] + [
        (t.arg, target.transposed(f"{target.name}_t")) for t in transposes_read(expr)]
    wanted = []
    for part, layout in parts:
        for r, axes in reads_with_expands(part):
            home = build.values.get(r)
            if not isinstance(home, ir.RegTile):
                continue
            want = read_layout(layout, build.low.shape(part), axes, home.shape)
            if not build.layouts[home.layout].same_map(want):
                wanted.append((r, want, False))
    return wanted


def converted(build, task: str, r: str, want: Layout, transposed: bool) -> list:
    """The SpillTile and FillTile that copy register tile `r` into layout `want` (its
    transpose, `transposed`), through a new scratch buffer; the statement reads the copy."""
    home = build.values[r]
    lay_name = build.layout_name(want)
    new = f"{r}{'.T' if transposed else ''}@{lay_name}"
    shape_t = tuple(reversed(home.shape)) if transposed else home.shape
    build.values[new] = ir.RegTile(c_name(r) + ("_T_" if transposed else "_") + lay_name,
                                   home.dtype, shape_t, lay_name)
    src = build.layouts[home.layout]
    shape = tuple(src.shape)
    # pairs of consecutive values move as 8-byte words when both layouts hold
    # them in consecutive registers; rows then padded by 8 words, so that the 16
    # lanes of a phase (4 rows x 4 pairs in the mma layouts) hit 32 banks
    vector = 2 if contiguous_run(src) % 2 == 0 and contiguous_run(want) % 2 == 0 \
        and len(shape) == 2 and not transposed else 1
    if len(shape) == 2:
        preferred = 8 if vector == 2 else 1 if transposed else 0
        pad = scratch_pad(src, want, vector, transposed, shape[1],
                          preferred if shape[1] % 32 == 0 else 0)
        shape = (shape[0], shape[1] + pad)
    what = "transposed into" if transposed else "to"
    scratch = build.scratch_buffer(f"{r} from {home.layout} {what} {lay_name}",
                                   scratch_dtype(home.dtype), shape)
    build.renames[r] = new
    if transposed:       # the copy is the operand as the mma reads it
        build.pre_transposed.add(new)
    return [ir.SpillTile(task, r, scratch, vector),
            ir.FillTile(task, new, scratch, vector, transposed)]


def simt_operands(build, s: Stmt) -> list:
    """A matmul on CUDA cores reads its operands at every k: those in registers go
    through shared memory, where any thread reads any element."""
    _, mm = mma_parts(s.stmt.value)
    ops: list = []
    for operand in (mm.lhs, mm.rhs):
        name, _ = mma_operand_var(operand)
        home = build.values.get(name)
        if not isinstance(home, ir.RegTile) or name in build.renames:
            continue
        scratch = build.scratch_buffer(f"{name} for the CUDA-core matmul {s.task}",
                                       scratch_dtype(home.dtype), tuple(home.shape))
        new = f"{name}@{scratch}"
        build.values[new] = ir.InShared(scratch, "")
        ops.append(ir.SpillTile(s.task, name, scratch))
        build.renames[name] = new
    return ops


def scratch_dtype(dtype: str) -> str:
    """The word a register tile's elements take in a scratch tile: i32 for integers and
    booleans, else f32."""
    return "i32" if dtype in ("i32", "i8", "u8", "bool") else "f32"


def mma_operand_var(e: T.TExpr, renames: Mapping[str, str] = {}) -> tuple[str, bool]:
    """(the value an mma operand reads, under its name in `renames` where it has one;
    whether it reads it transposed)."""
    if isinstance(e, T.Transpose):
        name, t = mma_operand_var(e.arg, renames)
        return name, not t
    if isinstance(e, T.Var):
        return renames.get(e.name, e.name), False
    raise LoweringError(f"an mma operand is an expression, not a value: {e}")


def contiguous_run(lay: Layout) -> int:
    """Consecutive registers that hold consecutive elements along the last axis."""
    if not lay.regs or lay.rank == 0:
        return 1
    first = lay.regs[0]
    unit = tuple(1 if a == lay.rank - 1 else 0 for a in range(lay.rank))
    return first.size if first.stride == unit else 1
