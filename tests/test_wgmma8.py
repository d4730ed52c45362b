"""Issue 21, part 3c: wgmma with 8-bit operands on sm90a (m64nNk32 .s32.s8.s8, and
.f32.{e4m3,e5m2}.{e4m3,e5m2} for FP8).

An i8 GEMM whose operands are both K-major (A `[M, K]`, B `[N, K]` read as
`load(B[j, k]).T`) runs in sm90's warp-specialized plans on wgmma: TMA writes the tiles,
the descriptors address them in bytes (a 32-byte k-step is 32 elements), and the emulator
computes each wgmma from the PTX ISA's K-major canonical layouts with T = 16 elements per
16 bytes. The truth is NumPy's int64 product wrapped to 32 bits (test_int8_mma.formula).
8-bit wgmma has no transposes, so B stored `[K, N]` keeps mma.sync and explain says why.
An 8-bit A computed in registers is read from there (RS), four bytes a register.
"""
from __future__ import annotations

import importlib
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from ptc.devices import get_device
from ptc.interp import run_kernel
from ptc.lower.atoms import why_no_wgmma, wgmma_widths
from ptc.render import render_kernel
from ptc.sched.construct import Choice, Unfit, construct
from ptc.stask import build_graphs, propagate
from test_int8_mma import IGEMM, KERNELS, ORDERS, emulated, formula, inputs_for, typed

SM90 = get_device("sm90")
HEADERS = Path(__file__).resolve().parent.parent / "ptc" / "targets" / "cuda" / "templates"
W8A8_NT = KERNELS["w8a8"].replace("B: i8[K, N]", "B: i8[N, K]").replace(
    "load(B[k, j])", "load(B[j, k]).T").replace("kernel w8a8(", "kernel w8a8_nt(")
GEMMS = {"igemm_nt": KERNELS["igemm_nt"], "w8a8_nt": W8A8_NT}
# (shapes, tiles, consumer warpgroups): one 64-row consumer at BK 64 (64-byte spans), two
# consumers dividing 128 rows at BK 128 (128-byte spans), and ragged M and N at BK 32
# (32-byte spans; N = 40 past a 48-wide tile: the TMA box zero-fills)
CASES = {
    "even": (dict(M=128, N=128, K=128), dict(BM=64, BN=64, BK=64), 1),
    "even-2consumers": (dict(M=128, N=128, K=256), dict(BM=128, BN=128, BK=128), 2),
    "edge": (dict(M=72, N=40, K=96), dict(BM=64, BN=48, BK=32), 1),
}


def truth(name: str, inputs: dict) -> np.ndarray:
    """test_int8_mma.formula, with B stored [N, K]."""
    if name == "w8a8_nt":
        flipped = dict(inputs, B=np.ascontiguousarray(inputs["B"].T))
        return formula("w8a8", flipped)["C"]
    return formula("igemm_nt", inputs)["C"]


def make_inputs(name: str, shapes: dict) -> dict:
    if name == "igemm_nt":
        return inputs_for("igemm_nt", shapes)
    base = inputs_for("w8a8", shapes)
    rng = np.random.default_rng(3)
    base["B"] = rng.integers(-128, 128, (shapes["N"], shapes["K"])).astype(np.int8)
    return base


@lru_cache(maxsize=None)
def specialized(name: str, case: str):
    shapes, tiles, consumers = CASES[case]
    kernel = typed(GEMMS[name], shapes)
    (graph,) = build_graphs(kernel)
    graph = propagate(graph, tiles)
    plan = construct(graph, SM90, Choice("warp_specialized", 2, consumers))
    return kernel, plan, render_kernel(kernel, plan, graph, SM90)


