"""The one canonical text form of a typed program (`ptc compile --emit typed`).

Each binding shows its type; expressions print as nested operations, loads with the tile
each index selects (`A[i:BM, k:BK]`), so a reader sees every shape decision sema made.
"""
from __future__ import annotations

from . import typed as T


def print_program(program: T.Program) -> str:
    return "\n".join(print_kernel(k) for k in program.kernels)


def print_kernel(k: T.TypedKernel) -> str:
    ins = ", ".join(str(p) for p in k.inputs)
    outs = ", ".join(str(p) for p in k.outputs)
    lines = [f"kernel {k.name}({ins}) -> ({outs})"]
    dims = []
    for d in k.dims:
        text = d.name
        if d.static is not None:
            text += f"={d.static} static"
        elif d.default is not None:
            text += f"={d.default} runtime"
        else:
            text += " runtime"
        dims.append(text)
    lines.append("  dims " + ", ".join(dims))
    if k.tiles:
        lines.append("  tiles " + ", ".join(
            f"{t.name} in [{', '.join(map(str, t.choices))}]"
            + (" (implicit)" if t.implicit else "") for t in k.tiles))
    for grid in k.body:
        _stmt(grid, 1, lines)
    return "\n".join(lines) + "\n"


def _axis(a: T.GridAxis) -> str:
    return f"{a.var}: {a.size} of {a.dim}" if a.size is not None else f"{a.var} of {a.dim}"


def _stmt(s: T.TStmt, depth: int, out: list[str]) -> None:
    pad = "  " * depth
    if isinstance(s, T.Grid):
        out.append(f"{pad}parallel {', '.join(_axis(a) for a in s.axes)}")
        for b in s.body:
            _stmt(b, depth + 1, out)
    elif isinstance(s, T.Loop):
        head = f"{pad}for {_axis(s.axis)}"
        if s.until is not None:
            head += f" until {expr(s.until)}"
        if s.carried:
            head += f"  carries {', '.join(s.carried)}"
        out.append(head)
        for b in s.body:
            _stmt(b, depth + 1, out)
    elif isinstance(s, T.Let):
        out.append(f"{pad}{s.name}: {s.value.type} = {expr(s.value)}")
    elif isinstance(s, T.Store):
        verb = "atomic_add" if s.atomic else "store"
        out.append(f"{pad}{verb} {s.tensor}[{_index(s.index)}] <- {expr(s.value)}")
    else:
        raise AssertionError(s)


def _index(items) -> str:
    parts = []
    for it in items:
        if isinstance(it, T.RepeatRows):      # the row form's rows, repeated
            how = "repeat_each" if it.each else "repeat"
            parts.append(f"{how}({_index((it.rows,))}, {it.times})")
        elif isinstance(it, T.TileSlice):
            step = "" if it.stride == 1 else f"*{it.stride}"
            parts.append(f"{it.var}:{it.size}{step}" if it.offset is None
                         else f"{it.var}:{it.size}{step}+{expr(it.offset)}")
        elif isinstance(it, T.WholeDim):
            parts.append(f":{it.extent}")
        elif isinstance(it, T.Gather):
            parts.append(f"gather({expr(it.index)})")
        else:
            parts.append(expr(it.index))
    return ", ".join(parts)


def _const(c: T.Const) -> str:
    v = c.value
    if isinstance(v, float):
        if v == float("inf"):
            text = "inf"
        elif v == float("-inf"):
            text = "-inf"
        else:
            text = repr(v)
    else:
        text = str(v)
    return f"{text}:{c.type.dtype}"


def expr(e: T.TExpr) -> str:
    if isinstance(e, T.Const):
        return _const(e)
    if isinstance(e, (T.Var, T.Scalar)):
        return e.name
    if isinstance(e, T.Load):
        pad = "" if e.pad == 0.0 else f", pad={e.pad}"
        return f"load({e.tensor}[{_index(e.index)}]{pad})"
    if isinstance(e, T.Elementwise):
        return f"{e.op}({', '.join(expr(a) for a in e.args)})"
    if isinstance(e, T.Reduce):
        return f"{e.op}({expr(e.arg)}, axis={e.axis})"
    if isinstance(e, T.MatMul):
        return f"mma({expr(e.lhs)}, {expr(e.rhs)})"
    if isinstance(e, T.MmaAccumulate):
        if e.acc is None:
            return f"mma({expr(e.a)}, {expr(e.b)})"
        return f"mma_acc({expr(e.acc)}, {expr(e.a)}, {expr(e.b)})"
    if isinstance(e, T.Transpose):
        return f"transpose({expr(e.arg)})"
    if isinstance(e, T.Rows):
        return f"rows({expr(e.arg)})"
    if isinstance(e, T.Convert):
        return f"convert({expr(e.arg)}, {e.type.dtype})"
    if isinstance(e, T.Expand):
        return f"expand({expr(e.arg)}, {e.type})"
    if isinstance(e, T.Fill):
        return f"fill({expr(e.value)}, {e.type})"
    if isinstance(e, T.IndexVec):
        return f"index({e.var})" if e.var is not None else f"arange({e.size})"
    if isinstance(e, T.ElementAt):
        at = f"{e.tensor}.at({expr(e.offset)})"     # the element, counted from the start
        return at if e.valid is None else f"({at} if {expr(e.valid)} else {e.pad})"
    raise AssertionError(e)
