"""One rewrite of the lowered IR's nested blocks, which the lowering's passes are written
over (ptc.lower.passes): a Loop's fill, body and drain, an Iteration's body and a
Specialized op's roles are rewritten before the op itself, and an op none of whose blocks
changed stays the same object (a pass may look for one by identity)."""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from . import ir


def rewrite(ops, fn: Callable[[object], object]) -> tuple:
    """`ops` with each op replaced by `fn(op)` (an op, a tuple of ops, or None: dropped),
    its nested blocks rewritten first."""
    out: list = []
    for op in ops:
        new = fn(_inner(op, fn))
        if new is None:
            continue
        out.extend(new if isinstance(new, tuple) else (new,))
    same = len(out) == len(ops) and all(a is b for a, b in zip(out, ops))
    return ops if same and isinstance(ops, tuple) else tuple(out)


def _inner(op, fn):
    """`op` with its nested blocks rewritten (the same object where none changed)."""
    if isinstance(op, ir.Loop):
        fill, body, drain = (rewrite(b, fn) for b in (op.fill, op.body, op.drain))
        if fill is op.fill and body is op.body and drain is op.drain:
            return op
        return replace(op, fill=fill, body=body, drain=drain)
    if isinstance(op, ir.Iteration):
        body = rewrite(op.body, fn)
        return op if body is op.body else replace(op, body=body)
    if isinstance(op, ir.Specialized):
        roles = tuple(r if (b := rewrite(r.body, fn)) is r.body else replace(r, body=b)
                      for r in op.roles)
        return op if all(a is b for a, b in zip(roles, op.roles)) else replace(op, roles=roles)
    return op


__all__ = ["rewrite"]
