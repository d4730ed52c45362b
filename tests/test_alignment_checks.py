"""The launch's alignment checks (the conditions under which a kernel takes its vector
copies and TMA boxes instead of the element-wise variant) ask only what the strides need.

A row-major tensor's outer strides are its row stride times more dims, so once the row
stride is a multiple of a vector, every outer stride and every offset built on it is too.
The checks used to ask each stride on its own, and a product's tie went to its outer dim:
mamba2_chunk_scan asked G % 8 (G = 1 in every Mamba2 model) and w4a16_gemm KG % 16, so on
sm90 both ran their element-wise variant at the benchmark shape (23 ms on an H200 against
1.3 ms for sm80's plan, benchmarks/results/2026-11-28-NVIDIA-H200)."""
from __future__ import annotations

from pathlib import Path

import pytest

from ptc.driver import check_file, lowered
from ptc.interp import bind_dims
from ptc.lower.tiles import add, const, dim, divisible, divisible_all, index, mul

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted(p.stem for p in (ROOT / "samples").glob("*.pt"))
TARGETS = ("sm80", "sm90", "gfx90a", "gfx942")


def strides(esize: int, *dims: str):
    """A row-major tensor's byte strides, innermost first, as ptc.lower.tma builds them."""
    out, acc = [], const(esize)
    for d in reversed(dims):
        acc = mul(acc, dim(d))
        out.append(acc)
    return out


def names(conds) -> list[str]:
    return [c.name for c in conds]


def test_the_row_stride_asks_for_every_outer_stride():
    """cb: f16[B, NC, G, L, L]: strides 2L, 2L*L, 2L*L*G, 2L*L*G*NC; L % 8 is enough."""
    known, conds = divisible_all(strides(2, "NC", "G", "L", "L"), 16)
    assert known and names(conds) == ["L"]
    # asked alone, the outer stride picks one of its dims; either way not G once L is known
    assert names(divisible(strides(2, "NC", "G", "L", "L")[2], 16,
                           frozenset({"L"}))[1]) == []


def test_an_offset_asks_its_simplest_term_first():
    """dA_cs[b, h, c, s] starts at b*(H*NC*L) + h*(NC*L) + c*L + s*64: L % 4 covers it."""
    L, NC, H = dim("L"), dim("NC"), dim("H")
    origin = add(add(add(mul(index("b"), mul(mul(L, NC), H)), mul(index("h"), mul(L, NC))),
                     mul(index("c"), L)), mul(index("s"), const(64)))
    known, conds = divisible(origin, 4)
    assert known and names(conds) == ["L"]


def test_an_index_alone_is_never_a_known_multiple():
    assert divisible(add(mul(index("c"), dim("L")), index("s")), 4) == (False, ())


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("sample", SAMPLES)
def test_every_sample_takes_its_vector_path_at_its_default_dims(sample, target):
    """A sample's default dims are its benchmark shape: its plan's alignment checks hold
    there, so what is measured is the vector / TMA variant the plan describes."""
    for kernel in check_file(ROOT / "samples" / f"{sample}.pt").kernels:
        dims = bind_dims(kernel, {}, {})
        lows, *_ = lowered(kernel, target)
        for low in lows:
            failing = [(name, n) for kind, name, n in low.alignment
                       if kind == "dim" and dims[name] % n]
            assert not failing, f"{kernel.name} on {target} at {dims}: {failing}"
