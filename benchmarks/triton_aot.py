"""Compile the Triton baselines ahead of time for a GPU architecture, without a GPU.

    python benchmarks/triton_aot.py gemm BM=64,BN=128,BK=64 --warps 4 --stages 2 \
        --arch 80 -o gemm.cubin
    python benchmarks/triton_aot.py gemm BM=128,BN=128,BK=32 --arch gfx942 -o gemm.s

`--arch` is an sm number (a cubin) or an AMD gfx name (the AMDGPU assembly, wave64).

Triton stays out of ptc's dependencies: the first run creates benchmarks/.venv-triton with
`pip install triton` and re-runs itself there. Pointers, sizes and strides are specialized
as divisible by 16, as a launch with aligned tensors would be.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENV = HERE / ".venv-triton"
# baseline -> its @triton.jit function in benchmarks/baselines/triton_<baseline>.py
KERNELS = {"gemm": "gemm_kernel", "flash_attn": "attn_fwd_kernel",
           "w8a8_gemm": "w8a8_gemm_kernel", "fp8_gemm": "fp8_gemm_kernel",
           "fp8_blockscaled_gemm": "fp8_blockscaled_gemm_kernel",
           "fp8_flash_attn": "fp8_attn_fwd_kernel"}


def ensure_venv() -> Path:
    python = VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "triton"], check=True)
    return python


def compile_kernel(name: str, tiles: dict[str, int], warps: int, stages: int, arch: str) -> bytes:
    import triton
    from triton.backends.compiler import GPUTarget
    sys.path.insert(0, str(HERE / "baselines"))
    module = __import__(f"triton_{name}")
    kernel = KERNELS[name]
    constexprs = dict(tiles)
    if name == "flash_attn":
        constexprs.setdefault("CAUSAL", False)
    src = triton.compiler.ASTSource(
        fn=getattr(module, kernel), signature=module.SIGNATURE, constexprs=constexprs,
        attrs={(i,): [["tt.divisibility", 16]] for i in module.DIVISIBLE})
    if arch.startswith("gfx"):
        compiled = triton.compile(src, target=GPUTarget("hip", arch, 64),
                                  options={"num_warps": warps, "num_stages": stages})
        return compiled.asm["amdgcn"].encode()
    compiled = triton.compile(src, target=GPUTarget("cuda", int(arch), 32),
                              options={"num_warps": warps, "num_stages": stages})
    return compiled.asm["cubin"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("kernel", choices=tuple(KERNELS))
    ap.add_argument("tiles", help="e.g. BM=64,BN=128,BK=64 (flash_attn: BM, BN, D)")
    ap.add_argument("--warps", type=int, default=4)
    ap.add_argument("--stages", type=int, default=2)
    ap.add_argument("--arch", default="80", help="80, 90 or an AMD target such as gfx942")
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()
    try:
        import triton  # noqa: F401
    except ImportError:
        python = ensure_venv()
        os.execv(str(python), [str(python), __file__, *sys.argv[1:]])
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    tiles = {k: int(v) for k, v in (kv.split("=") for kv in args.tiles.split(","))}
    Path(args.output).write_bytes(compile_kernel(args.kernel, tiles, args.warps, args.stages,
                                                 args.arch))


if __name__ == "__main__":
    main()
