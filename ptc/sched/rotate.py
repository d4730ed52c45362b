"""Intra-warpgroup overlap: the pipelined loop rotated by one iteration (FlashAttention-3).

A loop body `M1 C M2` -- tensor-core steps, then CUDA-core work on their results, then
the tensor-core step that consumes it (attention: QK^T, softmax, PV) -- becomes
`M1@+1 M2@0 C@+1`: while the role is at iteration n it issues QK^T of n + 1 and PV of n
back to back, then runs the softmax of n + 1 under PV(n). Offsets are the plan's own
software pipelining (ptc.sched.unroll runs the loop from -1 so iteration 0's M1 and C come
first); the cost model sees the overlap through what each step waits for
(ptc.sched.results), and the lowering builds it with a second wgmma group in flight.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from ..devices.model import UnitKind
from .plan import LoopBlock, Plan, Step


def rotated(plan: Plan, role: str, unit_kind: Callable[[str], UnitKind]) -> Plan | str:
    """`plan` with `role`'s pipelined loop rotated, or why it cannot be."""
    (r,) = [x for x in plan.roles if x.name == role]
    body = _rotate_items(r.body, plan.pipelined, unit_kind)
    if isinstance(body, str):
        return body
    roles = tuple(replace(x, body=body) if x.name == role else x for x in plan.roles)
    return replace(plan, roles=roles)


def _rotate_items(items, loop: str, unit_kind):
    out, found = [], None
    for it in items:
        if isinstance(it, LoopBlock) and it.var == loop:
            found = _rotate_body(it, unit_kind)
            if isinstance(found, str):
                return found
            out.append(found)
        elif isinstance(it, LoopBlock):
            inner = _rotate_items(it.body, loop, unit_kind)
            if isinstance(inner, str):
                out.append(it)
                continue
            found = True
            out.append(replace(it, body=inner))
        else:
            out.append(it)
    if found is None:
        return f"the role does not run the pipelined loop {loop or '-'}"
    return tuple(out)


def _rotate_body(block: LoopBlock, unit_kind) -> LoopBlock | str:
    if any(not isinstance(i, Step) for i in block.body):
        return f"loop {block.var} has a loop inside: only a flat body is rotated"
    steps: list[Step] = list(block.body)
    if any(s.offset for s in steps):
        return f"loop {block.var} is pipelined already"
    kinds = [None if s.is_sync else unit_kind(s.unit) for s in steps]     # None: no unit
    mma = [i for i, k in enumerate(kinds) if k == UnitKind.MMA]
    simt = [i for i, k in enumerate(kinds) if k == UnitKind.SIMT]
    if len(mma) < 2 or not simt:
        return (f"loop {block.var} needs tensor-core steps, CUDA-core work on their results "
                "and a tensor-core step after it to overlap")
    last = mma[-1]
    if any(i > last for i in simt) or any(k not in (UnitKind.MMA, UnitKind.SIMT) for k in kinds):
        return (f"loop {block.var} does CUDA-core work after its last tensor-core step (or "
                "other units' work): nothing would follow the overlap")
    first_simt = simt[0]
    head = steps[:first_simt]               # M1: the tensor-core steps before the softmax
    if any(unit_kind(s.unit) != UnitKind.MMA for s in head) or not head:
        return f"loop {block.var} does not start with tensor-core steps"
    middle = steps[first_simt:last]         # C: CUDA-core work (and nothing else)
    if any(unit_kind(s.unit) != UnitKind.SIMT for s in middle):
        return f"loop {block.var} has tensor-core steps between its CUDA-core steps"
    body = ([replace(s, offset=1) for s in head] + [steps[last]]
            + [replace(s, offset=1) for s in middle])
    return replace(block, body=tuple(body))
