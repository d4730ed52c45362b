"""The CUDA backend's matrix instructions, as data (ptc.lower.atoms.Atom; ATOMS in order of
preference where a device offers several). The documented fragment layouts:

- mma.sync.m16n8k16 (sm80+): PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating
  point type": groupID g = lane / 4, threadID_in_group t = lane % 4; A a0..a7 at row g
  (+8 for a2,a3,a6,a7), col 2t + (i & 1) (+8 for i >= 4); B b0..b3 at row 2t + (i & 1)
  (+8 for i >= 2), col g; C/D c0..c3 at row g (+8 for i >= 2), col 2t + (i & 1).
- mma.sync.m16n8k32 .s32.s8.s8.s32 (sm80+): PTX ISA, "Matrix Fragments for mma.m16n8k32"
  (.s8/.u8): A a0..a15 in four registers, row g for a0-a3 and a8-a11, g + 8 for the others,
  col 4t + (i & 3), + 16 for i >= 8; B b0..b7 in two registers, row 4t + (i & 3), + 16 for
  i >= 4, col g; C/D (.s32) as m16n8k16's f32 c0..c3. (Byte for byte, A and B are the
  m16n8k16 f16 fragments of the same 32-byte rows: ldmatrix reads them as it reads f16.)
(wgmma, the warp-specialized plans' instruction, is laid out by ptc.lower.specialized_plan.)
"""
from dataclasses import replace

from ptc.lower.atoms import Atom, Fragment
from ptc.lower.layout import digits

MMA_SYNC_16816 = Atom(
    "mma.sync.m16n8k16", "mma_sync", 16, 8, 16, 32,
    a=Fragment(digits((2, (0, 1)), (2, (8, 0)), (2, (0, 8))), digits((4, (0, 2)), (8, (1, 0)))),
    b=Fragment(digits((2, (1, 0)), (2, (8, 0))), digits((4, (2, 0)), (8, (0, 1)))),
    c=Fragment(digits((2, (0, 1)), (2, (8, 0))), digits((4, (0, 2)), (8, (1, 0)))),
    dtypes=("f16", "bf16"))


# tf32 operands, one f32 per register (PTX ISA, "Matrix Fragments for mma.m16n8k8", .tf32):
# A a0..a3 at (g, t) (g + 8, t) (g, t + 4) (g + 8, t + 4); B b0, b1 at (t, g) (t + 4, g);
# C as m16n8k16's. Its operands are register tiles (the values `as tf32` rounds).
MMA_SYNC_1688_TF32 = Atom(
    "mma.sync.m16n8k8", "mma_sync", 16, 8, 8, 32,
    a=Fragment(digits((2, (8, 0)), (2, (0, 4))), digits((4, (0, 1)), (8, (1, 0)))),
    b=Fragment(digits((2, (4, 0))), digits((4, (1, 0)), (8, (0, 1)))),
    c=Fragment(digits((2, (0, 1)), (2, (8, 0))), digits((4, (0, 2)), (8, (1, 0)))),
    dtypes=("tf32",))


# i8 operands, s32 accumulators. ldmatrix takes an operand stored with k contiguous (A
# [m][k], B [n][k]): its 16-bit units are pairs of bytes, and the fragments are byte for byte
# those of m16n8k16 f16. ldmatrix has no 8-bit transpose: an operand stored the other way
# (B [k][n], A [k][m]) is read byte by byte, 4 bytes packed per register: 16 byte loads per
# A block and 8 per B block, about a quarter of an ldmatrix.x4's time each (one wavefront).
MMA_SYNC_16832_S8 = Atom(
    "mma.sync.m16n8k32", "mma_sync", 16, 8, 32, 32,
    a=Fragment(digits((4, (0, 1)), (2, (8, 0)), (2, (0, 16))),
               digits((4, (0, 4)), (8, (1, 0)))),
    b=Fragment(digits((4, (1, 0)), (2, (16, 0))), digits((4, (4, 0)), (8, (0, 1)))),
    c=Fragment(digits((2, (0, 1)), (2, (8, 0))), digits((4, (0, 2)), (8, (1, 0)))),
    dtypes=("i8",), a_loads=(1.0, 4.0), b_loads=(0.5, 2.0), accumulator="i32")

# FP8 (e4m3, e5m2, mixed) where mma.sync has no FP8 form (sm80; sm90's mma.sync plans): the
# m16n8k32 .s8 byte fragments, so the 8-bit operand reads serve unchanged; the renderer
# widens each register of 4 bytes to two f16x2 registers and issues two m16n8k16 f16
# instructions (mma_sync.cuh, Mma16832F8, says why the sum over k is the product's).
MMA_SYNC_16832_F8 = replace(MMA_SYNC_16832_S8, dtypes=("f8e4m3", "f8e5m2"), accumulator="f32",
                            widens_to="f16")


ATOMS = (MMA_SYNC_16816, MMA_SYNC_1688_TF32, MMA_SYNC_16832_S8, MMA_SYNC_16832_F8)
