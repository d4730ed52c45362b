"""What each task issues, per warp, read off the ops that realize it: the cost model
(ptc.sched.cost) times these instead of guessing from the task's FLOPs.

Counts per warp for one execution of the task:
- mma: tensor-core instructions (one per atom per k-step), and the fragment loads of
  operands read from shared memory (per atom: ldmatrix x4, one per 16x16 A block and one
  per two 8-wide B blocks; MFMA, one 8-byte read per lane or four 2-byte ones);
- simt: one instruction per value per elementwise node (a thread's values are its
  layout's size), conversions included (to and from FP8: ptc's software coder, several),
  a 16-bit operation computed in f32 two more (the conversion to 16 bits and back), an f32
  product that is added counted with the add (a fused multiply-add; 16-bit operations
  round in between), what a broadcast reads once per row; transcendental functions add
  one SFU instruction per value (and `exp` its multiply by log2 e); a reduction is one
  instruction per value in the thread, then one shuffle and one combine per lane mask per
  result value, then (across warps) shared-memory stores, loads and combines; reads of
  shared-memory tiles one access per value;
- copies: the bytes of the tile (per block), a few instructions per chunk and, where the
  copy goes through registers (staged or synchronous), its stores to shared memory.
"""
from __future__ import annotations

import math
from collections import defaultdict

from ..ops import SFU_OPS
from ..sema import typed as T
from ..stask.graph import STaskGraph
from . import ir, pairs

SFU = SFU_OPS           # the op table's transcendentals (ptc.ops)
# FP8 conversions are bit manipulation (templates/*/ptc_types: to_f8e4m3, f32(f8e4m3)):
# instructions beyond a byte load or store, read from sm_80 / sm_90a SASS (nvcc 13.0)
FP8_ENCODE_INSTRUCTIONS = 20
FP8_DECODE_INSTRUCTIONS = 14
# by the instruction (LoweredKernel.fp8_cvt), two values at a time: F2FP.SATFINITE, then
# the NaN fix-up of the pair (LOP3, IADD, LOP3), per value
FP8_CVT_ENCODE_INSTRUCTIONS = 2
FP8 = ("f8e4m3", "f8e5m2")
# FP8 operands widened to f16 on the way to an f16 instruction (atoms.Atom.widens_to;
# mma_sync.cuh, Mma16832F8), per 32-bit register of four bytes: e5m2 is f16's top byte
# (masks and shifts into two f16x2), e4m3 takes its sign, its 7 low bits shifted, an HMUL2
# by 256 and the NaN fix-up, twice. sm_80 SASS (nvcc 13.0), the 1024^3 main loop of an
# e4m3 x e5m2 GEMM: one HMUL2 per two e4m3 bytes, 726 instructions for 32 HMMA.16816
WIDEN_INSTRUCTIONS_PER_WORD = {"f8e4m3": 20, "f8e5m2": 4}
# FP8 operands rebiased to FNUZ for CDNA3's FP8 MFMAs (atoms.Atom.fnuz; mfma.h, MfmaFnuz),
# per register of four codes: the -0 and NaN fix-up, 9 VALU (masks, adds, a shift, one
# v_and_or_b32), and for e5m2 the infinity test that picks the f16 k-step, 4 more; the
# accumulator is scaled by 1/4 and by 4 around each tile of k-steps: per register an AGPR read,
# two multiplies packed as one v_pk_mul_f32, an AGPR write. Read from the clang-19 gfx942 ISA of
# the 1024^3 main loops (B [N, K], one 32x32x16 atom per wave, 4 k-steps, 16 words): e4m3 x
# e4m3 275 instructions, e5m2 x e5m2 345 beside its f16 k-steps.
FNUZ_FIXUP_INSTRUCTIONS_PER_WORD = {"f8e4m3": 9, "f8e5m2": 13}
FNUZ_SCALE_INSTRUCTIONS_PER_REGISTER = 3
# a 16-bit operation the target does not compute in 16 bits (LoweredKernel.arith16) is
# computed in f32 and rounded: a conversion to 16 bits and one back (F2FP, HADD2.F32)
ROUND_TRIP_INSTRUCTIONS = 2
COPY_INSTRUCTIONS_PER_CHUNK = 3   # address, predicate, the copy
# a gathered row's chunk (or stored element) first loads its row's position, checks it
# against the dim and forms the 64-bit row address (GatherRows.at in the copy headers)
GATHER_INSTRUCTIONS_PER_CHUNK = 3


