"""benchmarks/gpu.sh and its helpers (issue 11), as far as they run without a GPU: the
script's steps in a dry run and its time limits, its usage errors, the wheel set for the
GPU machine's Python 3.12, the environment check, the sanitizer step against a stand-in
compute-sanitizer, and the results table rendered from a recorded -- fabricated, and
marked so -- run (tests/fixtures/gpu-results-FABRICATED/)."""
from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "gpu-results-FABRICATED"
sys.path.insert(0, str(BENCH))

import gpu_env  # noqa: E402
import report  # noqa: E402
import run as bench_run  # noqa: E402
import sanitize  # noqa: E402
import workloads  # noqa: E402

needs_nvcc = pytest.mark.nvcc


@pytest.fixture
def no_gpu(tmp_path) -> dict:
    """An environment whose nvidia-smi finds no GPU (so no test starts a real run, even on
    a machine that has one)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\nexit 9\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHON": sys.executable,
            "PTC_GPU_SITE": str(tmp_path / "site"), "PTC_GPU_CACHE": str(tmp_path / "cache")}


def gpu_sh(env, *args, timeout=300):
    return subprocess.run(["bash", str(BENCH / "gpu.sh"), *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def steps(folder: Path) -> list[dict]:
    return list(csv.DictReader(io.StringIO((folder / "steps.tsv").read_text()),
                               delimiter="\t"))


def total_limit(rows) -> int:
    """The longest the run can take: pytest and sanitize run side by side."""
    limit = {r["step"]: int(r["limit"]) for r in rows if r["status"] != "skipped"}
    side = max(limit.pop("pytest", 0), limit.pop("sanitize", 0))
    return side + sum(limit.values())


# ---- gpu.sh ------------------------------------------------------------------------------------
def test_a_dry_run_says_what_every_step_would_run(no_gpu, tmp_path):
    out = tmp_path / "results"
    result = gpu_sh(no_gpu, "--dry-run", "--out", out)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    order = [m.group(1) for m in re.finditer(r"^\[dry-run\] (\w+) \(at most \d+ s\)", text, re.M)]
    assert order == ["setup", "facts", "pytest", "sanitize", "bench", "layers", "tune",
                     "calibrate", "report"]
    assert "-m pytest -m gpu" in text and "--junitxml=" in text
    # every SMOKE line, on sm80 and sm90, at its SMOKE tiles and at the benchmark plan
    harnesses = 4 * len(sanitize.smoke_lines())
    assert f"benchmarks/sanitize.py --dry-run: {harnesses} harness(es) x 3 tool(s)" in text
    for tool in ("memcheck", "racecheck", "synccheck"):
        assert f"--tool {tool}" in text
    assert "would time: gemm 8192^3: ptc, torch, triton" in text
    assert "would time: flash_attn_causal d256 8k: ptc, torch, torch-flash, torch-cudnn, " \
           "triton" in text
    assert "ptc.cli tune samples/gemm.pt -t sm90" in text and "--record" in text
    assert "ptc.cli calibrate" in text and "sm90.calibrated.yaml" in text
    assert "benchmarks/report.py --dry-run: would read" in text
    rows = steps(out)
    assert [r["status"] for r in rows] == ["dry-run"] * 9
    assert "benchmarks/layers.py --dry-run: mamba2 on cuda" in text
    assert total_limit(rows) <= 9 * 60                   # one run: at most 9 minutes
    assert not (out / "bench.json").exists() and not (out / "results.md").exists()
    assert f"results in {out}" in text


def test_the_quick_run_fits_in_three_minutes(no_gpu, tmp_path):
    out = tmp_path / "quick"
    result = gpu_sh(no_gpu, "--dry-run", "--quick", "--out", out, "--tar", tmp_path / "r.tgz")
    assert result.returncode == 0, result.stderr
    rows = steps(out)
    assert {r["step"]: r["status"] for r in rows}["tune"] == "skipped"
    assert {r["step"]: r["status"] for r in rows}["layers"] == "skipped"
    assert total_limit(rows) <= 3 * 60
    assert "--quick" in result.stdout and "-k 'not sm80'" in result.stdout
    # sm90, the benchmark plans: one per SMOKE line
    assert f"{len(sanitize.smoke_lines())} harness(es) x 3 tool(s)" in result.stdout
    assert f"would pack {out} into {tmp_path / 'r.tgz'}" in result.stdout


def test_only_some_steps(no_gpu, tmp_path):
    result = gpu_sh(no_gpu, "--dry-run", "--steps", "bench,report", "--out", tmp_path / "o")
    assert result.returncode == 0
    status = {r["step"]: r["status"] for r in steps(tmp_path / "o")}
    assert status == {"setup": "skipped", "facts": "skipped", "pytest": "skipped",
                      "sanitize": "skipped", "bench": "dry-run", "layers": "skipped",
                      "tune": "skipped",
                      "calibrate": "skipped", "report": "dry-run"}


@pytest.mark.parametrize("args, message", [
    (["--bogus"], "unknown argument: --bogus"),
    (["--steps", "bench,nope"], "unknown step: nope"),
    (["--out"], "--out needs a folder"),
])
def test_usage_errors_exit_2(no_gpu, args, message):
    result = gpu_sh(no_gpu, *args)
    assert result.returncode == 2
    assert result.stderr.splitlines()[0] == f"gpu.sh: {message}"
    assert "usage: bash benchmarks/gpu.sh" in result.stderr


def test_without_a_gpu_it_exits_1_with_one_line(no_gpu, tmp_path):
    result = gpu_sh(no_gpu, "--out", tmp_path / "o")
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == ("gpu.sh: no NVIDIA GPU here (nvidia-smi finds none); --dry-run "
                             "shows the steps\n")
    assert gpu_sh(no_gpu, "--help").returncode == 0


def test_make_gpu_passes_quick_and_out():
    def dry(*args):
        # under `make test` the outer make's MAKEFLAGS / MAKELEVEL would make this one
        # print "Entering directory" lines
        env = {k: v for k, v in os.environ.items()
               if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "MAKEOVERRIDES")}
        return subprocess.run(["make", "--no-print-directory", "-n", "gpu", *args], cwd=ROOT,
                              capture_output=True, text=True, env=env).stdout.strip()
    if shutil.which("make") is None:
        pytest.skip("no make")
    assert dry().split() == ["bash", "benchmarks/gpu.sh"]
    assert dry("QUICK=1").split() == ["bash", "benchmarks/gpu.sh", "--quick"]
    assert dry("OUT=/x").split() == ["bash", "benchmarks/gpu.sh", "--out", "/x"]


# ---- the wheels and the environment -------------------------------------------------------------
def test_ptc_requirements_from_pyproject():
    reqs = dict(gpu_env.requirements())
    assert reqs["lark"] == "1.1" and reqs["click"] == "8.2" and "numpy" in reqs
    assert gpu_env.version_tuple("8.10.0rc1") == (8, 10, 0) > gpu_env.version_tuple("8.2")


def test_which_requirements_are_missing():
    assert gpu_env.missing([("lark", "1.1"), ("click", "8.2")]) == []
    assert gpu_env.missing([("surely-not-installed-ptc-test", "1")]) == \
        [("surely-not-installed-ptc-test", "1", "")]
    have = gpu_env.metadata.version("click")
    assert gpu_env.missing([("click", "999")]) == [("click", "999", have)]


def test_wheel_choice_for_python_312(tmp_path):
    for name in ("lark-1.0.0-py3-none-any.whl", "lark-1.3.1-py3-none-any.whl",
                 "PyYAML-6.0.4-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
                 "PyYAML-6.0.5-cp311-cp311-manylinux_2_17_x86_64.whl",
                 "ml_dtypes-0.6.0-cp312-cp312-macosx_11_0_arm64.whl"):
        (tmp_path / name).write_bytes(b"")
    assert gpu_env.wheel_for(tmp_path, "lark", "1.1").name == "lark-1.3.1-py3-none-any.whl"
    assert gpu_env.wheel_for(tmp_path, "lark", "2.0") is None
    assert gpu_env.wheel_for(tmp_path, "pyyaml", "6").name.startswith("PyYAML-6.0.4-cp312")
    assert gpu_env.wheel_for(tmp_path, "ml-dtypes", "0.3") is None      # not for Linux
    assert gpu_env.fits_cp312_linux("cp39", "abi3", "manylinux2014_x86_64")


def test_install_says_what_it_would_run(tmp_path, monkeypatch, capsys):
    (tmp_path / "lark-1.3.1-py3-none-any.whl").write_bytes(b"")
    monkeypatch.setattr(gpu_env, "missing", lambda reqs=None: [("lark", "1.1", "")])
    code = gpu_env.main(["install", "--wheels", str(tmp_path), "--site", str(tmp_path / "s"),
                         "--dry-run"])
    out = capsys.readouterr().out
    assert code == 0 and "pip install --quiet --no-index --no-deps" in out
    assert f"--target {tmp_path / 's'}" in out and "lark-1.3.1-py3-none-any.whl" in out
    monkeypatch.setattr(gpu_env, "missing", lambda reqs=None: [("rich", "13", "")])
    assert gpu_env.main(["install", "--wheels", str(tmp_path), "--site", "x"]) == 1
    assert "no wheel in" in capsys.readouterr().err


WHEELS = ROOT / ".gpu-wheels"


@pytest.mark.skipif(not WHEELS.is_dir(), reason="no .gpu-wheels (make gpu-wheels fills it)")
def test_the_wheel_set_resolves_for_python_312():
    """`make gpu-wheels` brought a CPython 3.12 x86-64 wheel for every requirement of ptc
    (numpy aside: the image's torch has its own), and every wheel's own requirements are
    carried too (or numpy)."""
    carried = {}
    for path in WHEELS.glob("*.whl"):
        carried[gpu_env.normalized(path.name.split("-")[0])] = path
    for name, minimum in gpu_env.requirements():
        if name == "numpy":
            continue
        assert gpu_env.wheel_for(WHEELS, name, minimum), f"no wheel for {name}>={minimum}"
    for path in carried.values():
        with zipfile.ZipFile(path) as z:
            meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
            text = z.read(meta).decode()
        for line in text.splitlines():
            if not line.startswith("Requires-Dist:") or "extra ==" in line:
                continue
            if "python_version <" in line:       # backports for older Pythons
                continue
            dep = gpu_env.normalized(re.match(r"Requires-Dist:\s*([A-Za-z0-9_.\-]+)",
                                              line).group(1))
            assert dep in carried or dep == "numpy", f"{path.name} needs {dep}"


# ---- benchmarks/run.py ------------------------------------------------------------------------
def test_the_workloads():
    quick = workloads.select(quick=True)
    assert [(w.label, t) for w, t in quick] == [("gemm 4096^3", "sm90"),
                                                ("flash_attn d128 8k", "sm90"),
                                                ("softmax 16k x 4096", "sm90")]
    full = workloads.select()
    assert len(full) == 2 * len(workloads.WORKLOADS)
    fa = [w for w in workloads.WORKLOADS if w.sample.startswith("flash_attn")]
    for w in fa:                                   # FA3's shapes: B*S = 16k, H*D = 2048
        s = dict(w.shapes)
        assert s["B"] * s["S"] == 16384 and s["H"] * s["D"] == 2048
    assert {dict(w.shapes)["D"] for w in fa} == {64, 128, 256}
    assert workloads.select(only="gemm 8", targets=["sm90"]) == \
        [(workloads.WORKLOADS[1], "sm90")]
    assert bench_run.gpu_slug("NVIDIA H100 80GB HBM3") == "NVIDIA-H100-80GB-HBM3"


def test_run_py_dry_run_and_without_a_gpu(capsys):
    assert bench_run.main(["--dry-run", "--only", "softmax", "--baselines", "none"]) == 0
    out = capsys.readouterr().out
    assert "would build: ptc build samples/softmax.pt --target sm90" in out
    assert "would time: softmax 16k x 4096: ptc\n" in out
    assert bench_run.main(["--only", "no such workload"]) == 2


# ---- benchmarks/sanitize.py --------------------------------------------------------------------
def test_sanitizer_summaries():
    assert sanitize.summary("memcheck", "========= ERROR SUMMARY: 0 errors\n") == \
        (0, "ERROR SUMMARY: 0 errors")
    assert sanitize.summary("memcheck", "========= ERROR SUMMARY: 1 error\n")[0] == 1
    text = "========= RACECHECK SUMMARY: 5 hazards displayed (2 errors, 3 warnings)\n"
    assert sanitize.summary("racecheck", text)[0] == 2
    assert sanitize.summary("synccheck", "crashed") == (-1, "")
    lines = sanitize.smoke_lines()
    assert lines[0] == ("gemm", {"M": 200, "N": 136, "K": 72}, {"BM": 64, "BN": 64, "BK": 32})
    order = sorted(sanitize.harnesses(("sm80", "sm90"), sanitize.VARIANTS),
                   key=sanitize.priority)
    assert (order[0].variant, order[0].target) == ("bench-plan", "sm90")


def stand_in(tmp_path, errors: int) -> Path:
    """A compute-sanitizer that runs nothing and reports `errors` errors."""
    bin_dir = tmp_path / "sanitizer-bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "compute-sanitizer"
    script.write_text("#!/bin/sh\necho '========= COMPUTE-SANITIZER (a stand-in)'\n"
                      f"echo '========= ERROR SUMMARY: {errors} errors'\n"
                      f"exit {sanitize.ERROR_EXIT if errors else 0}\n")
    script.chmod(0o755)
    return bin_dir


@needs_nvcc
def test_the_sanitizer_step_on_a_stand_in(tmp_path, monkeypatch):
    """Builds the harnesses and writes their inputs for real (nvcc, no GPU); the stand-in
    compute-sanitizer reports 0 errors, then 2. The compiles go through the shared object
    cache (a second suite run links only)."""
    monkeypatch.setenv("PATH", f"{stand_in(tmp_path, 0)}:{os.environ['PATH']}")
    out = tmp_path / "out"
    code = sanitize.main(["--out", str(out), "--only", "softmax", "--targets", "sm90",
                          "--tools", "memcheck,synccheck", "--jobs", "2"])
    assert code == 0
    results = json.loads((out / "sanitizer.json").read_text())["results"]
    assert [(r["harness"], r["tool"], r["status"]) for r in results] == [
        ("softmax.sm90.bench-plan", "memcheck", "ok"), ("softmax.sm90.bench-plan", "synccheck", "ok"),
        ("softmax.sm90.smoke", "memcheck", "ok"), ("softmax.sm90.smoke", "synccheck", "ok")]
    folder = out / "sanitize" / "softmax.sm90.smoke"
    assert (folder / "build" / "ptc_run").is_file()
    assert (folder / "in" / "X.npy").is_file() and (folder / "in" / "dims.txt").read_text() \
        == "M 100\nN 300\n"
    # the stand-in runs nothing, so no output was written to compare
    assert results[0]["reference"] == "no Y.npy written"
    (tmp_path / "bad").mkdir()
    monkeypatch.setenv("PATH", f"{stand_in(tmp_path / 'bad', 2)}:{os.environ['PATH']}")
    code = sanitize.main(["--out", str(out), "--only", "softmax", "--targets", "sm90",
                          "--variants", "smoke", "--tools", "racecheck", "--jobs", "1"])
    assert code == 1
    (bad,) = json.loads((out / "sanitizer.json").read_text())["results"]
    assert bad["status"] == "errors" and bad["errors"] == 2
    assert "ERROR SUMMARY: 2 errors" in Path(bad["log"]).read_text()


def test_the_sanitizer_step_without_a_sanitizer(tmp_path, monkeypatch):
    monkeypatch.setattr(sanitize, "find_sanitizer", lambda: None)
    assert sanitize.main(["--out", str(tmp_path), "--only", "softmax", "--targets", "sm90",
                          "--variants", "smoke"]) == 1
    results = json.loads((tmp_path / "sanitizer.json").read_text())["results"]
    assert {r["status"] for r in results} == {"skipped"} and len(results) == 3


# ---- benchmarks/report.py ----------------------------------------------------------------------
@pytest.fixture
def recorded(tmp_path) -> Path:
    folder = tmp_path / "2026-12-01-Fabricated"
    shutil.copytree(FIXTURE, folder)
    assert report.main([str(folder)]) == 0
    return folder


def test_the_results_table_renders_from_a_recorded_run(recorded):
    md = (recorded / "results.md").read_text()
    assert md.startswith("# ptc on Fabricated H100 (test fixture), 2026-12-01\n\n"
                         "**FABRICATED TEST DATA: NOT A MEASUREMENT.**")
    perf = md.split("## Performance")[1].split("##")[0]
    head = perf.strip().splitlines()[0]
    assert head == ("| workload | target | plan | time | TFLOP/s | GB/s | % of peak | vs torch | "
                    "vs torch-flash | vs triton | model | model/measured | check |")
    gemm = next(line for line in perf.splitlines() if line.startswith("| gemm 4096^3"))
    cells = [c.strip() for c in gemm.strip("|").split("|")]
    # 2 * 4096^3 FLOP in 0.2 ms = 687.2 TFLOP/s = 69.5 % of 989.4; cuBLAS took 0.18 ms,
    # Triton 0.25 ms; the model said 0.15 ms
    assert cells[3:] == ["200.0 us", "687.2", "503", "69.5 % (mma f16)", "0.90x", "-", "1.25x",
                         "150.0 us", "0.75", "ok vs torch (C: rel. L2 1.0e-03, tolerance 5e-03)"]
    soft = next(line for line in perf.splitlines() if line.startswith("| softmax"))
    assert "| 2684 | 80.1 % (DRAM) | 1.20x |" in soft
    assert "LaunchError: running flash_attn failed (made up)" in perf
    assert "| benchmarks/run.py | sm90 | 2 | 0.77 | 0.75 | 0.75 .. 0.80 |" in md
    assert "| gemm.sm90.smoke | ok | 3 error(s) | ok | ok |" in md
    assert "2 of 4 runs clean." in md
    assert "3 passed, 1 failed, 2 skipped." in md
    assert "- FAILED tests.test_runtime::test_gpu_samples_match_the_reference[sm90-softmax.pt]" \
        in md
    assert "- model/measured after: median 1.010, worst 1.120" in md
    assert "| memory.l2_bandwidth_gbs | 9370 | 7000 |" in md
    assert "| pytest | failed | 80 | 130 |" in md


def test_the_results_csv_and_summary(recorded):
    rows = list(csv.DictReader((recorded / "results.csv").open()))
    assert len(rows) == 5 and {r["fabricated"] for r in rows} == {"True"}
    gemm = rows[0]
    assert gemm["workload"] == "gemm 4096^3" and float(gemm["tflops"]) == pytest.approx(687.195)
    assert float(gemm["vs_torch"]) == pytest.approx(0.9) and gemm["triton_ms"] == "0.25"
    assert float(gemm["model_over_measured"]) == 0.75 and gemm["l2_flushed"] == "True"
    assert rows[3]["source"] == "ptc tune"
    summary = (recorded / "summary.txt").read_text()
    assert summary.splitlines()[0].endswith("[FABRICATED TEST DATA]")
    assert "model/measured over 4 plans: median 0.77, worst 0.75" in summary
    assert "calibrated: median 0.78 -> 1.01, worst 0.60 -> 1.12" in summary


def test_the_report_of_an_empty_or_missing_folder(tmp_path, capsys):
    assert report.main([str(tmp_path / "nope")]) == 1
    assert report.main([str(tmp_path)]) == 0
    assert (tmp_path / "results.md").read_text().startswith("# ptc on unknown GPU, undated")
