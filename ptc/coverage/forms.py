"""The instruction forms a lowered kernel uses, read off its IR (ptc.lower.ir).

    forms = forms_of(lowered, device)               # every variant the source holds
    forms = forms_of(lowered, device, dims)         # the variants a launch at `dims` runs

A `Form` is one choice the lowering (or, for how the IR is spelled, the renderer) makes:
its target (the device's name), the instruction family and that family's parameters
(`FAMILIES`, the schema: which parameters each family has, in order). Everything is read
from the IR: wgmma's N, operands and descriptor layouts (the operand buffers' SmemLayout),
copy and store widths (`vector` x the element size), the swizzles of TMA boxes, stmatrix,
the plan's structure (the loops' stages, the roles, ping-pong barriers, rotated loops). Two
families are the renderer's spelling of an IR choice, derived from the IR by the rule the
renderer's headers apply, named by the renderer's declared `operand_reads` and
`lane_exchanges` (ptc/targets/cuda/render.py, ptc/targets/hip/render.py), not grepped from
the source:
- `ldmatrix`: a shared A operand is one ldmatrix.x4 per atom and k-step (.trans when the
  tile holds A transposed); a shared B operand one .x4 per pair of 8-column atoms and an
  .x2 for an odd last one (.trans unless the tile holds B transposed); hoisted fragments
  (LoadFragments) take A by .x4 and B by .x2 (shared_to_register_ldmatrix.cuh, mma_sync.cuh);
- `lds.fragment`: an MFMA lane reads its k of an operand (4 of 16-bit values or of gfx90a's
  i8, 8 of gfx942's i8) in one 8- or 4-byte LDS read where they are contiguous in the
  stored tile, else one read per value: u16x4, u8x4, u8x8 (mfma.h);
- `lds.bytes`: an 8-bit mma.sync operand stored with k along its rows (A [k][m], B [k][n])
  is read byte by byte -- ldmatrix has no 8-bit transpose (shared_to_register_ldmatrix.cuh);
- `lane.xor`: the instruction each xor mask is exchanged with.

Kernels with runtime alignment checks hold two variants (vector copies and stores, TMA,
and their element-wise fallbacks; kernel.cu.j2's ALIGNED): with `dims`, only the variant a
launch at those dims takes (the lowered kernel's `alignment` conditions on dims; tensor
pointers are taken as aligned, as NumPy's and the CUDA allocators' are).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ..lower import ir, pairs
from ..sched.plan import Style
from ..lower.atoms import wgmma_operand_bytes
from ..lower.storage import BatchRows
from ..lower.swizzle import SmemLayout
from ..lower.affine import standing
from ..sema.dtypes import DTYPE_BYTES

# family -> its parameters, in order (the schema every Form follows)
FAMILIES: dict[str, tuple[str, ...]] = {
    # the plan's structure (ptc.sched.construct.Choice, as the lowered kernel realizes it)
    "plan": ("style", "stages", "warps"),
    "plan.ws": ("consumers", "pingpong", "overlap"),
    # tensor cores, single role: mma.sync and MFMA atoms (ptc.lower.atoms)
    "mma": ("atom", "dtype", "swapped"),
    "mma.operand": ("atom", "operand", "source"),       # registers | shared | hoisted
    "mma.narrow": ("atom", "dtype", "axis"),            # 8 rows (m) or columns (n) of 16
    "ldmatrix": ("count", "trans", "tile"),             # CUDA's shared operand reads
    "lds.fragment": ("operand", "read", "tile"),        # HIP's: b64 b32 | u16x4 u8x4 u8x8
    "lds.bytes": ("operand", "tile"),                   # CUDA's 8-bit strided operands
    # global -> shared
    "cp.async": ("bytes",),
    "global_load.staged": ("bytes", "layout"),          # CDNA: through registers
    "buffer_load.staged": ("bytes", "layout", "range"),  # through a buffer: tensor or tile
    "copy.elementwise": ("layout",),                    # any stride, pad, unaligned
    "copy.hoisted": ("moving",),                        # rows | cols | both: whose start
    # registers -> global
    "store": ("bytes",),
    "atomic_add": ("dtype",),
    # register work
    "lane.xor": ("mask", "via"),
    "reduce.cross_warp": (),
    "convert": ("vector", "transposed"),                # through a shared scratch tile
    "simt_matmul": (),
    "pairs16": ("dtype", "piece"),                      # two 16-bit values a register
    # warp-specialized kernels (sm90a: docs/sm90.md)
    "wgmma": ("n", "a", "dtype"),
    "wgmma.operand": ("operand", "major", "span", "bytes"),
    "wgmma.stage_b": ("via",),
    "wgmma.swapped": ("dtype", "split"),                # out^T = b^T a^T, B computed
    "wgmma.wait": ("pending",),
    "tma.load": ("layout", "boxes"),
    "tma.load.elementwise": ("layout",),
    # rows: consecutive (one element a copy), gathered, strided or a tile of rank 3's (16-byte
    # chunks of each row into the layout TMA writes; "elements": the fallback where a row is
    # unaligned)
    "producer.cp_async": ("bytes", "rows", "chunks"),
    "tma.store": ("layout", "boxes", "via"),
    "stmatrix.x4": ("purpose",),
    "mbarrier.release": ("by",),
}


# the single-role styles whose stage count is a choice of the plan (a ring of that many
# slots: ptc.sched.search.choices_for); the others count 1 (interleaved loads run one tile
# ahead into one buffer each, whatever their loop's stages)
RING_STYLES = (Style.MULTISTAGE,)


@dataclass(frozen=True)
class Form:
    """One instruction form: `params` are (name, value) in the order FAMILIES gives."""

    target: str
    instruction: str
    params: tuple[tuple[str, object], ...] = ()

    @property
    def args(self) -> dict:
        return dict(self.params)

    def describe(self) -> str:
        return " ".join([self.instruction] + [f"{k}={v}" for k, v in self.params])

    def to_json(self) -> dict:
        return {"target": self.target, "instruction": self.instruction,
                "params": dict(self.params)}


def form(target: str, instruction: str, **params) -> Form:
    names = FAMILIES[instruction]
    if set(params) != set(names):
        raise ValueError(f"{instruction} takes {', '.join(names) or 'no parameters'}, not "
                         f"{', '.join(params) or 'none'}")
    return Form(target, instruction, tuple((n, params[n]) for n in names))


# ---- the names of layouts, as the forms give them -------------------------------------
def tile_kind(lay: SmemLayout | None, lines: bool = True) -> str:
    """A single-role shared tile as the fragment reads address it: XOR-swizzled with rows
    of whole 128-byte lines (`lines`: ldmatrix's SharedTile then takes the swizzle from the
    lane's row within 8), with shorter rows, stored transposed for MFMA (k8t), or plain
    rows."""
    if lay is None or lay.swizzle == "none":
        return "rows"
    if lay.transposed:
        return "k8t"
    return "xor.lines" if lines and lay.row_bytes % 128 == 0 else "xor"


def copy_layout(lay: SmemLayout | None) -> str:
    """A copy's destination: row-major (XOR-swizzled or not: one function, the swizzle a
    template argument), or transposed for MFMA (k8t: copies of their own)."""
    return "k8t" if lay is not None and lay.transposed else "row-major"


def tma_kind(lay: SmemLayout) -> str:
    """The layout TMA writes or reads: `tmaS` (rows of S bytes, swizzled over S, or not
    swizzled for S = 16), or `rows` (dense, unswizzled: odd rows, single rows)."""
    return f"tma{lay.span}" if lay.swizzle == "tma" else "rows"


# ---- reading the IR -------------------------------------------------------------------
@dataclass(frozen=True)
class _Context:
    target: str
    low: ir.LoweredKernel
    renderer: type
    aligned: bool | None          # None: both variants
    hoisted: frozenset[str]       # fragment registers read once before a loop

    def form(self, instruction: str, **params) -> Form:
        return form(self.target, instruction, **params)

    def buffer_of(self, value: str) -> ir.Buffer:
        return self.low.buffer(self.low.home(value).buffer)

    def variants(self, has_fallback: bool) -> tuple[bool, ...]:
        """Which of (vector, element-wise) a launch runs: True for the vector variant."""
        if not has_fallback:
            return (True,)
        return (True, False) if self.aligned is None else (self.aligned,)


def aligned_at(low: ir.LoweredKernel, dims: Mapping[str, int]) -> bool:
    """Does a launch at `dims` take the vector variant (the launch's ALIGNED)?"""
    return all(int(dims[name]) % n == 0 for kind, name, n in low.alignment if kind == "dim")


def forms_of(low: ir.LoweredKernel, device, dims: Mapping[str, int] | None = None
             ) -> frozenset[Form]:
    """The instruction forms `low` (one grid's lowered kernel for `device`) uses; with
    `dims`, those a launch at these dims runs."""
    from ..render import renderer

    ctx = _Context(device.name, low, renderer(device.backend),
                   None if dims is None else aligned_at(low, dims),
                   frozenset(op.target for op in ir.walk(low.body)
                             if isinstance(op, ir.LoadFragments)))
    out = set(_plan_forms(ctx))
    for op in ir.walk(low.body):
        reader = _READERS.get(type(op))
        if reader is not None:
            out.update(reader(ctx, op))
    return frozenset(out)


def _plan_forms(ctx: _Context):
    low = ctx.low
    ops = ir.walk(low.body)
    spec = [op for op in ops if isinstance(op, ir.Specialized)]
    if spec:
        consumer = next(r for r in spec[0].roles if r.name == "consumer")
        yield ctx.form("plan.ws", consumers=consumer.instances,
                       pingpong=any(isinstance(op, ir.NamedBarrier) and op.next_instance
                                    for op in ops),
                       overlap=any(isinstance(op, ir.Iteration) for op in ops))
        return
    stages = max((op.stages for op in ops if isinstance(op, ir.Loop)), default=1) \
        if low.plan_style in RING_STYLES else 1
    yield ctx.form("plan", style=low.plan_style, stages=stages, warps=low.launch.warps)


def _copy(ctx: _Context, op: ir.CopyTile):
    layout = copy_layout(ctx.low.buffer(op.buffer).layout)
    if op.hoisted:       # its address at trip 0 before the loop (ptc.lower.hoist_copies)
        rows, cols = (not standing(s) for s in op.hoisted[1:])
        yield ctx.form("copy.hoisted", moving="both" if rows and cols else
                       "rows" if rows else "cols")     # one moves (hoist_copies.hoistable)
    if not op.asynchronous:
        yield ctx.form("copy.elementwise", layout=layout)
        return
    nbytes = op.vector * DTYPE_BYTES[op.tile.dtype]
    for vector in ctx.variants(bool(op.fallback_vector)):
        if not vector:
            yield ctx.form("copy.elementwise", layout=layout)
        elif op.staged:
            if op.resource:
                yield ctx.form("buffer_load.staged", bytes=nbytes, layout=layout,
                               range=op.resource)
            else:
                yield ctx.form("global_load.staged", bytes=nbytes, layout=layout)
        else:
            yield ctx.form("cp.async", bytes=nbytes)


def _store(ctx: _Context, op: ir.StoreTile):
    if op.atomic:
        yield ctx.form("atomic_add", dtype=op.tile.dtype)
        return
    esize = DTYPE_BYTES[op.tile.dtype]
    for vector in ctx.variants(op.vector > 1 and bool(op.fallback_vector)):
        yield ctx.form("store", bytes=(op.vector if vector else 1) * esize)


def fragment_reads(atom, dtype: str) -> tuple[str, str]:
    """(contiguous read, one-by-one read) of an MFMA lane's k values of one operand: the
    k a lane holds (the atom's first register digit) times the element size."""
    per_lane = atom.a.regs[0].size
    size = DTYPE_BYTES[dtype]
    return f"b{8 * per_lane * size}", f"u{8 * size}x{per_lane}"


def _operand_reads(ctx: _Context, operand: str, transposed: bool, lay: SmemLayout | None,
                   atoms: int, hoisted: bool, atom, dtype: str):
    """The shared reads of one mma operand (the instruction's `operand`, a or b, stored
    transposed or not), as the renderer spells them."""
    ldmatrix = ctx.renderer.operand_reads == "ldmatrix"
    tile = tile_kind(lay, lines=ldmatrix)
    contiguous = transposed if operand == "b" else not transposed
    if ldmatrix and DTYPE_BYTES[dtype] == 1 and not contiguous:
        yield ctx.form("lds.bytes", operand=operand, tile=tile_kind(lay, lines=False))
        return
    if ldmatrix:
        if operand == "a":
            yield ctx.form("ldmatrix", count=4, trans=transposed, tile=tile)
            return
        if not hoisted and atoms >= 2:
            yield ctx.form("ldmatrix", count=4, trans=not transposed, tile=tile)
        if hoisted or atoms % 2:
            yield ctx.form("ldmatrix", count=2, trans=not transposed, tile=tile)
        return
    run, one_by_one = fragment_reads(atom, dtype)
    yield ctx.form("lds.fragment", operand=operand, read=run if contiguous else one_by_one,
                   tile=tile)


def _mma(ctx: _Context, op: ir.Mma):
    yield ctx.form("mma", atom=op.atom.name, dtype=op.dtype, swapped=op.swapped)
    if op.atom.full:
        yield ctx.form("mma.narrow", atom=op.atom.name, dtype=op.dtype,
                       axis=narrowed_axis(op.atom))
    for which, o, atoms in (("a", op.a, op.mi), ("b", op.b, op.ni)):
        if o.in_registers:
            source = "hoisted" if o.value in ctx.hoisted else "registers"
            yield ctx.form("mma.operand", atom=op.atom.name, operand=which, source=source)
            continue
        yield ctx.form("mma.operand", atom=op.atom.name, operand=which, source="shared")
        yield from _operand_reads(ctx, which, o.transposed, ctx.buffer_of(o.value).layout,
                                  atoms, False, op.atom, op.dtype)


def narrowed_axis(atom) -> str:
    """The axis a narrow atom (ptc.lower.atoms.narrowed) uses half of: m or n."""
    return "m" if atom.m < atom.full[0] else "n"


def _load_fragments(ctx: _Context, op: ir.LoadFragments):
    user = next(m for m in ir.walk(ctx.low.body) if isinstance(m, ir.Mma)
                and op.target in (m.a.value, m.b.value))
    yield from _operand_reads(ctx, op.operand, op.transposed,
                              ctx.buffer_of(op.source).layout, 1, True, user.atom, user.dtype)


def _reduce(ctx: _Context, op: ir.Reduce):
    for mask in op.lane_masks:
        yield ctx.form("lane.xor", mask=mask, via=exchange(ctx.renderer, mask))


def _compute(ctx: _Context, op: ir.Compute):
    if op.pairs:
        dtype = ctx.low.home(op.target).dtype
        node = pairs.form(op.expr, dtype, dict(ctx.low.int_ranges))
        for piece in sorted(pairs.pieces(node)):
            yield ctx.form("pairs16", dtype=dtype, piece=piece)


def exchange(renderer, mask: int) -> str:
    """The instruction `renderer` exchanges values between lanes `mask` apart with."""
    return next(name for bound, name in renderer.lane_exchanges if mask <= bound)


def _wgmma(ctx: _Context, op: ir.Wgmma):
    yield ctx.form("wgmma", n=op.n, a="registers" if op.a.in_registers else "shared",
                   dtype=op.dtype)
    if op.swapped:
        yield ctx.form("wgmma.swapped", dtype=op.dtype, split=op.b.split)
    for which, o in (("a", op.a), ("b", op.b)):
        if not o.in_registers:
            span = ctx.buffer_of(o.value).layout.span
            yield ctx.form("wgmma.operand", operand=which, major="MN" if o.mn_major else "K",
                           span=span, bytes=wgmma_operand_bytes(op.dtype))


def _stage(ctx: _Context, op: ir.StageOperand):
    """B computed in registers, staged where wgmma reads it (StageOperands of stores are
    inside their TmaStore: _tma_store)."""
    yield ctx.form("wgmma.stage_b", via="stmatrix" if op.stmatrix else
                   "st.shared.pairs" if op.pairs else "st.shared")
    if op.stmatrix:
        yield ctx.form("stmatrix.x4", purpose="wgmma.b")


def _tma_load(ctx: _Context, op: ir.TmaLoad):
    lay = ctx.low.buffer(op.buffer).layout
    for vector in ctx.variants(op.tile is not None):
        if vector:
            yield ctx.form("tma.load", layout=tma_kind(lay),
                           boxes="one" if op.panels == 1 else "several")
        else:
            yield ctx.form("tma.load.elementwise",
                           layout="tma" if lay.swizzle == "tma" else "rows")


def _producer_copy(ctx: _Context, op: ir.ProducerCopy):
    tile = op.tile
    rows = "rank3" if isinstance(tile.gather, BatchRows) else \
        "gathered" if tile.gather is not None else \
        "strided" if tile.row_step > 1 else "consecutive"
    for vector in ctx.variants(op.vector > 1):
        yield ctx.form("producer.cp_async", bytes=DTYPE_BYTES[tile.dtype], rows=rows,
                       chunks="16B" if vector and op.vector > 1 else "elements")


def _tma_store(ctx: _Context, op: ir.TmaStore):
    lay = ctx.low.buffer(op.buffer).layout
    for vector in ctx.variants(True):
        if not vector:
            yield from _store(ctx, op.fallback)
            continue
        via = "stmatrix" if op.stage.stmatrix else "st.shared"
        yield ctx.form("tma.store", layout=tma_kind(lay),
                       boxes="one" if op.panels == 1 else "several", via=via)
        if op.stage.stmatrix:
            yield ctx.form("stmatrix.x4", purpose="tma.store")


def _release(ctx: _Context, op: ir.MbarrierArrive):
    yield ctx.form("mbarrier.release",
                   by="warp" if op.per_warp else "lagged" if op.lag else "warpgroup")


_READERS = {
    ir.CopyTile: _copy,
    ir.StoreTile: _store,
    ir.Mma: _mma,
    ir.LoadFragments: _load_fragments,
    ir.Reduce: _reduce,
    ir.Compute: _compute,
    ir.WarpCombine: lambda ctx, op: [ctx.form("reduce.cross_warp")],
    ir.FillTile: lambda ctx, op: [ctx.form("convert", vector=op.vector,
                                           transposed=op.transposed)],
    ir.SimtMatmul: lambda ctx, op: [ctx.form("simt_matmul")],
    ir.Wgmma: _wgmma,
    ir.WgmmaWait: lambda ctx, op: [ctx.form("wgmma.wait", pending=op.pending)],
    ir.StageOperand: _stage,
    ir.TmaLoad: _tma_load,
    ir.ProducerCopy: _producer_copy,
    ir.TmaStore: _tma_store,
    ir.MbarrierArrive: _release,
}

__all__ = ["Form", "FAMILIES", "form", "forms_of", "aligned_at", "tile_kind", "copy_layout",
           "tma_kind", "exchange", "fragment_reads"]
