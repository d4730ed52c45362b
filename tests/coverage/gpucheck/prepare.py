"""The coverage catalogue on a GPU (issue 20): build here, with nvcc, the sm90 cases that
exercise what the coverage found and fixed (wgmma at every width, every operand layout and
TMA box, 4-byte cp.async into swizzled tiles, i32 and 16-bit atomic adds), write their
inputs and the interpreter's outputs; run.sh runs them on the device machine; --compare
reads what came back.

    .venv/bin/python tests/coverage/gpucheck/prepare.py        # -> build/covgpu
    run: sh tests/coverage/gpucheck/run.sh   (carry build/covgpu; out.tgz to $OUT)
    .venv/bin/python tests/coverage/gpucheck/prepare.py --compare DIR_WITH_OUT.tgz
"""
import json
import shutil
import sys
import tarfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
G = ROOT / "build" / "covgpu"
CASES = ("wgmma_widths_f16.sm90.ws", "wgmma_widths_bf16.sm90.ws", "wgmma_widths_i8.sm90.ws",
         "wgmma_operands.sm90.ws3",
         "odd_strides.sm90.ms2", "atomics.sm90.seq8", "chain_b.sm90.ws")


def save(path: Path, array) -> None:
    a = np.asarray(array)
    if a.dtype.name == "bfloat16":
        a = a.view(np.uint16)        # ptc_run reads bf16 as raw bits
    np.save(path, a)


def prepare() -> None:
    import importlib

    from ptc.coverage.cases import CATALOGUE, inputs_of, lowered
    from ptc.interp import run_kernel
    from ptc.runtime import signature_of
    from ptc.sched.plan import plans_to_json

    build = importlib.import_module("ptc.runtime.build")
    if G.exists():
        shutil.rmtree(G)
    G.mkdir(parents=True)
    for name in CASES:
        c = next(c for c in CATALOGUE if c.name == name)
        built = lowered(c)
        d = G / name
        build.write_build_dir(d, kernel_source=built.source,
                              signature=signature_of(built.kernel),
                              arch=built.device.arch, target=c.target,
                              plan_json=plans_to_json(built.plans))
        result = build.build(d, built.device.arch)
        print(name, "built; spills", result.ptxas.spills, flush=True)
        for n, shape in enumerate(c.shapes):
            run = d / f"run{n}"
            run.mkdir()
            dims = dict(shape)
            inputs = inputs_of(c, built.kernel, dims)
            for p, a in inputs.items():
                if np.ndim(a):
                    save(run / f"{p}.npy", a)
            want = run_kernel(built.kernel, inputs, shapes=dims, tiles=dict(c.tiles))
            np.savez(G / f"{name}.run{n}.want.npz", **{k: np.asarray(v, np.float64)
                                                       for k, v in want.items()})
    (G / "cases.json").write_text(json.dumps(list(CASES)))
    # what the device machine needs: the executables and the inputs
    for f in G.glob("*/*"):
        if f.is_file() and f.name not in ("ptc_run",) and f.parent != G:
            f.unlink()


def compare(out: Path) -> None:
    from ptc.coverage.cases import CATALOGUE, rel_error

    with tarfile.open(out / "out.tgz") as t:
        t.extractall(out / "got")
    for name in CASES:
        c = next(c for c in CATALOGUE if c.name == name)
        for n, _ in enumerate(c.shapes):
            want = np.load(G / f"{name}.run{n}.want.npz")
            for k in want.files:
                f = out / "got" / "build" / "covgpu" / name / f"run{n}" / f"{k}.npy"
                if not f.exists():
                    print(f"{name} run{n} {k}: no output")
                    continue
                got = np.load(f)
                err = rel_error(got, want[k])
                print(f"{name} run{n} {k}: {err:.3g}")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--compare":
        compare(Path(sys.argv[2]))
    else:
        prepare()
