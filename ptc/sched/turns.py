"""How the instances of a role share the EU over time: in lockstep, or taking turns.

Two consumer warpgroups that run the same loop free-running wait for the same loads and
so reach their tensor-core work and their CUDA-core work together: the warp schedulers
interleave them, each unit's work of both finishes at about the same time, and while both
are busy with CUDA-core work (attention's softmax) the tensor cores idle. The cost model
therefore times such instances in lockstep, as one process doing the whole tile's work.

FlashAttention-3's ping-pong orders them instead (a role with `pingpong`): an instance
takes its turn before the first tensor-core step of each iteration of the pipelined loop
and hands it to the next instance once it has issued its tensor-core steps up to its first
CUDA-core step, so one warpgroup's softmax runs under the other's GEMMs. Instance 0 holds
the first turn. `turns` says where, for the cost model and the lowering alike (named
barriers on sm90: ptc.lower.specialized).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from ..devices.model import UnitKind
from .plan import Barrier, LoopBlock, Plan, Role, Step
from .unroll import Exec


@dataclass(frozen=True)
class Turns:
    loop: str        # the pipelined loop
    take: str        # the task before which an instance waits for its turn
    handover: str    # the task after whose issue it hands the turn on


def turns(role: Role, pipelined: str, unit_kind: Callable[[str], UnitKind]) -> Turns | str:
    """Where the instances of `role` take and hand over their turns in loop `pipelined`,
    or why they cannot (`unit_kind`: a unit's name -> its kind, mma | simt | copy ...)."""
    if role.instances < 2:
        return f"role {role.name} has one instance: nothing to take turns with"
    block = _loop(role.body, pipelined)
    if block is None:
        return f"role {role.name} does not run the pipelined loop {pipelined or '-'}"
    steps = [s for s in block.body if isinstance(s, Step) and not s.is_sync]
    first = next((i for i, s in enumerate(steps) if unit_kind(s.unit) == UnitKind.MMA), None)
    if first is None:
        return f"loop {pipelined} has no tensor-core step to take turns at"
    later = next((i for i in range(first, len(steps))
                  if unit_kind(steps[i].unit) == UnitKind.SIMT), None)
    if later is None:
        return (f"no CUDA-core work follows the tensor-core steps of loop {pipelined}: "
                "there is nothing for the other warpgroup's GEMMs to hide")
    handover = max(i for i in range(first, later) if unit_kind(steps[i].unit) == UnitKind.MMA)
    return Turns(pipelined, steps[first].task, steps[handover].task)


def turn_barrier(role: str, instance: int) -> str:
    return f"turn:{role}:{instance}"


@dataclass(frozen=True)
class Timed:
    """The processes the cost model runs for a plan."""

    procs: dict[tuple[str, int], list[Exec]]
    barriers: dict[str, Barrier]
    share: dict[str, int]      # role -> instances a step's work is divided over
    weight: dict[str, int]     # role -> arrivals one arrive of its process stands for
    # turn barriers (kind "turn") are handed over when the step is issued, not completed


def timed(plan: Plan, procs: dict[tuple[str, int], list[Exec]],
          unit_kind: Callable[[str], str]) -> Timed:
    """Instances of a ping-pong role as separate processes with their turn barriers;
    those of any other role merged into one process in lockstep (`procs` from unroll)."""
    out: dict[tuple[str, int], list[Exec]] = {}
    barriers = {b.name: b for b in plan.barriers}
    share, weight = {}, {}
    for r in plan.roles:
        if r.instances == 1 or not r.pingpong:
            out[(r.name, 0)] = procs[(r.name, 0)]
            share[r.name], weight[r.name] = 1, r.instances
            continue
        t = turns(r, plan.pipelined, unit_kind)
        if isinstance(t, str):
            raise ValueError(f"plan {plan.kernel}: {t}")
        share[r.name], weight[r.name] = r.instances, 1
        for i in range(r.instances):
            mine, nxt = turn_barrier(r.name, i), turn_barrier(r.name, (i + 1) % r.instances)
            # instance 0 holds the first turn: its barrier starts with one phase complete
            barriers[mine] = Barrier(mine, "", "turn", 1, int(i == 0))
            out[(r.name, i)] = [_with_turns(e, t, mine, nxt) for e in procs[(r.name, i)]]
    return Timed(out, barriers, share, weight)


def _with_turns(e: Exec, t: Turns, mine: str, nxt: str) -> Exec:
    if t.loop not in dict(e.iters):
        return e
    step = e.step
    if step.offset and dict(e.iters)[t.loop] < step.offset:
        return e        # a rotated loop's prologue: before the turns begin
    if step.task == t.take:
        step = replace(step, waits=step.waits + (mine,))
    if step.task == t.handover:
        step = replace(step, arrives=step.arrives + (nxt,))
    return replace(e, step=step)


def _loop(items, var: str) -> LoopBlock | None:
    for it in items:
        if isinstance(it, LoopBlock):
            if it.var == var:
                return it
            found = _loop(it.body, var)
            if found is not None:
                return found
    return None
