"""Narrow MFMA atoms (ptc.lower.atoms.narrowed): a 16 x 16 MFMA used for 8 of its rows or
columns, where no whole atom tiles a product (the 8 query heads of a GQA group in paged
decoding, samples/paged_decode.pt). The lanes of the unused half load the same operand
elements as the used half, so the instruction computes copies there, and the fragment
layouts say so with a lane digit of stride 0."""
from __future__ import annotations

from collections import Counter

import ml_dtypes
import numpy as np
import pytest

from ptc.lower.atoms import fitting_atoms, mma_tilings, narrowed
from ptc.targets.hip.atoms import MFMA_16x16x16, NARROW_ATOMS
from ptc.devices import get_device
from ptc.lower.layout import Layout
from ptc import targets
from ptc.render.emulate import build_emulated
from test_emulate_hip import ORDERS, run, source

HIP_TEMPLATES = targets.backend("hip").templates

NARROW_F16 = [narrowed(MFMA_16x16x16, axis) for axis in (0, 1)]


def table(atom, part: str) -> np.ndarray:
    """[lane, register] -> (row, col) of fragment `part` of `atom`, from its layout data."""
    frag = getattr(atom, part)
    shape = {"a": (atom.m, atom.k), "b": (atom.k, atom.n), "c": (atom.m, atom.n)}[part]
    return Layout(f"{atom.name}.{part}", shape, frag.regs, frag.lanes, ()).table[0]


@pytest.mark.parametrize("atom", NARROW_ATOMS, ids=lambda a: a.describe())
def test_a_narrow_atom_holds_every_element_twice(atom):
    """Each element of the used part is in two lanes (the instruction's two halves), and
    the registers per lane are the instruction's."""
    for part in ("a", "b", "c"):
        held = Counter(map(tuple, table(atom, part).reshape(-1, 2)))
        shape = {"a": (atom.m, atom.k), "b": (atom.k, atom.n), "c": (atom.m, atom.n)}[part]
        halved = part == "c" or (part == "a") == (atom.m < atom.full[0])
        assert len(held) == shape[0] * shape[1], part
        assert set(held.values()) == {2 if halved else 1}, part


def test_a_narrow_atom_only_where_no_whole_one_tiles():
    atoms = fitting_atoms(get_device("gfx942"), "f16")
    assert all(not t.atom.full for t in mma_tilings(atoms, 64, 64, 32, 4))
    (scores, *_) = mma_tilings(atoms, 16, 8, 128, 4)
    assert scores.atom.full == (16, 16) and scores.atom.n == 8 and scores.replicas == 4
    (rows, *_) = mma_tilings(atoms, 8, 64, 32, 4)
    assert rows.atom.full == (16, 16) and rows.atom.m == 8
    assert mma_tilings(atoms, 8, 8, 16, 4) == []       # neither axis is half an atom's


NARROW = r"""
  // the operands in LDS ([m][16] and [16][n], 16-bit), read by the fragment loaders
  for (int i = tid; i < M * 16; i += 64) ptc::st_shared<uint16_t>(2 * i, ab[i]);
  for (int i = tid; i < 16 * N; i += 64) ptc::st_shared<uint16_t>(1024 + 2 * i, bb[i]);
  ptc::syncthreads();
  using I = ptc::Narrow<ptc::Mfma<16, 16, 16, BF16>, M, N>;
  uint32_t a[I::REGS], b[I::REGS];
  ptc::load_a<I, false>(a, ptc::SharedTile<32, false>{0}, 0, 0, lane);
  ptc::load_b<I, false>(b, ptc::SharedTile<2 * N, false>{1024}, 0, 0, lane);
  float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  I::mma(d, a, b);
  for (int r = 0; r < 4; ++r) out[lane * 4 + r] = d[r];
"""


def narrow_source(atom, bf16: bool) -> str:
    body = (NARROW.replace("BF16", str(bf16).lower())
            .replace("M, N>", f"{atom.m}, {atom.n}>").replace("M * 16", f"{atom.m} * 16")
            .replace("16 * N", f"16 * {atom.n}").replace("2 * N,", f"{2 * atom.n},"))
    return source(body, "const uint16_t* ab, const uint16_t* bb, float* out",
                  "(const uint16_t*)t[0], (const uint16_t*)t[1], (float*)t[2]", smem=2048)