def expression_counts(e: T.TExpr, values: dict, fused: bool = False,
                      per_row: bool = False, arith16: tuple[str, ...] = (),
                      fp8_cvt: bool = False) -> tuple[int, int, int]:
    """(simt ops, sfu ops, shared reads) per value of an elementwise expression, as the
    compilers issue it: a product added or subtracted is one fused multiply-add (`fused`:
    this product is); `exp` is a multiply by log2 e and the SFU's 2^x; what a broadcast
    (`x[:, None]`) reads is computed once per row, not per value (`per_row`: nothing
    counted but shared-memory reads); `arith16`: the 16-bit dtypes computed in 16 bits;
    `fp8_cvt`: conversions to FP8 by the instruction."""
    simt = sfu = shared = 0
    if isinstance(e, (T.Elementwise, T.Convert)) and not per_row:
        simt += 0 if fused else 1 + (e.op == "exp" if isinstance(e, T.Elementwise) else 0)
        if isinstance(e, T.Convert) and e.type.dtype in FP8 and e.arg.type.dtype != e.type.dtype:
            simt += (FP8_CVT_ENCODE_INSTRUCTIONS if fp8_cvt else FP8_ENCODE_INSTRUCTIONS) - 1
        elif isinstance(e, T.Convert) and e.arg.type.dtype in FP8:
            simt += FP8_DECODE_INSTRUCTIONS - 1
        if isinstance(e, T.Elementwise) and e.op in SFU:
            sfu += 1
        if isinstance(e, T.Elementwise) and e.type.dtype in ("f16", "bf16") and \
                e.type.dtype not in arith16:
            simt += ROUND_TRIP_INSTRUCTIONS
    if isinstance(e, T.Var) and isinstance(values.get(e.name), ir.InShared):
        shared += 1
    fuse = isinstance(e, T.Elementwise) and e.op in ("add", "sub") and e.type.dtype == "f32"
    for c in T.children(e):
        into = fuse and isinstance(c, T.Elementwise) and c.op == "mul"
        fuse = fuse and not into             # one product per add
        a, b, s = expression_counts(c, values, into, per_row or isinstance(e, T.Expand),
                                    arith16, fp8_cvt)
        simt, sfu, shared = simt + a, sfu + b, shared + s
    return simt, sfu, shared


def task_costs(kernel: ir.LoweredKernel, graph: STaskGraph, device) -> tuple[ir.TaskCost, ...]:
    values = dict(kernel.values)
    units = dict(kernel.units)
    acc: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    threads = kernel.launch.threads

    def size(name: str) -> int:
        home = values.get(name)
        if isinstance(home, ir.RegTile):
            return kernel.layout(home.layout).size
        return 1

    for op in ir.walk(kernel.body, fills=False):     # one iteration's work, not the prologue
        if isinstance(op, ir.Wgmma):     # issued by the warpgroup, operands by descriptor
            acc[op.task]["mma_instructions"] += op.mi * op.ks
        elif isinstance(op, ir.Mma):
            mma_counts(acc[op.task], op, kernel, values)
        elif isinstance(op, ir.SimtMatmul):
            n = size(op.out)
            acc[op.task]["simt_instructions"] += n * op.k
            acc[op.task]["shared_accesses"] += 2 * n * op.k
        elif isinstance(op, ir.Compute) and op.pairs:
            pair_counts(acc[op.task], op, kernel, values, size(op.target))
        elif isinstance(op, ir.Compute):
            n = size(op.target)
            simt, sfu, shared = expression_counts(op.expr, values, arith16=kernel.arith16,
                                                  fp8_cvt=kernel.fp8_cvt)
            c = acc[op.task]
            c["simt_instructions"] += n * max(simt, 1)
            c["sfu_instructions"] += n * sfu
            c["shared_accesses"] += n * shared
        elif isinstance(op, ir.Reduce):
            reduce_counts(acc[op.task], op, kernel, values, size(op.target))
        elif isinstance(op, ir.SpillTile):
            acc[op.task]["shared_accesses"] += size(op.value)
        elif isinstance(op, ir.FillTile):
            acc[op.task]["shared_accesses"] += size(op.target)
        elif isinstance(op, ir.WarpCombine):
            out = size(op.target)
            acc[op.task]["shared_accesses"] += out * op.cross_warps
            acc[op.task]["simt_instructions"] += out * op.cross_warps
        elif isinstance(op, ir.LoadFragments):
            acc["(fragments)"]["fragment_loads"] += size(op.target) // 8
        elif isinstance(op, ir.CopyTile):
            copy_counts(acc[op.task], op, threads)
        elif isinstance(op, ir.StoreTile):
            n = size(op.value)
            per_element = 2 + (GATHER_INSTRUCTIONS_PER_CHUNK if op.tile.gather is not None else 0)
            acc[op.task]["simt_instructions"] += per_element * n
            t = op.tile
            acc[op.task]["copy_bytes"] += t.rows * t.cols * _bytes(t.dtype)
    out = []
    for task, c in acc.items():
        out.append(ir.TaskCost(task, units.get(task, ""), **dict(c)))
    return tuple(out)


