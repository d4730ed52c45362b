"""Matrix-instruction fragment layouts, as data (the vendors' documented layouts).

An atom is one matrix instruction: D[m, n] = A[m, k] @ B[k, n] + C[m, n] issued by
`threads` threads together. Its operand and accumulator fragments are layouts of one
instruction's tile (ptc.lower.layout digits, innermost first): the register digits list
a thread's values in the order the instruction's registers hold them, two 16-bit values
per 32-bit register, low half first.

The atoms themselves are each backend's data: ptc/targets/<backend>/atoms.py (ATOMS, with
the vendors' documented layouts and their sources); `all_atoms()` gathers the registered
backends'. wgmma (sm90a) is laid out by the warp-specialized lowering
(ptc.lower.specialized_plan); `wgmma(n)` and the wgmma rules below are its.

Integer atoms (i8 operands, s32 accumulators that wrap modulo 2^32) count bytes in their
register digits: four 8-bit values per 32-bit register, lowest byte first.

- wgmma.mma_async.m64nNk16 (sm90a): PTX ISA, "Register Fragments and Shared Memory Matrix
  Layouts" for wgmma: the accumulator of warp w of the warpgroup covers rows 16w..16w+15
  like mma.sync's C, repeated every 8 columns; A from registers has mma.sync's A layout
  per warp (rows 16w..); B always comes from shared memory through a descriptor.
- wgmma.mma_async.m64nNk32 .s32.s8.s8 and .f32.{e4m3,e5m2}.{e4m3,e5m2} (sm90a, issue 21
  part 3c): PTX ISA, the same section:
  the accumulator as above (s32 for f32); A from registers is m16n8k32's A per warp (four
  consecutive k per register); both operands K-major (the 8-bit forms have no transposes);
  N = 8, 16, 24, 32, 48, ..., 256 for .s8, every multiple of 8 for FP8 (`wgmma_widths`).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, replace

from .layout import Digit, digits


@dataclass(frozen=True)
class Fragment:
    regs: tuple[Digit, ...]
    lanes: tuple[Digit, ...]


@dataclass(frozen=True)
class Atom:
    name: str                 # the instruction family, as the renderer spells it
    feature: str              # the device feature that offers it (devices/*.yaml)
    m: int
    n: int
    k: int
    threads: int              # threads that issue one instruction together
    a: Fragment               # [m, k]
    b: Fragment               # [k, n]
    c: Fragment               # [m, n] accumulator (`accumulator` values)
    dtypes: tuple[str, ...]   # input dtypes
    a_from_shared: bool = False   # the instruction reads A from shared memory itself
    b_from_shared: bool = False
    # shared-memory reads per atom and k-step of an operand read from a tile stored with
    # k contiguous, and otherwise: ldmatrix(.trans) x4 takes a 16x16 A block or two 8-wide
    # B blocks either way; an MFMA lane reads its 4 k at once (8 bytes) or one by one
    a_loads: tuple[float, float] = (1.0, 1.0)
    b_loads: tuple[float, float] = (0.5, 0.5)
    accumulator: str = "f32"      # the accumulator's dtype (i32 for integer atoms)
    # "f16": the operands are converted to f16 in registers before the instruction (FP8
    # on a matrix unit without an FP8 form; the cost model counts the conversions)
    widens_to: str = ""
    # the instruction reads FP8 in the FNUZ formats (CDNA3): the renderer fixes up each
    # register of four OCP codes (-0, NaN) and keeps the accumulator in quarter units (an
    # OCP code read as FNUZ is half its value); the cost model counts both
    fnuz: bool = False
    # a narrow form of the instruction (`narrowed`): the instruction computes `full`
    # (its own m, n), of which the atom is the first m x n; the lanes of the rest hold
    # copies (a lane digit of stride 0 in the fragments), as its operands' lanes read them
    full: tuple[int, int] = ()

    def describe(self) -> str:
        """The instruction, and the part of it used where the atom is narrow."""
        return self.name + (f" ({self.m}x{self.n} of its {self.full[0]}x{self.full[1]})"
                            if self.full else "")


def wgmma(n: int) -> Atom:
    """wgmma.mma_async.m64nNk16 for a warpgroup (4 warps); the fourth lane digit of the
    accumulator is the warp within the warpgroup."""
    return Atom(
        f"wgmma.m64n{n}k16", "wgmma", 64, n, 16, 128,
        a=Fragment(digits((2, (0, 1)), (2, (8, 0)), (2, (0, 8))),
                   digits((4, (0, 2)), (8, (1, 0)), (4, (16, 0)))),
        b=Fragment((), ()),
        c=Fragment(digits((2, (0, 1)), (2, (8, 0)), (n // 8, (0, 8))),
                   digits((4, (0, 2)), (8, (1, 0)), (4, (16, 0)))),
        dtypes=("f16", "bf16"), b_from_shared=True)


def _halved(fragment: Fragment, axis: int) -> Fragment:
    """`fragment` with the upper half of its `axis` replicating the lower: the lane digit
    of the largest stride along `axis` halved, then a digit of 2 lanes of stride 0."""
    top = max((d for d in fragment.lanes if d.along() == axis), key=lambda d: d.stride[axis])
    lanes = []
    for d in fragment.lanes:
        lanes += [d] if d is not top else \
            [Digit(d.size // 2, d.stride), Digit(2, tuple(0 for _ in d.stride))]
    return Fragment(fragment.regs, tuple(lanes))


def narrowed(atom: Atom, axis: int) -> Atom:
    """`atom` used for half its rows (axis 0: m) or columns (axis 1: n): a product of 8
    query heads on a 16 x 16 MFMA. The lanes of the other half load the same operand
    elements, so the instruction's other half computes copies, which the layouts say
    (Layout: a lane digit of stride 0). Only where the axis's largest step is a lane's,
    as in every 16 x 16 MFMA."""
    if axis == 0:
        return replace(atom, m=atom.m // 2, a=_halved(atom.a, 0), c=_halved(atom.c, 0),
                       full=(atom.m, atom.n))
    return replace(atom, n=atom.n // 2, b=_halved(atom.b, 1), c=_halved(atom.c, 1),
                   full=(atom.m, atom.n))


def all_atoms() -> tuple[Atom, ...]:
    """Every registered backend's matrix instructions (ptc.targets: its atoms.py's ATOMS)."""
    from .. import targets

    return _gathered(tuple(targets.BACKENDS.items()))


@functools.lru_cache(maxsize=8)
def _gathered(registry: tuple) -> tuple[Atom, ...]:
    from .. import targets

    return tuple(a for name, _ in registry for a in targets.atoms(name))


def atoms_for(features, supported: frozenset[str] | None = None) -> tuple[Atom, ...]:
    """The atoms a device offers (by its features) and a renderer can print (by name;
    None: no renderer restricts it)."""
    return tuple(a for a in all_atoms() if a.feature in features
                 and (supported is None or a.name in supported))


# ---- tilings: how warps split an mma into atoms --------------------------------------
@dataclass(frozen=True)
class Tiling:
    """`wm x wn` warps over an m x n x k product of atoms. With `swapped`, the product is
    the transpose of the statement's: the instructions compute out^T = b^T a^T, so m, n,
    wm, wn and the operands A, B are the instruction's (out's n, m, wn, wm; b^T, a^T). An
    atom whose accumulator rows are its A operand's k (MFMA: a lane holds 4 consecutive
    rows of one column of C, and 4 consecutive k of one row of A) then leaves the product
    in the layout the next product reads its A operand in.

    `replicas` > 1: the product has fewer atoms than the warps can split (a 16 x 8 score
    tile of decoding attention over 4 warps), so each group of wm x wn warps computes all
    of it: the warps beyond wm x wn hold copies (a warp digit of stride 0 in every layout,
    as an A operand is already copied over the wn warps). A few redundant atoms on the
    tensor cores beat the product on CUDA cores."""
    atom: Atom
    m: int
    n: int
    k: int
    wm: int
    wn: int
    swapped: bool = False
    replicas: int = 1

    @property
    def mi(self) -> int:
        return self.m // (self.atom.m * self.wm)

    @property
    def ni(self) -> int:
        return self.n // (self.atom.n * self.wn)

    @property
    def ks(self) -> int:
        return self.k // self.atom.k

    def describe(self) -> str:
        return (f"{self.atom.describe()}, warps {self.wm}x{self.wn}, "
                f"{self.mi}x{self.ni} atoms per warp, {self.ks} k-steps"
                + (f", {self.replicas} copies" if self.replicas > 1 else "")
                + (", operands swapped (out^T = b^T a^T)" if self.swapped else ""))


def tilings(atom: Atom, m: int, n: int, k: int, warps: int,
            swapped: bool = False) -> list[Tiling]:
    """Every way `warps` warps can split an m x n output into whole atoms (`swapped`: the
    ways to compute its transpose, n x m, as b^T a^T)."""
    if swapped:
        return [replace(t, swapped=True) for t in tilings(atom, n, m, k, warps)]
    if k % atom.k:
        return []
    out = []
    for wm in (w for w in range(1, warps + 1) if warps % w == 0):
        wn = warps // wm
        if m % (atom.m * wm) == 0 and n % (atom.n * wn) == 0:
            out.append(Tiling(atom, m, n, k, wm, wn))
    return out


def replicated_tilings(atom: Atom, m: int, n: int, k: int, warps: int,
                       swapped: bool = False) -> list[Tiling]:
    """The tilings with the fewest copies: the largest group of warps that splits the
    m x n output into whole atoms, each group computing all of it (none where `tilings`
    has a whole split)."""
    for group in (g for g in range(warps // 2, 0, -1) if warps % g == 0):
        ways = tilings(atom, m, n, k, group, swapped)
        if ways:
            return [replace(t, replicas=warps // group) for t in ways]
    return []


def mma_atom(device, dtype: str, m: int, n: int, k: int, warps: int,
             supported: frozenset[str] | None = None) -> Atom | None:
    """The atom that runs an m x n x k mma of `dtype` inputs on `warps` warps of `device`,
    or None when no atom (of the device, and that the renderer prints) fits: then the
    tensor cores do not take it and the mma runs on CUDA cores. The scheduler places
    mma tasks by this, and the lowering tiles them by it."""
    ways = mma_tilings(fitting_atoms(device, dtype, supported), m, n, k, warps)
    return ways[0].atom if ways else None


def fitting_atoms(device, dtype: str, supported: frozenset[str] | None = None) -> list[Atom]:
    """The atoms of `device` (that the renderer prints) taking `dtype` inputs on one warp."""
    return [a for a in atoms_for(device.features, supported)
            if dtype in a.dtypes and a.threads == device.resources.warp_size]


def mma_tilings(atoms, m: int, n: int, k: int, warps: int,
                swaps: tuple[bool, ...] = (False,)) -> list[Tiling]:
    """Every tiling of an m x n x k mma by `atoms` over `warps` warps (`swaps`: computed
    as given, transposed, or both); only where none splits the warps whole, the tilings
    with copies (Tiling.replicas): a copy on every warp costs more than any whole split;
    narrow atoms (`narrowed`) only where no whole one tiles the product at all."""
    full = [(a, s) for a in atoms if not a.full for s in swaps]
    # a narrow atom where no whole one fits, the product as written first: 8 rows on the
    # m-narrow form, 8 columns on the n-narrow one (the transposes tie with them)
    narrow = [(a, s) for s in swaps for a in atoms if a.full]
    for group in (full, narrow):
        whole = [t for a, s in group for t in tilings(a, m, n, k, warps, s)]
        ways = whole or [t for a, s in group for t in replicated_tilings(a, m, n, k, warps, s)]
        if ways:
            return ways
    return []


# wgmma's k per instruction is 32 bytes of each operand row: k16 for 16-bit inputs, k32 for
# 8-bit ones (PTX ISA, wgmma.mma_async: .m64nNk16 f16/bf16, .m64nNk32 .s8 and .e4m3/.e5m2)
WGMMA_K = {"f16": 16, "bf16": 16, "i8": 32, "f8e4m3": 32, "f8e5m2": 32}


def wgmma_k(dtype: str) -> int:
    """wgmma's k per instruction for `dtype` inputs (16 where wgmma does not take it)."""
    return WGMMA_K.get(dtype, 16)


