"""Per-kernel resource usage and matrix instructions, read from the device assembly that
`-save-temps` leaves (*-hip-amdgcn-amd-amdhsa-gfxNNN.s): `python3 readout.py FILE.s ...`.

Two places in that file say the same things (docs/hip.md, "Resource usage"):
- the comments LLVM prints after each kernel: `; NumVgprs:` (architectural VGPRs),
  `; NumAgprs:` (accumulation VGPRs), `; TotalNumVgprs:` (gfx90a / gfx942 unified file:
  AccumOffset + AGPRs), `; NumSgprs:`, `; ScratchSize:` (bytes per lane), `; LDSByteSize:`
  (static LDS per workgroup), `; Occupancy:` (waves per SIMD);
- the code object metadata (`amdhsa.kernels`, also in the binary: `llvm-readelf --notes`):
  `.vgpr_count` (the unified total), `.agpr_count`, `.sgpr_count`, `.vgpr_spill_count`,
  `.sgpr_spill_count`, `.group_segment_fixed_size` (LDS), `.private_segment_fixed_size`
  (scratch).
The v_mfma mnemonics are counted per kernel body.
"""
import re
import sys
from collections import Counter

COMMENTS = ("NumVgprs", "NumAgprs", "TotalNumVgprs", "NumSgprs", "ScratchSize",
            "LDSByteSize", "Occupancy")
METADATA = ("vgpr_spill_count", "sgpr_spill_count")


def readout(text: str) -> dict[str, dict]:
    kernels: dict[str, dict] = {}
    mfma: Counter = Counter()
    current = None
    record: dict = {}
    for line in text.splitlines():
        if re.match(r"^[A-Za-z_][\w.$]*:", line):          # a function's label: new body
            mfma = Counter()
        m = re.match(r"^\s+(v_mfma\w*)", line)
        if m:
            mfma[m.group(1)] += 1
        m = re.match(r"^\s*\.amdhsa_kernel\s+(\S+)", line)
        if m:
            current = m.group(1)
            kernels[current] = {"mfma": dict(mfma)}
            continue
        m = re.match(r"^; (\w+): (\d+)", line)
        if m and current and m.group(1) in COMMENTS:
            kernels[current][m.group(1)] = int(m.group(2))
        # metadata: one YAML record per kernel, "  - .key: value" then "    .key: value"
        m = re.match(r"^\s+(- )?\.(\w+):\s+(\S+)", line)
        if m:
            if m.group(1):
                record = {}
            record[m.group(2)] = m.group(3)
            if m.group(2) == "name" or "name" in record:
                k = kernels.get(record.get("name", ""))
                if k is not None:
                    for key in METADATA:
                        if key in record:
                            k[key] = int(record[key])
    return kernels


def main() -> None:
    for path in sys.argv[1:]:
        print(f"# {path}")
        print(f"{'kernel':28} {'vgpr':>4} {'agpr':>4} {'total':>5} {'sgpr':>4} {'lds':>6} "
              f"{'scratch':>7} {'spill':>5} {'occ':>3}  mfma")
        for name, k in readout(open(path).read()).items():
            spills = k.get("vgpr_spill_count", 0) + k.get("sgpr_spill_count", 0)
            ops = " ".join(f"{op}*{n}" for op, n in sorted(k["mfma"].items()))
            print(f"{name:28} {k.get('NumVgprs', '?'):>4} {k.get('NumAgprs', 0):>4} "
                  f"{k.get('TotalNumVgprs', k.get('NumVgprs', '?')):>5} "
                  f"{k.get('NumSgprs', '?'):>4} {k.get('LDSByteSize', '?'):>6} "
                  f"{k.get('ScratchSize', '?'):>7} {spills:>5} {k.get('Occupancy', '?'):>3}  "
                  f"{ops}")


if __name__ == "__main__":
    main()