def test_the_widths_are_the_ptx_isas_integer_shapes():
    # PTX ISA, wgmma.mma_async: .m64nNk32 for .s8 has N = 8, 16, 24, 32, 48, ..., 256
    assert wgmma_widths("i8") == (8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176,
                                  192, 208, 224, 240, 256)
    assert why_no_wgmma("i8", 64, 40, 32) is not None
    assert why_no_wgmma("i8", 64, 48, 16) is not None      # k32 per instruction
    assert why_no_wgmma("i8", 128, 48, 64) is None


@pytest.mark.cxx
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("name", sorted(GEMMS))
def test_int8_gemms_with_k_major_operands_run_on_wgmma_s8(name, case):
    kernel, plan, source = specialized(name, case)
    shapes = CASES[case][0]
    assert plan.style == "warp_specialized"
    (mma,) = [s for _, s in plan.steps() if s.task.startswith("mma")]
    assert SM90.unit(mma.unit).kind == "mma"
    assert "ptc::wgmma_tile8<" in source and "Mma16832S8" not in source
    inputs = make_inputs(name, shapes)
    want = truth(name, inputs)
    if case == "edge":
        np.testing.assert_array_equal(run_kernel(kernel, inputs, shapes=shapes)["C"], want)
    run = emulated(source, SM90)
    for config in ORDERS:
        np.testing.assert_array_equal(run(kernel, inputs, shapes, **config)["C"], want,
                                      err_msg=str(config))


def test_b_stored_k_by_n_keeps_mma_sync_and_explain_says_why():
    from ptc.driver import schedule
    from ptc.explain import explain

    shapes = dict(M=1024, N=1024, K=1024)
    kernel = typed(IGEMM, shapes)
    (graph,) = build_graphs(kernel)
    graph = propagate(graph, dict(BM=128, BN=128, BK=64))
    with pytest.raises(Unfit, match=r"mma_acc: 8-bit wgmma reads only K-major operands, and "
                                    r"load_B \(B\) has k along its rows: store B as \[N, K\]"):
        construct(graph, SM90, Choice("warp_specialized", 2, 2))
    result = schedule(kernel, "sm90", shapes=shapes, tiles=dict(BM=128, BN=128, BK=64))
    assert result.best.plan.style != "warp_specialized"
    texts = [r.text for r in explain(result).why]
    assert any("warp-specialized is not possible: mma_acc: 8-bit wgmma reads only K-major"
               in t for t in texts), texts
    assert any("(mma.sync m16n8k32 .s8)" in t for t in texts), texts


RS_I8 = KERNELS["igemm_nt"].replace("acc += load(A[i, k]) @ load(B[j, k]).T",
                                    "acc += ((load(A[i, k]) >> 1) as i8) @ load(B[j, k]).T")


@lru_cache(maxsize=None)
def specialized_rs(case: str):
    """The i8 GEMM whose A is computed in registers (halved by a shift), warp-specialized."""
    shapes, tiles, consumers = CASES[case]
    kernel = typed(RS_I8, shapes)
    (graph,) = build_graphs(kernel)
    graph = propagate(graph, tiles)
    plan = construct(graph, SM90, Choice("warp_specialized", 2, consumers))
    return kernel, plan, render_kernel(kernel, plan, graph, SM90)


def rs_truth(inputs: dict) -> np.ndarray:
    return truth("igemm_nt", dict(inputs, A=(inputs["A"] >> 1).astype(np.int8)))


@pytest.mark.cxx
@pytest.mark.parametrize("case", sorted(CASES))
def test_an_i8_a_computed_in_registers_runs_on_wgmma_rs(case):
    """RS wgmma with 8-bit A: the halved A tile stays in registers, packed four bytes a
    register (mma.sync m16n8k32's A per warp), and wgmma reads it from there; the emulator
    reads each byte where the PTX ISA's m64nNk32 A fragment puts it."""
    kernel, plan, source = specialized_rs(case)
    shapes = CASES[case][0]
    assert plan.style == "warp_specialized"
    assert "ptc::RegOperand<" in source and "ptc::pack_bytes<" in source
    inputs = make_inputs("igemm_nt", shapes)
    want = rs_truth(inputs)
    run = emulated(source, SM90)
    for config in ORDERS:
        np.testing.assert_array_equal(run(kernel, inputs, shapes, **config)["C"], want,
                                      err_msg=str(config))


