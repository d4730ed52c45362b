"""The resources and instructions of AMDGPU kernels, read from the device assembly (.s) that
`clang -x hip --offload-device-only -S` (or hipcc, or `-save-temps`) writes: the analogue of
ptxas.py for the HIP backend (docs/hip.md, "Resource usage readout").

Per kernel, the assembly says the same things in two places, both read here:
- the comments LLVM prints after each kernel: `; NumVgprs:` (architectural VGPRs),
  `; NumAgprs:`, `; TotalNumVgprs:` (gfx90a / gfx942 have one unified file: AccumOffset +
  AGPRs), `; NumSgprs:`, `; ScratchSize:` (bytes per lane), `; LDSByteSize:` (static LDS per
  workgroup) and `; Occupancy:` (waves per SIMD);
- the code object metadata (YAML between `.amdgpu_metadata` and `.end_amdgpu_metadata`):
  `.vgpr_spill_count`, `.sgpr_spill_count` (only here), and the counts above again.
The instructions of each kernel's body are counted by family (v_mfma, ds_read, ...), in all
and in its main loop: the loop (a backward branch) that issues the most v_mfma, else the
most instructions. Scratch without spills is a private array the compiler kept in memory;
ptc treats both as failures (the issue's "no scratch spills").
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import yaml

from ptc.runtime.symbols import demangle, kernel_name, short_name

# the families `ptc build` shows, per main-loop iteration and in the whole kernel
SHOWN = ("v_mfma", "ds_read", "ds_write", "global_load", "s_barrier")
# family: the mnemonic prefixes it counts (v_mfma_f32_32x32x8_bf16 is a v_mfma)
FAMILIES = {
    "v_mfma": ("v_mfma",),
    "ds_read": ("ds_read",),
    "ds_write": ("ds_write",),
    "global_load": ("global_load",),
    "global_store": ("global_store",),
    "buffer_load": ("buffer_load",),
    "buffer_store": ("buffer_store",),
    "s_barrier": ("s_barrier",),
    "scratch": ("scratch_",),          # gfx942's scratch_load / scratch_store (spills)
    "s_waitcnt": ("s_waitcnt",),
    "cross_lane": ("ds_swizzle", "ds_bpermute", "ds_permute", "v_readlane", "v_writelane"),
    # moves between the accumulation registers (AGPRs) and the ALU's (VGPRs)
    "accvgpr": ("v_accvgpr_read", "v_accvgpr_write", "v_accvgpr_mov"),
}
_COMMENTS = {"NumVgprs": "vgprs", "NumAgprs": "agprs", "TotalNumVgprs": "total_vgprs",
             "NumSgprs": "sgprs", "ScratchSize": "scratch_bytes", "LDSByteSize": "lds_bytes",
             "Occupancy": "occupancy"}
_METADATA = {".vgpr_spill_count": "vgpr_spills", ".sgpr_spill_count": "sgpr_spills",
             ".agpr_count": "agprs", ".sgpr_count": "sgprs",
             ".group_segment_fixed_size": "lds_bytes",
             ".private_segment_fixed_size": "scratch_bytes",
             ".max_flat_workgroup_size": "max_threads"}

_TARGET = re.compile(r'^\s*\.amdgcn_target\s+"[\w-]*?--?(gfx\w+)')
_FUNCTION = re.compile(r"^\s*\.type\s+([\w.$]+),\s*@function")
_LABEL = re.compile(r"^([\w.$]+):")
_KERNEL = re.compile(r"^\s*\.amdhsa_kernel\s+(\S+)")
_COMMENT = re.compile(r"^; (\w+): (\d+)")
_INSTRUCTION = re.compile(r"^\s+([a-z][a-z0-9_]*)\b")
_BLOCK = re.compile(r"^; %bb\.\d+:")       # a basic block without a label


@dataclass(frozen=True)
class KernelIsa:
    name: str                  # the symbol
    arch: str = ""             # gfx90a, gfx942
    vgprs: int = 0             # architectural VGPRs per lane
    agprs: int = 0             # accumulation VGPRs per lane
    total_vgprs: int = 0       # the unified file (AccumOffset + AGPRs): what limits occupancy
    sgprs: int = 0
    lds_bytes: int = 0         # static LDS per workgroup
    scratch_bytes: int = 0     # private memory per lane
    vgpr_spills: int = 0
    sgpr_spills: int = 0
    occupancy: int = 0         # waves per SIMD
    max_threads: int = 0       # the launch bound
    instructions: tuple[tuple[str, int], ...] = ()   # per family, the whole kernel
    main_loop: tuple[tuple[str, int], ...] = ()      # per family, one main-loop iteration
    mfma: tuple[tuple[str, int], ...] = ()           # per v_mfma mnemonic, the whole kernel
    display_name: str = ""
    loop_instructions: int = 0   # every instruction of one main-loop iteration
    loop_flops: int = 0          # the FLOPs its v_mfma compute (per wave)
    loop_mnemonics: tuple[tuple[str, int], ...] = ()   # per mnemonic, one main-loop iteration

    @property
    def per_mflop(self) -> float:
        """Main-loop instructions per MFLOP of matrix work (the Triton comparison's unit)."""
        return self.loop_instructions / (self.loop_flops / 1e6) if self.loop_flops else 0.0

    @property
    def spills(self) -> int:
        return self.vgpr_spills + self.sgpr_spills

    @property
    def label(self) -> str:
        """A short name for tables: ptc's kernels read `ptc_gemm_kernel<true>` (ptxas.py's
        kernel_name), others their demangled name without the parameters."""
        if not self.name.startswith("_Z"):
            return short_name(self.name, 40)
        return short_name((self.display_name or self.name).split("(")[0], 40)

    def count(self, family: str) -> int:
        return dict(self.instructions).get(family, 0)

    def loop_count(self, family: str) -> int:
        return dict(self.main_loop).get(family, 0)

    def loop_mnemonic(self, mnemonic: str) -> int:
        return dict(self.loop_mnemonics).get(mnemonic, 0)

    def to_json(self) -> dict:
        return {"name": self.name, "display_name": self.display_name or self.name,
                "arch": self.arch, "vgprs": self.vgprs, "agprs": self.agprs,
                "total_vgprs": self.total_vgprs, "sgprs": self.sgprs,
                "lds_bytes": self.lds_bytes, "scratch_bytes": self.scratch_bytes,
                "vgpr_spills": self.vgpr_spills, "sgpr_spills": self.sgpr_spills,
                "occupancy": self.occupancy, "max_threads": self.max_threads,
                "instructions": dict(self.instructions), "main_loop": dict(self.main_loop),
                "mfma": dict(self.mfma)}


@dataclass(frozen=True)
class IsaReport:
    kernels: tuple[KernelIsa, ...] = ()
    warnings: tuple[str, ...] = ()
    text: str = field(default="", repr=False)

    def tables(self, arch: str) -> list[tuple[str, tuple[str, ...], list[tuple]]]:
        """What `ptc build` prints (every backend's report has tables() and alerts()): per
        table its title, columns and rows, each cell (text, alarming). The resources, then
        the instructions of one main-loop iteration and, in parentheses, of the kernel."""
        resources = [((k.label, False),
                      (str(k.vgprs), False), (str(k.agprs), False), (str(k.sgprs), False),
                      (f"{k.lds_bytes} B", False),
                      (f"{k.scratch_bytes} B", bool(k.scratch_bytes)),
                      (str(k.spills), bool(k.spills)), (str(k.occupancy), False))
                     for k in self.kernels]
        loops = [((k.label, False),)
                 + tuple((f"{k.loop_count(f)} ({k.count(f)})", False) for f in SHOWN)
                 for k in self.kernels]
        return [(f"ISA: {arch}", ("kernel", "VGPRs", "AGPRs", "SGPRs", "LDS (static)",
                                  "scratch/lane", "spills", "waves/SIMD"), resources),
                ("main loop, per wave and iteration (the whole kernel in parentheses)",
                 ("kernel",) + SHOWN, loops)]

    def alerts(self) -> list[str]:
        return [f"{k.display_name or k.name}: {what}" for k in self.kernels
                for what in problems(k)]

    @property
    def spills(self) -> int:
        """Spilled registers (VGPRs + SGPRs) over every kernel."""
        return sum(k.spills for k in self.kernels)

    @property
    def scratch_bytes(self) -> int:
        """The most private memory per lane any kernel uses."""
        return max((k.scratch_bytes for k in self.kernels), default=0)

    def kernel(self, name: str) -> KernelIsa:
        for k in self.kernels:
            if name in (k.name, k.display_name):
                return k
        raise KeyError(name)

    def to_json(self) -> dict:
        return {"kernels": [k.to_json() for k in self.kernels], "spills": self.spills,
                "scratch_bytes": self.scratch_bytes, "warnings": list(self.warnings)}


def family(mnemonic: str) -> str | None:
    for name, prefixes in FAMILIES.items():
        if mnemonic.startswith(prefixes):
            return name
    return None


def parse_isa(text: str) -> IsaReport:
    """The report of one .s file (one target)."""
    lines = text.splitlines()
    functions = {m.group(1) for line in lines if (m := _FUNCTION.match(line))}
    arch = next((m.group(1) for line in lines if (m := _TARGET.match(line))), "")
    bodies = _bodies(lines, functions)
    values: dict[str, dict] = {}
    current = None
    for line in lines:
        if m := _KERNEL.match(line):
            current = m.group(1)
            values.setdefault(current, {})
        elif current and (m := _COMMENT.match(line)) and m.group(1) in _COMMENTS:
            values[current][_COMMENTS[m.group(1)]] = int(m.group(2))
        elif (m := _LABEL.match(line)) and m.group(1) in functions:
            current = None
    for record in _metadata(text):
        name = str(record.get(".name", ""))
        if name not in values:
            continue
        for key, attr in _METADATA.items():
            if key in record:
                values[name].setdefault(attr, int(record[key]))
    names = demangle(list(values))
    kernels = []
    for name, found in values.items():
        body = bodies.get(name, [])
        loop = _main_loop(body)
        found.setdefault("total_vgprs", found.get("vgprs", 0))   # no AGPRs (older targets)
        kernels.append(KernelIsa(
            name=kernel_name(name), arch=arch, **found,
            instructions=_families(body), main_loop=_families(loop),
            loop_instructions=len(loop), loop_flops=sum(mfma_flops(op) for op, _ in loop),
            loop_mnemonics=tuple(sorted(Counter(op for op, _ in loop).items())),
            mfma=tuple(sorted(Counter(op for op, _ in body if op.startswith("v_mfma")).items())),
            display_name=names.get(name, kernel_name(name))))
    return IsaReport(tuple(kernels), (), text)


def mfma_flops(mnemonic: str) -> int:
    """FLOPs of one v_mfma_*_MxNxK* instruction (2 M N K; 0 for anything else)."""
    m = re.match(r"v_mfma_\w+?_(\d+)x(\d+)x(\d+)", mnemonic)
    return 2 * int(m.group(1)) * int(m.group(2)) * int(m.group(3)) if m else 0


def problems(k: KernelIsa) -> list[str]:
    """What ptc counts as a failed build of `k`: spills, or any scratch at all."""
    out = []
    if k.spills:
        out.append(f"spilled {k.vgpr_spills} VGPRs and {k.sgpr_spills} SGPRs to scratch")
    elif k.scratch_bytes:
        out.append(f"uses {k.scratch_bytes} bytes of scratch per lane (a private array "
                   "kept in memory)")
    return out


def _bodies(lines: list[str], functions: set[str]) -> dict[str, list[tuple[str, frozenset]]]:
    """Each function's instructions in order, as (mnemonic, the loops it is in) pairs. The
    loops come from LLVM's own block comments: `; =>This Inner Loop Header: Depth=1` on a
    loop's header, `;   in Loop: Header=BB0_11 Depth=1` on its other blocks, and
    `Parent Loop BB0_3 Depth=1` for each enclosing loop of a nested block."""
    bodies: dict[str, list[tuple[str, frozenset]]] = {}
    current, block = None, ""
    loops: set[str] = set()
    for line in lines:
        label = _LABEL.match(line)
        if label and label.group(1) in functions:
            current, block, loops = label.group(1), "", set()
            bodies[current] = []
        elif current is None:
            continue
        elif label and label.group(1).startswith(".Lfunc_end"):
            current = None
        elif label or _BLOCK.match(line):               # a new basic block
            block = label.group(1) if label else ""
            loops = _loops_of(line, block)
        elif line.lstrip().startswith(";"):             # more comments of the same block
            loops |= _loops_of(line, block)
        elif m := _INSTRUCTION.match(line):
            bodies[current].append((m.group(1), frozenset(loops)))
    return bodies


def _loops_of(comment: str, label: str) -> set[str]:
    found = set(re.findall(r"(?:Header=|Parent Loop )(BB\d+_\d+)", comment))
    if label and "Loop Header:" in comment:
        found.add(label.removeprefix(".L"))
    return found


def _main_loop(body: list[tuple[str, frozenset]]) -> list[tuple[str, frozenset]]:
    """The instructions of one iteration of the loop that issues the most v_mfma, then the
    most nested one (per iteration, not the loop around it), then the longest."""
    members: dict[str, list[tuple[str, frozenset]]] = {}
    for entry in body:
        for loop in entry[1]:
            members.setdefault(loop, []).append(entry)

    def rank(loop: str):
        ops = members[loop]
        depth = min(len(loops) for _, loops in ops)    # its own blocks' nesting
        return (sum(op.startswith("v_mfma") for op, _ in ops), depth, len(ops))

    return members[max(members, key=rank)] if members else []


def _families(body: list[tuple[str, frozenset]]) -> tuple[tuple[str, int], ...]:
    counts = Counter(family(op) for op, _ in body)
    return tuple((name, counts[name]) for name in FAMILIES if counts[name])


def _metadata(text: str) -> list[dict]:
    """The kernels' records of the code object metadata (empty where it is missing)."""
    m = re.search(r"^\s*\.amdgpu_metadata\s*$(.*?)^\s*\.end_amdgpu_metadata", text,
                  re.MULTILINE | re.DOTALL)
    if not m:
        return []
    try:
        data = yaml.safe_load(m.group(1))
    except yaml.YAMLError:
        return []
    kernels = data.get("amdhsa.kernels") if isinstance(data, dict) else None
    return [k for k in kernels or [] if isinstance(k, dict)]

