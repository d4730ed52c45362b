"""Waits and barriers, placed by simulating the ops (docs/lowering.md: every wait and barrier is
an op of the lowered IR).

1. Copy groups. Each `CommitGroup` closes a group of this thread's async copies. A plan
   wait on a buffer becomes `WaitGroups(n)`: the copy the waiting op reads (the one for
   its iteration) must be complete, so n = the number of groups committed after that
   copy's group, the least over every iteration of a short unrolled run (pipelined loops
   commit a group every iteration, empty past the last, so the count is steady).
2. Barriers. Threads share shared memory, so between two accesses to overlapping bytes,
   one of them a write, every thread must pass a barrier. The ops are run for a few
   iterations of every loop, tracking the accesses since the last barrier; an access that
   conflicts with one of them gets a barrier just before it, at its place in the loop
   body (so every iteration has it), until nothing changes. An async copy's write counts
   from its issue, and can only be ordered before a read by a wait that covers it and a
   barrier after that wait; a read of a copy nothing waited for is an error.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from . import ir
from .program import reads
from .rewrite import rewrite


class SyncError(Exception):
    pass


@dataclass
class _Access:
    op: int                      # id of the op
    lo: int                      # byte range [lo, hi)
    hi: int
    write: bool
    group: int | None = None     # async copy: the commit group (None: done when issued)


def _trips(loop: ir.Loop, keyed: frozenset) -> int:
    """Iterations to simulate: enough for every ring slot to come round twice. A loop whose
    iteration picks no slot and issues no copy (`keyed`: the loops that do) runs the same
    accesses every time, so a hazard across its iterations shows between the first two,
    and the third meets the second's leftovers as every later one would."""
    return 2 * loop.stages + 2 if loop.var in keyed else 3


def keyed_loops(body: tuple, values: dict) -> frozenset:
    """The loops whose iteration picks a ring slot or a copy's iteration."""
    return frozenset({op.loop for op in ir.walk(body) if isinstance(op, ir.CopyTile)} |
                     {h.loop for h in values.values() if isinstance(h, ir.InShared)})


class _Hazard(Exception):
    """A trial run met an access that needs a barrier: the trial fails, whatever follows."""


