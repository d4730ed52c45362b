"""The toolchain of each backend (a device YAML's `backend`): its package's TOOLCHAIN."""
from __future__ import annotations

from .. import targets
from .errors import BuildError
from .toolchain import Toolchain


def toolchain(backend: str) -> Toolchain:
    try:
        return targets.toolchain(backend)
    except targets.UnknownBackend:
        raise BuildError(f"ptc builds no {backend} targets (it builds "
                         f"{', '.join(sorted(targets.names()))})") from None


def toolchains() -> tuple[Toolchain, ...]:
    """Every registered backend's toolchain."""
    return tuple(toolchain(name) for name in targets.names())
