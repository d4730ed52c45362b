"""The driver's stage cache (ptc.stage_cache): a search is done once per content key, and
anything the result depends on -- the kernel, the device description, the dims, the pinned
tiles, ptc's own files -- makes a new key."""
from __future__ import annotations

import pickle
from pathlib import Path

import pytest

import ptc.sched.search as search_module
from ptc import driver, stage_cache
from ptc.devices import get_device

ROOT = Path(__file__).resolve().parent.parent
GEMM = ROOT / "samples" / "gemm.pt"
SMALL = {"M": 256, "N": 256, "K": 128}


@pytest.fixture
def searches(tmp_path, monkeypatch):
    """A fresh cache folder, and the list of searches that really ran."""
    monkeypatch.setenv("PTC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PTC_STAGE_CACHE", raising=False)
    ran = []
    real = search_module.search

    def counted(kernel, device, dims, **options):
        ran.append((kernel.name, device.name, dict(dims), dict(options["fixed_tiles"])))
        return real(kernel, device, dims, **options)
    monkeypatch.setattr(search_module, "search", counted)
    return ran


def gemm(text_change: str = ""):
    text = GEMM.read_text()
    if text_change:
        text = text.replace("tile BM in [128, 64, 256]", text_change)
    return driver.check(driver.parse(text, "gemm.pt"), SMALL).kernels[0]


def plans(result):
    return [(c.tiles, c.choice, c.plan) for c in result.ranked]


def test_the_same_search_runs_once_and_gives_the_same_plans(searches, tmp_path):
    first = driver.schedule(gemm(), "sm80", shapes=SMALL)
    again = driver.schedule(gemm(), "sm80", shapes=SMALL)
    assert len(searches) == 1
    assert not first.cached and again.cached
    assert plans(again) == plans(first) and again.rejected == first.rejected
    # the graphs are rebuilt from the caller's kernel: the same graph per tile combination
    assert all(c.graph == f.graph for c, f in zip(again.ranked, first.ranked))
    assert again.kernel is not first.kernel
    entries = list((tmp_path / "cache" / "stages" / "search").rglob("*.pickle"))
    assert len(entries) == 1


def test_a_new_process_finds_the_entry_on_disk(searches):
    first = driver.schedule(gemm(), "sm80", shapes=SMALL)
    stage_cache.STAGES.memory.clear()          # as a new process would start
    again = driver.schedule(gemm(), "sm80", shapes=SMALL)
    assert len(searches) == 1 and plans(again) == plans(first)


def test_a_new_process_searching_at_other_dims_makes_no_candidate_again(searches,
                                                                         monkeypatch):
    """The candidates a search made (plans as built: construct, verify, lower) are kept in
    the stage cache: another process's search of the kernel at other dims only times them,
    and ranks what a search that makes them afresh ranks."""
    driver.schedule(gemm(), "sm80", shapes=SMALL)
    stage_cache.STAGES.memory.clear()          # as a new process would start
    driver.forget_candidates()
    lowered = []
    real = driver.built_plan
    monkeypatch.setattr(driver, "built_plan",
                        lambda plan, graph, device: lowered.append(plan) or real(plan, graph,
                                                                                 device))
    other = {"M": 200, "N": 136, "K": 72}
    again = driver.schedule(gemm(), "sm80", shapes=other)
    assert len(searches) == 2 and lowered == []
    device = get_device("sm80")
    fresh = search_module.search(gemm(), device, driver.problem_dims(gemm(), other),
                                 fixed_tiles={}, made={}, **driver.build_options(device))
    assert plans(again) == plans(fresh) and again.rejected == fresh.rejected
    assert lowered, "the fresh search lowers its candidates"