def mma_counts(c: dict[str, int], op: ir.Mma, kernel: ir.LoweredKernel, values: dict) -> None:
    """Add what one tensor-core mma issues per warp to its task's counts `c`: the
    instructions, the fragment loads of operands in shared memory, and the conversions of
    operands the atom widens or rebiases."""
    c["mma_instructions"] += op.mi * op.ni * op.ks
    c["mma_copies"] = max(c.get("mma_copies", 1), op.replicas)
    # A is k-contiguous unless transposed, B only when transposed
    if not op.a.in_registers:
        c["fragment_loads"] += math.ceil(op.mi * op.atom.a_loads[op.a.transposed]) * op.ks
    if not op.b.in_registers:
        c["fragment_loads"] += math.ceil(op.ni * op.atom.b_loads[not op.b.transposed]) * op.ks
    if op.atom.widens_to or op.atom.fnuz:    # each operand register converted once
        at = op.atom      # a lane's bytes of a fragment, four to a register
        words = {"a": at.m * at.k // at.threads * op.mi,
                 "b": at.n * at.k // at.threads * op.ni}
        table = FNUZ_FIXUP_INSTRUCTIONS_PER_WORD if at.fnuz else \
            WIDEN_INSTRUCTIONS_PER_WORD
        for which, operand in (("a", op.a), ("b", op.b)):
            dtype = _operand_dtype(kernel, values, operand.value)
            c["simt_instructions"] += table.get(dtype, 0) * words[which] // 4 * op.ks
        if at.fnuz:
            c["simt_instructions"] += (FNUZ_SCALE_INSTRUCTIONS_PER_REGISTER * op.mi
                                       * op.ni * at.m * at.n // at.threads)


def pair_counts(c: dict[str, int], op: ir.Compute, kernel: ir.LoweredKernel, values: dict,
                n: int) -> None:
    """Add what a Compute of `n` 16-bit values per thread computed in pairs issues
    (ptc.lower.pairs): its form's packed instructions per register word, and its leaves'
    own work per value."""
    node = pairs.form(op.expr, values[op.target].dtype, dict(kernel.int_ranges))
    simt = n // 2 * pairs.pair_instructions(node)
    sfu = shared = 0
    for leaf in pairs.pair_leaves(node):
        a, b, s = expression_counts(leaf, values, arith16=kernel.arith16,
                                    fp8_cvt=kernel.fp8_cvt)
        simt, sfu, shared = simt + n * a, sfu + n * b, shared + n * s
    c["simt_instructions"] += simt
    c["sfu_instructions"] += sfu
    c["shared_accesses"] += shared


def reduce_counts(c: dict[str, int], op: ir.Reduce, kernel: ir.LoweredKernel, values: dict,
                  out: int) -> None:
    """Add what one reduction to `out` values per thread issues to its task's counts `c`:
    its operand's expression and one combine per value in the thread, then a shuffle and
    a combine per lane mask per result value, and a shared store per result value where
    warps combine (WarpCombine counts the rest)."""
    lay = kernel.layout(op.source_layout)
    simt, sfu, shared = expression_counts(op.expr, values, arith16=kernel.arith16,
                                          fp8_cvt=kernel.fp8_cvt)
    c["simt_instructions"] += lay.size * (max(simt, 0) + 1) + 2 * out * len(op.lane_masks)
    c["sfu_instructions"] += lay.size * sfu
    c["shuffles"] += out * len(op.lane_masks)
    c["shared_accesses"] += lay.size * shared + (out if op.scratch else 0)


def copy_counts(c: dict[str, int], op: ir.CopyTile, threads: int) -> None:
    """Add what one global -> shared copy issues to its task's counts `c`: the tile's bytes
    (per block) and the instructions of each thread's share of its vector chunks (per
    warp: its threads issue them together)."""
    t = op.tile
    nbytes = t.rows * t.cols * _bytes(t.dtype)
    chunks = t.rows * t.cols / max(op.vector, 1)
    c["copy_bytes"] += nbytes
    per_chunk = COPY_INSTRUCTIONS_PER_CHUNK + \
        (GATHER_INSTRUCTIONS_PER_CHUNK if t.gather is not None else 0)
    c["simt_instructions"] += math.ceil(chunks / threads) * per_chunk
    if op.staged or not op.asynchronous:
        # through registers: each chunk is also stored to shared memory by its thread
        c["shared_accesses"] += math.ceil(chunks / threads) * \
            max(1, op.vector * _bytes(t.dtype) // 4)


def _operand_dtype(kernel: ir.LoweredKernel, values: dict, name: str) -> str:
    home = values.get(name)
    if isinstance(home, ir.InShared):
        return next(b.dtype for b in kernel.buffers if b.name == home.buffer)
    return getattr(home, "dtype", "")


def _bytes(dtype: str) -> int:
    from ..sema.dtypes import DTYPE_BYTES
    return DTYPE_BYTES[dtype]
