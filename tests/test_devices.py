"""Device descriptions: the builtin targets, their published peaks, and every validation error.

Each bad file is the real sm90.yaml with one edit, written into tmp_path, so a test names
exactly one problem and its exact message.
"""
from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from ptc.devices import (Device, DeviceError, Throughput, builtin_targets, get_device,
                         load_device)
from ptc.devices.loader import BUILTIN_DIR
from ptc.devices.model import Terms
from ptc.diagnostics import CompileError

SM90 = (BUILTIN_DIR / "sm90.yaml").read_text()


# --- the builtins ----------------------------------------------------------------------------

def test_builtin_targets():
    assert builtin_targets() == ["gfx90a", "gfx942", "sm80", "sm90"]


@pytest.mark.parametrize("target", builtin_targets())
def test_builtin_loads(target):
    dev = get_device(target)
    assert isinstance(dev, Device)
    assert dev.name == target
    assert dev.path == BUILTIN_DIR / f"{target}.yaml"
    assert dev.backend == {"nvidia": "cuda", "amd": "hip"}[dev.vendor]
    assert dev.units_of("mma") and dev.units_of("copy")
    assert dev.resources.warp_size == (32 if dev.vendor == "nvidia" else 64)
    assert get_device(target) is dev  # builtins are cached (they are immutable)


# Published dense peaks in TFLOP/s: H100 SXM5 and A100 whitepapers / datasheets, AMD's MI300X
# datasheet, MI250X datasheet halved (one GCD: 383 / 2 = 110 CUs * 1024 * 1.7 GHz).
PEAKS = [
    ("sm90", "f16", 989.4), ("sm90", "bf16", 989.4), ("sm90", "tf32", 494.7),
    ("sm90", "f8e4m3", 1978.9), ("sm90", "i8", 1978.9),
    ("sm80", "f16", 312), ("sm80", "bf16", 312), ("sm80", "tf32", 156), ("sm80", "i8", 624),
    ("gfx942", "f16", 1307.4), ("gfx942", "bf16", 1307.4), ("gfx942", "tf32", 653.7),
    ("gfx942", "f32", 163.4), ("gfx942", "f8e4m3", 2614.9),
    ("gfx90a", "f16", 191.5), ("gfx90a", "bf16", 191.5), ("gfx90a", "f32", 47.85),
]


@pytest.mark.parametrize("target,dtype,tflops", PEAKS)
def test_peak_flops_match_published(target, dtype, tflops):
    assert get_device(target).peak_flops(dtype) == pytest.approx(tflops * 1e12, rel=0.01)


@pytest.mark.parametrize("target,tbs", [("sm90", 3.35), ("sm80", 2.039), ("gfx942", 5.3),
                                        ("gfx90a", 1.6384)])
def test_dram_bandwidth(target, tbs):
    dev = get_device(target)
    assert dev.peak_dram_bytes_per_s() == pytest.approx(tbs * 1e12)
    per_clock = tbs * 1e12 / (dev.clock_ghz * 1e9) / dev.eu_count
    assert dev.dram_bytes_per_cycle_per_eu == pytest.approx(per_clock)


def test_figures_the_design_names():
    h100, a100 = get_device("sm90"), get_device("sm80")
    mi300, mi250 = get_device("gfx942"), get_device("gfx90a")
    assert (h100.eu_count, a100.eu_count, mi300.eu_count, mi250.eu_count) == (132, 108, 304, 110)
    assert h100.unit("tensor_core").throughput["f16"] == 4096
    assert a100.unit("tensor_core").throughput["f16"] == 2048
    assert mi300.unit("matrix_core").throughput["f16"] == 2048
    assert mi250.unit("matrix_core").throughput["f16"] == 1024
    assert h100.resources.shared_memory_per_eu_bytes == 228 * 1024
    assert a100.resources.shared_memory_per_eu_bytes == 164 * 1024
    assert mi300.resources.shared_memory_bytes == mi250.resources.shared_memory_bytes == 64 * 1024
    assert h100.resources.registers == a100.resources.registers == 65536
    assert h100.resources.warpgroup_size == 4 and a100.resources.warpgroup_size == 1
    assert (h100.arch, a100.arch, mi300.arch, mi250.arch) == ("sm_90a", "sm_80", "gfx942", "gfx90a")


