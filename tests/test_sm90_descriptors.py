"""wgmma's shared-memory operands in every layout the sm90 renderer produces, on the CPU
emulator against the reference interpreter (issue 20).

The rows of a shared tile wgmma reads are 16, 32, 64 or 128 bytes (TMA writes them
unswizzled or swizzled over that span), and the operand is K-major or MN-major; the
matrix descriptor's LBO and SBO mean different things in each (PTX ISA, "Matrix Descriptor
Format", "Canonical Layouts"; docs/sm90.md), and the emulator reads the operand after the
PTX ISA's canonical layouts, so a descriptor that says the wrong thing gives wrong numbers.
The kernels are ptc's own (tests/sm90/*.pt), with tiles pinned so that each combination
the renderer can produce comes out:

  K-major:  spans 32 (BK = 16), 64 (BK = 32), 128 (BK >= 64), for A and B; a K-major span
            of 16 would need BK = 8, less than wgmma's k16: not produced.
  MN-major: B spans 16 (BN = 8), 32 (BN = 16), 64 (BN = 32), 128 (BN >= 64); A only 128
            (its rows are BM >= 64 elements).
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import formulas as F
from ptc.cli import cli
from ptc.devices import get_device
from ptc.driver import check_file
from ptc.interp import run_kernel
from ptc.render import render_kernel
from ptc import targets
from ptc.render.emulate import build_emulated
from ptc.sched.construct import Choice, construct
from ptc.stask import build_graphs, propagate

CUDA_TEMPLATES = targets.backend("cuda").templates

pytestmark = pytest.mark.cxx

ROOT = Path(__file__).resolve().parent.parent
SM90_DIR = ROOT / "tests" / "sm90"
SM90 = get_device("sm90")
CONFIGS = [dict(), dict(order="reverse", eager_cp_async=True), dict(order="random", seed=3)]

# (kernel, tiles): the operands (A, B) wgmma reads, as (mn_major, span)
COMBINATIONS = {
    "nt-bk16": ("gemm_nt", dict(BM=64, BN=64, BK=16), ((False, 32), (False, 32))),
    "nt-bk32": ("gemm_nt", dict(BM=64, BN=64, BK=32), ((False, 64), (False, 64))),
    "nt-bk64": ("gemm_nt", dict(BM=64, BN=64, BK=64), ((False, 128), (False, 128))),
    "nn-bk64": ("gemm_nn", dict(BM=64, BN=64, BK=64), ((False, 128), (True, 128))),
    "tn-bn8": ("gemm_tn", dict(BM=64, BN=8, BK=64), ((True, 128), (True, 16))),
    "tn-bn16": ("gemm_tn", dict(BM=64, BN=16, BK=64), ((True, 128), (True, 32))),
    "tn-bn32": ("gemm_tn", dict(BM=64, BN=32, BK=64), ((True, 128), (True, 64))),
}
# edges in every dim (TMA zero-fills past them), strides 16-byte multiples (TMA runs)
SHAPES = dict(M=136, N=40, K=208)


class Case:
    def __init__(self, path: Path, name: str, tiles: dict, shapes: dict):
        self.kernel = next(k for k in check_file(path, shapes).kernels if k.name == name)
        (g,) = build_graphs(self.kernel)
        g = propagate(g, tiles)
        self.plan = construct(g, SM90, Choice("warp_specialized", 2, 1))
        self.source = render_kernel(self.kernel, self.plan, g, SM90)
        self.shapes, self.tiles = shapes, tiles
        rng = np.random.default_rng(7)
        self.inputs = {p.name: (rng.standard_normal(p.shape_in(shapes)) *
                                (0.25 if p.name == "B" else 1.0)).astype(np.float16)
                       for p in self.kernel.inputs}
        self.dims = {d.name: shapes[d.name] for d in self.kernel.dims}

    def operands(self) -> list[tuple[bool, int]]:
        """(mn_major, span) of the A and B operands of the kernel's wgmma_tile."""
        found = re.findall(r"SmemOperand<(true|false), (\d+), \d+>", self.source)
        return [(m == "true", int(s)) for m, s in found]

    @property
    def reference(self) -> dict:
        return run_kernel(self.kernel, self.inputs, shapes=self.shapes, tiles=self.tiles)

    def errors(self, source: str | None = None, header_overrides=None, **config) -> dict:
        got = build_emulated(source or self.source, backend=SM90,
                             header_overrides=header_overrides)(self.kernel, self.inputs,
                                                                self.dims, **config)
        return {n: F.rel_l2(got[n], want) for n, want in self.reference.items()}


