"""Exponentials in base 2 (ptc.lower.arith) and what the cost model counts for them
(ptc.lower.costs): softmax's exp(x - m) is one fused multiply-add and the SFU's 2^x."""
import numpy as np

from ptc.lower.arith import LOG2E, base2_exponentials
from ptc.lower.costs import expression_counts
from ptc.sema import typed as T

F32 = T.TileType("f32", (64, 64))
X = T.Var("x", F32)
M = T.Expand(T.Var("m", T.TileType("f32", (64,))), (1,), T.TileType("f32", (64, 1)))


def softmax_numerator(dtype: str = "f32") -> T.TExpr:
    t = T.TileType(dtype, (64, 64))
    return T.Elementwise("exp", (T.Elementwise("sub", (X, M), t),), t)


def evaluate(e: T.TExpr, env: dict) -> np.ndarray:
    if isinstance(e, T.Var):
        return env[e.name]
    if isinstance(e, T.Const):
        return np.float64(e.value)
    if isinstance(e, T.Expand):
        return np.expand_dims(evaluate(e.arg, env), e.axes)
    args = [evaluate(a, env) for a in e.args]
    return {"exp": np.exp, "exp2": np.exp2, "sub": np.subtract, "mul": np.multiply}[e.op](*args)


def test_exp_of_a_difference_becomes_exp2_of_scaled_terms_with_the_same_value():
    e = base2_exponentials(softmax_numerator())
    assert e.op == "exp2"
    diff = e.args[0]
    assert diff.op == "sub"
    x_term, m_term = diff.args
    assert x_term.op == "mul" and x_term.args[1].value == LOG2E
    assert isinstance(m_term, T.Expand)           # the row's product, broadcast
    assert m_term.arg.op == "mul"
    rng = np.random.default_rng(0)
    env = {"x": rng.standard_normal((64, 64)) * 4, "m": rng.standard_normal(64) * 4}
    np.testing.assert_allclose(evaluate(e, env), evaluate(softmax_numerator(), env),
                               rtol=1e-12)


def test_other_exponentials_and_16_bit_ones_are_left_as_written():
    plain = T.Elementwise("exp", (X,), F32)
    assert base2_exponentials(plain) == plain
    half = softmax_numerator("f16")
    assert base2_exponentials(half) == half


def test_the_rewrite_saves_an_instruction_per_value_in_the_cost_model():
    # before: subtract, multiply by log2 e, MUFU; after: one FFMA, MUFU (m * log2 e per row)
    assert expression_counts(softmax_numerator(), {}) == (3, 1, 0)
    assert expression_counts(base2_exponentials(softmax_numerator()), {}) == (2, 1, 0)


def test_a_product_that_is_added_is_one_fused_multiply_add():
    fma = T.Elementwise("add", (T.Elementwise("mul", (X, X), F32), X), F32)
    assert expression_counts(fma, {}) == (1, 0, 0)
    two = T.Elementwise("add", (T.Elementwise("mul", (X, X), F32),
                                T.Elementwise("mul", (X, X), F32)), F32)
    assert expression_counts(two, {}) == (2, 0, 0)      # one product fuses, one does not
