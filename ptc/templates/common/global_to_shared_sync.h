// Copies from global to shared memory that every backend writes the same way (the element-wise
// copy, the swizzled offset and gathered rows), written once (docs/architecture.md, "Device
// headers"). A backend's global_to_shared header includes it after its ptc_types header,
// which provides inside, from_f32, PTC_GLOBAL and st_shared.
#pragma once

namespace ptc {

// A shared tile's byte offset of (row, byte in row).
template <int ROW_BYTES, bool SWIZZLE>
__device__ __forceinline__ uint32_t tile_offset(int row, int byte) {
  const uint32_t o = static_cast<uint32_t>(row * ROW_BYTES + byte);
  if (!SWIZZLE) return o;
  constexpr int LINES = ROW_BYTES > 128 ? ROW_BYTES / 128 : 1;   // 128-byte lines per row
  return o ^ ((((o >> 7) / LINES) & 7u) << 4);
}
// tile_offset(row + step, byte) where `step` is a constant of an unrolled register loop (a
// layout's offset of register r): the swizzle reads a row modulo PERIOD rows (8 rows of
// 128-byte lines or longer, 1024 bytes of shorter ones), and a period of rows moves the
// offset by a multiple of 1024 bytes, which leaves the bits it reads and flips as they are;
// so the step's whole periods are added after the swizzle, and registers a period apart
// share one swizzled address. Rows of other lengths are not split.
template <int ROW_BYTES, bool SWIZZLE>
__device__ __forceinline__ uint32_t tile_offset_at(int row, int step, int byte) {
  constexpr int PERIOD = !SWIZZLE ? 1 : (ROW_BYTES & (ROW_BYTES - 1)) ? 0
                         : ROW_BYTES >= 128 ? 8 : 1024 / ROW_BYTES;
  if constexpr (PERIOD == 0) {
    return tile_offset<ROW_BYTES, SWIZZLE>(row + step, byte);
  } else {
    return tile_offset<ROW_BYTES, SWIZZLE>(row + step % PERIOD, byte) +
           static_cast<uint32_t>((step - step % PERIOD) * ROW_BYTES);
  }
}

// Synchronous copy, one element per load: any strides, `pad` where the tile leaves the tensor.
// A cold path: little unrolling leaves the registers to the hot one, none in the kernel's
// element-wise variant (UNROLL 1: alignment checks failed, every copy takes this path).
template <typename T, int ROWS, int COLS, int THREADS, int ROW_BYTES, bool SWIZZLE,
          int UNROLL = 2>
__device__ __forceinline__ void copy_tile_sync(uint32_t smem, const T* g, int row_stride,
                                               int col_stride, int rows_left,
                                               int cols_left, float pad, int tid,
                                               int rows_first = 0, int cols_first = 0) {
  const T fill = from_f32<T>(pad);
#pragma unroll UNROLL
  for (int id = tid; id < ROWS * COLS; id += THREADS) {
    const int r = id / COLS, c = id % COLS;
    const bool valid = inside(r, rows_first, rows_left) && inside(c, cols_first, cols_left);
    const T v = valid ? *PTC_GLOBAL(g + (r * row_stride + c * col_stride)) : fill;
    st_shared(smem + tile_offset<ROW_BYTES, SWIZZLE>(r, c * sizeof(T)), v);
  }
}

// Gathered rows (ptc/lower/ir.py, GatherRows): row r of the tile is row at(r) of the
// tensor -- element r of the index tile (`pad` past the index tensor's end), -1 (no row:
// zero-filled or padded, a store skips it) outside [0, bound). Each copy reads the index
// of each row it copies (a cache hit after the first): the threads' rows differ from copy
// to copy, and a shared table would cost a barrier before the first copy.
struct GatherRows {
  const int* index;
  int stride, left, pad;
  long long bound;
  __device__ __forceinline__ int at(int r) const {
    const int x = r < left ? *PTC_GLOBAL(index + r * stride) : pad;
    return 0 <= x && x < bound ? x : -1;
  }
};

// The rows of a tile of rank 3 (ptc/lower/storage.py, BatchRows), its first two axes'
// elements in order: row r is element o = outer0 + (r / INNER) * OUTER_STEP of the outer
// axis and i = inner0 + (r % INNER) * INNER_STEP of the inner one, at position
// o * ratio + i in rows of the inner axis; -1 (no row) where either lies outside its dim
// (an offset axis may start below 0). Copies take it as GatherRows.
template <int INNER, int OUTER_STEP = 1, int INNER_STEP = 1>
struct BatchRows {
  int outer0, outer_end, inner0, inner_end, ratio;
  __device__ __forceinline__ int at(int r) const {
    const int o = outer0 + (r / INNER) * OUTER_STEP, i = inner0 + (r % INNER) * INNER_STEP;
    return 0 <= o && o < outer_end && 0 <= i && i < inner_end ? o * ratio + i : -1;
  }
};

}  // namespace ptc
