"""tools/samples.py (`make samples`): every command it must run, each build's plan kept, a
line per finished command, and the first failure stops the run with its output -- run
against a stand-in `ptc` that records its arguments."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "samples.py"
SAMPLES = sorted(p.stem for p in (ROOT / "samples").glob("*.pt"))


def stand_in(tmp_path: Path, fail_on: str = "") -> Path:
    """A `ptc` that appends its arguments to calls.txt; a build writes its folder's plan.json
    and prints a line."""
    fake = tmp_path / "ptc"
    fake.write_text(f"""#!{sys.executable}
import sys
args = sys.argv[1:]
with open({str(tmp_path / 'calls.txt')!r}, "a") as f:
    f.write(" ".join(args) + "\\n")
if {fail_on!r} and {fail_on!r} in " ".join(args):
    print("error: planted", file=sys.stderr)
    sys.exit(1)
if args[0] in ("build", "compile") and "-o" in args:
    import pathlib
    folder = pathlib.Path(args[args.index("-o") + 1])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "plan.json").write_text('{{"plan": "%s %s"}}' % (args[1], args[3]))
    print("built it")
""")
    fake.chmod(0o755)
    return fake


def run(tmp_path, fake, *extra):
    env = {**os.environ, "PTC_HIPCC": "stand-in"}     # as if a HIP compiler were here
    return subprocess.run([sys.executable, str(SCRIPT), "--ptc", str(fake), "--jobs", "2",
                           "--out", str(tmp_path / "out"), *extra], capture_output=True,
                          text=True, env=env)


def test_every_command_runs_and_each_builds_plan_is_kept(tmp_path):
    proc = run(tmp_path, stand_in(tmp_path))
    assert proc.returncode == 0, proc.stderr
    calls = (tmp_path / "calls.txt").read_text().splitlines()
    assert calls[0].startswith("check ")
    smoke = [l for l in (ROOT / "samples" / "SMOKE").read_text().splitlines()
             if l.strip() and not l.startswith("#")]
    assert sum(c.startswith("run ") for c in calls) == len(smoke)
    for name in SAMPLES:
        for target in ("sm80", "sm90", "gfx90a", "gfx942"):
            folder = {"sm80": "cuda", "sm90": "cuda-sm90"}.get(target, f"hip-{target}")
            assert f"build samples/{name}.pt --target {target} -o " \
                   f"{tmp_path}/out/{folder}/{name}" in calls
            written = tmp_path / "out" / "plans" / f"{name}.{target}.json"
            assert written.read_text() == f'{{"plan": "samples/{name}.pt {target}"}}'
    total = len(calls) - 1
    lines = [l for l in proc.stdout.splitlines() if l.startswith("[")]
    assert len(lines) == total and lines[-1].startswith(f"[{total}/{total}]")
    assert "built it" in proc.stdout          # a build's last line is shown under it


def test_the_first_failure_stops_the_run_and_shows_its_output(tmp_path):
    proc = run(tmp_path, stand_in(tmp_path, fail_on="gemm.pt --target sm90 -o"))
    assert proc.returncode == 1
    assert "error: planted" in proc.stderr and "failed (exit 1)" in proc.stderr
    calls = (tmp_path / "calls.txt").read_text().splitlines()
    assert len(calls) < 1 + 9 + 4 * len(SAMPLES)        # it stopped early
    assert not list((tmp_path / "out" / "plans").glob("*.tmp"))
