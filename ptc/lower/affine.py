"""How an index expression moves from one trip of a loop to the next, where it is affine in
the loop's index: what a copy's origin and extents add each trip (ptc.lower.hoist_copies)."""
from __future__ import annotations

from ..sema import typed as T


def mentions(e: T.TExpr, var: str) -> bool:
    """Whether `e` reads loop (or grid) index `var`."""
    if isinstance(e, T.Scalar):
        return e.kind == "index" and e.name == var
    return any(mentions(c, var) for c in T.children(e))


def step(e: T.TExpr, var: str) -> T.TExpr | None:
    """e at var + 1 less e at var, where that does not depend on var (e is a sum of terms
    each var times an invariant, or invariant); None where it does."""
    if not mentions(e, var):
        return _int(0)
    if isinstance(e, T.Scalar):
        return _int(1)
    if isinstance(e, T.Elementwise) and e.op in ("add", "sub"):
        a, b = (step(x, var) for x in e.args)
        if a is None or b is None:
            return None
        return _sum(e.op, a, b, e.type)
    if isinstance(e, T.Elementwise) and e.op == "mul":
        x, y = e.args
        if not mentions(y, var):
            s = step(x, var)
            return None if s is None else _product(s, y, e.type)
        if not mentions(x, var):
            s = step(y, var)
            return None if s is None else _product(x, s, e.type)
    return None


def standing(s: T.TExpr) -> bool:
    """Whether a step (of `step`) is zero: what it steps stays where it is."""
    return _is(s, 0)


def _int(value: int) -> T.Const:
    return T.Const(value, T.TileType("i32", ()))


def _is(e: T.TExpr, value: int) -> bool:
    return isinstance(e, T.Const) and e.value == value


def _sum(op: str, a: T.TExpr, b: T.TExpr, type_: T.TileType) -> T.TExpr:
    if isinstance(a, T.Const) and isinstance(b, T.Const):
        return T.Const(a.value + b.value if op == "add" else a.value - b.value, type_)
    if _is(b, 0):
        return a
    if _is(a, 0) and op == "add":
        return b
    return T.Elementwise(op, (a, b), type_)


def _product(a: T.TExpr, b: T.TExpr, type_: T.TileType) -> T.TExpr:
    if isinstance(a, T.Const) and isinstance(b, T.Const):
        return T.Const(a.value * b.value, type_)
    if _is(a, 0) or _is(b, 0):
        return T.Const(0, type_)
    if _is(a, 1):
        return b
    if _is(b, 1):
        return a
    return T.Elementwise("mul", (a, b), type_)
