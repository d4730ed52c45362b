"""A shared tile read element-wise by several computations of one iteration, read once.

A W4A16 loop unpacks eight planes from one tile of packed words (samples/w4a16_gemm.pt):
each plane's computation reads the same words from shared memory at the same positions,
and the barriers between the planes keep the compiler from reusing the first reads. When
two or more `Compute` ops of one loop body (or of the kernel's top level) read a whole
value held in shared memory into the same register layout, and nothing copies into its
buffer between the first and the last of them, the value is read into registers of that
layout once, just before the first (a `Compute` of the value itself), and each of them
reads the registers. Only where the register budget allows it with a margin of 40% of the
budget (`ESTIMATE_MARGIN`): the estimate misses that much on register-heavy kernels
(ptxas took 255 registers and spilled for sm80's W4A16 plan estimated at 184 with the copy;
130 for mamba2_chunk_scan's edge plan estimated at 80), and a copy that only saves shared
reads is not worth a spill.
"""
from __future__ import annotations

from dataclasses import replace

from ..sema import typed as T
from ..sema.dtypes import DTYPE_BYTES
from . import ir
from .storage import c_name

ESTIMATE_MARGIN = 0.4      # of the register budget, kept free beside the copy


def shared_reads_once(body: tuple, builder) -> tuple:
    """`body` with each shared value that several computations of a block read, read
    into registers once."""
    ops = tuple(replace(op, fill=shared_reads_once(op.fill, builder),
                        body=shared_reads_once(op.body, builder),
                        drain=shared_reads_once(op.drain, builder))
                if isinstance(op, ir.Loop) else op for op in body)
    before: dict[int, list[ir.Compute]] = {}      # index -> the reads inserted before it
    renamed: dict[int, dict[str, T.Var]] = {}     # index -> shared value -> its registers
    for (var, layout), at in _readers(ops, builder).items():
        home = builder.values[var.name]
        if len(at) < 2 or _copied_into(ops[at[0]:at[-1]], home.buffer):
            continue
        words = -(-builder.layouts[layout].size * DTYPE_BYTES[var.type.dtype] // 4)
        if not builder.register_room(words + int(builder.register_budget() * ESTIMATE_MARGIN)):
            continue
        builder.reserve_registers(words)
        copy = T.Var(f"{var.name}@regs", var.type)
        builder.values[copy.name] = ir.RegTile(c_name(var.name) + "_regs", var.type.dtype,
                                               builder.values[ops[at[0]].target].shape, layout)
        first = ops[at[0]]
        before.setdefault(at[0], []).append(ir.Compute(first.task, copy.name, var, first.mask))
        for i in at:
            renamed.setdefault(i, {})[var.name] = copy
    out: list = []
    for i, op in enumerate(ops):
        out += before.get(i, [])
        out.append(replace(op, expr=T.substituted(op.expr, renamed[i])) if i in renamed else op)
    return tuple(out)


def _readers(ops: tuple, builder) -> dict[tuple[T.Var, str], list[int]]:
    """(shared value, register layout) -> the indices of the computations that read all of
    the value into that layout (the value's shape is the computation's)."""
    out: dict[tuple[T.Var, str], list[int]] = {}
    for i, op in enumerate(ops):
        if not isinstance(op, ir.Compute):
            continue
        target = builder.values.get(op.target)
        if not isinstance(target, ir.RegTile):
            continue
        for var in _vars(op.expr):
            shape = tuple(builder.low.extent(e) for e in var.type.shape)
            if isinstance(builder.values.get(var.name), ir.InShared) and \
                    shape == tuple(target.shape):
                at = out.setdefault((var, target.layout), [])
                if not at or at[-1] != i:
                    at.append(i)
    return out


def _vars(e: T.TExpr) -> list[T.Var]:
    if isinstance(e, T.Var):
        return [e]
    return [v for c in T.children(e) for v in _vars(c)]


def _copied_into(ops: tuple, buffer: str) -> bool:
    return any(isinstance(op, ir.CopyTile) and op.buffer == buffer for op in ir.walk(ops))
