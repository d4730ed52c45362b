"""A register estimate per thread, from the lowered ops.

    registers = the most 32-bit words of register tiles live at once
              + the operand fragments an mma loads per k-step, or a CUDA-core product's
                a and b values (twice: the compiler loads the next step's while the
                current one multiplies)
              + at an element-wise op or a reduction, the thread's elements of the
                shared-memory tiles it reads whole (the compiler reads them all ahead of
                the arithmetic: the causal conv1d's 64 x values a thread adds per tap)
              + a base for indices, pointers, loop counters and the copies' offsets (the
                renderer computes each copy's per-thread offsets once, a few words per
                copy: TileCopy in global_to_shared.cuh).

Liveness is the usual backward dataflow over the ops, loops closing over their back edge:
a carried value (flash attention's `o`) is live from its definition at the end of one
iteration to its use at the start of the next, not in between. It is an estimate: ptxas
decides; the tests check that ptxas's count fits the device with no spills.
"""
from __future__ import annotations

import math

from ..sema import typed as T
from ..sema.dtypes import DTYPE_BYTES
from . import ir
from .storage import InShared
from .sync import op_reads

BASE_REGISTERS = 40   # addresses, loop counters, predicates and the compiler's temporaries


def defines(op) -> list[str]:
    if isinstance(op, (ir.Compute, ir.Reduce, ir.WarpCombine, ir.LoadFragments, ir.FillTile)):
        return [op.target]
    if isinstance(op, (ir.Mma, ir.SimtMatmul, ir.Wgmma)):
        return [op.out]
    return []


def words(tile: ir.RegTile, layout) -> int:
    if DTYPE_BYTES[tile.dtype] == 2:
        return math.ceil(layout.size / 2)
    return layout.size


def _linearize(body) -> tuple[list, list[list[int]]]:
    """(ops, successors): loops get their back edge and a zero-trip exit."""
    ops: list = []
    succ: list[list[int]] = []

    def link(ends: list[int], target: int) -> None:
        for i in ends:
            succ[i].append(target)

    def emit(seq, ends: list[int]) -> list[int]:
        """Append seq after the ops in `ends`; return the ops that fall through past it."""
        for op in seq:
            if isinstance(op, ir.Iteration):
                # skipped only when its iteration does not exist, i.e. the loop ends (or
                # never starts) there: nothing it defines is read on that path
                ends = emit(op.body, ends)
                continue
            if isinstance(op, ir.Loop):
                ends = emit(op.fill, ends)
                start = len(ops)
                body_ends = emit(op.body, ends)
                if len(ops) > start:
                    link(body_ends, start)            # the back edge
                    ends = ends + body_ends           # zero trips, or the last one
                ends = emit(op.drain, ends)
                continue
            ops.append(op)
            succ.append([])
            link(ends, len(ops) - 1)
            ends = [len(ops) - 1]
        return ends

    emit(body, [])
    return ops, succ


def live_values(body, values: dict) -> tuple[list, list[set[str]], list[set[str]]]:
    """(linearized ops, values live into each, values live out of each or defined by it)."""
    ops, succ = _linearize(body)
    uses = [{n for n in op_reads(op) if isinstance(values.get(n), ir.RegTile)} for op in ops]
    defs = [{n for n in defines(op) if isinstance(values.get(n), ir.RegTile)} for op in ops]
    live_in: list[set[str]] = [set() for _ in ops]
    changed = True
    while changed:
        changed = False
        for i in reversed(range(len(ops))):
            out: set[str] = set()
            for j in succ[i]:
                out |= live_in[j]
            new = uses[i] | (out - defs[i])
            if new != live_in[i]:
                live_in[i] = new
                changed = True
    live_out = []
    for i in range(len(ops)):
        out = set()
        for j in succ[i]:
            out |= live_in[j]
        live_out.append(out | defs[i])
    return ops, live_in, live_out


def estimate_registers(body, builder) -> int:
    """Registers per thread: at each op the larger of what is live into it (with the
    shared-memory operands it reads) and what is live out of it (an elementwise op writes
    its result over the operand that dies there),
    plus an mma's operand fragments at the mma; the most over all ops, plus the base."""
    values = builder.values
    layouts = builder.layouts
    # each register value's (tile, words): values that share registers (ptc.lower.inplace)
    # have one tile, counted once
    sized = {n: (v.name, words(v, layouts[v.layout])) for n, v in values.items()
             if isinstance(v, ir.RegTile)}

    def size(names) -> int:
        return sum(dict(sized[n] for n in names).values())

    ops, live_in, live_out = live_values(body, values)
    ahead = operands_computed_ahead(ops, values)
    peak = 0
    for op, lin, lout in zip(ops, live_in, live_out):
        # the shared operands an op reads come into registers before its arithmetic, on
        # top of what is live into it; its result then takes the place of those that die
        read = shared_operand_words(op, values, layouts) \
            if isinstance(op, (ir.Compute, ir.Reduce)) else 0
        here = max(size(lin) + read, size(lout))
        if isinstance(op, ir.SimtMatmul):
            here += 2 * simt_operand_words(layouts[values[op.out].layout])
        if isinstance(op, ir.Mma):
            here += size(o.value for o in (op.a, op.b) if o.value in ahead)
            here += 2 * ((0 if op.a.in_registers else op.mi * fragment_words(op.atom.a)) +
                         (0 if op.b.in_registers else op.ni * fragment_words(op.atom.b)))
        peak = max(peak, here)
    return BASE_REGISTERS + peak + staged_words(body, builder.low.threads)


