"""Coverage of the lowering's decision space, by construction (issue 20; docs/testing.md).

ptc.coverage.universe enumerates every instruction form each target can produce (wgmma
widths and operand layouts, ldmatrix, mma.sync and MFMA atoms with swapped operands, TMA
boxes, stmatrix, copy and store widths, lane exchanges, conversions, plan structures) from
the device descriptions, ptc.lower.atoms and the renderers' capabilities, with the
combinations the lowering never produces and why (UNREACHABLE). ptc.coverage.forms_of reads
the forms a lowered kernel uses off its IR. The catalogue (ptc.coverage.cases) holds small
kernels x tiles x plan choices x shapes; each is emulated against the interpreter, and
every reachable form must be exercised by a case that matches it.

The tests without the cxx mark lower the catalogue only (no compiler): every case lowers,
every reachable form comes out of one, every form read off the IR is in the universe and
none it calls unreachable. The cxx ones build and run it, one target per test.
"""
from __future__ import annotations

import hashlib
import json
import re
from functools import lru_cache

import pytest
from click.testing import CliRunner

from ptc.cli import cli
from ptc.coverage import forms_of, universe
from ptc.coverage.cases import (CATALOGUE, ROOT, case, coverage, lowered, lowered_result,
                                run_catalogue, uncovered, MS3)
from ptc.coverage.forms import form
from ptc.coverage.universe import UNREACHABLE
from ptc.devices import get_device
from ptc import targets
from ptc.runtime.object_cache import tool_identity
from ptc.stage_cache import STAGES

CUDA_TEMPLATES = targets.backend("cuda").templates

TARGETS = ("sm80", "sm90", "gfx90a", "gfx942")


@lru_cache(maxsize=None)
def lowered_results() -> tuple:
    return tuple(lowered_result(c) for c in CATALOGUE)


def describe(rows) -> str:
    return "\n".join(f"  {r.form.target} {r.form.describe()}"
                     + (f" (exercised only by failing {', '.join(c.name for c in r.failed)})"
                        if r.failed else "") for r in rows)


def test_the_case_names_are_unique_and_every_target_has_cases():
    names = [c.name for c in CATALOGUE]
    assert len(names) == len(set(names))
    assert {c.target for c in CATALOGUE} == set(TARGETS)


def test_every_case_lowers_and_every_reachable_form_comes_out_of_one():
    results = lowered_results()
    problems = [f"{r.case.name}: {r.problem}" for r in results if r.problem]
    assert not problems, "\n".join(problems)
    gaps = uncovered(coverage(results, TARGETS))
    assert not gaps, "reachable forms no case of the catalogue produces:\n" + describe(gaps)


def test_every_form_read_off_the_ir_is_a_reachable_form_of_the_universe():
    tables = {t: universe(get_device(t)) for t in TARGETS}
    strays = []
    for r in lowered_results():
        for f in r.forms(False):
            if f not in tables[f.target]:
                strays.append(f"{r.case.name}: {f.describe()} is not in {f.target}'s universe")
            elif tables[f.target][f] is not None:
                strays.append(f"{r.case.name}: {f.describe()} is called unreachable: "
                              f"{tables[f.target][f]}")
    assert not strays, "\n".join(strays)


def test_every_unreachable_rule_names_forms_of_the_universe():
    forms = [f for t in TARGETS for f in universe(get_device(t))]
    dead = [f"{r.instruction} {r.where}" for r in UNREACHABLE
            if not any(r.matches(f) for f in forms)]
    assert not dead, dead


