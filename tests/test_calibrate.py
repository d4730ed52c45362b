"""ptc calibrate (ptc.calibrate): the [EST] figures of a device YAML, the robust fit, the
calibrated YAML and the command -- on a synthetic table of "measurements" made by the cost
model itself with known figures changed (no GPU: the fit must find the change again)."""
from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

import ptc.calibrate as calibrate_module
from ptc import driver
from ptc.calibrate import (Error, calibrate, calibrated_yaml, estimated, scan, with_values)
from ptc.cli import cli
from ptc.devices import get_device, load_device
from ptc.runtime import measured as M
from ptc.sched.cost import plan_estimate
from ptc.sched.plan import plans_to_json

ROOT = Path(__file__).resolve().parent.parent
# the change the synthetic GPU has: 60 % of the L2 bandwidth, 1.5x the TMA latency
CHANGE = {"memory.l2_bandwidth_gbs": 0.6, "eu.units.tma.latency_cycles": 1.5}
WORKLOADS = [("gemm", {"M": 2048, "N": 2048, "K": 2048}),
             ("gemm", {"M": 512, "N": 512, "K": 8192}),
             ("flash_attn", {"B": 1, "H": 8, "S": 2048, "T": 2048}),
             ("softmax", {}),
             # few tiles and a short loop: its time is the copies' latency
             ("gemm", {"M": 256, "N": 256, "K": 512})]


def ptc(*args):
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def changed_device(device, change):
    figures = {f.name: f for f in estimated(Path(device.path).read_text())}
    return with_values(device, {figures[k].path: figures[k].value * v for k, v in change.items()})


@pytest.fixture(scope="module")
def synthetic() -> M.Document:
    """The three best plans of each workload, "timed" by the model on the changed sm90."""
    sm90 = get_device("sm90")
    gpu = changed_device(sm90, CHANGE)
    rows = []
    for sample, shapes in WORKLOADS:
        kernel = driver.check_file(ROOT / "samples" / f"{sample}.pt", shapes).kernels[0]
        result = driver.schedule_grids(kernel, "sm90", shapes=shapes)[0]
        dims = dict(result.dims)
        for c in result.ranked[:3]:
            seconds = plan_estimate(c.plan, c.graph, gpu, dims).seconds
            rows.append(M.Row(sample, f"samples/{sample}.pt", kernel.name, "sm90",
                              tuple(sorted(shapes.items())), tuple(sorted(dims.items())),
                              plans_to_json([c.plan]), c.label(), seconds * 1e3,
                              runs=1, model_ms=c.plan.estimate.seconds * 1e3))
    rows.append(replace(rows[0], target="sm80", workload="an sm80 row"))   # not of sm90
    return M.Document("Synthetic GPU (the cost model, changed)", "sm_90", "2026-12-01",
                      tuple(rows), source="tests/test_calibrate.py", fabricated=True)


@pytest.fixture(autouse=True)
def at_the_root(monkeypatch):
    monkeypatch.chdir(ROOT)          # the rows name their .pt files from the repository


# ---- figures ----------------------------------------------------------------------------------
def test_the_estimated_figures_of_sm90():
    text = (ROOT / "ptc" / "devices" / "sm90.yaml").read_text()
    names = [f.name for f in estimated(text)]
    assert names[:2] == ["memory.l2_bandwidth_gbs", "memory.dram_latency_cycles"]
    assert "eu.units.tma.latency_cycles" in names
    assert "eu.units.tensor_core.issue_latency_cycles" in names
    assert "eu.units.cuda_core.latency_cycles" in names        # [EST, ...] counts too
    assert "eu.units.cuda_core.issue_latency_cycles" not in names   # not tagged
    assert "clock_ghz" not in names and "eu_count" not in names
    every = {f.name: f for f in scan(text)}
    assert every["eu_count"].value == 132 and every["memory.l2_bytes"].value == 52428800


