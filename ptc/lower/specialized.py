"""Warp-specialized plans (sm90a): a producer warpgroup issuing TMA loads into the plan's
rings and consumer warpgroups multiplying with wgmma (docs/lowering.md, docs/sm90.md).

    lowered = lower_specialized(plan, graph, device, capabilities)

The roles, their rows and wgmma tilings are checked in ptc.lower.specialized_plan, the
values' homes and the consumer's ops built in ptc.lower.specialized_ops, the producer's
in ptc.lower.specialized_producer, the consumer's ops rewritten once placed in
ptc.lower.specialized_passes; here, the kernel around both roles.

Decided here, once:
- the plan's barriers become mbarriers, one per ring slot: a `full` barrier takes the
  producer's one arrive.expect_tx plus the TMA transaction bytes -- or, where the
  producer's threads copy the tile (no TMA box takes it, or the element-wise variant),
  one arrive per producer thread, each after its own copies: a thread's arrive releases
  what it wrote to the consumers that wait (compute-sanitizer's racecheck sees no order
  through a named barrier and another thread's arrive) --, an `empty` barrier one
  arrival per consumer warpgroup (the plan's arrival counts);
- shared memory: every tile the plan loads by TMA in the layout TMA writes (`tma_layout`:
  128-byte column panels, swizzled), the others (scalars, odd rows: ptc.lower.tma says
  which) in ptc's own layout, copied by the producer warpgroup's threads; 1024-aligned,
  rings first, then the consumers' scratch (one copy per consumer warpgroup), then the
  mbarriers;
- a tensor map per TMA load (its tensor, one panel's box), encoded before the launch;
- the consumers' values in registers, in the wgmma accumulator and A-fragment layouts
  and what follows from them (ptc.lower.assign). With several consumer warpgroups each
  computes its own rows of every tile of the split grid index (the mma outputs' rows):
  rows [part * R, (part + 1) * R); a plan whose consumer work is not row by row is refused;
- every wgmma with its descriptors, fenced, committed and waited for before the slots it
  reads are released (one group in flight; the pipelining is the ring's);
- named barriers among a consumer warpgroup's threads where they exchange values through
  scratch (ptc.lower.sync, as for a single role).
"""
from __future__ import annotations

from dataclasses import replace

from ..devices import Device
from ..sched.plan import Plan
from ..sched.turns import turns
from ..sema import typed as T
from ..sema.ranges import named_ranges
from ..stask.graph import STaskGraph
from . import ir
from .capabilities import Capabilities, LoweringError
from .lowering import align_up, fp8_by_cvt
from .passes import PassTrace
from .specialized_ops import SpecializedBuilder
from .specialized_passes import (named_barriers, one_group_in_flight, overlapped_wgmmas,
                                 pin_accumulators, take_turns)
from .specialized_plan import WARPGROUP, SpecializedPlan, wgmma_layouts
from .specialized_producer import Producer
from .swizzle import ALIGN
from .tiles import add, const, dim_expr


def lower_specialized(plan: Plan, graph: STaskGraph, device: Device,
                      caps: Capabilities | None,
                      trace: PassTrace | None = None) -> ir.LoweredKernel:
    spec = SpecializedPlan(plan, graph, device, caps, trace)
    return _Kernel(spec, spec.consumer_view()).build()


