"""The op table (ptc.ops): complete for every op the checker can produce, and the one
source of each op's result dtype, NumPy function, C spelling and SFU flag."""
from __future__ import annotations

import numpy as np
import pytest

from ptc import ops
from ptc.render.cexpr import ExprRenderer
from ptc.sema import typed as T


def test_every_rule_is_known_and_names_are_unique_per_kind():
    assert all(o.rule in ops.RULES for o in ops.OPS)
    assert len(ops.ELEMENTWISE) + len(ops.REDUCTIONS) == len(ops.OPS)
    assert set(ops.REDUCTIONS) == {"sum", "max", "min"}


def test_the_language_operators():
    assert {s: o.name for s, o in ops.BINARY_OPERATORS.items()} == {
        "+": "add", "-": "sub", "*": "mul", "/": "div", "//": "floordiv", "%": "mod",
        "<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne",
        "&": "bitand", "|": "bitor", "^": "xor", "<<": "shl", ">>": "shr"}
    # `&` and `|` of two bools are the logic ops
    assert {s: o.name for s, o in ops.LOGIC_OPERATORS.items()} == {"&": "and", "|": "or"}
    assert ops.UNARY_FUNCTIONS == ("exp", "exp2", "log", "sqrt", "rsqrt", "tanh", "sigmoid",
                                   "erf", "abs")


@pytest.mark.parametrize("op, dtypes, result", [
    ("add", ("f16", "f16"), "f16"),
    ("div", ("i32", "i32"), "f32"),
    ("div", ("bf16", "bf16"), "bf16"),
    ("lt", ("f32", "f32"), "bool"),
    ("and", ("bool", "bool"), "bool"),
    ("exp", ("i32",), "f32"),
    ("exp", ("f16",), "f16"),
    ("abs", ("i32",), "i32"),
    ("where", ("bool", "bf16", "bf16"), "bf16"),
    ("mod", ("i32", "i32"), "i32"),
    ("bitand", ("i32", "i32"), "i32"),
    ("shr", ("i32", "i32"), "i32"),
    ("tanh", ("i32",), "f32"),
    ("erf", ("bf16",), "bf16"),
])
def test_result_dtypes(op, dtypes, result):
    assert ops.ELEMENTWISE[op].result_dtype(*dtypes) == result


@pytest.mark.parametrize("dtype, result", [("f16", "f32"), ("bf16", "f32"), ("f32", "f32"),
                                           ("i32", "i32")])
def test_sum_accumulates_halves_in_f32_and_max_keeps_the_dtype(dtype, result):
    assert ops.REDUCTIONS["sum"].result_dtype(dtype) == result
    assert ops.REDUCTIONS["max"].result_dtype(dtype) == dtype


def test_sfu_ops_are_the_transcendentals():
    assert {o.name for o in ops.OPS if o.sfu} == {"exp", "exp2", "log", "sqrt", "rsqrt",
                                                  "tanh", "sigmoid"}
    assert set(ops.SFU_OPS) == {o.name for o in ops.OPS if o.sfu}


def test_numpy_functions():
    x = np.array([1.0, 4.0], np.float32)
    assert np.allclose(ops.ELEMENTWISE["rsqrt"].numpy(x), [1.0, 0.5])
    assert ops.ELEMENTWISE["floordiv"].numpy(np.int32(-7), np.int32(2)) == -4


def test_the_cuda_renderer_spells_ops_from_the_table():
    r = ExprRenderer(lambda name, idx: name, lambda name: name, lambda e: e)
    f32 = T.TileType("f32")
    x = T.Var("x", f32)
    for name in ("exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "abs"):
        assert ops.ELEMENTWISE[name].c + "(" in r.render(T.Elementwise(name, (x,), f32), [])
    for name in ("add", "mul", "lt", "and"):
        e = T.Elementwise(name, (x, x), f32)
        assert f" {ops.ELEMENTWISE[name].c} " in r.render(e, [])
