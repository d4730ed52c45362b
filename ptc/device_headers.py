"""Where a kernel's device headers come from: its backend's templates folder
(ptc.targets.<backend>/templates), and templates/common, the device code every backend
shares (ptc_numerics.h: the language's integer semantics, FP8 codes and conversions;
global_to_shared_sync.h: the element-wise copies). A build folder holds them side by side,
so their names are unique across the two."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

TEMPLATES = Path(__file__).resolve().parent / "templates"
SHARED = TEMPLATES / "common"
SUFFIXES = (".cuh", ".h", ".hpp")


def device_headers(folders: Sequence[Path]) -> list[Path]:
    """The headers of a backend's templates `folders` (its own, then its base's: the first
    of a name wins) and of templates/common, by name."""
    found: dict[str, Path] = {}
    for d in (*folders, SHARED):
        for p in sorted(d.iterdir()):
            if p.suffix in SUFFIXES and p.is_file():
                found.setdefault(p.name, p)
    return sorted(found.values(), key=lambda p: p.name)
