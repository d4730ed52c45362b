// ptc: a wave's tile of MFMA instructions (v_mfma_f32_{16x16x16,32x32x8}{f16,bf16_1k}),
// f32 accumulate: MI x NI atoms over KS k-steps. Operand and accumulator layouts are AMD's
// (matrix instruction calculator; ptc/lower/atoms.py, docs/hip.md):
//   A[i][k] in lane i + M * (k / 4), value k % 4;  B[k][j] in lane j + N * (k / 4)
//   16x16x16: D[i][j] in lane j + 16 * (i / 4), register i % 4
//   32x32x8:  D[i][j] in lane j + 32 * ((i / 4) % 2), register (i % 4) + 4 * (i / 8)
// Register order (ptc/lower/assign.py, tiling_layouts):
//   accumulator  c[(mi * NI + ni) * CREGS + i]
//   A registers  a[(mi * KS + ks) * 2 + j]      (j: two 16-bit values each, low half first)
//   B registers  b[(ni * KS + ks) * 2 + j]
// Operands come from registers (RegA / RegB) or from LDS tiles (SharedA / SharedB): a
// lane's four k of a K-contiguous tile are one 8-byte ds_read, else four 2-byte reads.
#pragma once
#include "ptc_types.h"
#include "global_to_shared.h"

namespace ptc {

// d = mfma(a, b, d) through the builtin's vector types: C the accumulator vector of N
// floats, I the 4-value input vector (two registers, low half first)
template <typename C, int N, typename I, typename F>
__device__ __forceinline__ void mfma_call(float* d, const uint32_t* a, const uint32_t* b, F f) {
  const uint64_t a64 = static_cast<uint64_t>(a[0]) | (static_cast<uint64_t>(a[1]) << 32);
  const uint64_t b64 = static_cast<uint64_t>(b[0]) | (static_cast<uint64_t>(b[1]) << 32);
  C c;
#pragma unroll
  for (int i = 0; i < N; ++i) c[i] = d[i];
  c = f(__builtin_bit_cast(I, a64), __builtin_bit_cast(I, b64), c);
#pragma unroll
  for (int i = 0; i < N; ++i) d[i] = c[i];
}

// One instruction: M x N x K, CREGS accumulator registers per lane; 16-bit inputs.
template <int M_, int N_, int K_, bool BF16>
struct Mfma {
  static constexpr int M = M_, N = N_, K = K_, CREGS = M_ * N_ / 64;
  static_assert((M_ == 16 && N_ == 16 && K_ == 16) || (M_ == 32 && N_ == 32 && K_ == 8),
                "MFMA 16x16x16 or 32x32x8");
  __device__ __forceinline__ static void mma(float* d, const uint32_t* a, const uint32_t* b) {
    if constexpr (M_ == 16 && BF16)
      mfma_call<f32x4, 4, i16x4>(d, a, b, [](i16x4 x, i16x4 y, f32x4 c) {
        return __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(x, y, c, 0, 0, 0); });
    else if constexpr (M_ == 16)
      mfma_call<f32x4, 4, f16x4>(d, a, b, [](f16x4 x, f16x4 y, f32x4 c) {
        return __builtin_amdgcn_mfma_f32_16x16x16f16(x, y, c, 0, 0, 0); });
    else if constexpr (BF16)
      mfma_call<f32x16, 16, i16x4>(d, a, b, [](i16x4 x, i16x4 y, f32x16 c) {
        return __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(x, y, c, 0, 0, 0); });
    else
      mfma_call<f32x16, 16, f16x4>(d, a, b, [](f16x4 x, f16x4 y, f32x16 c) {
        return __builtin_amdgcn_mfma_f32_32x32x8f16(x, y, c, 0, 0, 0); });
  }
};

// An LDS tile of 16-bit elements: the byte address of (row, col).
template <int ROW_BYTES, bool SWIZZLE>
struct SharedTile {
  uint32_t base;
  __device__ __forceinline__ uint32_t at(int row, int col) const {
    return base + tile_offset<ROW_BYTES, SWIZZLE>(row, col * 2);
  }
};

// A transposed LDS tile (swizzle k8t): `at` takes stored coordinates (the tile's column
// first), as load_a / load_b do for TRANS operands.
template <int ROW_BYTES>
struct SharedTileK8 {
  uint32_t base;
  __device__ __forceinline__ uint32_t at(int row, int col) const {
    return base + tile_offset_k8<ROW_BYTES>(row, col * 2);
  }
};

// four 16-bit values, value j at `at(j)`, packed into two registers
template <class Tile, class At>
__device__ __forceinline__ void gather4(uint32_t* f, const Tile&, At at) {
  uint32_t h[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) h[j] = ld_shared<uint16_t>(at(j));
  f[0] = h[0] | (h[1] << 16);
  f[1] = h[2] | (h[3] << 16);
}

// the A fragment of rows m0.. and k-columns k0..; TRANS: the tile is stored [k][m]
template <class I, bool TRANS, class Tile>
__device__ __forceinline__ void load_a(uint32_t* f, const Tile& t, int m0, int k0, int lane) {
  const int row = m0 + lane % I::M, k = k0 + 4 * (lane / I::M);
  if constexpr (!TRANS) {
    const u32x2 v = ld_shared<u32x2>(t.at(row, k));
    f[0] = v.x;
    f[1] = v.y;
  } else {
    gather4(f, t, [&](int j) { return t.at(k + j, row); });
  }
}

// the B fragment of k-rows k0.. and columns n0..; TRANS: the tile is stored [n][k]
template <class I, bool TRANS, class Tile>
__device__ __forceinline__ void load_b(uint32_t* f, const Tile& t, int k0, int n0, int lane) {
  const int col = n0 + lane % I::N, k = k0 + 4 * (lane / I::N);
  if constexpr (TRANS) {
    const u32x2 v = ld_shared<u32x2>(t.at(col, k));
    f[0] = v.x;
    f[1] = v.y;
  } else {
    gather4(f, t, [&](int j) { return t.at(k + j, col); });
  }
}

template <int MI, int KS>
struct RegA {
  const uint32_t* r;
  template <class I>
  __device__ __forceinline__ void load(uint32_t (&a)[MI][2], int ks, int) const {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int j = 0; j < 2; ++j) a[mi][j] = r[(mi * KS + ks) * 2 + j];
  }
};

