"""Which GPUs a machine has, asked of each backend's driver before anything is built
(`Toolchain.find_gpus`), and which of them run code built for an arch (`can_run`): CUDA's
from libcuda (only its arithmetic is checked here: no GPU), AMD's from amdkfd's topology,
read from a folder laid out as /sys/class/kfd/kfd/topology/nodes."""
from __future__ import annotations

import pytest

from ptc.runtime.errors import NoDevice
from ptc.runtime.library import GpuInfo
from ptc.runtime.measured import peaks_target
from ptc.runtime.toolchains import toolchain
from ptc.targets.cuda import driver as cuda_driver
from ptc.targets.hip import driver as hip_driver


def node(root, index: int, version: int, name: str = "") -> None:
    folder = root / str(index)
    folder.mkdir(parents=True)
    (folder / "properties").write_text(f"cpu_cores_count {0 if version else 16}\n"
                                       f"simd_count {0 if not version else 440}\n"
                                       f"gfx_target_version {version}\nvendor_id 4098\n")
    if name:
        (folder / "name").write_text(name + "\n")


def test_amdkfd_lists_the_gpu_nodes_by_their_gfx_target_version(tmp_path):
    node(tmp_path, 0, 0, "")                          # the CPU
    node(tmp_path, 1, 90402, "gfx942")
    node(tmp_path, 10, 90010)                         # nodes in number order, not by name
    node(tmp_path, 2, 90010, "aldebaran")
    gpus = hip_driver.find_gpus(tmp_path)
    assert gpus == [GpuInfo(0, "gfx942", "gfx942"), GpuInfo(1, "aldebaran", "gfx90a"),
                    GpuInfo(2, "AMD GPU", "gfx90a")]


def test_gfx_names_read_the_stepping_as_a_hex_digit():
    assert [hip_driver.gfx_name(v) for v in (90010, 90402, 90008, 90500, 110501, 100306)] == \
        ["gfx90a", "gfx942", "gfx908", "gfx950", "gfx1151", "gfx1036"]


def test_no_amd_driver_or_no_gpu_node_is_no_device(tmp_path):
    with pytest.raises(NoDevice, match=r"no AMD GPU found \(.*missing does not exist"):
        hip_driver.find_gpus(tmp_path / "missing")
    node(tmp_path, 0, 0)
    with pytest.raises(NoDevice, match="lists no GPU node") as caught:
        hip_driver.find_gpus(tmp_path)
    assert caught.value.reason.endswith("lists no GPU node")


def test_each_backend_asks_its_own_driver(tmp_path, monkeypatch):
    node(tmp_path, 1, 90402, "gfx942")
    monkeypatch.setattr(hip_driver, "TOPOLOGY", str(tmp_path))
    hip = toolchain("hip")
    (gpu,) = hip.find_gpus()
    assert hip.can_run(gpu, "gfx942") and not hip.can_run(gpu, "gfx90a")
    monkeypatch.setattr(cuda_driver, "find_gpus", lambda: [GpuInfo(0, "H100", "sm_90")])
    cuda = toolchain("cuda")
    assert cuda.find_gpus()[0].arch == "sm_90"


def test_which_cuda_gpus_run_which_arch():
    can_run = cuda_driver.can_run
    h100, b200, l4 = GpuInfo(0, "H100", "sm_90"), GpuInfo(0, "B200", "sm_100"), \
        GpuInfo(0, "L4", "sm_89")
    assert can_run(h100, "sm_90a") and can_run(h100, "sm_80") and can_run(h100, "sm_90")
    assert not can_run(b200, "sm_90a") and can_run(b200, "sm_90") and can_run(b200, "sm_80")
    assert can_run(l4, "sm_89") and not can_run(l4, "sm_90") and not can_run(l4, "sm_90a")
    assert cuda_driver.capability("sm_100a") == (10, 0, "a")
    assert cuda_driver.capability("gfx942") is None
    assert not can_run(GpuInfo(0, "odd", "gfx942"), "sm_80")


def test_the_peaks_of_a_gpu_come_from_its_familys_description():
    cuda, hip = toolchain("cuda"), toolchain("hip")
    assert peaks_target(GpuInfo(0, "H200", "sm_90"), cuda) == "sm90"
    assert peaks_target(GpuInfo(0, "A100", "sm_80"), cuda) == "sm80"
    assert peaks_target(GpuInfo(0, "L4", "sm_89"), cuda) == "sm80"
    assert peaks_target(GpuInfo(0, "B200", "sm_100"), cuda) == ""
    assert peaks_target(GpuInfo(0, "MI300X", "gfx942"), hip) == "gfx942"
    assert peaks_target(GpuInfo(0, "MI250X", "gfx90a"), hip) == "gfx90a"
    assert peaks_target(GpuInfo(0, "MI100", "gfx908"), hip) == ""