# (a slip in where an 8-bit A fragment's bytes go, the same with a slip): each gives wrong
# numbers, so the test above holds the packing and the emulator's reading to the PTX ISA
RS_SLIPS = [
    ("wgmma.cuh", "v |= static_cast<uint32_t>(byte_bits(bytes[4 * w + j])) << (8 * j);",
     "v |= static_cast<uint32_t>(byte_bits(bytes[4 * w + j])) << (8 * (3 - j));"),
    ("ptc_emulate_sm90.h", "reg = half + 2 * (k / 16);", "reg = 2 * half + k / 16;"),
    ("ptc_emulate_sm90.h", "const int lane = 4 * g + (k % 16) / 4, reg",
     "const int lane = 4 * g + (k % 8) / 2, reg"),
]


@pytest.mark.cxx
@pytest.mark.parametrize("header, good, bad", RS_SLIPS, ids=["byte-order", "register", "lane"])
def test_a_slip_in_the_8bit_a_fragment_gives_wrong_numbers(header, good, bad):
    from ptc.render.emulate import EmulationError

    kernel, _, source = specialized_rs("even")
    shapes = CASES["even"][0]
    inputs = make_inputs("igemm_nt", shapes)
    want = rs_truth(inputs)
    folder = HEADERS / "emulate" if header.startswith("ptc_emulate") else HEADERS
    text = (folder / header).read_text()
    assert good in text, f"{header} no longer holds {good!r}"
    run = emulated(source, SM90, ((header, text.replace(good, bad)),))
    try:
        got = run(kernel, inputs, shapes)["C"]
    except EmulationError:
        return
    assert (got != want).mean() > 0.25, bad


# (a slip in wgmma.cuh's 8-bit path, the same with a slip): each must give wrong numbers
SLIPS = [
    # the k-step as for 16-bit elements: 16 bytes instead of 32
    ("b.desc(0, ks * 32),", "b.desc(0, ks * 16),"),
    # elements counted as 2 bytes in the tile's offsets
    ("col = (MN_MAJOR ? mn : k) * ELEM;", "col = (MN_MAJOR ? mn : k) * 2;"),
    # the 8-row stride (SBO) of a K-major tile doubled
    ("MN_MAJOR && SPAN == 16 ? PANEL_BYTES : 8 * SPAN;",
     "MN_MAJOR && SPAN == 16 ? PANEL_BYTES : 16 * SPAN;"),
    # the descriptor's swizzle mode not the tile's (128-byte for every span)
    ("constexpr uint64_t TYPE = SPAN == 128 ? 1 : SPAN == 64 ? 2 : SPAN == 32 ? 3 : 0;",
     "constexpr uint64_t TYPE = SPAN == 16 ? 0 : 1;"),
]


@pytest.mark.cxx
@pytest.mark.parametrize("good, bad", SLIPS, ids=["k-step", "elem-bytes", "sbo", "swizzle"])
def test_a_slip_in_the_8bit_descriptors_gives_wrong_numbers_or_an_error(good, bad):
    from ptc.render.emulate import EmulationError

    kernel, _, source = specialized("igemm_nt", "even")
    shapes = CASES["even"][0]
    inputs = make_inputs("igemm_nt", shapes)
    want = truth("igemm_nt", inputs)
    text = (HEADERS / "wgmma.cuh").read_text()
    assert good in text, f"wgmma.cuh no longer holds {good!r}"
    run = emulated(source, SM90, (("wgmma.cuh", text.replace(good, bad)),))
    try:
        got = run(kernel, inputs, shapes)["C"]
    except EmulationError:
        return
    assert (got != want).mean() > 0.25, bad


