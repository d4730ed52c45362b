"""The resources of a lowered kernel, checked on what gets built: its threads, its shared
memory within the launch and the device, buffers that share bytes never live at once, and
mbarriers inside the launch's shared memory and apart from every buffer.

The plan's verifier (ptc.sched.verify) checks the plan's buffers against the device; the
lowering then places them, reusing the bytes of buffers whose lives do not meet
(ptc.lower.memory), and adds its own (staging, scratch, one copy per consumer
warpgroup). This is the check of that placement, on the finished ops: every lowering
runs it (ptc.lower.stage), so a kernel whose buffers overlap is refused, not built.
"""
from __future__ import annotations

from itertools import combinations

from ..devices import Device
from ..sched.verify_resources import MBARRIER_BYTES
from . import ir
from .memory import live_ranges, lives_meet


def resource_problems(low: ir.LoweredKernel, device: Device) -> list[str]:
    """What is wrong with `low`'s threads and shared memory on `device` (empty: nothing)."""
    res = device.resources
    L = low.launch
    out = []
    if L.threads != L.warps * res.warp_size:
        out.append(f"{L.threads} threads are not {L.warps} warps of {res.warp_size}")
    if L.threads > res.max_threads_per_block:
        out.append(f"{L.threads} threads, over {device.name}'s {res.max_threads_per_block} "
                   "per block")
    if L.dynamic_smem > res.shared_memory_bytes:
        out.append(f"{L.dynamic_smem} bytes of {device.terms.shared}, over {device.name}'s "
                   f"{res.shared_memory_bytes} per block")
    regions = [(b.name, b.offset, b.end) for b in low.buffers]
    regions += [(f"mbarriers {s.name}", s.offset, s.offset + MBARRIER_BYTES * s.slots)
                for s in _mbarrier_sets(low.body)]
    out += [f"{name} at {lo}..{hi} lies outside the launch's {L.dynamic_smem} bytes"
            for name, lo, hi in regions if lo < 0 or hi > L.dynamic_smem]
    return out + _shared_bytes_in_use_twice(low, regions)


def _mbarrier_sets(body) -> list[ir.MbarrierSet]:
    return [s for op in body if isinstance(op, ir.InitBarriers) for s in op.barriers]


def _shared_bytes_in_use_twice(low: ir.LoweredKernel, regions) -> list[str]:
    """Regions that share bytes while both are live. A single-role kernel's buffers live
    from the first op that touches them to the last (a loop's whole length); a
    warp-specialized kernel's roles run at once, so its buffers and mbarriers are live
    throughout."""
    single_role = not any(isinstance(op, ir.Specialized) for op in low.body)
    ranges = live_ranges(low.body, dict(low.values)) if single_role else {}

    def live(name: str) -> tuple[int, int] | None:
        return ranges.get(name, (0, 0)) if single_role else None

    out = []
    for (a, alo, ahi), (b, blo, bhi) in combinations(regions, 2):
        if alo >= bhi or blo >= ahi:
            continue                         # no byte in common
        la, lb = live(a), live(b)
        if la is not None and lb is not None and not lives_meet(la, lb):
            continue                         # the bytes are reused: their lives do not meet
        out.append(f"{a} ({alo}..{ahi}) and {b} ({blo}..{bhi}) share bytes while both "
                   "are live")
    return out
