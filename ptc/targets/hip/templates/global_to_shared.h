// ptc: global -> LDS tile copies, as the lowering planned them (ptc/lower: CopyTile).
// A tile is ROWS x COLS elements; element (r, c) is at g[r * row_stride + c] (vector
// copies) or g[r * row_stride + c * col_stride] (element copies) -- offsets within a tile
// are 32-bit, the tile's origin in `g` is not --, and exists when
// rows_first <= r < rows_left and cols_first <= c < cols_left (the firsts are 0 but for an
// offset tile that starts before the tensor: ptc/lower/ir.py, GlobalTile). LDS tiles are row-major, ROW_BYTES per row, 16-byte chunks XOR-swizzled
// when SWIZZLE (ptc/lower/swizzle.py: swizzle_offset). LDS addresses are byte offsets.
//
// Asynchronous copies are staged in registers (CopyTile.staged), as CK and Triton do on
// CDNA: `load` issues the global loads (global_load_dwordx4 for 16-byte vectors) and the
// wave runs on; `land` writes the registers to LDS (ds_write_b128) at the plan's wait, the
// compiler placing the s_waitcnt vmcnt before each write. Between the two the copy is in
// flight, as a cp.async group is between its commit and its wait.
#pragma once
#include "ptc_types.h"
#include "global_to_shared_sync.h"

