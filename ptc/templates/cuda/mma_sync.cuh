// ptc: a warp's tile of mma.sync m16n8k16 (f16 / bf16 in) or m16n8k8 (tf32 in), f32
// accumulate, or m16n8k32 (s8 in, s32 accumulate): MI x NI atoms over KS k-steps. Register
// order (ptc/lower/assign.py, tiling_layouts):
//   accumulator  c[(mi * NI + ni) * 4 + i]      (i: the atom's c0..c3)
//   A registers  a[(mi * KS + ks) * 4 + j]      (j: the atom's a0..a3, two halves each)
//   B registers  b[(ni * KS + ks) * 2 + j]
// Operands come from registers (RegA / RegB) or from shared tiles through ldmatrix
// (SharedA / SharedB, shared_to_register_ldmatrix.cuh).
#pragma once
#include "ptc_types.cuh"
#include "shared_to_register_ldmatrix.cuh"

namespace ptc {

template <bool BF16>
__device__ __forceinline__ void mma_16816(float* d, const uint32_t* a, const uint32_t* b) {
#ifdef PTC_EMULATE
  ::ptc::emu::mma_m16n8k16<BF16>(d, a, b);
#else
  if (BF16)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// The instructions, as types mma_tile takes: A in 4 registers, B in 2, f32 accumulators.
template <bool BF16>
struct Mma16816 {
  __device__ __forceinline__ static void mma(float* d, const uint32_t* a, const uint32_t* b) {
    mma_16816<BF16>(d, a, b);
  }
};

// mma.sync m16n8k8 with tf32 operands (one f32 per register, its low 13 bits ignored):
// A a0..a3 at (g, t) (g + 8, t) (g, t + 4) (g + 8, t + 4), B b0, b1 at (t, g) (t + 4, g)
// (PTX ISA, "Matrix Fragments for mma.m16n8k8", .tf32); ptc/lower/atoms.py
struct Mma1688Tf32 {
  __device__ __forceinline__ static void mma(float* d, const uint32_t* a, const uint32_t* b) {
#ifdef PTC_EMULATE
    ::ptc::emu::mma_m16n8k8_tf32(d, a, b);
#else
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
  }
};

// mma.sync m16n8k32 .s32.s8.s8.s32: A in 4 registers (a0..a15, four bytes each), B in 2
// (b0..b7), C/D four s32 as m16n8k16's f32 (PTX ISA, "Matrix Fragments for mma.m16n8k32",
// .s8; ptc/lower/atoms.py). Without .satfinite the s32 sums wrap modulo 2^32.
struct Mma16832S8 {
  __device__ __forceinline__ static void mma(int* d, const uint32_t* a, const uint32_t* b) {
#ifdef PTC_EMULATE
    ::ptc::emu::mma_m16n8k32_s8(d, a, b);
#else
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
  }
};

template <int MI, int KS>
struct RegA {
  const uint32_t* r;
  __device__ __forceinline__ void load(uint32_t (&a)[MI][4], int ks, int) const {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int j = 0; j < 4; ++j) a[mi][j] = r[(mi * KS + ks) * 4 + j];
  }
};

template <int NI, int KS>
struct RegB {
  const uint32_t* r;
  __device__ __forceinline__ void load(uint32_t (&b)[NI][2], int ks, int) const {
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int j = 0; j < 2; ++j) b[ni][j] = r[(ni * KS + ks) * 2 + j];
  }
};

// four int8_t registers as one 32-bit word, the first lowest
__device__ __forceinline__ uint32_t pack_bytes(const int8_t* p) {
  return static_cast<uint32_t>(static_cast<uint8_t>(p[0])) |
         static_cast<uint32_t>(static_cast<uint8_t>(p[1])) << 8 |
         static_cast<uint32_t>(static_cast<uint8_t>(p[2])) << 16 |
         static_cast<uint32_t>(static_cast<uint8_t>(p[3])) << 24;
}

// i8 operands in registers (int8_t values in the atom's register order): packed on the way
template <int MI, int KS>
struct RegA8 {
  const int8_t* r;
  __device__ __forceinline__ void load(uint32_t (&a)[MI][4], int ks, int) const {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int j = 0; j < 4; ++j) a[mi][j] = pack_bytes(r + ((mi * KS + ks) * 4 + j) * 4);
  }
};

template <int NI, int KS>
struct RegB8 {
  const int8_t* r;
  __device__ __forceinline__ void load(uint32_t (&b)[NI][2], int ks, int) const {
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int j = 0; j < 2; ++j) b[ni][j] = pack_bytes(r + ((ni * KS + ks) * 2 + j) * 4);
  }
};

// rows m0 + 16 mi of a shared A tile ([m][k], or [k][m] when TRANS)
template <int MI, bool TRANS, class Tile>
struct SharedA {
  Tile t;
  int m0;
  __device__ __forceinline__ void load(uint32_t (&a)[MI][4], int ks, int lane) const {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) load_a<TRANS>(a[mi], t, m0 + mi * 16, ks * 16, lane);
  }
};

// columns n0 + 8 ni of a shared B tile ([k][n], or [n][k] when TRANS)
template <int NI, bool TRANS, class Tile>
struct SharedB {
  Tile t;
  int n0;
  __device__ __forceinline__ void load(uint32_t (&b)[NI][2], int ks, int lane) const {
#pragma unroll
    for (int ni = 0; ni + 1 < NI; ni += 2) load_b<2, TRANS>(b[ni], t, ks * 16, n0 + ni * 8, lane);
    if (NI % 2) load_b<1, TRANS>(b[NI - 1], t, ks * 16, n0 + (NI - 1) * 8, lane);
  }
};

// c += A @ B for one warp's MI x NI atoms, k-steps unrolled (C: float, or int for s8)
template <int MI, int NI, int KS, class MMA, class C, class A, class B>
__device__ __forceinline__ void mma_tile(C* c, const A& a, const B& b, int lane) {
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) {
    uint32_t af[MI][4], bf[NI][2];
    a.load(af, ks, lane);
    b.load(bf, ks, lane);
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) MMA::mma(c + (mi * NI + ni) * 4, af[mi], bf[ni]);
  }
}

// Read a shared operand into A-operand registers once (loop-invariant operands).
template <int MI, int KS, bool TRANS, class Tile>
__device__ __forceinline__ void load_a_fragments(uint32_t* r, const Tile& t, int m0, int lane) {
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      uint32_t a[4];
      load_a<TRANS>(a, t, m0 + mi * 16, ks * 16, lane);
#pragma unroll
      for (int j = 0; j < 4; ++j) r[(mi * KS + ks) * 4 + j] = a[j];
    }
}

template <int NI, int KS, bool TRANS, class Tile>
__device__ __forceinline__ void load_b_fragments(uint32_t* r, const Tile& t, int n0, int lane) {
#pragma unroll
  for (int ni = 0; ni < NI; ++ni)
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      uint32_t b[2];
      load_b<1, TRANS>(b, t, ks * 16, n0 + ni * 8, lane);
      r[(ni * KS + ks) * 2] = b[0];
      r[(ni * KS + ks) * 2 + 1] = b[1];
    }
}

}  // namespace ptc