def shared_operand_words(op, values: dict, layouts: dict) -> int:
    """32-bit registers of the shared-memory tiles an element-wise op or a reduction reads
    whole: the thread's elements of each at the op's layout. (A broadcast operand's few
    values each feed many results, and are read as they are used.)"""
    layout = layouts[op.source_layout if isinstance(op, ir.Reduce)
                     else values[op.target].layout]
    return sum(math.ceil(layout.size * DTYPE_BYTES[dtype] / 4)
               for dtype, shape in _shared_views(op.expr, values)
               if len(shape) == len(layout.shape) and 1 not in shape)


def _shared_views(e: T.TExpr, values: dict) -> list[tuple[str, tuple]]:
    """(dtype, shape as read) of each shared tile `e` reads: the shape above the
    transposes, conversions and unit axes over it."""
    inner = e
    while isinstance(inner, (T.Transpose, T.Convert, T.Expand)):
        inner = inner.arg
    if isinstance(inner, T.Var):
        if isinstance(values.get(inner.name), InShared):
            return [(inner.type.dtype, tuple(e.type.shape))]
        return []
    return [v for c in T.children(e) for v in _shared_views(c, values)]


def operands_computed_ahead(ops: list, values: dict) -> set[str]:
    """Register mma operands computed from shared-memory tiles alone (mamba2's decayed B,
    W4A16's dequantized planes), not from a product: the compiler computes the next
    iteration's while the current one multiplies, so they count twice at the mma."""
    products = {n for op in ops if isinstance(op, (ir.Mma, ir.Wgmma, ir.SimtMatmul))
                for n in defines(op)}
    made = {}
    for op in ops:
        for n in defines(op):
            made.setdefault(n, []).append(op)

    def from_shared(name: str, seen: frozenset) -> bool:
        if name in products or name in seen:
            return False
        if isinstance(values.get(name), InShared):
            return True
        return all(isinstance(op, ir.Compute)
                   and all(from_shared(r, seen | {name}) for r in op_reads(op))
                   for op in made.get(name, [None]))

    return {o.value for op in ops if isinstance(op, ir.Mma) for o in (op.a, op.b)
            if o.in_registers and from_shared(o.value, frozenset())}


def simt_operand_words(layout) -> int:
    """32-bit registers of what a CUDA-core product reads per k-step: an a value for each
    of the thread's rows and a b value for each of its columns."""
    return sum(math.prod(d.size for d in layout.regs if d.along() == axis)
               for axis in range(len(layout.shape)))


def fragment_words(fragment) -> int:
    """32-bit registers of one atom's 16-bit operand fragment (two values per register)."""
    return math.ceil(math.prod(d.size for d in fragment.regs) / 2)


def staged_words(body, threads: int) -> int:
    """Registers a thread's copies staged in registers hold while in flight (each task's
    copy at most once; they are in flight together across the main loop's multiplies)."""
    total = 0
    for op in {op.task: op for op in ir.walk(body)
               if isinstance(op, ir.CopyTile) and op.staged}.values():
        t = op.tile
        chunk_bytes = op.vector * DTYPE_BYTES[t.dtype]
        chunks = t.rows * t.cols // op.vector
        total += math.ceil(chunks / threads) * math.ceil(chunk_bytes / 4)
    return total


def register_bound_blocks(res, threads: int, shared_bytes: int, blocks: int) -> int:
    """The blocks per EU the register allocator is told to leave room for (0: its own
    choice): one where the plan's resources allow one; else the plan's count where the
    estimate's registers are what limits it and that count still leaves a thread the most
    registers it may have. Left to its own heuristic, ptxas caps a 128-thread block at 128
    registers, to fit more blocks than the registers allow, and spills (the sm80
    block-scaled FP8 GEMM, whose k-steps widen e4m3 to f16: 2 blocks of 128 threads by its
    estimate, 128 registers and a spill; told 2 it takes 254 and none). A count whose cap
    is lower is not told: a cap just above a low estimate spills instead (it did for three
    samples at 2 blocks of 256 threads)."""
    if blocks <= 1:
        return blocks
    register_bound = res.resident_blocks(threads, 0, shared_bytes) > blocks
    whole_cap = res.registers // (blocks * threads) >= res.max_registers_per_thread
    return blocks if register_bound and whole_cap else 0
