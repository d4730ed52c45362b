"""The canonical .pt printer: parse(print(parse(src))) == parse(src) (spans aside), and
print is idempotent -- on hand-written programs that use every construct of the grammar
and on hypothesis-generated expression trees."""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ptc import ast
from ptc.diagnostics import NOWHERE, CompileError, Span
from ptc.grammar import parse
from ptc.grammar.printer import print_expr, print_module

SAMPLES = sorted(Path(__file__).resolve().parent.parent.glob("samples/*.pt"))


def strip(node):
    """A node as nested tuples without spans (or the module's filename and source)."""
    if dataclasses.is_dataclass(node) and not isinstance(node, Span):
        fields = [(f.name, strip(getattr(node, f.name))) for f in dataclasses.fields(node)
                  if not f.name.endswith("span") and f.name not in ("filename", "source")]
        return (type(node).__name__, tuple(fields))
    if isinstance(node, (tuple, list)):
        return tuple(strip(x) for x in node)
    return node


def roundtrip(src: str) -> str:
    """Check both properties on `src`; returns the canonical text."""
    first = parse(src, "first.pt")
    text = print_module(first)
    second = parse(text, "second.pt")
    assert strip(second) == strip(first), text
    assert print_module(second) == text
    return text


# ---- hand-written programs -----------------------------------------------------------
MATMUL_SUM = """\
# C = A @ B, and the row sums of C, in one kernel
kernel matmul_sum(A: f16[M, K], B: f16[K, N]) -> (C: f16[M, N], S: f32[M]) {
  tile BM in [64, 128, 256], BN in [64, 128, 256], BK in [32, 64]   # candidates
  parallel i: BM of M, j: BN of N {
    acc = zeros(f32[BM, BN])
    for k: BK of K {                         # a tile loop
      acc += load(A[i, k]) @ load(B[k, j])
    }
    store(C[i, j], acc as f16)
    atomic_add(S[i], rowsum(acc))
  }
}
"""

FLASH_ATTN = """\
kernel flash_attn(Q: bf16[B, H, S, D], K: bf16[B, H, T, D], V: bf16[B, H, T, D])
    -> (O: bf16[B, H, S, D]) {
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
"""

# Every construct: scalar params, literal dims, trailing commas, `dims`, fixed and listed
# tiles, literal tile sizes, `until`, all augmented assignments, every operator, casts,
# subscripts with `:`/None/points, attributes, keywords, `;`, comments, multi-line
# argument lists, `{` and `->` on their own lines, empty bodies and parameter lists.
EVERYTHING = """\
kernel everything(A: f16[M, 4], eps: f32, W: bf16[N,],)
  -> (Y: f32[M, N], Z: i32[M])
{
  dims M = 4096, N = 128
  tile BM in [128, 64,], BK = 32
  tile BN in [16]
  parallel i: BM of M, j: 64 of N, c of M {
    ; x = load(A[i, :], pad=-1.5) as f32 ;; y = -x; z = !(x < 0) & (x >= 1) | x != 2
    for k: BK of N until N - 1 {
      x += 1; x -= 2.0; x *= 1e-5; x /= 3
    }
    w = (x + y) * (x - y) / 2 // 3 % 4 @ z.T
    u = x - (y - z) - -1 - -inf + (-2) * -x
    v = ((a < b) == (c > d)) <= (e != f)
    t = a | (b | c) & (d & e)
    r = (-1) as f16 as f32
    q = -(x as f16) + (-x) as f16
    p = (1).T + (2)[0] + 0.5.T + x[0][1].T[2] + f(g(1), h=2)[None, :, i]
    e = (x + 1)[i] + (x + 1).T + (-x).T + (x as f32).T
    n = sum(
      x,
      axis=1,
    )
    store(Y[i, j], n as f32)
    atomic_add(Z[i], index(i))
    mean(x)
    for k: 16 of N {}
  }
}

kernel empty() -> () {}
"""


@pytest.mark.parametrize("src", [MATMUL_SUM, FLASH_ATTN, EVERYTHING],
                         ids=["matmul_sum", "flash_attn", "everything"])
def test_roundtrip_hand_written(src):
    roundtrip(src)


