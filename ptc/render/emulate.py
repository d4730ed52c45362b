"""Run a rendered kernel.cu or kernel.hip on the CPU, for testing its logic where there is
no GPU.

The same source that nvcc (or hipcc / clang) compiles is compiled by the host compiler with
`-DPTC_EMULATE`. Each backend has an emulation folder beside its device headers
(templates/<backend>/emulate/) on top of one shared runtime (templates/emulate_core/
ptc_emulate_core.h: threads as fibers, barriers, bounds checks, bank-conflict counts, the
launcher), with the warp width chosen at compile time:
- cuda (warps of 32): cuda_runtime.h (with device_functions.h: shuffles, votes,
  __syncwarp, math intrinsics), cuda_fp16.h and cuda_bf16.h for the host and the runtime
  (ptc_emulate.h) that the device headers call in place of their inline PTX: register-level
  ldmatrix / mma.sync / shfl.sync, deferred or eager cp.async, sm90's mbarriers, TMA, wgmma;
- hip (waves of 64): ptc_emulate_hip.h, which ptc_types.h includes under PTC_EMULATE: HIP's
  keywords and the clang AMDGPU builtins the device headers use (ids, s_barrier, DPP,
  ds_swizzle, ds_bpermute, the MFMA instructions after AMD's layouts).

    out = run_emulated(source, kernel, inputs, dims, scalars)   # {output name: array}
    out = run_emulated(source, kernel, inputs, dims, scalars, backend="hip")

or, to run one build several times, `build_emulated(source, backend=...)` ->
`EmulatedKernel`, whose `last_run` (EmulatedRun) holds the shared-memory bank conflicts of
its last launch -- CUDA: of ldmatrix, of cp.async destinations and of the loads and stores
made through shared_access.cuh (ptc::lds, ptc::sts); HIP: of the LDS loads and stores
(ptc::ld_shared, ptc::st_shared) -- in total and per source site.
`EmulatedKernel.launch(tensors, scalars, dims)` calls the kernel ABI directly, for
hand-written kernels. The backend is a device's `backend` (ptc.devices: "cuda", "hip").
"""
from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from ..device_headers import SHARED as SHARED_DEVICE_CODE
from ..interp import NUMPY_DTYPES, coerce
from ..sema import typed as T
from ..stage_cache import code_text
from .. import targets
from . import backend_headers
from .emulate_cache import (CORE_HEADERS, PRELUDE_FAILED, cache_dir, compiler, digest,
                            headers, linker_flags, precompiled_prelude, runtime_cache_dir,
                            runtime_flags, runtime_object)
from .emulate_units import can_share_a_unit, entry_symbol, unit_source
from .errors import EmulationError

# -Og: a third less compile time than -O1 for the same code paths (the emulated runs are
# small; compiling them is most of an emulation test's time)
CXX_FLAGS = ("-std=c++20", "-Og", "-fPIC", "-shared", "-DPTC_EMULATE", "-fno-gnu-unique",
             "-Wl,-Bsymbolic", "-w")
# how a build folder is laid out (a change invalidates the cached builds)
BUILD_LAYOUT = ("device headers beside the kernel source (and emulation headers where "
                "overridden); -I emulate, templates, emulate_core")
ORDERS = {"forward": 0, "reverse": 1, "random": 2}

# the bank-conflict counters of the runtime (ptc_emulate_core.h: enum Access), in order
ACCESS_KINDS = ("ldmatrix", "cp.async", "lds", "sts")


