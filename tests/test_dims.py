"""Binding dim sizes from array shapes (ptc.dims): the one binder that the interpreter,
the runtime's call binding, `ptc run --inputs` and the driver share."""
from __future__ import annotations

import pytest

from ptc.dims import DimBinder, DimError
from ptc.sema.typed import DimInfo, TensorParam

A = TensorParam("A", "f16", ("M", "K"), False)
B = TensorParam("B", "f16", ("K", 4), False)
DIMS = (DimInfo("M", None, None), DimInfo("K", 64, None))


def test_sizes_come_from_shapes_then_defaults():
    b = DimBinder()
    b.bind(A, (8, 16))
    b.bind(B, (16, 4))
    assert b.complete(DIMS) == {"M": 8, "K": 16}
    assert DimBinder().complete(DIMS, fallback={"M": 3}) == {"M": 3, "K": 64}


@pytest.mark.parametrize("shape, message", [
    ((8,), r"input A \(A: f16\[M, K\]\) has 2 dims, but the array given has shape \(8,\) \(1 dim\)"),
    ((8, 32), "so K = 32, but K = 16 from --shape"),
])
def test_shape_errors_name_the_parameter_and_the_source(shape, message):
    b = DimBinder()
    b.give({"K": 16}, "--shape")
    with pytest.raises(DimError, match=message):
        b.bind(A, shape)


def test_literal_extents_and_compile_time_sizes_are_checked():
    with pytest.raises(DimError, match="needs 4 along axis 1"):
        DimBinder().bind(B, (16, 5))
    b = DimBinder()
    b.bind(A, (8, 16))
    with pytest.raises(DimError, match=r"fixed to 32 at compile time, but this call has K = 16 \(from A\)"):
        b.complete((DimInfo("K", None, 32),))
    with pytest.raises(DimError, match="size of dim M is unknown") as info:
        DimBinder().complete(DIMS, unknown_hint=lambda d: f"pass {d}")
    assert info.value.hint == "pass M"
    b = DimBinder()
    b.give({"M": 0}, "--shape")
    with pytest.raises(DimError, match=r"dim M must be positive, not 0 \(from --shape\)"):
        b.complete(DIMS)


def test_lenient_binding_skips_what_does_not_fit():
    b = DimBinder()
    b.bind(("A", ("M", "K")), (8, 16), strict=False)
    b.bind(("B", ("K", 4)), (17, 5), strict=False)     # K disagrees, 4 is not 5: skipped
    b.bind(("C", ("N",)), (1, 2), strict=False)        # wrong rank: skipped
    assert b.sizes == {"M": 8, "K": 16}
