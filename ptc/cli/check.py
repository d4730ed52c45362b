"""`ptc check`: parse and type-check .pt files, one summary line (or JSON) per kernel."""
from __future__ import annotations

import json
from typing import Mapping

import click

from ..sema.typed import ScalarParam, TensorParam, TypedKernel
from .common import Reported, checked, cli, shape_option


def _signature(k: TypedKernel) -> str:
    ins = ", ".join(str(p) for p in k.inputs)
    outs = ", ".join(str(p) for p in k.outputs)
    return f"{k.name}({ins}) -> ({outs})"


def _dim_size(d, shapes: Mapping[str, int]) -> int | None:
    """A dim's compile-time size: from --shape, or the one the program needs; else None."""
    return shapes.get(d.name, d.static)


def _summary(k: TypedKernel, shapes: Mapping[str, int]) -> str:
    line = _signature(k)
    if k.dims:
        sizes = []
        for d in k.dims:
            size = _dim_size(d, shapes)
            sizes.append(f"{d.name}={'runtime' if size is None else size}")
        line += "  dims " + ", ".join(sizes)
    return line


def _kernel_json(k: TypedKernel, shapes: Mapping[str, int]) -> dict:
    def tensor(p: TensorParam) -> dict:
        return {"name": p.name, "dtype": p.dtype, "dims": list(p.dims)}

    return {
        "name": k.name,
        "signature": _signature(k),
        "params": [tensor(p) for p in k.inputs if isinstance(p, TensorParam)],
        "scalars": [{"name": p.name, "dtype": p.dtype}
                    for p in k.inputs if isinstance(p, ScalarParam)],
        "inputs": [p.name for p in k.inputs],
        "outputs": [tensor(p) for p in k.outputs],
        "dims": [{"name": d.name, "default": d.default, "size": _dim_size(d, shapes)}
                 for d in k.dims],
        "tiles": [{"name": t.name, "choices": list(t.choices), "implicit": t.implicit}
                  for t in k.tiles],
    }


@cli.command(epilog="""\b
Examples:
  ptc check samples/*.pt
  ptc check samples/flash_attn.pt --shape D=128 --json""")
@click.argument("files", nargs=-1, required=True)
@shape_option
@click.option("--json", "as_json", is_flag=True,
              help="Print the kernels' signatures as JSON (for tools), not a summary.")
def check(files, shapes, as_json):
    """Parse and type-check FILE..., one summary line per kernel.

    Every file is checked and every error reported; the exit status is 1 if any failed.
    """
    failed = False
    results = []
    for path in files:
        try:
            program, _ = checked(path, shapes)
        except Reported:
            failed = True
            results.append({"file": str(path), "ok": False})
            continue
        if as_json:
            results.append({"file": str(path), "ok": True,
                            "kernels": [_kernel_json(k, shapes) for k in program.kernels]})
        else:
            for k in program.kernels:
                click.echo(f"{path}: {_summary(k, shapes)}")
    if as_json:
        click.echo(json.dumps({"files": results}, indent=2))
    if failed:
        raise Reported()
