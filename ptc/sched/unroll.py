"""Unrolling a plan: each role instance's steps as a flat sequence for given trip counts.

The verifier, the cost model and the plan simulator all walk this sequence, so they agree
on what a plan means. A loop block whose steps have offsets runs its iteration counter
from -max(offset) to trips-1; a step with offset d runs the task's iteration n + d when
that lies in [0, trips).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from .plan import Plan, Role, Step


@dataclass(frozen=True)
class Exec:
    role: str
    instance: int
    step: Step
    iters: tuple[tuple[str, int], ...]   # the task's iteration of every enclosing loop

    @property
    def process(self) -> tuple[str, int]:
        return (self.role, self.instance)


Trips = Callable[[str, Mapping[str, int]], int]


def fixed_trips(counts: Mapping[str, int]) -> Trips:
    return lambda var, outer: counts[var]


def unroll_role(role: Role, instance: int, trips: Trips) -> list[Exec]:
    out: list[Exec] = []

    def walk(items, iters: dict[str, int]) -> None:
        for it in items:
            if isinstance(it, Step):
                out.append(Exec(role.name, instance, it, tuple(iters.items())))
                continue
            n = trips(it.var, iters)
            direct = [s for s in it.body if isinstance(s, Step)]
            ahead = max((s.offset for s in direct), default=0)
            for i in range(-ahead if n > 0 else 0, n):
                for s in it.body:
                    if isinstance(s, Step):
                        k = i + s.offset
                        if 0 <= k < n:
                            out.append(Exec(role.name, instance, s, tuple({**iters, it.var: k}.items())))
                    elif 0 <= i:
                        walk([s], {**iters, it.var: i})

    walk(role.body, {})
    return out


def unroll(plan: Plan, trips: Trips) -> dict[tuple[str, int], list[Exec]]:
    return {(r.name, i): unroll_role(r, i, trips) for r in plan.roles for i in range(r.instances)}
