"""Register layouts as data: which thread and which of its registers hold element (r, c).

A layout spreads a tile over the threads of a block. It is three lists of *digits*: the
register index of a value within a thread, the lane id within a warp and the warp id are
each read as mixed-radix numbers (innermost digit first), and every digit moves the
element by a fixed stride along the tile's axes:

    coords(reg, lane, warp) = sum over all digits of  digit_value * stride

A lane or warp digit whose stride is zero replicates: those threads hold the same
elements (a row vector is replicated over the lanes that share a row). Register digits
never have a zero stride. Every stride has at most one non-zero component, so the
registers of a thread split into *slots* per axis: a 2-D layout's values form a grid of
ROWS x COLS slots, and a row vector in the row slice of that layout has one value per
row slot. Slots along an axis are numbered in order of increasing stride, so equal
slices of two different 2-D layouts number their values alike.

The vendor fragment layouts (mma.sync, wgmma, MFMA; `ptc.lower.atoms`) and the blocked
layouts of CUDA-core work are all values of this one type; reductions, broadcasts and
conversions are written once over it (docs/lowering.md).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np


@dataclass(frozen=True)
class Digit:
    size: int
    stride: tuple[int, ...]      # one component per tile axis

    def along(self) -> int | None:
        """The axis this digit moves along (None: it replicates)."""
        axes = [a for a, s in enumerate(self.stride) if s]
        if len(axes) > 1:
            raise ValueError(f"digit {self} moves along several axes")
        return axes[0] if axes else None


def digits(*pairs) -> tuple[Digit, ...]:
    return tuple(Digit(size, tuple(stride)) for size, stride in pairs if size > 1)


@dataclass(frozen=True)
class Layout:
    name: str
    shape: tuple[int, ...]           # the extent the layout covers (may exceed the tile's)
    regs: tuple[Digit, ...]
    lanes: tuple[Digit, ...]
    warps: tuple[Digit, ...]
    note: str = field(default="", compare=False)

    def __post_init__(self):
        for d in self.regs + self.lanes + self.warps:
            if len(d.stride) != len(self.shape):
                raise ValueError(f"{self.name}: digit {d} does not match rank {len(self.shape)}")
            d.along()
        for d in self.regs:
            if d.along() is None:
                raise ValueError(f"{self.name}: register digit {d} does not move")

    # ---- sizes ---------------------------------------------------------------------------
    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        """Values per thread."""
        return math.prod(d.size for d in self.regs)

    @property
    def lane_count(self) -> int:
        return math.prod(d.size for d in self.lanes)

    @property
    def warp_count(self) -> int:
        return math.prod(d.size for d in self.warps)

    # ---- the map ---------------------------------------------------------------------------
    @cached_property
    def table(self) -> np.ndarray:
        """coords of every value: int array [warps, lanes, regs, rank] (read-only)."""
        return coordinate_table(self.rank, self.regs, self.lanes, self.warps)

    def same_map(self, other: "Layout") -> bool:
        """Thread by thread and register by register, the same elements."""
        return self is other or same_map(self, other)

    def covers(self, shape: tuple[int, ...]) -> bool:
        """Every element of a tile of `shape` is held by some thread."""
        if len(shape) != self.rank:
            return False
        if self.rank == 0:
            return True
        flat = self.table.reshape(-1, self.rank)
        inside = np.all(flat < np.array(shape), axis=1)
        held = {tuple(x) for x in flat[inside]}
        return len(held) == math.prod(shape)

    def exceeds(self, shape: tuple[int, ...]) -> tuple[bool, ...]:
        """Per axis: does the layout reach past the tile's extent (values to mask)?"""
        return tuple(s > t for s, t in zip(self.shape, shape))

    # ---- slots ------------------------------------------------------------------------------
    def axis_digits(self, axis: int) -> list[Digit]:
        """The register digits that move along `axis`, by increasing stride."""
        return sorted((d for d in self.regs if d.along() == axis), key=lambda d: d.stride[axis])

    def slots(self, axis: int) -> int:
        return math.prod(d.size for d in self.axis_digits(axis))

    def slot_offsets(self, axis: int) -> list[int]:
        """The register part of the coordinate along `axis` of each slot."""
        out = [0]
        for d in self.axis_digits(axis):
            out = [base + k * d.stride[axis] for k in range(d.size) for base in out]
        return out

    def slot_of(self, reg_digit_values: dict[int, int], axis: int) -> int:
        radix, slot = 1, 0
        for d in self.axis_digits(axis):
            slot += reg_digit_values[id(d)] * radix
            radix *= d.size
        return slot

    def register_of_slots(self, slots: tuple[int, ...]) -> int:
        """The register index that holds the value at these slots (one per axis)."""
        values: dict[int, int] = {}
        for axis in range(self.rank):
            rest = slots[axis]
            for d in self.axis_digits(axis):
                values[id(d)] = rest % d.size
                rest //= d.size
        reg, radix = 0, 1
        for d in self.regs:
            reg += values[id(d)] * radix
            radix *= d.size
        return reg

    def replicating(self, axis: int) -> tuple[list[int], list[int]]:
        """(lane xor masks, warp digit positions) over which a reduction along `axis` must
        combine: the lane and warp digits that move along it."""
        masks, warp_digits = [], []
        radix = 1
        for d in self.lanes:
            if d.along() == axis:
                if radix & (radix - 1) or d.size & (d.size - 1):
                    raise ValueError(f"{self.name}: lane digit {d} is not on whole lane bits")
                masks += [radix << b for b in range(int(math.log2(d.size)))]
            radix *= d.size
        for i, d in enumerate(self.warps):
            if d.along() == axis:
                warp_digits.append(i)
        return masks, warp_digits

    # ---- derived layouts ----------------------------------------------------------------------
    def slice(self, axis: int, name: str | None = None) -> "Layout":
        """The layout of a value reduced along `axis` (or broadcast along it): the register
        digits along it go, the lanes and warps along it replicate."""
        return sliced(self, axis, name)

    def collapsed(self, axis: int, name: str | None = None) -> "Layout":
        """The layout of a value of extent 1 along `axis` read where the tile is wider (a
        named broadcast, `c = x[:, None]` used with a full tile): the slice along `axis`
        with the axis kept at extent 1, so every thread holds the value of each of its
        other coordinates."""
        return collapsed(self, axis, name)

    def transposed(self, name: str, note: str = "") -> "Layout":
        """The layout of the 2-D tile's transpose: the same threads and registers hold
        element (c, r) that held (r, c)."""
        def flip(ds: tuple[Digit, ...]) -> tuple[Digit, ...]:
            return tuple(Digit(d.size, d.stride[::-1]) for d in ds)
        return Layout(name, self.shape[::-1], flip(self.regs), flip(self.lanes),
                      flip(self.warps), note=note)

    def renamed(self, name: str, note: str | None = None) -> "Layout":
        return Layout(name, self.shape, self.regs, self.lanes, self.warps,
                      self.note if note is None else note)

    def describe(self) -> str:
        def ds(x):
            return " ".join(f"{d.size}x{list(d.stride)}" for d in x) or "-"
        return (f"{list(self.shape)} regs {ds(self.regs)} | lanes {ds(self.lanes)} | "
                f"warps {ds(self.warps)}")


