"""The toolchain of each backend (a device YAML's `backend`): one line per backend."""
from __future__ import annotations

from . import hip, nvcc
from .errors import BuildError
from .toolchain import Toolchain

TOOLCHAINS: dict[str, Toolchain] = {
    "cuda": nvcc.TOOLCHAIN,
    "hip": hip.TOOLCHAIN,
}


def toolchain(backend: str) -> Toolchain:
    try:
        return TOOLCHAINS[backend]
    except KeyError:
        raise BuildError(f"ptc builds no {backend} targets (it builds "
                         f"{', '.join(sorted(TOOLCHAINS))})") from None
