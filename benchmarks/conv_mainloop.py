"""conv2d's main loop next to the f16 GEMM's at the same plan, from the machine code.

    python benchmarks/conv_mainloop.py [--target sm80|sm90|gfx90a|gfx942] [--shape N=8,...]
                                       [--sample conv2d|conv2d_stride2|conv2d_pixels]

Issue 22 asks that a conv2d 3x3 main loop issue at most 1.5x the instructions per
tensor-core MFLOP of the f16 GEMM at the same tile. For each plan (the search's pick for
samples/conv2d.pt at its benchmark shape, and the warp-specialized plans at the same tiles
where the target has them) this builds conv2d and samples/gemm.pt with the same tiles
(BM = BQ, BN = BCO, BK) and plan choice, at the GEMM the convolution is (M = N * OH * OW,
N = CO, K = R * S * C), and prints what each main loop issues per warp (wave) and
iteration with the ratio of instructions per tensor-core MFLOP (ptc.runtime.mainloop,
ptc.targets.hip.isa). conv2d_pixels (tests/kernels) tiles M as a 2-D block of BP x BQ
output pixels (a tile of rank 3): the GEMM's BM is BP * BQ. Needs nvcc and cuobjdump, or a
HIP compiler for gfx targets; no GPU.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ptc.devices import get_device  # noqa: E402
from ptc.driver import check_file, schedule  # noqa: E402
from ptc.render import can_render, render_kernel  # noqa: E402
from ptc.runtime.build import build, sass, write_build_dir  # noqa: E402
from ptc.runtime.signature import signature_of  # noqa: E402
from ptc.sched.construct import Choice, Unfit, construct  # noqa: E402
from ptc.stask import build_graphs, propagate  # noqa: E402

ARCH = {"sm80": "sm_80", "sm90": "sm_90a", "gfx90a": "gfx90a", "gfx942": "gfx942"}


def built_loop(path: Path, shapes: dict, tiles: dict, choice: Choice, target: str,
               out: Path):
    """The main loop of `path`'s aligned kernel built with `tiles` and `choice`."""
    kernel = check_file(path, shapes).kernels[0]
    device = get_device(target)
    (graph,) = build_graphs(kernel)
    plan = construct(propagate(graph, tiles), device, choice)
    source = render_kernel(kernel, plan, propagate(graph, tiles), device)
    write_build_dir(out, kernel_source=source, signature=signature_of(kernel, (plan,)),
                    arch=ARCH[target], target=target, backend=device.backend)
    build(out, ARCH[target], report_only=True)
    if target.startswith("gfx"):
        from ptc.targets.hip.isa import parse_isa
        return next(k for k in parse_isa((out / "kernel.s").read_text()).kernels
                    if k.name.endswith("<true>"))
    from ptc.runtime.mainloop import mainloop_reports
    from ptc.runtime.symbols import kernel_name
    (loop,) = [r for r in mainloop_reports(sass(out)) if kernel_name(r.kernel).endswith("<true>")]
    return loop


def counts(loop, target: str) -> str:
    if target.startswith("gfx"):
        cells = [loop.loop_count(c) for c in ("v_mfma", "ds_read", "global_load", "s_waitcnt")]
        return "".join(f"{c:>9}" for c in cells) + f"{loop.loop_instructions:>9}"
    from ptc.runtime.mainloop import row
    return "".join(f"{c:>9}" for c in row(loop)[:-1])


def sample_path(sample: str) -> Path:
    found = ROOT / "samples" / f"{sample}.pt"
    return found if found.exists() else ROOT / "tests" / "kernels" / f"{sample}.pt"


def plans(sample: str, target: str, shapes: dict) -> list[tuple[dict, Choice]]:
    """The search's plan of `sample` at `shapes`, and warp-specialized ones at its tiles
    (the plan the GEMM takes on sm90)."""
    kernel = check_file(sample_path(sample), shapes).kernels[0]
    result = schedule(kernel, target, shapes=shapes)
    best = next(c for c in result.ranked if can_render(c.plan, get_device(target)) is None)
    if "BP" in best.tiles:         # a 2-D block of pixels: 4 x 16 of them for one warpgroup
        return [(dict(best.tiles), best.choice),
                (dict(best.tiles, BP=4, BQ=16), Choice("warp_specialized", 3, 1))]
    # and the warp-specialized plans (wgmma on sm90), where the target has them
    return [(dict(best.tiles), best.choice),
            (dict(best.tiles, BQ=64), Choice("warp_specialized", 3, 1)),
            (dict(best.tiles, BQ=128, BK=64), Choice("warp_specialized", 3, 2))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", default="sm80", choices=tuple(ARCH))
    ap.add_argument("--shape", default=None,
                    help="default N=8,H=56,W=56,C=128,CO=128,R=3,S=3 and OH, OW for the stride")
    ap.add_argument("--sample", default="conv2d",
                    choices=("conv2d", "conv2d_stride2", "conv2d_pixels"))
    args = ap.parse_args()
    out = 28 if args.sample == "conv2d_stride2" else 56
    args.shape = args.shape or f"N=8,H=56,W=56,C=128,CO=128,R=3,S=3,OH={out},OW={out}"
    conv = {k: int(v) for k, v in (kv.split("=") for kv in args.shape.split(","))}
    gemm = {"M": conv["N"] * conv["OH"] * conv["OW"], "N": conv["CO"],
            "K": conv["R"] * conv["S"] * conv["C"]}
    columns = (("mfma", "ds_read", "global", "waitcnt", "total") if args.target.startswith("gfx")
               else ("tensor", "ldmatrix", "smem", "global", "bar", "wait", "mufu", "shfl",
                     "total"))
    print(f"main loops on {args.target} per warp (wave) and iteration; {args.sample} {args.shape}, "
          f"gemm M={gemm['M']} N={gemm['N']} K={gemm['K']}")
    print(f"{'':<10}" + "".join(f"{c:>9}" for c in columns) + f"{'per MFLOP':>11}{'ratio':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for i, (tiles, choice) in enumerate(plans(args.sample, args.target, conv)):
            rows = tiles["BQ"] * tiles.get("BP", 1)
            gtiles = {"BM": rows, "BN": tiles["BCO"], "BK": tiles["BK"]}
            try:
                ours = built_loop(sample_path(args.sample), conv, tiles, choice,
                                  args.target, Path(tmp) / f"conv{i}")
                theirs = built_loop(ROOT / "samples" / "gemm.pt", gemm, gtiles, choice,
                                    args.target, Path(tmp) / f"gemm{i}")
            except Unfit:
                continue
            except Exception as exc:   # a row that says why, not a crash
                print(f"{choice.describe()} {tiles}: error: {exc}")
                continue
            pixels = f"BP x BQ={tiles['BP']}x{tiles['BQ']}" if "BP" in tiles else \
                f"BQ={tiles['BQ']}"
            print(f"({choice.describe()}, {pixels}=BM {rows}, BCO/BN={tiles['BCO']} "
                  f"BK={tiles['BK']})")
            print(f"{args.sample[:10]:<10}" + counts(ours, args.target) + f"{ours.per_mflop:>11.0f}"
                  + f"{ours.per_mflop / theirs.per_mflop:>6.2f}x")
            print(f"{'gemm':<10}" + counts(theirs, args.target) + f"{theirs.per_mflop:>11.0f}")


if __name__ == "__main__":
    main()