DESCRIPTOR_PROGRAM = r"""
using ptc::emu::decode_desc;
using ptc::emu::operand_address;
static unsigned swz(unsigned a, int b) { return a ^ ((a >> 3) & (((1u << b) - 1) << 4)); }
static int failures = 0;
static void expect(const char* what, int mn, int k, unsigned long long got,
                   unsigned long long want) {
  if (got != want && failures++ < 8) printf("FAIL %s (%d, %d): %llx, not %llx\n", what, mn, k, got, want);
}
// a CuTe layout ((8, m), (T, 2)) : ((s0, s1), (1, T)) in bytes, T = 16 one-byte elements:
// the PTX ISA's K-major canonical layouts (9.7.15.5.1.2.1.3) for 8-bit types
static unsigned canonical(int mn, int k, unsigned s0, unsigned s1, unsigned k1) {
  const int c0 = mn % 8, c1 = mn / 8, t0 = k % 16, t1 = k / 16;
  return c0 * s0 + c1 * s1 + t0 * 1 + t1 * k1;
}
// each swizzle span, the PTX ISA's K-major layout read through the emulator's decoding of
// the descriptor SmemOperand<false, SPAN, PANEL, 1> builds for a tile TMA wrote: rows of
// SPAN bytes, 8-row groups SBO = 8 SPAN apart, the next 16 k 16 bytes on (swizzled) or a
// panel on (no swizzle: LBO)
template <int SPAN>
static void k_major(const char* what, unsigned base) {
  constexpr int PANEL = 64 * SPAN;        // 64 rows
  const ptc::SmemOperand<false, SPAN, PANEL, 1> op{base, 0};
  const int b = SPAN == 128 ? 3 : SPAN == 64 ? 2 : SPAN == 32 ? 1 : 0;
  for (int ks = 0; ks < 128; ks += 32) {
    const uint64_t d = op.desc(0, ks);
    for (int mn = 0; mn < 64; ++mn)
      for (int k = 0; k < 32; ++k) {
        const int col = ks + k;           // TMA put byte col of row mn here
        const unsigned tma = swz(base + (col / SPAN) * PANEL + mn * SPAN + col % SPAN, b);
        expect(what, mn, col, operand_address(decode_desc(d), mn, k, false, 1), tma);
        const unsigned start = static_cast<unsigned>(d & 0x3fff) << 4;
        const unsigned exact = SPAN == 16 ? canonical(mn, k, 16, 8 * 16, PANEL)
                                          : canonical(mn, k, SPAN, 8 * SPAN, 16);
        expect(what, mn, col, operand_address(decode_desc(d), mn, k, false, 1),
               swz(start + exact, b));
      }
  }
  printf("%s %llx\n", what, (unsigned long long)op.desc(0, 0));
}
int main() {
  k_major<128>("128B", 0x400);
  k_major<64>("64B", 0x400);
  k_major<32>("32B", 0x400);
  k_major<16>("none", 0x400);
  return failures != 0;
}
"""


def descriptor_program(tmp_path: Path, emulator: str | None = None):
    """Builds and runs DESCRIPTOR_PROGRAM (with `emulator` as ptc_emulate.cc, the emulator's
    definitions)."""
    import shutil
    import subprocess

    from ptc import targets
    from ptc.render.emulate import backend_of

    first = []
    if emulator is not None:
        own = tmp_path / "emulate"
        shutil.copytree(targets.backend("cuda").emulate_headers, own)
        (own / "ptc_emulate.cc").write_text(emulator)
        first = [f"-I{own}"]
    src = tmp_path / "desc8.cpp"
    src.write_text(backend_of("cuda").runtime + '#include "wgmma.cuh"\n' + DESCRIPTOR_PROGRAM)
    exe = tmp_path / "desc8"
    subprocess.run(["g++", "-std=c++20", "-DPTC_EMULATE", *first,
                    *(f"-I{d}" for d in backend_of("cuda").include_dirs()), "-w", str(src),
                    "-o", str(exe)], check=True)
    return subprocess.run([str(exe)], capture_output=True, text=True)


