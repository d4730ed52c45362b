"""Whole layers from ptc kernels (examples/) against PyTorch eager and torch.compile
(Inductor), forward and forward+backward, on a GPU.

    python benchmarks/layers.py [--device cuda|cpu] [--size bench|tiny] [--layers L,...]
                                [--repeat N] [--budget SECONDS] [--json FILE] [--dry-run]

Layers (issue 23, part 5):
  llama3        examples/llama3/layer.py's decoder layer in bf16, forward: PtcLayer against
                torch_layer in bf16 (cuBLAS matmuls, SDPA attention), eager and Inductor
  llama3_train  the same layer in f32 with every step differentiable, forward+backward:
                examples/llama3/backward.py's PtcTrainableLayer against torch autograd of
                torch_layer in f32
  mamba2        examples/mamba2/block.py's block in f16, forward: PtcMamba2 against
                torch_mamba2_chunked (the SSM in chunks, as the Mamba2 paper lists it)
The Mamba2 block has no backward kernels yet: no forward+backward row.

Every row first checks that ptc's output is the baseline's (the largest difference, printed)
and then times each side: the median of --repeat runs after a warm-up run (builds, Inductor's
compile), with CUDA events on a GPU. The table: time of each side, and the baselines' time over
ptc's (above 1: ptc is faster). --device cpu runs ptc's kernels on the reference interpreter
at --size tiny: it shows the script works, and its times say nothing of a GPU.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for folder in ("", "examples", "examples/llama3", "examples/mamba2"):
    sys.path.insert(0, str(ROOT / folder))

LAYERS = ("llama3", "llama3_train", "mamba2")
# (batch, sequence) and the layer configs of each size: bench is a LLaMA-3-8B layer at
# 2048 tokens (its trainable f32 twin at half the width) and a Mamba2-1.3B-like block
SIZES = {
    "bench": {"llama3": dict(batch=1, seq=2048, hidden=4096, heads=32, kv_heads=8,
                             head_dim=128, ffn=14336),
              "llama3_train": dict(batch=1, seq=1024, hidden=2048, heads=16, kv_heads=4,
                                   head_dim=128, ffn=8192),
              "mamba2": dict(batch=2, seq=2048, d_model=2048, heads=64, head_dim=64,
                             groups=1, d_state=128, chunk=256)},
    "tiny": {"llama3": dict(batch=2, seq=24), "llama3_train": dict(batch=1, seq=4),
             "mamba2": dict(batch=2, seq=24)},
}


def timed(fn, device: str, repeat: int) -> float:
    """Milliseconds of fn(): the median of `repeat` runs after one warm-up run."""
    import torch

    fn()
    times = []
    for _ in range(repeat):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def llama3_case(size: dict, device: str):
    """(ptc forward, baseline forward, inputs) of the bf16 decoder layer."""
    import torch
    from layer import Config, PtcLayer, parameters, rope_tables, torch_layer

    shape = {k: v for k, v in size.items() if k not in ("batch", "seq")}
    cfg = Config(**shape)
    p = {k: v.to(device) for k, v in parameters(cfg).items()}
    cos, sin = (t.to(device) for t in rope_tables(cfg, size["seq"]))
    x = torch.randn(size["batch"], size["seq"], cfg.hidden, device=device).to(torch.bfloat16)
    layer = PtcLayer(cfg, "interp")

    def baseline(x):
        return torch_layer(cfg, x, p, cos, sin, compute=torch.bfloat16)
    return (lambda x: layer(x, p, cos, sin)), baseline, (x,)


def llama3_train_case(size: dict, device: str):
    """(ptc forward, baseline forward, inputs) of the f32 trainable layer; timed with its
    backward pass."""
    import torch
    from backward import TINY, PtcTrainableLayer
    from layer import Config, parameters, rope_tables, torch_layer

    shape = {k: v for k, v in size.items() if k not in ("batch", "seq")}
    cfg = Config(**shape) if shape else TINY
    p = parameters(cfg)
    weights = [p[n].float().to(device).requires_grad_() for n in PtcTrainableLayer.NAMES]
    cos, sin = (t.to(device) for t in rope_tables(cfg, size["seq"]))
    x = torch.randn(size["batch"], size["seq"], cfg.hidden, device=device).requires_grad_()
    layer = PtcTrainableLayer(cfg, "interp")

    def baseline(x, *w):
        return torch_layer(cfg, x, dict(zip(PtcTrainableLayer.NAMES, w)), cos, sin,
                           compute=torch.float32, store=torch.float32)
    return (lambda x, *w: layer(x, cos, sin, *w)), baseline, (x, *weights)


def mamba2_case(size: dict, device: str):
    """(ptc forward, baseline forward, inputs) of the f16 Mamba2 block."""
    import torch
    from block import Config, PtcMamba2, parameters, torch_mamba2_chunked

    shape = {k: v for k, v in size.items() if k not in ("batch", "seq")}
    cfg = Config(**shape)
    p = {k: v.to(device) for k, v in parameters(cfg).items()}
    u = torch.randn(size["batch"], size["seq"], cfg.d_model, device=device).half()
    block = PtcMamba2(cfg, "interp")
    return (lambda u: block(u, p)), (lambda u: torch_mamba2_chunked(cfg, u, p)), (u,)


CASES = {"llama3": (llama3_case, False), "llama3_train": (llama3_train_case, True),
         "mamba2": (mamba2_case, False)}


def measure(layer: str, size: dict, device: str, repeat: int) -> dict:
    """One row: the largest difference from the baseline, then each side's time."""
    import torch

    make, backward = CASES[layer]
    ptc_fn, base_fn, args = make(size, device)
    compiled = torch.compile(base_fn)
    with torch.no_grad():
        diff = (ptc_fn(*args).float() - base_fn(*args).float()).abs().max().item()

    def run(fn):
        def forward():
            with torch.no_grad():
                fn(*args)
        return (lambda: fn(*args).float().sum().backward()) if backward else forward
    row = {"layer": layer, "pass": "forward+backward" if backward else "forward",
           "shape": ",".join(f"{k}={v}" for k, v in size.items()), "max_diff": diff}
    for side, fn in (("ptc", ptc_fn), ("eager", base_fn), ("inductor", compiled)):
        row[f"{side}_ms"] = timed(run(fn), device, repeat)
    return row


