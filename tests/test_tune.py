"""ptc tune and the tuning database (ptc.tune, ptc.cli.tune), without a GPU: the key, the
file format, lookup and staleness, which plans a tune measures, the winner, and compile /
build / explain using a matching entry. A GPU run is replaced by a fake measurer; the
measurements it reports are made up (and say so by their GPU's name)."""
from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from ptc import driver
from ptc.cli import tune as cli_tune
from ptc.cli import cli
from ptc.devices import get_device
from ptc.runtime.errors import NoDevice
from ptc.runtime.library import GpuInfo
from ptc.targets.cuda import driver as cuda_driver
from ptc.tune import (Candidate, Measurement, TuningError, TuningKey, db as D, make_key,
                      select_trials, source_sha256)
from ptc.tune.checkshape import check_dims
from ptc.targets.cuda.toolchain import parse_nvcc_release
from ptc.tune.key import compiler_release, device_sha256
from ptc.tune.measure import Measured
from ptc.tune.tuner import run_trials

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
KERNELS = Path(__file__).resolve().parent / "kernels"
FAKE_GPU = "Fake GPU (made up by the tests)"
# ptc tune looks for nvcc before it measures (the fake measurer builds nothing)
needs_nvcc = pytest.mark.nvcc


def ptc(*args):
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def gemm(tmp_path) -> Path:
    """A copy of samples/gemm.pt in a folder of its own (its tuning database goes beside)."""
    path = tmp_path / "gemm.pt"
    shutil.copy(SAMPLES / "gemm.pt", path)
    return path


@pytest.fixture(scope="module")
def gemm_search():
    kernel = driver.check_file(SAMPLES / "gemm.pt").kernels[0]
    return kernel, driver.schedule_grids(kernel, "sm90")


def key_of(path, nvcc="13.0.88", shapes=None, target="sm90") -> TuningKey:
    module = driver.parse_file(path)
    kernel = driver.check_file(path, shapes).kernels[0]
    return make_key(module.kernels[0], kernel.name, driver.problem_dims(kernel, shapes),
                    get_device(target), nvcc)


def an_entry(key: TuningKey, plan_json: str, ms=0.125, rank=3) -> D.Entry:
    return D.entry_from(key, plan_json, Measurement("2026-12-01", FAKE_GPU, ms, 50, True,
                                                    0.25, rank),
                        (Candidate("some plan", 1, 0.25, 0.3, "ok"),))


# ---- the key -------------------------------------------------------------------------------
def test_the_source_hash_is_of_the_canonical_kernel(tmp_path):
    text = (SAMPLES / "gemm.pt").read_text()
    relaid = "# another comment\n\n" + text.replace("  acc = zeros", "  acc   =   zeros") \
        .replace("# one task per", "# a task per")
    changed = text.replace("acc += load(A[i, k]) @ load(B[k, j])",
                           "acc += load(A[i, k]) @ load(B[k, j]) * 2.0")
    hashes = []
    for n, t in enumerate((text, relaid, changed)):
        (tmp_path / f"{n}.pt").write_text(t)
        hashes.append(source_sha256(driver.parse_file(tmp_path / f"{n}.pt").kernels[0]))
    assert hashes[0] == hashes[1] != hashes[2]


def test_the_device_hash_is_of_its_figures():
    sm90 = get_device("sm90")
    assert device_sha256(sm90) == device_sha256(get_device("sm90"))
    assert device_sha256(sm90) != device_sha256(get_device("sm80"))
    faster = replace(sm90, memory=replace(sm90.memory, l2_bandwidth_gbs=12000))
    assert device_sha256(faster) != device_sha256(sm90)
    assert device_sha256(replace(sm90, path=Path("/elsewhere.yaml"))) == device_sha256(sm90)


def test_nvcc_release():
    assert parse_nvcc_release("Cuda compilation tools, release 13.0, V13.0.88\n") == "13.0.88"
    assert parse_nvcc_release("Cuda compilation tools, release 12.4\n") == "12.4"
    assert parse_nvcc_release("no version here") == ""


def test_a_key_holds_every_dim_of_the_problem(gemm):
    key = key_of(gemm, shapes={"M": 8192})
    assert dict(key.dims) == {"M": 8192, "N": 4096, "K": 4096}       # the rest: `dims` line
    assert key.device == "sm90" and key.ptc and key.nvcc == "13.0.88"
    assert TuningKey.from_json(key.to_json()) == key
    assert len(key.id) == 16 and key.id != key_of(gemm).id


