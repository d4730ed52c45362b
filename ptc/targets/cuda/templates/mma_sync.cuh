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

// FP8 (OCP e4m3 / e5m2) operands on mma.sync without an FP8 form (sm80; sm90's mma.sync
// plans): the m16n8k32 .s8 byte fragments, widened in registers to f16 (exact for every
// FP8 value) and multiplied by two m16n8k16 f16 instructions.
//
// Why the sum is the product's: in m16n8k32 .s8 (PTX ISA, "Matrix Fragments for
// mma.m16n8k32"), A register r, byte i holds row g + 8 (r & 1), k = 4t + i + 16 (r >> 1),
// and B register r, byte i holds k = 4t + i + 16 r, column g (g = lane / 4, t = lane % 4).
// In m16n8k16 f16 ("Matrix Fragments for mma.m16n8k16"), A register r, half h holds row
// g + 8 (r & 1), k' = 2t + h + 8 (r >> 1); B register r, half h holds k' = 2t + h + 8 r.
// Widening bytes {0,1} of A register r (r = 0, 1; 2, 3 for the second instruction) to
// f16 register r and bytes {2,3} to f16 register r + 2, and bytes {0,1} / {2,3} of B
// register j to f16 registers 0 / 1, puts k = 4t + h (+ 16 j) at k' = 2t + h and
// k = 4t + 2 + h at k' = 8 + 2t + h, in A and in B alike: one bijection of 0..15 onto
// each half of the 32 k. Each instruction sums A[m][k] B[k][n] over its k', so the two
// sum A[m][k] B[k][n] over all 32 k: the order of the terms is the f16 instruction's.

// f16 bits of e5m2 bytes 2h, 2h + 1 of x (e5m2 is f16's top byte: same bias, exact)
__device__ __forceinline__ uint32_t e5m2x2_to_f16x2(uint32_t x, int h) {
  const uint32_t y = h ? x >> 16 : x;
  return (y & 0xffu) << 8 | (y & 0xff00u) << 16;
}

// f16x2 times 256: exact (the widened e4m3 values lie in 2^-17 .. 1.875)
__device__ __forceinline__ uint32_t f16x2_times_256(uint32_t x) {
#ifdef PTC_EMULATE
  return ::ptc::emu::f16x2_scale(x, 256.0f);
#else
  uint32_t r;
  asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(x), "r"(0x5c005c00u));
  return r;
#endif
}

// f16 bits of e4m3 bytes 2h, 2h + 1 of x: sign to f16's, E4M3's 7 low bits shifted to f16's
// exponent and mantissa fields give the value times 2^-8 (bias 15 for 7, subnormals too),
// then times 256. The NaN codes S.1111.111 come out as +-480 (not an e4m3 value: the
// largest is 448) and are made NaN (exponent all ones).
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t x, int h) {
  const uint32_t y = h ? x >> 16 : x;
  const uint32_t sign = (y & 0x80u) << 8 | (y & 0x8000u) << 16;
  const uint32_t bits = (y & 0x7fu) << 7 | (y & 0x7f00u) << 15;
  const uint32_t v = f16x2_times_256(bits);
  const uint32_t nonzero = ((v ^ 0x5f805f80u) + 0x7fff7fffu) & 0x80008000u;  // lane != 480
  return v | sign | ((~nonzero & 0x80008000u) >> 15) * 0x7c00u;
}

template <bool E5M2>
__device__ __forceinline__ uint32_t fp8x2_to_f16x2(uint32_t x, int h) {
  return E5M2 ? e5m2x2_to_f16x2(x, h) : e4m3x2_to_f16x2(x, h);
}

template <bool A_E5M2, bool B_E5M2>
struct Mma16832F8 {
  __device__ __forceinline__ static void mma(float* d, const uint32_t* a, const uint32_t* b) {
#pragma unroll
    for (int s = 0; s < 2; ++s) {     // k 0..15, then 16..31
      const uint32_t af[4] = {fp8x2_to_f16x2<A_E5M2>(a[2 * s], 0),
                              fp8x2_to_f16x2<A_E5M2>(a[2 * s + 1], 0),
                              fp8x2_to_f16x2<A_E5M2>(a[2 * s], 1),
                              fp8x2_to_f16x2<A_E5M2>(a[2 * s + 1], 1)};
      const uint32_t bf[2] = {fp8x2_to_f16x2<B_E5M2>(b[s], 0), fp8x2_to_f16x2<B_E5M2>(b[s], 1)};
      mma_16816<false>(d, af, bf);
    }
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
