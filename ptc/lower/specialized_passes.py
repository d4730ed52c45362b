"""Rewrites of a warp-specialized consumer's ops once they are placed (sm90a;
ptc.lower.specialized): one wgmma group kept in flight, accumulators pinned after
CUDA-core definitions, ping-pong turns and barriers among a warpgroup's threads."""
from __future__ import annotations

from dataclasses import replace

from ..sched.turns import Turns
from . import ir
from .rewrite import rewrite
from .specialized_plan import WARPGROUP


def one_group_in_flight(ops) -> tuple:
    """A loop that only feeds one wgmma (waits for its slots, multiplies into an
    accumulator, releases the slots) keeps that wgmma in flight while the next is issued:
    it waits for all but the newest group and releases the slots of the use before; after
    the loop it waits for the last and releases its slots (FlashAttention-3 and CUTLASS's
    mainloops). The tensor cores then never wait for the issue of the next wgmma."""
    return rewrite(ops, lambda op: (_deferred_release(op) or op) if isinstance(op, ir.Loop)
                   else op)


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


def overlapped_wgmmas(ops, values: dict) -> tuple:
    """In a loop that issues several wgmmas with CUDA-core work between them (W4A16's
    planes: dequantize, stage, multiply, eight times), each wgmma but the last stays in
    flight while that work and the next wgmma are issued: its wait becomes a wait for all
    but the newest group after the next wgmma, and the release of its slots follows that
    wait. Only where the work in between neither reads nor defines the wgmma's
    accumulator nor writes the shared tiles it reads (the next wgmma may accumulate into
    the same registers: wgmmas of one accumulator run in issue order). The tensor cores
    then multiply one plane while the CUDA cores dequantize the next."""
    return rewrite(ops, lambda op: replace(op, body=_overlapped(op.body, values))
                   if isinstance(op, ir.Loop) else op)


def _overlapped(body: tuple, values: dict) -> tuple:
    out: list = []
    deferred: tuple = ()         # the wait and releases of the wgmma still in flight
    i = 0
    while i < len(body):
        op = body[i]
        out.append(op)
        i += 1
        if not isinstance(op, ir.Wgmma):
            continue
        if deferred:
            out += [replace(deferred[0], pending=1), *deferred[1:]]
            deferred = ()
        done, end = _wait_and_releases(body, i)
        after = next((j for j in range(end, len(body)) if isinstance(body[j], ir.Wgmma)), None)
        if done and after is not None and _independent(body[end:after], op, body[after],
                                                       values):
            deferred, i = done, end
    return tuple(out)


def _wait_and_releases(body: tuple, i: int) -> tuple[tuple, int]:
    """(the wait for all groups at body[i] and the plain slot releases after it, the index
    past them), or ((), i)."""
    if i >= len(body) or not isinstance(body[i], ir.WgmmaWait) or body[i].pending:
        return (), i
    end = i + 1
    while end < len(body) and isinstance(body[end], ir.MbarrierArrive) and \
            not (body[end].per_warp or body[end].lag):
        end += 1
    return body[i:end], end


def _independent(between: tuple, mma: ir.Wgmma, after: ir.Wgmma, values: dict) -> bool:
    """Whether `between` and the next wgmma `after` leave `mma`'s accumulator and operand
    tiles alone (`after` may accumulate into the same registers)."""
    from .registers import defines
    from .sync import op_reads, op_scratch

    tiles = {values[o.value].buffer for o in (mma.a, mma.b)
             if not o.in_registers and isinstance(values.get(o.value), ir.InShared)}
    if mma.out in {o.value for o in (after.a, after.b)}:
        return False
    for op in ir.walk(between):
        if isinstance(op, (ir.Loop, ir.Iteration, ir.WgmmaWait)):
            return False
        if mma.out in op_reads(op) or mma.out in defines(op):
            return False
        written = {b for b, write in op_scratch(op) if write}
        if isinstance(op, ir.StageOperand):
            written.add(op.buffer)
        if written & tiles:
            return False
    return True


def pin_accumulators(ops, accumulators: set[str]) -> tuple:
    """Pin a wgmma accumulator after each CUDA-core definition of it (its zero fill, a
    rescale): ir.PinAccumulators."""
    return rewrite(ops, lambda op: (op, ir.PinAccumulators((op.target,)))
                   if isinstance(op, ir.Compute) and op.target in accumulators else op)


TURN_BARRIER = 3       # instance p's turn barrier is 3 + p (1 + p: its own; 15: producer)


def take_turns(ops, where: Turns, parts: int) -> tuple:
    """Ping-pong (ptc.sched.turns) with named barriers, FlashAttention-3's way: in each
    iteration an instance waits at its own barrier before its first wgmma and arrives at
    the next instance's after issuing the wgmma that hands over, 128 threads each. The last
    instance arrives once before the loop (instance 0 holds the first turn), and instance 0
    waits once after it for that last hand-over, so every barrier completes as often as it
    is used, whatever the trip count."""
    threads = 2 * WARPGROUP * 32

    def turns(op):
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
            return (ir.NamedBarrier("warpgroup 0 takes the first turn", TURN_BARRIER,
                                    threads, arrive=True, next_instance=True, only=parts - 1),
                    replace(op, body=tuple(body)),
                    ir.NamedBarrier(f"the turn warpgroup {parts - 1} handed over last",
                                    TURN_BARRIER, threads, only=0))
        return op
    return rewrite(ops, turns)


def _issues(op, task: str) -> bool:
    """Whether `op` is (or holds, for an Iteration) the wgmma of `task`."""
    return any(isinstance(o, ir.Wgmma) and o.task == task for o in ir.walk([op]))


def named_barriers(ops) -> tuple:
    """A consumer warpgroup's barriers are among its own threads."""
    return rewrite(ops, lambda op: ir.NamedBarrier(op.why) if isinstance(op, ir.Barrier)
                   else op)