# ---- the file ------------------------------------------------------------------------------
def test_the_database_round_trips_sorted_and_stable(gemm, gemm_search):
    _, results = gemm_search
    from ptc.sched.plan import plans_to_json

    big, small = key_of(gemm, shapes={"M": 8192}), key_of(gemm)
    db = D.TuningDatabase(str(gemm.parent / D.DEFAULT_NAME))
    for key in (big, small):
        db = D.with_entry(db, an_entry(key, plans_to_json([results[0].ranked[1].plan])))
    text = D.dumps(db)
    assert text.endswith("}\n") and json.loads(text)["format"] == D.FORMAT
    assert D.dumps(D.loads(text, "x.json")) == text
    reordered = replace(db, entries=db.entries[::-1])
    assert D.dumps(reordered) == text                      # sorted: order of insertion aside
    data = json.loads(text)
    assert [e["key"]["dims"]["M"] for e in data["entries"]] == [4096, 8192]
    assert data["entries"][0]["id"] == small.id
    saved = D.save(db)
    assert D.load(saved).entries == D.loads(text).entries
    assert D.load(gemm.parent / "absent.json").entries == ()


def test_a_new_entry_replaces_its_slot(gemm, gemm_search):
    from ptc.sched.plan import plans_to_json

    _, results = gemm_search
    key = key_of(gemm)
    db = D.with_entry(D.TuningDatabase("t.json"),
                      an_entry(replace(key, ptc="0.0.1"), plans_to_json([results[0].best.plan])))
    db = D.with_entry(db, an_entry(key, plans_to_json([results[0].best.plan]), ms=0.1))
    assert len(db.entries) == 1 and db.entries[0].key.ptc == key.ptc


@pytest.mark.parametrize("text, message", [
    ("{", "not valid JSON"),
    ('{"format": "something/2", "entries": []}', 'is not a ptc tuning database'),
    ('{"format": "ptc-tuning/1", "entries": {}}', '"entries" must be a list'),
    ('{"format": "ptc-tuning/1", "entries": [{"key": {}}]}', "entries[0] is malformed"),
])
def test_a_broken_database_is_one_error(text, message):
    with pytest.raises(TuningError, match=message.replace("[", r"\[").replace("]", r"\]")):
        D.loads(text, "ptc-tuning.json")


# ---- lookup and staleness --------------------------------------------------------------------
def test_lookup_matches_the_whole_key_and_says_why_others_are_stale(gemm):
    key = key_of(gemm)
    plan = '{"kernel": "gemm"}'
    cases = {
        "source": (replace(key, source_sha256="0" * 64), "source changed"),
        "device": (replace(key, device_sha256="1" * 64), "device description changed"),
        "ptc": (replace(key, ptc="0.0.1"), "tuned with ptc 0.0.1"),
        "nvcc": (replace(key, nvcc="12.4.1"), "tuned with nvcc 12.4.1, this is nvcc 13.0.88"),
    }
    for stored, reason in cases.values():
        found = D.lookup(D.TuningDatabase("t", (an_entry(stored, plan),)), key)
        assert found.entry is None and len(found.stale) == 1 and reason in found.stale[0][1]
    other = an_entry(key_of(gemm, shapes={"M": 1024}), plan)
    found = D.lookup(D.TuningDatabase("t", (an_entry(key, plan), other)), key)
    assert found.entry.key == key and not found.stale and found.other_dims == (other,)
    # a reader without nvcc does not compare the toolchain, and says so
    found = D.lookup(D.TuningDatabase("t", (an_entry(cases["nvcc"][0], plan),)),
                     replace(key, nvcc=""))
    assert found.entry is not None and "no nvcc" in found.unchecked
    assert D.lookup(D.TuningDatabase("t", (an_entry(key, plan),)),
                    replace(key, device="sm80")).entry is None


