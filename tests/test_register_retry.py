"""Where ptxas spills within the registers the lowering's MIN_BLOCKS leaves it (0: ptxas's
own occupancy heuristic, which spills a few bytes where a few more registers would do),
the build compiles the kernel again asking for the plan's blocks per SM, then for one block
(kernel.cu's PTC_REGISTER_TRY, ptc.runtime.build), and keeps the first attempt without
spills, else the one with the fewest. build.sh, the Makefile and build.json say which."""
from __future__ import annotations

import importlib
import json
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from ptc.runtime.toolchain import Step

build_module = importlib.import_module("ptc.runtime.build")
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Report:
    spills: int


class Chain:
    """A toolchain whose compiles report the spills of each attempt (no compiler runs)."""

    kernel_file = "kernel.cu"

    def __init__(self, spills):
        self.spills = spills

    def retried(self, step: Step, attempt: int) -> Step | None:
        if attempt >= len(self.spills):
            return None
        return replace(step, command=step.command + (f"try={attempt}",))

    def parse(self, text: str) -> Report:
        return Report(int(text))


KERNEL = Step("kernel.o", ("kernel.cu",), ("nvcc", "kernel.cu"), 0)


@pytest.mark.parametrize("spills,chosen,compiles", [
    ((0, 8, 8), 0, []),                   # no spills: compiled once
    ((16, 0, 0), 1, [1]),                 # the plan's blocks do without
    ((16, 8, 0), 2, [1, 2]),              # one block does
    ((16, 24, 32), 0, [1, 2, 0]),         # none does better: the first, compiled again
    ((16, 4, 8), 1, [1, 2, 1]),           # the fewest, compiled again (the folder's last)
])
def test_the_kernel_is_compiled_again_while_it_spills(monkeypatch, spills, chosen, compiles):
    chain = Chain(spills)
    ran = []

    def run(steps, folder, echo, chain_, compiler):
        (step,) = steps
        attempt = int(step.command[-1].split("=")[1]) if "try=" in step.command[-1] else 0
        ran.append(attempt)
        return {step.output: str(spills[attempt])}
    monkeypatch.setattr(build_module, "_run_parallel", run)
    attempt, report = build_module._fewest_spills(KERNEL, str(spills[0]), Path("."), None,
                                                  chain, None)
    assert (attempt, int(report), ran) == (chosen, spills[chosen], compiles)


@pytest.mark.nvcc
def test_a_build_that_spilled_says_which_attempt_it_kept(tmp_path):
    """paged_decode's sm80 plan leaves ptxas its own budget, which took 64 registers and
    spilled 8 bytes (nvcc 13); the build keeps an attempt without spills, and its commands
    (build.sh, the Makefile, build.json) are the ones that made the objects."""
    from ptc.runtime import prepare

    prepared = prepare(ROOT / "samples" / "paged_decode.pt", "sm80")
    folder = tmp_path / "build"
    build_module.write_build_dir(folder, kernel_source=prepared.source,
                                 signature=prepared.signature, arch=prepared.device.arch,
                                 target=prepared.target, plan_json=prepared.plan_json)
    said = []
    result = build_module.build(folder, prepared.device.arch, echo=said.append)
    assert result.ptxas.spills == 0, result.ptxas.text
    retried = any(line.startswith("# ptxas spilled") for line in said)
    recorded = json.loads((folder / "build.json").read_text())["commands"][0]
    for text in ((folder / "build.sh").read_text(), (folder / "Makefile").read_text(),
                 recorded):
        assert ("-DPTC_REGISTER_TRY=" in text) == retried, text