def table(rows: list[dict]) -> str:
    head = (f"{'layer':<13} {'pass':<17} {'ptc ms':>9} {'eager ms':>9} {'inductor ms':>11} "
            f"{'eager/ptc':>9} {'inductor/ptc':>12} {'max diff':>9}  shape")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['layer']:<13} {r['pass']:<17} {r['ptc_ms']:>9.3f} {r['eager_ms']:>9.3f} "
                     f"{r['inductor_ms']:>11.3f} {r['eager_ms'] / r['ptc_ms']:>9.2f} "
                     f"{r['inductor_ms'] / r['ptc_ms']:>12.2f} {r['max_diff']:>9.3g}  {r['shape']}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--size", choices=tuple(SIZES), default=None,
                        help="bench on cuda, tiny on cpu (default)")
    parser.add_argument("--layers", default=",".join(LAYERS))
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--budget", type=float, default=0,
                        help="seconds after which no new layer starts (0: no limit)")
    parser.add_argument("--json", type=Path, help="write the rows here")
    parser.add_argument("--dry-run", action="store_true", help="say what would run")
    args = parser.parse_args(argv)
    size = args.size or ("bench" if args.device == "cuda" else "tiny")
    layers = [name for name in args.layers.split(",") if name]
    unknown = [name for name in layers if name not in CASES]
    if unknown:
        parser.error(f"unknown layer(s) {', '.join(unknown)}: choose from {', '.join(LAYERS)}")
    if args.dry_run:
        for name in layers:
            print(f"benchmarks/layers.py --dry-run: {name} on {args.device} at {SIZES[size][name]}")
        return 0
    started, rows = time.monotonic(), []
    for name in layers:
        if args.budget and time.monotonic() - started > args.budget:
            print(f"layers.py: budget of {args.budget:.0f} s spent, {name} skipped")
            continue
        rows.append(measure(name, SIZES[size][name], args.device, args.repeat))
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps({"device": args.device, "size": size, "rows": rows},
                                        indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
