"""Copies staged in registers (CDNA's register-staged pipelining, CopyTile.staged): a staged
copy goes global -> registers when issued and lands in shared memory at a later wait;
`staged_waits` names, on each wait, the staged copies it lands (WaitGroups.lands).
"""
from __future__ import annotations

from dataclasses import replace

from . import ir
from .capabilities import LoweringError
from .rewrite import rewrite


def staged_waits(body) -> tuple:
    """`body` with each wait naming the staged copies it lands (WaitGroups.lands).

    A staged copy stays in its task's registers until a wait lands it: a wait for all but
    the `pending` newest groups lands the copies of the older groups (landing early is
    safe: a slot is free from the copy's issue on). Run in program order -- fills, two
    iterations of every loop, drains --, a wait lands every copy that may be in one of
    those groups when it runs; a task that copies again before a wait landed its last
    copy is refused: its registers would be overwritten."""
    groups: list[set[str]] = []      # committed, not landed; oldest first
    open_group: set[str] = set()
    lands: dict[int, set[str]] = {}

    def live() -> set[str]:
        return open_group.union(*groups)

    def run(ops) -> None:
        nonlocal groups
        for op in ops:
            if isinstance(op, ir.Loop):
                run(op.fill)
                run(op.body)
                run(op.body)
                run(op.drain)
            elif isinstance(op, ir.Iteration):
                run(op.body)
            elif isinstance(op, ir.CommitGroup):
                groups.append(set(open_group))
                open_group.clear()
            elif isinstance(op, ir.WaitGroups):
                done = groups[:len(groups) - op.pending] if op.pending else groups
                lands.setdefault(id(op), set()).update(*done)
                groups = groups[len(done):]
            elif isinstance(op, ir.CopyTile) and op.staged:
                if op.task in live():
                    raise LoweringError(f"{op.task} copies again before a wait landed its last "
                                        "copy: copies staged in registers keep one in flight")
                open_group.add(op.task)

    run(body)
    return rewrite(body, lambda op: replace(op, lands=tuple(sorted(lands[id(op)])))
                   if isinstance(op, ir.WaitGroups) and lands.get(id(op)) else op)
