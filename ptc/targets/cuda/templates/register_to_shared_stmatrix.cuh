// ptc: register -> shared stores of 16-bit accumulator fragments with stmatrix (sm90), the
// transpose of ldmatrix: lane 8i + r gives the address of row r of matrix i (16 bytes,
// 16-byte aligned), and lane L's register i holds elements (L/4, 2(L%4)) and
// (L/4, 2(L%4) + 1) of matrix i, low half first. PTX ISA: stmatrix.
//
// A warp's 16 rows of a wgmma (or mma.sync m16n8) accumulator packed in pairs are, for each
// 16 columns 16s.., the four matrices (rows 0-7, cols 16s..) (rows 8-15, cols 16s..)
// (rows 0-7, cols 16s + 8..) (rows 8-15, cols 16s + 8..): the packed registers 4s..4s+3
// (docs/sm90.md, "Register fragments"). So one stmatrix.x4 stores 16 x 16 elements where
// st.shared would take eight 32-bit stores; the lane's address is row
// (lane & 7) + 8 ((lane >> 3) & 1), column 8 (lane >> 4) of the 16 x 16 block.
#pragma once
#include "ptc_types.cuh"

namespace ptc {

__device__ __forceinline__ void stmatrix_x4(uint32_t addr, const uint32_t* r) {
#ifdef PTC_EMULATE
  ::ptc::emu::stmatrix<4>(ptc_smem + addr, r);
#else
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n"
               :: "r"(addr), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]) : "memory");
#endif
}

// The lane's row and column in the 16 x 16 block it gives the address of.
__device__ __forceinline__ int stmatrix_row(int lane) { return (lane & 7) + ((lane >> 3) & 1) * 8; }
__device__ __forceinline__ int stmatrix_col(int lane) { return (lane >> 4) * 8; }

}  // namespace ptc
