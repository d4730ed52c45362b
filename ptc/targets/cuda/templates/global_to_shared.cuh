// ptc: global -> shared tile copies, as the lowering planned them (ptc/lower: CopyTile).
// A tile is ROWS x COLS elements; element (r, c) is at g[r * row_stride + c] (vector
// copies) or g[r * row_stride + c * col_stride] (element copies) -- offsets within a tile
// are 32-bit, the tile's origin in `g` is not --, and exists when
// rows_first <= r < rows_left and cols_first <= c < cols_left (the firsts are 0 but for an
// offset tile that starts before the tensor: ptc/lower/ir.py, GlobalTile). Shared tiles are row-major, ROW_BYTES per row, 16-byte
// chunks XOR-swizzled when SWIZZLE (ptc/lower/swizzle.py: swizzle_offset).
// Shared addresses are 32-bit offsets from ptc::shared_base(), the start of the block's
// dynamic shared memory.
#pragma once
#include "ptc_types.cuh"
#include "global_to_shared_sync.h"

namespace ptc {

template <int BYTES>
__device__ __forceinline__ void cp_async(uint32_t smem, const void* gmem, bool valid) {
  static_assert(BYTES == 4 || BYTES == 8 || BYTES == 16, "cp.async copies 4, 8 or 16 bytes");
#ifdef PTC_EMULATE
  ::ptc::emu::cp_async<BYTES>(ptc_smem + smem, gmem, valid);
#else
  const int src_bytes = valid ? BYTES : 0;   // 0: zero-fill (past the tensor's edge)
  if (BYTES == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(gmem),
                 "r"(src_bytes));
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(smem), "l"(gmem),
                 "n"(BYTES), "r"(src_bytes));
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#ifdef PTC_EMULATE
  ::ptc::emu::cp_async_commit();
#else
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

template <int N> __device__ __forceinline__ void cp_async_wait() {
#ifdef PTC_EMULATE
  ::ptc::emu::cp_async_wait(N);
#else
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// Asynchronous copy, VEC elements per cp.async; the threads take chunks in turn.
template <typename T, int ROWS, int COLS, int VEC, int THREADS, int ROW_BYTES, bool SWIZZLE>
__device__ __forceinline__ void copy_tile_async(uint32_t smem, const T* g, int row_stride,
                                                int rows_left, int cols_left, int tid,
                                                int rows_first = 0, int cols_first = 0) {
  constexpr int PER_ROW = COLS / VEC;
  constexpr int CHUNKS = ROWS * PER_ROW;
  constexpr int ITERS = (CHUNKS + THREADS - 1) / THREADS;
  static_assert(COLS % VEC == 0, "the tile's rows are whole vectors");
#pragma unroll
  for (int i = 0; i < ITERS; ++i) {
    const int id = tid + i * THREADS;
    if (CHUNKS % THREADS != 0 && id >= CHUNKS) break;
    const int r = id / PER_ROW, c = (id % PER_ROW) * VEC;
    const bool valid = inside(r, rows_first, rows_left) && inside(c, cols_first, cols_left);
    const T* src = valid ? g + (r * row_stride + c) : g;
    cp_async<VEC * sizeof(T)>(smem + tile_offset<ROW_BYTES, SWIZZLE>(r, c * sizeof(T)), src,
                              valid);
  }
}

// One element per cp.async (4 bytes or more) at any row and column strides: a column of a
// row-major tensor (a scale per row of a k block) that no TMA box takes.
template <typename T, int ROWS, int COLS, int THREADS, int ROW_BYTES, bool SWIZZLE>
__device__ __forceinline__ void copy_tile_async_strided(uint32_t smem, const T* g,
                                                        int row_stride, int col_stride,
                                                        int rows_left, int cols_left, int tid,
                                                        int rows_first = 0, int cols_first = 0) {
  static_assert(sizeof(T) >= 4, "cp.async copies 4, 8 or 16 bytes");
#pragma unroll
  for (int i = 0; i < (ROWS * COLS + THREADS - 1) / THREADS; ++i) {
    const int id = tid + i * THREADS;
    if ((ROWS * COLS) % THREADS != 0 && id >= ROWS * COLS) break;
    const int r = id / COLS, c = id % COLS;
    const bool valid = inside(r, rows_first, rows_left) && inside(c, cols_first, cols_left);
    const T* src = valid ? g + (r * row_stride + c * col_stride) : g;
    cp_async<sizeof(T)>(smem + tile_offset<ROW_BYTES, SWIZZLE>(r, c * sizeof(T)), src, valid);
  }
}

// The same copy with every thread's offsets computed once, before the loop that repeats
// it: a thread's chunks are rows r0, r0 + RSTEP, ... of one column c0 (THREADS is a
// multiple of the chunks per row), and when RSTEP is a multiple of the rows over which
// the swizzle pattern repeats -- 8 lines: 8 rows of whole 128-byte lines, 1024 bytes of
// shorter rows (16 rows of 64 bytes, 32 of 32) -- chunk i is at a fixed stride from chunk 0
// in both memories. (Issue 20's coverage: with 4-byte copies by 4 warps, RSTEP is 8 rows
// of 64 bytes, half the pattern, and 8 rows was taken for the period.)
template <typename T, int ROWS, int COLS, int VEC, int THREADS, int ROW_BYTES, bool SWIZZLE>
struct TileCopy {
  static constexpr int PER_ROW = COLS / VEC;
  static constexpr int CHUNKS = ROWS * PER_ROW;
  static constexpr int ITERS = (CHUNKS + THREADS - 1) / THREADS;
  static constexpr int RSTEP = THREADS / PER_ROW;
  static constexpr int SWIZZLE_ROWS = ROW_BYTES >= 128 ? 8 : 1024 / ROW_BYTES;
  static constexpr bool REGULAR =
      THREADS % PER_ROW == 0 && (RSTEP % SWIZZLE_ROWS == 0 || ITERS == 1 || !SWIZZLE);
  uint32_t soff;    // shared offset of chunk 0
  int goff;         // element offset of chunk 0
  int gstep;        // element offset from one chunk to the next
  int r0, c0;
  int tid;
  __device__ __forceinline__ TileCopy(int row_stride, int thread) : tid(thread) {
    r0 = thread / PER_ROW;
    c0 = (thread % PER_ROW) * VEC;
    soff = tile_offset<ROW_BYTES, SWIZZLE>(r0, c0 * sizeof(T));
    goff = r0 * row_stride + c0;
    gstep = RSTEP * row_stride;
  }
  __device__ __forceinline__ void async(uint32_t smem, const T* g, int row_stride, int rows_left,
                                        int cols_left, int rows_first = 0,
                                        int cols_first = 0) const {
    if (!REGULAR) {
      copy_tile_async<T, ROWS, COLS, VEC, THREADS, ROW_BYTES, SWIZZLE>(
          smem, g, row_stride, rows_left, cols_left, tid, rows_first, cols_first);
      return;
    }
    const bool col_ok = inside(c0, cols_first, cols_left);
#pragma unroll
    for (int i = 0; i < ITERS; ++i) {
      if (CHUNKS % THREADS != 0 && r0 + i * RSTEP >= ROWS) break;
      const bool valid = col_ok && inside(r0 + i * RSTEP, rows_first, rows_left);
      // past the edge: src-size 0 reads nothing, so the address needs no clamping
      cp_async<VEC * sizeof(T)>(smem + soff + i * RSTEP * ROW_BYTES, g + (goff + i * gstep),
                                valid);
    }
  }
};

// copy_tile_async with gathered rows: each chunk's row address is its row's position times
// the row stride (64-bit: a row may lie anywhere in the tensor).
template <typename T, int ROWS, int COLS, int VEC, int THREADS, int ROW_BYTES, bool SWIZZLE,
          typename Rows>  // GatherRows or BatchRows
__device__ __forceinline__ void copy_gathered_async(uint32_t smem, const T* g,
                                                    long long row_stride, Rows rows,
                                                    int cols_left, int tid, int cols_first) {
  constexpr int PER_ROW = COLS / VEC;
  constexpr int CHUNKS = ROWS * PER_ROW;
  static_assert(COLS % VEC == 0, "the tile's rows are whole vectors");
#pragma unroll
  for (int i = 0; i < (CHUNKS + THREADS - 1) / THREADS; ++i) {
    const int id = tid + i * THREADS;
    if (CHUNKS % THREADS != 0 && id >= CHUNKS) break;
    const int r = id / PER_ROW, c = (id % PER_ROW) * VEC, row = rows.at(r);
    const bool valid = row >= 0 && inside(c, cols_first, cols_left);
    const T* src = valid ? g + (row * row_stride + c) : g;
    cp_async<VEC * sizeof(T)>(smem + tile_offset<ROW_BYTES, SWIZZLE>(r, c * sizeof(T)), src,
                              valid);
  }
}

// copy_tile_sync with gathered rows: `pad` where a row is none or a column outside.
template <typename T, int ROWS, int COLS, int THREADS, int ROW_BYTES, bool SWIZZLE,
          typename Rows>  // GatherRows or BatchRows
__device__ __forceinline__ void copy_gathered_sync(uint32_t smem, const T* g,
                                                   long long row_stride, int col_stride,
                                                   Rows rows, int cols_left, float pad,
                                                   int tid, int cols_first) {
  const T fill = from_f32<T>(pad);
#pragma unroll 2
  for (int id = tid; id < ROWS * COLS; id += THREADS) {
    const int r = id / COLS, c = id % COLS, row = rows.at(r);
    const bool valid = row >= 0 && inside(c, cols_first, cols_left);
    const T v = valid ? *PTC_GLOBAL(g + (row * row_stride + c * col_stride)) : fill;
    st_shared(smem + tile_offset<ROW_BYTES, SWIZZLE>(r, c * sizeof(T)), v);
  }
}

}  // namespace ptc
