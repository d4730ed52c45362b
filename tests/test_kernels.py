"""A corpus of user-style kernels (tests/kernels/*.pt), each against an independent NumPy
formula (tests/kernels/formulas.py) at an odd, ragged shape. For every kernel:

  check     `ptc check` accepts it (one kernel, named as its file)
  interp    the reference interpreter matches the formula
  plan      it plans on sm80, sm90, gfx90a and gfx942
  nvcc      its sm80 CUDA builds with nvcc, without spills
  emulate   its sm80 CUDA, run on the CPU (ptc.render.emulate), matches the formula, with
            threads in order and shuffled
  emulate90 the same for the sm90 CUDA `ptc compile` emits, and for the best
            warp-specialized sm90 plan where the search ranks another first (TMA,
            mbarriers and wgmma on the emulator; eager copies in reverse order too)
  emulate_gfx90a, emulate_gfx942
            the same for the HIP `ptc compile` emits for each AMD target (MFMA, DPP and
            LDS on the emulator), in order and shuffled

A step that fails today because of ptc is listed in XFAIL with the error ptc gives. The
marks are strict: when ptc is fixed the test turns red and the entry must go.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import sys
import tempfile
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest

import formulas as F
from conftest import Builds, under_xdist
from ptc.diagnostics import CompileError
from ptc import driver
from ptc.driver import check_file, schedule
from ptc.interp import run_kernel
from ptc.runtime import prepare

CORPUS = Path(__file__).resolve().parent / "kernels"


def _load_formulas():
    # tests/formulas.py is already `formulas`: load ours under its own name
    spec = importlib.util.spec_from_file_location("kernel_formulas", CORPUS / "formulas.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


KF = _load_formulas()
NAMES = sorted(KF.KERNELS)
TARGETS = ("sm80", "sm90", "gfx90a", "gfx942")
# the emulator's thread orders: in thread order, and shuffled
CONFIGS = (dict(), dict(order="random", seed=7))


def _have_nvcc() -> bool:
    try:
        importlib.import_module("ptc.targets.cuda.toolchain").find_nvcc()
    except Exception:   # noqa: BLE001 -- BuildError: no nvcc
        return False
    return True


HAVE_NVCC = _have_nvcc()
HAVE_CXX = shutil.which(os.environ.get("CXX", "g++")) is not None

# ---- what fails today because of ptc -------------------------------------------------------
class Known(NamedTuple):
    reason: str          # the error ptc gives (its message; hint), or what goes wrong
    raises: type         # the exception the step then raises
    phrase: str = ""     # a CompileError must say this (another error is a real failure)


# (cross_entropy's sm80 build spilled 8 bytes at ptxas's own register choice, 64 registers;
# the build now compiles it again with the plan's 5 blocks: ptc.runtime.build)
XFAIL: dict[tuple[str, str], Known] = {}


@contextmanager
def known_errors(name: str, step: str):
    """Lets a CompileError through only if it is the one XFAIL expects for (name, step)."""
    try:
        yield
    except CompileError as exc:
        known = XFAIL.get((name, step))
        text = "; ".join(f"{d.message}; hint: {d.hint}" for d in exc.diagnostics)
        if known is not None and known.phrase and known.phrase not in text:
            raise AssertionError(f"{name} {step}: ptc fails with another error than XFAIL "
                                 f"expects ({known.phrase!r}): {text}") from exc
        raise


def steps(step: str, names=NAMES, target: str | None = None) -> list:
    """The kernels, as pytest params (with `target` where given), with the XFAIL marks of
    `step`; an emulator step's in groups of UNIT, whose kernels one worker builds together
    (conftest.in_groups)."""
    out = []
    for i, name in enumerate(names):
        marks = []
        if (name, step) in XFAIL:
            known = XFAIL[(name, step)]
            marks.append(pytest.mark.xfail(strict=True, raises=known.raises, reason=known.reason))
        if step.startswith("emulate"):
            marks.append(pytest.mark.xdist_group(f"kernels-{step}-{i // UNIT}"))
        values = (name,) if target is None else (name, target)
        out.append(pytest.param(*values, marks=marks, id="-".join(values)))
    return out


# ---- cached stages --------------------------------------------------------------------------
def path_of(name: str) -> Path:
    return CORPUS / f"{name}.pt"


def shapes_of(name: str) -> dict:
    return dict(KF.KERNELS[name].shapes)


@lru_cache(maxsize=None)
def kernel_of(name: str):
    return check_file(path_of(name), shapes_of(name)).kernels[0]


@lru_cache(maxsize=None)
def inputs_of(name: str) -> dict:
    return KF.KERNELS[name].make_inputs(shapes_of(name), np.random.default_rng(1))


@lru_cache(maxsize=None)
def reference_of(name: str) -> dict:
    return KF.KERNELS[name].reference(inputs_of(name), shapes_of(name))


def _outcome(fn, *args, **kwargs):
    """fn(*args, **kwargs), or the exception it raised (so that a failure is cached too)."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:   # noqa: BLE001 -- re-raised by the test that needs it
        return exc


