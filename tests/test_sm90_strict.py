"""The sm90 emulator is as strict as the hardware (issue 20): each rule the PTX ISA sets for
wgmma, TMA, mbarriers, setmaxnreg and named barriers -- where a slip is undefined
behaviour on the GPU, often silent -- is an error in the emulator that names the rule and
its PTX ISA section. Each test plants one slip in a rendered kernel (or a device header)
and checks the emulator reports it; before these checks each of them passed unnoticed or
gave plausible numbers.
"""
from __future__ import annotations

import pytest

from ptc.render.emulate import EmulationError, build_emulated
from test_emulate import case, compare, mutate, reference, within_tolerance

pytestmark = pytest.mark.cxx


def emulate(c, source: str, header_overrides=None, **config):
    return build_emulated(source, header_overrides=header_overrides)(c.kernel, c.inputs, c.dims,
                                                                     **config)


# ---- shared memory per block ---------------------------------------------------------------
def test_shared_memory_beyond_the_devices_limit_is_an_error():
    """sm90.yaml: 232448 bytes (227 KB) per block; the emulator's own array holds 256 KB,
    which it used to accept."""
    c = case("gemm", "sm90-bench-plan")
    bad = mutate(c.source, r"constexpr int SMEM_BYTES = \d+;", "constexpr int SMEM_BYTES = 240000;")
    with pytest.raises(EmulationError, match=r"240000 bytes of shared memory per block, over "
                                             r"the 232448 a block of sm90 may have"):
        emulate(c, bad)
    ok = mutate(c.source, r"constexpr int SMEM_BYTES = \d+;", "constexpr int SMEM_BYTES = 232448;")
    assert within_tolerance(c, compare(c, emulate(c, ok), reference(c.name, c.variant)))