def test_every_wgmma_width_builds_with_the_lowerings_register_estimate():
    """wgmma N = 224..256 (CUTLASS's 128 x 256 tiles: two consumers of 64 x 256) are
    reachable: the lowering's register estimate, the only one (the plan construction's
    counted the accumulator's zeros and its store beside it and refused them), takes
    them for one consumer warpgroup of 64 rows and two of 128 (each 64 x N)."""
    from ptc.driver import check_file, lowered_plan
    from ptc.lower import ir
    from ptc.sched.construct import Choice, construct
    from ptc.stask import build_graph, propagate

    sm90 = get_device("sm90")
    table = universe(sm90)
    kernel = next(k for k in check_file(ROOT / "tests/sm90/gemm_operands.pt", {}).kernels
                  if k.name == "gemm_nt")
    for n in range(200, 257, 8):
        assert table[form("sm90", "wgmma", n=n, a="shared", dtype="f16")] is None, n
        for bm, consumers in ((64, 1), (128, 2)):
            graph = propagate(build_graph(kernel, kernel.body[0]), dict(BM=bm, BN=n, BK=32))
            plan = construct(graph, sm90, Choice("warp_specialized", 2, consumers))
            low, _ = lowered_plan(plan, graph, sm90)
            widths = {op.n for op in ir.walk(low.body) if isinstance(op, ir.Wgmma)}
            assert widths == {n}, (n, bm, widths)


def test_the_cuda_renderer_has_a_wgmma_wrapper_for_every_reachable_width():
    """wgmma_instructions.cuh (tools/gen_wgmma.py) spells an instruction per N; the lowering
    issues every N the universe calls reachable (it had 8 of them: issue 20)."""
    text = (CUDA_TEMPLATES / "wgmma_instructions.cuh").read_text()
    wrapped = {int(n) for n in re.findall(r"struct Wgmma<(\d+)>", text)}
    widths = {f.args["n"] for f, why in universe(get_device("sm90")).items()
              if f.instruction == "wgmma" and why is None}
    assert widths and widths <= wrapped, sorted(widths - wrapped)
    # the 8-bit ones: Wgmma8<N>::ss_s8 (issue 21, part 3c)
    for a, form in (("shared", "ss"), ("registers", "rs")):
        s8 = {int(n) for n in re.findall(rf"void wgmma8_{form}_s8_n(\d+)\(", text)}
        fp8 = {int(n) for n in re.findall(rf"void wgmma8_{form}_e5m2_e4m3_n(\d+)\(", text)}
        for dtype, wrapped8 in (("i8", s8), ("f8e5m2", fp8)):
            widths8 = {f.args["n"] for f, why in universe(get_device("sm90")).items()
                       if f.instruction == "wgmma" and f.args["dtype"] == dtype
                       and f.args["a"] == a and why is None}
            assert widths8 and widths8 <= wrapped8, (a, dtype, sorted(widths8 - wrapped8))


def test_forms_of_takes_the_variant_a_launch_at_the_dims_runs():
    """Vector copies where the alignment checks hold, the element-wise copy elsewhere,
    both without dims."""
    c = case("gemm", "samples/gemm.pt", "gemm", "sm80", "BM=64 BN=64 BK=32", MS3,
             "M=128 N=128 K=64")
    built = lowered(c)
    (low,) = built.lows
    vector = form("sm80", "cp.async", bytes=16)
    elementwise = form("sm80", "copy.elementwise", layout="row-major")
    aligned = forms_of(low, built.device, dict(M=128, N=128, K=64))
    ragged = forms_of(low, built.device, dict(M=70, N=72, K=33))
    assert vector in aligned and elementwise not in aligned
    assert elementwise in ragged and vector not in ragged
    assert {vector, elementwise} <= forms_of(low, built.device)


def test_a_form_takes_exactly_the_parameters_of_its_family():
    assert form("sm90", "wgmma", n=8, a="shared", dtype="f16").describe() == \
        "wgmma n=8 a=shared dtype=f16"
    with pytest.raises(ValueError, match="takes n, a, dtype"):
        form("sm90", "wgmma", n=8)


