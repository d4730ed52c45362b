"""Fuzzing the front end: mutated samples and random bytes must give a result or a
`CompileError` -- never another exception -- and quickly.

The check stage is the one `ptc check` runs (`ptc.cli.check_source`), after decoding the
bytes as `ptc.driver.read_source` does. Every input that parses must also print back
(`ptc.grammar.printer`) to the same AST, and every diagnostic must render.
"""
from __future__ import annotations

import io
import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ptc.diagnostics import CompileError, format_plain
from ptc.grammar import decode_source, parse
from ptc.grammar.printer import print_module
from ptc.report import render
from test_ast_printer import strip

try:  # the check stage; until sema lands, the parse stage alone must hold
    import ptc.sema  # noqa: F401
except ModuleNotFoundError:  # pragma: no cover - only while ptc.sema is missing
    def check_source(text, filename, shapes=None):
        return parse(text, filename)
else:
    from ptc.cli import check_source

ROOT = Path(__file__).resolve().parent.parent

# Two programs of docs/language.md, so that the corpus is never empty.
INLINE = [
    """\
# C = A @ B and the row sums of C, in one kernel
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
""",
    """\
kernel flash_attn(Q: bf16[B, H, S, D], K: bf16[B, H, T, D], V: bf16[B, H, T, D])
    -> (O: bf16[B, H, S, D]) {
  dims D = 64
  tile BM in [64, 128], BN in [64, 32]
  parallel b of B, h of H, m: BM of S {
    q = load(Q[b, h, m, :])
    o = zeros(f32[BM, D]); mx = full(f32[BM], -inf); l = zeros(f32[BM])
    for n: BN of T until (m + 1) * BM {
      k = load(K[b, h, n, :]); v = load(V[b, h, n, :])
      s = (q @ k.T) * rsqrt(D)
      s = where(index(n)[None, :] < T, s, -inf)
      mn = max(mx, rowmax(s)); p = exp(s - mn[:, None]); a = exp(mx - mn)
      l = l * a + rowsum(p)
      o = o * a[:, None] + (p as bf16) @ v
      mx = mn
    }
    store(O[b, h, m, :], (o / l[:, None]) as bf16)
  }
}
""",
]
CORPUS = [p.read_text() for p in sorted(ROOT.glob("samples/*.pt"))] + INLINE

TOKEN = re.compile(r"[A-Za-z_][A-Za-z_0-9]*|[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?"
                   r"|//|[-+*/]=|[<>=!]=|->|\s+|.", re.S)
VOCABULARY = sorted({t for src in CORPUS for t in TOKEN.findall(src) if not t.isspace()} | {
    "kernel", "dims", "tile", "parallel", "for", "until", "of", "in", "divides", "as", "inf",
    "None",
    "(", ")", "[", "]", "{", "}", ",", ";", ":", "=", "->", "+=", "-", "!", "&", "|", "@",
    "//", "%", "<=", "==", ".", ".T", "0", "1", "-1", "1e-5", "0.5", "99999999999999999999",
    "\n", "\t", "\r\n", " ", "#", "'", '"', "\\", "\x00", "\x0c", "\u00e9", "\U0001d538",
    "\u200b", "\ufeff", "pad=", "axis=", "f16", "bf16", "f32", "i32", "bool", "f8e4m3",
})

SETTINGS = settings(max_examples=300, deadline=2000,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def front_end(data: bytes, filename: str = "fuzz.pt") -> None:
    """Decode, check, print: success or CompileError (then render it), nothing else."""
    try:
        text = decode_source(data, filename)
    except CompileError as exc:
        _render(exc, data.decode("utf-8", errors="replace"), filename)
        return
    try:
        check_source(text, filename, {})
    except CompileError as exc:
        _render(exc, text, filename)
    try:
        module = parse(text, filename)
    except CompileError:
        return
    printed = print_module(module)
    again = parse(printed, filename)
    assert strip(again) == strip(module), printed
    assert print_module(again) == printed


def _render(exc: CompileError, source: str, filename: str) -> None:
    assert exc.diagnostics
    for diag in exc.diagnostics:
        assert diag.message
        plain = io.StringIO()
        render(diag, filename, source, file=plain, color=False)
        assert plain.getvalue() == format_plain(diag, filename, source) + "\n"
        render(diag, filename, source, file=io.StringIO(), color=True)


# ---- mutations -----------------------------------------------------------------------
@st.composite
def mutated(draw) -> bytes:
    src = draw(st.sampled_from(CORPUS))
    tokens = TOKEN.findall(src)
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["insert", "delete", "swap", "replace", "dup_line",
                                     "drop_line", "truncate"]))
        if not tokens:
            tokens = [""]
        i = draw(st.integers(0, len(tokens) - 1))
        if kind == "insert":
            tokens.insert(i, draw(st.sampled_from(VOCABULARY)))
        elif kind == "delete":
            del tokens[i]
        elif kind == "swap":
            j = draw(st.integers(0, len(tokens) - 1))
            tokens[i], tokens[j] = tokens[j], tokens[i]
        elif kind == "replace":
            tokens[i] = draw(st.sampled_from(VOCABULARY))
        elif kind in ("dup_line", "drop_line"):
            lines = "".join(tokens).split("\n")
            k = draw(st.integers(0, len(lines) - 1))
            if kind == "dup_line":
                lines.insert(k, lines[k])
            else:
                del lines[k]
            tokens = TOKEN.findall("\n".join(lines))
        else:
            tokens = tokens[:i]
    data = bytearray("".join(tokens).encode("utf-8"))
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):  # raw bytes: insert, overwrite
        pos = draw(st.integers(0, len(data)))
        byte = draw(st.one_of(st.integers(0, 127), st.integers(0, 255)))
        if draw(st.booleans()) or pos == len(data):
            data.insert(pos, byte)
        else:
            data[pos] = byte
    return bytes(data)


def test_corpus_is_real():
    """The mutations start from real programs that pass the check stage."""
    assert len(CORPUS) >= 2
    for src in CORPUS:
        check_source(src, "corpus.pt", {})


@SETTINGS
@given(mutated())
def test_mutated_programs(data):
    front_end(data)


@SETTINGS
@given(st.binary(max_size=4000))
def test_random_bytes(data):
    front_end(data)


@SETTINGS
@given(st.lists(st.sampled_from(VOCABULARY), max_size=200))
def test_random_token_soup(tokens):
    front_end(" ".join(tokens).encode("utf-8"))