def test_units_and_features():
    h100, a100, mi300 = get_device("sm90"), get_device("sm80"), get_device("gfx942")
    assert [u.name for u in h100.units_of("copy")] == ["tma", "cp_async"]
    assert h100.unit("tma").is_async and h100.unit("tensor_core").is_async
    assert not a100.unit("tensor_core").is_async
    assert [u.name for u in a100.units_of("sfu")] == ["sfu"]
    assert mi300.unit("trans").shares == "valu"
    assert {"tma", "wgmma", "mbarrier", "setmaxnreg"} <= h100.features
    assert "wgmma" not in a100.features and "cp_async" in a100.features
    assert {"mfma", "lds", "s_waitcnt"} <= mi300.features
    with pytest.raises(KeyError, match="sm90 has no unit 'nope'"):
        h100.unit("nope")
    with pytest.raises(ValueError, match="unknown unit kind 'dma'"):
        h100.units_of("dma")
    with pytest.raises(ValueError, match=r"sm80 has no mma unit for 'f8e4m3' \(it multiplies: "
                                         r"f16, bf16, tf32, i8\)"):
        a100.peak_flops("f8e4m3")


def test_unit_cycles():
    tc = get_device("sm90").unit("tensor_core")
    assert tc.cycles(2 * 64 * 128 * 16, "f16") == 4 + 64  # wgmma m64n128k16 on one SM
    with pytest.raises(KeyError, match="no throughput for 'bytes'"):
        tc.cycles(1024)


def test_device_is_immutable_and_hashable():
    dev = get_device("sm90")
    tp = dev.unit("tensor_core").throughput
    assert isinstance(tp, Throughput)
    assert tp.get("f16") == 4096.0 and tp.get("f64") is None and "bf16" in tp
    assert dict(tp)["tf32"] == 2048.0
    with pytest.raises(TypeError):
        tp["f16"] = 1  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        dev.eu_count = 1  # type: ignore[misc]
    assert isinstance(dev.features, frozenset)
    assert hash(dev) == hash(get_device("sm90"))


# --- a user's own file -----------------------------------------------------------------------

def test_user_yaml_through_get_device(tmp_path):
    path = tmp_path / "h100_pcie.yaml"
    path.write_text(_edit(SM90, ("name: sm90", "name: h100_pcie"),
                          ("eu_count: 132", "eu_count: 114"),
                          ("clock_ghz: 1.83", "clock_ghz: 1.755")))
    dev = get_device(str(path))
    assert dev.name == "h100_pcie" and dev.eu_count == 114 and dev.path == path
    assert dev.peak_flops("f16") == pytest.approx(114 * 4096 * 1.755e9)
    assert get_device(path) == dev  # a Path works too
    assert get_device(str(path)) is not dev  # user files are read afresh


def test_user_yaml_relative_name(tmp_path, monkeypatch):
    shutil.copy(BUILTIN_DIR / "sm80.yaml", tmp_path / "mine.yaml")
    monkeypatch.chdir(tmp_path)
    assert get_device("mine.yaml").name == "sm80"


# --- errors ----------------------------------------------------------------------------------

def _edit(text: str, *edits: tuple[str, str]) -> str:
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


def _load_error(tmp_path: Path, text: str, name: str = "dev.yaml") -> tuple[str, DeviceError]:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(DeviceError) as info:
        load_device(path)
    return str(path), info.value


def _one_error(tmp_path, *edits, text=None):
    """The file's name, and the single diagnostic an edited sm90.yaml gets."""
    name, err = _load_error(tmp_path, text if text is not None else _edit(SM90, *edits))
    assert len(err.diagnostics) == 1, [d.message for d in err.diagnostics]
    return name, err.diagnostics[0]


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_throughput_not_a_mapping(tmp_path):
    f, d = _one_error(tmp_path, ("{f32: 128, f16: 256, bf16: 256, i32: 64}", "[128, 256]"))
    assert d.message == (f"{f}: eu.units[3].throughput: expected a mapping of dtype to number, "
                         "got a list")
    assert (d.span.line, d.span.col) == (_line_of(SM90, "{f32: 128, f16: 256"), 19)


