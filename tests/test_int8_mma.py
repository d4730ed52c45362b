"""Issue 21, part 3a: INT8 tensor cores. `acc += a @ b` of i8 tiles into an i32 accumulator
runs on mma.sync m16n8k32 .s8 (sm80, and sm90 until wgmma s8 is issued) and on the i8 MFMAs
(gfx90a: v_mfma_i32_{32x32x8,16x16x16}i8; gfx942: v_mfma_i32_{32x32x16,16x16x32}_i8).

The truth here is a formula written with NumPy's int64 products and sums, wrapped to 32
bits by hand (s32 accumulation without .satfinite wraps modulo 2^32, docs/language.md,
rule 1); the reference interpreter must give exactly it, and so must the kernels rendered
for the four targets, emulated on the CPU in the three thread orders, where each matrix
instruction is computed from its documented fragment layout (ptc_emulate.h,
ptc_emulate_hip.h): a wrong layout in a header or an atom gives wrong numbers.
"""
from __future__ import annotations

import importlib
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from ptc import driver
from ptc.diagnostics import CompileError
from ptc.fuzz.check import TARGETS
from ptc.grammar import parse
from ptc.interp import run_kernel
from ptc.sema import check
from ptc.sema import typed as T

EVEN = {"M": 128, "N": 128, "K": 128}
EDGE = {"M": 72, "N": 40, "K": 96}          # ragged tiles along M and N
ORDERS = [dict(), dict(order="reverse"), dict(order="random", seed=5)]

IGEMM = """
kernel igemm(A: i8[M, K], B: i8[K, N]) -> (C: i32[M, N]) {
  dims M = 512, N = 512, K = 512
  tile BM in [128, 64], BN in [128, 64], BK in [64, 32]
  parallel i: BM of M, j: BN of N {
    acc = zeros(i32[BM, BN])
    for k: BK of K {
      acc += load(A[i, k]) @ load(B[k, j])
    }
    store(C[i, j], acc)
  }
}
"""
# SmoothQuant's W8A8: per-row activation scales, per-column weight scales, f32 out
W8A8 = """
kernel w8a8(A: i8[M, K], B: i8[K, N], sa: f32[M], sb: f32[N]) -> (C: f32[M, N]) {
  dims M = 512, N = 512, K = 512
  tile BM in [128, 64], BN in [128, 64], BK in [64, 32]
  parallel i: BM of M, j: BN of N {
    acc = zeros(i32[BM, BN])
    for k: BK of K {
      acc += load(A[i, k]) @ load(B[k, j])
    }
    store(C[i, j], (acc as f32) * load(sa[i])[:, None] * load(sb[j])[None, :])
  }
}
"""
# weights stored [N, K] (nn.Linear's layout): both operands k-contiguous, both by ldmatrix
IGEMM_NT = """
kernel igemm_nt(A: i8[M, K], B: i8[N, K]) -> (C: i32[M, N]) {
  parallel i: BM of M, j: BN of N {
    acc = zeros(i32[BM, BN])
    for k: BK of K {
      acc += load(A[i, k]) @ load(B[j, k]).T
    }
    store(C[i, j], acc)
  }
}
"""
# the accumulator starts near the ends of the i32 range: the sums wrap
WRAP = """
kernel wrap(A: i8[M, K], B: i8[K, N], C0: i32[M, N]) -> (C: i32[M, N]) {
  parallel i: BM of M, j: BN of N {
    acc = load(C0[i, j])
    for k: BK of K {
      acc += load(A[i, k]) @ load(B[k, j])
    }
    store(C[i, j], acc)
  }
}
"""
KERNELS = {"igemm": IGEMM, "w8a8": W8A8, "igemm_nt": IGEMM_NT, "wrap": WRAP}


# ---- the truth ---------------------------------------------------------------------------------
def wrapped(x: np.ndarray) -> np.ndarray:
    """Integers modulo 2^32 as two's-complement i32 (what s32 accumulation gives)."""
    x = np.asarray(x, dtype=np.int64) % (1 << 32)
    return np.where(x >= 1 << 31, x - (1 << 32), x).astype(np.int32)


