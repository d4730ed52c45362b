"""What every test module shares: the markers that say which external tools a test runs,
and selection-aware builds (`Builds`, for a module's fixture: only what the selected tests
need, e.g. `-k gemm` builds only the gemm kernels).

Markers (pyproject.toml registers them):
  nvcc  runs nvcc, cuobjdump or nvdisasm       hip   runs hipcc or clang for HIP
  cxx   runs the host C++ compiler (the emulator, the fake CUDA runtime)
  gpu   runs on a GPU (deselected unless asked for: -m gpu)
A marked test skips where its tool is missing, except under CI (CI set), where a missing
tool is a failure: CI must install what the README's set-up installs.

`make test-fast` deselects nvcc, hip, cxx and gpu tests and sets PTC_TEST_NO_COMPILERS=1,
under which a test that starts a compiler anyway fails, naming the marker it lacks -- so the
fast suite stays free of compilers and the marks stay true.
"""
from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import shutil
import subprocess
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Hashable, Iterable, Iterator

import pytest

# NumPy's OpenBLAS starts a thread per core, and those threads spin between calls: with a
# pytest worker per core, each worker's spinning threads took the CPU the other worker's
# compilers and emulated kernels needed (test_emulate alone: 64 CPU-s, 43 with one thread).
# Set before anything imports NumPy (conftest is imported before the test modules, and
# xdist's workers inherit the environment).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# the executables behind each marker (the first found on PATH is enough for "available")
TOOLS = {
    "nvcc": ("nvcc",),
    "hip": ("hipcc", "clang++-19", "clang++"),
    "cxx": (os.environ.get("CXX", "g++"), "c++"),
}
# what a compiler is called, by marker: used by the PTC_TEST_NO_COMPILERS guard
COMPILERS = {
    "nvcc": ("nvcc", "cuobjdump", "nvdisasm", "ptxas", "cicc", "fatbinary"),
    "hip": ("hipcc", "clang", "clang++", "clang-19", "clang++-19", "ld.lld", "ld.lld-19",
            "clang-offload-bundler", "clang-offload-bundler-19"),
    "cxx": ("g++", "gcc", "c++", "cc", "cpp", os.environ.get("CXX", "g++")),
}


@functools.lru_cache(maxsize=None)
def available(marker: str) -> bool:
    if marker == "nvcc":
        from ptc.targets.cuda.toolchain import find_nvcc
        try:
            find_nvcc()
            return True
        except Exception:   # noqa: BLE001 -- BuildError: none
            return False
    return any(shutil.which(tool) for tool in TOOLS[marker])


def pytest_runtest_setup(item):
    for marker in ("nvcc", "hip", "cxx"):
        if item.get_closest_marker(marker) and not available(marker):
            message = f"{TOOLS[marker][0]} is not installed (marker {marker})"
            if os.environ.get("CI"):
                pytest.fail(f"{message}: CI must have it (README's set-up installs it)")
            pytest.skip(message)


# ---- PTC_TEST_NO_COMPILERS: the fast suite starts no compiler --------------------------------
def _compiler_marker(argv) -> str | None:
    """The marker a real compiler started by `argv` needs (None: not a compiler, or a
    stand-in a test wrote into its temporary folder)."""
    if isinstance(argv, (str, bytes, os.PathLike)):
        argv = [argv]
    if not argv:
        return None
    program = os.fsdecode(argv[0])
    found = shutil.which(program)
    if found and Path(found).resolve().is_relative_to(Path(tempfile.gettempdir()).resolve()):
        return None
    for marker, names in COMPILERS.items():
        if Path(program).name in names:
            return marker
    return None


class CompilerStarted(Exception):
    pass


@pytest.fixture(autouse=True)
def _no_compilers(request, monkeypatch):
    if not os.environ.get("PTC_TEST_NO_COMPILERS"):
        yield
        return
    real = subprocess.Popen.__init__

    def guarded(self, args, *rest, **kwargs):
        marker = _compiler_marker(args)
        if marker:
            raise CompilerStarted(
                f"{request.node.nodeid} starts {args[0] if not isinstance(args, str) else args}"
                f" but is not marked `{marker}` (pytest.mark.{marker}): the fast suite "
                "(make test-fast) must not run compilers")
        real(self, args, *rest, **kwargs)
    monkeypatch.setattr(subprocess.Popen, "__init__", guarded)
    yield


