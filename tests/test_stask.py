"""sTask-graph construction: tasks, kinds, fusion, edges with iteration distances, Propagate."""
from pathlib import Path

import pytest

from ptc.driver import check_file
from ptc.grammar import parse
from ptc.sema import check
from ptc.stask import build_graphs, print_graph, propagate, to_dot

ROOT = Path(__file__).resolve().parent.parent

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def graph(name, tiles=None):
    kernel = check_file(SAMPLES / f"{name}.pt").kernels[0]
    (g,) = build_graphs(kernel)
    return propagate(g, tiles or {})


def edges(g):
    return {(e.src, e.dst, e.value, e.distance) for e in g.edges}


def test_gemm_tasks_and_edges():
    g = graph("gemm", {"BM": 128, "BN": 128, "BK": 64})
    kinds = [(t.name, t.kind, t.region) for t in g.tasks]
    assert kinds == [("simt_acc", "simt", ""), ("load_A", "copy", "k"), ("load_B", "copy", "k"),
                     ("mma_acc", "mma", "k"), ("simt_C", "simt", ""), ("store_C", "copy", "")]
    assert ("mma_acc", "mma_acc", "acc", 1) in edges(g)        # the accumulator is carried
    assert ("simt_acc", "mma_acc", "acc", 0) in edges(g)       # ... from its initial value
    assert ("load_A", "mma_acc", "%A", 0) in edges(g)
    assert ("mma_acc", "simt_C", "acc", 0) in edges(g)
    mma = g.task("mma_acc")
    assert mma.shape == (128, 128)
    assert mma.work.mma_flops == 2 * 128 * 128 * 64
    assert mma.work.simt_ops == 0                              # the accumulate is the mma's
    assert g.task("load_A").work.bytes == 128 * 64 * 2
    assert g.task("store_C").work.bytes == 128 * 128 * 2


def test_flash_attention_fuses_the_softmax_into_one_simt_task():
    g = graph("flash_attn", {"BM": 128, "BN": 64})
    loop = [t for t in g.tasks if t.region == "n"]
    assert [(t.name, t.kind) for t in loop] == [
        ("load_K", "copy"), ("load_V", "copy"), ("mma_s", "mma"), ("simt_s", "simt"),
        ("mma_o", "mma")]
    softmax = g.task("simt_s")
    assert {"s", "mn", "p", "a", "l", "mx"} <= set(softmax.defines)
    assert softmax.work.sfu_ops == 128 * 64 + 128 + 1   # exp(s - mn), exp(mx - mn), rsqrt(D)
    e = edges(g)
    assert ("mma_o", "simt_s", "o", 1) in e                   # o is rescaled before the next mma
    assert ("simt_s", "simt_s", "mx", 1) in e
    assert ("load_K", "mma_s", "k", 0) in e and ("load_V", "mma_o", "v", 0) in e
    assert ("load_Q", "mma_s", "q", 0) in e                   # from outside the loop
    assert g.task("mma_s").work.mma_flops == 2 * 128 * 64 * 128


def test_fusion_never_moves_a_statement_above_what_it_reads(tmp_path):
    """`x`, `dy = load(dY) ..`, `r = f(x)`: r joins x (it reads x), then dy's group (they
    are adjacent); that join put dy at x's place, above the load of dY it reads, and left
    the load with no edge (issue 20: RMSNorm backward's dgamma had no plan)."""
    path = tmp_path / "d.pt"
    path.write_text("""
kernel d(X: f32[M, N], dY: f32[M, N]) -> (dG: f32[N]) {
  dims M = 64, N = 64
  tile BM = 16
  parallel i: BM of M {
    x = load(X[i, :]) * 1.0
    dy = load(dY[i, :]) * 1.0
    r = rsqrt(rowsum(x * x) / N + 1e-5)
    atomic_add(dG[:], sum(dy * x * r[:, None] + dy * 0.0, axis=0))
  }
}
""")   # dy read twice: a value of its own (read once, it would be read as its expression)
    (g,) = build_graphs(check_file(path).kernels[0])
    order = [t.name for t in g.tasks]
    for e in g.edges:
        assert order.index(e.src) < order.index(e.dst), e
    (dy,) = [t for t in g.tasks if "dy" in t.defines]
    assert ("load_dY", dy.name, "%dY", 0) in edges(g)


TRANSPOSED = """
kernel nt(A: f16[M, K], B: f16[N, K]) -> (C: f32[M, N]) {{
  dims M = 256, N = 256, K = 256
  tile BM in [64], BN in [64], BK in [32]
  parallel i: BM of M, j: BN of N {{
    acc = zeros(f32[BM, BN])
    for k: BK of K {{
      {body}
    }}
    store(C[i, j], acc)
  }}
}}
"""