@pytest.mark.parametrize("path", SAMPLES, ids=[p.name for p in SAMPLES])
def test_roundtrip_samples(path):
    roundtrip(path.read_text())


def test_samples_exist():
    assert SAMPLES, "samples/*.pt is empty: the sample round trips test nothing"


def test_canonical_form():
    src = """\
# a comment
kernel  k(A:f16[M,K] ,s:f32)->(C:f16[M,K]){ dims M=8
tile BM in [64,32] , BK in[16]
parallel i:BM of M,j:BK of K{acc=zeros(f32[BM,BK]);for k:BK of K until(i+1)*BM{
acc+=((load(A[i,j])))}
store(C[i,j],(acc*-2-(-1.0))as f16)}}
kernel e()->(){}
"""
    assert print_module(parse(src)) == """\
kernel k(A: f16[M, K], s: f32) -> (C: f16[M, K]) {
  dims M = 8
  tile BM in [64, 32], BK = 16
  parallel i: BM of M, j: BK of K {
    acc = zeros(f32[BM, BK])
    for k: BK of K until (i + 1) * BM {
      acc += load(A[i, j])
    }
    store(C[i, j], (acc * -2 - -1.0) as f16)
  }
}

kernel e() -> () {}
"""


def test_empty_module_prints_nothing():
    assert print_module(parse("")) == ""
    assert print_module(parse("# only a comment\n\n")) == ""


@pytest.mark.parametrize("src, expected", [
    ("-x as f16", "-x as f16"),                  # `as` binds tighter than unary minus
    ("(-x) as f16", "(-x) as f16"),
    ("-(x as f16)", "-x as f16"),
    ("(-1) as f16", "(-1) as f16"),              # a folded negative literal is unary-level
    ("-(1)", "-1"),
    ("--1", "1"),                                # both minuses fold into the literal
    ("- -x", "--x"),
    ("-inf", "-inf"),
    ("(a + b) as f32", "(a + b) as f32"),
    ("a + b as f32", "a + b as f32"),
    ("a - (b - c)", "a - (b - c)"),
    ("(a - b) - c", "a - b - c"),
    ("a / (b * c)", "a / (b * c)"),
    ("(a < b) < c", "(a < b) < c"),              # comparisons do not chain
    ("a < (b < c)", "a < (b < c)"),
    ("(a & b) & c", "a & b & c"),
    ("a & (b & c)", "a & (b & c)"),
    ("a | b & c", "a | b & c"),
    ("(a | b) & c", "(a | b) & c"),
    ("!(a & b)", "!(a & b)"),
    # the bit operators, loosest first: | ^ & (comparisons) << >> (then + -), as in C
    ("a | b ^ c & d", "a | b ^ c & d"),
    ("((a | b) ^ c) & d", "((a | b) ^ c) & d"),
    ("a ^ (b | c)", "a ^ (b | c)"),
    ("(a ^ b) ^ c", "a ^ b ^ c"),
    ("x & 1 == 0", "x & 1 == 0"),               # x & (1 == 0): comparisons bind tighter
    ("(x & 1) == 0", "(x & 1) == 0"),
    ("a < b << c", "a < b << c"),
    ("(a < b) << c", "(a < b) << c"),
    ("x << 1 + 2", "x << 1 + 2"),               # x << (1 + 2)
    ("(x << 1) + 2", "(x << 1) + 2"),
    ("(a << b) >> c", "a << b >> c"),           # left-associative
    ("a << (b >> c)", "a << (b >> c)"),
    ("x >> -1", "x >> -1"),
    ("a<<b<=c>>d", "a << b <= c >> d"),         # `<<` lexes as one shift, `<=` as one compare
    ("(1).T", "(1).T"),                          # `1.T` would lex as the number `1.`
    ("(1)[0]", "1[0]"),
    ("1e-05 + 2.5E+20 + 1.0 + .5", "1e-5 + 2.5e20 + 1.0 + 0.5"),
    ("1e999", "inf"),
    ("f(b=1, a)", "f(a, b=1)"),                  # keywords print after positionals
])
def test_parentheses_and_literals(src, expected):
    text = print_expr(_parse_expr(src))
    assert text == expected
    assert strip(_parse_expr(text)) == strip(_parse_expr(src))