@dataclass(frozen=True)
class Emulation:
    """How one backend's kernel source is built for the CPU (its package's EMULATION,
    ptc.targets): its renderer's device headers (copied beside the source, so that an
    override is what every include finds) and source name, its emulation headers
    (templates/emulate) and the bank-conflict kinds it counts."""

    name: str
    access_kinds: tuple[str, ...]    # of ACCESS_KINDS, the ones its accesses are counted as
    prelude: str = ""                # the emulation runtime every kernel includes first:
                                     # precompiled once (`precompiled_prelude`)
    runtime: str = ""                # the translation unit of the runtime's definitions:
                                     # compiled once, linked by every kernel (`runtime_object`)
    device: object = field(default=None, compare=False, hash=False)   # backend_of(a Device)

    @property
    def source_name(self) -> str:
        """The file the rendered source is written to."""
        return "kernel" + targets.renderer(self.name).suffix

    @property
    def templates(self) -> tuple[Path, ...]:
        """Its backend's template folders, its own first (ptc.targets.Backend.base)."""
        return targets.backend(self.name).template_folders()

    @property
    def emulate_headers(self) -> tuple[Path, ...]:
        return targets.backend(self.name).emulate_folders()

    def device_headers(self) -> list[Path]:
        return backend_headers(self.name)

    def include_dirs(self) -> list[Path]:
        return [*self.emulate_headers, *self.templates, SHARED_DEVICE_CODE, CORE_HEADERS]


def system_includes(*folders: Path) -> str:
    """The `#include <...>` lines of the headers in `folders`, each once: a prelude for a
    backend whose emulation header cannot be precompiled on its own (HIP's needs the vector
    types of the device header ptc_types.h, which a test may override)."""
    found = set()
    for folder in folders:
        for header in folder.glob("*.h"):
            found.update(line.strip() for line in header.read_text().splitlines()
                         if re.match(r"\s*#include <[^>]+>", line))
    return "".join(line + "\n" for line in sorted(found))


def runtime_source(*includes: str) -> str:
    """A runtime translation unit: the headers a kernel includes, then the definitions."""
    return "#define PTC_EMU_RUNTIME\n" + "".join(f'#include {name}\n' for name in includes)


def backend_of(backend) -> Emulation:
    """The Emulation of a backend's name ("cuda", "hip"), of a Device (its `backend`; the
    Emulation then carries the device, whose limits the launches are checked against), or
    an Emulation itself."""
    if isinstance(backend, Emulation):
        return backend
    name = getattr(backend, "backend", backend)
    try:
        emulation = targets.emulation(name)
    except targets.UnknownBackend:
        raise EmulationError(f"the emulator runs {' and '.join(sorted(targets.names()))} "
                             f"kernels, not {name}") from None
    if hasattr(backend, "resources"):
        return replace(emulation, device=backend)
    return emulation


# the renderer's header line naming the plan's device (ptc/targets/cuda, ptc/targets/hip)
PLAN_DEVICE = re.compile(r"^// plan: .*; device (\S+)$", re.M)


def device_of(source: str, back: Emulation):
    """The device a kernel source is built for: the Emulation's (backend_of a Device), else
    the one the rendered source's header names; None for hand-written kernels."""
    if back.device is not None:
        return back.device
    found = PLAN_DEVICE.search(source[:2000])
    if not found:
        return None
    from ..devices import get_device

    try:
        return get_device(found.group(1))
    except Exception:       # a device description the caller passed as a file
        return None


@dataclass(frozen=True)
class AccessSite:
    """The shared-memory accesses of one source site over one launch (ptc_emulate.h)."""

    kind: str            # ldmatrix, cp.async, lds or sts
    file: str            # the file name of the site (no folder)
    line: int
    column: int
    instructions: int    # warp instructions
    wavefronts: int
    conflicts: int       # wavefronts beyond the fewest the instructions' lanes could take


@dataclass(frozen=True)
class EmulatedRun:
    """What the emulator saw in one launch. `bank_conflicts` maps each access kind
    (ldmatrix, cp.async, lds, sts) and "total" to its shared-memory bank conflicts; `sites`
    has the counts per source site."""

    bank_conflicts: dict[str, int]
    sites: tuple[AccessSite, ...] = ()


def _flags(defines: Sequence[str]) -> list[str]:
    """A kernel's build flags: `defines` are macros of the kernel's own source (a test's
    knobs), so the prelude and the runtime object, built from the flags without them
    (`_shared_flags`), are the ones every kernel shares."""
    return list(CXX_FLAGS) + [f"-D{d}" for d in defines] + list(linker_flags())


