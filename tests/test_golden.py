"""Golden snapshots of the generated source and of the lowered kernel it is printed from
(`ptc compile --emit lowered`: layouts, buffers, every op, wait and barrier): one file per
sample x target each, reviewed when they change. Regenerate with PTC_UPDATE_GOLDENS=1
(then read the diff before committing)."""
import os
from pathlib import Path

import pytest

from ptc.cli.schedule import per_grid
from ptc.driver import check_file, lowered, render
from ptc.lower import print_lowered

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted(p.stem for p in (ROOT / "samples").glob("*.pt"))
GOLDEN = ROOT / "tests" / "golden"
LOWERED = GOLDEN / "lowered"          # <sample>.<target>.lowered
TARGETS = {"sm80": ".cu", "sm90": ".cu", "gfx90a": ".hip", "gfx942": ".hip"}


def cases():
    return [(name, target) for name in SAMPLES for target in TARGETS]


@pytest.mark.parametrize("name,target", cases(), ids=[f"{n}.{t}" for n, t in cases()])
def test_generated_source_matches_golden(name, target):
    kernel = check_file(ROOT / "samples" / f"{name}.pt").kernels[0]
    source = render(kernel, target)[0]
    path = GOLDEN / f"{name}.{target}{TARGETS[target]}"
    if os.environ.get("PTC_UPDATE_GOLDENS"):
        path.write_text(source)
    assert path.exists(), f"{path} is missing: run PTC_UPDATE_GOLDENS=1 pytest {__file__}"
    assert source == path.read_text(), (
        f"{path.name} changed: review `PTC_UPDATE_GOLDENS=1 pytest -k {name}` and git diff")


@pytest.mark.parametrize("name,target", cases(), ids=[f"{n}.{t}" for n, t in cases()])
def test_lowered_kernel_matches_golden(name, target):
    """The IR between the plan and the source: a change of layout, buffer, wait or
    barrier shows here in the lowering's words before it shows in the C++."""
    kernel = check_file(ROOT / "samples" / f"{name}.pt").kernels[0]
    text = per_grid([print_lowered(low) for low in lowered(kernel, target)[0]], kernel, "#")
    path = LOWERED / f"{name}.{target}.lowered"
    if os.environ.get("PTC_UPDATE_GOLDENS"):
        LOWERED.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} is missing: run PTC_UPDATE_GOLDENS=1 pytest {__file__}"
    assert text == path.read_text(), (
        f"{path.name} changed: review `PTC_UPDATE_GOLDENS=1 pytest -k {name}` and git diff")


def test_every_golden_has_a_sample():
    expected = {f"{n}.{t}{TARGETS[t]}" for n, t in cases()}
    present = {p.name for p in GOLDEN.iterdir() if p.is_file()}
    assert present <= expected, f"stale goldens: {sorted(present - expected)}"
    lowered_expected = {f"{n}.{t}.lowered" for n, t in cases()}
    lowered_present = {p.name for p in LOWERED.iterdir()}
    assert lowered_present <= lowered_expected, \
        f"stale lowered goldens: {sorted(lowered_present - lowered_expected)}"
