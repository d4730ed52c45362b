"""A kernel's calling convention, as the harness and the runtime see it: the tensors (inputs
in signature order, then outputs), the scalar params, and every dim, in the order of the
kernel ABI (`ptc_launch(tensors, scalars, dims, stream)`). It is saved as signature.json in
the build directory, so a built kernel can be loaded and called without its .pt file.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Union

from ..sema import typed as T
from ..sema.tiles import dim_multiples

Extent = Union[str, int]


@dataclass(frozen=True)
class TensorArg(T.TensorParam):
    """A tensor parameter, and whether some statement atomic_adds into it (an output the
    runtime must zero before each launch)."""

    atomic: bool = False


ScalarArg = T.ScalarParam


DimArg = T.DimInfo


@dataclass(frozen=True)
class Signature:
    kernel: str
    inputs: tuple[Union[TensorArg, ScalarArg], ...]   # in the kernel's parameter order
    outputs: tuple[TensorArg, ...]
    dims: tuple[DimArg, ...]
    # (dim, tile size, its value in the build, the `tile A divides B` line): what a call's
    # dims must be multiples of (`divides` lines whose dim the build did not know)
    multiples: tuple[tuple[str, str, int, str], ...] = ()

    @property
    def tensors(self) -> tuple[TensorArg, ...]:
        """The ABI's tensor order: tensor inputs in signature order, then the outputs."""
        return tuple(p for p in self.inputs if isinstance(p, TensorArg)) + self.outputs

    @property
    def tensor_inputs(self) -> tuple[TensorArg, ...]:
        return tuple(p for p in self.inputs if isinstance(p, TensorArg))

    @property
    def scalars(self) -> tuple[ScalarArg, ...]:
        return tuple(p for p in self.inputs if isinstance(p, ScalarArg))

    def __str__(self) -> str:
        ins = ", ".join(str(p) for p in self.inputs)
        outs = ", ".join(str(p) for p in self.outputs)
        return f"{self.kernel}({ins}) -> ({outs})"

    def to_json(self) -> str:
        def tensor(p: TensorArg) -> dict:
            return {"name": p.name, "dtype": p.dtype, "dims": list(p.dims), "atomic": p.atomic}

        return json.dumps({
            "kernel": self.kernel,
            "signature": str(self),
            "inputs": [tensor(p) if isinstance(p, TensorArg) else
                       {"name": p.name, "dtype": p.dtype, "scalar": True} for p in self.inputs],
            "outputs": [tensor(p) for p in self.outputs],
            "dims": [{"name": d.name, "default": d.default, "static": d.static}
                     for d in self.dims],
            "multiples": [{"dim": d, "tile": t, "size": n, "declared": why}
                          for d, t, n, why in self.multiples],
        }, indent=2) + "\n"

    @staticmethod
    def from_json(text: str) -> "Signature":
        data = json.loads(text)

        def tensor(p: dict, is_output: bool) -> TensorArg:
            return TensorArg(p["name"], p["dtype"], tuple(p["dims"]), is_output,
                             bool(p.get("atomic", False)))

        return Signature(
            data["kernel"],
            tuple(ScalarArg(p["name"], p["dtype"]) if p.get("scalar") else tensor(p, False)
                  for p in data["inputs"]),
            tuple(tensor(p, True) for p in data["outputs"]),
            tuple(DimArg(d["name"], d["default"], d["static"]) for d in data["dims"]),
            tuple((m["dim"], m["tile"], m["size"], m["declared"])
                  for m in data.get("multiples", ())))


def signature_of(kernel: T.TypedKernel, plans=()) -> Signature:
    """The calling convention of `kernel`, built with `plans` (one per grid): their tile
    sizes make the kernel's `tile A divides <dim>` lines checks of each call's dims."""
    atomic = atomic_outputs(kernel)
    inputs = tuple(TensorArg(p.name, p.dtype, tuple(p.dims), False)
                   if isinstance(p, T.TensorParam) else ScalarArg(p.name, p.dtype)
                   for p in kernel.inputs)
    outputs = tuple(TensorArg(p.name, p.dtype, tuple(p.dims), True, p.name in atomic)
                    for p in kernel.outputs)
    dims = tuple(DimArg(d.name, d.default, d.static) for d in kernel.dims)
    multiples = dim_multiples(kernel, [dict(plan.tiles) for plan in plans])
    return Signature(kernel.name, inputs, outputs, dims, multiples)


def atomic_outputs(kernel: T.TypedKernel) -> frozenset[str]:
    """The outputs that some `atomic_add` writes (they must start at zero)."""
    found: set[str] = set()

    def walk(stmts) -> None:
        for s in stmts:
            if isinstance(s, T.Store) and s.atomic:
                found.add(s.tensor)
            elif isinstance(s, (T.Loop, T.Grid)):
                walk(s.body)

    walk(kernel.body)
    return frozenset(found)