def test_what_the_result_depends_on_makes_a_new_key(searches, tmp_path, monkeypatch):
    driver.schedule(gemm(), "sm80", shapes=SMALL)
    driver.schedule(gemm(), "sm90", shapes=SMALL)                      # another device
    driver.schedule(gemm(), "sm80", shapes={**SMALL, "K": 256})        # other dims
    driver.schedule(gemm(), "sm80", shapes=SMALL, tiles={"BM": 64})    # a pinned tile
    driver.schedule(gemm("tile BM in [64, 128]"), "sm80", shapes=SMALL)  # another kernel
    assert len(searches) == 5
    # a device YAML with the same name but another number in it
    yaml = (ROOT / "ptc" / "devices" / "sm80.yaml").read_text()
    changed = tmp_path / "sm80.yaml"
    changed.write_text(yaml.replace("clock_ghz: 1.41", "clock_ghz: 1.2"))
    assert changed.read_text() != yaml
    assert get_device(str(changed)).name == "sm80"
    driver.schedule(gemm(), str(changed), shapes=SMALL)
    assert len(searches) == 6
    # ptc's own files changed
    monkeypatch.setattr(stage_cache, "ptc_fingerprint", lambda: "another ptc")
    driver.schedule(gemm(), "sm80", shapes=SMALL)
    assert len(searches) == 7


def test_an_unreadable_entry_is_computed_again(searches, tmp_path):
    first = driver.schedule(gemm(), "sm80", shapes=SMALL)
    (entry,) = (tmp_path / "cache" / "stages" / "search").rglob("*.pickle")
    entry.write_bytes(b"not a pickle")
    stage_cache.STAGES.memory.clear()
    again = driver.schedule(gemm(), "sm80", shapes=SMALL)
    assert len(searches) == 2 and plans(again) == plans(first)
    assert pickle.loads(entry.read_bytes()).ranked      # rewritten


def test_the_cache_can_be_turned_off(searches, monkeypatch, tmp_path):
    monkeypatch.setenv("PTC_STAGE_CACHE", "0")
    driver.schedule(gemm(), "sm80", shapes=SMALL)
    driver.schedule(gemm(), "sm80", shapes=SMALL)
    assert len(searches) == 2
    assert not (tmp_path / "cache" / "stages").exists()


def test_a_failed_search_is_not_stored(searches):
    with pytest.raises(driver.CompileError):
        driver.schedule(gemm("tile BM = 100000"), "sm80", shapes=SMALL)
    with pytest.raises(driver.CompileError):
        driver.schedule(gemm("tile BM = 100000"), "sm80", shapes=SMALL)
    assert len(searches) == 2


def test_keys_do_not_depend_on_set_order():
    a = stage_cache.canonical({"features": frozenset({"tma", "wgmma", "cp_async", "ldmatrix"})})
    b = stage_cache.canonical({"features": frozenset({"ldmatrix", "cp_async", "wgmma", "tma"})})
    assert repr(a) == repr(b)
    device = get_device("sm90")
    assert stage_cache.content_key("x", device) == stage_cache.content_key("x", get_device("sm90"))


def test_the_fingerprint_is_ptcs_code_not_its_templates(tmp_path, monkeypatch):
    """An edit to a Python module or a device YAML is a new key; an edit to a device or
    emulation header is not (no cached stage reads one), so it does not make the next
    run search everything again."""
    import shutil

    copy = tmp_path / "ptc"
    shutil.copytree(stage_cache.PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))

    def fingerprint() -> str:
        stage_cache.ptc_fingerprint.cache_clear()
        return stage_cache.ptc_fingerprint()

    monkeypatch.setattr(stage_cache, "PACKAGE", copy)
    try:
        first = fingerprint()
        (copy / "targets" / "cuda" / "templates" / "mma_sync.cuh").write_text("// edited\n")
        assert fingerprint() == first
        (copy / "templates" / "common" / "ptc_numerics.h").write_text("// edited\n")
        assert fingerprint() == first
        (copy / "sched" / "cost.py").write_text("# edited\n")
        assert fingerprint() != first
    finally:
        stage_cache.ptc_fingerprint.cache_clear()


