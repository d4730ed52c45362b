"""Unit tests of the type checker on good programs (the types it infers, the facts it
records) and of the reference interpreter's semantics on tiny kernels.

The error side of the checker is covered by the corpus in tests/errors (tests/test_errors.py).
"""
from __future__ import annotations

import textwrap
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from ptc import driver
from ptc.diagnostics import CompileError
from ptc.grammar import parse
from ptc.interp import run_kernel
from ptc.sema import check
from ptc.sema import typed as T
from ptc.sema.printer import print_program


def compile_text(src: str, shapes: dict[str, int] | None = None) -> T.Program:
    return check(parse(textwrap.dedent(src), "test.pt"), dict(shapes or {}))


def printed(src: str, shapes: dict[str, int] | None = None) -> str:
    return print_program(compile_text(src, shapes))


def lets(kernel: T.TypedKernel) -> dict[str, T.TileType]:
    """Every variable's type (of its last binding), walking the whole kernel."""
    out: dict[str, T.TileType] = {}

    def walk(stmts):
        for s in stmts:
            if isinstance(s, T.Let):
                out[s.name] = s.value.type
            elif isinstance(s, (T.Loop, T.Grid)):
                walk(s.body)

    walk(kernel.body)
    return out


def loops(kernel: T.TypedKernel) -> list[T.Loop]:
    out: list[T.Loop] = []

    def walk(stmts):
        for s in stmts:
            if isinstance(s, T.Loop):
                out.append(s)
            if isinstance(s, (T.Loop, T.Grid)):
                walk(s.body)

    walk(kernel.body)
    return out


def body_types(params: str, outputs: str, body: str, header: str = "tile BM = 64",
               grid: str = "i: BM of M") -> dict[str, T.TileType]:
    """The variable types of a one-kernel program whose parallel body is `body`."""
    src = (f"kernel k({params}) -> ({outputs}) {{\n  {header}\n  parallel {grid} {{\n"
           + textwrap.indent(textwrap.dedent(body).strip(), "    ") + "\n  }\n}\n")
    (kernel,) = compile_text(src).kernels
    return lets(kernel)


def ty(text: str) -> T.TileType:
    """`f32[BM, BN]` -> TileType (int extents as ints)."""
    dtype, _, rest = text.partition("[")
    items = [e.strip() for e in rest.rstrip("]").split(",") if e.strip()]
    return T.TileType(dtype, tuple(int(e) if e.isdigit() else e for e in items))


# ---- inferred types, as the canonical printer shows them -------------------------------
MATMUL_SUM = """
kernel matmul_sum(A: f16[M, K], B: f16[K, N]) -> (C: f16[M, N], S: f32[M]) {
  dims M = 4096, N = 4096, K = 4096          # default sizes (the benchmark shape)
  tile BM in [128, 64], BN in [128, 64], BK in [32, 64]
  parallel i: BM of M, j: BN of N {
    acc = zeros(f32[BM, BN])
    for k: BK of K {
      acc += load(A[i, k]) @ load(B[k, j])
    }
    store(C[i, j], acc as f16)
    atomic_add(S[i], rowsum(acc))
  }
}
"""


def test_print_matmul_sum():
    assert printed(MATMUL_SUM) == textwrap.dedent("""\
        kernel matmul_sum(A: f16[M, K], B: f16[K, N]) -> (C: f16[M, N], S: f32[M])
          dims M=4096 runtime, K=4096 runtime, N=4096 runtime
          tiles BM in [128, 64], BN in [128, 64], BK in [32, 64]
          parallel i: BM of M, j: BN of N
            acc: f32[BM, BN] = fill(0.0:f32, f32[BM, BN])
            for k: BK of K  carries acc
              acc: f32[BM, BN] = mma_acc(acc, load(A[i:BM, k:BK]), load(B[k:BK, j:BN]))
            store C[i:BM, j:BN] <- convert(acc, f16)
            atomic_add S[i:BM] <- sum(acc, axis=1)
        """)


