"""The MFMA fragment layouts of docs/hip.md, as formulas, checked against ptc.lower.atoms.

    .venv/bin/python tools/hip_probe/mfma_layouts.py

Formulas (AMD Matrix Instruction Calculator, `-a CDNA2|CDNA3 -i <instr> -d`; identical for
v_mfma_f32_32x32x8{f16,bf16_1k} (gfx90a) / v_mfma_f32_32x32x8_{f16,bf16} (gfx942), and for
the 16x16x16 pair; docs/hip.md cites them). M = N = 32, K = 8 or M = N = 16, K = 16;
G = 64 / M lane groups. Register r of a 16-bit operand is value r of the lane's 4-vector
(VGPR r / 2, low half first).
    A[i][k] -> lane i + M * (k / 4),            register k % 4
    B[k][j] -> lane j + M * (k / 4),            register k % 4
    D[i][j] -> lane j + M * ((i / 4) % G),      register (i % 4) + 4 * (i / (4 * G))
Checks: each formula is a bijection onto (lane, register); it equals the atom's Fragment in
ptc/lower/atoms.py; and, with the operands swapped (D^T = B^T A^T: A <- K rows, B <- Q^T),
the accumulator of S^T holds, in registers 4q..4q+3, exactly the A fragment of k-step q of
the next MFMA (P @ V from registers, no exchange), which is also the B fragment of
O^T = V^T P^T.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

SHAPES = {(32, 32, 8): 16, (16, 16, 16): 4}     # (M, N, K) -> accumulator registers


def a_loc(m: int, i: int, k: int) -> tuple[int, int]:
    return i + m * (k // 4), k % 4


def b_loc(m: int, k: int, j: int) -> tuple[int, int]:
    return j + m * (k // 4), k % 4


def d_loc(m: int, i: int, j: int) -> tuple[int, int]:
    g = 64 // m
    return j + m * ((i // 4) % g), (i % 4) + 4 * (i // (4 * g))


def table(rows: int, cols: int, regs: int, loc) -> np.ndarray:
    """[lane, reg] -> (row, col), from an element -> (lane, reg) formula; -1 where unused."""
    t = np.full((64, regs, 2), -1, dtype=np.int64)
    for r in range(rows):
        for c in range(cols):
            lane, reg = loc(r, c)
            assert t[lane, reg, 0] < 0, f"({r}, {c}) and {tuple(t[lane, reg])} share a slot"
            t[lane, reg] = (r, c)
    assert (t >= 0).all(), "some (lane, register) holds nothing"
    return t


def formulas(m: int, n: int, k: int, regs: int) -> dict[str, np.ndarray]:
    return {"a": table(m, k, 4, lambda i, kk: a_loc(m, i, kk)),
            "b": table(k, n, 4, lambda kk, j: b_loc(m, kk, j)),
            "c": table(m, n, regs, lambda i, j: d_loc(m, i, j))}


def check_atoms(ok: list[bool]) -> None:
    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root))
    try:
        from ptc.targets.hip.atoms import MFMA_16x16x16, MFMA_32x32x8
        from ptc.lower.layout import Layout
    except ImportError as exc:      # ptc's dependencies missing: run with the project's venv
        print(f"skip the atoms.py comparison ({exc})")
        return
    for atom in (MFMA_32x32x8, MFMA_16x16x16):
        f = formulas(atom.m, atom.n, atom.k, SHAPES[(atom.m, atom.n, atom.k)])
        for name, frag, shape in (("a", atom.a, (atom.m, atom.k)), ("b", atom.b, (atom.k, atom.n)),
                                  ("c", atom.c, (atom.m, atom.n))):
            lay = Layout(f"{atom.name}.{name}", shape, frag.regs, frag.lanes, ())
            same = np.array_equal(lay.table[0], f[name])
            ok.append(same)
            print(f"{atom.name:20} {name}: atoms.py {'==' if same else '!='} formula")


def check_swapped(ok: list[bool]) -> None:
    """S = Q K^T computed as S^T = K Q^T (A <- K, B <- Q^T): the accumulator element
    D'[j][i] = S[i][j]. P = S (converted) is then the A operand of O += P V, k = j."""
    for (m, n, k), regs in SHAPES.items():
        for lane in range(64):
            for q in range(regs // 4):          # k-steps of the P @ V mfma inside the S tile
                for r in range(4):
                    # S^T register 4q + r of this lane: D'[row = j][col = i]
                    j_idx = None
                    for jj in range(n):
                        for ii in range(m):
                            if d_loc(m, jj, ii) == (lane, 4 * q + r):
                                j_idx, i_idx = jj, ii
                    # A of k-step q: A[i][kk], kk = j - q * k must sit in (lane, r)
                    good = j_idx // k == q and a_loc(m, i_idx, j_idx % k) == (lane, r)
                    ok.append(good)
                    if not good:
                        print(f"swapped {m}x{n}x{k}: lane {lane} reg {4 * q + r} is "
                              f"S[{i_idx}][{j_idx}], not A of k-step {q}")
        # and B[k][i] sits where A[i][k] does: the same registers are the B operand of
        # O^T = V^T P^T, whose accumulator keeps O's row i in S^T's lanes (i + M * g)
        same = all(b_loc(m, kk, i) == a_loc(m, i, kk) for i in range(m) for kk in range(k))
        ok.append(same)
        print(f"mfma {m}x{n}x{k}: S^T registers 4q..4q+3 == A fragment of P@V k-step q"
              f" == B fragment of V^T P^T ({'yes' if same else 'NO'})")


def main() -> int:
    ok: list[bool] = []
    for (m, n, k), regs in SHAPES.items():
        formulas(m, n, k, regs)                 # asserts bijections
        print(f"mfma {m}x{n}x{k}: A, B, D formulas are bijections onto 64 lanes x registers")
    check_atoms(ok)
    check_swapped(ok)
    print("all checks pass" if all(ok) else "SOME CHECKS FAIL")
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
