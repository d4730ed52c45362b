"""What the generated launch code refuses before any block runs: a grid of more blocks
than one grid dimension holds (2^31 - 1), with the backend's invalid-configuration code;
`dim3((unsigned)blocks)` once wrapped a grid of 2^32 + k blocks to k on the GPU (and the
emulator ran every block)."""
from __future__ import annotations

import numpy as np
import pytest

from test_offset_tiles import emulated, rendered

COPY = """
kernel copy(X: f32[B, N]) -> (Y: f32[B, N]) {
  tile BN = 64
  parallel b of B, j: BN of N {
    store(Y[b, j], load(X[b, j]) + 1.0)
  }
}
"""
INVALID_CONFIGURATION = 9     # cudaErrorInvalidConfiguration, hipErrorInvalidConfiguration


@pytest.mark.cxx
@pytest.mark.parametrize("target", ["sm80", "sm90", "gfx90a", "gfx942"])
def test_a_grid_past_one_dimension_is_refused_and_a_grid_within_runs(target):
    from ptc.render.emulate import EmulationError

    kernel, source, device = rendered(COPY, target, (("B", 3), ("N", 100)))
    assert [d.name for d in kernel.dims] == ["B", "N"]
    run = emulated(source, device)
    x = np.arange(300, dtype=np.float32).reshape(3, 100)
    y = np.zeros_like(x)
    run.launch([x, y], dims=[3, 100])            # 3 x 2 blocks: the indices split right
    np.testing.assert_array_equal(y, x + 1)
    y[:] = 0
    for b, n in ((2 ** 20, 2 ** 18), (2 ** 31, 64), (2 ** 25, 2 ** 12 * 64 + 1)):
        with pytest.raises(EmulationError, match=rf"failed \(code {INVALID_CONFIGURATION}\)"):
            run.launch([x, y], dims=[b, n])       # 2^32, 2^31, 2^37 + 2^25 blocks
    assert not y.any()                            # no block ran