def test_a_device_with_other_figures():
    sm90 = get_device("sm90")
    out = changed_device(sm90, {"memory.l2_bandwidth_gbs": 2.0,
                                "eu.units.sfu.latency_cycles": 0.5})
    assert out.memory.l2_bandwidth_gbs == 2 * sm90.memory.l2_bandwidth_gbs
    assert out.unit("sfu").latency_cycles == 10 and out.unit("tma") == sm90.unit("tma")


def test_errors_are_ratios_of_model_to_measured():
    e = Error((0.5, 1.0, 1.5, 1.2))
    assert e.median == pytest.approx(1.1) and e.worst == 0.5
    assert e.typical == pytest.approx(math.exp((math.log(2) + math.log(1.5) + math.log(1.2)) / 4))


# ---- the fit ----------------------------------------------------------------------------------
def test_the_fit_finds_the_change_again(synthetic):
    cal = calibrate([synthetic], "sm90", date="2026-12-01")
    fitted = {f.name: v / f.value for f, v in zip(cal.fit.figures, cal.fit.values)}
    assert fitted["memory.l2_bandwidth_gbs"] == pytest.approx(0.6, rel=0.05)
    assert fitted["eu.units.tma.latency_cycles"] > 1.1            # found, if less sharply
    assert cal.fit.before.median < 0.8 and cal.fit.before.worst < 0.7
    assert cal.fit.after.median == pytest.approx(1.0, abs=0.01)
    assert abs(math.log(cal.fit.after.worst)) < math.log(1.03)
    # figures these plans do not exercise stay at their estimates
    assert "memory.dram_latency_cycles" in cal.fit.insensitive
    assert fitted["eu.units.sfu.latency_cycles"] == 1.0
    assert len(cal.observations) == 15                            # the sm80 row is not used


def test_measurements_that_agree_change_nothing(synthetic):
    exact = replace(synthetic, rows=tuple(replace(r, median_ms=r.model_ms)
                                          for r in synthetic.rows))
    cal = calibrate([exact], "sm90", date="2026-12-01")
    assert cal.changes() == []
    assert cal.fit.before.median == pytest.approx(1.0) and cal.fit.after.worst == pytest.approx(1.0)


