// The shape of the main loop the HIP renderer is to emit (docs/hip.md, "Mapping ptc's
// lowered IR"): C[128x128] += A[128xK] B[Kx128], bf16 in, f32 out, B given as B^T [N][K]
// (both operands K-contiguous). 256 threads = 4 waves in 2 x 2, each wave 64 x 64 = 2 x 2
// MFMA 32x32x8 atoms. Global -> registers (the next tile's prefetch, in flight across the
// MFMAs) -> LDS (2 stages, XOR-swizzled 16-byte chunks) -> registers by ds_read_b128 -> MFMA.
// One barrier per k-tile. K-packing: a ds_read_b128 brings 8 consecutive k of one row; its
// first 4 feed the MFMA of k-step 2s, the last 4 that of k-step 2s + 1 (the same
// permutation of k for A and B, so the sum is unchanged).
#include "prelude.h"

using namespace ptc;

constexpr int BM = 128, BN = 128, BK = 32, THREADS = 256;
constexpr int CHUNKS = BK * 2 / 16;                 // 16-byte chunks per row: 4

typedef unsigned u32x4 __attribute__((ext_vector_type(4)));
typedef short bf16x8 __attribute__((ext_vector_type(8)));

// values 4h..4h+3 of 8. Not `__builtin_bit_cast(bf16x4, v.hi)`: clang 15 and 19 bit-cast a
// vector swizzle from element 0 (llvm/llvm-project#95673), silently
PTC_DEVICE bf16x4 half4(bf16x8 v, int h) {
  return h ? __builtin_shufflevector(v, v, 4, 5, 6, 7) : __builtin_shufflevector(v, v, 0, 1, 2, 3);
}

// LDS position of (row, chunk): rows are 64 bytes, two per 128-byte bank line; chunk XOR
// ((row / 2) % 4) makes every ds_read_b128 phase (lanes {0-3, 20-23}, ...) and every
// ds_write_b128 phase (8 consecutive lanes) touch 8 different 16-byte bank groups
PTC_DEVICE int lds_chunk(int row, int chunk) { return row * CHUNKS + (chunk ^ ((row >> 1) & 3)); }

extern "C" __global__ __launch_bounds__(THREADS) void gemm_bf16_tn(
    const u32x4* __restrict__ a,     // [M][K] bf16, as 16-byte chunks
    const u32x4* __restrict__ bt,    // [N][K] bf16
    float* __restrict__ c,           // [M][N] f32
    int n, int k) {
  __shared__ u32x4 lds[2][2][BM * CHUNKS];          // [stage][A | B^T]: 2 x 2 x 8 KB
  const int t = thread_id(), lane = lane_id(), wave = wave_id();
  const int wm = wave / 2, wn = wave % 2;            // the wave's 64 x 64 quadrant
  const int row0 = block_id_y() * BM, col0 = block_id_x() * BN;
  const int kchunks = k / 8;                         // 16-byte chunks per global row

  // this thread's two chunks of each operand tile: rows t / 4 and 64 + t / 4, chunk t % 4
  const int lr = t / CHUNKS, lc = t % CHUNKS;
  const u32x4* ga = a + (long)(row0 + lr) * kchunks + lc;
  const u32x4* gb = bt + (long)(col0 + lr) * kchunks + lc;
  const long half = 64L * kchunks;
  u32x4 ra0 = ga[0], ra1 = ga[half], rb0 = gb[0], rb1 = gb[half];

  f32x16 acc[2][2] = {};
  const int tiles = k / BK;
  for (int kt = 0; kt < tiles; ++kt) {
    const int s = kt & 1;
    if (kt == 0) {                                    // fill stage 0
      lds[0][0][lds_chunk(lr, lc)] = ra0; lds[0][0][lds_chunk(64 + lr, lc)] = ra1;
      lds[0][1][lds_chunk(lr, lc)] = rb0; lds[0][1][lds_chunk(64 + lr, lc)] = rb1;
      syncthreads();
    }
    if (kt + 1 < tiles) {                             // prefetch the next k-tile
      const int off = (kt + 1) * CHUNKS;
      ra0 = ga[off]; ra1 = ga[half + off]; rb0 = gb[off]; rb1 = gb[half + off];
    }
    for (int ks = 0; ks < BK / 16; ++ks) {            // 16 k per ds_read_b128
      const int chunk = 2 * ks + lane / 32;
      bf16x8 fa[2], fb[2];
      for (int i = 0; i < 2; ++i) {
        fa[i] = __builtin_bit_cast(bf16x8, lds[s][0][lds_chunk(wm * 64 + i * 32 + lane % 32, chunk)]);
        fb[i] = __builtin_bit_cast(bf16x8, lds[s][1][lds_chunk(wn * 64 + i * 32 + lane % 32, chunk)]);
      }
      for (int h = 0; h < 2; ++h)                     // k-steps 2 ks and 2 ks + 1
        for (int i = 0; i < 2; ++i)
          for (int j = 0; j < 2; ++j)
            acc[i][j] = __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(half4(fa[i], h), half4(fb[j], h),
                                                                 acc[i][j], 0, 0, 0);
    }
    if (kt + 1 < tiles) {                             // stage the prefetch for kt + 1
      const int o = s ^ 1;
      lds[o][0][lds_chunk(lr, lc)] = ra0; lds[o][0][lds_chunk(64 + lr, lc)] = ra1;
      lds[o][1][lds_chunk(lr, lc)] = rb0; lds[o][1][lds_chunk(64 + lr, lc)] = rb1;
    }
    syncthreads();
  }
  // D[i][j] of atom (ai, aj): lane j + 32 * ((i / 4) % 2), register (i % 4) + 4 * (i / 8)
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      for (int r = 0; r < 16; ++r) {
        const int row = row0 + wm * 64 + i * 32 + (r % 4) + 4 * (lane / 32) + 8 * (r / 4);
        const int col = col0 + wn * 64 + j * 32 + lane % 32;
        c[(long)row * n + col] = acc[i][j][r];
      }
}