# ---- the command ------------------------------------------------------------------------
def test_ptc_coverage_lower_only_prints_the_table_as_json():
    result = CliRunner().invoke(cli, ["coverage", "--lower-only", "--json", "-t", "sm80"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["lower_only"] is True
    summary = data["targets"]["sm80"]
    assert summary["reachable"] == summary["covered"] > 0 and summary["unreachable"] > 0
    forms = {(f["instruction"], tuple(sorted(f["params"].items()))): f for f in data["forms"]}
    ldmatrix = forms[("ldmatrix", (("count", 2), ("tile", "rows"), ("trans", False)))]
    assert ldmatrix["status"] == "lowered" and ldmatrix["cases"]
    assert all(c["target"] == "sm80" for c in data["cases"])


def test_ptc_coverage_names_a_form_no_case_covers_and_exits_1(monkeypatch):
    import ptc.coverage.cases as cases

    monkeypatch.setattr(cases, "CATALOGUE",
                        tuple(c for c in CATALOGUE if c.target == "sm80"
                              and not c.name.startswith("atomics.")))
    result = CliRunner().invoke(cli, ["coverage", "--lower-only", "-t", "sm80", "--missing"])
    assert result.exit_code == 1
    assert "atomic_add dtype=i32" in result.stdout
    assert "covered by no case that lowers" in result.stderr


def test_ptc_coverage_refuses_a_target_without_a_renderer():
    result = CliRunner().invoke(cli, ["coverage", "-t", "h100"])
    assert result.exit_code == 2
    assert "not a target with a renderer" in result.output


# ---- the emulated catalogue ---------------------------------------------------------------
@pytest.mark.cxx
@pytest.mark.parametrize("target", TARGETS)
def test_every_reachable_form_is_covered_by_a_case_that_matches_the_interpreter(target):
    results = run_catalogue([c for c in CATALOGUE if c.target == target])
    failed = [f"{r.case.name} ({r.case.describe()}): {r.problem or ''}"
              + "; ".join(f"at {dict(run.dims)}: {run.problem} {dict(run.errors)}"
                          for run in r.runs if not run.passed)
              for r in results if not r.passed]
    gaps = uncovered(coverage(results, [target]))
    assert not gaps, (f"reachable forms of {target} no passing case covers:\n{describe(gaps)}"
                      + ("\nfailing cases:\n" + "\n".join(failed) if failed else ""))
    assert not failed, "\n".join(failed)


@pytest.mark.nvcc
def test_nvcc_builds_a_wgmma_of_every_reachable_width(tmp_path):
    """Every N the universe calls reachable, A from shared memory and from registers, f16
    and bf16, through wgmma.cuh's wgmma_tile, and the i8 and FP8 ones (A from shared
    memory and from registers) through wgmma_tile8: ptxas
    takes them for sm_90a (issue 20: N = 24 stopped at a static_assert)."""
    import subprocess

    from ptc.device_headers import SHARED
    from ptc.targets.cuda.toolchain import find_nvcc

    widths = sorted({f.args["n"] for f, why in universe(get_device("sm90")).items()
                     if f.instruction == "wgmma" and why is None})
    widths8 = sorted({f.args["n"] for f, why in universe(get_device("sm90")).items()
                      if f.instruction == "wgmma" and f.args["dtype"] == "i8" and why is None})
    widths_fp8 = sorted({f.args["n"] for f, why in universe(get_device("sm90")).items()
                         if f.instruction == "wgmma" and f.args["dtype"] == "f8e4m3"
                         and why is None})
    source = tmp_path / "widths.cu"
    source.write_text("\n".join(
        ['#include "wgmma.cuh"',
         "template <int N, bool BF16>",
         "__global__ void widths(float* out, unsigned base) {",
         "  float acc[N / 2] = {};",
         "  uint32_t regs[4] = {1u, 2u, 3u, 4u};",
         "  const ptc::SmemOperand<false, 64, 4096> a{base, 0}, b{base + 8192u, 0};",
         "  ptc::wgmma_tile<N, 1, 2, BF16, 0, 0>(acc, a, b, false);",
         "  ptc::wgmma_tile<N, 1, 1, BF16, 0, 1>(acc, ptc::RegOperand<1>{regs}, b, true);",
         "  ptc::wgmma_wait<0>();",
         "  for (int i = 0; i < N / 2; ++i) out[i] = acc[i];",
         "}"]
        + [f"template __global__ void widths<{n}, {bf16}>(float*, unsigned);"
           for n in widths for bf16 in ("false", "true")]
        + ["template <int N>",
           "__global__ void widths8(int* out, unsigned base) {",
           "  int acc[N / 2] = {};",
           "  const ptc::SmemOperand<false, 64, 4096, 1> a{base, 0}, b{base + 8192u, 0};",
           "  uint32_t regs[8] = {1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u};",
           "  ptc::wgmma_tile8<N, 1, 2, ptc::Wgmma8Kind::S8>(acc, a, b, false);",
           "  ptc::wgmma_tile8<N, 1, 2, ptc::Wgmma8Kind::S8>(acc, ptc::RegOperand<2>{regs}, b, "
           "true);",
           "  ptc::wgmma_wait<0>();",
           "  for (int i = 0; i < N / 2; ++i) out[i] = acc[i];",
           "}"]
        + [f"template __global__ void widths8<{n}>(int*, unsigned);" for n in widths8]
        + ["template <int N>",
           "__global__ void widths_fp8(float* out, unsigned base) {",
           "  float acc[N / 2] = {};",
           "  const ptc::SmemOperand<false, 64, 4096, 1> a{base, 0}, b{base + 8192u, 0};",
           "  uint32_t regs[8] = {1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u};",
           "  ptc::wgmma_tile8<N, 1, 2, ptc::Wgmma8Kind::E4M3_E5M2>(acc, a, b, false);",
           "  ptc::wgmma_tile8<N, 1, 2, ptc::Wgmma8Kind::E5M2_E4M3>(acc, "
           "ptc::RegOperand<2>{regs}, b, true);",
           "  ptc::wgmma_wait<0>();",
           "  for (int i = 0; i < N / 2; ++i) out[i] = acc[i];",
           "}"]
        + [f"template __global__ void widths_fp8<{n}>(float*, unsigned);"
           for n in widths_fp8]) + "\n")
    # one compile: ptxas takes the cubin, and -keep leaves the PTX it was made from; kept
    # in the stage cache under the compiler, the source and the headers (a warm suite
    # compiles it no more than the samples' kernels)
    flags = ["-std=c++17", "-gencode", "arch=compute_90a,code=sm_90a", "-cubin"]
    key = hashlib.sha256()
    tool_identity(key, find_nvcc())
    key.update("\0".join(flags + [source.read_text()]).encode())
    for folder in (CUDA_TEMPLATES, SHARED):
        for header in sorted(h for h in folder.rglob("*") if h.suffix in (".h", ".cuh")):
            key.update(f"{header.relative_to(folder)}".encode() + b"\0" + header.read_bytes())

    def compiled() -> str:
        keep = tmp_path / "keep"
        keep.mkdir()
        done = subprocess.run([find_nvcc(), *flags, "-I", str(CUDA_TEMPLATES), "-I", str(SHARED),
                               "-keep", "-keep-dir", str(keep), str(source),
                               "-o", str(tmp_path / "widths.cubin")],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]
        (ptx,) = keep.glob("*.ptx")
        return ptx.read_text()

    ptx = STAGES.get_or_compute("test-ptx", key.hexdigest(), compiled)
    issued = set(map(int, re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16", ptx)))
    assert issued == set(widths)
    issued8 = set(map(int, re.findall(
        r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k32\.s32\.s8", ptx)))
    assert widths8 and issued8 == set(widths8)
    issued_fp8 = set(map(int, re.findall(
        r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k32\.f32\.e4m3\.e5m2", ptx)))
    assert widths_fp8 and issued_fp8 == set(widths_fp8)
    # A from registers: a brace list of four registers after the accumulators'
    rs8 = set(map(int, re.findall(r"m64n(\d+)k32\.s32\.s8\.s8\s+\{[^}]*\},\s*\{%r", ptx)))
    rs_fp8 = set(map(int, re.findall(r"m64n(\d+)k32\.f32\.e5m2\.e4m3\s+\{[^}]*\},\s*\{%r",
                                     ptx)))
    assert rs8 == set(widths8) and rs_fp8 == set(widths_fp8)


# ---- what the coverage found: each fix, undone, fails its case ------------------------------
def emulated_errors(name: str, edit=lambda source: source, header_overrides=None) -> dict:
    """The errors against the interpreter of catalogue case `name` at its first shape, its
    source passed through `edit` and built with `header_overrides`."""
    from ptc.coverage.cases import inputs_of, rel_error
    from ptc.interp import run_kernel
    from ptc.render.emulate import build_emulated

    c = next(c for c in CATALOGUE if c.name == name)
    built = lowered(c)
    source = edit(built.source)
    assert source != built.source or header_overrides
    dims = dict(c.shapes[0])
    inputs = inputs_of(c, built.kernel, dims)
    got = build_emulated(source, backend=built.device, header_overrides=header_overrides)(
        built.kernel, inputs, dims)
    want = run_kernel(built.kernel, inputs, shapes=dims, tiles=dict(c.tiles))
    return {n: rel_error(got[n], w) for n, w in want.items()}


@pytest.mark.cxx
def test_a_copy_whose_threads_step_half_a_swizzle_period_is_caught():
    """cp.async of 4 bytes by 4 warps into 64-byte swizzled rows: each thread's chunks are
    8 rows apart, half the 16 rows over which the XOR pattern repeats. TileCopy took 8 rows
    for the period at any row length and wrote A's tile into the wrong chunks."""
    header = (CUDA_TEMPLATES / "global_to_shared.cuh").read_text()
    fixed = "(RSTEP % SWIZZLE_ROWS == 0 || ITERS == 1 || !SWIZZLE)"
    assert fixed in header
    old = "(RSTEP % 8 == 0 || ITERS == 1 || !SWIZZLE)"
    errors = emulated_errors("odd_strides.sm80.ms2", header_overrides={
        "global_to_shared.cuh": header.replace(fixed, old)})
    assert not errors["C1"] < 0.1 and errors["C2"] < 1e-5, errors


@pytest.mark.cxx
def test_an_i32_sum_stored_through_f32_is_caught():
    """Sums of i32 values past 2^24 lose their low bits through f32, as the store did."""
    def through_f32(source: str) -> str:
        return re.sub(r"atomicAdd\((g \+ \([^)]*\)), (t_SI\[r\])\);",
                      r"atomicAdd(\1, ptc::from_f32<int>(ptc::f32(\2)));", source)
    errors = emulated_errors("atomics.sm80.seq8", through_f32)
    assert errors["SI"] > 0 and errors["S"] < 1e-5, errors


@pytest.mark.hip
@pytest.mark.parametrize("target", ("gfx90a", "gfx942"))
def test_the_hip_compiler_builds_16_bit_atomic_adds(target, tmp_path):
    """atomic_add into f16 and bf16 outputs: HIP's atomicAdd takes 32-bit values, and the
    renderer's call had no overload for ptc::f16 / ptc::bf16 (neither clang nor the
    emulator built it); ptc_types.h adds them by compare-and-swap on the 32-bit word."""
    import os
    import shutil
    import subprocess

    from ptc.render import headers
    from ptc.targets.hip import toolchain as hip

    try:
        compiler = hip.find_compiler(target)
    except Exception as exc:   # noqa: BLE001 -- BuildError: no HIP compiler here
        pytest.skip(str(exc))
    c = next(c for c in CATALOGUE if c.name == f"atomics.{target}.seq8")
    built = lowered(c)
    (tmp_path / "kernel.hip").write_text(built.source)
    for h in headers(built.device):
        shutil.copy(h, tmp_path / h.name)
    cmd = list(hip.hip_commands(target, compiler)["kernel.s"])
    cmd[0] = compiler.path
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, **hip.environment(compiler.flavour)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "atomic_cmpswap" in (tmp_path / "kernel.s").read_text()
