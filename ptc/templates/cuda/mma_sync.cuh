// ptc: tensor-core matrix multiply of shared-memory tiles with ldmatrix + mma.sync
// (m16n8k16, f16 or bf16 inputs, f32 accumulation), for sm80 and later.
//   out[m][n] = addend[m][n] + sum_k a(m, k) * b(k, n)
// where a(m, k) = a[m * lda + k], or a[k * lda + m] when A_T (a transposed operand), and
// b(k, n) = b[k * ldb + n], or b[n * ldb + k] when B_T.
// Each warp takes 16 x 8 output blocks in turn; `out` may alias `addend`.
#pragma once
#include "ptc_types.cuh"

namespace ptc {

template <typename T> struct mma_kind;
template <> struct mma_kind<__half> { static constexpr bool bf16 = false; };
template <> struct mma_kind<__nv_bfloat16> { static constexpr bool bf16 = true; };

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* p) {
#ifdef PTC_EMULATE
  ::ptc::emu::ldmatrix<4, false>(r, p);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(p)));
#endif
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* p) {
#ifdef PTC_EMULATE
  ::ptc::emu::ldmatrix<4, true>(r, p);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(p)));
#endif
}
__device__ __forceinline__ void ldmatrix_x2(unsigned (&r)[2], const void* p) {
#ifdef PTC_EMULATE
  ::ptc::emu::ldmatrix<2, false>(r, p);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1]) : "r"(smem_addr(p)));
#endif
}
__device__ __forceinline__ void ldmatrix_x2_trans(unsigned (&r)[2], const void* p) {
#ifdef PTC_EMULATE
  ::ptc::emu::ldmatrix<2, true>(r, p);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1]) : "r"(smem_addr(p)));
#endif
}

template <bool BF16>
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4],
                                          const unsigned (&b)[2]) {
#ifdef PTC_EMULATE
  ::ptc::emu::mma_m16n8k16<BF16>(d, a, b);
#else
  if (BF16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
#endif
}

// d[j] += a(m0.., k) * b(k, nbase + 8j..) over all of K, for one warp's 16 x 8*NB tile.
// A stored [K][M] (A_T): matrix j of the x4 load is rows k0 + (j / 2) * 8, cols m0 + (j % 2) * 8.
template <typename T, int K, int NB, bool A_T, bool B_T>
__device__ __forceinline__ void warp_tile_mma(float (&d)[NB][4], int m0, int nbase, const T* a,
                                              int lda, const T* b, int ldb) {
  const int lane = threadIdx.x % 32;
#pragma unroll 1
  for (int k0 = 0; k0 < K; k0 += 16) {
    unsigned af[4];
    if (A_T) {
      ldmatrix_x4_trans(af, a + (k0 + lane % 8 + (lane / 16) * 8) * lda + m0 + ((lane / 8) % 2) * 8);
    } else {
      ldmatrix_x4(af, a + (m0 + lane % 16) * lda + k0 + (lane / 16) * 8);
    }
#pragma unroll
    for (int j = 0; j < NB; ++j) {
      const int n0 = nbase + j * 8;
      unsigned bf[2];
      if (B_T) {
        ldmatrix_x2(bf, b + (n0 + lane % 8) * ldb + k0 + ((lane / 8) % 2) * 8);
      } else {
        ldmatrix_x2_trans(bf, b + (k0 + lane % 16) * ldb + n0);
      }
      mma_16816<mma_kind<T>::bf16>(d[j], af, bf);
    }
  }
}

template <typename T, int M, int N, int K, bool A_T, bool B_T, int WARPS>
__device__ __forceinline__ void mma_tile(float* out, int ldo, const float* addend, int ldadd,
                                         const T* a, int lda, const T* b, int ldb) {
  static_assert(M % 16 == 0 && N % 8 == 0 && K % 16 == 0, "mma tiles are 16 x 8 x 16");
  // a warp's tile is 16 rows x NB 8-column blocks, so each A fragment feeds NB mma's
  constexpr int NB = N % 32 == 0 ? 4 : N % 16 == 0 ? 2 : 1;
  constexpr int COLS = N / (8 * NB);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int tile = warp; tile < (M / 16) * COLS; tile += WARPS) {
    const int m0 = (tile / COLS) * 16, nbase = (tile % COLS) * 8 * NB;
    float d[NB][4];
#pragma unroll
    for (int j = 0; j < NB; ++j) d[j][0] = d[j][1] = d[j][2] = d[j][3] = 0.f;
    warp_tile_mma<T, K, NB, A_T, B_T>(d, m0, nbase, a, lda, b, ldb);
#pragma unroll
    for (int j = 0; j < NB; ++j) {
      const int r = m0 + lane / 4, c = nbase + j * 8 + (lane % 4) * 2;
      float add[4] = {0.f, 0.f, 0.f, 0.f};
      if (addend) {
        add[0] = addend[r * ldadd + c];
        add[1] = addend[r * ldadd + c + 1];
        add[2] = addend[(r + 8) * ldadd + c];
        add[3] = addend[(r + 8) * ldadd + c + 1];
      }
      out[r * ldo + c] = add[0] + d[j][0];
      out[r * ldo + c + 1] = add[1] + d[j][1];
      out[(r + 8) * ldo + c] = add[2] + d[j][2];
      out[(r + 8) * ldo + c + 1] = add[3] + d[j][3];
    }
  }
}

