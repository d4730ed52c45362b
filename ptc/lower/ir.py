"""The lowered kernel IR: one target's kernel, every storage and instruction-family choice
made (docs/lowering.md). The cost model, the verifier's resource check, `explain` and the
renderer read this; none of them decides anything it says.

A `LoweredKernel` holds
- the launch (grid, threads, exact dynamic shared memory, register estimate),
- the register layouts by name (ptc.lower.layout) and the shared-memory buffers with their
  byte offsets, swizzle and live ranges (buffers whose lives do not meet share bytes),
- `values`: where every tile value of the program lives -- a register tile in a named
  layout, a shared-memory buffer (loaded tiles), or a scalar,
- `body`: the ops in program order, loops nested; every wait and barrier is an op.

Expressions inside ops are the typed program's (`ptc.sema.typed`); their `Var`s name
values in `values`. The values' homes and the global tiles are ptc.lower.storage's.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from ..sched.plan import Style
from ..sema import typed as T
from .atoms import Atom
from .layout import Layout
# where values live and the global tiles ops address are ptc.lower.storage's; readers
# spell them ir.Buffer, ir.RegTile ... like the rest of the IR
from .storage import Buffer, GlobalTile, InShared, RegTile

Home = Union[RegTile, InShared]      # where a tile value lives


# ---- ops -----------------------------------------------------------------------------
@dataclass(frozen=True)
class CopyTile:
    """global -> shared: `vector` elements per copy instruction (cp.async of 4-16 bytes
    when `asynchronous`; else each thread loads and stores), `iteration` loop iterations
    ahead of the current one, into that iteration's slot. A `staged` asynchronous copy
    goes global -> registers when issued and registers -> shared at the next WaitGroups
    (no global -> shared instruction of the width: CDNA's register-staged pipelining); a
    `resource` one loads through a buffer resource (CDNA's MUBUF range check zero-fills)."""

    task: str
    buffer: str
    tile: GlobalTile
    vector: int
    asynchronous: bool
    pad: float
    loop: str = ""               # the loop whose iteration picks the slot
    ahead: int = 0               # iterations ahead (the pipeline's prefetch)
    guard: bool = False          # skipped (an empty group) past the last iteration
    fallback_vector: int = 0     # vector when `aligned` does not hold (0: no variant)
    staged: bool = False         # through registers, landing in shared memory at the wait
    # staged loads through a buffer resource (Capabilities.buffers): a chunk outside the tensor
    # reads zeros without a branch; "tensor": the buffer spans the tensor (each chunk selected
    # or not), "tile": it ends at the tile's last row inside it (whole columns). Launch-checked.
    resource: str = ""
    hoisted: tuple = ()          # steps a trip of origin, row and column start: hoisted out


@dataclass(frozen=True)
class CommitGroup:
    pass


@dataclass(frozen=True)
class WaitGroups:
    """Wait until at most `pending` of this thread's committed copy groups are in flight
    (staged copies: every staged copy still in registers lands, pending or not: `lands`)."""

    pending: int
    buffers: tuple[str, ...]     # what the wait is for
    lands: tuple[str, ...] = ()  # the staged copies (tasks) that may be in flight here


@dataclass(frozen=True)
class Barrier:
    why: str


@dataclass(frozen=True)
class Compute:
    """target = expr for every value of the target's layout, in registers."""

    task: str
    target: str                  # a value name
    expr: T.TExpr
    mask: tuple[bool, ...] = ()  # per axis: the layout reaches past the tile
    pairs: bool = False          # a 16-bit target computed a register (two values) at a
                                 # time, integers through the exponent bias (ptc.lower.pairs)


@dataclass(frozen=True)
class Reduce:
    """target = op-reduction of expr along `axis`: each thread over its own values, then
    xor-shuffles over `lane_masks`, then (`scratch`) across the warps that share a slot."""

    task: str
    target: str
    expr: T.TExpr
    op: str                      # sum | max | min
    axis: int
    source_layout: str
    lane_masks: tuple[int, ...]
    scratch: str = ""            # buffer for the cross-warp step ("" when none is needed)
    cross_warps: int = 1         # warps that combine
    mask: tuple[bool, ...] = ()


@dataclass(frozen=True)
class WarpCombine:
    """target = the op-combination of the partial results the warps that share its values
    left in `scratch` (the cross-warp step of a Reduce)."""

    task: str
    target: str
    op: str
    scratch: str
    cross_warps: int


@dataclass(frozen=True)
class SpillTile:
    """A layout conversion, first half: every thread writes its values of `value` to the
    scratch tile (row-major, one f32 or i32 word per element)."""

    task: str
    value: str
    scratch: str                 # row-major; its shape's last dim is the row pitch
    vector: int = 1              # consecutive values per shared store


@dataclass(frozen=True)
class FillTile:
    """A layout conversion, second half: `target` (the same tile in another layout) reads
    its values back from the scratch tile."""

    task: str
    target: str
    scratch: str
    vector: int = 1              # consecutive values per shared load
    transposed: bool = False     # target is the transpose of the spilled tile


@dataclass(frozen=True)
class Operand:
    """An mma operand: registers already in the atom's layout, or a shared-memory tile read
    fragment by fragment (ldmatrix) inside the k-steps."""

    value: str                   # a value name
    in_registers: bool
    transposed: bool = False     # shared: stored as the transpose of the operand


@dataclass(frozen=True)
class Mma:
    """out = addend + a @ b on the tensor cores: `atom` tiled `mi x ni` per warp, `ks`
    k-steps, warps `wm x wn` over the output."""

    task: str
    out: str
    addend: str | None           # None: out starts at zero
    a: Operand
    b: Operand
    atom: Atom
    mi: int
    ni: int
    ks: int
    wm: int
    wn: int
    dtype: str                   # operand dtype
    # the instructions compute out^T = b^T a^T (atoms.Tiling.swapped): `a` and `b` above
    # are the instruction's operands (the statement's b and a, read transposed), mi, ni,
    # wm, wn its tiling; out's rows are the instruction's columns
    swapped: bool = False
    replicas: int = 1            # warps computing each atom (atoms.Tiling.replicas)


@dataclass(frozen=True)
class SimtMatmul:
    """out = addend + a @ b on the CUDA cores (tiles the tensor cores do not take)."""

    task: str
    out: str
    addend: str | None
    a: T.TExpr
    b: T.TExpr
    k: int


@dataclass(frozen=True)
class LoadFragments:
    """A loop-invariant shared-memory operand, read into registers once (ldmatrix)."""

    target: str
    source: str                  # the loaded value it copies
    operand: str                 # "a" | "b"
    transposed: bool


@dataclass(frozen=True)
class StoreTile:
    """registers -> global (or atomic add): each value where the tile is inside the tensor;
    replicated values are written by one thread."""

    task: str
    tile: GlobalTile
    value: str
    atomic: bool
    vector: int = 1              # consecutive elements per store instruction
    fallback_vector: int = 0     # vector when `aligned` does not hold (0: no variant)


@dataclass(frozen=True)
class Loop:
    """for var in [0, trips): trips = ceil(min(dim, until) / size). A pipelined loop has
    its first `stages - 1` iterations' copies issued before it (`fill`); a loop that keeps
    a wgmma group in flight waits for the last one after it (`drain`)."""

    var: str
    size: int
    dim: str
    until: T.TExpr | None
    body: tuple["Op", ...]
    stages: int = 1
    fill: tuple["Op", ...] = ()
    drain: tuple["Op", ...] = ()     # after the last iteration, where trips_<var> is known
    peel: int = 0                    # the body runs trips - peel times (a rotated loop)


@dataclass(frozen=True)
class Iteration:
    """Ops of another iteration of a rotated loop (the plan's step offsets,
    ptc.sched.rotate): `first` in the loop's fill (iteration 0, if the loop runs), `next`
    in its body (iteration var + 1: the loop stops one iteration early, `peel`, so there
    always is one), `last` in its drain (the last iteration, if the loop runs). Inside,
    the loop's index and its ring uses are that iteration's."""

    var: str
    which: str               # first | next | last
    body: tuple["Op", ...]


@dataclass(frozen=True)
class PlanWait:
    """A plan wait on copied buffers, as the lowering first places it; ptc.lower.sync
    turns it into WaitGroups (or drops it) -- it reaches a LoweredKernel only in a dump
    of the ops before that pass (ptc.lower.passes)."""

    buffers: tuple[str, ...]


# ---- warp-specialized kernels (sm90a; docs/sm90.md, docs/lowering.md) -------------------
@dataclass(frozen=True)
class MbarrierSet:
    """The mbarriers of one plan barrier: an 8-byte word per ring slot, from `offset`."""

    name: str                    # the plan barrier (full:A_smem)
    slots: int
    arrivals: int                # arrivals a phase takes
    offset: int
    # arrivals a phase takes in the element-wise variant (the launch's alignment checks
    # failed), where each producer thread arrives after copying its share of a tile that
    # TMA loads otherwise; 0: the same as `arrivals`
    elementwise_arrivals: int = 0


@dataclass(frozen=True)
class InitBarriers:
    """One thread initializes every mbarrier, then the whole block meets (__syncthreads)."""

    barriers: tuple[MbarrierSet, ...]


@dataclass(frozen=True)
class TensorMap:
    """A TMA tensor map, encoded on the host before the launch and passed by value."""

    name: str                    # its C name (a kernel parameter)
    tensor: str
    dtype: str
    dims: tuple[T.TExpr, ...]    # elements, innermost first
    strides: tuple[T.TExpr, ...]  # bytes, of dims 1..rank-1
    box: tuple[int, ...]         # elements, innermost first
    swizzle: int                 # the swizzle span in bytes, 0 for none


@dataclass(frozen=True)
class TmaLoad:
    """One thread: arrive on `barrier` expecting the tile's bytes, then load the tile into
    the slot, one box per column panel (the innermost coordinate moving a panel's columns)."""

    task: str
    buffer: str
    map: str
    coords: tuple[T.TExpr, ...]  # per tensor dim, innermost first: panel 0's box
    panels: int
    panel_cols: int
    panel_bytes: int
    bytes: int
    barrier: str
    loop: str = ""               # the loop whose iteration picks the slot
    # where the launch's alignment checks fail (a stride that is not a 16-byte multiple:
    # no tensor map), the producer warpgroup copies this tile element by element into the
    # same layout, and each thread fences its copies for the tensor cores and arrives
    tile: GlobalTile | None = None
    # the waits for the slot to be free: only the thread that issues the load waits (a
    # thread that waits on a barrier without using it can fall two phases behind, where
    # the parity it waits for means the other phase); all of them where they copy
    waits: tuple["MbarrierWait", ...] = ()


@dataclass(frozen=True)
class ProducerCopy:
    """A tile no TMA box takes (a scalar, rows not whole 16-byte chunks, gathered or
    strided rows): the producer warpgroup's threads copy it by cp.async, one element each
    or, for gathered and strided rows, 16-byte chunks of each row (ptc.lower.tma,
    per_thread_copy), wait for their copies, and each arrives on `barrier` (its own copies
    released to the consumers that wait there; the plan puts it on the per-thread copy
    unit)."""

    task: str
    buffer: str
    tile: GlobalTile
    barrier: str
    loop: str = ""
    vector: int = 1          # gathered or strided rows: 16-byte chunks where the launch
                             # found them aligned


@dataclass(frozen=True)
class StageOperand:
    """A wgmma operand computed in registers that wgmma reads from shared memory (B): every
    thread writes its values of `value` into `buffer` (its consumer warpgroup's copy) in
    the layout TMA would have written, then fences them for the tensor cores; a named
    barrier follows. `stmatrix`: (64-row atoms, 16-column blocks) when each warp stores
    its 16 x 16 blocks with stmatrix.x4 (ptc.lower.stmatrix), else () for st.shared;
    `pairs`: st.shared of whole 16-bit registers, whose two values are neighbours in a row
    of the tile (ptc.lower.pairs.pair_axis), else of each value."""

    task: str
    value: str
    buffer: str
    stmatrix: tuple[int, ...] = ()
    pairs: bool = False


@dataclass(frozen=True)
class TmaStore:
    """The epilogue by TMA: the warpgroup writes `value` (its rows of the tile) into its
    copy of `buffer` in the layout TMA reads, fences it for the async proxy and meets; one
    thread stores it, one box per column panel, and waits until the boxes have been read
    out of shared memory; the warpgroup meets again. Where the launch's alignment checks
    fail (no tensor map), `fallback` stores from the registers instead."""

    task: str
    value: str
    buffer: str
    map: str
    coords: tuple[T.TExpr, ...]  # per tensor dim, innermost first: panel 0's box
    panels: int
    panel_cols: int
    panel_bytes: int
    stage: StageOperand          # how the warpgroup writes the tile to `buffer`
    fallback: StoreTile


@dataclass(frozen=True)
class MbarrierWait:
    """Wait for the phase of a slot's barrier: a consumer for the data of this use of the
    slot, a producer (`free`) for the slot's previous use to be released."""

    barrier: str
    loop: str
    slots: int
    free: bool = False


@dataclass(frozen=True)
class MbarrierArrive:
    """One thread of the role instance arrives on the slot's barrier; `per_warp`: lane 0
    of each warp, once its lanes have met (__syncwarp) -- where CUDA cores read the slot,
    a warp's reads are done when its lanes meet, and no warp waits for the others."""

    barrier: str
    loop: str
    slots: int
    per_warp: bool = False
    # releases the slot of the use `lag` before this one (the wgmma that read it is done
    # only now): in the loop, from iteration `lag` on; after it (`after_loop`), when the
    # loop ran at least `lag` times
    lag: int = 0
    after_loop: bool = False


@dataclass(frozen=True)
class WgmmaOperand:
    """A wgmma operand: A-fragment registers, or a shared tile read by descriptor (`mn_major`:
    along m or n, i.e. A's transpose or B itself; `split`: the instance's rows of it)."""

    value: str
    in_registers: bool
    mn_major: bool = False
    split: bool = False


@dataclass(frozen=True)
class Wgmma:
    """out = addend + a @ b on the warpgroup: `mi` m64nNk16 atoms along m, `ks` k-steps,
    fenced before, committed after (the wait is its own op)."""

    task: str
    out: str
    addend: str | None
    a: WgmmaOperand
    b: WgmmaOperand
    n: int
    mi: int
    ks: int
    dtype: str
    swapped: bool = False    # out = a' @ b' as out^T = b'^T a'^T: a = b'^T, b = a'^T (rs_swap)

@dataclass(frozen=True)
class WgmmaWait:
    """Wait until at most `pending` wgmma groups of this thread are in flight; `values`,
    the accumulators of the groups it waits for, are pinned after it (PinAccumulators)."""

    pending: int
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class PinAccumulators:
    """No instruction that reads or writes these wgmma accumulators moves across this
    point: the compiler sees no dependence between a wgmma's registers and its fence or
    wait, and would otherwise read them before the wait, or define them inside a wgmma's
    span from fence to wait (where ptxas serializes the wgmmas, C7515)."""

    values: tuple[str, ...]


@dataclass(frozen=True)
class NamedBarrier:
    """A named barrier of `threads` threads: bar.sync (meet) or, with `arrive`, bar.arrive
    (count in without waiting). Its id is `base` + the instance's index, or with
    `next_instance` the next instance's (ping-pong hands its turn on); `only` >= 0: just
    that instance executes it. The default: the threads of this instance meet."""

    why: str
    base: int = 1
    threads: int = 128
    arrive: bool = False
    next_instance: bool = False
    only: int = -1


@dataclass(frozen=True)
class Role:
    """One warp-specialized role: `instances` warpgroups from `first_warpgroup`, with
    `registers` per thread after setmaxnreg (inc when more than the launch's)."""

    name: str
    first_warpgroup: int
    instances: int
    registers: int
    body: tuple["Op", ...]
    split: str = ""              # the grid index whose tile rows the instances divide
    rows: int = 0                # rows per instance (0: not divided)
    issuer: bool = False         # it issues the TMA loads (one thread of it does)


@dataclass(frozen=True)
class Specialized:
    """The roles, each a branch on the thread's warpgroup; threads start with
    `launch_registers` each."""

    launch_registers: int
    roles: tuple[Role, ...]


Op = Union[CopyTile, CommitGroup, WaitGroups, Barrier, Compute, Reduce, WarpCombine, Mma,
           SimtMatmul, LoadFragments, StoreTile, SpillTile, FillTile, Loop, InitBarriers,
           TmaLoad, ProducerCopy, StageOperand, TmaStore, MbarrierWait, MbarrierArrive, Wgmma, WgmmaWait,
           PinAccumulators, NamedBarrier, Specialized, Iteration]


# ---- the kernel ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Launch:
    grid: tuple[tuple[str, T.TExpr], ...]   # (index name, count) per grid axis, outermost first
    threads: int
    warps: int
    dynamic_smem: int
    registers: int               # estimate per thread
    blocks_per_eu: int           # resident blocks the resources allow
    persistent: bool = False
    # blocks per EU the element-wise variant (alignment checks failed) asks the register
    # allocator to keep resident: its scalar copy loops raise the pressure, and left to its
    # heuristic ptxas caps them at 128 registers and spills; 1 lets it take what it needs.
    # The vector variant keeps ptxas's own choice (0: no bound), unless the registers limit
    # the plan to one or two blocks per EU (then that count, for the same reason:
    # registers.register_bound_blocks).
    min_blocks_elementwise: int = 1
    min_blocks: int = 0


@dataclass(frozen=True)
class TaskCost:
    """What one execution of a task issues, per warp (from the ops that realize it)."""

    task: str
    unit: str
    mma_instructions: int = 0
    fragment_loads: int = 0      # ldmatrix (or the equivalent shared reads)
    simt_instructions: int = 0   # FP32 / integer pipe
    mma_copies: int = 1          # warps that compute each atom (atoms.Tiling.replicas)
    sfu_instructions: int = 0
    shuffles: int = 0
    shared_accesses: int = 0
    copy_bytes: int = 0          # per block
    barriers: int = 0


@dataclass(frozen=True)
class LoweredKernel:
    kernel: str
    device: str
    target_backend: str
    plan_style: Style
    launch: Launch
    layouts: tuple[Layout, ...]
    buffers: tuple[Buffer, ...]
    values: tuple[tuple[str, object], ...]   # name -> RegTile | InShared | T.TileType (scalar)
    body: tuple[Op, ...]
    units: tuple[tuple[str, str], ...]       # task -> the unit that computes it
    costs: tuple[TaskCost, ...]
    # what the vector copies assume, checked at launch (else the element-wise variant):
    # ("dim", name, n): the dim is a multiple of n; ("tensor", name, n): its pointer is
    # n-byte aligned
    alignment: tuple[tuple[str, str, int], ...] = ()
    notes: tuple[str, ...] = field(default=())
    tensor_maps: tuple[TensorMap, ...] = ()
    # the 16-bit dtypes whose +, -, * and integer conversions are computed in 16 bits (the
    # renderer's Capabilities.native16): what the renderer prints and the cost model counts
    arith16: tuple[str, ...] = ()
    # the ranges of the i32 values the kernel names once (sema.ranges.named_ranges): what
    # the pair forms of ptc.lower.pairs read, in the lowering, the cost model and the renderer
    int_ranges: tuple[tuple[str, tuple[int, int]], ...] = ()
    fp8_cvt: bool = False    # conversions to FP8 by the instruction (lowering.fp8_by_cvt)

    def layout(self, name: str) -> Layout:
        for lay in self.layouts:
            if lay.name == name:
                return lay
        raise KeyError(name)

    def buffer(self, name: str) -> Buffer:
        for b in self.buffers:
            if b.name == name:
                return b
        raise KeyError(name)

    def home(self, name: str):
        for n, h in self.values:
            if n == name:
                return h
        raise KeyError(name)

    @property
    def smem_bytes(self) -> int:
        return self.launch.dynamic_smem

    def cost(self, task: str) -> TaskCost | None:
        for c in self.costs:
            if c.task == task:
                return c
        return None


def walk(ops, fills: bool = True) -> list:
    """Every op, loops' fills and bodies and roles' bodies included, in program order
    (`fills`: with the ops loops run before their first iteration)."""
    out = []
    for op in ops:
        if isinstance(op, Loop):
            if fills:
                out.extend(walk(op.fill, fills))
            out.append(op)
            out.extend(walk(op.body, fills))
            out.extend(walk(op.drain, fills))
        elif isinstance(op, Iteration):
            out.append(op)
            out.extend(walk(op.body, fills))
        elif isinstance(op, Specialized):
            out.append(op)
            for role in op.roles:
                out.extend(walk(role.body, fills))
        else:
            out.append(op)
    return out