def _shared_flags() -> list[str]:
    return _flags(())


def _build_key(source: str, back: Emulation, cxx: str, flags: Sequence[str],
               overrides: Mapping[str, str], shipped: Mapping[str, str]) -> str:
    """The cache key of one kernel's build (`shipped`: `headers(back)`). Comment-only lines
    are not part of it: the same plan rendered at another shape (another estimate in its
    header) is the same code."""
    return digest([BUILD_LAYOUT, back.name, cxx, " ".join(flags),
                   " ".join(runtime_flags(flags)), code_text(source)] +
                  [f"{n}\0{t}" for n, t in sorted(shipped.items())] +
                  [f"override {n}\0{t}" for n, t in sorted(overrides.items())])


def _library(key: str) -> Path:
    """Where the kernel built under `key` is kept: its own library, or a link to the
    library of the unit it was built in (emulate_units)."""
    return cache_dir() / f"kernel-{key}.so"


def _compile(source: str, back: Emulation, cxx: str, flags: Sequence[str],
             overrides: Mapping[str, str], lib: Path) -> None:
    """Compile one translation unit (a kernel's source, or a unit of several) into `lib`."""
    with tempfile.TemporaryDirectory(prefix="ptc-emulate-") as tmp:
        src = Path(tmp) / back.source_name
        src.write_text(source)
        # an override of an emulation header: that folder's headers beside the source too,
        # searched first and not from the precompiled prelude (the override reaches what
        # the kernel's unit compiles, its templates and inline functions; the runtime
        # object keeps the shipped definitions)
        emulation = [d for d in (*back.emulate_headers, CORE_HEADERS)
                     if any((d / name).is_file() for name in overrides)]
        for folder in emulation:
            for header in folder.iterdir():
                if header.is_file():
                    (Path(tmp) / header.name).write_text(header.read_text())
        # the device headers beside the source, so that an override is what every
        # include finds (headers include each other by quoted name)
        for header in back.device_headers():
            (Path(tmp) / header.name).write_text(header.read_text())
        for name, text in overrides.items():
            (Path(tmp) / name).write_text(text)
        out = Path(tmp) / "kernel.so"
        shared = _shared_flags()
        prelude = [] if emulation else precompiled_prelude(back, cxx, shared)
        dirs = ([Path(tmp)] if emulation else []) + back.include_dirs()
        cmd = [cxx, *flags, *prelude, "-x", "c++", str(src),
               "-x", "none", str(runtime_object(back, cxx, shared)),
               *(f"-I{d}" for d in dirs), "-o", str(out)]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            first = next((line for line in res.stderr.splitlines() if "error" in line), "")
            first = first.replace(tmp + os.sep, "").strip()
            raise EmulationError("the host build of the kernel failed"
                                 + (f": {first}" if first else "") + "\n"
                                 + " ".join(cmd) + "\n" + res.stderr[-6000:])
        part = lib.with_suffix(f".{os.getpid()}.tmp")
        shutil.copyfile(out, part)
        os.replace(part, lib)


def build_emulated(source: str, *, backend="cuda", defines: Sequence[str] = (),
                   header_overrides: Mapping[str, str] | None = None) -> "EmulatedKernel":
    """Compile `source` (a rendered kernel.cu, or kernel.hip with backend "hip" or a HIP
    device) for the CPU and load it. Builds are cached by the hash of the source, the
    headers and the flags. `defines` (NAME or NAME=VALUE) are macros of the kernel's own
    source; the emulation runtime is built without them. `header_overrides` replaces device
    headers by name (e.g. {"mma_sync.cuh": text}) -- they are put beside the source, which
    the includes search first -- or emulation headers (the kernel's unit then parses the
    emulation headers instead of reading the precompiled prelude). Launches are checked against the limits of the device
    (`backend` a Device, or the device the rendered source names)."""
    back = backend_of(backend)
    overrides = dict(header_overrides or {})
    cxx, flags = compiler(), _flags(defines)
    key = _build_key(source, back, cxx, flags, overrides, headers(back))
    return _loaded(source, back, cxx, flags, overrides, key)