namespace ptc {

// A transposed tile's byte offset of (stored row, byte in row): the tile's column is the
// stored row, and 8-byte units XOR (row >> 1) & 7, so an MFMA operand's 8-byte reads of 16
// consecutive rows hit every bank once (ptc/lower/swizzle.py: k8_offset).
template <int ROW_BYTES>
__device__ __forceinline__ uint32_t tile_offset_k8(int row, int byte) {
  const uint32_t unit = static_cast<uint32_t>(byte >> 3) ^ static_cast<uint32_t>((row >> 1) & 7);
  return static_cast<uint32_t>(row * ROW_BYTES) + (unit << 3) + static_cast<uint32_t>(byte & 7);
}

// the register type of one vector access of BYTES bytes
template <int BYTES> struct Chunk;
template <> struct Chunk<4> { using type = uint32_t; };
template <> struct Chunk<8> { using type = u32x2; };
template <> struct Chunk<16> { using type = u32x4; };

// The vector at g + offset, or zeros where !ok (past the tensor's edge, as cp.async's
// zero-fill). The compiler branches around the load where a lane is not ok (a clamped
// address and a select compile to the same branch: the select is turned back into one).
template <typename Word, typename T>
__device__ __forceinline__ Word guarded_load(const T* g, int offset, bool ok) {
  return ok ? *PTC_GLOBAL(reinterpret_cast<const Word*>(g + offset)) : Word{};
}

// ---- buffer loads: zeros outside a range, without a branch ------------------------------
// A raw buffer resource (V#: a 48-bit base, a range in bytes, gfx9's configuration word,
// stride 0) over a tensor: a MUBUF load at a byte offset at or past the range returns
// zeros (the ISA's range checking), so a chunk outside the tensor is a load at BUFFER_RANGE
// instead of a branch of the wave around its load (exec-mask saves and restores; CK's and
// Triton's buffer loads on CDNA do the same). The base is the tensor's pointer, the same
// for every lane (read from lane 0: the scalar registers the instruction takes); the
// launch checked that the tensor is below BUFFER_RANGE bytes (ptc/lower: BUFFER_BYTES), so
// every chunk inside it has a 32-bit offset below the range. A load only partly past the
// range would be chipset-dependent and is never issued: a chunk is inside or outside whole.
constexpr uint32_t BUFFER_RANGE = 0x80000000u;
constexpr uint32_t BUFFER_CONFIG = 0x00020000u;   // gfx9 (CDNA): 32-bit data format

#ifndef PTC_EMULATE
__device__ i32x4 raw_buffer_load_b128(i32x4 rsrc, int voffset, int soffset, int aux)
    __asm("llvm.amdgcn.raw.buffer.load.v4i32");
__device__ i32x2 raw_buffer_load_b64(i32x4 rsrc, int voffset, int soffset, int aux)
    __asm("llvm.amdgcn.raw.buffer.load.v2i32");
__device__ int raw_buffer_load_b32(i32x4 rsrc, int voffset, int soffset, int aux)
    __asm("llvm.amdgcn.raw.buffer.load.i32");
#endif

__device__ __forceinline__ i32x4 buffer_resource(const void* base, uint32_t range) {
  const uint64_t a = reinterpret_cast<uint64_t>(base);
  i32x4 r;
  r[0] = __builtin_amdgcn_readfirstlane(static_cast<int>(a));
  r[1] = __builtin_amdgcn_readfirstlane(static_cast<int>(a >> 32)) & 0xffff;
  r[2] = __builtin_amdgcn_readfirstlane(static_cast<int>(range));
  r[3] = static_cast<int>(BUFFER_CONFIG);
  return r;
}

// A buffer over `tensor` that ends where the last row of a tile inside it ends (its
// rows_left-th row's cols_left-th element): a chunk in a row at or past rows_left is past
// the range, zeros with no compare at all. A vector copy's columns are its tensor's
// innermost dim (unit stride), so a row stride is at least the valid columns and rows do
// not overlap (the emulator checks it). Chunks before rows_first or outside the columns
// are still selected per lane.
template <typename T>
__device__ __forceinline__ i32x4 tile_buffer(const T* g, const T* tensor, int row_stride,
                                            int rows_left, int cols_left) {
#ifdef PTC_EMULATE
  if (rows_left > 1 && row_stride < cols_left)
    ::ptc::emu::fail("a buffered copy's rows overlap (row stride %d, %d columns)", row_stride,
                     cols_left);
#endif
  const uint32_t end = rows_left > 0 && cols_left > 0
      ? (static_cast<uint32_t>(g - tensor) +
         static_cast<uint32_t>((rows_left - 1) * row_stride + cols_left)) * sizeof(T)
      : 0u;
  return buffer_resource(tensor, end);
}

// The Word at byte `offset` of the buffer, or zeros where !ok.
template <typename Word>
__device__ __forceinline__ Word buffer_load(i32x4 rsrc, uint32_t offset, bool ok) {
  const int at = static_cast<int>(ok ? offset : BUFFER_RANGE);
  if constexpr (sizeof(Word) == 16)
    return __builtin_bit_cast(Word, raw_buffer_load_b128(rsrc, at, 0, 0));
  else if constexpr (sizeof(Word) == 8)
    return __builtin_bit_cast(Word, raw_buffer_load_b64(rsrc, at, 0, 0));
  else
    return __builtin_bit_cast(Word, raw_buffer_load_b32(rsrc, at, 0, 0));
}

// A buffered copy's resource (ir.CopyTile.resource): TILE_END, ending with the tile's last
// row inside the tensor (tile_buffer); else over the whole tensor.
template <bool TILE_END, typename T>
__device__ __forceinline__ i32x4 copy_resource(const T* g, const T* tensor, int row_stride,
                                               int rows_left, int cols_left) {
  return TILE_END ? tile_buffer(g, tensor, row_stride, rows_left, cols_left)
                  : buffer_resource(tensor, BUFFER_RANGE);
}

// Whether a buffered copy loads row r: with TILE_END the rows at or past rows_left are past
// the resource's range (zeros without a compare); only those before rows_first are not.
template <bool TILE_END>
__device__ __forceinline__ bool buffered_row(int r, int rows_first, int rows_left) {
  return TILE_END ? rows_first == 0 || r >= rows_first : inside(r, rows_first, rows_left);
}

// The vector at g + offset (64-bit: a gathered row lies anywhere), or zeros where !ok.
template <typename Word, typename T>
__device__ __forceinline__ Word guarded_load_far(const T* g, long long offset, bool ok) {
  return ok ? *PTC_GLOBAL(reinterpret_cast<const Word*>(g + offset)) : Word{};
}

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

  // the element (r, c) that starts thread tid's i-th chunk; false past the last chunk
  __device__ __forceinline__ static bool chunk(int i, int tid, int& r, int& c) {
    const int id = tid + i * THREADS;
    r = id / PER_ROW;
    c = (id % PER_ROW) * VEC;
    return CHUNKS % THREADS == 0 || id < CHUNKS;
  }

  __device__ __forceinline__ void load(uint32_t smem, const T* g, int row_stride, int rows_left,
                                       int cols_left, int tid, int rows_first = 0,
                                       int cols_first = 0) {
#pragma unroll
    for (int i = 0, r, c; i < ITERS && chunk(i, tid, r, c); ++i)
      data[i] = guarded_load<Word>(g, r * row_stride + c, inside(r, rows_first, rows_left) &&
                                                              inside(c, cols_first, cols_left));
    dst = smem;
    live = true;
  }

