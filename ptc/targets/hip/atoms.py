"""The HIP backend's matrix instructions, as data (ptc.lower.atoms.Atom; ATOMS in order of
preference where a device offers several, the narrow ones last). The documented fragment
layouts:

- MFMA (CDNA2/CDNA3, wave64): AMD's "AMD Instinct MI200/MI300 ISA" matrix-instruction
  operand tables (also the AMD matrix instruction calculator): v_mfma_f32_32x32x8{f16,bf16_1k}:
  A[i][k] in lane i + 32 * (k / 4), register k % 4; B[k][j] in lane j + 32 * (k / 4);
  D[i][j] in lane j + 32 * ((i / 4) % 2), register (i % 4) + 4 * (i / 8).
  v_mfma_f32_16x16x16{f16,bf16_1k}: A[i][k] in lane i + 16 * (k / 4), register k % 4;
  B[k][j] in lane j + 16 * (k / 4); D[i][j] in lane j + 16 * (i / 4), register i % 4.
- v_mfma_i32_{16x16x16,32x32x8}i8 (CDNA1/2: gfx908, gfx90a; LLVM's isGFX908orGFX90A, no
  longer on gfx940+): one 32-bit register of four i8 per operand, laid out as the f16
  instructions of the same M x N x K: A[i][k] in lane i + M * (k / 4), byte k % 4; B[k][j] in
  lane j + M * (k / 4); D as v_mfma_f32_{16x16x16,32x32x8}'s (composable_kernel
  xdlops_gemm.hpp: k_per_blk 4; the AMD matrix instruction calculator).
- v_mfma_i32_{16x16x32,32x32x16}_i8 (CDNA3: gfx940+, clang's
  __builtin_amdgcn_mfma_i32_16x16x32_i8 with 64-bit operands): eight i8 per lane, A[i][k] in
  lane i + M * (k / 8), byte k % 8 (two registers, low first); B[k][j] in lane
  j + M * (k / 8); D as the f32 instructions' (xdlops_gemm.hpp: k_per_blk 8, num_input_blks
  4 and 2; AMD CDNA3 ISA, "Dependent Arithmetic / MFMA" operand tables).
- v_mfma_f32_{32x32x16,16x16x32}_{fp8,bf8}_{fp8,bf8} (CDNA3: gfx940+, clang's
  __builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8 etc. with 64-bit operands): the i8 instructions'
  lanes and bytes (CK's xdlops_gemm.hpp: mfma_f32_32x32x16f8f8 and the other three pairs have
  k_per_blk 8, as mfma_i32_32x32x16i8; CK's amd_xdlops.hpp passes eight FP8 as one `long`),
  f32 accumulators as the f32 instructions'. Their operands are the FNUZ formats (e4m3fnuz:
  bias 8, e5m2fnuz: bias 16; NaN only 0x80, no -0, no infinities), so the renderer rebiases
  OCP codes in registers (`Atom.fnuz`; targets/hip/templates/mfma.h, MfmaFnuz).
"""
from dataclasses import replace

from ptc.lower.atoms import Atom, Fragment, narrowed
from ptc.lower.layout import digits

MFMA_32x32x8 = Atom(
    "mfma.f32.32x32x8", "mfma", 32, 32, 8, 64,
    a=Fragment(digits((4, (0, 1))), digits((32, (1, 0)), (2, (0, 4)))),
    b=Fragment(digits((4, (1, 0))), digits((32, (0, 1)), (2, (4, 0)))),
    c=Fragment(digits((4, (1, 0)), (4, (8, 0))), digits((32, (0, 1)), (2, (4, 0)))),
    dtypes=("f16", "bf16"), a_loads=(1.0, 4.0), b_loads=(1.0, 4.0))

MFMA_16x16x16 = Atom(
    "mfma.f32.16x16x16", "mfma", 16, 16, 16, 64,
    a=Fragment(digits((4, (0, 1))), digits((16, (1, 0)), (4, (0, 4)))),
    b=Fragment(digits((4, (1, 0))), digits((16, (0, 1)), (4, (4, 0)))),
    c=Fragment(digits((4, (1, 0))), digits((16, (0, 1)), (4, (4, 0)))),
    dtypes=("f16", "bf16"), a_loads=(1.0, 4.0), b_loads=(1.0, 4.0))

