// ptc: global -> LDS tile copies, as the lowering planned them (ptc/lower: CopyTile).
// A tile is ROWS x COLS elements; element (r, c) is at g[r * row_stride + c] (vector
// copies) or g[r * row_stride + c * col_stride] (element copies) -- offsets within a tile
// are 32-bit, the tile's origin in `g` is not --, and exists when r < rows_left and
// c < cols_left. LDS tiles are row-major, ROW_BYTES per row, 16-byte chunks XOR-swizzled
// when SWIZZLE (ptc/lower/swizzle.py: swizzle_offset). LDS addresses are byte offsets.
//
// Asynchronous copies are staged in registers (CopyTile.staged), as CK and Triton do on
// CDNA: `load` issues the global loads (global_load_dwordx4 for 16-byte vectors) and the
// wave runs on; `land` writes the registers to LDS (ds_write_b128) at the plan's wait, the
// compiler placing the s_waitcnt vmcnt before each write. Between the two the copy is in
// flight, as a cp.async group is between its commit and its wait.
#pragma once
#include "ptc_types.h"

namespace ptc {

// A tile's byte offset of (row, byte in row).
template <int ROW_BYTES, bool SWIZZLE>
__device__ __forceinline__ uint32_t tile_offset(int row, int byte) {
  const uint32_t o = static_cast<uint32_t>(row * ROW_BYTES + byte);
  if (!SWIZZLE) return o;
  constexpr int LINES = ROW_BYTES > 128 ? ROW_BYTES / 128 : 1;   // 128-byte lines per row
  return o ^ ((((o >> 7) / LINES) & 7u) << 4);
}

// the register type of one vector access of BYTES bytes
template <int BYTES> struct Chunk;
template <> struct Chunk<4> { using type = uint32_t; };
template <> struct Chunk<8> { using type = u32x2; };
template <> struct Chunk<16> { using type = u32x4; };

// A copy in flight: VEC elements per global load, the threads taking chunks in turn.
template <typename T, int ROWS, int COLS, int VEC, int THREADS, int ROW_BYTES, bool SWIZZLE>
struct StagedTile {
  static constexpr int PER_ROW = COLS / VEC;
  static constexpr int CHUNKS = ROWS * PER_ROW;
  static constexpr int ITERS = (CHUNKS + THREADS - 1) / THREADS;
  static_assert(COLS % VEC == 0, "the tile's rows are whole vectors");
  using Word = typename Chunk<VEC * sizeof(T)>::type;
  Word data[ITERS];
  uint32_t dst;      // the LDS slot it lands in
  bool live;         // loaded and not landed yet

  __device__ __forceinline__ void load(uint32_t smem, const T* g, int row_stride, int rows_left,
                                       int cols_left, int tid) {
#pragma unroll
    for (int i = 0; i < ITERS; ++i) {
      const int id = tid + i * THREADS;
      if (CHUNKS % THREADS != 0 && id >= CHUNKS) break;
      const int r = id / PER_ROW, c = (id % PER_ROW) * VEC;
      // past the tensor's edge: zeros, as cp.async's zero-fill
      data[i] = (r < rows_left && c < cols_left)
                    ? *PTC_GLOBAL(reinterpret_cast<const Word*>(g + (r * row_stride + c)))
                    : Word{};
    }
    dst = smem;
    live = true;
  }

  __device__ __forceinline__ void land(int tid) {
    if (!live) return;
#pragma unroll
    for (int i = 0; i < ITERS; ++i) {
      const int id = tid + i * THREADS;
      if (CHUNKS % THREADS != 0 && id >= CHUNKS) break;
      const int r = id / PER_ROW, c = (id % PER_ROW) * VEC;
      st_shared<Word>(dst + tile_offset<ROW_BYTES, SWIZZLE>(r, c * sizeof(T)), data[i]);
    }
    live = false;
  }
};

// Synchronous copy, one element per load: any strides, `pad` where the tile leaves the tensor.
template <typename T, int ROWS, int COLS, int THREADS, int ROW_BYTES, bool SWIZZLE>
__device__ __forceinline__ void copy_tile_sync(uint32_t smem, const T* g, int row_stride,
                                               int col_stride, int rows_left,
                                               int cols_left, float pad, int tid) {
  const T fill = from_f32<T>(pad);
#pragma unroll 2   // the cold path: little unrolling leaves the registers to the hot one
  for (int id = tid; id < ROWS * COLS; id += THREADS) {
    const int r = id / COLS, c = id % COLS;
    const bool valid = r < rows_left && c < cols_left;
    const T v = valid ? *PTC_GLOBAL(g + (r * row_stride + c * col_stride)) : fill;
    st_shared(smem + tile_offset<ROW_BYTES, SWIZZLE>(r, c * sizeof(T)), v);
  }
}

}  // namespace ptc
