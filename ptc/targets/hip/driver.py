"""AMD GPUs as the kernel driver (amdkfd) lists them, before anything is built: no ROCm
needed. Each GPU is a node of /sys/class/kfd/kfd/topology/nodes whose `properties` give
`gfx_target_version` (major * 10000 + minor * 100 + stepping: 90010 for gfx90a, 90402 for
gfx942) and whose `name` names it; CPU nodes say 0. (Code built for a gfx arch runs on
that arch alone: the Toolchain's default can_run.)"""
from __future__ import annotations

from pathlib import Path

from ptc.runtime.errors import NoDevice
from ptc.runtime.library import GpuInfo

TOPOLOGY = "/sys/class/kfd/kfd/topology/nodes"


def find_gpus(topology: str | Path | None = None) -> list[GpuInfo]:
    """The AMD GPUs amdkfd lists (ROCR_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES are not
    applied: the runtime applies them when it runs); NoDevice("no AMD GPU found (why)")
    if there are none."""
    root = Path(topology or TOPOLOGY)
    if not root.is_dir():
        raise no_gpu(f"{root} does not exist: no amdgpu kernel driver on this machine")
    gpus = []
    for node in sorted(root.iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1):
        version = _property(node / "properties", "gfx_target_version")
        if version:
            name = _read(node / "name") or "AMD GPU"
            gpus.append(GpuInfo(len(gpus), name, gfx_name(version)))
    if not gpus:
        raise no_gpu(f"{root} lists no GPU node")
    return gpus


def gfx_name(version: int) -> str:
    """90010 -> gfx90a, 90402 -> gfx942: the stepping is a hex digit."""
    major, minor, stepping = version // 10000, version // 100 % 100, version % 100
    return f"gfx{major}{minor}{stepping:x}"


def _property(path: Path, key: str) -> int:
    for line in _read(path).splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == key and parts[1].isdigit():
            return int(parts[1])
    return 0


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def no_gpu(reason: str) -> NoDevice:
    return NoDevice(f"no AMD GPU found ({reason})", reason=reason)

