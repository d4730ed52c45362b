"""Every instruction form a target can produce, from data: the device description (its
features, copy units, warp size), ptc.lower.atoms (the matrix instructions and their
dtypes; wgmma's N), the plan choices the search offers (ptc.sched.search.choices_for) and
the target renderer's declared capabilities (styles, atoms, copy units, swapped and
transposed operands, how it spells operand reads and lane exchanges).

    table = universe(device)      # Form -> None (reachable) or why the lowering never
                                  # produces it
    forms = reachable(device)

`UNREACHABLE` is the one place that says which combinations the lowering never produces,
and why; every other form of the universe must be covered by a case (ptc.coverage.cases).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..devices.model import UnitKind
from ..lower import pairs
from ..lower.atoms import all_atoms, atoms_for, wgmma, wgmma_widths, why_no_wgmma
from ..sched.plan import Style
from ..sema.dtypes import ATOMIC_DTYPES, DTYPE_BYTES, DTYPES
from .forms import RING_STYLES, Form, exchange, form, fragment_reads, narrowed_axis

# cp.async copies 4, 8 or 16 bytes (PTX ISA cp.async; the lowering's `vector` tries them
# widest first, global_to_shared.cuh asserts them); CDNA's staged loads the same widths
# (global_load_dword / dwordx2 / dwordx4, or buffer_load_*: global_to_shared.h's Chunk)
COPY_BYTES = (4, 8, 16)
# vector stores take 2, 4 or 8 elements of at most 16 bytes (Lowering.store)
STORE_VECTORS = (2, 4, 8)
# the swizzle spans a wgmma descriptor and a TMA box name (16: not swizzled)
SPANS = (16, 32, 64, 128)


@dataclass(frozen=True)
class Rule:
    """Forms of `instruction` whose parameters match `where` (a value, or a tuple of
    values) are never produced, for `reason`."""

    instruction: str
    where: dict
    reason: str

    def matches(self, f: Form) -> bool:
        if f.instruction != self.instruction:
            return False
        args = f.args
        return all(args[k] in (v if isinstance(v, tuple) else (v,))
                   for k, v in self.where.items())


UNREACHABLE = (
    Rule("wgmma.operand", dict(major="K", span=16),
         "a K-major operand's rows run along k: 16-byte rows are BK = 8 (of 16-bit "
         "elements) or 16 (of 8-bit ones), and wgmma's k-step is 32 bytes of a row "
         "(atoms.why_no_wgmma wants k % 16 == 0, or k % 32 for 8-bit inputs)"),
    Rule("wgmma.operand", dict(major="MN", bytes=1),
         "8-bit wgmma reads K-major operands only (no transposes for 8-bit types): the plan "
         "construction keeps such a product on mma.sync (atoms.why_not_k_major)"),
    Rule("wgmma.operand", dict(operand="a", major="MN", span=(16, 32, 64)),
         "an MN-major A tile's rows run along m, a multiple of 64 elements (wgmma is m64): "
         "rows of 128 bytes and more, so 128-byte panels"),
    Rule("mma.operand", dict(atom=tuple(a.name for a in all_atoms() if "tf32" in a.dtypes),
                             source=("shared", "hoisted")),
         "tf32 operands are `x as tf32` conversions, computed in registers: no tile in shared "
         "memory holds tf32"),
    Rule("mma.operand", dict(atom=tuple(a.name for a in all_atoms()
                                        if {"i8", "f8e4m3"} & set(a.dtypes)),
                             source="hoisted"),
         "loop-invariant operands are read into registers before their loop for f16 and "
         "bf16 atoms only (ptc.lower.hoist): an i8 or FP8 operand is read where it is used"),
    Rule("lds.fragment", dict(tile="k8t", read="u16x4"),
         "a tile is stored transposed (k8t) only when each of its readers reads its k "
         "along the tile's rows, which the transposed storage makes contiguous "
         "(Lowering.k_along_rows): the read is then one 8-byte read"),
    Rule("buffer_load.staged", dict(layout="k8t", range="tile", bytes=(4, 8)),
         "a transposed (k8t) tile is an MFMA operand, n a multiple of 16 elements: whole "
         "columns (a buffer ending at the tile, Capabilities.buffers) are then a dim of 16k "
         "elements, and the row stride a multiple of it, so the vectors are 16 bytes"),
    Rule("convert", dict(vector=2, transposed=True),
         "a conversion that transposes reads one value at a time (Lowering.conversions "
         "takes pairs only for untransposed tiles)"),
    Rule("tma.load", dict(layout=("tma16", "tma32", "tma64", "rows"), boxes="several"),
         "rows of 16, 32 or 64 bytes, and dense rows (at most 256 elements), are one panel: "
         "one box (swizzle.tma_layout)"),
    Rule("tma.store", dict(layout=("tma16", "tma32", "tma64", "rows"), boxes="several"),
         "rows of 16, 32 or 64 bytes, and dense rows (at most 256 elements), are one panel: "
         "one box (swizzle.tma_layout)"),
    Rule("wgmma.stage_b", dict(via="stmatrix"),
         "a B operand computed in registers is given wgmma's B layout (a lane per column or "
         "per column pair: specialized.wgmma_layouts), converted there from an accumulator, "
         "and stmatrix "
         "stores the accumulator layout only (stmatrix.stmatrix_blocks): it is staged with "
         "st.shared"),
    Rule("stmatrix.x4", dict(purpose="wgmma.b"),
         "B operands are staged with st.shared (see wgmma.stage_b via=stmatrix)"),
    Rule("tma.store", dict(layout="tma16", via="stmatrix"),
         "stmatrix.x4 stores 16 x 16 blocks of 16-bit values: a 16-byte row is 8 columns, "
         "half a block (stmatrix.stmatrix_blocks wants an even number of 8-column blocks)"),
    Rule("tma.store", dict(layout="rows", via="stmatrix"),
         "stmatrix writes 16-byte rows of the TMA layouts; a dense tile is staged by "
         "st.shared (stmatrix.stmatrix_blocks)"),
)


def why_unreachable(f: Form) -> str | None:
    return next((r.reason for r in UNREACHABLE if r.matches(f)), None)


def universe(device) -> dict[Form, str | None]:
    """Every form `device`'s renderer can produce: Form -> None where the lowering can
    produce it, else why it never does. {} for a device without a renderer."""
    from ..render import renderer

    found = renderer(device.backend)
    if found is None:
        return {}
    forms = sorted(set(_candidates(device, found)), key=_order)
    return {f: why_unreachable(f) for f in forms}


def _order(f: Form) -> tuple:
    """Family, then parameters, numbers by value."""
    return (f.instruction, tuple((0, v, "") if isinstance(v, int) and not isinstance(v, bool)
                                 else (1, 0, str(v)) for _, v in f.params))


def reachable(device) -> list[Form]:
    return [f for f, why in universe(device).items() if why is None]


def _candidates(device, renderer):
    """Every form `renderer` could produce on `device`, by family (repeats allowed)."""
    from ..sched.construct import Unfit, copy_unit

    caps = renderer.capabilities
    t = device.name
    try:
        copy_unit(device, Style.WARP_SPECIALIZED)
        specialized = Style.WARP_SPECIALIZED in caps.styles
    except Unfit:
        specialized = False
    k8t = ("k8t",) if caps.transposed_operands else ()
    yield from _plans(device, caps, specialized)
    yield from _matrix_instructions(device, renderer, k8t)
    yield from _copies(device, caps, k8t)
    yield from _stores(t)
    yield from _register_work(device, renderer)
    yield from _pairs16(t, caps)
    if specialized:
        yield from _specialized(device, t)


def _plans(device, caps, specialized: bool):
    """The plan choices the search offers that this renderer builds."""
    from ..sched.search import choices_for

    t = device.name
    for c in choices_for(device, True):
        if c.style == Style.WARP_SPECIALIZED:
            if specialized:
                yield form(t, "plan.ws", consumers=c.consumers, pingpong=c.pingpong,
                           overlap=c.overlap)
        elif c.style in caps.styles and not (caps.staged_copies and c.stages > 2):
            # (Capabilities.refuses: register-staged copies keep one in flight)
            yield form(t, "plan", style=c.style,
                       stages=c.stages if c.style in RING_STYLES else 1, warps=c.warps)


def _matrix_instructions(device, renderer, k8t: tuple[str, ...]):
    """The matrix instructions of one warp (wave), and their operands."""
    caps = renderer.capabilities
    t = device.name
    atoms = [a for a in atoms_for(device.features, caps.atoms)
             if a.threads == device.resources.warp_size]
    swaps = (False, True) if caps.swapped_operands else (False,)
    for atom in atoms:
        for dtype in atom.dtypes:
            for swapped in swaps:
                yield form(t, "mma", atom=atom.name, dtype=dtype, swapped=swapped)
            if atom.full:
                yield form(t, "mma.narrow", atom=atom.name, dtype=dtype,
                           axis=narrowed_axis(atom))
        for operand in ("a", "b"):
            for source in ("registers", "shared", "hoisted"):
                yield form(t, "mma.operand", atom=atom.name, operand=operand, source=source)
    if atoms:
        yield from _operand_reads(t, renderer.operand_reads, k8t, atoms)


def _copies(device, caps, k8t: tuple[str, ...]):
    """Copies: the per-thread copy units the renderer issues on, and elementwise ones."""
    t = device.name
    for unit in device.units_of(UnitKind.COPY):
        if unit.name not in caps.copy_units or unit.name == "tma" or not unit.is_async:
            continue
        for nbytes in COPY_BYTES:
            if caps.staged_copies and caps.buffer_loads:
                # tiles of several rows through a buffer; one-row tiles (row-major) not
                for layout in ("row-major",) + k8t:
                    for rng in ("tensor", "tile"):
                        yield form(t, "buffer_load.staged", bytes=nbytes, layout=layout,
                                   range=rng)
                yield form(t, "global_load.staged", bytes=nbytes, layout="row-major")
            elif caps.staged_copies:
                for layout in ("row-major",) + k8t:
                    yield form(t, "global_load.staged", bytes=nbytes, layout=layout)
            else:
                yield form(t, "cp.async", bytes=nbytes)
    for layout in ("row-major",) + k8t:
        yield form(t, "copy.elementwise", layout=layout)
    if caps.hoisted_copies:    # a loop's k tiles: along A's columns, along B's rows
        for moving in ("rows", "cols"):
            yield form(t, "copy.hoisted", moving=moving)


def _stores(t: str):
    """Stores: an element of each dtype, or vectors of 16 bytes at most; atomic adds."""
    widths = {DTYPE_BYTES[d] for d in DTYPES}
    widths |= {v * DTYPE_BYTES[d] for d in ("f32", "f16") for v in STORE_VECTORS
               if v * DTYPE_BYTES[d] <= 16}
    for nbytes in sorted(widths):
        yield form(t, "store", bytes=nbytes)
    for dtype in ATOMIC_DTYPES:
        yield form(t, "atomic_add", dtype=dtype)


def _register_work(device, renderer):
    """Work in registers: lane exchanges, cross-warp reductions, conversions, SIMT
    products."""
    t = device.name
    mask = 1
    while mask < device.resources.warp_size:
        yield form(t, "lane.xor", mask=mask, via=exchange(renderer, mask))
        mask *= 2
    yield form(t, "reduce.cross_warp")
    for vector in (1, 2):
        for transposed in (False, True):
            yield form(t, "convert", vector=vector, transposed=transposed)
    yield form(t, "simt_matmul")


def _pairs16(t: str, caps):
    """16-bit values computed a register at a time (ptc.lower.pairs), where the renderer
    packs that dtype's arithmetic: every piece of a pair form."""
    for dtype in sorted(caps.packed16):
        for piece in pairs.PIECES:
            yield form(t, "pairs16", dtype=dtype, piece=piece)