def test_a_named_transposed_load_is_a_layout_as_the_inline_one_is():
    """`b = load(B[j, k]).T; acc += load(A[i, k]) @ b` gives the graph of the inline
    `acc += load(A[i, k]) @ load(B[j, k]).T`: the mma reads the loaded tile transposed. It
    was a CUDA-core transpose task of its own (samples/fp8_flash_attn's
    `v = load(Vt[..]).T`: no gfx942 plan fitted)."""
    def built(body):
        kernel = check(parse(TRANSPOSED.format(body=body), "nt.pt"), {}).kernels[0]
        (g,) = build_graphs(kernel)
        return g
    named = built("b = load(B[j, k]).T\n      acc += load(A[i, k]) @ b")
    inline = built("acc += load(A[i, k]) @ load(B[j, k]).T")
    # the same tasks and edges (the named load's task comes first)
    assert sorted(print_graph(named).splitlines()) == sorted(print_graph(inline).splitlines())
    assert [t.kind for t in named.tasks] == ["simt", "copy", "copy", "mma", "copy"]
    assert "transpose(%B)" in print_graph(named)
    # used twice, once elementwise: both uses read the one loaded tile
    both = built("b = load(B[j, k]).T\n      acc += load(A[i, k]) @ b\n"
                 "      acc += load(A[i, k]) @ (b * 2.0)")
    assert [t.name for t in both.tasks if t.op == "load"] == ["load_B", "load_A", "load_A2"]
    assert "mul(transpose(%B), 2.0:f16)" in print_graph(both)


def graph_text(template: str, body: str) -> str:
    """The printed graph of the one grid of `template` with `body` in its loop."""
    (g,) = build_graphs(check(parse(template.format(body=body), "k.pt"), {}).kernels[0])
    return print_graph(g)


def test_a_second_name_for_a_loaded_tile_is_no_task():
    """`a = load(A[i, k]); a2 = a; acc += a2 @ b` gives the graph of `acc += a @ b`: the
    product reads the one shared tile. `a2 = a` was a CUDA-core task that read the tile
    into registers, and the product spilled it back to shared memory (fuzz seed 102127:
    32 KiB more, and no plan fitted gfx90a or gfx942). An alias of the transposed load too.
    """
    direct = graph_text(TRANSPOSED, "a = load(A[i, k])\n      b = load(B[j, k]).T\n"
                        "      acc += a @ b")
    renamed = graph_text(TRANSPOSED, "a = load(A[i, k])\n      a2 = a\n      a3 = a2\n"
                         "      b = load(B[j, k]).T\n      bb = b\n      acc += a3 @ bb")
    assert renamed == direct
    assert "simt" not in direct.split("mma")[0].split("for k")[1]


DEQUANT = """
kernel dq(A: f16[M, K], W: i32[K, N], S: f16[N]) -> (C: f32[M, N]) {{
  dims M = 256, N = 256, K = 256
  tile BM in [64], BN in [64], BK in [32]
  parallel i: BM of M, j: BN of N {{
    acc = zeros(f32[BM, BN])
    for k: BK of K {{
      w = load(W[k, j])
      {body}
    }}
    store(C[i, j], acc)
  }}
}}
"""


def test_a_name_read_once_is_read_as_its_expression():
    """Named element-wise work read once, whole, in an operand of a later product of its
    block gives the graph of the inline expression: one value, not a tile of its own live
    beside the next (named dequantization planes took ptxas to 255 registers and a spill on
    sm80; docs/low-precision.md). Chains of such names too."""
    inline = graph_text(DEQUANT, "acc += load(A[i, k]) @ "
                                 "((((w >> 4) & 15) as f16) * load(S[j])[None, :])")
    named = graph_text(DEQUANT, "q = (w >> 4) & 15\n"
                                "      h = (q as f16) * load(S[j])[None, :]\n"
                                "      acc += load(A[i, k]) @ h")
    assert named == inline
    assert "%h" not in named and " q " not in named


@pytest.mark.parametrize("body,kept", [
    # read twice: computed once, as a value
    ("h = (w & 15) as f16\n      acc += load(A[i, k]) @ h\n      acc += load(A[i, k]) @ h", "h"),
    # broadcast where it is read: computed once per row, as a value
    ("r = load(S[j]) * 2.0\n      acc += load(A[i, k]) @ ((w as f16) * r[None, :])", "r"),
    # what it reads is assigned in between
    ("v = w & 15\n      h = v as f16\n      v = w >> 4\n"
     "      acc += load(A[i, k]) @ (h + (v as f16))", "h"),
    # read as the accumulator's addend, not an operand
    ("h = acc * 0.5\n      acc = h + load(A[i, k]) @ (w as f16)", "h"),
])
def test_a_name_that_cannot_be_read_as_its_expression_stays_a_value(body, kept):
    text = graph_text(DEQUANT, body)
    assert f"{kept} =" in text, text