def test_unknown_key_did_you_mean(tmp_path):
    f, d = _one_error(tmp_path, ("shared_memory_bytes: 232_448", "shared_mem_bytes: 232_448"))
    assert d.message == f"{f}: eu.resources: unknown key 'shared_mem_bytes'"
    assert d.hint == "did you mean 'shared_memory_bytes'?"  # and no "missing key" besides
    assert (d.span.line, d.span.col) == (_line_of(SM90, "shared_memory_bytes: 232_448"), 5)


def test_unknown_key_far_from_any(tmp_path):
    f, d = _one_error(tmp_path, ("  l2_bytes: 52_428_800", "  colour: red\n  l2_bytes: 52_428_800"))
    assert d.message == f"{f}: memory: unknown key 'colour'"
    assert d.hint == ("expected one of: dram_bandwidth_gbs, dram_bytes, l2_bytes, "
                      "l2_bandwidth_gbs, dram_latency_cycles")


def test_missing_key(tmp_path):
    f, d = _one_error(tmp_path, ("  l2_bytes: 52_428_800             # 50 MB [WP]\n", ""))
    assert d.message == f"{f}: memory: missing key 'l2_bytes'; expected a positive integer"
    assert d.span.line == _line_of(SM90, "memory:") + 1  # the mapping that lacks it


def test_a_device_without_terms_speaks_nvidias_words(tmp_path):
    """`terms` may be left out (a user's YAML written before it existed): warps, CTAs, SMs."""
    path = tmp_path / "dev.yaml"
    path.write_text("\n".join(line for line in SM90.splitlines()
                              if not line.startswith("terms:")) + "\n")
    assert load_device(path).terms == Terms()
    assert Terms().warps(1) == "1 warp" and Terms(warp="wave").warps(4) == "4 waves"


def test_missing_top_level_key(tmp_path):
    f, d = _one_error(tmp_path, ("features: [", "# features: ["))
    assert d.message == f"{f}: missing key 'features'; expected a list"


@pytest.mark.parametrize("edit,message", [
    (("eu_count: 132", "eu_count: true"),
     "eu_count: expected a positive integer, got a boolean (true)"),
    (("eu_count: 132", "eu_count: 0"), "eu_count: expected a positive integer, got 0"),
    (("warp_size: 32", "warp_size: -32"),
     "eu.resources.warp_size: expected a positive integer, got -32"),
    (("max_blocks: 32", "max_blocks: 32.5"),
     "eu.resources.max_blocks: expected a positive integer, got 32.5"),
    (("clock_ghz: 1.83", "clock_ghz: -1.83"), "clock_ghz: expected a positive number, got -1.83"),
    (("clock_ghz: 1.83", "clock_ghz: .nan"), "clock_ghz: expected a positive number, got nan"),
    (("clock_ghz: 1.83", "clock_ghz: yes"),
     "clock_ghz: expected a positive number, got a boolean (true)"),
    (("dram_bandwidth_gbs: 3350", "dram_bandwidth_gbs:"),
     "memory.dram_bandwidth_gbs: expected a positive number, got nothing (null)"),
    (("async: true                  # wgmma", "async: 1                  # wgmma"),
     "eu.units[2].async: expected true or false, got 1"),
    (("issue_latency_cycles: 8 ", "issue_latency_cycles: -8 "),
     "eu.units[0].issue_latency_cycles: expected a non-negative integer, got -8"),
    (("count: 1 ", "count: 0 "), "eu.units[0].count: expected a positive integer, got 0"),
    (("description: NVIDIA H100 SXM5 80GB (Hopper)", "description: ''"),
     "description: expected a non-empty string, got an empty string"),
    (("name: sm90", "name: H100"),
     "name: expected an identifier (lower-case letters, digits and _), got the string 'H100'"),
    (("arch: sm_90a", "arch: hopper"),
     "arch: expected an arch like sm_90a or gfx942, got the string 'hopper'"),
    (("features: [tma,", "features: {tma: 1}\nxfeatures: [tma,"),
     "features: expected a list, got a mapping"),
    (("fragment_load: ldmatrix}", "fragment_load: 4}"),
     "terms.fragment_load: expected a non-empty string, got 4"),
])
def test_wrong_types(tmp_path, edit, message):
    text = _edit(SM90, edit)
    if "xfeatures" in text:  # keep exactly one problem: drop the displaced list
        text = text[:text.index("\nxfeatures")] + "\n"
    f, d = _one_error(tmp_path, text=text)
    assert d.message == f"{f}: {message}"


