"""The resource report of `ptxas -v` (what nvcc -Xptxas -v prints), parsed.

    ptxas info    : Compiling entry function '_Z4gemm...' for 'sm_80'
    ptxas info    : Function properties for _Z4gemm...
        0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 168 registers, used 1 barriers, 16384 bytes smem, 400 bytes cmem[0]

Entry functions (kernels) get their registers, barriers, static shared memory, constant
memory, stack and spills; device functions that were not inlined only have a stack frame
and spills, which count too (`PtxasReport.spills`). Dynamic shared memory is not in the
report: it is set at launch.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from ptc.runtime.symbols import demangle, kernel_name, short_name


@dataclass(frozen=True)
class KernelResources:
    name: str                 # the (mangled) symbol
    arch: str = ""            # sm_80, sm_90a
    registers: int = 0
    barriers: int = 0
    smem_bytes: int = 0       # static shared memory
    cmem_bytes: int = 0       # constant bank 0 (the parameters)
    stack_bytes: int = 0
    spill_stores: int = 0     # bytes
    spill_loads: int = 0      # bytes
    is_entry: bool = True
    display_name: str = ""    # demangled, when c++filt is there

    @property
    def spills(self) -> int:
        return self.spill_stores + self.spill_loads


@dataclass(frozen=True)
class PtxasReport:
    kernels: tuple[KernelResources, ...] = ()      # entry functions, in ptxas's order
    functions: tuple[KernelResources, ...] = ()    # device functions that were not inlined
    warnings: tuple[str, ...] = ()
    text: str = field(default="", repr=False)

    def tables(self, arch: str) -> list[tuple[str, tuple[str, ...], list[tuple]]]:
        """What `ptc build` prints (every backend's report has tables() and alerts()): per
        table its title, columns and rows, each cell (text, alarming)."""
        rows = []
        for k in self.kernels + self.functions:
            name = short_name(k.display_name or k.name)
            entry = k.is_entry
            spill = bool(k.spills)
            rows.append(((name if entry else name + " (device function)", False),
                         (str(k.registers) if entry else "-", False),
                         (f"{k.smem_bytes} B" if entry else "-", False),
                         (f"{k.stack_bytes} B", False), (f"{k.spill_stores} B", spill),
                         (f"{k.spill_loads} B", spill)))
        columns = ("kernel", "registers", "smem (static)", "stack", "spill stores",
                   "spill loads")
        return [(f"ptxas: {arch}", columns, rows)]

    def alerts(self) -> list[str]:
        return [f"ptxas spilled {self.spills} bytes to local memory"] if self.spills else []

    @property
    def spills(self) -> int:
        """Spilled bytes (stores + loads) over every kernel and device function."""
        return sum(k.spills for k in self.kernels + self.functions)

    def to_json(self) -> dict:
        def one(k: KernelResources) -> dict:
            return {"name": k.name, "display_name": k.display_name or k.name, "arch": k.arch,
                    "registers": k.registers, "barriers": k.barriers,
                    "smem_bytes": k.smem_bytes, "cmem_bytes": k.cmem_bytes,
                    "stack_bytes": k.stack_bytes, "spill_stores": k.spill_stores,
                    "spill_loads": k.spill_loads}

        return {"kernels": [one(k) for k in self.kernels],
                "functions": [one(f) for f in self.functions],
                "spills": self.spills, "warnings": list(self.warnings)}


_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_FIELDS = {
    "barriers": re.compile(r"used (\d+) barriers"),
    "smem_bytes": re.compile(r"(\d+) bytes smem"),
    "cmem_bytes": re.compile(r"(\d+) bytes cmem\[0\]"),
}


def parse_ptxas(text: str) -> PtxasReport:
    entries: dict[str, KernelResources] = {}
    functions: dict[str, KernelResources] = {}
    warnings: list[str] = []
    current_entry: str | None = None
    props_for: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if "ptxas warning" in line or "ptxas error" in line:
            warnings.append(line)
        if m := _ENTRY.search(line):
            current_entry = kernel_name(m.group(1))
            entries[current_entry] = KernelResources(current_entry, m.group(2))
            props_for = None
            continue
        if m := _PROPS.search(line):
            props_for = kernel_name(m.group(1))
            continue
        if m := _FRAME.search(line):
            if props_for is None:
                continue
            stack, stores, loads = (int(g) for g in m.groups())
            if props_for in entries:
                entries[props_for] = replace(entries[props_for], stack_bytes=stack,
                                             spill_stores=stores, spill_loads=loads)
            else:
                functions[props_for] = KernelResources(props_for, "", stack_bytes=stack,
                                                       spill_stores=stores, spill_loads=loads,
                                                       is_entry=False)
            props_for = None
            continue
        if (m := _USED.search(line)) and current_entry is not None:
            values = {"registers": int(m.group(1))}
            for key, pattern in _FIELDS.items():
                if f := pattern.search(line):
                    values[key] = int(f.group(1))
            entries[current_entry] = replace(entries[current_entry], **values)
    names = demangle(list(entries) + list(functions))
    return PtxasReport(
        tuple(replace(k, display_name=names.get(k.name, k.name)) for k in entries.values()),
        tuple(replace(f, display_name=names.get(f.name, f.name)) for f in functions.values()),
        tuple(warnings), text)