FLASH_ATTN = """
kernel flash_attn(Q: bf16[B, H, S, D], K: bf16[B, H, T, D], V: bf16[B, H, T, D])
    -> (O: bf16[B, H, S, D]) {
  dims B = 4, H = 16, S = 4096, T = 4096, D = 128
  tile BM in [128, 64], BN in [128, 64]
  parallel b of B, h of H, m: BM of S {
    q = load(Q[b, h, m, :])                           # bf16[BM, D]
    o = zeros(f32[BM, D]); mx = full(f32[BM], -inf); l = zeros(f32[BM])
    for n: BN of T {
      k = load(K[b, h, n, :]); v = load(V[b, h, n, :])
      s = (q @ k.T) * rsqrt(D)                        # f32[BM, BN]
      s = where(index(n)[None, :] < T, s, -inf)       # keys past T (the edge tile)
      mn = max(mx, rowmax(s))                         # the running row max
      p = exp(s - mn[:, None])
      a = exp(mx - mn)                                # rescales what came before
      l = l * a + rowsum(p)
      o = o * a[:, None] + (p as bf16) @ v
      mx = mn
    }
    store(O[b, h, m, :], (o / l[:, None]) as bf16)
  }
}
"""


def test_print_flash_attention():
    assert printed(FLASH_ATTN) == textwrap.dedent("""\
        kernel flash_attn(Q: bf16[B, H, S, D], K: bf16[B, H, T, D], V: bf16[B, H, T, D]) -> (O: bf16[B, H, S, D])
          dims B=4 runtime, H=16 runtime, S=4096 runtime, D=128 static, T=4096 runtime
          tiles BM in [128, 64], BN in [128, 64]
          parallel b of B, h of H, m: BM of S
            q: bf16[BM, D] = load(Q[b, h, m:BM, :D])
            o: f32[BM, D] = fill(0.0:f32, f32[BM, D])
            mx: f32[BM] = fill(-inf:f32, f32[BM])
            l: f32[BM] = fill(0.0:f32, f32[BM])
            for n: BN of T  carries l, o, mx
              k: bf16[BN, D] = load(K[b, h, n:BN, :D])
              v: bf16[BN, D] = load(V[b, h, n:BN, :D])
              s: f32[BM, BN] = mul(mma(q, transpose(k)), rsqrt(convert(D, f32)))
              s: f32[BM, BN] = where(lt(expand(index(n), i32[1, BN]), T), s, -inf:f32)
              mn: f32[BM] = max(mx, max(s, axis=1))
              p: f32[BM, BN] = exp(sub(s, expand(mn, f32[BM, 1])))
              a: f32[BM] = exp(sub(mx, mn))
              l: f32[BM] = add(mul(l, a), sum(p, axis=1))
              o: f32[BM, D] = mma_acc(mul(o, expand(a, f32[BM, 1])), convert(p, bf16), v)
              mx: f32[BM] = mn
            store O[b, h, m:BM, :D] <- convert(div(o, expand(l, f32[BM, 1])), bf16)
        """)


MAMBA_LIKE = """
# the state a chunk leaves behind, as mamba2's chunk_state (G groups of heads share Bm)
kernel chunk_state(x: f16[B, NC, L, H, P], Bm: f16[B, NC, L, G, N],
                   dt: f32[B, H, NC, L], dA: f32[B, H, NC, L])
    -> (states: f32[B, NC, H, P, N]) {
  dims B = 2, NC = 4, L = 64, H = 8, G = 2, P = 32, N = 16
  tile BP = 32, BN = 16, BL = 32
  parallel b of B, c of NC, h of H, p: BP of P, n: BN of N {
    last = load(dA[b, h, c, L - 1])
    acc = zeros(f32[BP, BN])
    for l: BL of L {
      w = exp(last - load(dA[b, h, c, l])) * load(dt[b, h, c, l])
      bw = (load(Bm[b, c, l, h // (H // G), n]) * w[:, None]) as f16
      acc += load(x[b, c, l, h, p]).T @ bw
    }
    store(states[b, c, h, p, n], acc)
  }
}
"""


def test_print_mamba_like_point_indices():
    assert printed(MAMBA_LIKE) == textwrap.dedent("""\
        kernel chunk_state(x: f16[B, NC, L, H, P], Bm: f16[B, NC, L, G, N], dt: f32[B, H, NC, L], dA: f32[B, H, NC, L]) -> (states: f32[B, NC, H, P, N])
          dims B=2 runtime, NC=4 runtime, L=64 runtime, H=8 runtime, P=32 runtime, G=2 runtime, N=16 runtime
          tiles BP in [32], BN in [16], BL in [32]
          parallel b of B, c of NC, h of H, p: BP of P, n: BN of N
            last: f32[] = load(dA[b, h, c, sub(L, 1:i32)])
            acc: f32[BP, BN] = fill(0.0:f32, f32[BP, BN])
            for l: BL of L  carries acc
              w: f32[BL] = mul(exp(sub(last, load(dA[b, h, c, l:BL]))), load(dt[b, h, c, l:BL]))
              bw: f16[BL, BN] = convert(mul(convert(load(Bm[b, c, l:BL, floordiv(h, floordiv(H, G)), n:BN]), f32), expand(w, f32[BL, 1])), f16)
              acc: f32[BP, BN] = mma_acc(acc, transpose(load(x[b, c, l:BL, h, p:BP])), bw)
            store states[b, c, h, p:BP, n:BN] <- acc
        """)


