"""The backends ptc renders for: one package each, registered by one line in BACKENDS.

A backend package (ptc/targets/cuda, ptc/targets/hip; tests/toy_backend is a fifth, a
test's) holds everything that names its target:

    __init__.py    BACKEND, a `Backend`: the vendor, arch names and instruction families
                   its device YAMLs may state, and its templates folder. It imports nothing
                   heavy, since the device loader reads it.
    render.py      RENDERER: its renderer (ptc.render.c_source.CSourceRenderer) with the
                   capabilities the lowering builds plans for
    atoms.py       ATOMS: its matrix instructions and their fragment layouts (ptc.lower.atoms;
                   optional: a backend without its own matrix unit has none)
    copy_rules.py  RULES: what its bulk tensor copies and per-thread asynchronous copies move
                   (ptc.lower.tma.CopyRules; optional: without it, no plan loads by a bulk
                   tensor copy)
    toolchain.py   TOOLCHAIN: how its build folders are built (ptc.runtime.toolchain.Toolchain),
                   and which GPUs of its kind the machine has (a driver.py of its own)
    emulation.py   EMULATION: how the CPU emulator builds its kernels (ptc.render.emulate)
    templates/     its kernel and harness templates and device headers; templates/emulate
                   holds the emulator's shim

ptc names no backend anywhere else: the device YAML's `backend` selects the package, and
the renderer, toolchain and emulator read what it declares.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

BACKENDS: dict[str, str] = {
    "cuda": "ptc.targets.cuda",
    "hip": "ptc.targets.hip",
}


class UnknownBackend(LookupError):
    """A backend no package is registered for."""


@dataclass(frozen=True)
class Backend:
    """What a backend's device YAMLs may say, and where its files are."""

    name: str                    # the device YAML's `backend`
    vendor: str                  # the device YAML's `vendor`
    arch: str                    # a regular expression of its arch names (sm_\d+[af]?)
    arch_example: str            # for messages: "sm_NN, e.g. sm_90a"
    features: tuple[str, ...]    # the instruction families a device may state (`features`)
    templates: Path              # kernel and harness templates, device headers, emulate/
    # a backend whose templates, device headers and emulation headers this one builds on:
    # found after its own, so a header of the same name here replaces the base's
    base: str | None = None

    @property
    def emulate_headers(self) -> Path:
        return self.templates / "emulate"

    def template_folders(self) -> tuple[Path, ...]:
        """Its templates folder, then its base's (and theirs), searched in that order."""
        return (self.templates,) + (backend(self.base).template_folders() if self.base else ())

    def emulate_folders(self) -> tuple[Path, ...]:
        """The emulation shims of its template folders (those that have one), in order."""
        return tuple(folder / "emulate" for folder in self.template_folders()
                     if (folder / "emulate").is_dir())


def names() -> tuple[str, ...]:
    return tuple(BACKENDS)


def _package(name: str) -> str:
    try:
        return BACKENDS[name]
    except KeyError:
        raise UnknownBackend(f"no backend named {name!r} (ptc has "
                             f"{', '.join(sorted(BACKENDS))})") from None


def _part(name: str, module: str) -> ModuleType:
    return importlib.import_module(f"{_package(name)}.{module}")


def backend(name: str) -> Backend:
    """The Backend of a device YAML's `backend` (UnknownBackend when none is registered)."""
    return importlib.import_module(_package(name)).BACKEND


def backends() -> tuple[Backend, ...]:
    return tuple(backend(name) for name in BACKENDS)


def renderer(name: str):
    """The renderer class of backend `name` (its render.py's RENDERER)."""
    return _part(name, "render").RENDERER


def toolchain(name: str):
    """The Toolchain of backend `name` (its toolchain.py's TOOLCHAIN)."""
    return _part(name, "toolchain").TOOLCHAIN


def _optional(name: str, module: str, attribute: str, default):
    """`attribute` of backend `name`'s optional `module`, `default` where it has none (an
    import error inside the module itself is raised)."""
    try:
        return getattr(_part(name, module), attribute)
    except ModuleNotFoundError as exc:
        if exc.name != f"{_package(name)}.{module}":
            raise
        return default


def atoms(name: str) -> tuple:
    """The matrix instructions of backend `name` (its atoms.py's ATOMS; () without one)."""
    return _optional(name, "atoms", "ATOMS", ())


def copy_rules(name: str):
    """What backend `name`'s copy units move (its copy_rules.py's RULES; None without one)."""
    return _optional(name, "copy_rules", "RULES", None)


def emulation(name: str):
    """How the CPU emulator builds backend `name`'s kernels (its emulation.py's EMULATION)."""
    return _part(name, "emulation").EMULATION


__all__ = ["BACKENDS", "Backend", "UnknownBackend", "atoms", "backend", "backends", "copy_rules",
           "emulation", "names", "renderer", "toolchain"]