# ---- generated expression trees ------------------------------------------------------
RESERVED = {"kernel", "dims", "tile", "parallel", "for", "until", "of", "in", "divides", "as",
            "inf", "None"}
BINARY_OPS = ["+", "-", "*", "/", "//", "%", "@", "<", "<=", ">", ">=", "==", "!=", "&", "|",
              "^", "<<", ">>"]

names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,5}", fullmatch=True).filter(
    lambda s: s not in RESERVED)
ints = st.integers(min_value=0, max_value=10**12)
floats = st.floats(min_value=0, allow_nan=False, allow_infinity=True)


def _leaf():
    return st.one_of(
        st.builds(ast.IntLit, ints, st.just(NOWHERE)),
        st.builds(ast.FloatLit, floats, st.just(NOWHERE)),
        st.builds(ast.Name, names, st.just(NOWHERE)),
    )


def _item(children):
    return st.one_of(children, st.just(ast.Full(NOWHERE)), st.just(ast.NewAxis(NOWHERE)))


def _extend(children):
    return st.one_of(
        st.builds(lambda op, a, b: ast.Binary(op, a, b, NOWHERE, NOWHERE),
                  st.sampled_from(BINARY_OPS), children, children),
        st.builds(lambda op, a: _fold(ast.Unary(op, a, NOWHERE)), st.sampled_from("-!"),
                  children),
        st.builds(lambda a, t: ast.Cast(a, t, NOWHERE, NOWHERE), children,
                  st.sampled_from(["f16", "bf16", "f32", "i32", "i8", "u8", "bool"])),
        st.builds(lambda a, items: ast.Subscript(a, tuple(items), NOWHERE), children,
                  st.lists(_item(children), min_size=1, max_size=3)),
        st.builds(lambda a, n: ast.Attribute(a, n, NOWHERE), children, names),
        st.builds(lambda f, args, kws: ast.Call(f, tuple(args), tuple(
            ast.Keyword(k, v, NOWHERE) for k, v in kws), NOWHERE, NOWHERE),
            names, st.lists(children, max_size=3),
            st.lists(st.tuples(names, children), max_size=2)),
    )


def _fold(node):
    """What the parser makes of `-literal`: the negative literal itself."""
    if (isinstance(node, ast.Unary) and node.op == "-"
            and isinstance(node.operand, (ast.IntLit, ast.FloatLit))):
        return type(node.operand)(-node.operand.value, NOWHERE)
    return node


exprs = st.recursive(_leaf(), _extend, max_leaves=25)


def _parse_expr(text: str):
    module = parse(f"kernel k() -> () {{\n  x = {text}\n}}\n")
    return module.kernels[0].body[0].value


@settings(max_examples=400, deadline=None)
@given(exprs)
def test_generated_expressions_roundtrip(e):
    text = print_expr(e)
    back = _parse_expr(text)
    assert strip(back) == strip(e), text
    assert print_expr(back) == text


@settings(max_examples=100, deadline=None)
@given(st.lists(exprs, min_size=1, max_size=4))
def test_generated_statements_roundtrip(values):
    body = "\n".join(f"  v{n} = {print_expr(v)}" for n, v in enumerate(values))
    body += "\n  " + print_expr(values[0])  # as an expression statement, too
    roundtrip(f"kernel k(A: f32[M]) -> () {{\n{body}\n}}\n")


def test_float_formatting_is_exact():
    for value in [0.1, 1 / 3, 1e-300, 5e-324, 1.7976931348623157e308, 123456789.0, 1e16]:
        text = print_expr(ast.FloatLit(value, NOWHERE))
        back = _parse_expr(text)
        assert isinstance(back, ast.FloatLit) and back.value == value, text
    assert math.isinf(_parse_expr("inf").value)


def test_printer_rejects_nan():
    with pytest.raises(ValueError):
        print_expr(ast.FloatLit(math.nan, NOWHERE))


def test_unparseable_input_is_not_printed():
    with pytest.raises(CompileError):
        parse("kernel k( -> () {}")