@lru_cache(maxsize=None)
def prepared_of(name: str):
    """The sm80 build inputs at the odd shape (check, schedule, render), or the error."""
    return _outcome(prepare, path_of(name), "sm80", shapes=shapes_of(name))


def _unwrap(value):
    if isinstance(value, Exception):
        raise value
    return value


def _nvcc_build(name: str):
    build_module = importlib.import_module("ptc.runtime.build")
    p = _unwrap(prepared_of(name))
    folder = Path(tempfile.mkdtemp(prefix=f"ptc-corpus-{name}-"))
    build_module.write_build_dir(folder, kernel_source=p.source, signature=p.signature,
                                 arch=p.device.arch, target="sm80", plan_json=p.plan_json)
    try:
        return build_module.build(folder, p.device.arch, report_only=True)   # ptxas -v
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _sm80_source(name: str) -> str:
    return _unwrap(prepared_of(name)).source


def _sm90_source(name: str) -> str:
    return prepare(path_of(name), "sm90", shapes=shapes_of(name)).source


def _ws_source(name: str) -> str | None:
    """The best warp-specialized sm90 plan's kernel, where the search ranks another plan
    first (None: there is none, or it is the one `ptc compile` emits)."""
    from ptc.devices import get_device
    from ptc.render import can_render, render_kernel
    kernel = kernel_of(name)
    if len(kernel.body) != 1:
        return None
    device = get_device("sm90")
    ranked = [c for c in schedule(kernel, "sm90", shapes=shapes_of(name)).ranked
              if can_render(c.plan, device) is None]
    ws = next((c for c in ranked if c.plan.style == "warp_specialized"), None)
    if ws is None or ws is ranked[0]:
        return None
    return render_kernel(kernel, ws.plan, ws.graph, device)


def _hip_source(target: str):
    def source(name: str) -> str:
        return prepare(path_of(name), target, shapes=shapes_of(name)).source
    return source


HIP_TARGETS = ("gfx90a", "gfx942")
# each emulator step: (the kernel source of a corpus kernel, the emulator's backend)
SOURCES = {"emulate": (_sm80_source, "cuda"), "emulate90": (_sm90_source, "cuda"),
           "emulate_ws": (_ws_source, "cuda"),
           **{f"emulate_{t}": (_hip_source(t), "hip") for t in HIP_TARGETS}}
UNIT = 8         # kernels of one step that one worker builds together (conftest.in_groups)
_EMULATED: dict[tuple[str, str], object] = {}


@lru_cache(maxsize=None)
def nvcc_build(name: str):
    return _outcome(_nvcc_build, name)


def emulator_builds(step: str, names: list[str]) -> dict:
    """{name: the EmulatedKernel of step `step`, the exception that stopped its source or
    build, or None (no source)}, the names' kernels built together (build_emulated_many)."""
    from ptc.render.emulate import build_emulated_many
    todo = [n for n in dict.fromkeys(names) if (step, n) not in _EMULATED]
    source_of, backend = SOURCES[step]
    sources = {n: _outcome(source_of, n) for n in todo}
    live = [n for n in todo if isinstance(sources[n], str)]
    made = dict(zip(live, build_emulated_many([sources[n] for n in live], backend=backend)))
    for n in todo:
        _EMULATED[(step, n)] = made.get(n, sources[n])
    return {n: _EMULATED[(step, n)] for n in names}