  // the same through a buffer resource (ir.CopyTile.resource): no branches. TILE_END: the
  // buffer ends with the tile's last row inside the tensor (tile_buffer), else it spans the
  // tensor and each chunk's rows are compared too.
  template <bool TILE_END>
  __device__ __forceinline__ void load_buffered(uint32_t smem, const T* g, int row_stride,
                                                int rows_left, int cols_left, int tid,
                                                const T* tensor, int rows_first = 0,
                                                int cols_first = 0) {
    const i32x4 rsrc = copy_resource<TILE_END>(g, tensor, row_stride, rows_left, cols_left);
    const uint32_t origin = static_cast<uint32_t>(g - tensor);   // elements; the tile's start
#pragma unroll
    for (int i = 0, r, c; i < ITERS && chunk(i, tid, r, c); ++i)
      data[i] = buffer_load<Word>(
          rsrc, (origin + static_cast<uint32_t>(r * row_stride + c)) * sizeof(T),
          buffered_row<TILE_END>(r, rows_first, rows_left) && inside(c, cols_first, cols_left));
    dst = smem;
    live = true;
  }

  // the same with gathered rows: each chunk's row is its position in the tensor
  template <typename Rows>  // GatherRows or BatchRows
  __device__ __forceinline__ void load_gathered(uint32_t smem, const T* g, long long row_stride,
                                                Rows rows, int cols_left, int tid,
                                                int cols_first) {
#pragma unroll
    for (int i = 0, r, c; i < ITERS && chunk(i, tid, r, c); ++i) {
      const int row = rows.at(r);
      data[i] = guarded_load_far<Word>(g, row * row_stride + c,
                                       row >= 0 && inside(c, cols_first, cols_left));
    }
    dst = smem;
    live = true;
  }

  __device__ __forceinline__ void land(int tid) {
    if (!live) return;
#pragma unroll
    for (int i = 0, r, c; i < ITERS && chunk(i, tid, r, c); ++i)
      st_shared<Word>(dst + tile_offset<ROW_BYTES, SWIZZLE>(r, c * sizeof(T)), data[i]);
    live = false;
  }
};

// A copy in flight into a transposed tile (16-bit elements): each thread loads blocks of
// 4 rows x VEC columns (consecutive threads take consecutive row blocks of a column chunk)
// and lands them as VEC 8-byte writes, one per column: its 4 rows are the 4 k an MFMA lane
// reads at once. VEC is at most the plan's vector, narrower where that leaves every thread
// a block (no thread idles on a branch around its loads and writes).
template <typename T, int COLS, int BLOCKS, int VEC, int THREADS>
constexpr int k8_vector() {   // the widest vector that still gives every thread a block
  return (VEC > 2 && BLOCKS * (COLS / VEC) < THREADS) ? k8_vector<T, COLS, BLOCKS, VEC / 2, THREADS>()
                                                      : VEC;
}

template <typename T, int ROWS, int COLS, int VEC_MAX, int THREADS, int ROW_BYTES>
struct StagedTileK8 {
  static_assert(sizeof(T) == 2 && ROWS % 4 == 0 && COLS % VEC_MAX == 0, "16-bit 4-row blocks");
  static constexpr int BLOCKS = ROWS / 4;
  static constexpr int VEC = k8_vector<T, COLS, BLOCKS, VEC_MAX, THREADS>();
  static constexpr int CHUNKS = BLOCKS * (COLS / VEC);
  static constexpr int ITERS = (CHUNKS + THREADS - 1) / THREADS;
  static constexpr int WORDS = VEC / 2;   // 32-bit words of one row's VEC elements
  using Word = typename Chunk<VEC * sizeof(T)>::type;
  struct Words { uint32_t w[WORDS]; };
  Words data[ITERS][4];
  uint32_t dst;
  bool live;

  // the element (r, c) that starts thread tid's i-th block; false past the last block
  __device__ __forceinline__ static bool chunk(int i, int tid, int& r, int& c) {
    const int id = tid + i * THREADS;
    r = (id % BLOCKS) * 4;
    c = (id / BLOCKS) * VEC;
    return CHUNKS % THREADS == 0 || id < CHUNKS;
  }

  __device__ __forceinline__ void load(uint32_t smem, const T* g, int row_stride, int rows_left,
                                       int cols_left, int tid, int rows_first = 0,
                                       int cols_first = 0) {
#pragma unroll
    for (int i = 0, r, c; i < ITERS && chunk(i, tid, r, c); ++i) {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        data[i][j] = __builtin_bit_cast(
            Words, guarded_load<Word>(g, (r + j) * row_stride + c,
                                      inside(r + j, rows_first, rows_left) &&
                                          inside(c, cols_first, cols_left)));
    }
    dst = smem;
    live = true;
  }