template <int NI, int KS>
struct RegB {
  const uint32_t* r;
  template <class I>
  __device__ __forceinline__ void load(uint32_t (&b)[NI][2], int ks, int) const {
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int j = 0; j < 2; ++j) b[ni][j] = r[(ni * KS + ks) * 2 + j];
  }
};

// rows m0 + M mi of an LDS A tile ([m][k], or [k][m] when TRANS)
template <int MI, bool TRANS, class Tile>
struct SharedA {
  Tile t;
  int m0;
  template <class I>
  __device__ __forceinline__ void load(uint32_t (&a)[MI][2], int ks, int lane) const {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) load_a<I, TRANS>(a[mi], t, m0 + mi * I::M, ks * I::K, lane);
  }
};

// columns n0 + N ni of an LDS B tile ([k][n], or [n][k] when TRANS)
template <int NI, bool TRANS, class Tile>
struct SharedB {
  Tile t;
  int n0;
  template <class I>
  __device__ __forceinline__ void load(uint32_t (&b)[NI][2], int ks, int lane) const {
#pragma unroll
    for (int ni = 0; ni < NI; ++ni) load_b<I, TRANS>(b[ni], t, ks * I::K, n0 + ni * I::N, lane);
  }
};

// c += A @ B for one wave's MI x NI atoms, k-steps unrolled
template <int MI, int NI, int KS, class I, class A, class B>
__device__ __forceinline__ void mfma_tile(float* c, const A& a, const B& b, int lane) {
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) {
    uint32_t af[MI][2], bf[NI][2];
    a.template load<I>(af, ks, lane);
    b.template load<I>(bf, ks, lane);
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) I::mma(c + (mi * NI + ni) * I::CREGS, af[mi], bf[ni]);
  }
}

// Read an LDS operand into A-operand registers once (loop-invariant operands).
template <class I, int MI, int KS, bool TRANS, class Tile>
__device__ __forceinline__ void load_a_fragments(uint32_t* r, const Tile& t, int m0, int lane) {
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) load_a<I, TRANS>(r + (mi * KS + ks) * 2, t, m0 + mi * I::M, ks * I::K, lane);
}

template <class I, int NI, int KS, bool TRANS, class Tile>
__device__ __forceinline__ void load_b_fragments(uint32_t* r, const Tile& t, int n0, int lane) {
#pragma unroll
  for (int ni = 0; ni < NI; ++ni)
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) load_b<I, TRANS>(r + (ni * KS + ks) * 2, t, ks * I::K, n0 + ni * I::N, lane);
}

}  // namespace ptc
