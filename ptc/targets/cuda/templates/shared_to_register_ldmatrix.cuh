// ptc: shared -> register fragments of mma.sync m16n8k16 operands with ldmatrix, from
// row-major (optionally XOR-swizzled) shared tiles. Fragment layouts: PTX ISA, "Matrix
// Fragments for mma.m16n8k16 with floating point type" (also ptc/lower/atoms.py).
//   A [m][k] tile:  ldmatrix.x4 of matrices (m 0-7, k 0-7) (m 8-15, k 0-7) (m 0-7, k 8-15)
//                   (m 8-15, k 8-15) = registers a0..a3; lane l gives row l % 16, col 8 * (l / 16).
//   A stored [k][m] (transposed): the same matrices with .trans.
//   B [k][n] tile:  ldmatrix.x4.trans of (k 0-7, n) (k 8-15, n) (k 0-7, n + 8) (k 8-15, n + 8)
//                   = b0, b1 of two 8-column blocks.
//   B stored [n][k] (transposed): the same matrices without .trans.
// 8-bit operands (SharedTile<..., 1>, mma.sync m16n8k32 .s8): a 16-bit unit of ldmatrix is a
// pair of bytes, and the m16n8k32 fragments are byte for byte the m16n8k16 ones of the same
// 32-byte rows (k steps of 32 bytes = 16 units), so A [m][k] and B [n][k] take the same
// ldmatrix (no .trans). ldmatrix has no 8-bit transpose: A stored [k][m] and B stored
// [k][n] are read byte by byte, four bytes packed per register (16 loads per A fragment,
// 8 per B fragment).
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

// A shared tile of 16-bit elements (EB = 1: of bytes, addressed in pairs): base address,
// row length, swizzle.
// `at(row, col, lane)`: ldmatrix rows are `row0 + (lane & 7)` (+ 8s) with row0 a multiple
// of 8, so for rows of whole 128-byte lines the swizzle term is lane & 7 alone: the XOR
// is then loop-invariant and the compiler keeps one address per k-step pattern. `col` counts
// 16-bit units. `byte_at(row, byte)`: any byte.
template <int ROW_BYTES, bool SWIZZLE, int EB = 2>
struct SharedTile {
  static constexpr int ELEMENT_BYTES = EB;
  uint32_t base;
  __device__ __forceinline__ uint32_t byte_at(int row, int byte) const {
    return base + tile_offset<ROW_BYTES, SWIZZLE>(row, byte);
  }
  __device__ __forceinline__ uint32_t at(int row, int col, int lane) const {
    if (SWIZZLE && ROW_BYTES % 128 == 0) {
      const int chunk = col >> 3;   // 16-byte chunk (col is a multiple of 8)
      return base + row * ROW_BYTES + ((((chunk & 7) ^ (lane & 7)) | (chunk & ~7)) << 4);
    }
    return base + tile_offset<ROW_BYTES, SWIZZLE>(row, col * 2);
  }
};

// four bytes, byte i at byte_at(row(i), col(i)), packed lowest first
template <class Tile, class Row, class Col>
__device__ __forceinline__ uint32_t gather_bytes(const Tile& t, Row row, Col col) {
  uint32_t r = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i)
    r |= static_cast<uint32_t>(ld_shared<uint8_t>(t.byte_at(row(i), col(i)))) << (8 * i);
  return r;
}

// The A fragment (16 x 16) at rows m0.., k-columns k0.. ; TRANS: the tile is stored [k][m].
// 8-bit: 16 x 32 bytes at k-byte 2 k0; stored [k][m], a0..a15 byte by byte (row g + 8 (j & 1),
// k 4t + 16 (j >> 1) + i for byte i of register j).
template <bool TRANS, class Tile>
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const Tile& t, int m0, int k0, int lane) {
  if constexpr (Tile::ELEMENT_BYTES == 1 && TRANS) {
    const int g = lane >> 2, t4 = (lane & 3) * 4;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int m = m0 + g + (j & 1) * 8, k = 2 * k0 + t4 + (j >> 1) * 16;
      a[j] = gather_bytes(t, [&](int i) { return k + i; }, [&](int) { return m; });
    }
  } else if (!TRANS)
    ldmatrix<4, false>(a, t.at(m0 + (lane & 15), k0 + (lane >> 4) * 8, lane));
  else
    ldmatrix<4, true>(a, t.at(k0 + (lane >> 4) * 8 + (lane & 7), m0 + ((lane >> 3) & 1) * 8, lane));
}

// B fragments of NB (1 or 2) 8-column blocks at n0, n0 + 8, k-rows k0.. ; TRANS: stored [n][k].
// 8-bit: 32 k-bytes from 2 k0; stored [k][n], b0..b7 byte by byte (column g, k 4t + 16 j + i
// for byte i of register j).
template <int NB, bool TRANS, class Tile>
__device__ __forceinline__ void load_b(uint32_t* b, const Tile& t, int k0, int n0, int lane) {
  if constexpr (Tile::ELEMENT_BYTES == 1 && !TRANS) {
    const int g = lane >> 2, t4 = (lane & 3) * 4;
#pragma unroll
    for (int nb = 0; nb < NB; ++nb)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int n = n0 + nb * 8 + g, k = 2 * k0 + t4 + j * 16;
        b[nb * 2 + j] = gather_bytes(t, [&](int i) { return k + i; }, [&](int) { return n; });
      }
  } else if (!TRANS)
    ldmatrix<NB * 2, true>(b, t.at(k0 + (lane & 7) + ((lane >> 3) & 1) * 8, n0 + (lane >> 4) * 8,
                                   lane));
  else
    ldmatrix<NB * 2, false>(b, t.at(n0 + (lane & 7) + (lane >> 4) * 8, k0 + ((lane >> 3) & 1) * 8,
                                    lane));
}

}  // namespace ptc
