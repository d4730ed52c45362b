"""Per-kernel resource usage and matrix instructions, read from the device assembly that
`-save-temps` (or `--offload-device-only -S`) leaves: `.venv/bin/python tools/hip_probe/readout.py FILE.s ...`.

A thin front of ptc.targets.hip.isa, the readout `ptc build` records (docs/hip.md,
"Resource usage readout"): one line per kernel.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ptc.targets.hip.isa import parse_isa  # noqa: E402


def main() -> None:
    for path in sys.argv[1:]:
        print(f"# {path}")
        print(f"{'kernel':<28} {'vgpr':>4} {'agpr':>4} {'total':>5} {'sgpr':>4} {'lds':>6} "
              f"{'scratch':>7} {'spill':>5} {'occ':>3}  mfma")
        for k in parse_isa(Path(path).read_text()).kernels:
            mfma = " ".join(f"{op}*{n}" for op, n in k.mfma)
            print(f"{k.label:<28} {k.vgprs:>4} {k.agprs:>4} {k.total_vgprs:>5} {k.sgprs:>4} "
                  f"{k.lds_bytes:>6} {k.scratch_bytes:>7} {k.spills:>5} {k.occupancy:>3}  {mfma}")


if __name__ == "__main__":
    main()
