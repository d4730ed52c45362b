"""What every example prints: a model from ptc kernels against its torch reference, eager
and under torch.compile(fullgraph=True), and how many graph breaks dynamo finds."""
from __future__ import annotations

import torch


def against(model, want: torch.Tensor, x: torch.Tensor) -> dict:
    """model(x) against `want`: the largest differences (eager, compiled, compiled against
    eager), the largest element of `want` and the graph breaks."""
    want = want.float()
    eager = model(x).float()
    compiled = torch.compile(model, fullgraph=True)(x).float()
    breaks = torch._dynamo.explain(model)(x).graph_break_count
    return {"eager": (eager - want).abs().max().item(),
            "compiled": (compiled - want).abs().max().item(),
            "compiled_vs_eager": (compiled - eager).abs().max().item(),
            "scale": want.abs().max().item(), "graph_breaks": breaks}


def main(compare, doc: str) -> None:
    """The command line of an example: `--backend interp|emulate`, then compare()'s figures."""
    import argparse

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--backend", choices=("interp", "emulate"), default="interp")
    for name, value in compare(parser.parse_args().backend).items():
        print(f"{name}: {value}")