def wgmma_widths(dtype: str) -> tuple[int, ...]:
    """The N of m64nNk wgmma for `dtype` inputs: every multiple of 8 up to 256 for 16-bit
    and FP8 inputs (.e4m3/.e5m2); for .s8 only 8, 16, 24 and the multiples of 16 from 32 (PTX ISA's shape list for
    integer types; ptxas 13 rejects .m64n40k32.s32.s8.s8 as 'Illegal matrix shape')."""
    if dtype == "i8":
        return (8, 16, 24) + tuple(range(32, 257, 16))
    return tuple(range(8, 257, 8))


def wgmma_operand_bytes(dtype: str) -> int:
    """Bytes per element of wgmma's operands."""
    return 1 if wgmma_k(dtype) == 32 else 2


def why_not_k_major(dtype: str, operand: str, name: str) -> str | None:
    """None when wgmma reads `dtype` operands MN-major (stored with k along their rows), else
    why not: 8-bit wgmma reads K-major operands only (PTX ISA, wgmma.mma_async: the transpose
    operands imm-trans-a / imm-trans-b exist for .f16 and .bf16 only; the .s8 and .e4m3/.e5m2
    forms take none, and their shared-memory layouts are K-major)."""
    if wgmma_operand_bytes(dtype) == 2:
        return None
    fix = ("store B as [N, K] and load it as load(B[j, k]).T" if operand == "b"
           else "store A as [M, K] and load it as load(A[i, k])")
    return (f"8-bit wgmma reads only K-major operands, and {name} ({operand.upper()}) has k "
            f"along its rows: {fix}")