# CDNA2: four i8 (one register) per lane, the f16 instructions' layouts; a lane's bytes of a
# k-contiguous tile are one 4-byte read, else four 1-byte reads
MFMA_I8_32x32x8 = Atom(
    "mfma.i32.32x32x8i8", "mfma_i8", 32, 32, 8, 64,
    a=Fragment(digits((4, (0, 1))), digits((32, (1, 0)), (2, (0, 4)))),
    b=Fragment(digits((4, (1, 0))), digits((32, (0, 1)), (2, (4, 0)))),
    c=Fragment(digits((4, (1, 0)), (4, (8, 0))), digits((32, (0, 1)), (2, (4, 0)))),
    dtypes=("i8",), a_loads=(1.0, 4.0), b_loads=(1.0, 4.0), accumulator="i32")

MFMA_I8_16x16x16 = Atom(
    "mfma.i32.16x16x16i8", "mfma_i8", 16, 16, 16, 64,
    a=Fragment(digits((4, (0, 1))), digits((16, (1, 0)), (4, (0, 4)))),
    b=Fragment(digits((4, (1, 0))), digits((16, (0, 1)), (4, (4, 0)))),
    c=Fragment(digits((4, (1, 0))), digits((16, (0, 1)), (4, (4, 0)))),
    dtypes=("i8",), a_loads=(1.0, 4.0), b_loads=(1.0, 4.0), accumulator="i32")

# FP8 on CDNA2 (no FP8 MFMA): the i8 atoms' byte layouts, which are the f16 ones; the
# renderer widens a lane's register of 4 bytes to f16 and issues the f16 instruction
MFMA_F8_32x32x8 = replace(MFMA_I8_32x32x8, dtypes=("f8e4m3", "f8e5m2"), accumulator="f32",
                          widens_to="f16")
MFMA_F8_16x16x16 = replace(MFMA_I8_16x16x16, dtypes=("f8e4m3", "f8e5m2"), accumulator="f32",
                           widens_to="f16")

# CDNA3: eight i8 (two registers) per lane; one 8-byte read of a k-contiguous tile, else eight
# 1-byte reads
MFMA_I8_32x32x16 = Atom(
    "mfma.i32.32x32x16i8", "mfma_i8_k8", 32, 32, 16, 64,
    a=Fragment(digits((8, (0, 1))), digits((32, (1, 0)), (2, (0, 8)))),
    b=Fragment(digits((8, (1, 0))), digits((32, (0, 1)), (2, (8, 0)))),
    c=Fragment(digits((4, (1, 0)), (4, (8, 0))), digits((32, (0, 1)), (2, (4, 0)))),
    dtypes=("i8",), a_loads=(1.0, 8.0), b_loads=(1.0, 8.0), accumulator="i32")

MFMA_I8_16x16x32 = Atom(
    "mfma.i32.16x16x32i8", "mfma_i8_k8", 16, 16, 32, 64,
    a=Fragment(digits((8, (0, 1))), digits((16, (1, 0)), (4, (0, 8)))),
    b=Fragment(digits((8, (1, 0))), digits((16, (0, 1)), (4, (8, 0)))),
    c=Fragment(digits((4, (1, 0))), digits((16, (0, 1)), (4, (4, 0)))),
    dtypes=("i8",), a_loads=(1.0, 8.0), b_loads=(1.0, 8.0), accumulator="i32")

# FP8 on CDNA3's FP8 matrix unit: the i8 atoms' lanes and bytes, f32 accumulators
MFMA_F8_32x32x16 = replace(MFMA_I8_32x32x16, name="mfma.f32.32x32x16f8", feature="mfma_f8",
                           dtypes=("f8e4m3", "f8e5m2"), accumulator="f32", fnuz=True)
MFMA_F8_16x16x32 = replace(MFMA_I8_16x16x32, name="mfma.f32.16x16x32f8", feature="mfma_f8",
                           dtypes=("f8e4m3", "f8e5m2"), accumulator="f32", fnuz=True)


WHOLE = (MFMA_16x16x16, MFMA_32x32x8,
         MFMA_I8_16x16x32, MFMA_I8_32x32x16, MFMA_I8_16x16x16, MFMA_I8_32x32x8,
         MFMA_F8_16x16x16, MFMA_F8_32x32x8, MFMA_F8_16x16x32, MFMA_F8_32x32x16)
# the 16 x 16 MFMAs for 8 rows or 8 columns: taken only where no whole atom tiles a product
NARROW_ATOMS = tuple(narrowed(a, axis) for axis in (1, 0)
                     for a in (MFMA_16x16x16, MFMA_I8_16x16x32, MFMA_I8_16x16x16,
                               MFMA_F8_16x16x16, MFMA_F8_16x16x32))


ATOMS = WHOLE + NARROW_ATOMS