def formula(name: str, inputs: dict) -> dict[str, np.ndarray]:
    A = inputs["A"].astype(np.int64)
    B = inputs["B"].astype(np.int64)
    if name == "igemm_nt":
        B = B.T
    product = A @ B                       # exact: |sum| < K * 2^14
    if name == "w8a8":
        # f32 of the exact sum (|sum| < 2^24 here, so exact), then the two f32 products
        acc = product.astype(np.float32)
        scaled = acc * inputs["sa"][:, None] * inputs["sb"][None, :]
        return {"C": scaled.astype(np.float32)}
    if name == "wrap":
        product = product + inputs["C0"].astype(np.int64)
    return {"C": wrapped(product)}


def inputs_for(name: str, shapes: dict, seed: int = 21) -> dict:
    rng = np.random.default_rng(seed)
    M, N, K = shapes["M"], shapes["N"], shapes["K"]
    out = {"A": rng.integers(-128, 128, (M, K)).astype(np.int8),
           "B": rng.integers(-128, 128, (N, K) if name == "igemm_nt" else (K, N)).astype(np.int8)}
    # the extreme sum: C[0, 0] is (-128)(-128) K times
    out["A"][0, :] = -128
    if name == "igemm_nt":
        out["B"][0, :] = -128
    else:
        out["B"][:, 0] = -128
    if name == "w8a8":
        out["sa"] = rng.uniform(1e-3, 1e-2, M).astype(np.float32)
        out["sb"] = rng.uniform(1e-3, 1e-2, N).astype(np.float32)
    if name == "wrap":
        near = rng.choice([2 ** 31 - 1, -2 ** 31, 2 ** 31 - 5000, -2 ** 31 + 5000], (M, N))
        out["C0"] = near.astype(np.int32)
    return out


def typed(text: str, shapes: dict) -> T.TypedKernel:
    return check(parse(text, "k.pt"), shapes).kernels[0]


# ---- the language and the interpreter ----------------------------------------------------------
def test_a_product_of_i8_tiles_is_an_i32_tile():
    kernel = typed(IGEMM, EDGE)
    (loop,) = [s for s in kernel.body[0].body if isinstance(s, T.Loop)]
    (let,) = loop.body
    assert isinstance(let.value, T.MmaAccumulate)
    assert let.value.type.dtype == "i32"
    assert let.value.a.type.dtype == let.value.b.type.dtype == "i8"


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_the_interpreter_computes_the_exact_product_wrapped_to_32_bits(name):
    kernel = typed(KERNELS[name], EDGE)
    inputs = inputs_for(name, EDGE)
    got = run_kernel(kernel, inputs, shapes=EDGE)
    for out, want in formula(name, inputs).items():
        np.testing.assert_array_equal(got[out], want)
    if name == "wrap":      # the sums did leave the i32 range
        exact = inputs["A"].astype(np.int64) @ inputs["B"].astype(np.int64) + inputs["C0"]
        assert (exact > 2 ** 31 - 1).any() and (exact < -2 ** 31).any()


@pytest.mark.parametrize("other, message, fixed", [
    ("f16", "`@` of i8 and f16 tiles: the integer tensor cores multiply i8 by i8",
     "(load(A[i, k]) as f16) @ load(B[k, j])"),
    ("bf16", "`@` of i8 and bf16 tiles", "(load(A[i, k]) as bf16) @ load(B[k, j])"),
    ("u8", "`@` of i8 and u8 tiles", "(load(A[i, k]) as f16) @ (load(B[k, j]) as f16)"),
    ("f8e4m3", "`@` of i8 and f8e4m3 tiles", "(load(A[i, k]) as f16) @ (load(B[k, j]) as f16)"),
])
def test_an_i8_operand_against_another_dtype_is_a_located_error_with_a_hint(other, message,
                                                                              fixed):
    text = IGEMM.replace("B: i8[K, N]", f"B: {other}[K, N]").replace(
        "acc = zeros(i32[BM, BN])", "acc = zeros(f32[BM, BN])").replace(
        "-> (C: i32[M, N])", "-> (C: f32[M, N])")
    with pytest.raises(CompileError) as info:
        typed(text, EDGE)
    (d,) = info.value.diagnostics
    assert message in d.message, d.message
    assert (d.span.line, d.span.col) == (8, 14), d.span     # at the i8 operand
    assert fixed in d.hint, d.hint
    typed(text.replace("load(A[i, k]) @ load(B[k, j])", fixed), EDGE)   # the fix checks


