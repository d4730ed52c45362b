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

import contextlib
import ctypes
import fcntl
import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterator, Mapping, Sequence

import numpy as np

from ..interp import NUMPY_DTYPES, coerce
from ..sema import typed as T
from ..stage_cache import code_text
from . import RENDERERS, backend_headers

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
CUDA_TEMPLATES = TEMPLATES / "cuda"
EMULATE_HEADERS = CUDA_TEMPLATES / "emulate"
CORE_HEADERS = TEMPLATES / "emulate_core"     # the runtime every backend's emulation shares
# -Og: a third less compile time than -O1 for the same code paths (the emulated runs are
# small; compiling them is most of an emulation test's time)
CXX_FLAGS = ("-std=c++20", "-Og", "-fPIC", "-shared", "-DPTC_EMULATE", "-fno-gnu-unique",
             "-Wl,-Bsymbolic", "-w")
# the runtime object (`runtime_object`) is compiled once per backend, so it takes -O2: the
# emulated matrix instructions, operand reads and the launcher live there (an emulated
# conv2d ran 1.2 -> 0.74 s on sm80, 1.5 -> 0.7 s for an sm90 mma.sync plan)
RUNTIME_OPTIMIZATION = "-O2"
# gold links an emulated kernel in a third of the default linker's time (0.10 -> 0.03 s, an
# eighth of a build); the default linker where binutils has none
FAST_LINKER = "gold"
# how a build folder is laid out (a change invalidates the cached builds)
BUILD_LAYOUT = "device headers beside the kernel source; -I emulate, templates, emulate_core"
ORDERS = {"forward": 0, "reverse": 1, "random": 2}

# the bank-conflict counters of the runtime (ptc_emulate_core.h: enum Access), in order
ACCESS_KINDS = ("ldmatrix", "cp.async", "lds", "sts")


@dataclass(frozen=True)
class Backend:
    """How one backend's kernel source is built for the CPU: its renderer's device headers
    (copied beside the source, so that an override is what every include finds) and source
    name (ptc.render.RENDERERS), its emulation headers (templates/<folder>/emulate) and the
    bank-conflict kinds it counts."""

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
        return "kernel" + RENDERERS[self.name].suffix

    @property
    def templates(self) -> Path:
        return TEMPLATES / RENDERERS[self.name].folder

    @property
    def emulate_headers(self) -> Path:
        return self.templates / "emulate"

    def device_headers(self) -> list[Path]:
        return backend_headers(self.name)

    def include_dirs(self) -> list[Path]:
        return [self.emulate_headers, self.templates, CORE_HEADERS]


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


BACKENDS = {
    "cuda": Backend("cuda", ACCESS_KINDS, prelude="#include <cuda_runtime.h>\n",
                    runtime=runtime_source("<cuda_runtime.h>", '"ptc_emulate_core.cc"',
                                           '"ptc_emulate.cc"')),
    # the C++ library is most of what a HIP build parses (a third of its time)
    "hip": Backend("hip", ("lds", "sts"),
                   prelude=system_includes(TEMPLATES / "hip" / "emulate", CORE_HEADERS),
                   runtime=runtime_source('"ptc_types.h"', '"ptc_emulate_core.cc"')),
}


def backend_of(backend) -> Backend:
    """The Backend of a name ("cuda", "hip"), a Device (its `backend`; the Backend then
    carries the device, whose limits the launches are checked against) or a Backend."""
    if isinstance(backend, Backend):
        return backend
    name = getattr(backend, "backend", backend)
    if name not in BACKENDS:
        raise EmulationError(f"the emulator runs {' and '.join(sorted(BACKENDS))} kernels, not "
                             f"{name}")
    if hasattr(backend, "resources"):
        return replace(BACKENDS[name], device=backend)
    return BACKENDS[name]


# the renderer's header line naming the plan's device (ptc/render/cuda, ptc/render/hip)
PLAN_DEVICE = re.compile(r"^// plan: .*; device (\S+)$", re.M)