class _Kernel(SpecializedBuilder):
    """Both roles' ops and the kernel around them: shared memory, mbarriers, registers
    and the launch."""

    def build(self) -> ir.LoweredKernel:
        from .costs import task_costs
        from .inplace import in_place_addends
        from .registers import estimate_registers
        from .shared_once import shared_reads_once

        self.homes()
        self.per_warp = self.cuda_core_readers()
        consumer = self.spec.trace.after("steps",
                                         tuple(self.items(self.spec.consumer.body, ())))
        self.base_registers, self.reserved_registers = estimate_registers(consumer, self), 0
        consumer = self.spec.trace.after("shared_reads_once", shared_reads_once(consumer, self))
        producer = tuple(Producer(self).items(self.spec.producer.body, ()))
        placed, offset = self.placed_buffers()
        sets, offset = self.mbarrier_sets(offset, producer)
        total = self.checked_shared_memory(offset, placed)
        buffers = {b.name: b for b in placed}
        consumer = self.consumer_passes(consumer, buffers)
        self.values = in_place_addends(consumer, self.values)
        budget = self.checked_registers(consumer)
        kernel = self.lowered_kernel(producer, consumer, budget, sets, buffers, total)
        return replace(kernel, costs=task_costs(kernel, self.graph, self.device))

    # ---- shared memory -------------------------------------------------------------------
    def placed_buffers(self) -> tuple[list[ir.Buffer], int]:
        """The buffers at their offsets, rings first, then the scratch (one copy per
        consumer warpgroup); and the end of the last."""
        offset = 0
        placed = []
        rings = [b for b in self.buffers.values() if b.plan_buffer]
        scratch = [b for b in self.buffers.values() if not b.plan_buffer]
        for b in rings + scratch:
            if not b.plan_buffer:        # one copy per consumer warpgroup
                b = replace(b, slots=self.spec.parts, slot_bytes=align_up(b.slot_bytes, 16))
            offset = align_up(offset, ALIGN if b.layout is not None else 16)
            placed.append(replace(b, offset=offset))
            offset += b.bytes
        return placed, offset

    def mbarrier_sets(self, offset: int, producer: tuple) -> tuple[list[ir.MbarrierSet], int]:
        """The plan's barriers as mbarriers from `offset` on, one per ring slot; and the
        end of the last. A plan arrive is one thread's, lane 0's of each warp where CUDA
        cores read the slot, and each producer thread's where the threads copy the tile."""
        offset = align_up(offset, 8)
        sets = []
        stages = {b.name: b.stages for b in self.plan.buffers}
        threads = self.spec.producer.warps * self.device.resources.warp_size
        ops = ir.walk(producer)
        copied = {op.barrier for op in ops if isinstance(op, ir.ProducerCopy)}
        fallback = {op.barrier for op in ops if isinstance(op, ir.TmaLoad) and op.tile}
        for bar in self.plan.barriers:
            slots = stages.get(bar.buffer, 1)
            arrivals = bar.arrivals * (WARPGROUP if bar.name in self.per_warp else
                                       threads if bar.name in copied else 1)
            elementwise = bar.arrivals * threads if bar.name in fallback else 0
            sets.append(ir.MbarrierSet(bar.name, slots, arrivals, offset, elementwise))
            offset += 8 * slots
        return sets, offset

    def checked_shared_memory(self, offset: int, placed: list[ir.Buffer]) -> int:
        """The block's shared memory in bytes, refused where the device has less."""
        from .memory import over_shared_memory

        total = align_up(offset, 16)
        too_big = over_shared_memory(total, placed, self.device)
        if too_big:
            raise LoweringError(too_big)
        return total

    # ---- the consumer's ops, placed ------------------------------------------------------
    def consumer_passes(self, consumer: tuple, buffers: dict[str, ir.Buffer]) -> tuple:
        """The consumer's ops with their barriers, wgmma groups in flight, pinned
        accumulators and, for ping-pong, the turns at the tensor cores."""
        from .sync import place_sync

        after = self.spec.trace.after
        consumer = after("place_sync", place_sync(consumer, buffers, self.values))
        consumer = after("named_barriers", named_barriers(consumer))
        consumer = after("one_group_in_flight", one_group_in_flight(consumer))
        consumer = after("overlapped_wgmmas", overlapped_wgmmas(consumer, self.values))
        consumer = after("pin_accumulators", pin_accumulators(
            consumer, {op.out for op in ir.walk(consumer) if isinstance(op, ir.Wgmma)}))
        if self.spec.consumer.pingpong:
            where = turns(self.spec.consumer, self.plan.pipelined,
                          lambda unit: self.device.unit(unit).kind)
            if isinstance(where, str):
                raise LoweringError(f"ping-pong: {where}")
            consumer = after("take_turns", take_turns(consumer, where, self.spec.parts))
        return consumer

    def register_budget(self) -> int:
        """A consumer thread's registers: the plan's (setmaxnreg)."""
        return self.spec.consumer.registers

    def checked_registers(self, consumer: tuple) -> int:
        """The consumers' register budget (the plan's), refused where they need more."""
        from .registers import estimate_registers

        registers = estimate_registers(consumer, self)
        budget = self.spec.consumer.registers
        if registers > budget:
            raise LoweringError(f"the consumers need ~{registers} registers per thread, over "
                                f"the plan's {budget}")
        return budget

    # ---- the kernel ----------------------------------------------------------------------
    def lowered_kernel(self, producer: tuple, consumer: tuple, budget: int,
               sets: list[ir.MbarrierSet], buffers: dict[str, ir.Buffer],
               total: int) -> ir.LoweredKernel:
        """The kernel of both roles: its barriers' initialization, the roles and the
        launch (without its costs)."""
        res = self.device.resources
        threads = sum(r.warps * r.instances for r in self.plan.roles) * res.warp_size
        launch_regs = min(res.max_registers_per_thread,
                          res.registers // threads // 8 * 8)
        roles = (ir.Role("producer", 0, 1, self.spec.producer.registers, producer,
                         issuer=True),
                 ir.Role("consumer", 1, self.spec.parts, budget, consumer, self.spec.split,
                         self.spec.rows))
        body = (ir.InitBarriers(tuple(sets)), ir.Specialized(launch_regs, roles))
        alignment = tuple(dict.fromkeys(self.alignment))
        # every thread starts with the launch's registers; setmaxnreg moves them between
        # the roles within the block's allocation
        blocks = res.resident_blocks(threads, launch_regs * threads, total)
        launch = ir.Launch(self.grid(), threads, threads // res.warp_size, total, launch_regs,
                           blocks, self.plan.launch.persistent, min_blocks_elementwise=1,
                           min_blocks=1)
        dev = self.device
        return ir.LoweredKernel(
            self.low.kernel.name, dev.name, dev.backend, self.plan.style, launch,
            tuple(self.layouts.values()), tuple(buffers.values()), tuple(self.values.items()),
            body, tuple(self.units.items()), (), alignment, tuple(self.low.notes),
            tuple(self.maps.values()), self.spec.caps.arith16() if self.spec.caps else (),
            tuple(named_ranges(self.spec.graph.kernel).items()),
            fp8_by_cvt(dev, self.values.values(), buffers.values()))

    def grid(self) -> tuple:
        out = []
        for a in self.graph.grid.axes:
            d = dim_expr(self.low.kernel, a.dim)
            if a.size is None:
                count = d
            else:
                size = self.spec.tiles[a.size] if isinstance(a.size, str) else a.size
                count = T.Elementwise("floordiv", (add(d, const(size - 1)), const(size)),
                                      T.TileType("i32"))
            out.append((a.var, count))
        return tuple(out)


__all__ = ["lower_specialized", "wgmma_layouts"]