@lru_cache(maxsize=None)
def combination(key: str) -> Case:
    name, tiles, _ = COMBINATIONS[key]
    return Case(SM90_DIR / "gemm_operands.pt", name, tiles, SHAPES)


@lru_cache(maxsize=None)
def bn8_case() -> Case:
    return Case(SM90_DIR / "gemm_bn8.pt", "gemm_bn8", dict(BM=64, BN=8, BK=64),
                dict(M=200, N=24, K=136))


@pytest.mark.parametrize("key", list(COMBINATIONS))
def test_every_operand_layout_the_renderer_produces_computes_the_product(key):
    c = combination(key)
    want = COMBINATIONS[key][2]
    assert c.operands() == [want[0], want[1]], c.operands()
    for config in CONFIGS:
        errors = c.errors(**config)
        assert all(e < 1e-5 for e in errors.values()), (key, config, errors)


def old_descriptor_header() -> str:
    """wgmma.cuh with the encoding issue 20 found: a MN-major operand without a swizzle
    described as a swizzled one (LBO = a panel, SBO = 8 k rows)."""
    header = (CUDA_TEMPLATES / "wgmma.cuh").read_text()
    good = "static constexpr uint32_t LBO = MN_MAJOR ? (SPAN == 16 ? 8 * 16 : PANEL_BYTES)"
    assert good in header
    bad = header.replace(good, "static constexpr uint32_t LBO = MN_MAJOR ? (PANEL_BYTES)")
    good = "static constexpr uint32_t SBO = MN_MAJOR && SPAN == 16 ? PANEL_BYTES : 8 * SPAN;"
    assert good in bad
    return bad.replace(good, "static constexpr uint32_t SBO = 8 * SPAN;")


def test_the_bn8_gemm_of_issue_20_computes_the_product():
    """`tile BN in [8]`: B's tile is 64 rows of 16 bytes, read MN-major without a swizzle
    (SmemOperand<true, 16, 1024>); the warp-specialized plan matches the interpreter."""
    c = bn8_case()
    assert "ptc::SmemOperand<true, 16, 1024>" in c.source
    for config in CONFIGS:
        errors = c.errors(**config)
        assert all(e < 1e-3 for e in errors.values()), (config, errors)


def test_the_swapped_lbo_and_sbo_of_issue_20_give_wrong_numbers():
    """The planted bug: the old descriptor (LBO and SBO swapped for a MN-major operand
    without a swizzle) makes the emulated wgmma read the k rows 8-15 of each k-step a panel
    away -- the next ring slot, as on the GPU -- in the BN = 8 GEMM and in the MN-major
    spans-16 operand of gemm_tn; the swizzled layouts are unchanged by it."""
    bad = old_descriptor_header()
    for c in (bn8_case(), combination("tn-bn8")):
        errors = c.errors(header_overrides={"wgmma.cuh": bad})
        assert all(not e < 0.1 for e in errors.values()), errors    # NaN or far off
    errors = combination("tn-bn16").errors(header_overrides={"wgmma.cuh": bad})
    assert all(e < 1e-5 for e in errors.values()), errors


def test_ptc_run_emulates_the_bn8_gemm_at_the_shape_of_issue_20(tmp_path):
    """What issue 20 ran: `ptc compile tests/sm90/gemm_bn8.pt -t sm90 --shape
    M=8192,N=8,K=8192` picks a warp-specialized plan reading B MN-major without a swizzle,
    and `ptc run ... --shape M=2048,N=8,K=2048 -t sm90 --emulate` (all NaN before the fix)
    matches the interpreter's `ptc run`."""
    def ptc_run(*extra: str) -> np.ndarray:
        out = tmp_path / f"out{len(extra)}.npz"
        result = CliRunner().invoke(cli, ["run", str(SM90_DIR / "gemm_bn8.pt"), "--shape",
                                          "M=2048,N=8,K=2048", "-o", str(out), *extra])
        assert result.exit_code == 0, result.output
        return np.load(out)["C"]
    for shape in ("M=8192,N=8,K=8192", "M=2048,N=8,K=2048"):
        result = CliRunner().invoke(cli, ["compile", str(SM90_DIR / "gemm_bn8.pt"), "-t", "sm90",
                                          "--shape", shape, "--emit", "source"])
        assert result.exit_code == 0, result.output
        assert "warp-specialized" in result.output
        assert "ptc::SmemOperand<true, 16, 1024>" in result.output
    got = ptc_run("-t", "sm90", "--emulate")
    want = ptc_run()
    assert np.isfinite(got).all()
    assert F.rel_l2(got, want) < 1e-3