def test_nested_loops_keep_their_regions():
    g = graph("gemm_chain")
    assert {r.name for r in g.loop_regions()} == {"n", "k"}
    assert [r.name for r in g.innermost_loops()] == ["k"]
    assert g.task("mma_t").region == "k" and g.task("mma_acc").region == "n"
    assert ("mma_t", "mma_t", "t", 1) in edges(g)
    assert ("simt_t", "mma_t", "t", 0) in edges(g)


def test_memory_bound_kernel_is_copy_and_simt_only():
    g = graph("rmsnorm")
    assert {t.kind for t in g.tasks} == {"copy", "simt"}
    assert not g.loop_regions()


def test_propagate_rejects_unknown_tiles():
    from ptc.diagnostics import CompileError
    kernel = check_file(SAMPLES / "gemm.pt").kernels[0]
    (g,) = build_graphs(kernel)
    with pytest.raises(CompileError, match="no tile size BX"):
        propagate(g, {"BX": 64})


@pytest.mark.parametrize("name", sorted(p.stem for p in SAMPLES.glob("*.pt")))
def test_every_sample_builds_and_prints(name):
    g = graph(name)
    text = print_graph(g)
    assert text.startswith(f"stask-graph {name}")
    for t in g.tasks:
        assert f"{t.name}: {t.kind}" in text
    dot = to_dot(g)
    assert dot.startswith("digraph") and dot.rstrip().endswith("}")
    assert dot.count("->") == len(g.edges)
    names = [t.name for t in g.tasks]
    assert len(names) == len(set(names))
    # every value a task uses is produced by some edge into it, or is carried in from outside
    for t in g.tasks:
        incoming = {e.value for e in g.edges if e.dst == t.name}
        own = set()
        for s in t.stmts:
            own.add(getattr(s, "name", None))
        for v in t.uses:
            assert v in incoming or v in own, f"{t.name} uses {v} with no edge"


def test_every_mma_task_holds_one_mma_accumulate():
    from ptc.sema import typed as T
    for name in ("gemm", "flash_attn", "gemm_chain", "mamba2_chunk_state"):
        for t in graph(name).tasks:
            values = [s.value for s in t.stmts if isinstance(s, T.Let)]
            assert (t.kind == "mma") == any(isinstance(v, T.MmaAccumulate) for v in values)
            assert not any(isinstance(e, T.MatMul) for v in values for e in _walk(v))
    g = graph("flash_attn")
    # operands are lifted before the accumulator: %o = p as bf16, %o2 = o * a[:, None]
    assert g.task("mma_o").mma.acc == T.Var("%o2", T.TileType("f32", ("BM", "D")))
    assert g.task("mma_o").mma.a == T.Var("%o", T.TileType("bf16", ("BM", "BN")))
    assert g.task("mma_s").mma.acc is None                    # s = q @ k.T: no accumulator
    assert g.task("mma_s").mma_dtype == "bf16"


def _walk(e):
    from ptc.sema import typed as T
    yield e
    for c in T.children(e):
        yield from _walk(c)


def test_a_name_read_once_by_a_store_stays_a_value():
    """Only operands of products read names as their expressions: gelu's `u`, read once
    by its store, read there as its expression, made ptxas spill on sm80
    (tests/kernels/gemm_bias_gelu.pt)."""
    (g,) = build_graphs(check(parse("""
kernel g(X: f32[M, N]) -> (C: f32[M, N]) {
  dims M = 64, N = 64
  tile BM = 16
  parallel i: BM of M {
    x = load(X[i, :])
    u = 0.79 * (x + 0.044 * x * x * x)
    store(C[i, :], x / (1.0 + exp(-2.0 * u)))
  }
}""", "g.pt"), {}).kernels[0])
    assert "u = " in print_graph(g), print_graph(g)


def test_the_named_w4a16_renders_the_samples_kernel():
    """The W4A16 sample with each plane's dequantization named (`q3 = ...; acc += a @ q3`),
    as a Triton user writes it, renders the sample's kernel.cu byte for byte."""
    from ptc import driver

    sample = (ROOT / "samples" / "w4a16_gemm.pt").read_text()
    head, loop = sample.split("      w = load(W[k, j])")
    planes = "".join(
        f"      q{p} = ((({'w' if p == 0 else f'(w >> {4 * p})'} & 15) - "
        f"(load(Z[{p}, g, j]) as i32)[None, :]) as f16) * load(S[{p}, g, j])[None, :]\n"
        f"      acc += load(A[i, {p}, k]) @ q{p}\n" for p in range(8))
    tail = loop[loop.index("    }\n    store"):]
    named = head + "      w = load(W[k, j])\n      g = k * BK // 128\n" + planes + tail

    def source(text: str) -> str:
        kernel = check(parse(text, "w4a16_gemm.pt"), {}).kernels[0]
        return driver.render(kernel, "sm80")[0]
    assert named != sample and "q7 = " in named
    assert source(named) == source(sample)
