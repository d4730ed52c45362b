"""A loop's copies whose address and extents move by a fixed step each trip (a GEMM's k
tiles): computed at trip 0 before the loop, each trip adding its step (ir.CopyTile.hoisted,
printed by the renderer's `hoist_copies`). Recomputed every trip they are a 64-bit multiply
and 64-bit compares a copy: the sm80 GEMM's main loop issues 168 instructions a warp and
trip against 144 with them hoisted (nvcc 13, docs/lowering.md).

What stays live across the loop (the address, a room or a fixed extent per axis: about
four registers a copy) is counted in the register estimate, and the copies are hoisted
only where that leaves a tenth of the registers the plan's occupancy gives a thread, and
half of what a thread may have: left to its own choice, ptxas spilled where the hoisted
values took the last of them (tests/kernels/cross_entropy.pt at 92 + 8 of 102, tests/
kernels/w4a16.pt at 152 + 8 of 170), and where the estimate is far from its count (w4a16
at its odd shape: ~136 estimated, 255 used before the 4 more). One register estimate
ptxas can be told (issue 24) would let the rest hoist."""
from __future__ import annotations

from dataclasses import replace

from . import ir
from .affine import mentions, step
from .rewrite import rewrite

HOISTED_WORDS = 4        # registers a hoisted copy keeps across its loop
HEADROOM = 0.9           # of a thread's registers at the plan's occupancy
TRUSTED = 0.5            # of the most a thread may have: the estimate is near ptxas's count


def hoistable(op, loop: ir.Loop) -> tuple | None:
    """The steps a trip of copy `op`'s origin, row start and column start, where it moves
    by a step each trip of `loop` (else None): a plain tile (not gathered, never before the
    tensor's start, no validity test) of `loop`'s body whose strides and bounds the loop's
    index leaves alone, whose origin and starts are affine in it and whose rows or columns
    move with it."""
    if not isinstance(op, ir.CopyTile) or op.loop != loop.var:
        return None
    t = op.tile
    if t.gather is not None or t.row_low or t.col_low or t.valid is not None:
        return None
    if any(mentions(e, loop.var) for e in (t.row_stride, t.col_stride, t.row_bound,
                                           t.col_bound)):
        return None
    if not (mentions(t.row_start, loop.var) or mentions(t.col_start, loop.var)):
        return None      # the same tile every trip (a column of scales): nothing moves
    steps = tuple(step(e, loop.var) for e in (t.origin, t.row_start, t.col_start))
    return None if None in steps else steps


def _hoisted_in(op):
    """A loop with the hoistable copies of its own body hoisted (its nested blocks are the
    rewrite's: ptc.lower.rewrite)."""
    if not isinstance(op, ir.Loop):
        return op
    body = tuple(c if (steps := hoistable(c, op)) is None else replace(c, hoisted=steps)
                 for c in op.body)
    return op if all(a is b for a, b in zip(body, op.body)) else replace(op, body=body)


def hoist_copies(body: tuple, registers: int, cap: int, most: int,
                 caps) -> tuple[tuple, int]:
    """(the ops with every hoistable copy of a loop's body hoisted, the register estimate
    with their words) where the renderer prints hoisted copies (`caps`) and that fits in
    HEADROOM of `cap`, a thread's registers at the plan's occupancy, and TRUSTED of
    `most`, the most it may have; else (body, registers) unchanged."""
    if caps is None or not caps.hoisted_copies:
        return body, registers
    hoisted = rewrite(body, _hoisted_in)
    count = sum(1 for op in ir.walk(hoisted) if isinstance(op, ir.CopyTile) and op.hoisted)
    need = registers + HOISTED_WORDS * count
    if not count or need > HEADROOM * cap or need > TRUSTED * most:
        return body, registers
    return hoisted, need
