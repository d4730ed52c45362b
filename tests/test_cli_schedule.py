"""ptc compile --emit stask|dot|plan, --schedule, ptc devices, ptc explain: through the CLI."""
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ptc.cli import cli

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def ptc(*args):
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_emit_stask_and_dot():
    code, out, _ = ptc("compile", SAMPLES / "flash_attn.pt", "--emit", "stask", "--tile", "BN=64")
    assert code == 0
    assert "tiles BM=128, BN=64" in out and "simt_s: simt" in out
    assert "mma_o -> simt_s [o]  (distance 1)" in out
    code, out, _ = ptc("compile", SAMPLES / "gemm.pt", "--emit", "dot")
    assert code == 0 and out.startswith('digraph "gemm"') and 'cluster_k' in out


def test_emit_plan_and_pin_it(tmp_path):
    code, out, _ = ptc("compile", SAMPLES / "gemm.pt", "--target", "sm90", "--emit", "plan")
    assert code == 0
    plan = json.loads(out)
    assert plan["kernel"] == "gemm" and plan["device"] == "sm90"
    path = tmp_path / "plan.json"
    path.write_text(out)
    code, pinned, _ = ptc("compile", SAMPLES / "gemm.pt", "--target", "sm90", "--emit", "plan",
                          "--schedule", path)
    assert code == 0 and json.loads(pinned) == plan


def test_a_pinned_unsafe_plan_is_rejected(tmp_path):
    code, out, _ = ptc("compile", SAMPLES / "flash_attn.pt", "-t", "sm80", "--emit", "plan")
    plan = json.loads(out)
    assert plan["style"] in ("multistage", "interleaved", "sequential")
    for role in plan["roles"]:             # drop every wait for a full K slot: K is read early
        def strip(items):
            for item in items:
                if "loop" in item:
                    strip(item["body"])
                else:
                    item["waits"] = [w for w in item["waits"] if w != "full:k_smem"]
        strip(role["body"])
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(plan))
    code, _, err = ptc("compile", SAMPLES / "flash_attn.pt", "-t", "sm80", "--emit", "plan",
                       "--schedule", path)
    assert code == 1
    assert "load_K" in err and "mma_s" in err


def test_a_plan_for_another_device_or_kernel_is_refused(tmp_path):
    _, out, _ = ptc("compile", SAMPLES / "gemm.pt", "-t", "sm80", "--emit", "plan")
    path = tmp_path / "p.json"
    path.write_text(out)
    code, _, err = ptc("compile", SAMPLES / "gemm.pt", "-t", "sm90", "--emit", "plan",
                       "--schedule", path)
    assert code == 1 and "is a plan for sm80, not sm90" in err
    code, _, err = ptc("compile", SAMPLES / "matmul_sum.pt", "-t", "sm80", "--emit", "plan",
                       "--schedule", path)
    assert code == 1 and "plan for kernel 'gemm'" in err
    path.write_text("{not json")
    code, _, err = ptc("compile", SAMPLES / "gemm.pt", "-t", "sm80", "--emit", "plan",
                       "--schedule", path)
    assert code == 1 and "is not valid JSON" in err


def test_plan_needs_a_target_and_targets_are_checked(tmp_path):
    code, _, err = ptc("compile", SAMPLES / "gemm.pt", "--emit", "plan")
    assert code == 2 and "--target" in err
    code, _, err = ptc("compile", SAMPLES / "gemm.pt", "--emit", "plan", "-t", "sm99")
    assert code == 1 and "sm99" in err and "sm90" in err
    bad = tmp_path / "gpu.yaml"
    bad.write_text("name: gpu\n")
    code, _, err = ptc("compile", SAMPLES / "gemm.pt", "--emit", "plan", "--device", bad)
    assert code == 1 and "gpu.yaml" in err and "Traceback" not in err
    code, _, err = ptc("compile", SAMPLES / "gemm.pt", "--emit", "plan", "-t", "sm90",
                       "--device", bad)
    assert code == 2 and "not both" in err


def test_a_users_device_file_works_like_a_target(tmp_path):
    own = tmp_path / "h100_slow.yaml"
    text = (Path(__file__).resolve().parent.parent / "ptc/devices/sm90.yaml").read_text()
    own.write_text(text.replace("name: sm90", "name: h100_slow").replace("eu_count: 132", "eu_count: 66"))
    code, out, _ = ptc("compile", SAMPLES / "gemm.pt", "--emit", "plan", "--device", own)
    assert code == 0 and json.loads(out)["device"] == "h100_slow"


def test_devices_lists_the_peaks():
    code, out, _ = ptc("devices")
    assert code == 0
    for name, peak in (("sm80", "312"), ("sm90", "989"), ("gfx90a", "191"), ("gfx942", "1307")):
        assert name in out and peak in out


@pytest.mark.parametrize("target", ["sm90", "sm80"])
def test_explain(tmp_path, target):
    svg = tmp_path / "t.svg"
    code, out, _ = ptc("explain", SAMPLES / "flash_attn.pt", "--target", target, "--svg", svg)
    assert code == 0
    assert "BM=" in out and "tensor_core" in out and "%" in out
    assert svg.read_text().lstrip().startswith("<")
    code, out, _ = ptc("explain", SAMPLES / "gemm.pt", "--target", target, "--json")
    assert code == 0
    json.loads(out)


