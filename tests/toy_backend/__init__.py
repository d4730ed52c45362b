"""A fifth backend, written as a new target's author would: this folder, one device YAML
(toy1.yaml) and one registry line (`ptc.targets.BACKENDS["toy"] = "toy_backend"`), and
nothing in ptc/ edited (tests/test_toy_backend.py).

The toy is a small GPU of vendor "toyco" with CUDA's dialect: its renderer prints through
CUDA's body printer and device headers (`base="cuda"`), under its own kernel template, its
own capabilities (multistage and sequential plans, mma.sync m16n8k16 only, copies on its
per-thread copy unit, named `lsu`), and its own words for warps, blocks and SMs. It has no
compiler: the CPU emulator runs it.
"""
from pathlib import Path

from ptc.targets import Backend

BACKEND = Backend(
    name="toy", vendor="toyco", arch=r"toy\d+", arch_example="toyN, e.g. toy1",
    features=("cp_async", "ldmatrix", "mma_sync", "named_barrier"),
    templates=Path(__file__).resolve().parent / "templates", base="cuda")
