"""The lowered kernel's resources (ptc.lower.verify): what gets built is checked, not only
the plan's buffers -- every sample's kernel passes, and each kind of broken placement is
named."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from ptc.devices import get_device
from ptc.driver import check_file, lowered
from ptc.lower import ir
from ptc.lower.verify import resource_problems
from test_cli_schedule import ptc

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def lowered_sample(name: str, target: str) -> ir.LoweredKernel:
    kernel = check_file(SAMPLES / f"{name}.pt").kernels[0]
    return lowered(kernel, target)[0][0]


@pytest.mark.parametrize("target", ["sm80", "sm90", "gfx90a", "gfx942"])
def test_the_samples_kernels_pass(target):
    for name in ("gemm", "flash_attn", "softmax", "mamba2_chunk_scan"):
        assert resource_problems(lowered_sample(name, target), get_device(target)) == []


def test_buffers_that_share_bytes_while_live_are_named():
    low = lowered_sample("gemm", "sm80")            # A_smem and B_smem, both live in the loop
    a, b = sorted(low.buffers, key=lambda x: x.offset)
    moved = replace(low, buffers=(a, replace(b, offset=a.offset)))
    (problem,) = resource_problems(moved, get_device("sm80"))
    assert f"{a.name} ({a.offset}..{a.end}) and {b.name} ({a.offset}..{a.offset + b.bytes}) " \
           "share bytes while both are live" in problem


def test_a_buffer_past_the_launch_and_a_launch_past_the_device_are_named():
    low = lowered_sample("gemm", "sm80")
    device = get_device("sm80")
    small = replace(low, launch=replace(low.launch, dynamic_smem=1024))
    assert any("lies outside the launch's 1024 bytes" in p
               for p in resource_problems(small, device))
    big = device.resources.shared_memory_bytes + 16
    huge = replace(low, launch=replace(low.launch, dynamic_smem=big))
    assert f"{big} bytes of shared memory, over sm80's" in resource_problems(huge, device)[0]
    odd = replace(low, launch=replace(low.launch, threads=low.launch.threads + 1))
    assert "threads are not" in resource_problems(odd, device)[0]


def test_warp_specialized_buffers_and_mbarriers_never_share_bytes():
    low = lowered_sample("gemm", "sm90")
    assert any(isinstance(op, ir.Specialized) for op in low.body)
    (init,) = [op for op in low.body if isinstance(op, ir.InitBarriers)]
    first = init.barriers[0]
    clash = replace(init, barriers=(replace(first, offset=low.buffers[0].offset),
                                    *init.barriers[1:]))
    body = tuple(clash if op is init else op for op in low.body)
    problems = resource_problems(replace(low, body=body), get_device("sm90"))
    assert any(f"mbarriers {first.name}" in p and "share bytes while both are live" in p
               for p in problems)


def test_a_pinned_plan_as_built_is_verified_and_lowered_again(tmp_path):
    """The plan as built carries its kernel's shared memory, which may be less than its
    buffers' sum (the lowering reuses bytes); pinned, it verifies and builds the same."""
    code, plan, _ = ptc("compile", SAMPLES / "mamba2_chunk_scan.pt", "-t", "sm80", "--emit", "plan")
    assert code == 0
    path = tmp_path / "plan.json"
    path.write_text(plan)
    code, pinned, _ = ptc("compile", SAMPLES / "mamba2_chunk_scan.pt", "-t", "sm80", "--emit",
                          "lowered", "--schedule", path)
    _, searched, _ = ptc("compile", SAMPLES / "mamba2_chunk_scan.pt", "-t", "sm80", "--emit",
                         "lowered")
    assert code == 0 and pinned == searched