@pytest.mark.cxx
def test_the_emulator_reads_8bit_k_major_operands_where_the_ptx_isa_puts_them(tmp_path):
    """SmemOperand's 8-bit descriptors, decoded by the emulator, address every byte of
    every k-step where TMA wrote it and where the PTX ISA's canonical K-major layout (T = 16
    elements of 8 bits) puts it; the descriptors are the f16 ones in bytes (docs/sm90.md:
    SBO 8 rows of the span, LBO unused when swizzled, a panel without a swizzle)."""
    run = descriptor_program(tmp_path)
    assert run.returncode == 0, run.stdout[-3000:]
    descs = dict(line.rsplit(" ", 1) for line in run.stdout.splitlines())
    assert descs == {"128B": "4000004000010040", "64B": "8000002000010040",
                     "32B": "c000001000010040", "none": "800400040"}


@pytest.mark.cxx
def test_an_emulator_that_reads_a_byte_from_the_wrong_place_fails(tmp_path):
    """The emulator is the truth the kernels are held to: with each row's bytes read in
    swapped pairs (or the 16-byte chunks of k without their step) it fails the check above."""
    text = (HEADERS / "emulate" / "ptc_emulate.cc").read_text()
    for good, bad in [("(k % T) * esize +", "((k % T) ^ 1) * esize +"),
                      ("(k / T) * (d.swizzle ? 16 : d.lbo)", "(k / T) * (d.swizzle ? 32 : d.lbo)")]:
        assert good in text
        run = descriptor_program(tmp_path / bad[:6].replace(" ", "_").replace("(", "p"),
                                 text.replace(good, bad))
        assert run.returncode != 0 and "FAIL" in run.stdout, bad


# ---- FP8: m64nNk32 .f32.{e4m3,e5m2}.{e4m3,e5m2} -------------------------------------------------
FP8_CASES = [("f8e4m3", "f8e4m3", "even"), ("f8e4m3", "f8e5m2", "edge"),
             ("f8e5m2", "f8e4m3", "even-2consumers"), ("f8e5m2", "f8e5m2", "edge")]


@lru_cache(maxsize=None)
def specialized_fp8(a: str, b: str, case: str):
    from test_fp8_mma import SCALED

    shapes, tiles, consumers = CASES[case]
    kernel = typed(SCALED.format(a=a, b=b), shapes)
    (graph,) = build_graphs(kernel)
    graph = propagate(graph, tiles)
    plan = construct(graph, SM90, Choice("warp_specialized", 2, consumers))
    return kernel, plan, render_kernel(kernel, plan, graph, SM90)


@pytest.mark.cxx
@pytest.mark.parametrize("a, b, case", FP8_CASES, ids=["-".join(c) for c in FP8_CASES])
def test_fp8_gemms_with_k_major_operands_run_on_wgmma(a, b, case):
    """Per-tensor-scaled FP8 GEMMs (test_fp8_mma.SCALED, B [N, K]) on wgmma, each format
    pair; the truth is test_fp8_mma's float64 formula within its f32-summation bound."""
    from test_fp8_mma import close
    from test_fp8_mma import formula as fp8_formula
    from test_fp8_mma import inputs_for as fp8_inputs

    kernel, plan, source = specialized_fp8(a, b, case)
    shapes = CASES[case][0]
    assert plan.style == "warp_specialized"
    (mma,) = [s for _, s in plan.steps() if s.task.startswith("mma")]
    assert SM90.unit(mma.unit).kind == "mma"
    kind = f"{a[2:].upper()}_{b[2:].upper()}"
    assert f"ptc::Wgmma8Kind::{kind}>" in source
    inputs = fp8_inputs("scaled", a, b, shapes)
    want = fp8_formula("scaled", inputs)
    run = emulated(source, SM90)
    for config in ORDERS:
        close(run(kernel, inputs, shapes, **config)["C"], want, inputs)