# ---- which plans are measured ------------------------------------------------------------------
def test_trials_are_the_best_ranked_and_close_tile_neighbours(gemm_search):
    _, results = gemm_search
    ranked = results[0].ranked
    trials = select_trials(results, 3, neighbours=False)
    assert [t.rank for t in trials] == [1, 2, 3]
    assert [t.plans[0] for t in trials] == [c.plan for c in ranked[:3]]
    assert trials[0].why == "the model's first choice"
    with_neighbours = select_trials(results, 3)
    extra = with_neighbours[3:]
    assert with_neighbours[:3] == trials
    best = ranked[0]
    for t in extra:
        assert "tile neighbour" in t.why
        assert t.model_seconds <= 1.25 * best.plan.estimate.seconds
        c = next(c for c in ranked if c.plan is t.plans[0])
        assert c.choice == best.choice and c is not best
        assert sum(a != b for a, b in zip(dict(c.tiles).values(), dict(best.tiles).values())) == 1
        assert t.rank == 1 + sum(1 for o in ranked if o.plan.estimate.seconds < t.model_seconds)
    with pytest.raises(ValueError):
        select_trials(results, 0)


def test_a_trial_of_a_two_grid_kernel_is_a_plan_per_grid():
    kernel = driver.check_file(KERNELS / "colsum_rowmax.pt").kernels[0]
    results = driver.schedule_grids(kernel, "sm90")
    trials = select_trials(results, 3, neighbours=False)
    assert all(len(t.plans) == 2 for t in trials)
    assert trials[0].plans == tuple(r.best.plan for r in results)
    sums = [t.model_seconds for t in trials]
    assert sums == sorted(sums)
    assert json.loads(trials[0].plan_json)["grids"][1]["kernel"] == "colsum_rowmax"


def test_the_check_problem_crosses_tile_edges(gemm_search):
    _, results = gemm_search
    best = results[0].best
    tiles = dict(best.tiles)
    dims = check_dims([best.graph], dict(results[0].dims))
    assert dims["M"] == 2 * tiles["BM"] + tiles["BM"] // 2
    assert dims["K"] == 2 * tiles["BK"] + tiles["BK"] // 2
    fa = driver.check_file(SAMPLES / "flash_attn.pt").kernels[0]
    r = driver.schedule_grids(fa, "sm90")[0]
    dims = check_dims([r.best.graph], dict(r.dims))
    assert dims["B"] == dims["H"] == 2 and dims["D"] == 128       # grid-only / loaded whole
    assert check_dims([r.best.graph], {"B": 1, "H": 1, "S": 16, "T": 16, "D": 64}) == \
        {"B": 1, "H": 1, "S": 16, "T": 16, "D": 64}               # never grows


# ---- the winner ----------------------------------------------------------------------------------
def fake_measure(fastest_rank=3, refused=()):
    """Each trial takes its model time, the trial `fastest_rank` half of it; the ranks in
    `refused` fail their check."""
    def measure(trial) -> Measured:
        if trial.rank in refused:
            return Measured("wrong result: C differs from the reference")
        factor = 0.5 if trial.rank == fastest_rank else 1.0
        return Measured("ok", trial.model_seconds * 1e3 * factor, 50)
    return measure


def test_the_winner_is_the_fastest_trial_that_passed(gemm, gemm_search):
    _, results = gemm_search
    trials = select_trials(results, 4, neighbours=False)
    key = key_of(gemm)
    result = run_trials(trials, fake_measure(3), key, gpu=FAKE_GPU, date="2026-12-01")
    assert result.winner.trial.rank == 3
    entry = result.entry
    assert entry.key == key and entry.measured.model_rank == 3 and entry.measured.l2_flushed
    assert json.loads(entry.plan_json) == json.loads(trials[2].plan_json)
    assert [c.model_rank for c in entry.candidates] == [1, 2, 3, 4]
    refused = run_trials(trials, fake_measure(3, refused=(3,)), key, gpu=FAKE_GPU,
                         date="2026-12-01")
    assert refused.winner.trial.rank == 1          # ties go to the model's better rank
    assert "wrong result" in refused.entry.candidates[2].check
    none = run_trials(trials, fake_measure(3, refused=(1, 2, 3, 4)), key, gpu=FAKE_GPU,
                      date="2026-12-01")
    assert none.winner is None and none.entry is None


# ---- the command -------------------------------------------------------------------------------
@pytest.fixture
def fake_gpu(monkeypatch):
    """A GPU that is not there, and a measurer that measures nothing (fake_measure)."""
    monkeypatch.setattr(cuda_driver, "find_gpus", lambda: [GpuInfo(0, FAKE_GPU, "sm_90")])
    monkeypatch.setattr(cli_tune, "make_measurer", lambda **options: fake_measure(3))