def _operand_reads(t: str, spelling: str, k8t: tuple[str, ...], atoms):
    """The shared reads of mma operands, as the renderer spells them (forms._operand_reads):
    ldmatrix addresses rows of whole 128-byte lines its own way; MFMA fragments read
    transposed tiles too where the renderer stores them (16-bit ones: swizzle.
    transposed_layout); 8-bit operands with k along the stored rows are read byte by byte
    (no 8-bit ldmatrix.trans) or, on MFMA, one byte per k."""
    dtypes = {d for a in atoms for d in a.dtypes}
    if spelling == "ldmatrix":
        for count in (2, 4):
            for trans in (False, True):
                for tile in ("xor.lines", "xor", "rows") + k8t:
                    yield form(t, "ldmatrix", count=count, trans=trans, tile=tile)
        if any(DTYPE_BYTES[d] == 1 for d in dtypes):
            for operand in ("a", "b"):
                for tile in ("xor", "rows"):
                    yield form(t, "lds.bytes", operand=operand, tile=tile)
    else:
        for atom in atoms:
            for dtype in atom.dtypes:
                transposed = k8t if DTYPE_BYTES[dtype] == 2 else ()
                for operand in ("a", "b"):
                    for read in fragment_reads(atom, dtype):
                        for tile in ("xor", "rows") + transposed:
                            yield form(t, "lds.fragment", operand=operand, read=read,
                                       tile=tile)


