"""The runtime: from a .pt file to a kernel that Python calls on the GPU.

    import ptc
    k = ptc.compile("samples/gemm.pt", target="sm80", shapes={"M": 4096})
    outputs = k(A, B)        # see ptc.runtime.kernel for arrays, out= and timing

`compile` checks, schedules and renders the kernel (the driver's stages), writes a build
directory (ptc.runtime.build: kernel.cu or kernel.hip, the harness, headers, plan.json,
build.sh) and builds it with the target's toolchain (nvcc; hipcc or clang for HIP:
ptc.runtime.toolchains). Without `out_dir` the directory lives in a cache keyed by its
contents ($PTC_CACHE_DIR, else ~/.cache/ptc), so compiling the same thing again is free.
Building needs the compiler but no GPU; calling needs a GPU (NoDevice otherwise).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from .arrays import DeviceArray
from .build import (LIBRARY, BuildResult, backend_of, build, build_staged, is_build_dir,
                    read_manifest, sass, write_build_dir)
from .errors import ArgumentError, BuildError, LaunchError, NoDevice, RuntimeFailure
from .kernel import CompiledKernel, Timing
from .signature import Signature, signature_of
from .toolchains import toolchain
from ..stage_cache import cache_root

__all__ = ["ArgumentError", "BuildError", "CompiledKernel", "DeviceArray", "LaunchError",
           "NoDevice", "Prepared", "RuntimeFailure", "Timing", "build", "build_prepared",
           "compile", "load", "prepare", "sass", "write_build_dir"]


@dataclass(frozen=True)
class Prepared:
    """Everything a build directory is written from."""

    kernel: object            # ptc.sema.typed.TypedKernel
    device: object            # ptc.devices.Device
    target: str
    plans: tuple              # ptc.sched.plan.Plan, one per grid in launch order
    graphs: tuple             # their sTask-graphs
    source: str               # kernel.cu / kernel.hip
    signature: Signature
    notes: tuple[str, ...] = ()   # from rendering: better-ranked plans it could not take

    @property
    def plan_json(self) -> str:
        from ..sched.plan import plans_to_json

        return plans_to_json(self.plans)

    @property
    def tiles(self) -> dict[str, int]:
        """Every grid's tile sizes (the interpreter takes them together)."""
        return {k: v for plan in self.plans for k, v in plan.tiles}


def prepare(path: str | Path, target: str = "sm80", *, shapes: Mapping[str, int] | None = None,
            tiles: Mapping[str, int] | None = None, kernel: str | None = None,
            schedule: str | Path | None = None, kernel_source: str | None = None,
            progress: bool = False) -> Prepared:
    """check -> schedule (or the pinned plans `schedule`) -> render, for a target the runtime
    builds. `kernel_source` replaces the rendered kernel (a hand-written one, same ABI)."""
    from .. import driver
    from ..devices import get_device

    typed = driver.select_kernel(driver.check_file(path, shapes), kernel)
    device = get_device(target)
    toolchain(device.backend)         # BuildError for a backend ptc cannot build
    if kernel_source is None:
        source, plans, graphs, device, notes = driver.render(
            typed, target, shapes=shapes, tiles=tiles, schedule_file=schedule,
            progress=progress)
        return Prepared(typed, device, target, plans, graphs, source,
                        signature_of(typed, plans), tuple(notes))
    if schedule is not None:
        pairs = driver.pinned_plans(typed, target, schedule)
    else:
        pairs = tuple((r.best.plan, r.best.graph) for r in driver.schedule_grids(
            typed, target, shapes=shapes, tiles=tiles, progress=progress))
    return Prepared(typed, device, target, tuple(p for p, _ in pairs),
                    tuple(g for _, g in pairs), kernel_source,
                    signature_of(typed, tuple(p for p, _ in pairs)))