def test_tune_without_a_gpu_exits_1_with_one_line(gemm, monkeypatch):
    def none():
        exc = NoDevice("no CUDA GPU found (libcuda.so.1 cannot be loaded)")
        exc.reason = "libcuda.so.1 cannot be loaded"
        raise exc
    monkeypatch.setattr(cuda_driver, "find_gpus", none)
    code, out, err = ptc("tune", gemm, "-t", "sm90")
    assert code == 1 and out == ""
    assert err.splitlines()[0] == ("ptc: error: ptc tune measures plans on a GPU, and this "
                                   "machine has none (libcuda.so.1 cannot be loaded)")
    assert not (gemm.parent / D.DEFAULT_NAME).exists()


def test_tune_refuses_what_it_cannot_measure(gemm, fake_gpu, monkeypatch):
    code, _, err = ptc("tune", gemm, "-t", "gfx942")
    assert code == 1 and "gfx942 is a hip target" in err
    monkeypatch.setattr(cuda_driver, "find_gpus", lambda: [GpuInfo(0, "an A100", "sm_80")])
    code, _, err = ptc("tune", gemm, "-t", "sm90")
    assert code == 1 and "cannot run code built for sm_90a" in err
    code, _, err = ptc("tune", gemm)
    assert code == 2 and "--target" in err
    code, _, err = ptc("tune", gemm, "-t", "sm90", "--top", "0")
    assert code == 2