# ---- selection-aware builds ------------------------------------------------------------------
def selected_params(request, test: Callable) -> list[dict]:
    """The parameters of the selected tests of function `test` in this session (after -k,
    -m and node ids narrowed them)."""
    return [dict(item.callspec.params) for item in _selected(request, test)]


def selected_groups(request, test: Callable, key: Callable[[dict], Hashable]) -> dict:
    """{key(params): the xdist_group of the test} for the selected tests of `test`."""
    out = {}
    for item in _selected(request, test):
        mark = item.get_closest_marker("xdist_group")
        group = (mark.args[0] if mark.args else mark.kwargs.get("name")) if mark else None
        out[key(dict(item.callspec.params))] = group
    return out


def _selected(request, test: Callable) -> list:
    return [item for item in request.session.items
            if getattr(item, "function", None) is test and hasattr(item, "callspec")]


def in_groups(cases: Iterable[tuple], size: int, prefix: str) -> list:
    """`cases` (parameter tuples) as pytest params in groups of `size`, each marked
    xdist_group: a fixture builds a group's kernels together (`Builds`: a unit of emulated
    kernels costs a third of their builds one by one, ptc.render.emulate_units). Under
    `--dist worksteal` (pyproject's addopts) a worker runs a contiguous run of the tests,
    so a group's tests are mostly on one worker."""
    return [pytest.param(*c, marks=pytest.mark.xdist_group(f"{prefix}-{i // size}"))
            for i, c in enumerate(cases)]


def under_xdist(config) -> bool:
    return hasattr(config, "workerinput")


@contextlib.contextmanager
def one_worker_at_a_time(request, name: str) -> Iterator[None]:
    """Held while this pytest worker builds group `name`: a second worker that needs the
    group waits and then finds its builds in the cache, instead of compiling them too. (The
    lock files are in the run's temporary folder, which pytest removes in later runs.)"""
    if not under_xdist(request.config):
        yield
        return
    # the workers' temporary folders (popen-gw0, popen-gw1) share the run's
    folder = request.getfixturevalue("tmp_path_factory").getbasetemp().parent / "groups"
    folder.mkdir(exist_ok=True)
    with open(folder / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


class Builds:
    """Builds by key, made for the tests that are selected, a group of keys at a time
    (`build_many(keys) -> {key: build}`; `groups` maps each key to its group, as
    `selected_groups` reads them; a key in no group is built alone). Without pytest-xdist
    every group is started at once in a thread pool (the compilers run as subprocesses, so
    the threads overlap); under xdist -- where every worker sees every selected test but runs
    only some -- a group is built when its first test on a worker asks, one worker at a time
    (the workers are the parallelism, and the builds are cached on disk by content)."""

    def __init__(self, build_many: Callable[[list], dict], groups: dict, request):
        self.build_many = build_many
        self.request = request
        self.members: dict[Hashable, list] = {}
        for key, group in groups.items():
            self.members.setdefault(("group", group) if group is not None else ("key", key),
                                    []).append(key)
        self.group_of = {key: g for g, keys in self.members.items() for key in keys}
        self.futures: dict[Hashable, Future] = {}
        self.pool = None
        if not under_xdist(request.config) and self.members:
            self.pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 2)
            self.futures = {g: self.pool.submit(build_many, keys)
                            for g, keys in self.members.items()}

    def __getitem__(self, key: Hashable):
        group = self.group_of.get(key, ("key", key))
        if group not in self.futures:
            done: Future = Future()
            if group[0] == "group":
                with one_worker_at_a_time(self.request, str(group[1])):
                    done.set_result(self.build_many(self.members[group]))
            else:
                done.set_result(self.build_many([key]))
            self.futures[group] = done
        return self.futures[group].result()[key]

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True)