def test_u8_operands_are_refused_with_a_hint():
    text = IGEMM.replace("i8[", "u8[")
    with pytest.raises(CompileError) as info:
        typed(text, EDGE)
    (d,) = info.value.diagnostics
    assert "`@` of u8 tiles is not supported" in d.message
    assert "as f16" in d.hint


def test_the_cost_model_times_i8_products_at_the_devices_i8_rate():
    """The mma step of an i8 GEMM takes its FLOPs over the unit's i8 throughput in the
    device YAML (sm80: 4096 a clock and SM, twice f16's), and the peak is the i8 one."""
    from ptc.devices import get_device
    from ptc.driver import grids
    from ptc.sched.cost import step_cycles
    from ptc.stask import build_graph, propagate

    tiles = {"BM": 64, "BN": 64, "BK": 64}
    cycles = {}
    for dtype, text in (("i8", IGEMM), ("f16", IGEMM.replace("i8[", "f16[").replace(
            "zeros(i32", "zeros(f32").replace("C: i32", "C: f32"))):
        kernel = typed(text, EVEN)
        (part,) = grids(kernel)
        graph = propagate(build_graph(part, part.body[0]), tiles)
        (task,) = [t for t in graph.tasks if t.kind == "mma"]
        assert task.mma_dtype == dtype
        for target in TARGETS:
            device = get_device(target)
            unit = device.units_of("mma")[0]
            cycles[dtype, target] = step_cycles(task, unit, device, 1) - unit.issue_latency_cycles
            assert cycles[dtype, target] == pytest.approx(
                2 * 64 * 64 * 64 / unit.throughput[dtype])
    for target in TARGETS:
        device = get_device(target)
        ratio = device.peak_flops("i8") / device.peak_flops("f16")
        assert cycles["f16", target] / cycles["i8", target] == pytest.approx(ratio)
    assert get_device("sm80").peak_flops("i8") == pytest.approx(624e12, rel=0.01)


# ---- emulated on every target ------------------------------------------------------------------
@lru_cache(maxsize=None)
def rendered(name: str, target: str, shape: str, tiles: tuple = ()):
    shapes = EVEN if shape == "even" else EDGE
    kernel = typed(KERNELS[name], shapes)
    source, plans, _, device, _ = driver.render(kernel, target, shapes=shapes,
                                                tiles=dict(tiles) or None)
    return kernel, source, plans, device


@lru_cache(maxsize=None)
def emulated(source: str, device, overrides: tuple = ()):
    from ptc.render.emulate import build_emulated

    return build_emulated(source, backend=device, header_overrides=dict(overrides) or None)


INSTRUCTIONS = {"sm80": "ptc::Mma16832S8", "sm90": "ptc::Mma16832S8",
                "gfx90a": "ptc::MfmaI8<", "gfx942": "ptc::MfmaI8<"}


def emulated_cases():
    out = [(name, target, shape) for name in ("igemm", "w8a8") for target in TARGETS
           for shape in ("even", "edge")]
    out += [(name, target, "edge") for name in ("igemm_nt", "wrap") for target in TARGETS]
    return out


@pytest.mark.cxx
@pytest.mark.parametrize("name, target, shape", emulated_cases(),
                         ids=[f"{n}-{t}-{s}" for n, t, s in emulated_cases()])
def test_int8_gemms_on_the_tensor_cores_of_every_target(name, target, shape):
    kernel, source, plans, device = rendered(name, target, shape)
    assert INSTRUCTIONS[target] in source
    assert all(device.unit(s.unit).kind == "mma" for p in plans for _, s in p.steps()
               if s.task.startswith("mma"))
    shapes = EVEN if shape == "even" else EDGE
    inputs = inputs_for(name, shapes)
    want = formula(name, inputs)
    run = emulated(source, device)
    for config in ORDERS:
        got = run(kernel, inputs, shapes, **config)
        for out, w in want.items():
            np.testing.assert_array_equal(got[out], w, err_msg=f"{target} {config}")


