// ptc: shared -> register fragments of mma.sync m16n8k16 operands with ldmatrix, from
// row-major (optionally XOR-swizzled) shared tiles. Fragment layouts: PTX ISA, "Matrix
// Fragments for mma.m16n8k16 with floating point type" (also ptc/lower/atoms.py).
//   A [m][k] tile:  ldmatrix.x4 of matrices (m 0-7, k 0-7) (m 8-15, k 0-7) (m 0-7, k 8-15)
//                   (m 8-15, k 8-15) = registers a0..a3; lane l gives row l % 16, col 8 * (l / 16).
//   A stored [k][m] (transposed): the same matrices with .trans.
//   B [k][n] tile:  ldmatrix.x4.trans of (k 0-7, n) (k 8-15, n) (k 0-7, n + 8) (k 8-15, n + 8)
//                   = b0, b1 of two 8-column blocks.
//   B stored [n][k] (transposed): the same matrices without .trans.
#pragma once
#include "ptc_types.cuh"
#include "global_to_shared.cuh"

namespace ptc {

template <int N, bool TRANS>
__device__ __forceinline__ void ldmatrix(uint32_t* r, uint32_t addr) {
#ifdef PTC_EMULATE
  ::ptc::emu::ldmatrix<N, TRANS>(r, ptc_smem + addr);
#else
  if (N == 4 && !TRANS)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
  else if (N == 4)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
  else if (!TRANS)
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
#endif
}

// A shared tile of 16-bit elements: base address, row length, swizzle.
// `at(row, col, lane)`: ldmatrix rows are `row0 + (lane & 7)` (+ 8s) with row0 a multiple
// of 8, so for rows of whole 128-byte lines the swizzle term is lane & 7 alone: the XOR
// is then loop-invariant and the compiler keeps one address per k-step pattern.
template <int ROW_BYTES, bool SWIZZLE>
struct SharedTile {
  uint32_t base;
  __device__ __forceinline__ uint32_t at(int row, int col, int lane) const {
    if (SWIZZLE && ROW_BYTES % 128 == 0) {
      const int chunk = col >> 3;   // 16-byte chunk (col is a multiple of 8)
      return base + row * ROW_BYTES + ((((chunk & 7) ^ (lane & 7)) | (chunk & ~7)) << 4);
    }
    return base + tile_offset<ROW_BYTES, SWIZZLE>(row, col * 2);
  }
};

// The A fragment (16 x 16) at rows m0.., k-columns k0.. ; TRANS: the tile is stored [k][m].
template <bool TRANS, class Tile>
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const Tile& t, int m0, int k0, int lane) {
  if (!TRANS)
    ldmatrix<4, false>(a, t.at(m0 + (lane & 15), k0 + (lane >> 4) * 8, lane));
  else
    ldmatrix<4, true>(a, t.at(k0 + (lane >> 4) * 8 + (lane & 7), m0 + ((lane >> 3) & 1) * 8, lane));
}

// B fragments of NB (1 or 2) 8-column blocks at n0, n0 + 8, k-rows k0.. ; TRANS: stored [n][k].
template <int NB, bool TRANS, class Tile>
__device__ __forceinline__ void load_b(uint32_t* b, const Tile& t, int k0, int n0, int lane) {
  if (!TRANS)
    ldmatrix<NB * 2, true>(b, t.at(k0 + (lane & 7) + ((lane >> 3) & 1) * 8, n0 + (lane >> 4) * 8,
                                   lane));
  else
    ldmatrix<NB * 2, false>(b, t.at(n0 + (lane & 7) + (lane >> 4) * 8, k0 + ((lane >> 3) & 1) * 8,
                                    lane));
}

}  // namespace ptc