def test_number_written_as_string(tmp_path):
    f, d = _one_error(tmp_path, ("dram_bytes: 85_899_345_920", "dram_bytes: 80e9"))
    assert d.message == (f"{f}: memory.dram_bytes: expected a positive integer, "
                         "got the string '80e9'")
    assert d.hint == ("YAML 1.1 reads 80e9 as a string: write the exponent with a '.' and a sign "
                      "(e.g. 1.0e+9) or the number in full")
    f, d = _one_error(tmp_path, ("eu_count: 132", "eu_count: '132'"))
    assert d.hint == "remove the quotes to make it a number"


def test_unknown_unit_kind(tmp_path):
    f, d = _one_error(tmp_path, ("kind: sfu", "kind: sfux"))
    assert d.message == (f"{f}: eu.units[4].kind: expected one of 'copy', 'mma', 'simt', 'sfu', "
                         "got the string 'sfux'")
    assert d.hint == "did you mean 'sfu'?"


def test_unknown_vendor(tmp_path):
    f, d = _one_error(tmp_path, ("vendor: nvidia", "vendor: nvida"))
    assert d.message == f"{f}: vendor: expected one of 'nvidia', 'amd', got the string 'nvida'"
    assert d.hint == "did you mean 'nvidia'?"


def test_duplicate_unit_names(tmp_path):
    f, d = _one_error(tmp_path, ("name: cp_async", "name: tma"))
    assert d.message == f"{f}: eu.units[1].name: duplicate unit name 'tma' (also eu.units[0])"


def test_no_mma_unit(tmp_path):
    f, d = _one_error(tmp_path, ("kind: mma", "kind: simt"),
                      ("{f16: 4096, bf16: 4096, tf32: 2048, f8e4m3: 8192, f8e5m2: 8192, i8: 8192}",
                       "{f16: 4096}"))
    assert d.message == (f"{f}: eu.units: no unit of kind 'mma' (a device needs at least one "
                         "mma unit and one copy unit)")


def test_no_copy_unit(tmp_path):
    text = SM90[:SM90.index("    - name: tma")] + SM90[SM90.index("    - name: tensor_core"):]
    f, d = _one_error(tmp_path, text=text)
    assert d.message == (f"{f}: eu.units: no unit of kind 'copy' (a device needs at least one "
                         "mma unit and one copy unit)")


def test_no_units(tmp_path):
    text = SM90[:SM90.index("  units:")] + "  units: []\n" + SM90[SM90.index("features:"):]
    f, d = _one_error(tmp_path, text=text)
    assert d.message == f"{f}: eu.units: expected at least 1 entry, got none"


def test_copy_unit_throughput_in_bytes(tmp_path):
    f, d = _one_error(tmp_path, ("throughput: {bytes: 128}     # shared",
                                 "throughput: {f16: 128}     # shared"))
    assert d.message == (f"{f}: eu.units[0].throughput: a copy unit's throughput is bytes per "
                         "clock ({bytes: N}), got f16")


def test_compute_unit_throughput_not_bytes(tmp_path):
    f, d = _one_error(tmp_path, ("throughput: {f32: 16}", "throughput: {bytes: 16}"))
    assert d.message == (f"{f}: eu.units[4].throughput: a sfu unit's throughput is per dtype "
                         "(e.g. {f16: 4096}), not in bytes")


def test_unknown_dtype(tmp_path):
    f, d = _one_error(tmp_path, ("{f32: 128, f16: 256, bf16: 256, i32: 64}",
                                 "{f32: 128, fp16: 256, bf16: 256, i32: 64}"))
    assert d.message == f"{f}: eu.units[3].throughput: unknown throughput key 'fp16'"
    assert d.hint == "did you mean 'f16'?"
    line = _line_of(SM90, "{f32: 128, f16: 256")
    assert (d.span.line, d.span.col) == (line, SM90.splitlines()[line - 1].index("f16") + 1)


