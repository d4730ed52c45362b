"""ptc's main loops next to Triton's, from the machine code, without a GPU.

    python benchmarks/mainloop.py [--target sm80|sm90|gfx90a|gfx942] [--shape D=64]

For each of SAMPLES: builds ptc's kernel for the target (the plan the search picks at the
benchmark shape), compiles the Triton baseline (benchmarks/baselines/) at the same
tile, warps and stages ahead of time (benchmarks/triton_aot.py), and prints what each main
loop issues per warp and iteration (ptc.runtime.mainloop) with the ratio of instructions
per tensor-core MFLOP. Needs nvcc and cuobjdump (ptc's dev extra); Triton is installed in
benchmarks/.venv-triton on first use. For gfx90a / gfx942 the same from the AMDGPU
assembly of both (ptc.targets.hip.isa; Triton compiled for the target, wave64), per
wave and iteration; needs a HIP compiler (docs/hip.md).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ptc.runtime.build import sass  # noqa: E402
from ptc.targets.cuda.toolchain import find_cuobjdump  # noqa: E402
from ptc.runtime.mainloop import COLUMNS, mainloop_reports, row  # noqa: E402
from ptc.runtime.symbols import kernel_name  # noqa: E402


# the samples with a Triton baseline (benchmarks/baselines/triton_<sample>.py)
SAMPLES = ("gemm", "flash_attn", "w8a8_gemm", "fp8_gemm", "fp8_blockscaled_gemm",
           "fp8_flash_attn")


def ptc_build(sample: str, target: str, shapes: str | None, out: Path) -> dict:
    cmd = [sys.executable, "-m", "ptc.cli", "build", str(ROOT / "samples" / f"{sample}.pt"),
           "--target", target, "-o", str(out)]
    if shapes:
        cmd += ["--shape", shapes]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError((proc.stderr or proc.stdout).strip().splitlines()[-1])
    return json.loads((out / "plan.json").read_text())


def triton_compile(kernel: str, tiles: dict, warps: int, stages: int, arch: str,
                   out: Path) -> Path:
    path = out / f"{kernel}.{'s' if arch.startswith('gfx') else 'cubin'}"
    spec = ",".join(f"{k}={v}" for k, v in tiles.items())
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "triton_aot.py"), kernel,
                           spec, "--warps", str(warps), "--stages", str(max(stages, 1)),
                           "--arch", arch, "-o", str(path)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError((proc.stderr or proc.stdout).strip().splitlines()[-1])
    return path


def triton_sass(kernel: str, tiles: dict, warps: int, stages: int, arch: int, out: Path) -> str:
    cubin = triton_compile(kernel, tiles, warps, stages, str(arch), out)
    return subprocess.run([find_cuobjdump(), "-sass", str(cubin)], capture_output=True,
                          text=True, check=True).stdout


# per wave and main-loop iteration, from the AMDGPU assembly
ISA_COLUMNS = ("v_mfma", "ds_read", "ds_write", "global_load", "s_barrier", "s_waitcnt",
               "cross_lane")


def isa_row(k) -> str:
    cells = [str(k.loop_count(c)) for c in ISA_COLUMNS] + [str(k.loop_instructions)]
    return "".join(f"{c:>12}" for c in cells) + f"{k.per_mflop:>14.1f}"


def main_hip(target: str, shape: str | None) -> None:
    from ptc.targets.hip.isa import parse_isa
    print(f"main loops on {target}, per wave and iteration (AMDGPU assembly)")
    print(f"{'':<34}" + "".join(f"{c:>12}" for c in ISA_COLUMNS + ("total",))
          + f"{'per MFLOP':>14}{'ratio':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for sample in SAMPLES:
            out = Path(tmp) / sample
            try:
                plan = ptc_build(sample, target, shape, out)
                ours = next(k for k in parse_isa((out / "kernel.s").read_text()).kernels
                            if k.name.endswith("<true>"))
            except Exception as exc:   # a row that says why, not a crash
                print(f"{'ptc ' + sample:<34}error: {exc}")
                continue
            tiles = dict(plan["tiles"])
            warps = sum(r["warps"] * r["instances"] for r in plan["roles"])
            stages = plan["stages"]
            label = " ".join(f"{k}={v}" for k, v in tiles.items())
            print(f"{'ptc ' + sample:<34}" + isa_row(ours))
            if sample in ("flash_attn", "fp8_flash_attn"):
                tiles = {"BM": tiles["BM"], "BN": tiles["BN"], "D": _head_dim(shape)}
            try:
                path = triton_compile(sample, tiles, warps, stages, target, out)
                theirs = parse_isa(path.read_text()).kernels[0]
            except Exception as exc:
                print(f"{'triton ' + sample:<34}error: {exc}")
                continue
            ratio = ours.per_mflop / theirs.per_mflop if theirs.per_mflop else float("nan")
            print(f"{'triton ' + sample:<34}" + isa_row(theirs) + f"{ratio:>7.2f}x")
            print(f"{'  (' + label + f', {warps} waves, {stages} stage(s))':<34}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", default="sm80", choices=("sm80", "sm90", "gfx90a", "gfx942"))
    ap.add_argument("--shape", default=None, help="--shape for ptc (e.g. D=64)")
    args = ap.parse_args()
    if args.target.startswith("gfx"):
        main_hip(args.target, args.shape)
        return
    arch = {"sm80": 80, "sm90": 90}[args.target]
    head = f"{'':<34}" + "".join(f"{c:>10}" for c in COLUMNS[:-1]) + f"{COLUMNS[-1]:>14}" \
        + f"{'ratio':>8}"
    print(f"main loops on {args.target}, per warp and iteration (SASS)")
    print(head)
    with tempfile.TemporaryDirectory() as tmp:
        for sample in SAMPLES:
            out = Path(tmp) / sample
            try:
                plan = ptc_build(sample, args.target, args.shape, out)
                (ours,) = [r for r in mainloop_reports(sass(out))
                           if kernel_name(r.kernel).endswith("<true>")]
            except Exception as exc:   # a row that says why, not a crash
                print(f"{'ptc ' + sample:<34}error: {exc}")
                continue
            tiles = dict(plan["tiles"])
            # Triton's kernels have no producer warps: its warps are those that multiply
            warps = sum(r["warps"] * r["instances"] for r in plan["roles"]
                        if r["name"] != "producer")
            stages = plan["stages"]
            label = " ".join(f"{k}={v}" for k, v in tiles.items())
            print(f"{'ptc ' + sample:<34}" + _cells(row(ours)))
            if sample in ("flash_attn", "fp8_flash_attn"):
                tiles = {"BM": tiles["BM"], "BN": tiles["BN"], "D": _head_dim(args.shape)}
            try:
                theirs = mainloop_reports(triton_sass(sample, tiles, warps, stages, arch, out))[0]
            except Exception as exc:
                print(f"{'triton ' + sample:<34}error: {exc}")
                continue
            ratio = ours.per_mflop / theirs.per_mflop
            print(f"{'triton ' + sample:<34}" + _cells(row(theirs)) + f"{ratio:>7.2f}x")
            print(f"{'  (' + label + f', {warps} warps, {stages} stage(s))':<34}")


def _cells(cells: list[str]) -> str:
    return "".join(f"{c:>10}" for c in cells[:-1]) + f"{cells[-1]:>14}"


def _head_dim(shape: str | None) -> int:
    for kv in (shape or "").split(","):
        if kv.startswith("D="):
            return int(kv[2:])
    return 128


if __name__ == "__main__":
    main()