def test_point_index_drops_the_dim():
    (k,) = compile_text(MAMBA_LIKE).kernels
    types = lets(k)
    assert types["last"] == ty("f32[]")         # every index a point: a scalar
    assert types["w"] == ty("f32[BL]")          # b, h, c are points; l a tile
    assert types["bw"] == ty("f16[BL, BN]")     # the group index h // (H // G) drops G


# ---- dtype rules -------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["bf16", "f16", "f32"])
def test_weak_float_literal_keeps_the_tile_dtype(dtype):
    types = body_types(f"S: {dtype}[M]", "O: f32[M]", f"""
        s = load(S[i])
        a = s * 0.5
        b = 2 * s
        c = s - inf
        d = s * 1e-5 + 1
        store(O[i], a as f32)
    """)
    for name in "abcd":
        assert types[name] == T.TileType(dtype, ("BM",)), name


def test_weak_literals_with_integers():
    types = body_types("X: i32[M]", "O: f32[M]", """
        x = load(X[i])
        a = x + 1           # i32 stays i32
        b = x * 0.5         # a float literal with an i32 tile gives f32 (rule 3)
        c = x // 2
        d = x / 2           # i32 / i32 gives f32
        e = 1 + 2           # literals alone: i32
        f = 1.5 * 2         # ... or f32 with a point
        g = i * BM + 3      # tile index and tile size: i32 scalars
        store(O[i], b)
    """)
    assert types["a"] == ty("i32[BM]")
    assert types["b"] == ty("f32[BM]")
    assert types["c"] == ty("i32[BM]")
    assert types["d"] == ty("f32[BM]")
    assert types["e"] == ty("i32[]")
    assert types["f"] == ty("f32[]")
    assert types["g"] == ty("i32[]")


def test_literal_constants_take_the_partner_dtype_in_the_typed_ir():
    (k,) = compile_text("""
        kernel k(S: bf16[M]) -> (O: bf16[M]) {
          tile BM = 64
          parallel i: BM of M {
            store(O[i], load(S[i]) * 0.5)
          }
        }
    """).kernels
    (store,) = k.body[0].body
    assert store.value == T.Elementwise(
        "mul", (T.Load("S", (T.TileSlice("i", "BM"),), 0.0, ty("bf16[BM]")),
                T.Const(0.5, ty("bf16[]"))), ty("bf16[BM]"))


@pytest.mark.parametrize("a, b, result", [
    ("f16", "f32", "f32"), ("f32", "f16", "f32"), ("bf16", "f32", "f32"),
    ("f16", "f16", "f16"), ("bf16", "bf16", "bf16"), ("i32", "f16", "f16"),
    ("bf16", "i32", "bf16"), ("i32", "i32", "i32"),
])
def test_promotion(a, b, result):
    types = body_types(f"X: {a}[M], Y: {b}[M]", "O: f32[M]", """
        z = load(X[i]) + load(Y[i])
        m = max(load(X[i]), load(Y[i]))
        store(O[i], z as f32)
    """)
    assert types["z"] == T.TileType(result, ("BM",))
    assert types["m"] == T.TileType(result, ("BM",))


def test_f16_with_bf16_is_an_error():
    with pytest.raises(CompileError, match="mixes f16 and bf16"):
        body_types("X: f16[M], Y: bf16[M]", "O: f32[M]", """
            store(O[i], (load(X[i]) + load(Y[i])) as f32)
        """)


