"""Kernel symbols as people read them, for every backend's resource report: ptc's
templated kernel names shortened (`ptc_gemm_kernel<true>`) and C++ names demangled."""
from __future__ import annotations

import re
import shutil
import subprocess


def short_name(name: str, width: int = 60) -> str:
    return name if len(name) <= width else name[:width - 3] + "..."


def kernel_name(symbol: str) -> str:
    """A readable name for a kernel symbol: ptc's kernels are templates on ALIGNED, so
    `_Z15ptc_gemm_kernelILb1EEv...` reads `ptc_gemm_kernel<true>`, and those of a kernel
    with several grids are in a namespace per grid: `_ZN5grid115ptc_..._kernelILb1EEEv...`
    reads `grid1::ptc_..._kernel<true>`."""
    m = re.match(r"_ZN(\d+)(\w+)", symbol)
    if m:
        space = m.group(2)[:int(m.group(1))]
        inner = kernel_name("_Z" + m.group(2)[int(m.group(1)):].replace("EEEv", "EEv", 1))
        return f"{space}::{inner}" if not inner.startswith("_Z") else symbol
    m = re.match(r"_Z(\d+)(\w+)", symbol)
    if not m:
        return symbol
    name = m.group(2)[:int(m.group(1))]
    rest = m.group(2)[int(m.group(1)):]
    args = re.match(r"IL(b)([01])EE", rest)
    if args:
        return f"{name}<{'true' if args.group(2) == '1' else 'false'}>"
    return symbol


def demangle(symbols: list[str]) -> dict[str, str]:
    """Itanium C++ names as c++filt prints them (unchanged where c++filt is missing)."""
    mangled = [s for s in symbols if s.startswith("_Z")]
    tool = shutil.which("cu++filt") or shutil.which("c++filt")
    if not mangled or tool is None:
        return {}
    try:
        out = subprocess.run([tool], input="\n".join(mangled) + "\n", capture_output=True,
                             text=True, timeout=30, check=True).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return {}
    if len(out) != len(mangled):
        return {}
    return dict(zip(mangled, out))