class _Run:
    """One simulated run of the ops, reporting the ops that need a barrier before them and
    the wait counts."""

    def __init__(self, kernel_buffers: dict, values: dict, keyed: frozenset,
                 touches: dict | None = None, trial: bool = False):
        self.buffers = kernel_buffers
        self.values = values
        self.keyed = keyed            # keyed_loops: the others are simulated for 3 trips
        self.trial = trial            # stop at the first hazard (_Hazard)
        # id(op) -> (op, the shared values it reads, the scratch it touches): the same for
        # every iteration, and for every run of place_sync, which shares this
        self.touches = {} if touches is None else touches
        self.pending: list[_Access] = []
        self.committed = 0            # groups committed so far
        # buffer -> (group, for-iteration) of each of its committed copies, oldest first
        self.copies: dict[str, list[tuple[int, tuple]]] = {}
        self.open: list[tuple[str, tuple]] = []
        self.done_groups = 0          # groups [0, done) are complete
        self.needs_barrier: set[int] = set()
        self.wait_counts: dict[int, int] = {}
        self.iters: dict[str, int] = {}
        self.trips: dict[str, int] = {}
        self.loop_stack: list[str] = []

    # ---- helpers ----------------------------------------------------------------------------
    def slot(self, buffer: str, loop: str, ahead: int) -> int:
        b = self.buffers[buffer]
        if b.slots == 1:
            return 0
        return (self.iters.get(loop, 0) + ahead) % b.slots

    def bytes_of(self, buffer: str, slot: int) -> tuple[int, int]:
        b = self.buffers[buffer]
        lo = b.offset + slot * b.slot_bytes
        return lo, lo + b.slot_bytes

    def for_iteration(self, loop: str = "", ahead: int = 0) -> tuple:
        """The iterations of the enclosing loops; a copy `ahead` of `loop` is for a later
        iteration of it."""
        return tuple((lp, self.iters[lp] + (ahead if lp == loop else 0))
                     for lp in self.loop_stack)

    # ---- accesses -----------------------------------------------------------------------------
    def access(self, op, acc: _Access) -> None:
        for other in self.pending:
            if other.hi <= acc.lo or acc.hi <= other.lo or not (other.write or acc.write):
                continue
            if other.group is not None and other.group >= self.done_groups:
                raise SyncError(f"{_describe(op)} touches shared memory that an async copy "
                                "still writes (no wait covers the copy)")
            self.needs_barrier.add(id(op))
            if self.trial:
                raise _Hazard
            self.barrier()
            break
        self.pending.append(acc)

    def barrier(self) -> None:
        self.pending = [a for a in self.pending
                        if a.group is not None and a.group >= self.done_groups]

    def touched(self, op) -> tuple[tuple[ir.InShared, ...], list[tuple[str, bool]]]:
        found = self.touches.get(id(op))
        if found is None:       # the entry keeps `op` alive: its id is not reused
            homes = (self.values.get(name) for name in op_reads(op))
            found = (op, tuple(h for h in homes if isinstance(h, ir.InShared)), op_scratch(op))
            self.touches[id(op)] = found
        return found[1], found[2]

    def reads(self, op, homes) -> None:
        for home in homes:
            lo, hi = self.bytes_of(home.buffer, self.slot(home.buffer, home.loop, 0))
            self.access(op, _Access(id(op), lo, hi, False))

    # ---- the run -----------------------------------------------------------------------------
    def run(self, ops) -> None:
        for op in ops:
            self.one(op)

    def one(self, op) -> None:
        STEPS.get(type(op), _Run.touch)(self, op)

    def iteration(self, op: ir.Iteration) -> None:
        self.run(op.body)

    def loop(self, op: ir.Loop) -> None:
        """The loop's fill, then a few iterations. The real loop may stop after any
        iteration (or run none), and each iteration touches its own ring slots: what
        follows is ordered after the accesses any iteration left pending, not only the last
        simulated one's (a tile placed over ring slot 0 after the loop met the reads of
        slot 0 when the loop ran once: issue 20, mismatch-eeab196187)."""
        self.loop_stack.append(op.var)
        self.iters[op.var] = 0
        self.trips[op.var] = trips = _trips(op, self.keyed)
        self.run(op.fill)
        exits = [list(self.pending)]
        for i in range(trips):
            self.iters[op.var] = i
            self.run(op.body)
            exits.append(list(self.pending))
        self.loop_stack.pop()
        del self.iters[op.var], self.trips[op.var]
        self.pending = _union(exits)

    def copy(self, op: ir.CopyTile) -> None:
        if op.guard and op.loop in self.trips and \
                self.iters[op.loop] + op.ahead >= self.trips[op.loop]:
            return     # past the loop's last iteration: the guard skips it (an empty group)
        slot = self.slot(op.buffer, op.loop, op.ahead)
        lo, hi = self.bytes_of(op.buffer, slot)
        group = self.committed if op.asynchronous else None
        self.access(op, _Access(id(op), lo, hi, True, group))
        if op.asynchronous:
            self.open.append((op.buffer, self.for_iteration(op.loop, op.ahead)))

    def commit(self, op: ir.CommitGroup) -> None:
        for buffer, it in self.open:
            self.copies.setdefault(buffer, []).append((self.committed, it))
        self.committed += 1
        self.open = []

    def wait_groups(self, op: ir.WaitGroups) -> None:
        self.done_groups = max(self.done_groups, self.committed - op.pending)

    def touch(self, op) -> None:
        """Any other op: its reads of shared values and its scratch."""
        homes, scratch = self.touched(op)
        self.reads(op, homes)
        for buffer, write in scratch:
            lo, hi = self.bytes_of(buffer, 0)
            self.access(op, _Access(id(op), lo, hi, write))

    def wait(self, op: ir.PlanWait) -> None:
        """Complete the groups holding the copies the waiting op reads: the latest copy of
        each buffer made for the current iterations (or for an enclosing scope)."""
        now = self.for_iteration()
        targets = []
        for buffer in op.buffers:
            found = next((g for g, it in reversed(self.copies.get(buffer, ()))
                          if now[:len(it)] == it), None)
            if found is not None:
                targets.append(found)
        if not targets:
            return      # synchronous copies: nothing to wait for
        after = self.committed - 1 - max(targets)
        key = id(op)
        self.wait_counts[key] = min(self.wait_counts.get(key, after), after)
        self.done_groups = max(self.done_groups, max(targets) + 1)


# what a run does with each kind of op (by exact type: the ir classes inherit from none
# of one another); any other op touches the shared values it reads and its scratch
STEPS = {ir.Barrier: lambda run, op: run.barrier(), ir.Iteration: _Run.iteration,
         ir.Loop: _Run.loop, ir.CopyTile: _Run.copy, ir.CommitGroup: _Run.commit,
         ir.PlanWait: _Run.wait, ir.WaitGroups: _Run.wait_groups}


def _union(exits: list[list[_Access]]) -> list[_Access]:
    """The accesses pending at any of the exits, each once."""
    seen: dict[tuple, _Access] = {}
    for pending in exits:
        for a in pending:
            seen.setdefault((a.op, a.lo, a.hi, a.write, a.group), a)
    return list(seen.values())