@pytest.mark.parametrize("a, result", [("f16", "f32"), ("bf16", "f32"), ("f32", "f32")])
def test_matmul_accumulates_in_f32(a, result):
    types = body_types(f"A: {a}[M, K], B: {a}[K, N]", "O: f32[M, N]", """
        c = load(A[i, k]) @ load(B[k, j])
        store(O[i, j], c)
    """, header="tile BM = 64, BN = 64, BK = 32", grid="i: BM of M, j: BN of N, k: BK of K")
    assert types["c"] == T.TileType(result, ("BM", "BN"))


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
def test_reduction_dtypes(dtype):
    types = body_types(f"X: {dtype}[M, N]", "O: f32[M]", f"""
        x = load(X[i, j])
        rs = rowsum(x)
        rmax = rowmax(x)
        rmin = rowmin(x)
        s0 = sum(x, axis=0)
        s1 = sum(x, axis=-1)
        m0 = max(x, axis=0)
        m1 = min(x, axis=1)
        store(O[i], rs as f32)
    """, header="tile BM = 64, BN = 64", grid="i: BM of M, j: BN of N")
    acc = "f32"  # sums of half precision accumulate in (and return) f32
    assert types["rs"] == T.TileType(acc, ("BM",))
    assert types["s0"] == T.TileType(acc, ("BN",))
    assert types["s1"] == T.TileType(acc, ("BM",))
    assert types["rmax"] == T.TileType(dtype, ("BM",))  # max/min keep the dtype
    assert types["rmin"] == T.TileType(dtype, ("BM",))
    assert types["m0"] == T.TileType(dtype, ("BN",))
    assert types["m1"] == T.TileType(dtype, ("BM",))


def test_elementwise_math_of_i32_gives_f32():
    types = body_types("X: f16[M]", "O: f32[M]", """
        r = rsqrt(M)
        e = exp(load(X[i]))
        a = abs(i - 3)
        store(O[i], e * r)
    """)
    assert types["r"] == ty("f32[]")
    assert types["e"] == ty("f16[BM]")
    assert types["a"] == ty("i32[]")


def test_broadcasting_and_new_axes():
    types = body_types("X: f32[M, N]", "O: f32[M, N]", """
        x = load(X[i, j])
        r = rowmax(x)
        col = r[:, None]
        row = index(j)[None, :]
        d = x - col
        keep = row < N
        y = where(keep, d, 0.0)
        store(O[i, j], y)
    """, header="tile BM = 64, BN = 64", grid="i: BM of M, j: BN of N")
    assert types["col"] == ty("f32[BM, 1]")
    assert types["row"] == ty("i32[1, BN]")
    assert types["d"] == ty("f32[BM, BN]")
    assert types["keep"] == ty("bool[1, BN]")
    assert types["y"] == ty("f32[BM, BN]")


def test_store_widens_half_to_f32_without_a_cast():
    (k,) = compile_text("""
        kernel k(X: f16[M]) -> (O: f32[M]) {
          tile BM = 64
          parallel i: BM of M {
            store(O[i], load(X[i]))
          }
        }
    """).kernels
    (store,) = k.body[0].body
    assert isinstance(store.value, T.Convert) and store.value.type == ty("f32[BM]")


# ---- loops ---------------------------------------------------------------------------
def test_loop_carried_variables_are_detected():
    (k,) = compile_text(FLASH_ATTN).kernels
    (loop,) = loops(k)
    # reassigned in the loop and bound before it: carried; k, v, s, mn, p, a are local
    assert set(loop.carried) == {"o", "mx", "l"}
    (k2,) = compile_text(MATMUL_SUM).kernels
    assert loops(k2)[0].carried == ("acc",)
    assert "carries acc" in printed(MATMUL_SUM)


def test_nested_loops_carry_outer_variables_through_both():
    (k,) = compile_text("""
        kernel k(X: f32[M, N, K]) -> (O: f32[M]) {
          tile BM = 4, BN = 8, BK = 8
          parallel i: BM of M {
            acc = zeros(f32[BM])
            for n: BN of N {
              t = zeros(f32[BM, BK])
              for k: BK of K {
                t += load(X[i, n * BN, k])
                acc += rowsum(t)
              }
            }
            store(O[i], acc)
          }
        }
    """).kernels
    outer, inner = loops(k)
    assert outer.carried == ("acc",)
    assert set(inner.carried) == {"t", "acc"}


def test_until_is_an_i32_expression():
    (k,) = compile_text("""
        kernel k(S: f32[M, T]) -> (O: f32[M]) {
          tile BM = 64, BN = 64
          parallel m: BM of M {
            acc = zeros(f32[BM])
            for n: BN of T until (m + 1) * BM {
              acc += rowsum(load(S[m, n]))
            }
            store(O[m], acc)
          }
        }
    """).kernels
    (loop,) = loops(k)
    assert loop.until is not None and loop.until.type == ty("i32[]")


