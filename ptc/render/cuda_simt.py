"""Elementwise statements and reductions for the CUDA renderer: each statement is one
pass of the block's threads over its elements, followed by a barrier; a reduction nested
in it is computed first, into its own scratch array.
"""
from __future__ import annotations

import math

from ..sema import typed as T
from .cexpr import store_value
from .cuda_storage import nested_reductions


class SimtMixin:
    """The simt tasks of CudaRenderer."""

    def _simt(self, t) -> None:
        for s in t.stmts:
            for r in nested_reductions(s.value):
                self._reduce(r)
            self._elementwise(self.value_name(s.name), s.value)

    def _elementwise(self, target: str, e: T.TExpr) -> None:
        arr = self.arrays[target]
        shape = [self._extent(x) for x in e.type.shape]
        n = math.prod(shape)
        idx = _unflatten("e", shape)
        value = self._render_with_reductions(e, [name for name, _ in idx])
        self.emit(f"for (int e = threadIdx.x; e < {n}; e += THREADS) {{")
        self.depth += 1
        for name, expr in idx:
            self.emit(f"const int {name} = {expr};")
        self.emit(f"{arr.name}[{self._linear(arr, [i for i, _ in idx])}] = "
                  f"{store_value(value, e.type.dtype)};")
        self.depth -= 1
        self.emit("}")
        self.sync()

    def _render_with_reductions(self, e, idx: list[str]) -> str:
        """Render e for element `idx`, reading nested reductions from their arrays."""
        saved = self.exprs.render

        def render(node, idx):
            if isinstance(node, T.Reduce):
                arr = self.arrays[self.reductions[id(node)]]
                value = f"{arr.name}[{self._linear(arr, idx)}]"
                return f"ptc::f32({value})" if node.type.dtype in ("f32", "f16", "bf16") else value
            return saved(node, idx)

        self.exprs.render = render
        try:
            return render(e, idx)
        finally:
            self.exprs.render = saved

    def _reduce(self, r: T.Reduce) -> None:
        target = self.arrays[self.reductions[id(r)]]
        in_shape = [self._extent(x) for x in r.arg.type.shape]
        out_shape = in_shape[:r.axis] + in_shape[r.axis + 1:]
        n = math.prod(out_shape)
        idx = _unflatten("e", out_shape)
        names = [i for i, _ in idx]
        src = names[:r.axis] + ["j"] + names[r.axis:]
        value = self._render_with_reductions(r.arg, src)
        float_acc = r.type.dtype in ("f32", "f16", "bf16")
        init = {"sum": "0", "max": "-INFINITY", "min": "INFINITY"}[r.op] if float_acc else \
            {"sum": "0", "max": "LLONG_MIN", "min": "LLONG_MAX"}[r.op]
        combine = {"sum": "acc += x;", "max": "acc = fmaxf(acc, x);" if float_acc else "acc = x > acc ? x : acc;",
                   "min": "acc = fminf(acc, x);" if float_acc else "acc = x < acc ? x : acc;"}[r.op]
        acc_t = "float" if float_acc else "long long"
        self.emit(f"for (int e = threadIdx.x; e < {max(n, 1)}; e += THREADS) {{  // {r.op} over axis {r.axis}")
        self.depth += 1
        for name, expr in idx:
            self.emit(f"const int {name} = {expr};")
        self.emit(f"{acc_t} acc = {init};")
        self.emit(f"for (int j = 0; j < {in_shape[r.axis]}; ++j) {{")
        self.depth += 1
        # sum of a half-precision tile accumulates the f32 values; max/min keep them
        self.emit(f"const {acc_t} x = {value};")
        self.emit(combine)
        self.depth -= 1
        self.emit("}")
        result = "acc"
        if r.type.dtype in ("f16", "bf16"):
            result = f"ptc::round_{r.type.dtype}(acc)"
        self.emit(f"{target.name}[{self._linear(target, names)}] = {store_value(result, r.type.dtype)};")
        self.depth -= 1
        self.emit("}")
        self.sync()


def _unflatten(flat: str, shape: list[int]) -> list[tuple[str, str]]:
    """C expressions for the multi-index of flat element `flat` of a row-major shape."""
    out = []
    for j in range(len(shape)):
        inner = math.prod(shape[j + 1:])
        expr = f"{flat} / {inner}" if inner > 1 else flat
        if j > 0:
            expr = f"({expr}) % {shape[j]}"
        out.append((f"e{j}", expr))
    return out