def read_layout(target: Layout, stmt_shape: tuple[int, ...], axes: tuple[int, ...],
                shape: tuple[int, ...]) -> Layout:
    """The layout in which a statement of `stmt_shape` computing in `target` reads a value
    of `shape` that it broadcasts along `axes` (its expands): sliced along each of those
    axes, then along the leading ones where the value has a lower rank (NumPy aligns on
    the right), then collapsed along each axis where the value has extent 1 and the
    statement more (every thread needs the value at its other coordinates)."""
    want = target
    for axis in sorted(axes, reverse=True):
        want = want.slice(axis, f"{want.name}_s{axis}")
    outer = [x for i, x in enumerate(stmt_shape) if i not in axes]
    while want.rank > len(shape):
        want = want.slice(0, f"{want.name}_s0")
        outer = outer[1:]
    for axis, extent in enumerate(shape):
        if extent == 1 and outer[axis] != 1:
            want = want.collapsed(axis, f"{want.name}_b{axis}")
    return want


# ---- memoized: layout assignment slices and compares the same layouts for every tiling ----
@functools.lru_cache(maxsize=4096)
def sliced(layout: Layout, axis: int, name: str | None = None) -> Layout:
    """`layout.slice(axis, name)`."""
    def drop(d: Digit) -> Digit:
        return Digit(d.size, d.stride[:axis] + d.stride[axis + 1:])

    regs = [drop(d) for d in layout.regs if d.along() != axis]
    regs.sort(key=lambda d: max(d.stride, default=0))   # canonical: slot order
    return Layout(name or f"{layout.name}.slice{axis}",
                  layout.shape[:axis] + layout.shape[axis + 1:], tuple(regs),
                  tuple(drop(d) for d in layout.lanes), tuple(drop(d) for d in layout.warps),
                  note=f"slice {axis} of {layout.name}")


