"""Shared-memory placement of tile values: liveness, in-place reuse, first-fit offsets.

Every tile value the CUDA renderer keeps in shared memory gets a storage class. A value
defined by an elementwise statement (or an mma's accumulate) may take over the storage of
an operand that dies there, when it reads that operand at the same element only (no
broadcast, no transpose): `%o = o * a[:, None]` then `o = %o + p @ v` run in place. A
value read in a loop before it is defined there is live for the whole loop (it is carried
into the next iteration). Classes whose live ranges meet never share bytes.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..sched.plan import LoopBlock, Role, Step
from ..sema import typed as T


@dataclass
class Value:
    name: str
    nbytes: int
    defs: list[int] = field(default_factory=list)
    uses: list[int] = field(default_factory=list)
    live: set[int] = field(default_factory=set)


def program_order(role: Role, tasks) -> tuple[list[tuple[int, T.Let]], dict[str, tuple[int, int]]]:
    """The role's Let statements in execution order with positions (a Store appears as a
    Let of a name no value has, reading the stored value), and each loop's [first, last]
    position."""
    order: list[tuple[int, T.Let]] = []
    loops: dict[str, tuple[int, int]] = {}
    pos = 0

    def walk(items) -> None:
        nonlocal pos
        for it in items:
            if isinstance(it, LoopBlock):
                start = pos
                walk([s for s in it.body if not (isinstance(s, Step) and s.offset > 0)])
                loops[it.var] = (start, max(pos - 1, start))
                continue
            if it.task == "sync":
                continue
            for s in tasks[it.task].stmts:
                if isinstance(s, T.Let):
                    order.append((pos, s))
                    pos += 1
                elif isinstance(s, T.Store):
                    # a store reads its value: a use, so that the value's bytes are not
                    # given to another value before the store has run
                    order.append((pos, T.Let(f"<store {s.tensor}>", s.value, s.span)))
                    pos += 1

    walk(role.body)
    return order, loops


def same_index_reads(e, name: str, shape) -> bool | None:
    """True when every read of `name` in e (outside reductions) is at the result's own
    element; None when e does not read it outside reductions."""
    found = []

    def visit(node, direct: bool) -> None:
        if isinstance(node, T.Reduce):
            return
        if isinstance(node, T.Var) and node.name == name:
            found.append(direct and node.type.shape == shape)
            return
        keeps = isinstance(node, (T.Elementwise, T.Convert))
        children = T.children(node)
        if isinstance(node, T.MmaAccumulate):
            # the tensor core reads the accumulator element by element, the operands whole
            visit(node.a, False)
            visit(node.b, False)
            keeps, children = True, () if node.acc is None else (node.acc,)
        for c in children:
            if isinstance(node, T.MatMul):
                visit(c, False)
            else:
                visit(c, direct and keeps and (c.type.shape == shape or not isinstance(c, T.Var)))

    visit(e, True)
    return all(found) if found else None


def plan_storage(order, loops, loop_of, sizes: dict[str, int], dtypes: dict[str, str],
                 shapes: dict[str, tuple]) -> tuple[dict[str, str], dict[str, int], int]:
    """(storage class of each value, byte offset of each class, total bytes)."""
    values: dict[str, Value] = {n: Value(n, sizes[n]) for n in sizes}
    for pos, s in order:
        for r in _reads(s.value):
            if r in values:
                values[r].uses.append(pos)
        if s.name in values:
            values[s.name].defs.append(pos)
    stmt_at = {pos: st for pos, st in order}
    for v in values.values():
        events = sorted([(p, 1) for p in v.defs] + [(p, 0) for p in v.uses])
        live_from = None
        for p, is_def in events:   # at one position the read comes before the write
            if is_def:
                live_from = p
                v.live.add(p)
            elif live_from is not None:
                v.live.update(range(live_from, p + 1))
        # carried: read in a loop before it is defined there, so the last definition of
        # one iteration lives on into the next one
        for lo, hi in loops.values():
            inside_uses = [p for p in v.uses if lo <= p <= hi]
            inside_defs = [p for p in v.defs if lo <= p <= hi]
            if not inside_uses:
                continue
            if not inside_defs:
                v.live.update(range(lo, hi + 1))
            elif min(inside_uses) <= min(inside_defs):
                v.live.update(range(lo, min(inside_uses) + 1))
                v.live.update(range(max(inside_defs), hi + 1))
        if not v.live:
            v.live = set(v.defs) or {0}

    # in-place: a new value takes an operand's storage when the operand dies here
    cls = {n: n for n in values}
    members: dict[str, set[str]] = {n: {n} for n in values}
    live_of: dict[str, set[int]] = {n: set(v.live) for n, v in values.items()}

    def handover(q: int, x: str, target: str) -> bool:
        """At q, x is read element-wise by a statement that writes into `target`'s class."""
        st = stmt_at.get(q)
        return (st is not None and cls.get(st.name) == target
                and bool(same_index_reads(st.value, x, st.value.type.shape)))

    for pos, s in order:
        x = s.name
        if x not in values or values[x].defs[0] != pos or len(members[x]) > 1:
            continue
        if not values[x].uses:
            # never read: its live range is its definition alone, so it would pass the
            # check below and overwrite an operand that is still read later
            continue
        for y in sorted(_reads(s.value)):
            if y == x or y not in values or dtypes[y] != dtypes[x] or shapes[y] != shapes[x]:
                continue
            if not same_index_reads(s.value, y, s.value.type.shape):
                continue
            target = cls[y]
            clash = live_of[target] & live_of[x]
            if all(q == pos or handover(q, x, target) for q in clash):
                for m in members[x]:
                    cls[m] = target
                members[target] |= members.pop(x)
                live_of[target] |= live_of.pop(x)
                break

    # first-fit offsets, biggest classes first
    placed: list[tuple[int, int, set[int]]] = []
    offsets: dict[str, int] = {}
    for c in sorted(members, key=lambda c: (-sizes[c], c)):
        size = max(sizes[m] for m in members[c])
        live = live_of[c]
        offset = 0
        for start, nbytes, other in sorted(placed):
            if live & other and offset + size > start and start + nbytes > offset:
                offset = max(offset, start + nbytes)
        # a second pass catches blocks passed over before the offset moved
        moved = True
        while moved:
            moved = False
            for start, nbytes, other in placed:
                if live & other and offset < start + nbytes and start < offset + size:
                    offset = start + nbytes
                    moved = True
        offsets[c] = offset
        placed.append((offset, size, live))
    total = max((o + max(sizes[m] for m in members[c]) for c, o in offsets.items()), default=0)
    return cls, offsets, total


def _reads(e) -> set[str]:
    if isinstance(e, T.Var):
        return {e.name}
    out: set[str] = set()
    for c in T.children(e):
        out |= _reads(c)
    return out