def test_a_plan_json_syntax_error_names_the_plan_file_not_the_kernel(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{bad")
    code, _, err = ptc("compile", SAMPLES / "gemm.pt", "-t", "sm80", "--emit", "plan",
                       "--schedule", bad)
    assert code == 1
    assert f"{bad}:1:2: {bad} is not valid JSON" in err
    assert "kernel gemm" not in err          # no caret under a line of gemm.pt


def test_negative_seed_is_a_usage_error():
    result = CliRunner().invoke(cli, ["run", str(SAMPLES / "gemm.pt"), "--seed", "-1"])
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_bench_names_a_hip_target_before_looking_for_a_gpu():
    code, _, err = ptc("bench", SAMPLES / "gemm.pt", "-t", "gfx90a")
    assert code == 1 and "gfx90a is a hip target" in err


@pytest.mark.parametrize("edit, message", [
    (lambda p: p.update(stages=99), "stages is 99, but the deepest buffer ring has"),
    (lambda p: p.update(pipelined=""), "pipelined is '', but steps run ahead in loop(s) k"),
    (lambda p: p.update(style="sequential"), "a sequential plan runs nothing ahead"),
    (lambda p: p["launch"].update(raster="zz"), "launch.raster is 'zz'"),
    (lambda p: p["launch"].update(raster="column"), "walks the grid in row order, not column"),
    (lambda p: p["launch"].update(threads=999), "launch.threads is 999"),
    (lambda p: p["roles"][0].update(registers=999), "asks for 999 registers"),
])
def test_a_pinned_plan_is_checked_field_by_field(tmp_path, edit, message):
    _, out, _ = ptc("compile", SAMPLES / "gemm.pt", "-t", "sm80", "--emit", "plan",
                    "--tile", "BM=64,BN=64,BK=32")
    plan = json.loads(out)
    assert plan["stages"] > 1 and plan["pipelined"] == "k"
    edit(plan)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(plan))
    code, _, err = ptc("compile", SAMPLES / "gemm.pt", "-t", "sm80", "--emit", "plan",
                       "--schedule", path)
    assert code == 1 and message in err, err


def test_a_pinned_plan_is_echoed_as_built_with_a_fresh_estimate(tmp_path):
    _, out, _ = ptc("compile", SAMPLES / "gemm.pt", "-t", "sm80", "--emit", "plan")
    plan = json.loads(out)
    plan["estimate"]["seconds"] = -1.0
    plan["launch"]["dynamic_smem"] += 4096          # more than the buffers need: allowed,
    path = tmp_path / "plan.json"                     # but the kernel allocates what it uses
    path.write_text(json.dumps(plan))
    code, again, err = ptc("compile", SAMPLES / "gemm.pt", "-t", "sm80", "--emit", "plan",
                           "--schedule", path)
    assert code == 0, err
    assert json.loads(again) == json.loads(out)


TWO_GRIDS = Path(__file__).resolve().parent / "kernels" / "colsum_rowmax.pt"   # from the corpus


@pytest.mark.parametrize("target", ["sm80", "sm90", "gfx90a", "gfx942"])
def test_every_grid_is_planned_and_a_plan_per_grid_can_be_pinned(tmp_path, target):
    src = TWO_GRIDS
    code, out, err = ptc("compile", src, "-t", target, "--emit", "plan")
    assert code == 0, err
    plans = json.loads(out)
    assert plans["kernel"] == "colsum_rowmax" and len(plans["grids"]) == 2
    (first,), (second,) = (p["launch"]["grid"] for p in plans["grids"])
    assert first.startswith("ceil(N/") and second.startswith("ceil(M/")   # j over N, i over M
    pinned = tmp_path / "plans.json"
    pinned.write_text(out)
    code, again, err = ptc("compile", src, "-t", target, "--emit", "plan", "--schedule", pinned)
    assert code == 0 and json.loads(again) == plans, err
    one = tmp_path / "one.json"
    one.write_text(json.dumps(plans["grids"][0]))
    code, _, err = ptc("compile", src, "-t", target, "--emit", "plan", "--schedule", one)
    assert code == 1 and "holds plans for 1 grid(s), but kernel colsum_rowmax has 2" in err


def test_explain_and_the_stages_show_every_grid():
    src = TWO_GRIDS
    code, out, _ = ptc("explain", src, "-t", "sm80")
    assert code == 0
    assert "grid 1 of 2: parallel j" in out and "grid 2 of 2: parallel i" in out
    assert "the 2 grids run one after the other" in out
    code, out, _ = ptc("explain", src, "-t", "sm80", "--json")
    assert [len(g["tiles"]) for g in json.loads(out)["grids"]] == [2, 2]
    for stage in ("stask", "lowered", "source"):
        code, out, _ = ptc("compile", src, "-t", "sm80", "--emit", stage)
        assert code == 0 and "grid 2 of 2" in out, stage