def first_atom(device, dtype: str) -> Atom | None:
    """The device's preferred atom for `dtype` inputs, whatever the shape (None: none)."""
    return next((a for a in atoms_for(device.features) if dtype in a.dtypes), None)


def rate_dtype(device, dtype: str) -> str:
    """The dtype whose matrix-unit throughput (device YAML) times an mma of `dtype` inputs:
    its own, or the one an atom widens it to (FP8 multiplied as f16)."""
    atom = first_atom(device, dtype)
    return (atom.widens_to or dtype) if atom else dtype


def reads_fnuz(device, dtype: str) -> bool:
    """Whether the device multiplies `dtype` (FP8) on an instruction that reads the FNUZ
    formats: the OCP codes are rebiased in registers on the way (Atom.fnuz)."""
    atom = first_atom(device, dtype)
    return bool(atom and atom.fnuz)


def why_no_wgmma(dtype: str, m: int, n: int, k: int) -> str | None:
    """None when wgmma m64nNk atoms tile an m x n x k mma of one warpgroup (A from shared
    memory or registers, B from shared memory), else why not."""
    if dtype not in WGMMA_K:
        return f"wgmma multiplies f16, bf16, i8 or FP8 here, not {dtype}"
    kk = wgmma_k(dtype)
    if m % 64 or k % kk or n not in wgmma_widths(dtype):
        widths = ("of 8 up to 256" if dtype != "i8"
                  else "8, 16, 24 or a multiple of 16 up to 256")
        return (f"wgmma m64nNk{kk} ({dtype}) needs m a multiple of 64, n {widths} and k a "
                f"multiple of {kk}, not {m}x{n}x{k}")
    return None