def _loaded(source: str, back: Emulation, cxx: str, flags: Sequence[str],
            overrides: Mapping[str, str], key: str) -> "EmulatedKernel":
    """The kernel built under `key`: from the cache (alone, or in a unit), else built alone."""
    lib = _library(key)
    if not lib.exists():
        _compile(source, back, cxx, flags, overrides, lib)
    return EmulatedKernel(lib, back, device_of(source, back),
                          entry=key if lib.is_symlink() else "")


# kernels per unit: the fixed cost of a build is shared (emulate_units), while a unit whose
# build fails is built again one kernel at a time
UNIT_SIZE = 16


def build_emulated_many(sources: Sequence[str], *, backend="cuda",
                        defines: Sequence[str] = ()) -> list:
    """`build_emulated` of each of `sources` (rendered kernels), compiling those not in the
    cache in units of up to UNIT_SIZE kernels (emulate_units): a third of the time of one
    build each. `backend` is every source's, or a sequence of one per source (a name or a
    Device, as for `build_emulated`): the sources of each are built together. Returns, in
    order, each source's EmulatedKernel, or the EmulationError its build raised."""
    backends = list(backend) if isinstance(backend, (list, tuple)) else [backend] * len(sources)
    out: list = [None] * len(sources)
    for given in dict.fromkeys(backends):
        at = [i for i, b in enumerate(backends) if b == given]
        for i, made in zip(at, _build_together([sources[i] for i in at], backend_of(given),
                                               defines)):
            out[i] = made
    return out


def _build_together(sources: Sequence[str], back: Emulation, defines: Sequence[str]) -> list:
    """build_emulated_many of sources of one backend."""
    cxx, flags = compiler(), _flags(defines)
    shipped = headers(back)
    keys = [_build_key(source, back, cxx, flags, {}, shipped) for source in sources]
    todo = list({key: source for key, source in zip(keys, sources)
                 if can_share_a_unit(source) and not _library(key).exists()}.items())
    for start in range(0, len(todo), UNIT_SIZE):
        unit = todo[start:start + UNIT_SIZE]
        if len(unit) > 1:
            _build_unit(unit, back, cxx, flags)
    out = []
    for source, key in zip(sources, keys):   # from the units' links, or alone
        try:
            out.append(_loaded(source, back, cxx, flags, {}, key))
        except EmulationError as exc:
            out.append(exc)
    return out


def _build_unit(kernels: Sequence[tuple[str, str]], back: Emulation, cxx: str,
                flags: Sequence[str]) -> None:
    """Compile `kernels` ((key, source) pairs) as one unit and link each key's library to
    it. A unit that does not build links nothing: its kernels then build alone, each with
    its own error."""
    unit = cache_dir() / f"unit-{digest([key for key, _ in kernels])}.so"
    try:
        _compile(unit_source(kernels, back.source_name), back, cxx, flags, {}, unit)
    except EmulationError:
        return
    for key, _ in kernels:
        link = _library(key).with_suffix(f".{os.getpid()}.link")
        link.unlink(missing_ok=True)
        os.symlink(unit.name, link)
        os.replace(link, _library(key))


# what the emulator puts in the accumulator registers of a wgmma in flight (an f32 NaN with
# a payload; ptc_emulate_sm90.h): an output holding it was read from them before the
# wgmma.wait_group that retires the wgmma
IN_FLIGHT_F32 = 0x7FE1F00D


