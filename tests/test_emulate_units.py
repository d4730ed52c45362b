"""Emulated kernels built together (ptc.render.emulate.build_emulated_many and
ptc.render.emulate_units): one compile for several rendered kernels, each of which then
runs, reports and fails exactly as it would built alone."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ptc import driver
from ptc.interp import bind_dims, random_inputs, run_kernel
from ptc.render import emulate as E
from ptc.render.emulate_units import can_share_a_unit, unit_source

pytestmark = pytest.mark.cxx
SAMPLES = Path(__file__).resolve().parent.parent / "samples"
# (sample, shapes, tiles): small sm80 kernels; rmsnorm's reductions go through shared
# memory from kernel.cu's own lines (ptc::lds / ptc::sts sites)
KERNELS = [("softmax", dict(M=8, N=256), dict(BM=4)),
           ("rmsnorm", dict(M=8, N=256), None),
           ("gemm", dict(M=64, N=64, K=64), None)]


def rendered(name: str, shapes: dict, tiles) -> tuple:
    kernel = driver.check_file(SAMPLES / f"{name}.pt", shapes=shapes).kernels[0]
    return kernel, driver.render(kernel, "sm80", shapes=shapes, tiles=tiles)[0]


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """Kernels built into an empty folder; the prelude and runtime object from the shared
    one (10 s to build afresh)."""
    monkeypatch.setenv("PTC_EMULATE_RUNTIME_CACHE", str(E.runtime_cache_dir()))
    monkeypatch.setenv("PTC_EMULATE_CACHE", str(tmp_path))
    E.build_emulated(rendered(*KERNELS[0])[1])      # the prelude and runtime, if not yet
    return tmp_path


def compiles(monkeypatch) -> list:
    """The kernel builds (not the prelude or runtime) the host compiler runs from here on."""
    ran = []
    real = E.subprocess.run
    monkeypatch.setattr(E.subprocess, "run", lambda cmd, *a, **k: (
        ran.append(cmd) if "-shared" in cmd else None) or real(cmd, *a, **k))
    return ran


def test_kernels_built_together_are_one_compile_and_each_runs_as_built_alone(own_cache,
                                                                              monkeypatch):
    made = [rendered(*k) for k in KERNELS]
    ran = compiles(monkeypatch)
    built = E.build_emulated_many([source for _, source in made])
    # the first was built alone by the fixture: the other two are one unit
    assert len(ran) == 1 and all(isinstance(b, E.EmulatedKernel) for b in built)
    assert built[1].path.resolve() == built[2].path.resolve() != built[0].path.resolve()
    for (kernel, source), emulated, (_, shapes, tiles) in zip(made, built, KERNELS):
        assert emulated.name == kernel.name
        dims = bind_dims(kernel, {}, shapes)
        inputs = random_inputs(kernel, dims, seed=3)
        got = emulated(kernel, inputs, dims, order="random", seed=5)
        want = run_kernel(kernel, inputs, shapes=dims, tiles=tiles)
        for out, value in want.items():
            np.testing.assert_allclose(got[out].astype(np.float32),
                                       value.astype(np.float32), rtol=2e-2, atol=2e-2)
    # again: found in the cache, nothing compiled
    assert [b.path for b in E.build_emulated_many([s for _, s in made])] == \
        [b.path for b in built] and len(ran) == 1


def test_a_kernel_in_a_unit_reports_its_own_file_and_lines(own_cache, monkeypatch):
    """The emulator's shared-memory sites in kernel.cu read the same lines as the kernel
    built alone (the unit's `#line` directives)."""
    kernel, source = rendered(*KERNELS[1])
    _, other = rendered(*KERNELS[2])
    dims = bind_dims(kernel, {}, KERNELS[1][1])
    inputs = random_inputs(kernel, dims, seed=1)
    together = E.build_emulated_many([other, source])[1]
    monkeypatch.setenv("PTC_EMULATE_CACHE", str(own_cache / "alone"))
    alone = E.build_emulated(source)
    assert together.path.is_symlink() and not alone.path.is_symlink()
    sites = []
    for emulated in (together, alone):
        emulated(kernel, inputs, dims)
        sites.append([(s.kind, s.file, s.line, s.column) for s in emulated.last_run.sites])
    assert sites[0] == sites[1]
    assert any(file == "kernel.cu" for _, file, _, _ in sites[0])


def test_a_kernel_that_does_not_build_fails_alone_and_the_others_build(own_cache):
    (_, good), (_, broken), (_, also_good) = (rendered(*k) for k in KERNELS)
    broken = broken.replace("constexpr int THREADS = ", "constexpr int THREADS = no_such + ", 1)
    out = E.build_emulated_many([good, broken, also_good])
    assert isinstance(out[0], E.EmulatedKernel) and isinstance(out[2], E.EmulatedKernel)
    assert isinstance(out[1], E.EmulationError)
    first = str(out[1]).splitlines()[0]
    assert "kernel.cu" in first and "no_such" in first, first


def test_only_sources_ptc_rendered_share_a_unit():
    _, source = rendered(*KERNELS[0])
    assert can_share_a_unit(source)
    hand_written = '#include <cuda_runtime.h>\nextern "C" int ptc_launch() { return 0; }\n'
    assert not can_share_a_unit(hand_written)
    late_include = source + '\n#include "wgmma.cuh"\n'
    assert not can_share_a_unit(late_include)


def test_a_unit_hoists_the_includes_once_and_renames_the_entry_points():
    sources = [rendered(*k)[1] for k in KERNELS]
    unit = unit_source([("aa", sources[0]), ("bb", sources[1])], "kernel.cu")
    lines = unit.splitlines()
    assert lines.count("#include <cuda_runtime.h>") == 1
    assert max(i for i, line in enumerate(lines) if line.startswith("#include")) < \
        lines.index("namespace ptc_unit_aa {")
    for key in ("aa", "bb"):
        assert f"#define ptc_launch ptc_launch_{key}" in lines
        assert f"#define ptc_kernel_name ptc_kernel_name_{key}" in lines
    # the line after `#line N` is line N of the kernel's own source
    at = lines.index(next(line for line in lines if line.startswith("#line")))
    number = int(lines[at].split()[1])
    assert lines[at + 1] == sources[0].splitlines()[number - 1]
