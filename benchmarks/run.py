"""The performance table: every workload built, run and timed on this machine's GPU beside
its torch baseline, printed and written to benchmarks/results/DATE-GPU.md.

    .venv/bin/python benchmarks/run.py                 # every workload, target sm80 and sm90
    .venv/bin/python benchmarks/run.py --only gemm     # workloads whose name contains "gemm"

Correctness is the GPU tests' job (`pytest -m gpu` compares every sample with the
reference interpreter at several shapes); here outputs are checked only at the small
shapes, because the interpreter is slow at benchmark sizes. Needs a CUDA GPU.
"""
from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ptc import runtime  # noqa: E402
from ptc.diagnostics import CompileError  # noqa: E402
from ptc.runtime.bench import run_bench  # noqa: E402

# (label, sample, shapes) — the project's target shapes: GEMM 4096-8192; FlashAttention
# with B*S = 16k and H*D = 2048 at d 64/128/256; Mamba2 at b8 h80 chunk 256 hd 64 dstate 128.
WORKLOADS = [
    ("gemm 4096^3", "gemm", {"M": 4096, "N": 4096, "K": 4096}),
    ("gemm 8192^3", "gemm", {"M": 8192, "N": 8192, "K": 8192}),
    ("matmul_sum 4096^3", "matmul_sum", {"M": 4096, "N": 4096, "K": 4096}),
    ("flash_attn d64 8k", "flash_attn", {"B": 2, "H": 32, "S": 8192, "T": 8192, "D": 64}),
    ("flash_attn d128 8k", "flash_attn", {"B": 2, "H": 16, "S": 8192, "T": 8192, "D": 128}),
    ("flash_attn d256 8k", "flash_attn", {"B": 2, "H": 8, "S": 8192, "T": 8192, "D": 256}),
    ("flash_attn_causal d128 8k", "flash_attn_causal", {"B": 2, "H": 16, "S": 8192, "D": 128}),
    ("mamba2_chunk_state seq 4k", "mamba2_chunk_state", {}),
    ("mamba2_chunk_scan seq 4k", "mamba2_chunk_scan", {}),
    ("gemm_chain 4096", "gemm_chain", {}),
    ("rmsnorm 16k x 4096", "rmsnorm", {}),
    ("softmax 16k x 4096", "softmax", {}),
]
TARGETS = ("sm80", "sm90")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run workloads whose label contains this")
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--iters", type=int, default=50)
    args = parser.parse_args()
    from ptc.runtime.cuda import find_gpus
    try:
        gpu = find_gpus()[0]
    except CompileError as exc:
        print(f"benchmarks: {exc}", file=sys.stderr)
        return 1
    rows = []
    for label, sample, shapes in WORKLOADS:
        if args.only not in label:
            continue
        for target in args.targets.split(","):
            try:
                prepared = runtime.prepare(ROOT / "samples" / f"{sample}.pt", target,
                                           shapes=shapes or None)
                compiled = runtime.build_prepared(prepared, shapes=shapes or None)
                r = run_bench(compiled, prepared, shapes=shapes or None, iters=args.iters,
                              check=False)
            except CompileError as exc:
                rows.append((label, target, "error: " + str(exc).splitlines()[0]))
                print(f"{label} {target}: {exc}", file=sys.stderr)
                continue
            rate = f"{r.tflops:.1f} TFLOP/s" if r.bound == "compute" else f"{r.gbs:.0f} GB/s"
            base = (f"{r.baseline_label} {r.baseline_ms:.3f} ms, {r.speedup:.2f}x"
                    if r.baseline_ms else "no baseline")
            rows.append((label, target, f"{r.timing.median_ms:.3f} ms | {rate} | "
                         f"{100 * r.peak_fraction:.0f}% of peak | model "
                         f"{r.work.model_seconds * 1e3:.3f} ms | {base}"))
            print(f"{label:28s} {target}: {rows[-1][2]}", flush=True)
    today = datetime.date.today().isoformat()
    name = gpu.name.replace(" ", "_")
    out = ROOT / "benchmarks" / "results" / f"{today}-{name}.md"
    lines = [f"# ptc benchmarks on {gpu.name} ({gpu.arch}), {today}", "",
             "| workload | target | time | rate | % of peak | model | baseline |",
             "|---|---|---|---|---|---|---|"]
    for label, target, text in rows:
        cells = text.split(" | ") if not text.startswith("error") else [text, "", "", "", ""]
        lines.append(f"| {label} | {target} | " + " | ".join(cells) + " |")
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
