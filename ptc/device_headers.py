"""Where a kernel's device headers come from: its backend's templates folder
(ptc.targets.<backend>/templates), and templates/common, the device code every backend
shares (ptc_numerics.h: the language's integer semantics, FP8 codes and conversions;
global_to_shared_sync.h: the element-wise copies). A build folder holds them side by side,
so their names are unique across the two."""
from __future__ import annotations

from pathlib import Path

TEMPLATES = Path(__file__).resolve().parent / "templates"
SHARED = TEMPLATES / "common"
SUFFIXES = (".cuh", ".h", ".hpp")


def device_headers(folder: Path) -> list[Path]:
    """The headers of a backend's templates `folder` and of templates/common, by name."""
    found = [p for d in (folder, SHARED) for p in d.iterdir()
             if p.suffix in SUFFIXES and p.is_file()]
    return sorted(found, key=lambda p: p.name)
