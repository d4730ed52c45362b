"""The lowering's named passes, in order (`ptc compile --emit lowered --after PASS`): what
each builder does to its ops after building them from the plan's steps.

A lowering asked for a pass keeps its ops as that pass left them, and returns the finished
kernel with those ops in place of the final ones: the launch, buffers, values and costs
stay the finished kernel's, so the dump shows exactly what the later passes change. A
lowering asked for none (the search's: hundreds per kernel) keeps nothing.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from . import ir
from .capabilities import LoweringError

# single-role plans (ptc.lower.lowering): the ops of the plan's steps; operand fragments
# hoisted out of loops; a shared tile several computations read, read into registers once;
# barriers and waits placed; waits for register-staged copies; copies' addresses computed
# before their loop
SINGLE_ROLE = ("steps", "hoist_fragments", "shared_reads_once", "place_sync", "staged_waits",
               "hoist_copies")
# warp-specialized plans (ptc.lower.specialized), the consumer's ops: a shared tile
# several computations read, read into registers once; placed barriers and waits; named
# barriers per consumer; one wgmma group in flight; wgmmas kept in flight across
# independent work; accumulators pinned; ping-pong turns at the tensor cores
WARP_SPECIALIZED = ("steps", "shared_reads_once", "place_sync", "named_barriers",
                    "one_group_in_flight", "overlapped_wgmmas", "pin_accumulators",
                    "take_turns")
PASSES = tuple(dict.fromkeys(SINGLE_ROLE + WARP_SPECIALIZED))


@dataclass
class PassTrace:
    """Which pass's ops to keep (None: none), and the passes that ran."""

    wanted: str | None = None
    ran: list[str] = field(default_factory=list)
    ops: tuple | None = None

    def after(self, name: str, ops: tuple) -> tuple:
        """Record that pass `name` left `ops`; returns them, for chaining."""
        self.ran.append(name)
        if name == self.wanted:
            self.ops = ops
        return ops

    def kernel(self, finished: ir.LoweredKernel, role: str | None = None) -> ir.LoweredKernel:
        """`finished` with the kept ops: its body, or the body of its role `role`."""
        if self.wanted is None:
            return finished
        if self.ops is None:
            raise LoweringError(f"no pass {self.wanted} ran in the {finished.plan_style} "
                                f"lowering of this plan; its passes: {', '.join(self.ran)}")
        if role is None:
            return replace(finished, body=self.ops)
        body = tuple(replace(op, roles=tuple(replace(r, body=self.ops) if r.name == role
                                             else r for r in op.roles))
                     if isinstance(op, ir.Specialized) else op for op in finished.body)
        return replace(finished, body=body)