# ---- dims: defaults, compile-time values, --shape -------------------------------------
def dim_infos(src: str, shapes=None) -> dict[str, T.DimInfo]:
    (k,) = compile_text(src, shapes).kernels
    return {d.name: d for d in k.dims}


def test_static_dims_come_from_dims_defaults():
    dims = dim_infos(FLASH_ATTN)
    assert dims["D"] == T.DimInfo("D", 128, 128)     # `:` and zeros(f32[BM, D]) need D
    assert dims["T"] == T.DimInfo("T", 4096, None)   # runtime, with its default
    assert dims["S"].static is None


def test_shape_overrides_the_static_default():
    dims = dim_infos(FLASH_ATTN, {"D": 64, "T": 100})
    assert dims["D"] == T.DimInfo("D", 128, 64)
    assert dims["T"] == T.DimInfo("T", 4096, None)   # runtime dims stay runtime
    assert "D=64 static" in printed(FLASH_ATTN, {"D": 64})


def test_shape_supplies_a_static_dim_without_default():
    src = """
        kernel k(X: f32[M, N]) -> (Y: f32[M, N]) {
          tile BM = 4
          parallel i: BM of M {
            store(Y[i, :], load(X[i, :]) * 2.0)
          }
        }
    """
    with pytest.raises(CompileError, match="dim N must be known at compile time"):
        compile_text(src)
    dims = dim_infos(src, {"N": 96})
    assert dims["N"] == T.DimInfo("N", None, 96)
    assert dims["M"] == T.DimInfo("M", None, None)


def test_shape_naming_an_unknown_dim_is_an_error():
    with pytest.raises(CompileError) as info:
        compile_text(MATMUL_SUM, {"Z": 4})
    (d,) = info.value.diagnostics
    assert "--shape gives Z" in d.message
    assert d.hint == "dims here: K, M, N"


def test_several_kernels_and_shape_of_any_of_them():
    program = compile_text(MATMUL_SUM + FLASH_ATTN, {"D": 64, "K": 256})
    assert [k.name for k in program.kernels] == ["matmul_sum", "flash_attn"]


# ---- the reference interpreter ---------------------------------------------------------
@pytest.fixture
def run(tmp_path: Path):
    """run(src, inputs, **kw) -> outputs: writes the kernel to a file and interprets it."""

    def go(src: str, inputs=None, **kw):
        path = tmp_path / "k.pt"
        path.write_text(textwrap.dedent(src))
        return driver.interpret(path, inputs or {}, **kw)

    return go


def test_out_of_bounds_loads_read_zero_or_pad(run):
    src = """
        kernel k(X: f32[M]) -> (S0: f32[1], S7: f32[1], Tiles: f32[M]) {
          tile BM = 4
          parallel i: BM of M {
            atomic_add(S0[0], sum(load(X[i]), axis=0))
            atomic_add(S7[0], sum(load(X[i], pad=7.0), axis=0))
            store(Tiles[i], load(X[i], pad=-inf))
          }
        }
    """
    x = np.arange(1, 6, dtype=np.float32)          # M = 5: the second tile has 3 pads
    out = run(src, {"X": x})
    assert out["S0"][0] == x.sum()
    assert out["S7"][0] == x.sum() + 3 * 7.0
    np.testing.assert_array_equal(out["Tiles"], x)  # the -inf pads fall outside and vanish


def test_out_of_bounds_loads_in_2d_and_with_whole_dims(run):
    src = """
        kernel k(X: f32[M, N]) -> (R: f32[M]) {
          dims N = 3
          tile BM = 4
          parallel i: BM of M {
            x = load(X[i, :], pad=100.0)     # rows past M read pad
            store(R[i], rowsum(x))
          }
        }
    """
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    np.testing.assert_array_equal(run(src, {"X": x})["R"], x.sum(axis=1))


def test_out_of_bounds_stores_are_dropped(run):
    src = """
        kernel k(X: f32[M, N]) -> (Y: f32[M, N]) {
          tile BM in [4, 2, 16], BN in [8, 3, 16]
          parallel i: BM of M, j: BN of N {
            store(Y[i, j], load(X[i, j]) + 1.0)
          }
        }
    """
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 11), dtype=np.float32)
    for tiles in ({}, {"BM": 2, "BN": 3}, {"BM": 16, "BN": 16}):
        y = run(src, {"X": x}, tiles=tiles)["Y"]
        assert y.shape == (5, 11)
        np.testing.assert_array_equal(y, x + np.float32(1.0))