def build_keys(keys: list) -> dict:
    """Builds of (step, name) keys: nvcc's one by one, an emulator step's together."""
    out = {}
    for step in dict.fromkeys(s for s, _ in keys):
        names = [n for s, n in keys if s == step]
        if step == "nvcc":
            out.update({("nvcc", n): nvcc_build(n) for n in names})
        else:
            out.update({(step, n): v for n, v in emulator_builds(step, names).items()})
    return out


@pytest.fixture(scope="module")
def builds(request):
    """The nvcc and emulator builds of the kernels this session runs (conftest.Builds): a
    group of an emulator step's kernels is built together. Without pytest-xdist all are
    started at once in a thread pool (nvcc and g++ run as subprocesses); under xdist each
    group when its first test runs."""
    groups = {}
    for item in request.session.items:
        spec = getattr(item, "callspec", None)
        step = getattr(getattr(item, "function", None), "build_step", None)
        if item.module is sys.modules[__name__] and spec and step and "name" in spec.params:
            step = step.format(**spec.params)
            if (HAVE_NVCC if step == "nvcc" else HAVE_CXX):
                mark = item.get_closest_marker("xdist_group")
                groups[(step, spec.params["name"])] = mark.args[0] if mark else None
    if not under_xdist(request.config):
        # schedule + render first, in order, so the pool's threads do not all hold the GIL
        for name in sorted({n for s, n in groups if s in ("nvcc", "emulate")}):
            prepared_of(name)
    made = Builds(build_keys, groups, request)
    yield made
    made.close()


def built(builds, step: str, name: str):
    return _unwrap(builds[(step, name)])


def errors_against_formula(name: str, got: dict) -> dict[str, float]:
    want = reference_of(name)
    errors = {}
    for out, ref in want.items():
        assert got[out].shape == ref.shape, (out, got[out].shape, ref.shape)
        errors[out] = F.rel_l2(got[out], ref)
    return errors


def assert_within_tolerance(name: str, errors: dict[str, float], what: str):
    tolerance = KF.KERNELS[name].tolerance
    bad = {o: e for o, e in errors.items() if not e <= tolerance[o]}   # NaN fails
    assert not bad, f"{name} ({what}): relative L2 errors {errors}, bounds {tolerance}"


# ---- the corpus itself ------------------------------------------------------------------------
def test_every_kernel_file_has_a_formula_and_the_corpus_is_complete():
    files = {p.stem for p in CORPUS.glob("*.pt")}
    assert files == set(KF.KERNELS), (files ^ set(KF.KERNELS))
    assert len(files) >= 22
    for key in XFAIL:
        assert key[0] in files, key


# ---- the steps --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", steps("check"))
def test_check_accepts_the_kernel(name):
    program = check_file(path_of(name))
    assert [k.name for k in program.kernels] == [name]
    text = path_of(name).read_text()
    assert text.startswith("#"), "a comment at the top says what the kernel computes"
    kernel = kernel_of(name)
    assert {d.name for d in kernel.dims} <= set(shapes_of(name)), "SHAPES gives every dim"


@pytest.mark.parametrize("name", steps("interp"))
def test_interpreter_matches_the_formula(name):
    got = run_kernel(kernel_of(name), inputs_of(name), shapes=shapes_of(name))
    assert_within_tolerance(name, errors_against_formula(name, got), "interpreter")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", NAMES)
def test_kernel_plans_on_every_target(name, target, request):
    step = f"plan:{target}"
    if (name, step) in XFAIL:
        known = XFAIL[(name, step)]
        request.applymarker(pytest.mark.xfail(strict=True, raises=known.raises,
                                              reason=known.reason))
    with known_errors(name, step):
        results = plans(kernel_of(name), target, shapes_of(name))
    for result in results:
        assert result.best is not None and result.best.plan is not None


