"""The torch baselines benchmarks/run.py times ptc against (ptc.runtime.baselines) compute
what the samples compute: run.py checks every ptc output against the torch baseline's, so
a baseline of another formula would fail ptc on the GPU (or pass a wrong kernel). Checked
here on CPU tensors (torch's CPU kernels of the same operators)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import formulas as F  # noqa: E402
from ptc.runtime.baselines import BASELINES, to_torch  # noqa: E402

pytestmark = pytest.mark.torch


@pytest.mark.parametrize("sample", ["fp8_gemm", "w8a8_gemm"])
def test_the_low_precision_baselines_compute_the_samples_formula(sample):
    """torch._scaled_mm (FP8, one scale per tensor) and torch._int_mm with SmoothQuant's
    scales, against tests/formulas.py, within a rounding of their 16-bit outputs."""
    inputs = F.make_inputs(sample, {"M": 48, "N": 40, "K": 64}, np.random.default_rng(2))
    tensors = to_torch(inputs, device="cpu")
    assert tensors["A"].dtype == {"fp8_gemm": torch.float8_e4m3fn,
                                  "w8a8_gemm": torch.int8}[sample]
    got = BASELINES[sample].fn(tensors, {}).float().numpy()
    want = F.REFERENCE[sample](inputs)["C"]
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2 * np.abs(want).max())
    # a baseline that forgets a scale is caught
    unscaled = {**tensors, "sw": torch.ones_like(tensors["sw"])}
    wrong = BASELINES[sample].fn(unscaled, {}).float().numpy()
    assert not np.allclose(wrong, want, rtol=1e-2, atol=1e-2 * np.abs(want).max())


def test_fp8_arrays_reach_torch_as_their_codes():
    import ml_dtypes

    codes = np.arange(256, dtype=np.uint8)
    for numpy_dtype, torch_dtype in ((ml_dtypes.float8_e4m3fn, torch.float8_e4m3fn),
                                     (ml_dtypes.float8_e5m2, torch.float8_e5m2)):
        t = to_torch({"x": codes.view(numpy_dtype)}, device="cpu")["x"]
        assert t.dtype == torch_dtype
        assert np.array_equal(t.view(torch.uint8).numpy(), codes)
