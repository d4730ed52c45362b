"""The `ptc` command line: check, run and compile .pt kernels.

One command group (`cli`, in ptc.cli.common, which also documents the exit statuses) that
each module adds its commands to when imported: check (ptc.cli.check), run (ptc.cli.run),
compile, devices and explain (ptc.cli.schedule), build and bench (ptc.cli.build), tune and
calibrate (ptc.cli.tune), coverage (ptc.cli.coverage). `main` is the console script.
"""
from __future__ import annotations

# importing a module registers its commands on the group, in this order
from . import build, coverage, schedule, tune  # noqa: F401
from . import check, run  # noqa: F401
from .common import Assignments, check_source  # noqa: F401  (re-exported)
from .common import cli


def main(argv: list[str] | None = None) -> None:
    """The `ptc` console script."""
    cli.main(args=argv, prog_name="ptc")
