"""Plan verifier, group 3: resources (see ptc.sched.verify).

Shared memory, threads and registers against the device's limits and the launch.
"""
from __future__ import annotations

from ..devices import Device
from ..stask.graph import STaskGraph
from ..sema.dtypes import DTYPE_BYTES
from .plan import Plan
from .problems import Problems

MBARRIER_BYTES = 8


def barrier_bytes(plan: Plan, device: Device) -> int:
    """The shared memory the plan's mbarriers take (one per slot of the buffer each
    guards), on a device that has them."""
    if "mbarrier" not in device.features:
        return 0
    stages = {b.name: b.stages for b in plan.buffers}
    return MBARRIER_BYTES * sum(stages.get(b.buffer, 1) for b in plan.barriers)


def check_resources(plan: Plan, graph: STaskGraph, device: Device, out: Problems) -> None:
    res = device.resources
    used = sum(b.stages * b.slot_bytes for b in plan.buffers)
    mbar = barrier_bytes(plan, device)
    detail = ", ".join(f"{b.name} {b.stages} x {b.slot_bytes}" for b in plan.buffers)
    if used + mbar > res.shared_memory_bytes:
        out.add(f"{device.terms.shared}: the buffers need {used} bytes ({detail})"
                + (f" plus {mbar} for barriers" if mbar else "")
                + f", over {device.name}'s {res.shared_memory_bytes} per block")
    # launch.dynamic_smem may be less than the buffers' sum: a plan as built carries its
    # lowered kernel's, whose buffers reuse the bytes of those whose lives do not meet; the
    # lowering places the buffers and ptc.lower.verify checks that placement
    if plan.launch.dynamic_smem > res.shared_memory_bytes:
        out.add(f"launch.dynamic_smem is {plan.launch.dynamic_smem} bytes, over "
                f"{device.name}'s {res.shared_memory_bytes} per block")
    tasks = {t.name: t for t in graph.tasks}
    for b in plan.buffers:
        t = tasks.get(b.producer)
        if t is not None and all(isinstance(x, int) for x in t.shape) and t.dtype in DTYPE_BYTES:
            need = DTYPE_BYTES[t.dtype]
            for x in t.shape:
                need *= x
            if b.slot_bytes < need:
                out.add(f"buffer {b.name} has {b.slot_bytes}-byte slots, but {b.producer} "
                        f"writes {need} bytes")

    threads = sum(r.warps * r.instances for r in plan.roles) * res.warp_size
    if threads != plan.launch.threads:
        out.add(f"launch.threads is {plan.launch.threads}, but the roles have {threads} "
                "threads")
    if threads > res.max_threads_per_block:
        out.add(f"the roles need {threads} threads, over {device.name}'s "
                f"{res.max_threads_per_block} per block")
    total = 0
    for r in plan.roles:
        if r.registers > res.max_registers_per_thread:
            out.add(f"role {r.name} asks for {r.registers} registers per thread, over "
                    f"{device.name}'s {res.max_registers_per_thread}")
        total += r.warps * r.instances * res.warp_size * r.registers
    if total > res.registers:
        parts = ", ".join(f"{r.name} {r.warps * r.instances * res.warp_size} x {r.registers}"
                          for r in plan.roles)
        out.add(f"registers: the roles need {total} ({parts}), over {device.name}'s "
                f"{res.registers} per EU")
