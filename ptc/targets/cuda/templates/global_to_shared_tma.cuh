// ptc: global -> shared tile loads by the Tensor Memory Accelerator (sm90). A tensor map
// (CUtensorMap, 128 bytes) describes a tensor of rank 1..5 (dims and byte strides,
// innermost first), the box one load moves and the swizzle it writes shared memory with;
// the host encodes it (tensor_map, through the driver's cuTensorMapEncodeTiled, found at
// run time with cudaGetDriverEntryPointByVersion: no -lcuda) and passes it to the kernel as
// a `const __grid_constant__ CUtensorMap` parameter. A load is issued by one thread; the box's
// elements outside the tensor read zero, and its bytes complete on an mbarrier
// (mbarrier.cuh). PTX ISA: cp.async.bulk.tensor; docs/sm90.md.
#pragma once
#include "ptc_types.cuh"
#include "global_to_shared.cuh"
#ifdef PTC_EMULATE
#include "cuda.h"
#else
#include <cuda.h>
#include <cudaTypedefs.h>
#endif

namespace ptc {

// Host: encode `map`; dims[rank] and box[rank] in elements, strides[rank - 1] in bytes
// (of dims 1..rank-1, multiples of 16). Returns 0, or the driver's CUresult.
inline int tensor_map(CUtensorMap* map, CUtensorMapDataType dtype, int rank, const void* base,
                      const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                      CUtensorMapSwizzle swizzle) {
  const cuuint32_t unit[5] = {1, 1, 1, 1, 1};
#ifdef PTC_EMULATE
  return cuTensorMapEncodeTiled(map, dtype, rank, const_cast<void*>(base), dims, strides, box,
                                unit, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                                CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
#else
  static PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
  if (encode == nullptr) {
    cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled",
                                         reinterpret_cast<void**>(&encode), 12000,
                                         cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess || encode == nullptr)
      return static_cast<int>(CUDA_ERROR_NOT_FOUND);
  }
  return static_cast<int>(encode(map, dtype, static_cast<cuuint32_t>(rank),
                                 const_cast<void*>(base), dims, strides, box, unit,
                                 CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                 CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
#endif
}

// The byte offset of (row, byte) in a tile TMA wrote: column panels of PANEL_BYTES, each
// rows of SPAN bytes, swizzled over SPAN (16: not swizzled); the tile 1024-aligned.
template <int SPAN, int PANEL_BYTES>
__device__ __forceinline__ uint32_t tma_offset(int row, int byte) {
  const uint32_t o = static_cast<uint32_t>((byte / SPAN) * PANEL_BYTES + row * SPAN + byte % SPAN);
  constexpr uint32_t BITS = SPAN == 128 ? 7u : SPAN == 64 ? 3u : SPAN == 32 ? 1u : 0u;
  return o ^ (((o >> 7) & BITS) << 4);
}
// tma_offset(row + step, byte) where `step` is a constant of an unrolled register loop (a
// layout's offset of register r): 8 rows are 8 * SPAN bytes, which leave the bits the
// swizzle reads (7 to 9) and the bits it flips (4 to 6) as they are, so the step's whole
// eights are added after the swizzle, and registers 8, 16, ... rows apart share one
// swizzled address (the W4A16 words: 4 where there were 16)
template <int SPAN, int PANEL_BYTES>
__device__ __forceinline__ uint32_t tma_offset_at(int row, int step, int byte) {
  return tma_offset<SPAN, PANEL_BYTES>(row + step % 8, byte) +
         static_cast<uint32_t>((step - step % 8) * SPAN);
}

// Without a tensor map (the launch found a stride that is not a 16-byte multiple): the
// threads of a warpgroup copy the tile element by element into the layout TMA would have
// written, zero past the tensor's edge.
template <typename T, int ROWS, int COLS, int SPAN, int PANEL_BYTES>
__device__ __forceinline__ void copy_tile_to_tma_layout(uint32_t smem, const T* g,
                                                        int row_stride, int col_stride,
                                                        int rows_left, int cols_left, int t,
                                                        int rows_first = 0, int cols_first = 0) {
#pragma unroll 1
  for (int id = t; id < ROWS * COLS; id += 128) {
    const int r = id / COLS, c = id % COLS;
    const bool valid = inside(r, rows_first, rows_left) && inside(c, cols_first, cols_left);
    const T v = valid ? *PTC_GLOBAL(g + (r * row_stride + c * col_stride)) : from_f32<T>(0.0f);
    st_shared(smem + tma_offset<SPAN, PANEL_BYTES>(r, c * (int)sizeof(T)), v);
  }
}

// Every n-th row of a dim (a strided tile; row_stride is the dim's times n) into the
// layout TMA writes, where wgmma reads them (no TMA box of consecutive elements takes
// them): the producer warpgroup's threads copy 16-byte chunks by cp.async, zero-filled
// outside the tensor.
template <typename T, int ROWS, int COLS, int SPAN, int PANEL_BYTES>
__device__ __forceinline__ void copy_tile_to_tma_layout_async(
    uint32_t smem, const T* g, long long row_stride, int rows_left, int cols_left, int t,
    int rows_first = 0, int cols_first = 0) {
  constexpr int VEC = 16 / sizeof(T), PER_ROW = COLS / VEC;
  static_assert(COLS % VEC == 0, "the tile's rows are whole 16-byte chunks");
#pragma unroll 1
  for (int id = t; id < ROWS * PER_ROW; id += 128) {
    const int r = id / PER_ROW, c = (id % PER_ROW) * VEC;
    const bool valid = inside(r, rows_first, rows_left) && inside(c, cols_first, cols_left);
    cp_async<16>(smem + tma_offset<SPAN, PANEL_BYTES>(r, c * (int)sizeof(T)),
                 valid ? g + (r * row_stride + c) : g, valid);
  }
}

// Gathered rows (global_to_shared.cuh: GatherRows) into the layout TMA writes, where wgmma
// reads them (no TMA box takes rows at loaded positions): the producer warpgroup's threads
// copy 16-byte chunks by cp.async, zero-filled for no row; a 16-byte chunk stays whole
// under the layout's swizzle (it XORs 16-byte units).
template <typename T, int ROWS, int COLS, int SPAN, int PANEL_BYTES,
          typename Rows>  // GatherRows or BatchRows
__device__ __forceinline__ void copy_gathered_to_tma_layout_async(
    uint32_t smem, const T* g, long long row_stride, Rows rows, int cols_left, int t,
    int cols_first) {
  constexpr int VEC = 16 / sizeof(T), PER_ROW = COLS / VEC;
  static_assert(COLS % VEC == 0, "the tile's rows are whole 16-byte chunks");
#pragma unroll 1
  for (int id = t; id < ROWS * PER_ROW; id += 128) {
    const int r = id / PER_ROW, c = (id % PER_ROW) * VEC, row = rows.at(r);
    const bool valid = row >= 0 && inside(c, cols_first, cols_left);
    cp_async<16>(smem + tma_offset<SPAN, PANEL_BYTES>(r, c * (int)sizeof(T)),
                 valid ? g + (row * row_stride + c) : g, valid);
  }
}

// The same element by element (the launch found a row not 16-byte aligned), zero for no row.
template <typename T, int ROWS, int COLS, int SPAN, int PANEL_BYTES,
          typename Rows>  // GatherRows or BatchRows
__device__ __forceinline__ void copy_gathered_to_tma_layout(uint32_t smem, const T* g,
                                                            long long row_stride,
                                                            int col_stride, Rows rows,
                                                            int cols_left, int t,
                                                            int cols_first) {
#pragma unroll 1
  for (int id = t; id < ROWS * COLS; id += 128) {
    const int r = id / COLS, c = id % COLS, row = rows.at(r);
    const bool valid = row >= 0 && inside(c, cols_first, cols_left);
    const T v = valid ? *PTC_GLOBAL(g + (row * row_stride + c * col_stride)) : from_f32<T>(0.0f);
    st_shared(smem + tma_offset<SPAN, PANEL_BYTES>(r, c * (int)sizeof(T)), v);
  }
}

// Device: the box at coordinates c (innermost first) into shared memory at `dst`, its
// bytes completing on `bar`. One thread issues it.
template <int RANK>
__device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap* map, uint32_t bar,
                                         const int (&c)[RANK]) {
  static_assert(RANK >= 1 && RANK <= 5, "TMA moves boxes of rank 1 to 5");
#ifdef PTC_EMULATE
  ::ptc::emu::tma_load(dst, map, c, bar);
#else
  const uint64_t m = reinterpret_cast<uint64_t>(map);
  if constexpr (RANK == 1)
    asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3}], [%2];\n"
                 :: "r"(dst), "l"(m), "r"(bar), "r"(c[0]) : "memory");
  else if constexpr (RANK == 2)
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4}], [%2];\n"
                 :: "r"(dst), "l"(m), "r"(bar), "r"(c[0]), "r"(c[1]) : "memory");
  else if constexpr (RANK == 3)
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5}], [%2];\n"
                 :: "r"(dst), "l"(m), "r"(bar), "r"(c[0]), "r"(c[1]), "r"(c[2]) : "memory");
  else if constexpr (RANK == 4)
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5, %6}], [%2];\n"
                 :: "r"(dst), "l"(m), "r"(bar), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3])
                 : "memory");
  else
    asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5, %6, %7}], [%2];\n"
                 :: "r"(dst), "l"(m), "r"(bar), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]),
                    "r"(c[4]) : "memory");
#endif
}

}  // namespace ptc