def why_no_atom(device, dtype: str, m: int, n: int, k: int, warps: int,
                supported: frozenset[str] | None = None) -> str:
    """Why mma_atom finds none: the words `explain` gives for an mma on CUDA cores."""
    atoms = [a for a in atoms_for(device.features, supported)
             if a.threads == device.resources.warp_size]
    if not atoms:
        return f"{device.name} offers no matrix instruction this renderer issues"
    takes = sorted({d for a in atoms for d in a.dtypes})
    offered = [a.name for a in atoms_for(device.features)
               if a.threads == device.resources.warp_size and dtype in a.dtypes]
    if supported is not None and offered and not any(dtype in a.dtypes for a in atoms):
        return (f"{device.name} has {offered[0]} for {dtype}, which this renderer does not "
                f"issue (it issues {', '.join(sorted({a.name for a in atoms}))})")
    if not any(dtype in a.dtypes for a in atoms):
        contract = ("; f32 @ f32 is computed in f32, never silently as TF32 (write "
                    "`(a as tf32) @ (b as tf32)` to ask for it)") \
            if dtype == "f32" and "tf32" in takes else ""
        return f"the tensor cores take {', '.join(takes)} inputs, not {dtype}{contract}"
    a = next(a for a in atoms if dtype in a.dtypes)
    turned = mma_tilings([b for b in atoms if dtype in b.dtypes], n, m, k, warps)
    return (f"no matrix instruction tiles {m}x{n}x{k} ({a.name} needs m a multiple of "
            f"{a.m}, n of {a.n} and k of {a.k})"
            + (f"; its transpose ({n}x{m}) fits: write the product as b.T @ a.T"
               if turned else ""))
