"""What every emulated build shares (ptc.render.emulate): the host compiler, the cache
folders, and the two per-backend products each kernel's build reads -- the emulation
runtime's precompiled header (the prelude) and its object -- each built once per backend,
compiler, flags and header contents, and kept in the cache by that key."""
from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator, Sequence

from .errors import EmulationError

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
CORE_HEADERS = TEMPLATES / "emulate_core"     # the runtime every backend's emulation shares
# the runtime object (`runtime_object`) is compiled once per backend, so it takes -O2: the
# emulated matrix instructions, operand reads and the launcher live there (an emulated
# conv2d ran 1.2 -> 0.74 s on sm80, 1.5 -> 0.7 s for an sm90 mma.sync plan)
RUNTIME_OPTIMIZATION = "-O2"
# gold links an emulated kernel in a third of the default linker's time (0.10 -> 0.03 s, an
# eighth of a build); the default linker where binutils has none
FAST_LINKER = "gold"


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


def headers(backend) -> dict[str, str]:
    """Every header (and runtime definition file) a build of `backend` may read, by a name
    unique among them."""
    files = backend.device_headers() + [p for folder in (*backend.emulate_headers, CORE_HEADERS)
                                        for pattern in ("*.h", "*.cc")
                                        for p in sorted(folder.glob(pattern))]
    return {_header_name(p, backend): p.read_text() for p in files}


def _header_name(path: Path, backend) -> str:
    """templates/common/x.h -> common/x.h; a backend's own (ptc/targets/hip/templates/mfma.h)
    -> hip/mfma.h: the names the build key hashes, unique across the folders."""
    if TEMPLATES in path.parents:
        return str(path.relative_to(TEMPLATES))
    folder = next(f for f in backend.templates if f in path.parents)
    return f"{folder.parent.name}/{path.relative_to(folder)}"


PRELUDE_FAILED = "failed.txt"    # a prelude that did not precompile: what the compiler said


def cached_folder(kind: str, back, cxx: str, flags: Sequence[str], text: str) -> Path:
    """The cache folder of a per-backend build product (`kind`: prelude, runtime), keyed by
    the backend, the compiler, the flags, the product's source and every header."""
    key = digest([back.name, cxx, " ".join(flags), text] +
                 [f"{n}\0{t}" for n, t in sorted(headers(back).items())])
    return runtime_cache_dir() / f"{kind}-{back.name}-{key}"


def digest(parts: Sequence[str]) -> str:
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


def object_flags(flags: Sequence[str]) -> list[str]:
    """The build flags less the link's."""
    return [f for f in flags
            if f != "-shared" and not f.startswith("-Wl,") and not f.startswith("-fuse-ld=")]


def runtime_flags(flags: Sequence[str]) -> list[str]:
    """The runtime object's flags: the kernel's, less the link's, at RUNTIME_OPTIMIZATION."""
    return [RUNTIME_OPTIMIZATION if f == "-Og" else f for f in object_flags(flags)]


@contextlib.contextmanager
def one_builder(folder: Path) -> Iterator[None]:
    """Held while `folder` is built: another process (a second pytest worker) that needs it
    at the same moment waits for this build instead of compiling the same thing beside it."""
    with open(folder.parent / f".{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def publish(tmp: Path, folder: Path) -> None:
    """Move a finished build folder into place: atomic, so a concurrent builder's wins."""
    try:
        os.rename(tmp, folder)
    except OSError:
        pass


def precompiled_prelude(back, cxx: str, flags: Sequence[str]) -> list[str]:
    """The flags that make a kernel build read the emulation runtime (`back.prelude`) from
    a precompiled header instead of parsing it again (a third of a build's time): built
    once per backend, compiler, flags and header contents, in the build cache. [] where it
    cannot be built (the kernel then includes the runtime as text: slower, the same code;
    the failure is kept too, so that it is not tried again before every build).
    Device headers stay out of it: a test may override them beside the source."""
    if not back.prelude:
        return []
    folder = cached_folder("prelude", back, cxx, flags, back.prelude)
    header = folder / "ptc_prelude.h"
    use = ["-include", str(header)]
    if (folder / "ptc_prelude.h.gch").exists():
        return use
    if (folder / PRELUDE_FAILED).exists():
        return []
    with one_builder(folder):
        if not folder.exists():
            _precompile(back, cxx, flags, folder)
    return use if (folder / "ptc_prelude.h.gch").exists() else []


def _precompile(back, cxx: str, flags: Sequence[str], folder: Path) -> None:
    """Build the prelude's precompiled header (or its failure note) into `folder`."""
    tmp = Path(tempfile.mkdtemp(prefix=".prelude-", dir=runtime_cache_dir()))
    try:
        (tmp / "ptc_prelude.h").write_text(back.prelude)
        res = subprocess.run([cxx, *object_flags(flags), "-x", "c++-header",
                              str(tmp / "ptc_prelude.h"),
                              *(f"-I{d}" for d in back.include_dirs()),
                              "-o", str(tmp / "ptc_prelude.h.gch")],
                             capture_output=True, text=True)
        if res.returncode != 0:
            (tmp / "ptc_prelude.h.gch").unlink(missing_ok=True)
            (tmp / PRELUDE_FAILED).write_text(res.stderr[-4000:])
        publish(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


RUNTIME_OBJECT = "runtime.o"


def runtime_object(back, cxx: str, flags: Sequence[str]) -> Path:
    """The object of the backend's emulation runtime (`back.runtime`: the definitions of
    emulate_core/ptc_emulate_core.cc and the backend's own .cc), compiled once per backend,
    compiler, flags and header contents, in the build cache, and linked into every emulated
    kernel: compiling it with each kernel was most of a kernel's build time. It reads the
    device headers as shipped (ptc_types.h for HIP's vector types); a test's override of
    one is seen by the kernel's own code."""
    folder = cached_folder("runtime", back, cxx, runtime_flags(flags), back.runtime)
    obj = folder / RUNTIME_OBJECT
    if obj.exists():
        return obj
    with one_builder(folder):
        if not obj.exists():
            _compile_runtime(back, cxx, flags, folder)
    return obj


def _compile_runtime(back, cxx: str, flags: Sequence[str], folder: Path) -> None:
    """Compile the runtime object into `folder`."""
    tmp = Path(tempfile.mkdtemp(prefix=".runtime-", dir=runtime_cache_dir()))
    try:
        (tmp / "runtime.cc").write_text(back.runtime)
        res = subprocess.run([cxx, *runtime_flags(flags), "-c", "-x", "c++",
                              str(tmp / "runtime.cc"),
                              *(f"-I{d}" for d in back.include_dirs()),
                              "-o", str(tmp / RUNTIME_OBJECT)],
                             capture_output=True, text=True)
        if res.returncode != 0:
            first = next((line for line in res.stderr.splitlines() if "error" in line), "")
            raise EmulationError(f"the host build of the kernel failed (its {back.name} "
                                 f"emulation runtime): {first.strip()}\n{res.stderr[-6000:]}")
        publish(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
