"""Loop-invariant mma operands into registers.

An mma inside a loop that reads a shared-memory tile loaded before the loop (flash
attention's Q) would read the same fragments every iteration. When the plan waits for
that tile before the loop and the registers allow, the tile is read into the operand's
fragment layout once, just before the loop (`LoadFragments`), and the mma takes it from
registers.
"""
from __future__ import annotations

from dataclasses import replace

from . import ir


def _copied(ops) -> set[str]:
    return {op.buffer for op in ir.walk(ops) if isinstance(op, ir.CopyTile)}


def _waited(ops) -> set[str]:
    out: set[str] = set()
    for op in ops:
        if isinstance(op, ir.PlanWait):
            out |= set(op.buffers)
    return out


def hoist_operands(body: tuple, builder) -> tuple:
    return tuple(_hoist(list(body), builder, []))


def _hoist(ops: list, builder, before: list) -> list:
    out: list = []
    for i, op in enumerate(ops):
        if not isinstance(op, ir.Loop):
            out.append(op)
            continue
        prior = before + ops[:i]
        ready = _waited(prior) & _copied(prior)
        inner_copies = _copied(op.fill + op.body)
        loads: list = []
        body = _replace_operands(op.body, builder, ready - inner_copies, loads)
        out.extend(loads)
        op = replace(op, body=tuple(_hoist(list(body), builder, prior)))
        out.append(op)
    return out


def _replace_operands(ops, builder, ready: set[str], loads: list):
    """ops with the mma operands read from `ready` buffers taken from fragments loaded by
    `loads` (appended), where the register budget allows."""
    out = []
    for op in ops:
        if isinstance(op, ir.Loop):
            out.append(replace(op, body=tuple(_replace_operands(op.body, builder, ready, loads))))
            continue
        if isinstance(op, ir.Mma):
            a = _fragment(op, "a", op.a, builder, ready, loads)
            b = _fragment(op, "b", op.b, builder, ready, loads)
            op = replace(op, a=a, b=b)
        out.append(op)
    return out


def _fragment(op: ir.Mma, which: str, operand: ir.Operand, builder, ready, loads) -> ir.Operand:
    if operand.in_registers or op.dtype not in ("f16", "bf16"):
        return operand
    home = builder.values.get(operand.value)
    if not isinstance(home, ir.InShared) or builder.plan.buffer(home.buffer).name not in ready:
        return operand
    name = f"{operand.value}@{op.task}"
    if name not in builder.values:
        c, a_lay, b_lay = builder.low.mma_layouts[op.task]
        # `which` is the instruction's operand: a swapped product's A is the statement's b
        lay = a_lay if (which == "a") != op.swapped else b_lay
        words = lay.size // 2
        if not builder.register_room(words):
            return operand
        shape = lay.shape
        builder.values[name] = ir.RegTile(
            "f_" + operand.value.lstrip("%") + "_" + op.task.removeprefix("mma_"),
            op.dtype, shape, builder.layout_name(lay))
        builder.reserve_registers(words)
        loads.append(ir.LoadFragments(name, operand.value, which, operand.transposed))
    return ir.Operand(name, True, False)