@dataclass
class EmulatedKernel:
    path: Path
    backend: Emulation = field(default_factory=lambda: backend_of("cuda"))
    device: object = None      # whose limits the launches are checked against (None: none)
    entry: str = ""            # the build key of a kernel built in a unit (emulate_units)

    def __post_init__(self):
        lib = ctypes.CDLL(str(self.path), mode=os.RTLD_LOCAL)
        self._launch = getattr(lib, entry_symbol("ptc_launch", self.entry))
        self._launch.restype = ctypes.c_int
        self._launch.argtypes = [ctypes.POINTER(ctypes.c_void_p),
                                 ctypes.POINTER(ctypes.c_double),
                                 ctypes.POINTER(ctypes.c_longlong), ctypes.c_void_p]
        self._kernel_name = getattr(lib, entry_symbol("ptc_kernel_name", self.entry))
        self._kernel_name.restype = ctypes.c_char_p
        lib.ptc_emulate_config.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                           ctypes.c_uint, ctypes.c_int]
        lib.ptc_emulate_limits.argtypes = [ctypes.c_int, ctypes.c_char_p]
        lib.ptc_emulate_register_tensor.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        lib.ptc_emulate_error.restype = ctypes.c_char_p
        lib.ptc_emulate_error_count.restype = ctypes.c_longlong
        lib.ptc_emulate_bank_conflicts.argtypes = [ctypes.POINTER(ctypes.c_longlong)]
        lib.ptc_emulate_access_sites.restype = ctypes.c_int
        lib.ptc_emulate_access_site.restype = ctypes.c_char_p
        lib.ptc_emulate_access_site.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_longlong)]
        self.lib = lib
        self.last_run: EmulatedRun | None = None   # set by each launch

    def _observed(self) -> EmulatedRun:
        lib = self.lib
        totals = (ctypes.c_longlong * 4)()
        lib.ptc_emulate_bank_conflicts(totals)
        counts = {kind: int(v) for kind, v in zip(ACCESS_KINDS, totals)
                  if kind in self.backend.access_kinds}
        counts["total"] = sum(counts.values())
        sites = []
        for i in range(lib.ptc_emulate_access_sites()):
            v = (ctypes.c_longlong * 6)()
            file = lib.ptc_emulate_access_site(i, v).decode(errors="replace")
            sites.append(AccessSite(ACCESS_KINDS[v[0]], os.path.basename(file), *map(int, v[1:])))
        return EmulatedRun(counts, tuple(sites))

    @property
    def name(self) -> str:
        return self._kernel_name().decode()

    def __call__(self, kernel: T.TypedKernel, inputs: Mapping[str, object],
                 dims: Mapping[str, int], scalars: Mapping[str, float] | None = None, *,
                 order: str = "forward", eager_cp_async: bool = False,
                 break_layout: bool = False, seed: int = 1,
                 fill: int = 0xFF) -> dict[str, np.ndarray]:
        """Run the kernel on `inputs` (by name) at `dims` (every dim by name); scalar params
        come from `scalars` or else from `inputs`. Returns the outputs by name."""
        if self.name != kernel.name:
            raise EmulationError(f"this build is kernel {self.name}, not {kernel.name}")
        scalars = dict(scalars or {})
        missing = [d.name for d in kernel.dims if d.name not in dims]
        if missing:
            raise EmulationError(f"no size for dim(s) {', '.join(missing)}")

        def shape_of(p) -> tuple[int, ...]:
            return p.shape_in(dims)

        arrays: list[np.ndarray] = []
        scalar_values: list[float] = []
        for p in kernel.inputs:
            if isinstance(p, T.TensorParam):
                arr = np.ascontiguousarray(coerce(p.name, inputs[p.name], p.dtype))
                if arr.shape != shape_of(p):
                    raise EmulationError(f"input {p.name} has shape {arr.shape}, "
                                         f"not {shape_of(p)}")
                arrays.append(arr)
            else:
                value = scalars[p.name] if p.name in scalars else inputs[p.name]
                scalar_values.append(float(np.asarray(value, dtype=np.float64)))
        outputs = {p.name: np.zeros(shape_of(p), NUMPY_DTYPES[p.dtype]) for p in kernel.outputs}
        arrays += list(outputs.values())

        self.launch(arrays, scalar_values, [int(dims[d.name]) for d in kernel.dims],
                    what=kernel.name, order=order, eager_cp_async=eager_cp_async,
                    break_layout=break_layout, seed=seed, fill=fill)
        return outputs

    def launch(self, tensors: Sequence[np.ndarray], scalars: Sequence[float] = (),
               dims: Sequence[int] = (), *, what: str | None = None, order: str = "forward",
               eager_cp_async: bool = False, break_layout: bool = False, seed: int = 1,
               fill: int = 0xFF) -> None:
        """The kernel ABI itself: `ptc_launch(tensors, scalars, dims)` on contiguous arrays
        (inputs then outputs, written in place), scalar values and dim sizes in the order
        the kernel's `ptc_launch` reads them. For hand-written kernels; `__call__` builds
        these from a typed kernel's signature. Raises EmulationError if the run fails."""
        if order not in ORDERS:
            raise ValueError(f"order must be one of {', '.join(ORDERS)}, not {order!r}")
        for a in tensors:
            if not (isinstance(a, np.ndarray) and a.flags.c_contiguous):
                raise ValueError("the tensors must be C-contiguous NumPy arrays")
        lib = self.lib
        lib.ptc_emulate_config(ORDERS[order], int(eager_cp_async), int(break_layout), seed, fill)
        if self.device is not None:
            lib.ptc_emulate_limits(int(self.device.resources.shared_memory_bytes),
                                   self.device.name.encode())
        else:
            lib.ptc_emulate_limits(0, b"")
        lib.ptc_emulate_clear_tensors()
        for a in tensors:
            lib.ptc_emulate_register_tensor(a.ctypes.data, max(a.nbytes, 1))
        ptrs = (ctypes.c_void_p * max(len(tensors), 1))(*[a.ctypes.data for a in tensors])
        svals = (ctypes.c_double * max(len(scalars), 1))(*[float(v) for v in scalars])
        dvals = (ctypes.c_longlong * max(len(dims), 1))(*[int(d) for d in dims])
        rc = self._launch(ptrs, svals, dvals, None)
        lib.ptc_emulate_clear_tensors()
        self.last_run = self._observed()
        if rc != 0:
            message = lib.ptc_emulate_error().decode() or (
                "a dim fixed at compile time has another size in this call, or one the "
                "build's tile size must divide (a `tile ... divides` line) is not a multiple"
                if rc == 1 else "(no message)")
            count = lib.ptc_emulate_error_count()
            raise EmulationError(f"the emulated kernel {what or self.name} failed (code {rc}): "
                                 f"{message}" + (f" (and {count - 1} more errors)" if count > 1
                                                 else ""))
        for a in tensors:
            if a.dtype == np.float32 and a.size and \
                    np.any((a.view(np.uint32) & 0x7FFFFFFF) == IN_FLIGHT_F32):
                raise EmulationError(
                    f"the emulated kernel {what or self.name} stored a value read from the "
                    "accumulator registers of a wgmma.mma_async in flight, before the "
                    "wgmma.wait_group that retires it (PTX ISA 9.7.15.7.3 wgmma.wait_group: "
                    "accessing them before is undefined)")


def run_emulated(source: str, kernel: T.TypedKernel, inputs: Mapping[str, object],
                 dims: Mapping[str, int], scalars: Mapping[str, float] | None = None, *,
                 backend="cuda", **options) -> dict[str, np.ndarray]:
    """Build (cached) and run a rendered kernel.cu / kernel.hip (`backend`: a name or a
    device) on the CPU; see EmulatedKernel.__call__."""
    return build_emulated(source, backend=backend)(kernel, inputs, dims, scalars, **options)


__all__ = ["run_emulated", "build_emulated", "build_emulated_many", "cache_dir", "compiler",
           "linker_flags", "precompiled_prelude", "runtime_cache_dir", "runtime_object",
           "PRELUDE_FAILED", "AccessSite", "Emulation",
           "EmulatedKernel", "EmulatedRun", "EmulationError"]