def compile(path: str | Path, target: str = "sm80", shapes: Mapping[str, int] | None = None,
            tiles: Mapping[str, int] | None = None, kernel: str | None = None,
            out_dir: str | Path | None = None, *, schedule: str | Path | None = None,
            kernel_source: str | None = None) -> CompiledKernel:
    """Compile kernel `kernel` (default: the only one) of the .pt file at `path` for
    `target` and build it; returns the CompiledKernel. `shapes` sets the problem size the
    schedule is searched for (and the default of dims no argument gives); `tiles` pins
    tile sizes; `schedule` pins a plan (JSON). Raises CompileError subclasses."""
    prepared = prepare(path, target, shapes=shapes, tiles=tiles, kernel=kernel,
                       schedule=schedule, kernel_source=kernel_source)
    return build_prepared(prepared, out_dir, shapes=shapes)


def build_prepared(prepared: Prepared, out_dir: str | Path | None = None, *,
                   shapes: Mapping[str, int] | None = None, echo=None) -> CompiledKernel:
    arch = prepared.device.arch
    backend = prepared.device.backend
    plan_json = prepared.plan_json
    if out_dir is None:
        folder = cache_dir(prepared, plan_json)
        result = cached_build(folder)
    else:
        folder, result = Path(out_dir), None
    if result is None:
        toolchain(backend).find(arch)   # before writing anything: no compiler, no half-built
                                        # directory

        def write(where: Path) -> None:
            write_build_dir(where, kernel_source=prepared.source,
                            signature=prepared.signature, arch=arch, target=prepared.target,
                            plan_json=plan_json, backend=backend)
        if out_dir is None:
            write(folder)
            result = build(folder, arch, echo=echo)
        else:                # -o DIR: an existing build is replaced only by a working one
            result = build_staged(folder, write, arch, echo=echo)
    return CompiledKernel(folder, prepared.signature, arch=arch, target=prepared.target,
                          plans=prepared.plans, build=result, shapes=shapes)


# ---- the cache ----------------------------------------------------------------------------
def cache_dir(prepared: Prepared, plan_json: str) -> Path:
    from .build import headers
    from .harness import render_harness, render_signature

    backend, arch = prepared.device.backend, prepared.device.arch
    chain = toolchain(backend)
    h = hashlib.sha256()
    for part in (prepared.source, render_harness(backend), render_signature(prepared.signature),
                 plan_json,
                 prepared.signature.to_json(), repr(chain.steps(arch, chain.named(arch)))):
        h.update(part.encode())
        h.update(b"\0")
    for header in headers(backend):
        h.update(header.read_bytes())
    return cache_root() / f"{prepared.signature.kernel}-{prepared.device.name}-{h.hexdigest()[:16]}"


def cached_build(folder: Path) -> BuildResult | None:
    """The earlier successful build in `folder`, if it is complete."""
    if not (is_build_dir(folder) and (folder / LIBRARY).is_file()
            and (folder / "build.json").is_file()):
        return None
    backend = backend_of(folder)
    try:
        chain = toolchain(backend)
        info = json.loads((folder / "build.json").read_text())
        report = chain.parse((folder / chain.report_file).read_text())
    except (OSError, ValueError, BuildError):
        return None
    return BuildResult(folder, info.get("arch", ""),
                       tuple(tuple(c.split()) for c in info.get("commands", [])), report,
                       float(info.get("seconds", 0.0)), backend)


def load(directory: str | Path) -> CompiledKernel:
    """A CompiledKernel from a directory built earlier (by ptc build or compile)."""
    folder = Path(directory)
    result = cached_build(folder)
    if result is None:
        raise BuildError(f"{folder} is not a built ptc directory (no {LIBRARY} or build.json)",
                         hint="build it with `ptc build FILE -o DIR`")
    signature = Signature.from_json((folder / "signature.json").read_text())
    manifest = read_manifest(folder)
    return CompiledKernel(folder, signature, arch=manifest.get("arch", result.arch),
                          target=manifest.get("target", ""), build=result,
                          backend=result.backend)
