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

import functools
import os
import shutil
import subprocess
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Hashable, Iterable

import pytest

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
        from ptc.runtime.nvcc import find_nvcc
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
    out = []
    for item in request.session.items:
        if getattr(item, "function", None) is test and hasattr(item, "callspec"):
            out.append(dict(item.callspec.params))
    return out


def under_xdist(config) -> bool:
    return hasattr(config, "workerinput")


class Builds:
    """Builds by key, made for the tests that are selected: without pytest-xdist, all of
    them at once in a thread pool when the first test asks (the compilers run as
    subprocesses, so the threads overlap); under xdist -- where every worker sees every
    selected test but runs only some -- each one when its test asks (the workers are the
    parallelism, and the builds are cached on disk by content)."""

    def __init__(self, build: Callable[[Hashable], object], keys: Iterable[Hashable],
                 prebuild: bool):
        self.build = build
        self.futures: dict[Hashable, Future] = {}
        self.pool = None
        if prebuild:
            keys = list(dict.fromkeys(keys))
            if keys:
                self.pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 2)
                self.futures = {k: self.pool.submit(build, k) for k in keys}

    def __getitem__(self, key: Hashable):
        future = self.futures.get(key)
        return future.result() if future is not None else self.build(key)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True)