def op_reads(op) -> list[str]:
    """Values an op reads: shared-memory ones for the barriers here, registers for the
    liveness of ptc.lower.registers."""
    if isinstance(op, ir.Compute):
        return reads(op.expr)
    if isinstance(op, ir.Reduce):
        return reads(op.expr)
    if isinstance(op, (ir.Mma, ir.Wgmma)):
        return [o.value for o in (op.a, op.b)] + ([op.addend] if op.addend else [])
    if isinstance(op, ir.SimtMatmul):
        return reads(op.a) + reads(op.b) + ([op.addend] if op.addend else [])
    if isinstance(op, ir.LoadFragments):
        return [op.source]
    if isinstance(op, (ir.StoreTile, ir.SpillTile, ir.StageOperand, ir.TmaStore)):
        return [op.value]
    if isinstance(op, ir.WarpCombine):
        return []
    return []


def op_scratch(op) -> list[tuple[str, bool]]:
    """(scratch buffer, write?) an op touches."""
    if isinstance(op, ir.Reduce) and op.scratch:
        return [(op.scratch, True)]
    if isinstance(op, ir.SpillTile):
        return [(op.scratch, True)]
    if isinstance(op, (ir.WarpCombine, ir.FillTile)):
        return [(op.scratch, False)]
    return []


def _describe(op) -> str:
    task = getattr(op, "task", "")
    return f"{type(op).__name__}{' of ' + task if task else ''}"


def place_sync(body: tuple, buffers: dict, values: dict) -> tuple:
    """The ops with WaitGroups for every plan wait and Barriers where threads must meet:
    barriers are added where a run finds a hazard until none is left, then each one is
    dropped again if the run stays clean without it (an earlier barrier, added for
    another hazard, may cover it). Decided once per shape of the problem (`_shape`): a
    search lowers dozens of candidates of one kernel, most of them the same ops over
    other tile sizes."""
    touches: dict = {}
    key = _shape(body, buffers, values, touches)
    found = _PLACEMENTS.get(key)
    if found is None:
        current, waits = _placed(body, buffers, values, touches)
        found = _decisions(body, current, waits)
        if len(_PLACEMENTS) >= PLACEMENTS_KEPT:
            _PLACEMENTS.clear()
        _PLACEMENTS[key] = found
    return _apply(body, found, iter(range(len(found))))


def _placed(body: tuple, buffers: dict, values: dict, touches: dict) -> tuple:
    """place_sync's search: (the ops with their barriers, the wait counts by PlanWait)."""
    keyed = keyed_loops(body, values)
    current = body
    for _ in range(256):
        run = _Run(buffers, values, keyed, touches)
        run.run(current)
        if not run.needs_barrier:
            break
        current = _insert_barriers(current, run.needs_barrier)
    else:
        raise SyncError("barrier placement did not settle")
    clean = run            # the run of `current`: its wait counts are the kernel's
    for barrier in [op for op in ir.walk(current) if isinstance(op, ir.Barrier)]:
        trial = _without(current, barrier)
        # A trial stops at its first hazard: the rest cannot make it clean, nor raise a
        # SyncError -- barriers never change which async copies are in flight, and no
        # access of the clean run of `current` meets one
        run = _Run(buffers, values, keyed, touches, trial=True)
        try:
            run.run(trial)
        except _Hazard:
            continue
        current, clean = trial, run
    return current, clean.wait_counts


# ---- one placement per shape ----------------------------------------------------------------
# What the runs decide depends only on each op's kind and the fields a run reads (its
# buffer, loop, prefetch distance, guard; the shared values and scratch it touches; the
# trips a loop is simulated for) and on how the buffers' slots overlap, which the
# order of their byte bounds decides (`access` compares bounds, never sizes). Candidates
# that differ in tile sizes alone mostly agree on all of it.
PLACEMENTS_KEPT = 4096
_PLACEMENTS: dict[tuple, tuple] = {}


def _synced(op) -> tuple:
    """The ops a run visits inside `op`, in its order (a loop's drain is not run)."""
    if isinstance(op, ir.Loop):
        return op.fill + op.body
    if isinstance(op, ir.Iteration):
        return op.body
    return ()