def _specialized(device, t: str):
    """The forms of warp-specialized kernels: wgmma, TMA, stmatrix, mbarriers."""
    atom = wgmma(8)
    widths = [n for n in range(1, 257) if why_no_wgmma(atom.dtypes[0], 64, n, 16) is None]
    for n in widths:
        for a in ("registers", "shared"):
            for dtype in atom.dtypes:
                yield form(t, "wgmma", n=n, a=a, dtype=dtype)
    # 8-bit inputs (m64nNk32, .s8 and FP8): the PTX ISA's widths for them, A from shared
    # memory or from registers (four bytes a register)
    for dtype in ("i8", "f8e4m3", "f8e5m2"):
        for n in wgmma_widths(dtype):
            for a in ("registers", "shared"):
                yield form(t, "wgmma", n=n, a=a, dtype=dtype)
    for operand in ("a", "b"):
        for major in ("K", "MN"):
            for span in SPANS:
                for nbytes in (2, 1):
                    yield form(t, "wgmma.operand", operand=operand, major=major, span=span,
                               bytes=nbytes)
    vias = (("stmatrix",) if "stmatrix" in device.features else ()) + ("st.shared",)
    for via in vias + ("st.shared.pairs",):
        yield form(t, "wgmma.stage_b", via=via)
    for dtype in atom.dtypes:           # 16-bit: the swap reads b^T from registers
        for split in (False, True):
            yield form(t, "wgmma.swapped", dtype=dtype, split=split)
    for pending in (0, 1):
        yield form(t, "wgmma.wait", pending=pending)
    layouts = tuple(f"tma{s}" for s in SPANS) + ("rows",)
    for layout in layouts:
        for boxes in ("one", "several"):
            yield form(t, "tma.load", layout=layout, boxes=boxes)
            for via in vias:
                yield form(t, "tma.store", layout=layout, boxes=boxes, via=via)
    for layout in ("tma", "rows"):
        yield form(t, "tma.load.elementwise", layout=layout)
    for nbytes in sorted({DTYPE_BYTES[d] for d in DTYPES if DTYPE_BYTES[d] >= 4}):
        yield form(t, "producer.cp_async", bytes=nbytes, rows="consecutive", chunks="elements")
    # gathered, strided and rank-3 rows (ptc.lower.tma.per_thread_copy): 16-byte chunks or,
    # where the launch finds a row unaligned, elements; f16/bf16 and 8-bit wgmma operands,
    # f32 tiles the CUDA cores read
    for nbytes in (1, 2, 4):
        for rows in ("gathered", "strided", "rank3"):
            for chunks in ("16B", "elements"):
                yield form(t, "producer.cp_async", bytes=nbytes, rows=rows, chunks=chunks)
    if "stmatrix" in device.features:
        for purpose in ("tma.store", "wgmma.b"):
            yield form(t, "stmatrix.x4", purpose=purpose)
    for by in ("warpgroup", "warp", "lagged"):
        yield form(t, "mbarrier.release", by=by)


__all__ = ["universe", "reachable", "UNREACHABLE", "Rule", "why_unreachable"]