def plans(kernel, target: str, shapes: dict) -> tuple:
    """The search result of every grid (a kernel with several `parallel` grids is scheduled
    grid by grid where ptc has driver.schedule_grids)."""
    by_grid = getattr(driver, "schedule_grids", None)
    if by_grid is not None:
        return tuple(by_grid(kernel, target, shapes=shapes))
    return (schedule(kernel, target, shapes=shapes),)


@pytest.mark.nvcc
@pytest.mark.parametrize("name", steps("nvcc"))
def test_sm80_build_has_no_spills(builds, name):
    with known_errors(name, "nvcc"):
        result = built(builds, "nvcc", name)
    kernels = [k for k in result.ptxas.kernels if f"ptc_{name}_kernel" in k.name]
    assert kernels, f"ptxas reported no ptc_{name}_kernel: {result.ptxas.text[:500]}"
    assert result.ptxas.spills == 0, result.ptxas.text


test_sm80_build_has_no_spills.build_step = "nvcc"


@pytest.mark.cxx
@pytest.mark.parametrize("name", steps("emulate"))
def test_emulated_sm80_kernel_matches_the_formula(builds, name):
    kernel = kernel_of(name)
    with known_errors(name, "emulate"):
        emulated = built(builds, "emulate", name)
    dims = {d.name: shapes_of(name)[d.name] for d in kernel.dims}
    for config in CONFIGS:
        got = emulated(kernel, inputs_of(name), dims, **config)
        assert_within_tolerance(name, errors_against_formula(name, got), f"emulated {config}")


test_emulated_sm80_kernel_matches_the_formula.build_step = "emulate"

# sm90: threads in order, reversed with copies landing at once, shuffled
CONFIGS_90 = (dict(), dict(order="reverse", eager_cp_async=True), dict(order="random", seed=7))


@pytest.mark.cxx
@pytest.mark.parametrize("name", steps("emulate90"))
def test_emulated_sm90_kernel_matches_the_formula(builds, name):
    kernel = kernel_of(name)
    with known_errors(name, "emulate90"):
        emulated = built(builds, "emulate90", name)
    dims = {d.name: shapes_of(name)[d.name] for d in kernel.dims}
    for config in CONFIGS_90:
        got = emulated(kernel, inputs_of(name), dims, **config)
        assert_within_tolerance(name, errors_against_formula(name, got), f"sm90 {config}")


test_emulated_sm90_kernel_matches_the_formula.build_step = "emulate90"


@pytest.mark.cxx
@pytest.mark.parametrize("name", steps("emulate_ws"))
def test_emulated_warp_specialized_kernel_matches_the_formula(builds, name):
    kernel = kernel_of(name)
    with known_errors(name, "emulate_ws"):
        emulated = built(builds, "emulate_ws", name)
    if emulated is None:
        pytest.skip("no warp-specialized plan other than the one `ptc compile` emits")
    dims = {d.name: shapes_of(name)[d.name] for d in kernel.dims}
    for config in CONFIGS_90:
        got = emulated(kernel, inputs_of(name), dims, **config)
        assert_within_tolerance(name, errors_against_formula(name, got), f"WS {config}")


test_emulated_warp_specialized_kernel_matches_the_formula.build_step = "emulate_ws"


@pytest.mark.cxx
@pytest.mark.parametrize("name,target", [p for target in HIP_TARGETS
                                         for p in steps(f"emulate_{target}", target=target)])
def test_emulated_hip_kernel_matches_the_formula(builds, name, target):
    kernel = kernel_of(name)
    step = f"emulate_{target}"
    with known_errors(name, step):
        emulated = built(builds, step, name)
    dims = {d.name: shapes_of(name)[d.name] for d in kernel.dims}
    for config in (dict(), dict(order="random", seed=3)):
        got = emulated(kernel, inputs_of(name), dims, **config)
        assert_within_tolerance(name, errors_against_formula(name, got), f"{target} {config}")


test_emulated_hip_kernel_matches_the_formula.build_step = "emulate_{target}"