def test_fp8_b_stored_k_by_n_is_refused_for_wgmma_with_the_reason():
    from test_fp8_mma import GEMM

    kernel = typed(GEMM.format(a="f8e4m3", b="f8e4m3"), dict(M=1024, N=1024, K=1024))
    (graph,) = build_graphs(kernel)
    graph = propagate(graph, dict(BM=128, BN=128, BK=64))
    with pytest.raises(Unfit, match=r"8-bit wgmma reads only K-major operands, and load_B"):
        construct(graph, SM90, Choice("warp_specialized", 2, 2))


@pytest.mark.nvcc
def test_the_fp8_gemm_builds_with_qgmma_in_the_main_loop_and_no_spills(tmp_path):
    from test_fp8_mma import SCALED

    from ptc.runtime import prepare
    from ptc.runtime.mainloop import mainloop_reports
    from ptc.runtime.symbols import kernel_name

    build = importlib.import_module("ptc.runtime.build")
    path = tmp_path / "scaled.pt"
    path.write_text(SCALED.format(a="f8e4m3", b="f8e5m2"))
    prepared = prepare(path, "sm90", shapes={"M": 4096, "N": 4096, "K": 4096})
    assert [p.style for p in prepared.plans] == ["warp_specialized"]
    folder = tmp_path / "build"
    build.write_build_dir(folder, kernel_source=prepared.source, signature=prepared.signature,
                          arch=prepared.device.arch, target="sm90",
                          plan_json=prepared.plan_json)
    result = build.build(folder, prepared.device.arch, report_only=True)
    assert result.ptxas.spills == 0, result.ptxas.text
    assert "C751" not in result.ptxas.text, result.ptxas.text
    (loop,) = [r for r in mainloop_reports(build.sass(folder))
               if kernel_name(r.kernel).endswith("<true>")]
    mnemonics = dict(loop.mnemonics)
    qgmma = [op for op in mnemonics if op.startswith("QGMMA.64x")]
    assert qgmma and all(op.endswith(".F32.E4M3.E5M2") for op in qgmma), mnemonics
    assert loop.mma_flops == sum(mnemonics[op] * 2 * 64 * int(op.split("x")[1]) * 32 // 4
                                 for op in qgmma)


@pytest.mark.nvcc
def test_the_wgmma_s8_gemm_builds_with_igmma_in_the_main_loop_and_no_spills(tmp_path):
    from ptc.runtime import prepare
    from ptc.runtime.mainloop import mainloop_reports
    from ptc.runtime.symbols import kernel_name

    build = importlib.import_module("ptc.runtime.build")
    path = tmp_path / "igemm_nt.pt"
    path.write_text(KERNELS["igemm_nt"])
    shapes = {"M": 4096, "N": 4096, "K": 4096}
    prepared = prepare(path, "sm90", shapes=shapes)
    assert [p.style for p in prepared.plans] == ["warp_specialized"]
    folder = tmp_path / "build"
    build.write_build_dir(folder, kernel_source=prepared.source, signature=prepared.signature,
                          arch=prepared.device.arch, target="sm90",
                          plan_json=prepared.plan_json)
    result = build.build(folder, prepared.device.arch, report_only=True)
    assert result.ptxas.spills == 0, result.ptxas.text
    assert "C751" not in result.ptxas.text, result.ptxas.text     # no serialized wgmma
    sass = build.sass(folder)
    (loop,) = [r for r in mainloop_reports(sass) if kernel_name(r.kernel).endswith("<true>")]
    mnemonics = dict(loop.mnemonics)
    igmma = {op: n for op, n in mnemonics.items() if op.startswith("IGMMA.64x")}
    assert igmma and all(op.endswith(".S8.S8") for op in igmma), mnemonics
    assert not any(op.startswith(("IMMA", "HMMA", "HGMMA")) for op in mnemonics), mnemonics
