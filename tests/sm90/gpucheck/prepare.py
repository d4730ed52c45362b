"""Issue 20 on a GPU: build (here, with nvcc) the kernels whose wgmma operands cover every
layout the sm90 renderer produces, the BN = 8 GEMM with the fixed and with the old
(swapped LBO/SBO) descriptor, and the TMA-store experiments; write their inputs and
float64 references. Then run.sh on the device machine, and this with --compare.

    .venv/bin/python tests/sm90/gpucheck/prepare.py            # -> build/gpucheck
    run: sh tests/sm90/gpucheck/run.sh   (carry build/gpucheck; outputs to $OUT)
    .venv/bin/python tests/sm90/gpucheck/prepare.py --compare OUT_DIR
"""
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
G = ROOT / "build" / "gpucheck"
PTC = str(ROOT / ".venv" / "bin" / "ptc")
OPERANDS = G / "operands.pt"     # tests/sm90/gemm_operands.pt with every tile it is pinned to
CASES = {
    # name: (file, kernel, shape, tiles (rendered warp-specialized), expected operands)
    "bn8": (ROOT / "tests/sm90/gemm_bn8.pt", None, dict(M=2048, N=8, K=2048), None,
            ["SmemOperand<true, 16, 1024>"]),
    "tn-bn8": (OPERANDS, "gemm_tn", dict(M=256, N=64, K=512), "BM=64,BN=8,BK=64",
               ["SmemOperand<true, 128,", "SmemOperand<true, 16,"]),
    "tn-bn16": (OPERANDS, "gemm_tn", dict(M=256, N=64, K=512), "BM=64,BN=16,BK=64",
                ["SmemOperand<true, 32,"]),
    "tn-bn32": (OPERANDS, "gemm_tn", dict(M=256, N=128, K=512), "BM=64,BN=32,BK=64",
                ["SmemOperand<true, 64,"]),
    "nt-bk16": (OPERANDS, "gemm_nt", dict(M=256, N=128, K=512), "BM=64,BN=64,BK=16",
                ["SmemOperand<false, 32,"]),
    "nt-bk32": (OPERANDS, "gemm_nt", dict(M=256, N=128, K=512), "BM=64,BN=64,BK=32",
                ["SmemOperand<false, 64,"]),
    "nn-bk64": (OPERANDS, "gemm_nn", dict(M=256, N=128, K=512), "BM=64,BN=64,BK=64",
                ["SmemOperand<false, 128,", "SmemOperand<true, 128,"]),
}
NAMES = list(CASES) + ["bn8-old"]


def prepare() -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from test_sm90_descriptors import Case

    if G.exists():
        shutil.rmtree(G)
    G.mkdir(parents=True)
    OPERANDS.write_text((ROOT / "tests/sm90/gemm_operands.pt").read_text().replace(
        "tile BM in [64], BN in [64], BK in [64]",
        "tile BM in [64], BN in [64, 32, 16, 8], BK in [64, 32, 16]"))
    rng = np.random.default_rng(11)
    for name, (f, kernel, shape, tiles, want) in CASES.items():
        d = G / name
        cmd = [PTC, "build", str(f), "-t", "sm90", "--shape",
               ",".join(f"{k}={v}" for k, v in shape.items()), "-o", str(d)]
        if kernel:
            cmd += ["--kernel", kernel]
        if tiles:   # the warp-specialized plan, as tests/test_sm90_descriptors.py renders it
            pinned = {k: int(v) for k, v in (t.split("=") for t in tiles.split(","))}
            (G / f"{name}.cu").write_text(Case(f, kernel, pinned, shape).source)
            cmd += ["--kernel-source", str(G / f"{name}.cu"), "--tile", tiles]
        subprocess.run(cmd, check=True, capture_output=True)
        src = (d / "kernel.cu").read_text()
        assert "warp-specialized" in src.splitlines()[1], (name, src.splitlines()[1])
        for w in want:
            assert w in src, (name, w)
        M, N, K = shape["M"], shape["N"], shape["K"]
        A = rng.standard_normal((K, M) if kernel == "gemm_tn" else (M, K)).astype(np.float16)
        B = (rng.standard_normal((N, K) if kernel == "gemm_nt" else (K, N)) * 0.25
             ).astype(np.float16)
        np.save(d / "A.npy", A)
        np.save(d / "B.npy", B)
        (d / "dims.txt").write_text("".join(f"{k} {v}\n" for k, v in shape.items()))
        a = A.astype(np.float64).T if kernel == "gemm_tn" else A.astype(np.float64)
        b = B.astype(np.float64).T if kernel == "gemm_nt" else B.astype(np.float64)
        np.save(G / f"ref-{name}.npy", a @ b)
        print(name, src.splitlines()[1])
    # issue 20's descriptor (a MN-major operand without a swizzle described as swizzled)
    old = G / "bn8-old"
    shutil.copytree(G / "bn8", old)
    header = (old / "wgmma.cuh").read_text()
    for good, bad in [
            ("static constexpr uint32_t LBO = MN_MAJOR ? (SPAN == 16 ? 8 * 16 : PANEL_BYTES)",
             "static constexpr uint32_t LBO = MN_MAJOR ? (PANEL_BYTES)"),
            ("static constexpr uint32_t SBO = MN_MAJOR && SPAN == 16 ? PANEL_BYTES : 8 * SPAN;",
             "static constexpr uint32_t SBO = 8 * SPAN;")]:
        assert good in header
        header = header.replace(good, bad)
    (old / "wgmma.cuh").write_text(header)
    subprocess.run(["sh", "build.sh"], cwd=old, check=True, capture_output=True)
    shutil.copy(G / "ref-bn8.npy", G / "ref-bn8-old.npy")
    for d in NAMES:
        for junk in ("kernel.o", "harness.o", "libptc_kernel.so"):
            (G / d / junk).unlink(missing_ok=True)
    subprocess.run(["nvcc", "-std=c++17", "-O2", "-gencode",
                    "arch=compute_90a,code=[sm_90a,compute_90a]",
                    f"-I{ROOT / 'ptc/targets/cuda/templates'}", str(HERE / "tma_store.cu"), "-o",
                    str(G / "tma_store")], check=True)
    print("built", G)


def compare(out: Path) -> None:
    for name in NAMES:
        got = np.load(out / f"C-{name}.npy").astype(np.float64)
        want = np.load(G / f"ref-{name}.npy")
        print(f"{name:8s} {str(got.shape):12s} relative error "
              f"{np.linalg.norm(got - want) / np.linalg.norm(want):.2e}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--compare"]:
        compare(Path(sys.argv[2]))
    else:
        prepare()