  // the same through a buffer resource (ir.CopyTile.resource)
  template <bool TILE_END>
  __device__ __forceinline__ void load_buffered(uint32_t smem, const T* g, int row_stride,
                                                int rows_left, int cols_left, int tid,
                                                const T* tensor, int rows_first = 0,
                                                int cols_first = 0) {
    const i32x4 rsrc = copy_resource<TILE_END>(g, tensor, row_stride, rows_left, cols_left);
    const uint32_t origin = static_cast<uint32_t>(g - tensor);
#pragma unroll
    for (int i = 0, r, c; i < ITERS && chunk(i, tid, r, c); ++i) {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        data[i][j] = __builtin_bit_cast(
            Words, buffer_load<Word>(
                       rsrc, (origin + static_cast<uint32_t>((r + j) * row_stride + c)) * sizeof(T),
                       buffered_row<TILE_END>(r + j, rows_first, rows_left) &&
                           inside(c, cols_first, cols_left)));
    }
    dst = smem;
    live = true;
  }

  // the same with gathered rows: each of a block's 4 rows at its position in the tensor
  template <typename Rows>  // GatherRows or BatchRows
  __device__ __forceinline__ void load_gathered(uint32_t smem, const T* g, long long row_stride,
                                                Rows rows, int cols_left, int tid,
                                                int cols_first) {
#pragma unroll
    for (int i = 0, r, c; i < ITERS && chunk(i, tid, r, c); ++i) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int row = rows.at(r + j);
        data[i][j] = __builtin_bit_cast(
            Words, guarded_load_far<Word>(g, row * row_stride + c,
                                          row >= 0 && inside(c, cols_first, cols_left)));
      }
    }
    dst = smem;
    live = true;
  }

  __device__ __forceinline__ void land(int tid) {
    if (!live) return;
#pragma unroll
    for (int i = 0, r, c; i < ITERS && chunk(i, tid, r, c); ++i) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        uint32_t h[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) h[j] = (data[i][j].w[e / 2] >> (16 * (e % 2))) & 0xffffu;
        st_shared<u32x2>(dst + tile_offset_k8<ROW_BYTES>(c + e, r * 2),
                         u32x2{h[0] | (h[1] << 16), h[2] | (h[3] << 16)});
      }
    }
    live = false;
  }
};

// Synchronous copy into a transposed tile, one element per load.
template <typename T, int ROWS, int COLS, int THREADS, int ROW_BYTES>
__device__ __forceinline__ void copy_tile_sync_k8(uint32_t smem, const T* g, int row_stride,
                                                  int col_stride, int rows_left, int cols_left,
                                                  float pad, int tid, int rows_first = 0,
                                                  int cols_first = 0) {
  const T fill = from_f32<T>(pad);
#pragma unroll 2
  for (int id = tid; id < ROWS * COLS; id += THREADS) {
    const int r = id % ROWS, c = id / ROWS;   // consecutive threads: consecutive k of a column
    const bool valid = inside(r, rows_first, rows_left) && inside(c, cols_first, cols_left);
    const T v = valid ? *PTC_GLOBAL(g + (r * row_stride + c * col_stride)) : fill;
    st_shared(smem + tile_offset_k8<ROW_BYTES>(c, r * static_cast<int>(sizeof(T))), v);
  }
}

// copy_tile_sync (K8: copy_tile_sync_k8, into a transposed tile) with gathered rows: `pad`
// where a row is none or a column outside.
template <typename T, int ROWS, int COLS, int THREADS, int ROW_BYTES, bool SWIZZLE,
          bool K8 = false, typename Rows = GatherRows>  // or BatchRows
__device__ __forceinline__ void copy_gathered_sync(uint32_t smem, const T* g,
                                                   long long row_stride, int col_stride,
                                                   Rows rows, int cols_left, float pad,
                                                   int tid, int cols_first) {
  const T fill = from_f32<T>(pad);
  for (int id = tid; id < ROWS * COLS; id += THREADS) {
    // a transposed tile: consecutive threads take consecutive k (rows) of a column
    const int r = K8 ? id % ROWS : id / COLS, c = K8 ? id / ROWS : id % COLS;
    const int row = rows.at(r);
    const bool valid = row >= 0 && inside(c, cols_first, cols_left);
    const T v = valid ? *PTC_GLOBAL(g + (row * row_stride + c * col_stride)) : fill;
    const int bytes = r * static_cast<int>(sizeof(T));
    st_shared(smem + (K8 ? tile_offset_k8<ROW_BYTES>(c, bytes)
                         : tile_offset<ROW_BYTES, SWIZZLE>(r, c * sizeof(T))), v);
  }
}

}  // namespace ptc