def test_throughput_not_positive(tmp_path):
    f, d = _one_error(tmp_path, ("throughput: {f32: 16}", "throughput: {f32: 0}"))
    assert d.message == f"{f}: eu.units[4].throughput.f32: expected a positive number, got 0"


def test_empty_throughput(tmp_path):
    f, d = _one_error(tmp_path, ("throughput: {f32: 16}", "throughput: {}"))
    assert d.message == (f"{f}: eu.units[4].throughput: expected a mapping of dtype to number, "
                         "got an empty mapping")


def test_shares_unknown_unit(tmp_path):
    mufu = "      latency_cycles: 20           # [EST] MUFU"
    f, d = _one_error(tmp_path, (mufu, "      shares: cuda_cor\n" + mufu))
    assert d.message == f"{f}: eu.units[4].shares: no unit named 'cuda_cor'"
    assert d.hint == "did you mean 'cuda_core'?"


def test_backend_vendor_mismatch(tmp_path):
    f, d = _one_error(tmp_path, ("backend: cuda", "backend: hip"))
    assert d.message == f"{f}: backend: 'hip' does not go with vendor 'nvidia' (expected 'cuda')"


def test_arch_vendor_mismatch(tmp_path):
    f, d = _one_error(tmp_path, ("arch: sm_90a", "arch: gfx942"))
    assert d.message == f"{f}: arch: 'gfx942' is not an nvidia arch (expected sm_NN, e.g. sm_90a)"


def test_unknown_feature(tmp_path):
    f, d = _one_error(tmp_path, ("features: [tma, wgmma,", "features: [tma, wgmm,"))
    assert d.message == f"{f}: features[1]: unknown nvidia feature 'wgmm'"
    assert d.hint == "did you mean 'wgmma'?"
    f, d = _one_error(tmp_path, ("features: [tma, wgmma,", "features: [tma, warp_spec,"))
    assert d.message == f"{f}: features[1]: unknown nvidia feature 'warp_spec'"
    assert d.hint.startswith("known nvidia features: cp_async, ldmatrix,")
    f, d = _one_error(tmp_path, ("features: [tma, wgmma,", "features: [tma, mfma,"))
    assert d.message == f"{f}: features[1]: 'mfma' is an amd feature, not an nvidia one"
    assert d.hint is None


def test_duplicate_feature(tmp_path):
    f, d = _one_error(tmp_path, ("features: [tma, wgmma,", "features: [tma, tma, wgmma,"))
    assert d.message == f"{f}: features[1]: duplicate feature 'tma'"


def test_resources_that_cannot_fit(tmp_path):
    f, d = _one_error(tmp_path, ("shared_memory_bytes: 232_448", "shared_memory_bytes: 300_000"))
    assert d.message == (f"{f}: eu.resources.shared_memory_bytes: 300000 is more than "
                         "shared_memory_per_eu_bytes (233472)")
    f, d = _one_error(tmp_path, ("max_threads_per_block: 1024", "max_threads_per_block: 1000"))
    assert d.message == (f"{f}: eu.resources.max_threads_per_block: 1000 is not a multiple of "
                         "warp_size (32)")


def test_yaml_syntax_error(tmp_path):
    text = _edit(SM90, ("eu_count: 132", "eu_count: 132: 4"))
    f, d = _one_error(tmp_path, text=text)
    assert d.message == f"{f}: invalid YAML: mapping values are not allowed here"
    assert (d.span.line, d.span.col) == (_line_of(text, "eu_count: 132: 4"), 14)


def test_yaml_unclosed_bracket(tmp_path):
    f, d = _one_error(tmp_path, text="name: sm90\nfeatures: [tma, wgmma\n")
    assert d.message.startswith(f"{f}: invalid YAML: ")
    assert d.span.line >= 2


def test_duplicate_yaml_key(tmp_path):
    text = _edit(SM90, ("eu_count: 132", "eu_count: 132\neu_count: 114"))
    f, d = _one_error(tmp_path, text=text)
    first = _line_of(text, "eu_count: 132")
    assert d.message == f"{f}: duplicate key 'eu_count' (first at line {first})"
    assert (d.span.line, d.span.col) == (first + 1, 1)


def test_not_a_mapping(tmp_path):
    f, d = _one_error(tmp_path, text="- sm90\n- sm80\n")
    assert d.message == f"{f}: expected a mapping of device settings at the top level, got a list"


