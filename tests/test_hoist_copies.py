"""A loop's copies computed at trip 0 before it, each trip adding its step (ptc.lower.
hoist_copies): the steps of affine index expressions, which copies the lowering hoists and
where it leaves them (the register rule), and what the machine code loses (nvcc). The
emulated runs of the hoisted samples at ragged shapes are test_emulate's and
test_coverage's (the form `copy.hoisted`)."""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from ptc.devices import get_device
import ptc.lower.hoist_copies as hoist_module
from ptc.driver import check_file
from ptc.lower import ir
from ptc.lower.affine import step
from ptc.lower.printer import print_lowered
from ptc.render import capabilities
from ptc.sema import typed as T

ROOT = Path(__file__).resolve().parent.parent
I32 = T.TileType("i32", ())


def idx(name: str) -> T.Scalar:
    return T.Scalar(name, "index", I32)


def dim(name: str) -> T.Scalar:
    return T.Scalar(name, "dim", I32)


def c(value: int) -> T.Const:
    return T.Const(value, I32)


def op(name: str, a, b) -> T.Elementwise:
    return T.Elementwise(name, (a, b), I32)


@pytest.mark.parametrize("expr, want", [
    (op("mul", op("add", idx("k"), c(1)), c(64)), c(64)),                    # (k + 1) * 64
    (op("add", op("mul", op("mul", op("add", idx("k"), c(1)), c(64)), dim("N")),
            op("mul", idx("j"), c(128))), op("mul", c(64), dim("N"))),      # B's origin
    (op("sub", dim("K"), op("mul", idx("k"), c(32))), c(-32)),
    (op("mul", idx("j"), c(128)), c(0)),                                     # invariant
])
def test_the_step_of_an_affine_index_is_what_one_trip_adds(expr, want):
    assert step(expr, "k") == want


@pytest.mark.parametrize("expr", [
    op("mul", idx("k"), idx("k")),
    op("floordiv", idx("k"), c(2)),
    op("mul", idx("k"), op("add", idx("k"), c(1))),
])
def test_an_index_that_is_not_affine_in_the_loop_has_no_step(expr):
    assert step(expr, "k") is None


def _lowered(kernel, target, shapes, tiles=None):
    from ptc.driver import lowered_plan, schedule
    best = schedule(kernel, target, shapes=shapes, tiles=tiles).best
    return lowered_plan(best.plan, best.graph, get_device(target))[0]


def hoisted(low) -> list[str]:
    return [op.task for op in ir.walk(low.body) if isinstance(op, ir.CopyTile) and op.hoisted]


# sm80's gemm and matmul_sum at 64 x 128 tiles: their searched 128 x 128 plans (4 warps
# of 64 x 64) leave no room beside the accumulator
TILES_WITH_ROOM = {"BM": 64, "BN": 128, "BK": 64}


@pytest.mark.parametrize("name, target, copies, tiles", [
    ("gemm", "sm80", ["load_A", "load_B"], TILES_WITH_ROOM),
    ("matmul_sum", "sm80", ["load_A", "load_B"], TILES_WITH_ROOM),
    ("fp8_gemm", "sm80", ["load_A", "load_W"], None), ("gemm", "gfx90a", ["load_A", "load_B"], None),
    ("gemm", "gfx942", ["load_A", "load_B"], None)])
def test_a_gemms_k_tiles_are_hoisted_and_counted_in_its_registers(name, target, copies, tiles,
                                                                  monkeypatch):
    kernel = check_file(ROOT / "samples" / f"{name}.pt").kernels[0]
    low = _lowered(kernel, target, None, tiles)
    assert hoisted(low) == copies
    assert "address at trip 0 + a step a trip" in print_lowered(low)
    monkeypatch.setattr(hoist_module, "HEADROOM", 0.0)       # nothing fits: none hoisted
    plain = _lowered(kernel, target, None, tiles)
    assert not hoisted(plain)
    assert low.launch.registers == plain.launch.registers + \
        hoist_module.HOISTED_WORDS * len(copies)


def test_a_renderer_that_prints_no_hoisted_copy_gets_none(monkeypatch):
    kernel = check_file(ROOT / "samples" / "gemm.pt").kernels[0]
    monkeypatch.setattr(hoist_module, "HEADROOM", 0.0)
    plain = _lowered(kernel, "sm80", None).body
    monkeypatch.undo()
    caps = capabilities(get_device("sm80"))
    assert hoist_module.hoist_copies(plain, 100, 255, 255, caps)[0] != plain
    for without in (None, replace(caps, hoisted_copies=False)):
        assert hoist_module.hoist_copies(plain, 100, 255, 255, without) == (plain, 100)


@pytest.mark.parametrize("name, why", [
    ("cross_entropy", "~92 estimated + 8 hoisted of 102 at 5 blocks: ptxas spilled"),
    ("w4a16", "~136 estimated, past half of 255: ptxas took 255 and spilled with 4 more"),
])
def test_copies_stay_where_the_registers_leave_no_room(name, why, monkeypatch):
    """Their copies could be hoisted: the register rule is what keeps them."""
    from test_kernels import path_of, shapes_of
    kernel = check_file(path_of(name), shapes_of(name)).kernels[0]
    assert not hoisted(_lowered(kernel, "sm80", shapes_of(name))), why
    monkeypatch.setattr(hoist_module, "HEADROOM", 10.0)
    monkeypatch.setattr(hoist_module, "TRUSTED", 10.0)
    assert hoisted(_lowered(kernel, "sm80", shapes_of(name)))


@pytest.mark.nvcc
@pytest.mark.parametrize("name", ["gemm", "matmul_sum", "fp8_gemm"])
def test_the_main_loop_of_hoisted_copies_has_no_64_bit_multiply_or_compare(name, tmp_path):
    """Recomputed each trip, a copy's address is a 64-bit multiply (IMAD.WIDE) and its
    extents 64-bit compares (ISETP ... .EX); hoisted, each trip adds its step."""
    import importlib

    from ptc.runtime import prepare
    from ptc.runtime.mainloop import mainloop_reports
    from ptc.runtime.symbols import kernel_name

    build = importlib.import_module("ptc.runtime.build")
    prepared = prepare(ROOT / "samples" / f"{name}.pt", "sm80",
                       tiles=None if name == "fp8_gemm" else TILES_WITH_ROOM)
    assert "g0_load_A" in prepared.source
    folder = tmp_path / "build"
    build.write_build_dir(folder, kernel_source=prepared.source, signature=prepared.signature,
                          arch=prepared.device.arch, target="sm80",
                          plan_json=prepared.plan_json)
    build.build(folder, prepared.device.arch, report_only=True)
    (loop,) = [r for r in mainloop_reports(build.sass(folder))
               if kernel_name(r.kernel).endswith("<true>")]
    wide = {m: n for m, n in loop.mnemonics if m.startswith("IMAD.WIDE")
            or re.match(r"ISETP\..*\.EX", m)}
    assert not wide, wide