def test_a_compile_key_is_blind_to_comment_lines_only():
    """stage_cache.code_text: comment-only lines are blanked, every line kept (the line
    numbers a compiler records do not move); code, trailing comments, a comment continued
    by a backslash and `//` inside a string stay."""
    source = ('// estimate: 1.5 us at the benchmark shape\n'
              '  // for k: 32 of K\n'
              'int x = 1;  // trailing\n'
              '// continued \\\n'
              'int y = 2;\n'
              'const char* s = "// not a comment";\n')
    text = stage_cache.code_text(source)
    assert text.count("\n") == source.count("\n")
    assert text.splitlines()[:2] == ["", ""]
    assert text.splitlines()[2:] == source.splitlines()[2:]


def test_one_plan_rendered_at_two_shapes_is_one_compile_key():
    """The rendered header's estimate depends on the shape; the code does not."""
    kernel = driver.check_file(ROOT / "samples" / "gemm.pt").kernels[0]
    tiles = dict(BM=64, BN=64, BK=32)
    a = driver.render(kernel, "sm80", shapes=dict(M=200, N=136, K=72), tiles=tiles)[0]
    b = driver.render(kernel, "sm80", shapes=dict(M=4096, N=4096, K=72), tiles=tiles)[0]
    assert a != b and "estimate:" in a
    assert stage_cache.code_text(a) == stage_cache.code_text(b)


def test_a_rule_a_backend_declares_keys_by_its_name_not_its_address():
    """Capabilities carry functions (HIP's buffer_rule): a key names them by module and
    name, so two processes key the same search alike."""
    from ptc.render import capabilities

    caps = capabilities(get_device("gfx942"))
    text = repr(stage_cache.canonical(caps))
    assert "('function', 'ptc.targets.hip.buffers', 'buffer_rule')" in text
    assert " at 0x" not in text


def test_an_entry_is_stored_with_its_equal_parts_shared(searches):
    """A search's plans repeat the same steps, buffers and issue counts: stored with each
    equal immutable part made one object, the entry is the same value, smaller, and what
    was shared in memory stays one object when read back."""
    from ptc.sched.search import SearchRecord

    result = driver.schedule(gemm(), "sm90", shapes=SMALL)
    record = SearchRecord.of(result)
    shared = stage_cache.shared_parts(record)
    assert shared == record
    assert len(pickle.dumps(shared)) < len(pickle.dumps(record)) / 2
    launches = [plan.launch for _, _, plan in shared.ranked]
    equal = [b for b in launches[1:] if b == launches[0]]
    assert equal and all(b is launches[0] for b in equal)
    (path,) = (Path(stage_cache.cache_root()) / "stages" / "search").glob("*/*.pickle")
    stored = pickle.loads(path.read_bytes())
    assert stored == record
    launches = [plan.launch for _, _, plan in stored.ranked]
    assert all(b is launches[0] for b in launches[1:] if b == launches[0])


def test_only_parts_that_are_the_same_in_every_attribute_are_merged():
    """Equal under == is not enough: a field left out of == (a layout's note), -0.0 beside
    0.0, 1 beside 1.0 and True stay apart; lists and dicts are copied, never merged, and a
    list that was one object stays one."""
    from ptc.lower.layout import Layout, digits

    def layout(note):
        return Layout("L", (16, 16), digits((2, (0, 1))), digits((32, (1, 0))), (), note)

    a, b = layout("a"), layout("b")
    assert a == b
    out = stage_cache.shared_parts((a, b, layout("a")))
    assert out[0] is out[2] and out[0] is not out[1] and out[1].note == "b"
    signs = stage_cache.shared_parts(((0.0,), (-0.0,), (1,), (1.0,), (True,)))
    assert [repr(t[0]) for t in signs] == ["0.0", "-0.0", "1", "1.0", "True"]
    assert len({id(t) for t in signs}) == 5
    xs = [1, 2]
    lists = stage_cache.shared_parts(([1, 2], [1, 2], xs, xs, {"k": 1}, {"k": 1}))
    assert lists[0] == lists[1] and lists[0] is not lists[1] and lists[2] is lists[3]
    assert lists[4] is not lists[5] and lists[0] is not xs