def device_of(source: str, back: Backend):
    """The device a kernel source is built for: the Backend's (backend_of a Device), else
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


class EmulationError(Exception):
    """The host build failed, or the emulated kernel did something a GPU would not take
    (an access outside shared memory or the tensors, a deadlock at a barrier, ...)."""


def compiler() -> str:
    """The host C++ compiler: $CXX, else g++, else c++."""
    chosen = os.environ.get("CXX")
    if chosen:
        cxx = shutil.which(chosen)
        if not cxx:
            raise EmulationError(f"the host C++ compiler CXX={chosen} is not found, so the "
                                 "emulated kernel cannot be built")
        return cxx
    cxx = shutil.which("g++") or shutil.which("c++")
    if not cxx:
        raise EmulationError("no host C++ compiler (g++) to build the emulated kernel")
    return cxx


def cache_dir() -> Path:
    """Where emulated kernels are kept: $PTC_EMULATE_CACHE, else a folder in the temp dir."""
    root = os.environ.get("PTC_EMULATE_CACHE")
    path = Path(root) if root else Path(tempfile.gettempdir()) / f"ptc-emulate-{os.getuid()}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def runtime_cache_dir() -> Path:
    """Where each backend's precompiled prelude and runtime object are kept:
    $PTC_EMULATE_RUNTIME_CACHE, else with the kernels. The fuzzer keeps its kernels in a
    folder of its own (each is used once) and these in the shared one (10 s to build)."""
    root = os.environ.get("PTC_EMULATE_RUNTIME_CACHE")
    if not root:
        return cache_dir()
    Path(root).mkdir(parents=True, exist_ok=True)
    return Path(root)


def _headers(backend: Backend) -> dict[str, str]:
    """Every header (and runtime definition file) a build of `backend` may read, by a name
    unique among them."""
    files = backend.device_headers() + [p for folder in (backend.emulate_headers, CORE_HEADERS)
                                        for pattern in ("*.h", "*.cc")
                                        for p in sorted(folder.glob(pattern))]
    return {str(p.relative_to(TEMPLATES)): p.read_text() for p in files}


def build_emulated(source: str, *, backend="cuda", defines: Sequence[str] = (),
                   header_overrides: Mapping[str, str] | None = None) -> "EmulatedKernel":
    """Compile `source` (a rendered kernel.cu, or kernel.hip with backend "hip" or a HIP
    device) for the CPU and load it. Builds are cached by the hash of the source, the
    headers and the flags. `header_overrides` replaces device headers by name (e.g.
    {"mma_sync.cuh": text}) -- they are put beside the source, which the includes search
    first. Launches are checked against the limits of the device (`backend` a Device, or
    the device the rendered source names)."""
    back = backend_of(backend)
    overrides = dict(header_overrides or {})
    cxx = compiler()
    flags = list(CXX_FLAGS) + [f"-D{d}" for d in defines] + list(linker_flags())
    # comment-only lines are not part of the key: the same plan rendered at another shape
    # (another estimate in its header) is the same code, built once
    digest = _digest([BUILD_LAYOUT, back.name, cxx, " ".join(flags),
                      " ".join(_runtime_flags(flags)), code_text(source)] +
                     [f"{n}\0{t}" for n, t in sorted(_headers(back).items())] +
                     [f"override {n}\0{t}" for n, t in sorted(overrides.items())])
    lib = cache_dir() / f"kernel-{digest}.so"
    if not lib.exists():
        with tempfile.TemporaryDirectory(prefix="ptc-emulate-") as tmp:
            src = Path(tmp) / back.source_name
            src.write_text(source)
            # the device headers beside the source, so that an override is what every
            # include finds (headers include each other by quoted name)
            for header in back.device_headers():
                (Path(tmp) / header.name).write_text(header.read_text())
            for name, text in overrides.items():
                (Path(tmp) / name).write_text(text)
            out = Path(tmp) / "kernel.so"
            cmd = [cxx, *flags, *precompiled_prelude(back, cxx, flags), "-x", "c++", str(src),
                   "-x", "none", str(runtime_object(back, cxx, flags)),
                   *(f"-I{d}" for d in back.include_dirs()), "-o", str(out)]
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
    return EmulatedKernel(lib, back, device_of(source, back))


PRELUDE_FAILED = "failed.txt"    # a prelude that did not precompile: what the compiler said


def _cached_folder(kind: str, back: Backend, cxx: str, flags: Sequence[str], text: str) -> Path:
    """The cache folder of a per-backend build product (`kind`: prelude, runtime), keyed by
    the backend, the compiler, the flags, the product's source and every header."""
    digest = _digest([back.name, cxx, " ".join(flags), text] +
                     [f"{n}\0{t}" for n, t in sorted(_headers(back).items())])
    return runtime_cache_dir() / f"{kind}-{back.name}-{digest}"


