"""The plan's program, flattened for lowering: every statement of the role in program
order, with its task and the loops around it, and reductions lifted out of expressions.

    stmts = flatten(plan, graph)      # [Stmt], in the order the role runs them

A reduction nested in an expression (`exp(x - rowmax(x)[:, None])`) becomes a statement
of its own that defines a temporary (`%r0 = max(x, axis=1)`), placed just before, so
that every later pass sees reductions only at the top of a statement.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..sched.plan import LoopBlock, Plan, Step
from ..sema import typed as T
from ..stask.graph import STask, STaskGraph, TaskKind, TaskOp


@dataclass(frozen=True)
class Stmt:
    task: str
    kind: TaskOp                 # its task's op
    stmt: T.Let | T.Store
    loops: tuple[str, ...]       # enclosing loops, outermost first
    position: int


def mma_parts(e: T.TExpr) -> tuple[T.TExpr | None, T.MatMul]:
    """(accumulator, product) of an mma statement's value, an MmaAccumulate (the product
    as a MatMul of its operands, which is how the layouts and tilings read it)."""
    if isinstance(e, T.MmaAccumulate):
        return e.acc, T.MatMul(e.a, e.b, e.type)
    raise ValueError(f"not an mma statement: {e}")


def plan_order(plan: Plan, role: str | None = None) -> list[Step]:
    """A role's steps (default: the first role's) in program order (loop blocks walked in
    place)."""
    out: list[Step] = []

    def walk(items) -> None:
        for it in items:
            if isinstance(it, LoopBlock):
                walk(it.body)
            else:
                out.append(it)
    chosen = plan.roles[0] if role is None else next(r for r in plan.roles if r.name == role)
    walk(chosen.body)
    return out


def lift_reductions(let: T.Let, fresh) -> list[T.Let]:
    """The Let with its nested reductions lifted into temporaries, innermost first."""
    pre: list[T.Let] = []

    def visit(e: T.TExpr, top: bool) -> T.TExpr:
        e = T.map_children(e, lambda c: visit(c, False))
        if isinstance(e, T.Reduce) and not top:
            name = fresh()
            pre.append(T.Let(name, e, let.span))
            return T.Var(name, e.type)
        return e

    value = visit(let.value, True)
    return pre + [replace(let, value=value)]


def flatten(plan: Plan, graph: STaskGraph, role: str | None = None) -> list[Stmt]:
    tasks: dict[str, STask] = {t.name: t for t in graph.tasks}
    out: list[Stmt] = []
    counter = [0]

    def fresh() -> str:
        counter[0] += 1
        return f"%r{counter[0]}"

    for step in plan_order(plan, role):
        if step.is_sync:
            continue
        t = tasks[step.task]
        loops = graph.region_path(t.region)
        simt = t.kind == TaskKind.SIMT
        for s in t.stmts:
            parts = lift_reductions(s, fresh) if simt and isinstance(s, T.Let) else [s]
            for p in parts:
                out.append(Stmt(t.name, TaskOp.SIMT if simt else t.op, p, loops, len(out)))
    return out


def reads(e) -> list[str]:
    """Var names an expression reads, in order, with repeats."""
    if isinstance(e, T.Var):
        return [e.name]
    out: list[str] = []
    for c in T.children(e):
        out += reads(c)
    return out