// Register-resident accumulators: an M x N f32 tile held in mma fragments across a whole
// tile loop. Warp w owns the warp tiles w, w + WARPS, ... of mma_tile's layout, so the
// shared-memory copy is read once before the loop and written once after it.
template <int M, int N, int WARPS>
struct Accumulator {
  static constexpr int NB = N % 32 == 0 ? 4 : N % 16 == 0 ? 2 : 1;
  static constexpr int COLS = N / (8 * NB);
  static constexpr int TILES = (M / 16) * COLS;
  static constexpr int PER_WARP = (TILES + WARPS - 1) / WARPS;
  float d[PER_WARP][NB][4];
};

template <int M, int N, int WARPS, bool TO_SHARED>
__device__ __forceinline__ void accumulator_shared(Accumulator<M, N, WARPS>& acc, float* smem,
                                                   int ld) {
  using A = Accumulator<M, N, WARPS>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int i = 0; i < A::PER_WARP; ++i) {
    const int tile = warp + i * WARPS;
    if (tile < A::TILES) {
      const int m0 = (tile / A::COLS) * 16, nbase = (tile % A::COLS) * 8 * A::NB;
#pragma unroll
      for (int j = 0; j < A::NB; ++j) {
        const int r = m0 + lane / 4, c = nbase + j * 8 + (lane % 4) * 2;
        float* p[4] = {smem + r * ld + c, smem + r * ld + c + 1, smem + (r + 8) * ld + c,
                       smem + (r + 8) * ld + c + 1};
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          if (TO_SHARED) {
            *p[q] = acc.d[i][j][q];
          } else {
            acc.d[i][j][q] = *p[q];
          }
        }
      }
    }
  }
}

// acc += a @ b on the fragments (operand conventions as mma_tile)
template <typename T, int M, int N, int K, bool A_T, bool B_T, int WARPS>
__device__ __forceinline__ void mma_accumulate(Accumulator<M, N, WARPS>& acc, const T* a,
                                               int lda, const T* b, int ldb) {
  static_assert(M % 16 == 0 && N % 8 == 0 && K % 16 == 0, "mma tiles are 16 x 8 x 16");
  using A = Accumulator<M, N, WARPS>;
  const int warp = threadIdx.x / 32;
#pragma unroll
  for (int i = 0; i < A::PER_WARP; ++i) {
    const int tile = warp + i * WARPS;
    if (tile < A::TILES) {
      const int m0 = (tile / A::COLS) * 16, nbase = (tile % A::COLS) * 8 * A::NB;
      warp_tile_mma<T, K, A::NB, A_T, B_T>(acc.d[i], m0, nbase, a, lda, b, ldb);
    }
  }
}

// The CUDA-core fallback for tiles the tensor-core path cannot take (f32 operands,
// extents that are not multiples of 16 x 8 x 16).
template <typename T, int M, int N, int K, bool A_T, bool B_T, int THREADS>
__device__ __forceinline__ void matmul_simt(float* out, int ldo, const float* addend, int ldadd,
                                            const T* a, int lda, const T* b, int ldb) {
  for (int i = threadIdx.x; i < M * N; i += THREADS) {
    const int m = i / N, n = i % N;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) {
      acc += f32(A_T ? a[k * lda + m] : a[m * lda + k]) * f32(B_T ? b[n * ldb + k] : b[k * ldb + n]);
    }
    out[m * ldo + n] = (addend ? addend[m * ldadd + n] : 0.f) + acc;
  }
}

}  // namespace ptc
