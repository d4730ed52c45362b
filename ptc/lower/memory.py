"""Shared-memory placement: every buffer's live range over the ops, and byte offsets such
that buffers whose lives meet never share bytes.

A buffer is live from the first op that touches it to the last; a buffer touched inside a
loop is live for the whole loop (its fill included): a ring's slots are rewritten every
iteration and a tile loaded before the loop is read in all of them. Offsets are first-fit,
largest buffers first, each aligned as its layout needs (1024 bytes for swizzled tiles,
so the XOR pattern lines up with the banks).
"""
from __future__ import annotations

from dataclasses import replace

from . import ir
from .swizzle import ALIGN
from .sync import op_reads, op_scratch


def _touches(op, values: dict) -> set[str]:
    out: set[str] = set()
    if isinstance(op, ir.CopyTile):
        out.add(op.buffer)
    for name in op_reads(op):
        home = values.get(name)
        if isinstance(home, ir.InShared):
            out.add(home.buffer)
    for buffer, _ in op_scratch(op):
        out.add(buffer)
    return out


def live_ranges(body, values: dict) -> dict[str, tuple[int, int]]:
    ranges: dict[str, tuple[int, int]] = {}
    pos = [0]

    def note(name: str, lo: int, hi: int) -> None:
        a, b = ranges.get(name, (lo, hi))
        ranges[name] = (min(a, lo), max(b, hi))

    def walk(ops) -> None:
        for op in ops:
            if isinstance(op, ir.Loop):
                start = pos[0]
                walk(op.fill)
                before = dict(ranges)
                walk(op.body)
                end = pos[0]
                for name, (lo, hi) in ranges.items():
                    if before.get(name) != (lo, hi):     # touched inside the loop
                        note(name, min(lo, start), end)
                continue
            for name in _touches(op, values):
                note(name, pos[0], pos[0])
            pos[0] += 1

    walk(body)
    return ranges


def place_buffers(body, buffers: list[ir.Buffer], values: dict) -> tuple[list[ir.Buffer], int]:
    """(buffers with offsets and live ranges, total bytes)."""
    ranges = live_ranges(body, values)
    placed: list[ir.Buffer] = []
    for b in sorted(buffers, key=lambda b: (-b.bytes, b.name)):
        live = ranges.get(b.name, (0, 0))
        align = ALIGN if b.layout is not None and b.layout.swizzle == "xor" else 16
        offset = 0
        moved = True
        while moved:
            moved = False
            for other in placed:
                if lives_meet(live, other.live) and offset < other.end and other.offset < offset + b.bytes:
                    offset = _align(other.end, align)
                    moved = True
        placed.append(replace(b, offset=_align(offset, align), live=live))
    total = max((b.end for b in placed), default=0)
    order = {b.name: i for i, b in enumerate(buffers)}
    return sorted(placed, key=lambda b: order[b.name]), _align(total, 16)


def over_shared_memory(total: int, buffers, device) -> str | None:
    """Why `total` bytes of shared memory (the plan's rings plus the lowering's staging)
    cannot be launched on `device`, or None. The plan's verifier checks its own buffers;
    staging the lowering adds (wgmma operands computed in registers, reductions' scratch,
    one copy per consumer warpgroup) is checked here, so no kernel is built that the
    device would refuse to launch."""
    limit = device.resources.shared_memory_bytes
    if total <= limit:
        return None
    rings = sum(b.bytes for b in buffers if b.plan_buffer)
    staging = [b for b in buffers if not b.plan_buffer]
    return (f"the kernel needs {total} bytes of {device.terms.shared}: the plan's buffers {rings}, "
            f"and {sum(b.bytes for b in staging)} for {len(staging)} staging buffer(s) the "
            f"lowering adds, over "
            f"{device.name}'s {limit} per block")


def lives_meet(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Whether two live ranges (first and last op position) share an op."""
    return a[0] <= b[1] and b[0] <= a[1]


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a