def test_empty_file(tmp_path):
    f, d = _one_error(tmp_path, text="# nothing yet\n")
    assert d.message == f"{f}: the file is empty (expected a mapping of device settings)"


def test_recursive_alias(tmp_path):
    text = _edit(SM90, ("eu:\n  resources:", "eu: &eu\n  nested: *eu\n  resources:"))
    _, err = _load_error(tmp_path, text)
    assert any("eu: unknown key 'nested'" in d.message for d in err.diagnostics)
    text = "eu: &e\n  resources: *e\n"
    _, err = _load_error(tmp_path, text)
    recursive = "eu.resources: the value contains itself (a recursive YAML alias)"
    assert any(d.message.endswith(recursive) for d in err.diagnostics)


def test_missing_file(tmp_path):
    path = tmp_path / "nowhere.yaml"
    with pytest.raises(DeviceError) as info:
        get_device(str(path))
    assert [d.message for d in info.value.diagnostics] == [f"{path}: no such file"]


def test_unknown_target():
    with pytest.raises(CompileError) as info:
        get_device("sm_90a")
    (d,) = info.value.diagnostics
    assert d.message == "unknown target 'sm_90a'"
    assert d.hint == ("did you mean 'sm90'? builtin targets: gfx90a, gfx942, sm80, sm90; "
                      "or give the path of a device .yaml file")
    with pytest.raises(CompileError) as info:
        get_device("tpu")
    assert info.value.diagnostics[0].hint == ("builtin targets: gfx90a, gfx942, sm80, sm90; "
                                              "or give the path of a device .yaml file")


def test_several_errors_reported_together_in_file_order(tmp_path):
    f, err = _load_error(tmp_path, _edit(SM90, ("eu_count: 132", "eu_count: 0"),
                                         ("warp_size: 32", "warp_size: many"),
                                         ("kind: sfu", "kind: sfux")))
    assert [d.message.split(": ")[1] for d in err.diagnostics] == [
        "eu_count", "eu.resources.warp_size", "eu.units[4].kind"]
    lines = [d.span.line for d in err.diagnostics]
    assert lines == sorted(lines)


def test_render(tmp_path):
    f, err = _load_error(tmp_path, _edit(SM90, ("kind: sfu", "kind: sfux")))
    line = _line_of(SM90, "kind: sfu")
    assert err.render() == (
        f"{f}:{line}:13: error: eu.units[4].kind: expected one of 'copy', 'mma', 'simt', "
        "'sfu', got the string 'sfux'\n"
        "      kind: sfux\n"
        "            ^~~~\n"
        "hint: did you mean 'sfu'?")


def test_alu_registers_are_optional_and_at_most_the_registers_of_a_thread(tmp_path):
    assert get_device("sm90").resources.alu_registers == 255       # left out: all of them
    amd = get_device("gfx942").resources
    assert (amd.alu_registers, amd.max_registers_per_thread) == (256, 512)
    f, d = _one_error(tmp_path, ("max_registers_per_thread: 255       # [PG]",
                                 "max_registers_per_thread: 255\n"
                                 "    alu_registers_per_thread: 300"))
    assert d.message == (f"{f}: eu.resources.alu_registers_per_thread: 300 is more than "
                         "max_registers_per_thread (255)")


def test_schedulers_and_fragment_bytes_come_from_the_description(tmp_path):
    """What the HIP renderer's waves per SIMD and the cost model's fragment loads read:
    the device's own figures, required like the other resources."""
    from dataclasses import replace

    from ptc.targets.hip.render import waves_per_simd

    res = get_device("gfx90a").resources
    assert (res.schedulers_per_eu, res.fragment_load_bytes) == (4, 512)
    assert waves_per_simd(2, 256, res) == 2            # 2 blocks x 4 waves over 4 SIMDs
    assert waves_per_simd(2, 256, replace(res, schedulers_per_eu=2)) == 4
    f, d = _one_error(tmp_path, ("    schedulers_per_eu: 4                # 4 SM sub-partitions, "
                                 "one warp scheduler each [WP]\n", ""))
    assert d.message == (f"{f}: eu.resources: missing key 'schedulers_per_eu'; expected a "
                         "positive integer")