def _shape(body: tuple, buffers: dict, values: dict, touches: dict) -> tuple:
    """The key of `place_sync`'s decisions for `body` (filling `touches` on the way)."""
    keyed = keyed_loops(body, values)
    tokens: list[tuple] = []
    first: dict[int, int] = {}      # the same op object twice is one op to a run

    def visit(ops) -> None:
        for op in ops:
            kind = type(op)
            tokens.append(("at", first.setdefault(id(op), len(tokens))))
            if kind is ir.Loop:
                tokens.append(("loop", op.var, _trips(op, keyed), len(op.fill),
                               len(op.body)))
            elif kind is ir.Iteration:
                tokens.append(("iteration", len(op.body)))
            elif kind is ir.CopyTile:
                tokens.append(("copy", op.buffer, op.loop, op.ahead, op.guard,
                               op.asynchronous))
            elif kind is ir.PlanWait:
                tokens.append(("wait", op.buffers))
            elif kind is ir.WaitGroups:
                tokens.append(("wait_groups", op.pending))
            elif kind in (ir.Barrier, ir.CommitGroup):
                tokens.append((kind.__name__,))
            else:
                homes = tuple(h for h in (values.get(n) for n in op_reads(op))
                              if isinstance(h, ir.InShared))
                scratch = op_scratch(op)
                touches[id(op)] = (op, homes, scratch)
                tokens.append(("touch", tuple((h.buffer, h.loop) for h in homes),
                               tuple(scratch)))
            visit(_synced(op))
    visit(body)
    bounds = {name: [(b.offset + s * b.slot_bytes, b.offset + (s + 1) * b.slot_bytes)
                     for s in range(b.slots)] for name, b in buffers.items()}
    rank = {x: i for i, x in enumerate(sorted({x for spans in bounds.values()
                                               for span in spans for x in span}))}
    slots = tuple(sorted((name, tuple((rank[lo], rank[hi]) for lo, hi in spans))
                         for name, spans in bounds.items()))
    return tuple(tokens), slots


def _decisions(body: tuple, current: tuple, waits: dict[int, int]) -> tuple:
    """Per op of `body` in a run's order: (a barrier goes before it, it stays (a barrier or
    a plan wait may go), its wait count or None), read off `current`: the same ops (loops
    and iterations rebuilt) with the barriers the search placed, each just before the op
    it was placed for."""
    out: list[tuple] = []

    def pair(ops, placed) -> None:
        mine = {id(op) for op in ops}
        at, barrier = 0, False
        for op in ops:
            while at < len(placed) and type(placed[at]) is ir.Barrier \
                    and id(placed[at]) not in mine:
                barrier, at = True, at + 1
            if type(op) is ir.Barrier and not (at < len(placed) and placed[at] is op):
                out.append((False, False, None))     # a barrier of `body`, dropped
                continue
            now, at = placed[at], at + 1
            keep = not (type(op) is ir.PlanWait and id(op) not in waits)
            out.append((barrier, keep, waits.get(id(op))))
            barrier = False
            pair(_synced(op), _synced(now))
        assert at == len(placed) and not barrier, "a barrier placed after every op"
    pair(body, current)
    return tuple(out)


def _apply(ops: tuple, decisions: tuple, at) -> tuple:
    """`ops` with `decisions` (`_decisions`, consumed from the iterator `at`) carried out."""
    out: list = []
    for op in ops:
        barrier, keep, wait = decisions[next(at)]
        if barrier:
            out.append(ir.Barrier(_why(op)))
        if type(op) is ir.Loop:
            op = replace(op, fill=_apply(op.fill, decisions, at),
                         body=_apply(op.body, decisions, at))
        elif type(op) is ir.Iteration:
            op = replace(op, body=_apply(op.body, decisions, at))
        if not keep:
            continue
        out.append(ir.WaitGroups(wait, op.buffers) if type(op) is ir.PlanWait else op)
    return tuple(out)


def _without(ops, gone) -> tuple:
    return rewrite(ops, lambda op: None if op is gone else op)


def _insert_barriers(ops, marks: set[int]) -> tuple:
    out: list = []
    for op in ops:
        if id(op) in marks and not (out and isinstance(out[-1], ir.Barrier)):
            out.append(ir.Barrier(_why(op)))
        if isinstance(op, ir.Loop):
            out.append(replace(op, fill=_insert_barriers(op.fill, marks),
                               body=_insert_barriers(op.body, marks)))
        elif isinstance(op, ir.Iteration):
            out.append(replace(op, body=_insert_barriers(op.body, marks)))
        else:
            out.append(op)
    return tuple(out)


def _why(op) -> str:
    if isinstance(op, ir.CopyTile):
        return f"every thread is done with the bytes {op.task} overwrites"
    if isinstance(op, ir.WarpCombine):
        return "the warps' partial results are in shared memory"
    if isinstance(op, ir.FillTile):
        return f"{op.target} reads the values other threads spilled"
    if isinstance(op, ir.SpillTile):
        return f"every thread is done with the bytes the spill of {op.value} overwrites"
    return f"{_describe(op)} reads what other threads wrote"