@pytest.mark.cxx
@pytest.mark.parametrize("target", TARGETS)
def test_two_k_steps_per_tile_and_operands_in_registers(target):
    """BK = 64 (two m16n8k32 steps, and two or more MFMA steps, per tile), and an operand
    quantized in registers (`(x / 2) as i8`, packed four bytes to a register on its way
    to the instruction)."""
    text = IGEMM.replace("acc += load(A[i, k]) @ load(B[k, j])",
                         "acc += ((load(A[i, k]) / 2) as i8) @ load(B[k, j])")
    kernel = typed(text, EDGE)
    source, _, _, device, _ = driver.render(kernel, target, shapes=EDGE,
                                            tiles={"BM": 64, "BN": 64, "BK": 64})
    assert "RegA8<" in source
    inputs = inputs_for("igemm", EDGE)
    halved = np.clip(np.round(inputs["A"].astype(np.float32) / 2), -128, 127)  # ties to even
    want = wrapped(halved.astype(np.int64) @ inputs["B"].astype(np.int64))
    got = emulated(source, device)(kernel, inputs, EDGE)
    np.testing.assert_array_equal(got["C"], want)


# ---- the emulation sees wrong layouts ---------------------------------------------------------
HEADERS = Path(__file__).resolve().parent.parent / "ptc" / "targets"
# (header, a fragment of the i8 path, the same with a slip), per backend
SLIPS = {
    "cuda": [("shared_to_register_ldmatrix.cuh",       # B [k][n] read byte by byte
              "b[nb * 2 + j] = gather_bytes(t, [&](int i) { return k + i; }",
              "b[nb * 2 + j] = gather_bytes(t, [&](int i) { return k + (i ^ 1); }"),
             ("shared_to_register_ldmatrix.cuh",       # A [m][k] by ldmatrix: wrong matrices
              "ldmatrix<4, false>(a, t.at(m0 + (lane & 15), k0 + (lane >> 4) * 8, lane));",
              "ldmatrix<4, false>(a, t.at(m0 + (lane & 7) + (lane >> 4) * 8, "
              "k0 + ((lane >> 3) & 1) * 8, lane));")],
    "hip": [("mfma.h",                                  # a lane's k of A from the wrong block
             "k = k0 + I::KPL * (lane / Lanes<I>::M);",
             "k = k0 + I::KPL * ((lane / Lanes<I>::M) ^ 1);"),
            ("mfma.h",                                  # B's bytes packed in the wrong order
             "static_cast<uint32_t>(ld_shared<uint8_t>(at(r * PER + j)));",
             "static_cast<uint32_t>(ld_shared<uint8_t>(at(r * PER + (j ^ 1))));")],
}


@pytest.mark.cxx
@pytest.mark.parametrize("target", TARGETS)
def test_a_wrong_layout_gives_wrong_numbers(target):
    kernel, source, _, device = rendered("igemm", target, "edge")
    inputs = inputs_for("igemm", EDGE)
    want = formula("igemm", inputs)["C"]
    run = emulated(source, device)
    np.testing.assert_array_equal(run(kernel, inputs, EDGE)["C"], want)
    # the emulated instruction with A's registers (bytes) 1 and 2 swapped
    broken = run(kernel, inputs, EDGE, break_layout=True)["C"]
    assert (broken != want).mean() > 0.5
    for header, good, bad in SLIPS[device.backend]:
        text = (HEADERS / device.backend / "templates" / header).read_text()
        assert good in text, f"{header} no longer holds {good!r}"
        slipped = emulated(source, device, ((header, text.replace(good, bad)),))
        got = slipped(kernel, inputs, EDGE)["C"]
        assert (got != want).mean() > 0.25, (header, bad)