def test_atomic_add_accumulates_across_tiles(run):
    src = """
        kernel matmul_sum(A: f32[M, K], B: f32[K, N]) -> (C: f32[M, N], S: f32[M]) {
          tile BM = 4, BN = 4, BK = 4
          parallel i: BM of M, j: BN of N {
            acc = zeros(f32[BM, BN])
            for k: BK of K {
              acc += load(A[i, k]) @ load(B[k, j])
            }
            store(C[i, j], acc)
            atomic_add(S[i], rowsum(acc))
          }
        }
    """
    a = np.arange(6 * 5, dtype=np.float32).reshape(6, 5) % 7
    b = np.arange(5 * 10, dtype=np.float32).reshape(5, 10) % 5
    out = run(src, {"A": a, "B": b})
    np.testing.assert_array_equal(out["C"], a @ b)           # small integers: exact
    np.testing.assert_array_equal(out["S"], (a @ b).sum(axis=1))  # 3 column tiles added


def test_atomic_add_from_every_task_into_one_element(run):
    src = """
        kernel count(X: i32[M, N]) -> (C: i32[1]) {
          tile BM = 2, BN = 2
          parallel i: BM of M, j: BN of N {
            atomic_add(C[0], sum(sum(load(X[i, j]), axis=1), axis=0))
          }
        }
    """
    x = np.ones((5, 7), dtype=np.int32)
    assert run(src, {"X": x})["C"][0] == 35


def test_until_bounds_the_loop(run):
    src = """
        kernel causal_rowsum(S: f32[M, T]) -> (R: f32[M]) {
          tile BM = 2, BN = 2
          parallel m: BM of M {
            acc = zeros(f32[BM])
            for n: BN of T until (m + 1) * BM {
              acc += rowsum(load(S[m, n]))
            }
            store(R[m], acc)
          }
        }
    """
    s = np.ones((6, 5), dtype=np.float32)
    r = run(src, {"S": s})["R"]
    # row tile m walks the column tiles n with n * BN < min(T, (m + 1) * BM)
    np.testing.assert_array_equal(r, [2, 2, 4, 4, 5, 5])


def test_until_past_the_end_stops_at_the_dim(run):
    src = """
        kernel k(S: f32[M, T]) -> (R: f32[M]) {
          tile BM = 2, BN = 2
          parallel m: BM of M {
            acc = zeros(f32[BM])
            for n: BN of T until 1000 {
              acc += rowsum(load(S[m, n]))
            }
            store(R[m], acc)
          }
        }
    """
    np.testing.assert_array_equal(run(src, {"S": np.ones((3, 5), np.float32)})["R"], [5, 5, 5])


@pytest.mark.parametrize("dtype, np_dtype", [("bf16", ml_dtypes.bfloat16), ("f16", np.float16)])
def test_half_precision_results_are_rounded_to_nearest_even(run, dtype, np_dtype):
    src = f"""
        kernel add(X: {dtype}[M], Y: {dtype}[M]) -> (Z: {dtype}[M], W: f32[M]) {{
          tile BM = 64
          parallel i: BM of M {{
            z = load(X[i]) + load(Y[i])
            store(Z[i], z)
            store(W[i], z)
          }}
        }}
    """
    rng = np.random.default_rng(1)
    x = rng.standard_normal(100, dtype=np.float32).astype(np_dtype)
    y = (rng.standard_normal(100, dtype=np.float32) * 1e-2).astype(np_dtype)
    out = run(src, {"X": x, "Y": y})
    exact = x.astype(np.float32) + y.astype(np.float32)   # exact in f32 for these inputs
    want = exact.astype(np_dtype)                           # one rounding, to nearest even
    assert out["Z"].dtype == np.dtype(np_dtype)
    np.testing.assert_array_equal(out["Z"].view(np.uint16), want.view(np.uint16))
    np.testing.assert_array_equal(out["W"], want.astype(np.float32))  # rounded before widening
    assert not np.array_equal(out["W"], exact)  # the rounding is visible in these values


def test_bf16_tie_rounds_to_even(run):
    src = """
        kernel add(X: bf16[M], Y: f32[M]) -> (Z: bf16[M]) {
          tile BM = 4
          parallel i: BM of M {
            store(Z[i], (load(X[i]) + load(Y[i])) as bf16)
          }
        }
    """
    # bf16 has 8 significant bits: near 1.0 its spacing is 2**-7. 1 + 2**-8 is a tie
    # between 1.0 (even) and 1 + 2**-7 (odd); 1 + 3 * 2**-8 ties up to 1 + 2**-6 (even).
    x = np.ones(2, dtype=ml_dtypes.bfloat16)
    y = np.array([2.0 ** -8, 3 * 2.0 ** -8], dtype=np.float32)
    z = run(src, {"X": x, "Y": y})["Z"].astype(np.float32)
    np.testing.assert_array_equal(z, [1.0, 1.0 + 2.0 ** -6])