def _digest(parts: Sequence[str]) -> str:
    """A cache key of the parts, each ended by a separator byte."""
    key = hashlib.sha256()
    for part in parts:
        key.update(part.encode())
        key.update(b"\1")
    return key.hexdigest()[:24]


@functools.lru_cache(maxsize=1)
def linker_flags() -> tuple[str, ...]:
    """How the host compiler is told to link with FAST_LINKER, where it is installed."""
    return (f"-fuse-ld={FAST_LINKER}",) if shutil.which(f"ld.{FAST_LINKER}") else ()


def _object_flags(flags: Sequence[str]) -> list[str]:
    """The build flags less the link's."""
    return [f for f in flags
            if f != "-shared" and not f.startswith("-Wl,") and not f.startswith("-fuse-ld=")]


def _runtime_flags(flags: Sequence[str]) -> list[str]:
    """The runtime object's flags: the kernel's, less the link's, at RUNTIME_OPTIMIZATION."""
    return [RUNTIME_OPTIMIZATION if f == "-Og" else f for f in _object_flags(flags)]


@contextlib.contextmanager
def _one_builder(folder: Path) -> Iterator[None]:
    """Held while `folder` is built: another process (a second pytest worker) that needs it
    at the same moment waits for this build instead of compiling the same thing beside it."""
    with open(folder.parent / f".{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _publish(tmp: Path, folder: Path) -> None:
    """Move a finished build folder into place: atomic, so a concurrent builder's wins."""
    try:
        os.rename(tmp, folder)
    except OSError:
        pass


def precompiled_prelude(back: Backend, cxx: str, flags: Sequence[str]) -> list[str]:
    """The flags that make a kernel build read the emulation runtime (`back.prelude`) from
    a precompiled header instead of parsing it again (a third of a build's time): built
    once per backend, compiler, flags and header contents, in the build cache. [] where it
    cannot be built (the kernel then includes the runtime as text: slower, the same code;
    the failure is kept too, so that it is not tried again before every build).
    Device headers stay out of it: a test may override them beside the source."""
    if not back.prelude:
        return []
    folder = _cached_folder("prelude", back, cxx, flags, back.prelude)
    header = folder / "ptc_prelude.h"
    use = ["-include", str(header)]
    if (folder / "ptc_prelude.h.gch").exists():
        return use
    if (folder / PRELUDE_FAILED).exists():
        return []
    with _one_builder(folder):
        if not folder.exists():
            _precompile(back, cxx, flags, folder)
    return use if (folder / "ptc_prelude.h.gch").exists() else []


def _precompile(back: Backend, cxx: str, flags: Sequence[str], folder: Path) -> None:
    """Build the prelude's precompiled header (or its failure note) into `folder`."""
    tmp = Path(tempfile.mkdtemp(prefix=".prelude-", dir=runtime_cache_dir()))
    try:
        (tmp / "ptc_prelude.h").write_text(back.prelude)
        res = subprocess.run([cxx, *_object_flags(flags), "-x", "c++-header",
                              str(tmp / "ptc_prelude.h"),
                              *(f"-I{d}" for d in back.include_dirs()),
                              "-o", str(tmp / "ptc_prelude.h.gch")],
                             capture_output=True, text=True)
        if res.returncode != 0:
            (tmp / "ptc_prelude.h.gch").unlink(missing_ok=True)
            (tmp / PRELUDE_FAILED).write_text(res.stderr[-4000:])
        _publish(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


RUNTIME_OBJECT = "runtime.o"


def runtime_object(back: Backend, cxx: str, flags: Sequence[str]) -> Path:
    """The object of the backend's emulation runtime (`back.runtime`: the definitions of
    emulate_core/ptc_emulate_core.cc and the backend's own .cc), compiled once per backend,
    compiler, flags and header contents, in the build cache, and linked into every emulated
    kernel: compiling it with each kernel was most of a kernel's build time. It reads the
    device headers as shipped (ptc_types.h for HIP's vector types); a test's override of
    one is seen by the kernel's own code."""
    folder = _cached_folder("runtime", back, cxx, _runtime_flags(flags), back.runtime)
    obj = folder / RUNTIME_OBJECT
    if obj.exists():
        return obj
    with _one_builder(folder):
        if not obj.exists():
            _compile_runtime(back, cxx, flags, folder)
    return obj


def _compile_runtime(back: Backend, cxx: str, flags: Sequence[str], folder: Path) -> None:
    """Compile the runtime object into `folder`."""
    tmp = Path(tempfile.mkdtemp(prefix=".runtime-", dir=runtime_cache_dir()))
    try:
        (tmp / "runtime.cc").write_text(back.runtime)
        res = subprocess.run([cxx, *_runtime_flags(flags), "-c", "-x", "c++",
                              str(tmp / "runtime.cc"),
                              *(f"-I{d}" for d in back.include_dirs()),
                              "-o", str(tmp / RUNTIME_OBJECT)],
                             capture_output=True, text=True)
        if res.returncode != 0:
            first = next((line for line in res.stderr.splitlines() if "error" in line), "")
            raise EmulationError(f"the host build of the kernel failed (its {back.name} "
                                 f"emulation runtime): {first.strip()}\n{res.stderr[-6000:]}")
        _publish(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# what the emulator puts in the accumulator registers of a wgmma in flight (an f32 NaN with
# a payload; ptc_emulate_sm90.h): an output holding it was read from them before the
# wgmma.wait_group that retires the wgmma
IN_FLIGHT_F32 = 0x7FE1F00D


@dataclass
class EmulatedKernel:
    path: Path
    backend: Backend = BACKENDS["cuda"]
    device: object = None      # whose limits the launches are checked against (None: none)

    def __post_init__(self):
        lib = ctypes.CDLL(str(self.path), mode=os.RTLD_LOCAL)
        lib.ptc_launch.restype = ctypes.c_int
        lib.ptc_launch.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_double),
                                   ctypes.POINTER(ctypes.c_longlong), ctypes.c_void_p]
        lib.ptc_emulate_config.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                           ctypes.c_uint, ctypes.c_int]
        lib.ptc_emulate_limits.argtypes = [ctypes.c_int, ctypes.c_char_p]
        lib.ptc_emulate_register_tensor.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        lib.ptc_emulate_error.restype = ctypes.c_char_p
        lib.ptc_emulate_error_count.restype = ctypes.c_longlong
        lib.ptc_kernel_name.restype = ctypes.c_char_p
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
        return self.lib.ptc_kernel_name().decode()

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
        rc = lib.ptc_launch(ptrs, svals, dvals, None)
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


__all__ = ["run_emulated", "build_emulated", "AccessSite", "Backend", "BACKENDS",
           "EmulatedKernel", "EmulatedRun", "EmulationError"]