def test_a_fit_is_kept_by_what_it_depends_on(synthetic, tmp_path, monkeypatch):
    """The fit is memoized like a search (ptc.stage_cache): the same rows and device fit
    once; another measured time, or another device description, fits again."""
    from ptc.stage_cache import STAGES

    monkeypatch.setenv("PTC_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(STAGES, "memory", {})
    fits = []
    real = calibrate_module.fit
    monkeypatch.setattr(calibrate_module, "fit", lambda *a: fits.append(1) or real(*a))
    two = replace(synthetic, rows=synthetic.rows[:2])      # two rows fit fast
    first = calibrate([two], "sm90", date="2026-12-01")
    assert calibrate([two], "sm90", date="2026-12-02").fit == first.fit
    assert len(fits) == 1
    slower = replace(two, rows=(replace(two.rows[0], median_ms=two.rows[0].median_ms * 2),
                                two.rows[1]))
    assert calibrate([slower], "sm90", date="2026-12-01").fit != first.fit
    other = tmp_path / "sm90-other.yaml"
    other.write_text((ROOT / "ptc" / "devices" / "sm90.yaml").read_text() + "# another file\n")
    calibrate([two], str(other), date="2026-12-01")
    assert len(fits) == 3


def test_the_calibrated_yaml_is_tagged_and_loads(synthetic, tmp_path):
    cal = calibrate([synthetic], "sm90", date="2026-12-01", gpu="Synthetic GPU")
    text = cal.yaml_text
    assert text.startswith("# Calibrated by ptc calibrate on 2026-12-01 from 15 timed plan(s) "
                           "on Synthetic GPU -- FABRICATED TEST DATA, NOT A MEASUREMENT.")
    l2 = next(line for line in text.splitlines() if "l2_bandwidth_gbs:" in line)
    assert l2.split("#")[0].split() == ["l2_bandwidth_gbs:", str(int(cal.fit.values[0]))]
    assert "[MEASURED 2026-12-01 Synthetic GPU; was 9370]" in l2 and "[EST" not in l2
    assert "5120 B/clk" in l2                                     # the rest of the comment
    sfu = next(line for line in text.splitlines() if "latency_cycles: 20" in line)
    assert "[EST]" in sfu                                         # unchanged: still estimated
    (tmp_path / "sm90.calibrated.yaml").write_text(text)
    device = load_device(tmp_path / "sm90.calibrated.yaml")
    assert device.name == "sm90"
    assert device.memory.l2_bandwidth_gbs == cal.fit.values[0]
    assert replace(device, path=None, memory=get_device("sm90").memory, units=()) == \
        replace(get_device("sm90"), path=None, units=())          # only fitted figures differ


def test_a_figure_line_keeps_its_comment_column():
    text = "memory:\n  l2_bandwidth_gbs: 9370         # [EST] a guess\n"
    figure = estimated(text)[0]
    out = calibrated_yaml(text, [(figure, 12000.0)], date="D", gpu="G", header=[])
    assert out == "memory:\n  l2_bandwidth_gbs: 12000        # [MEASURED D G; was 9370] a guess\n"


# ---- the command -------------------------------------------------------------------------------
def test_ptc_calibrate_writes_the_yaml_and_reports_the_error(synthetic, tmp_path):
    results = tmp_path / "measured.json"
    results.write_text(M.dumps(synthetic))
    out_yaml = tmp_path / "sm90.calibrated.yaml"
    code, out, err = ptc("calibrate", results, "--device", "sm90", "-o", out_yaml)
    assert code == 0, err
    # the synthetic GPU is slower than the model says (less L2 bandwidth, slower TMA):
    # how much depends on what bounds the plans, so the ratio is read, not fixed
    before = float(re.search(r"model/measured before: median (\d\.\d+)", out).group(1))
    assert 0.5 < before < 0.9, out
    assert "model/measured after:  median 1.00" in out or "after:  median 0.99" in out
    assert "skipped" not in out and f"wrote {out_yaml}" in out
    assert load_device(out_yaml).memory.l2_bandwidth_gbs < 6000
    code, out, _ = ptc("calibrate", results, "-t", "sm90", "-o", out_yaml, "--json")
    data = json.loads(out)
    assert data["date"] == "2026-12-01" and data["after"]["median"] == pytest.approx(1, abs=0.01)
    assert {f["figure"] for f in data["figures"] if f["changed"]} >= {"memory.l2_bandwidth_gbs"}


def test_ptc_calibrate_refuses_what_it_cannot_use(synthetic, tmp_path):
    results = tmp_path / "measured.json"
    results.write_text(M.dumps(synthetic))
    code, _, err = ptc("calibrate", results, "-t", "sm80", "-o", tmp_path / "x.yaml")
    assert code == 1 and "no timed plan of target sm80" in err     # its only row is of...
    only80 = replace(synthetic, rows=tuple(r for r in synthetic.rows if r.target == "sm90")[:0])
    (tmp_path / "empty.json").write_text(M.dumps(only80))
    code, _, err = ptc("calibrate", tmp_path / "empty.json", "-t", "sm90", "-o",
                       tmp_path / "x.yaml")
    assert code == 1 and "no timed plan of target sm90" in err
    (tmp_path / "bad.json").write_text('{"format": "other"}')
    code, _, err = ptc("calibrate", tmp_path / "bad.json", "-t", "sm90", "-o", tmp_path / "x.yaml")
    assert code == 1 and "is not a table of measurements" in err
    code, _, err = ptc("calibrate", tmp_path / "missing.json", "-t", "sm90", "-o",
                       tmp_path / "x.yaml")
    assert code == 1 and "missing.json: no such file" in err
    code, _, err = ptc("calibrate", results, "-t", "sm90")
    assert code == 2 and "--output" in err