@functools.lru_cache(maxsize=4096)
def collapsed(layout: Layout, axis: int, name: str | None = None) -> Layout:
    """`layout.collapsed(axis, name)`."""
    def flat(d: Digit) -> Digit:
        return Digit(d.size, d.stride[:axis] + (0,) + d.stride[axis + 1:])

    regs = [d for d in layout.regs if d.along() != axis]
    regs.sort(key=lambda d: max(d.stride, default=0))   # canonical: slot order
    return Layout(name or f"{layout.name}.bcast{axis}",
                  layout.shape[:axis] + (1,) + layout.shape[axis + 1:], tuple(regs),
                  tuple(flat(d) for d in layout.lanes), tuple(flat(d) for d in layout.warps),
                  note=f"{layout.name} broadcast along axis {axis}")


@functools.lru_cache(maxsize=8192)
def same_map(a: Layout, b: Layout) -> bool:
    """`a.same_map(b)`: thread by thread and register by register, the same elements."""
    return (a.shape == b.shape and a.size == b.size and a.lane_count == b.lane_count
            and a.warp_count == b.warp_count and np.array_equal(a.table, b.table))


@functools.lru_cache(maxsize=4096)
def coordinate_table(rank: int, regs: tuple[Digit, ...], lanes: tuple[Digit, ...],
                     warps: tuple[Digit, ...]) -> np.ndarray:
    """A layout's `table`, shared by the layouts with the same digits (read-only)."""
    def grid(ds: tuple[Digit, ...]) -> np.ndarray:
        n = math.prod(d.size for d in ds)
        out = np.zeros((n, rank), dtype=np.int64)
        radix = 1
        for d in ds:
            value = (np.arange(n) // radix) % d.size
            out += value[:, None] * np.array(d.stride, dtype=np.int64)[None, :]
            radix *= d.size
        return out
    w, ls, r = grid(warps), grid(lanes), grid(regs)
    table = w[:, None, None, :] + ls[None, :, None, :] + r[None, None, :, :]
    table.flags.writeable = False
    return table


# ---- C expressions of a layout (printed into the kernel as a small struct) ----------------
def _mixed(var: str, radix: int, size: int, outermost: bool) -> str:
    value = var if radix == 1 else f"{var} / {radix}"
    if not outermost:
        value = f"({value}) % {size}" if radix != 1 else f"{var} % {size}"
    return value


def _terms(parts: list[tuple[str, int]]) -> str:
    """sum of value * factor, simplified."""
    out = []
    for value, factor in parts:
        if factor == 0:
            continue
        out.append(value if factor == 1 else f"({value}) * {factor}")
    return " + ".join(out) or "0"


def register_index_expr(layout: Layout, slot_vars: tuple[str, ...]) -> str:
    """C expression of the register index at the given slot variables (one per axis)."""
    parts, radix = [], 1
    positions = {}
    for axis in range(layout.rank):
        r = 1
        ds = layout.axis_digits(axis)
        for k, d in enumerate(ds):
            positions[id(d)] = (slot_vars[axis], r, d.size, k == len(ds) - 1)
            r *= d.size
    for d in layout.regs:
        var, r, size, last = positions[id(d)]
        parts.append((_mixed(var, r, size, last), radix))
        radix *= d.size
    return _terms(parts)


def slot_offset_expr(layout: Layout, axis: int, var: str) -> str:
    """C expression of the register part of the coordinate along `axis` of slot `var`."""
    ds = layout.axis_digits(axis)
    parts, r = [], 1
    for k, d in enumerate(ds):
        parts.append((_mixed(var, r, d.size, k == len(ds) - 1), d.stride[axis]))
        r *= d.size
    return _terms(parts)


def thread_offset_expr(layout: Layout, axis: int, lane: str = "lane", warp: str = "warp") -> str:
    """C expression of the thread part of the coordinate along `axis`."""
    parts = []
    for ds, var in ((layout.lanes, lane), (layout.warps, warp)):
        r = 1
        for k, d in enumerate(ds):
            last = k == len(ds) - 1 and var == warp   # warp ids never exceed the count
            parts.append((_mixed(var, r, d.size, last), d.stride[axis]))
            r *= d.size
    return _terms(parts)


# ---- constructors ------------------------------------------------------------------------
def scalar(warps: int, warp_size: int) -> Layout:
    """A 0-D value every thread holds."""
    return Layout("scalar", (), (), digits((warp_size, ())), digits((warps, ())))


def blocked(shape: tuple[int, ...], warps: int, warp_size: int, vector: int,
            name: str = "blocked") -> Layout:
    """CUDA-core work on a 1-D or 2-D tile: each thread holds `vector` consecutive
    elements of a row, lanes run along the row, warps down the rows (then along the row
    when there are more warps than rows), and the pattern repeats to cover the tile."""
    if len(shape) == 1:
        n = shape[0]
        vec = max(1, min(vector, _pow2_floor(n)))
        reps = math.ceil(n / (vec * warp_size * warps))
        return Layout(name, (vec * warp_size * warps * reps,),
                      digits((vec, (1,)), (reps, (vec * warp_size * warps,))),
                      digits((warp_size, (vec,))), digits((warps, (vec * warp_size,))))
    rows, cols = shape
    vec = max(1, min(vector, _pow2_floor(cols)))
    lane_cols = min(warp_size, _pow2_ceil(math.ceil(cols / vec)))
    lane_rows = warp_size // lane_cols
    warp_rows = min(warps, _pow2_ceil(math.ceil(rows / lane_rows)))
    warp_cols = warps // warp_rows
    span_c = vec * lane_cols * warp_cols
    span_r = lane_rows * warp_rows
    rep_c, rep_r = math.ceil(cols / span_c), math.ceil(rows / span_r)
    return Layout(name, (span_r * rep_r, span_c * rep_c),
                  digits((vec, (0, 1)), (rep_c, (0, span_c)), (rep_r, (span_r, 0))),
                  digits((lane_cols, (0, vec)), (lane_rows, (1, 0))),
                  digits((warp_cols, (0, vec * lane_cols)), (warp_rows, (lane_rows, 0))))


def _pow2_ceil(n: int) -> int:
    return 1 << max(0, (max(n, 1) - 1).bit_length())


def _pow2_floor(n: int) -> int:
    return 1 << (max(n, 1).bit_length() - 1)