@needs_nvcc
def test_tune_writes_the_winner_and_compile_uses_it(gemm, gemm_search, fake_gpu):
    _, results = gemm_search
    third = results[0].ranked[2].plan
    code, out, err = ptc("tune", gemm, "-t", "sm90", "--top", "4", "--no-neighbours",
                         "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["winner"] == 3 and len(report["trials"]) == 4
    path = gemm.parent / D.DEFAULT_NAME
    db = D.load(path)
    assert [e.key.id for e in db.entries] == [report["entry"]]
    # compile --emit plan pins the measured plan, and says so on stderr
    code, out, err = ptc("compile", gemm, "-t", "sm90", "--emit", "plan")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["tiles"] == dict(third.tiles) and plan["stages"] == third.stages
    assert f"note: plan from tuning database {path} (measured " in err
    assert f"on {FAKE_GPU}" in err and "ranked it 3rd" in err
    # --no-tuning: the model's own choice
    code, out, err = ptc("compile", gemm, "-t", "sm90", "--emit", "plan", "--no-tuning")
    assert json.loads(out)["tiles"] == dict(results[0].best.plan.tiles) and err == ""
    # --tile or --schedule win over the database
    code, out, err = ptc("compile", gemm, "-t", "sm90", "--emit", "plan", "--tile", "BK=64",
                         "--verbose")
    assert "not consulted: --tile fixes tile sizes" in err
    # explain explains the measured plan
    code, out, err = ptc("explain", gemm, "-t", "sm90")
    assert code == 0
    assert out.startswith(f"note: plan from tuning database {path} (measured ")
    tiles = " ".join(f"{k}={v}" for k, v in dict(third.tiles).items())
    winner = next(line for line in out.splitlines() if line.startswith("winner"))
    assert all(part in winner for part in tiles.split())
    code, out, _ = ptc("explain", gemm, "-t", "sm90", "--json")
    tuning = json.loads(out)["tuning"]
    assert tuning["used"] and tuning["entry"] == report["entry"]
    assert tuning["measured"]["gpu"] == FAKE_GPU


@needs_nvcc
def test_build_and_source_use_the_entry(gemm, gemm_search, fake_gpu):
    _, results = gemm_search
    assert ptc("tune", gemm, "-t", "sm90", "--no-neighbours")[0] == 0
    code, tuned, err = ptc("compile", gemm, "-t", "sm90", "--emit", "source")
    assert code == 0 and "plan from tuning database" in err
    _, searched, _ = ptc("compile", gemm, "-t", "sm90", "--emit", "source", "--no-tuning")
    assert tuned != searched
    code, out, err = ptc("compile", gemm, "-t", "sm90", "-o", gemm.parent / "out")
    assert code == 0 and "plan from tuning database" in err
    written = json.loads((gemm.parent / "out" / "plan.json").read_text())
    assert written["tiles"] == dict(results[0].ranked[2].plan.tiles)


@needs_nvcc
def test_a_stale_entry_is_ignored_and_named(gemm, gemm_search, fake_gpu):
    assert ptc("tune", gemm, "-t", "sm90", "--no-neighbours")[0] == 0
    gemm.write_text(gemm.read_text().replace("acc as f16", "(acc * 2.0) as f16"))
    code, out, err = ptc("compile", gemm, "-t", "sm90", "--emit", "plan")
    assert code == 0
    assert "ignoring the stale entry" in err and "source changed since it was tuned" in err
    assert "(re-run ptc tune)" in err
    _, results = gemm_search
    assert json.loads(out)["tiles"] == dict(results[0].best.plan.tiles)
    code, out, _ = ptc("explain", gemm, "-t", "sm90", "--json")
    tuning = json.loads(out)["tuning"]
    assert not tuning["used"] and "source changed" in tuning["stale"][0]["reason"]
    # other problem sizes: only --verbose mentions them
    code, _, err = ptc("compile", gemm, "-t", "sm90", "--emit", "plan", "--shape", "M=1024")
    assert err == ""
    code, _, err = ptc("compile", gemm, "-t", "sm90", "--emit", "plan", "--shape", "M=1024",
                       "--verbose")
    assert "has an entry for K=4096,M=4096,N=4096 (not this problem)" in err


@needs_nvcc
def test_an_entry_whose_plan_no_longer_builds_falls_back_to_the_search(gemm, gemm_search):
    from ptc.sched.plan import plans_to_json

    _, results = gemm_search
    broken = json.loads(plans_to_json([results[0].ranked[2].plan]))
    broken["buffers"][0]["stages"] += 5             # no longer what its barriers say
    key = key_of(gemm, nvcc=compiler_release("cuda"))
    D.save(D.TuningDatabase(str(gemm.parent / D.DEFAULT_NAME),
                            (an_entry(key, json.dumps(broken)),)))
    code, out, err = ptc("compile", gemm, "-t", "sm90", "--emit", "plan")
    assert code == 0, err
    assert "its plan no longer builds" in err and "using the model's best plan" in err
    assert json.loads(out)["tiles"] == dict(results[0].best.plan.tiles)


def test_a_broken_or_missing_database_is_an_error(gemm):
    (gemm.parent / D.DEFAULT_NAME).write_text("{ not json")
    code, out, err = ptc("compile", gemm, "-t", "sm90", "--emit", "plan")
    assert code == 1 and out == ""
    assert err.startswith(f"ptc: error: {gemm.parent / D.DEFAULT_NAME}:1:3: the tuning "
                          "database is not valid JSON")
    assert "--no-tuning" in err
    assert ptc("compile", gemm, "-t", "sm90", "--emit", "plan", "--no-tuning")[0] == 0
    code, _, err = ptc("build", gemm, "-t", "sm90", "--tuning", gemm.parent / "nope.json")
    assert code == 1 and "nope.json: no such file" in err


def test_compile_without_a_database_is_unchanged(gemm):
    code, out, err = ptc("compile", gemm, "-t", "sm90", "--emit", "plan")
    assert code == 0 and err == ""
    code, _, err = ptc("compile", gemm, "-t", "sm90", "--emit", "plan", "--verbose")
    assert "not consulted: there is no" in err


@pytest.mark.parametrize("target", ["sm80", "sm90"])
@pytest.mark.parametrize("sample", sorted(p.stem for p in SAMPLES.glob("*.pt")))
def test_the_plan_compile_emits_pins_back_unchanged(sample, target):
    """What the tuning database stores is `--emit plan`: pinned again (as --schedule or an
    entry), every sample's plan is accepted and built as it was, estimate included (a plan
    as built carries the lowered kernel's shared memory, which may be less than its
    buffers' sum: that is no reason to refuse it)."""
    from ptc.sched.plan import plans_to_json

    kernel = driver.check_file(SAMPLES / f"{sample}.pt").kernels[0]
    plans = [r.best.plan for r in driver.schedule_grids(kernel, target)]
    text = plans_to_json(plans)
    pinned = driver.pinned_as_built(kernel, target, driver.PlanText("plan.json", text))
    assert plans_to_json(pinned) == text
