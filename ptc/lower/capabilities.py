"""What a renderer can build (`Capabilities`: plan styles, mma atoms, copy units,
launches), and the error the lowering raises for a plan it cannot build for a device and
renderer (`LoweringError`; ptc.lower.stage turns a refusal into one)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..devices import Device, UnitKind
from ..sched.plan import Plan, Style


# the bytes a buffer resource's 32-bit offsets reach (a chunk outside the tensor is read at
# this offset: past the range, zeros)
BUFFER_BYTES = 2 ** 31


class LoweringError(Exception):
    """The plan cannot be lowered for this device and renderer (the message says why)."""


@dataclass(frozen=True)
class Capabilities:
    """What a renderer can print: plan styles, mma atoms (by instruction name), copy
    units, and launches."""

    backend: str
    styles: frozenset[Style]
    atoms: frozenset[str]
    copy_units: frozenset[str]
    persistent: bool = False
    rasters: frozenset[str] = frozenset({"row"})
    # async copies staged in registers (CopyTile.staged): one copy per buffer in flight
    staged_copies: bool = False
    # operand tiles stored transposed where the atom reads k contiguously (swizzle k8t)
    transposed_operands: bool = False
    # products computed transposed, out^T = b^T a^T (atoms.Tiling.swapped), where that
    # leaves a result in the layout its reader needs
    swapped_operands: bool = False
    # staged copies read through a buffer resource over the tensor (HIP: a MUBUF load past its
    # range returns zeros, so a chunk outside the tensor costs no branch); its 32-bit offsets
    # need the tensor below BUFFER_BYTES, a launch-time condition of the vector copies.
    # `buffer_rule(tile)`: which tiles do, and over what ("tile", "tensor", "": none); None:
    # the renderer loads through no buffer resource
    buffer_rule: Callable | None = field(default=None, compare=False)
    # the 16-bit float dtypes whose +, - and * (and integer -> 16-bit conversions) the target
    # computes in 16 bits (LoweredKernel.arith16); the others compute in f32 and round
    native16: frozenset[str] = frozenset()
    # the 16-bit float dtypes whose +, - and * it also computes two values at a time, with
    # integers converted through the exponent bias (ir.Compute.pairs, ptc.lower.pairs)
    packed16: frozenset[str] = frozenset()
    # a loop's copies whose address and extents move by a step each trip: computed at trip
    # 0 before the loop, each trip adding its step (ir.CopyTile.hoisted, ptc.lower.hoist_copies)
    hoisted_copies: bool = False

    def buffers(self, tile) -> str:
        """How a staged copy of `tile` (a GlobalTile) loads through a buffer resource
        (ir.CopyTile.resource): the renderer's rule (`buffer_rule`, its backend's), ""
        where it has none."""
        return self.buffer_rule(tile) if self.buffer_loads else ""

    @property
    def buffer_loads(self) -> bool:
        """Whether staged copies may read through a buffer resource (the renderer has a
        rule for which)."""
        return self.buffer_rule is not None

    def arith16(self) -> tuple[str, ...]:
        return tuple(sorted(self.native16))

    def refuses(self, plan: Plan, device: Device) -> str | None:
        """Why this renderer cannot build `plan` (None: it can)."""
        if plan.style not in self.styles:
            return f"the {self.backend} renderer does not build {plan.style} plans yet"
        for _, step in plan.steps():
            unit = device.unit(step.unit) if not step.is_sync else None
            if unit is not None and unit.kind == UnitKind.COPY \
                    and unit.name not in self.copy_units:
                return f"the {self.backend} renderer does not issue copies on {unit.name}"
        if self.staged_copies and plan.stages > 2:
            return (f"the {self.backend} renderer stages copies in registers, one in flight "
                    f"per buffer: 2 pipeline stages at most, not {plan.stages}")
        if plan.launch.persistent and not self.persistent:
            return f"the {self.backend} renderer does not build persistent launches"
        if plan.launch.raster not in self.rasters:
            return (f"the {self.backend} renderer walks the grid in "
                    f"{' or '.join(sorted(self.rasters))} order, not {plan.launch.raster}")
        return None