def narrow_case(atom, dtype, seed: int = 0):
    rng = np.random.default_rng(seed)
    a = rng.integers(-8, 8, (atom.m, atom.k)) / 4
    b = rng.integers(-8, 8, (atom.k, atom.n)) / 4
    arrays = [a.astype(dtype).view(np.uint16), b.astype(dtype).view(np.uint16),
              np.zeros((64, 4), np.float32)]
    return arrays, a @ b


@pytest.mark.cxx
@pytest.mark.parametrize("config", ORDERS)
@pytest.mark.parametrize("atom", NARROW_F16, ids=lambda a: f"{a.m}x{a.n}")
@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16], ids=["bf16", "f16"])
def test_every_lane_of_a_narrow_mfma_holds_its_element(atom, dtype, config):
    """Operands read from LDS by mfma.h's loaders for the narrow instruction: every lane's
    accumulator registers, the copies' lanes included, hold the elements of A @ B its
    layout names."""
    arrays, want = narrow_case(atom, dtype)
    run(narrow_source(atom, dtype is ml_dtypes.bfloat16), *arrays, **config)
    tc = table(atom, "c")
    np.testing.assert_array_equal(arrays[2], want[tc[..., 0], tc[..., 1]])


@pytest.mark.cxx
@pytest.mark.parametrize("atom", NARROW_F16, ids=lambda a: f"{a.m}x{a.n}")
def test_a_loader_that_reads_past_the_used_part_gives_wrong_copies(atom):
    """mfma.h's loaders without the wrap to the used rows and columns: the lanes of the
    unused half read past the operand (zeros here), and their copies are wrong."""
    header = (HIP_TEMPLATES / "mfma.h").read_text()
    broken = header.replace("lane % Lanes<I>::M % I::M", "lane % Lanes<I>::M") \
                   .replace("lane % Lanes<I>::N % I::N", "lane % Lanes<I>::N")
    assert broken != header
    arrays, want = narrow_case(atom, np.float16, seed=2)
    kernel = build_emulated(narrow_source(atom, False), backend="hip",
                            header_overrides={"mfma.h": broken})
    kernel.launch(list(arrays))
    tc = table(atom, "c")
    assert not np.array_equal(arrays[2], want[tc[..., 0], tc[..., 1]])


ROWS8 = """
kernel rows8(Q: f16[G, D], K: f16[T, D]) -> (S: f32[G, T], R: f32[G], C: f32[T]) {
  dims G = 8, D = 64, T = 96
  tile BT in [32]
  parallel j: BT of T {
    s = load(Q[:, :]) @ load(K[j, :]).T             # f32[G, BT]: 8 rows
    store(S[:, j], s)
    atomic_add(R[:], max(s, axis=1))
    store(C[j], sum(s * s, axis=0))
  }
}
"""


@pytest.mark.cxx
@pytest.mark.parametrize("target", ["gfx90a", "gfx942"])
def test_eight_rows_on_a_narrow_mfma_reduce_each_copy_once(target, tmp_path):
    """8 query rows against a tile of keys: the product on an MFMA used for 8 of its 16
    rows or columns, its row maxima (across the lanes of a row) and column sums (across the rows,
    whose other 8 are copies that must not count twice), against the interpreter."""
    from ptc import driver
    from ptc.interp import run_kernel

    path = tmp_path / "rows8.pt"
    path.write_text(ROWS8)
    shapes = {"G": 8, "D": 64, "T": 96}
    kernel = driver.select_kernel(driver.check_file(str(path), shapes), None)
    source, plans, _, device, _ = driver.render(kernel, target, shapes=shapes,
                                                tiles={"BT": 32})
    # (computed as given, 8 x 16 of the instruction, or transposed, 16 x 8)
    assert "ptc::Narrow<ptc::Mfma<16, 16, 16, false>," in source
    rng = np.random.default_rng(4)
    inputs = {"Q": (rng.integers(-4, 5, (8, 64)) / 4).astype(np.float16),
              "K": (rng.integers(-4, 5, (96, 64)) / 4).astype(np.float16)}
    want = run_kernel(kernel, inputs, shapes=shapes, tiles={"BT": 32})
    run = build_emulated(source, backend=device)
    for config in ORDERS:
        got = run(kernel, inputs, shapes, **config)
        for name, w in want.items():
            np.testing.assert_array_equal(got[name], w, err_msg=f"{name} {config}")