@pytest.mark.cxx
@pytest.mark.parametrize("target", ["sm80", "gfx942"])
def test_a_wrong_atom_gives_wrong_numbers(target, monkeypatch):
    """The atom's fragments are data the lowering lays registers out by: an i8 accumulator
    fragment with two register digits swapped stores the products in the wrong places."""
    from dataclasses import replace

    from ptc.lower import atoms

    kernel, source, _, device = rendered("igemm", target, "edge")
    inputs = inputs_for("igemm", EDGE)
    want = formula("igemm", inputs)["C"]

    def slipped(atom):
        regs = atom.c.regs
        if "i8" not in atom.dtypes or len(regs) < 2:
            return atom
        return replace(atom, c=replace(atom.c, regs=(regs[1], regs[0]) + regs[2:]))

    slipped_atoms = tuple(slipped(a) for a in atoms.all_atoms())
    monkeypatch.setattr(atoms, "all_atoms", lambda: slipped_atoms)
    bad_kernel = typed(IGEMM, EDGE)
    bad_source, _, _, _, _ = driver.render(bad_kernel, target, shapes=EDGE)
    assert bad_source != source
    got = emulated(bad_source, device)(bad_kernel, inputs, EDGE)["C"]
    assert (got != want).mean() > 0.25


# ---- real builds ------------------------------------------------------------------------------
def prepared_file(tmp_path, name: str, target: str):
    from ptc.runtime import prepare

    path = tmp_path / f"{name}.pt"
    path.write_text(KERNELS[name])
    return prepare(path, target, shapes={"M": 1024, "N": 1024, "K": 1024})


@pytest.mark.nvcc
@pytest.mark.parametrize("target", ["sm80", "sm90"])
@pytest.mark.parametrize("name", ["igemm", "w8a8"])
def test_the_int8_gemm_builds_with_imma_and_no_spills(name, target, tmp_path):
    from ptc.runtime.mainloop import mainloop_reports
    from ptc.runtime.symbols import kernel_name

    build = importlib.import_module("ptc.runtime.build")
    prepared = prepared_file(tmp_path, name, target)
    folder = tmp_path / "build"
    build.write_build_dir(folder, kernel_source=prepared.source, signature=prepared.signature,
                          arch=prepared.device.arch, target=target,
                          plan_json=prepared.plan_json)
    result = build.build(folder, prepared.device.arch, report_only=True)
    assert result.ptxas.spills == 0, result.ptxas.text
    sass = build.sass(folder)
    (loop,) = [r for r in mainloop_reports(sass) if kernel_name(r.kernel).endswith("<true>")]
    mnemonics = dict(loop.mnemonics)
    imma = sum(n for op, n in mnemonics.items() if op.startswith("IMMA.16832.S8.S8"))
    assert imma > 0, mnemonics
    assert loop.mma_flops == imma * 2 * 16 * 8 * 32
    assert not any(op.startswith("HMMA") for op in mnemonics), mnemonics
    assert "LDSM.16.M88.4" in mnemonics, mnemonics     # A [m][k] by ldmatrix


@pytest.mark.hip
@pytest.mark.parametrize("target", ["gfx90a", "gfx942"])
@pytest.mark.parametrize("name", ["igemm", "w8a8"])
def test_the_int8_gemm_builds_for_amd_with_i8_mfma_in_the_main_loop(name, target, tmp_path):
    import ptc.runtime as R
    from ptc.targets.hip import toolchain as hip

    build = importlib.import_module("ptc.runtime.build")
    try:
        hip.find_compiler(target)
    except R.BuildError as exc:
        pytest.skip(f"no HIP compiler here: {exc.message}")
    prepared = prepared_file(tmp_path, name, target)
    folder = tmp_path / "build"
    build.write_build_dir(folder, kernel_source=prepared.source, signature=prepared.signature,
                          arch=prepared.device.arch, target=target,
                          plan_json=prepared.plan_json, backend="hip")
    result = build.build(folder, report_only=True)
    report = result.resources
    assert report.spills == 0 and report.scratch_bytes == 0, report.alerts()
    kernels = [k for k in report.kernels if k.name.startswith(f"ptc_{name}_kernel")]
    assert kernels
    wanted = {"gfx90a": ("v_mfma_i32_32x32x8i8", "v_mfma_i32_16x16x16i8"),
              "gfx942": ("v_mfma_i32_32x32x16_i8", "v_mfma_i32_16x16x32_i8")}[target]
    for k in kernels:
        assert k.loop_count("v_mfma") > 0, k.name
        mfma = dict(k.mfma)
        assert mfma and all(op in wanted for op in mfma), mfma