def test_integer_division_floors(run):
    src = """
        kernel k(X: i32[M]) -> (Q: i32[M], R: i32[M], D: f32[M]) {
          tile BM = 8
          parallel i: BM of M {
            x = load(X[i])
            store(Q[i], x // 3)
            store(R[i], x % 3)
            store(D[i], x / 2)
          }
        }
    """
    x = np.array([-7, -6, -1, 0, 1, 5, 6, 7, 100], dtype=np.int32)
    out = run(src, {"X": x})
    np.testing.assert_array_equal(out["Q"], x // 3)   # floor: -7 // 3 == -3
    np.testing.assert_array_equal(out["R"], x % 3)    # the remainder has the divisor's sign
    assert out["Q"][0] == -3 and out["R"][0] == 2
    np.testing.assert_array_equal(out["D"], x.astype(np.float32) / 2)


def test_index_values(run):
    src = """
        kernel k(X: f32[B, M]) -> (I: i32[B, M], Bi: i32[B], Ti: i32[B, M]) {
          tile BM = 4
          parallel b of B, i: BM of M {
            store(I[b, i], index(i))
            store(Bi[b], index(b))
            store(Ti[b, i], i + 0 * index(i))
          }
        }
    """
    out = run(src, {"X": np.zeros((3, 10), np.float32)})
    np.testing.assert_array_equal(out["I"], np.tile(np.arange(10, dtype=np.int32), (3, 1)))
    np.testing.assert_array_equal(out["Bi"], [0, 1, 2])
    np.testing.assert_array_equal(out["Ti"], np.tile(np.arange(10) // 4, (3, 1)))


def test_scalar_point_loads(run):
    src = """
        kernel k(X: f32[B, L]) -> (Last: f32[B], Past: f32[B], Before: f32[B]) {
          parallel b of B {
            store(Last[b], load(X[b, L - 1]))
            store(Past[b], load(X[b, L], pad=-1.5))      # one past the edge: the pad
            store(Before[b], load(X[b, 0 - 1]))           # before the start: zero
          }
        }
    """
    x = np.arange(12, dtype=np.float32).reshape(3, 4) + 1
    out = run(src, {"X": x})
    np.testing.assert_array_equal(out["Last"], x[:, -1])
    np.testing.assert_array_equal(out["Past"], [-1.5] * 3)
    np.testing.assert_array_equal(out["Before"], [0.0] * 3)


def test_point_index_with_group_division(run):
    src = """
        kernel k(X: f32[G, N]) -> (Y: f32[H, N]) {
          dims N = 4
          parallel h of H {
            store(Y[h, :], load(X[h // (H // G), :]))
          }
        }
    """
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    y = run(src, {"X": x}, shapes={"H": 6})["Y"]
    np.testing.assert_array_equal(y, x[[0, 0, 0, 1, 1, 1]])


def test_flash_attention_matches_numpy(run):
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((1, 2, n, 16), dtype=np.float32).astype(ml_dtypes.bfloat16)
               for n in (70, 45, 45))
    out = run(FLASH_ATTN, {"Q": q, "K": k, "V": v}, shapes={"D": 16},
              tiles={"BM": 64, "BN": 64})["O"]
    qf, kf, vf = (a.astype(np.float32) for a in (q, k, v))
    s = qf @ np.swapaxes(kf, -1, -2) / np.sqrt(16)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    want = (p / p.sum(axis=-1, keepdims=True)) @ vf
    assert out.shape == (1, 2, 70, 16)
    np.testing.assert_allclose(out.astype(np.float32), want, atol=2e-2, rtol=2e-2)



@pytest.mark.parametrize("update", ["acc += a @ b", "acc = acc + a @ b", "acc = a @ b + acc"])
def test_an_assigned_accumulate_is_one_mma_accumulate(update):
    k = compile_text(f"""
        kernel f(A: f16[M, K], B: f16[K, N]) -> (C: f32[M, N], D: f32[M, N]) {{
          dims M = 64, N = 64, K = 64
          tile BM in [32], BN in [32], BK in [32]
          parallel i: BM of M, j: BN of N {{
            acc = zeros(f32[BM, BN])
            for k: BK of K {{
              a = load(A[i, k]); b = load(B[k, j])
              {update}
            }}
            store(C[i, j], acc)
            store(D[i, j], acc + load(A[i, :]) @ load(B[:, j]))
          }}
        }}
        """).kernels[0]
    (loop,) = [s for s in k.body[0].body if isinstance(s, T.Loop)]
    value = loop.body[-1].value
    assert isinstance(value, T.MmaAccumulate)
    assert value.acc == T.Var("acc", T.TileType("f32", ("BM", "BN")))
    assert (value.a.name, value.b.name) == ("a", "b")
    assert value.type == T.TileType("f32", ("BM", "BN"))
    assert isinstance(k.body[0].body[-1].value, T.Elementwise)   # only assignments accumulate
    a = (np.arange(64 * 64).reshape(64, 64) % 7).astype(np.float16)
    b = (np.arange(64 * 64).reshape(64, 64) % 5).astype(np.float16)
    out = run_kernel(k, {"A": a, "B": b})
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_array_equal(out["C"], want)
    np.testing.assert_array_equal(out["D"], 2 * want)


# ---- tile lines are optional ------------------------------------------------------------
NO_TILES = """
kernel g(A: f16[M, K], B: f16[K, N], X: f32[M, N]) -> (C: f16[M, N], R: f32[M]) {
  parallel i: BM of M, j: BN of N {
    acc = zeros(f32[BM, BN])
    for k: BK of K {
      acc += load(A[i, k]) @ load(B[k, j])
    }
    store(C[i, j], acc as f16)
  }
  parallel r: RB of M {
    s = zeros(f32[RB])
    for c: CB of N {
      s += rowsum(load(X[r, c]))
    }
    store(R[r], s)
  }
}
"""


def test_undeclared_tile_sizes_take_candidates_from_their_role(tmp_path):
    from ptc.sched.search import tile_candidates
    from ptc.devices import get_device

    path = tmp_path / "g.pt"
    path.write_text(NO_TILES)
    k = driver.check_file(path).kernels[0]
    tiles = {t.name: t for t in k.tiles}
    assert all(t.implicit for t in tiles.values())
    assert {n: (t.role, t.dim) for n, t in tiles.items()} == {
        "BM": ("m", "M"), "BN": ("n", "N"), "BK": ("k", "K"), "RB": ("", "M"), "CB": ("", "N")}
    assert tiles["BM"].choices[0] == 64 and tiles["BK"].choices == (32, 64)
    # narrowed for a device and a problem size: at most the power of two covering the dim
    sm80 = get_device("sm80")
    assert tile_candidates(tiles["BN"], sm80, {"N": 40}) == (64, 32)
    assert tile_candidates(tiles["BM"], sm80, {"M": 7}) == (32,)
    assert tile_candidates(tiles["RB"], sm80, {"M": 20}) == (16, 32, 8, 4)


@pytest.mark.cxx
def test_a_kernel_without_tile_lines_runs_plans_and_emulates(tmp_path):
    from ptc.render.emulate import build_emulated

    path = tmp_path / "g.pt"
    path.write_text(NO_TILES)
    shapes = {"M": 70, "N": 90, "K": 40}
    k = driver.check_file(path, shapes).kernels[0]
    rng = np.random.default_rng(0)
    a = rng.standard_normal((70, 40)).astype(np.float16)
    b = rng.standard_normal((40, 90)).astype(np.float16)
    x = rng.standard_normal((70, 90)).astype(np.float32)
    ref = run_kernel(k, {"A": a, "B": b, "X": x}, shapes=shapes)
    want = (a.astype(np.float32) @ b.astype(np.float32))
    assert np.abs(ref["C"].astype(np.float32) - want).max() < 0.1
    np.testing.assert_allclose(ref["R"], x.sum(axis=1), rtol=1e-5, atol=1e-4)
    for target in ("sm80", "sm90", "gfx90a", "gfx942"):
        assert all(r.best for r in driver.schedule_grids(k, target, shapes=shapes)), target
    source = driver.render(k, "sm80", shapes=shapes)[0]
    got = build_emulated(source)(k, {"A": a, "B": b, "X": x}, shapes)
    assert np.abs(got["C"].astype(np.float32) - want).max() < 0.1
    np.testing.assert_allclose(got["R"], x.sum(axis=1), rtol=1e-5, atol=1e-4)
