// ptc: a wave's tile of MFMA instructions -- v_mfma_f32_{16x16x16,32x32x8}{f16,bf16_1k}, f32
// accumulate, and the i8 ones, s32 accumulate: v_mfma_i32_{16x16x16,32x32x8}i8 (gfx90a) and
// v_mfma_i32_{16x16x32,32x32x16}_i8 (gfx942), and FP8: widened to f16 on gfx90a (MfmaF8),
// v_mfma_f32_*_{fp8,bf8}_{fp8,bf8} on gfx942 (MfmaFnuz) -- MI x NI atoms over KS k-steps. Operand and
// accumulator layouts are AMD's (matrix instruction calculator; ptc/lower/atoms.py,
// docs/hip.md); KPL, the k values a lane holds, is 4 (f16, bf16, gfx90a's i8) or 8 (gfx942's i8):
//   A[i][k] in lane i + M * (k / KPL), value k % KPL;  B[k][j] in lane j + N * (k / KPL)
//   16x16xK: D[i][j] in lane j + 16 * (i / 4), register i % 4
//   32x32xK: D[i][j] in lane j + 32 * ((i / 4) % 2), register (i % 4) + 4 * (i / 8)
// Register order (ptc/lower/assign.py, tiling_layouts):
//   accumulator  c[(mi * NI + ni) * CREGS + i]
//   A registers  a[(mi * KS + ks) * REGS + j]   (REGS 32-bit registers: 16-bit values two
//   B registers  b[(ni * KS + ks) * REGS + j]    to a register, i8 four, low part first)
// Operands come from registers (RegA / RegB) or from LDS tiles (SharedA / SharedB): a
// lane's KPL k of a K-contiguous tile are one 4- or 8-byte ds_read, else KPL 2-byte or
// 1-byte reads.
#pragma once
#include "ptc_types.h"
#include "global_to_shared.h"

namespace ptc {

// d = f(d) through the builtin's accumulator vector type C of CN values (float or int)
template <typename C, int CN, typename T, typename F>
__device__ __forceinline__ void acc_call(T* d, F f) {
  C c;
#pragma unroll
  for (int i = 0; i < CN; ++i) c[i] = d[i];
  c = f(c);
#pragma unroll
  for (int i = 0; i < CN; ++i) d[i] = c[i];
}

// a lane's 64-bit operand of two registers, the first lowest
__device__ __forceinline__ long word_pair(const uint32_t* r) {
  return static_cast<long>(static_cast<uint64_t>(r[0]) | (static_cast<uint64_t>(r[1]) << 32));
}

// d = mfma(a, b, d) through the builtin's vector types: C the accumulator vector of N
// floats, I the 4-value input vector (two registers, low half first)
template <typename C, int N, typename I, typename F>
__device__ __forceinline__ void mfma_call(float* d, const uint32_t* a, const uint32_t* b, F f) {
  const uint64_t a64 = static_cast<uint64_t>(a[0]) | (static_cast<uint64_t>(a[1]) << 32);
  const uint64_t b64 = static_cast<uint64_t>(b[0]) | (static_cast<uint64_t>(b[1]) << 32);
  const I x = __builtin_bit_cast(I, a64), y = __builtin_bit_cast(I, b64);
  acc_call<C, N>(d, [&](C c) { return f(x, y, c); });
}

// One instruction: M x N x K, CREGS accumulator registers per lane; 16-bit inputs.
template <int M_, int N_, int K_, bool BF16>
struct Mfma {
  static constexpr int M = M_, N = N_, K = K_, CREGS = M_ * N_ / 64;
  static constexpr int KPL = 4, REGS = 2;     // k per lane, 32-bit registers per operand
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

// One i8 instruction, s32 accumulate (the sums wrap modulo 2^32): gfx90a's
// v_mfma_i32_{16x16x16,32x32x8}i8 take four i8 per lane in one register, gfx942's
// v_mfma_i32_{16x16x32,32x32x16}_i8 eight in two (a 64-bit operand).
template <int M_, int N_, int K_>
struct MfmaI8 {
  static constexpr int M = M_, N = N_, K = K_, CREGS = M_ * N_ / 64;
  static constexpr int KPL = K_ * M_ / 64, REGS = KPL / 4;
  static_assert((M_ == 16 && N_ == 16 && (K_ == 16 || K_ == 32)) ||
                (M_ == 32 && N_ == 32 && (K_ == 8 || K_ == 16)),
                "MFMA i8 16x16x16, 32x32x8 (gfx90a), 16x16x32 or 32x32x16 (gfx942)");
  __device__ __forceinline__ static void mma(int* d, const uint32_t* a, const uint32_t* b) {
    if constexpr (KPL == 4) {
      const int x = static_cast<int>(a[0]), y = static_cast<int>(b[0]);
      if constexpr (M_ == 16)
        acc_call<i32x4, 4>(d, [&](i32x4 c) { return __builtin_amdgcn_mfma_i32_16x16x16i8(x, y, c, 0, 0, 0); });
      else
        acc_call<i32x16, 16>(d, [&](i32x16 c) { return __builtin_amdgcn_mfma_i32_32x32x8i8(x, y, c, 0, 0, 0); });
    } else {
      const long x = word_pair(a), y = word_pair(b);
      if constexpr (M_ == 16)
        acc_call<i32x4, 4>(d, [&](i32x4 c) { return __builtin_amdgcn_mfma_i32_16x16x32_i8(x, y, c, 0, 0, 0); });
      else
        acc_call<i32x16, 16>(d, [&](i32x16 c) { return __builtin_amdgcn_mfma_i32_32x32x16_i8(x, y, c, 0, 0, 0); });
    }
  }
};

// FP8 (OCP e4m3 / e5m2) on CDNA2, which has no FP8 MFMA: the i8 instructions' byte
// layouts (a lane's 4 consecutive k in one register), each register widened to the f16
// instruction's two (k0, k1 | k2, k3: the same order, so A and B pair k as the f16 layout
// does) and multiplied by v_mfma_f32_{16x16x16,32x32x8}f16. e5m2 is f16's top byte; e4m3's
// sign and 7 low bits shifted into f16's fields give the value times 2^-8 (subnormals
// too), times 256 is exact, and the NaN codes S.1111.111 (+-480 then, not an e4m3 value)
// are made NaN.
__device__ __forceinline__ uint16_t f16_times_256(uint32_t bits) {
  const _Float16 x = __builtin_bit_cast(_Float16, static_cast<uint16_t>(bits));
  return __builtin_bit_cast(uint16_t, static_cast<_Float16>(x * static_cast<_Float16>(256.0f)));
}

template <bool E5M2>
__device__ __forceinline__ uint32_t fp8x2_to_f16x2(uint32_t x, int h) {
  const uint32_t y = h ? x >> 16 : x;
  if constexpr (E5M2) {
    return (y & 0xffu) << 8 | (y & 0xff00u) << 16;
  } else {
    const uint32_t sign = (y & 0x80u) << 8 | (y & 0x8000u) << 16;
    const uint32_t v = static_cast<uint32_t>(f16_times_256((y & 0x7fu) << 7)) |
                       static_cast<uint32_t>(f16_times_256((y & 0x7f00u) >> 1)) << 16;
    const uint32_t nonzero = ((v ^ 0x5f805f80u) + 0x7fff7fffu) & 0x80008000u;  // lane != 480
    return v | sign | ((~nonzero & 0x80008000u) >> 15) * 0x7c00u;
  }
}

template <int M_, int N_, int K_, bool A_E5M2, bool B_E5M2>
struct MfmaF8 {
  static constexpr int M = M_, N = N_, K = K_, CREGS = M_ * N_ / 64;
  static constexpr int KPL = 4, REGS = 1;     // the gfx90a i8 atoms' operands
  __device__ __forceinline__ static void mma(float* d, const uint32_t* a, const uint32_t* b) {
    const uint32_t af[2] = {fp8x2_to_f16x2<A_E5M2>(a[0], 0), fp8x2_to_f16x2<A_E5M2>(a[0], 1)};
    const uint32_t bf[2] = {fp8x2_to_f16x2<B_E5M2>(b[0], 0), fp8x2_to_f16x2<B_E5M2>(b[0], 1)};
    Mfma<M_, N_, K_, false>::mma(d, af, bf);
  }
};

// FP8 (OCP e4m3 / e5m2) on CDNA3's FP8 matrix unit: v_mfma_f32_{32x32x16,16x16x32}_
// {fp8,bf8}_{fp8,bf8} (gfx940+), a lane's 8 consecutive k in a 64-bit operand (the i8
// instructions' layout). They read the FNUZ formats: e4m3fnuz (bias 8) and e5m2fnuz (bias
// 16), NaN only 0x80, no -0, no infinities. An OCP code read as FNUZ is half its value (the
// bias is one more; every finite nonzero code, subnormals too), so each product is a quarter
// of its value: the accumulator is kept in quarter units over a tile's k-steps (times 1/4
// before, times 4 after; powers of two, exact unless f32 subnormals are reached). Each
// register of four codes is fixed up once per k-step, without branches: -0 (0x80, FNUZ's
// NaN) becomes +0, the NaN codes (e4m3 S.1111.111, e5m2 S.11111.xx with xx != 0) 0x80.
// e5m2's infinities (S.11111.00) have no FNUZ code: a k-step whose e5m2 operands hold one
// anywhere in the wave (a ballot: one uniform branch) is multiplied as CDNA2 multiplies FP8
// instead -- widened to f16, which keeps them (fp8x2_to_f16x2) -- at two f16 instructions per
// atom.

// Per byte (no carry or borrow crosses a byte): `nan` is 0x80 where the code is a NaN, `keep`
// 0xff where it stays, 0x7f where it is -0 (its sign dropped), 0x80 where it is a NaN
// (0xff - 0x7f: its low bits dropped, then `nan` sets 0x80). Full-rate VALU only.
template <bool E5M2>
__device__ __forceinline__ uint32_t ocp_to_fnuz(uint32_t x) {
  const uint32_t low = x & 0x7f7f7f7fu;         // per byte: the code without its sign
  const uint32_t nan = (low + (E5M2 ? 0x03030303u : 0x01010101u)) & 0x80808080u;
  const uint32_t nonzero = (low + 0x7f7f7f7fu) & 0x80808080u;
  const uint32_t keep = (nonzero | 0x7f7f7f7fu) - (nan - (nan >> 7));
  return (x & keep) | nan;
}

// a byte of an e5m2 word is an infinity (low bits 0x7c): nonzero then
__device__ __forceinline__ uint32_t e5m2_infinities(uint32_t x) {
  return ~(((x & 0x7f7f7f7fu) ^ 0x7c7c7c7cu) + 0x7f7f7f7fu) & 0x80808080u;
}

// two f16 values times 1/4 (exact where the quarter is an f16 value, as every FP8 value's is)
__device__ __forceinline__ uint32_t f16x2_quarter(uint32_t v) {
  const _Float16 q = static_cast<_Float16>(0.25f);
  const _Float16 lo = __builtin_bit_cast(_Float16, static_cast<uint16_t>(v)) * q;
  const _Float16 hi = __builtin_bit_cast(_Float16, static_cast<uint16_t>(v >> 16)) * q;
  return static_cast<uint32_t>(__builtin_bit_cast(uint16_t, lo)) |
         static_cast<uint32_t>(__builtin_bit_cast(uint16_t, hi)) << 16;
}

// whether any lane of the wave holds a nonzero `x` (a ballot; a template, so that targets
// that never instantiate it never look the builtin up: ptc's gfx90a build, clang-19, calls it
// undeclared)
template <typename T>
__device__ __forceinline__ bool wave_any(T x) {
  return __builtin_amdgcn_ballot_w64(x != 0) != 0;
}

template <int M_, int N_, int K_, bool A_E5M2, bool B_E5M2>
struct MfmaFnuz {
  static constexpr int M = M_, N = N_, K = K_, CREGS = M_ * N_ / 64;
  static constexpr int KPL = 8, REGS = 2;     // the gfx942 i8 atoms' operands
  static constexpr bool FNUZ = true;          // mfma_tile: quarter units, fix-ups per k-step
  static_assert((M_ == 16 && N_ == 16 && K_ == 32) || (M_ == 32 && N_ == 32 && K_ == 16),
                "MFMA FP8 16x16x32 or 32x32x16");
  // the instruction, on FNUZ codes
  __device__ __forceinline__ static void mma(float* d, const uint32_t* a, const uint32_t* b) {
    const long x = word_pair(a), y = word_pair(b);
    if constexpr (M_ == 16) {
      acc_call<f32x4, 4>(d, [&](f32x4 c) {
        if constexpr (!A_E5M2 && !B_E5M2) return __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8(x, y, c, 0, 0, 0);
        else if constexpr (!A_E5M2) return __builtin_amdgcn_mfma_f32_16x16x32_fp8_bf8(x, y, c, 0, 0, 0);
        else if constexpr (!B_E5M2) return __builtin_amdgcn_mfma_f32_16x16x32_bf8_fp8(x, y, c, 0, 0, 0);
        else return __builtin_amdgcn_mfma_f32_16x16x32_bf8_bf8(x, y, c, 0, 0, 0); });
    } else {
      acc_call<f32x16, 16>(d, [&](f32x16 c) {
        if constexpr (!A_E5M2 && !B_E5M2) return __builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8(x, y, c, 0, 0, 0);
        else if constexpr (!A_E5M2) return __builtin_amdgcn_mfma_f32_32x32x16_fp8_bf8(x, y, c, 0, 0, 0);
        else if constexpr (!B_E5M2) return __builtin_amdgcn_mfma_f32_32x32x16_bf8_fp8(x, y, c, 0, 0, 0);
        else return __builtin_amdgcn_mfma_f32_32x32x16_bf8_bf8(x, y, c, 0, 0, 0); });
    }
  }
  // one k-step of MI x NI atoms from OCP registers, the accumulators in quarter units
  template <int MI, int NI>
  __device__ __forceinline__ static void step(float* c, uint32_t (&a)[MI][REGS],
                                              uint32_t (&b)[NI][REGS]) {
    if constexpr (A_E5M2 || B_E5M2) {
      uint32_t inf = 0;
#pragma unroll
      for (int j = 0; j < REGS; ++j) {
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) inf |= A_E5M2 ? e5m2_infinities(a[mi][j]) : 0u;
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) inf |= B_E5M2 ? e5m2_infinities(b[ni][j]) : 0u;
      }
      if (wave_any(inf)) {
        widened<MI, NI>(c, a, b);
        return;
      }
    }
#pragma unroll
    for (int j = 0; j < REGS; ++j) {
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) a[mi][j] = ocp_to_fnuz<A_E5M2>(a[mi][j]);
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) b[ni][j] = ocp_to_fnuz<B_E5M2>(b[ni][j]);
    }
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) mma(c + (mi * NI + ni) * CREGS, a[mi], b[ni]);
  }
  // The k-step through f16: the f16 instruction of half the k takes 4 k per lane in the
  // same lane blocks, so word w of every lane's A and B pair the same k (k 8 (l / M) + 4 w +
  // 0..3 at the f16 instruction's k 4 (l / M) + 0..3), and the two instructions (w = 0, 1)
  // sum every k once. A's f16 values are quartered, so the products come in the quarter
  // units of the accumulator: exact, as every FP8 value over 4 is an f16 value (e5m2's
  // smallest, 2^-16, gives 2^-18, f16 subnormals reach 2^-24; infinities stay infinite).
  template <int MI, int NI>
  __device__ __forceinline__ static void widened(float* c, const uint32_t (&a)[MI][REGS],
                                                 const uint32_t (&b)[NI][REGS]) {
#pragma unroll
    for (int w = 0; w < REGS; ++w) {
      uint32_t af[MI][2], bf[NI][2];
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) af[mi][h] = f16x2_quarter(fp8x2_to_f16x2<A_E5M2>(a[mi][w], h));
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
#pragma unroll
        for (int h = 0; h < 2; ++h) bf[ni][h] = fp8x2_to_f16x2<B_E5M2>(b[ni][w], h);
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni)
          Mfma<M_, N_, K_ / 2, false>::mma(c + (mi * NI + ni) * CREGS, af[mi], bf[ni]);
    }
  }
  template <int CN>
  __device__ __forceinline__ static void scale(float* c, float by) {
#pragma unroll
    for (int i = 0; i < CN; ++i) c[i] *= by;
  }
};

// whether an instruction type runs FP8 in quarter units (MfmaFnuz::FNUZ)
template <class I, class = void>
struct Fnuz { static constexpr bool value = false; };
template <class I>
struct Fnuz<I, decltype(void(I::FNUZ))> { static constexpr bool value = I::FNUZ; };

// An LDS tile of 16-bit elements (EB = 1: of bytes): the byte address of (row, col).
template <int ROW_BYTES, bool SWIZZLE, int EB = 2>
struct SharedTile {
  static constexpr int ELEMENT_BYTES = EB;
  uint32_t base;
  __device__ __forceinline__ uint32_t at(int row, int col) const {
    return base + tile_offset<ROW_BYTES, SWIZZLE>(row, col * EB);
  }
};

// A transposed LDS tile (swizzle k8t): `at` takes stored coordinates (the tile's column
// first), as load_a / load_b do for TRANS operands.
template <int ROW_BYTES>
struct SharedTileK8 {
  static constexpr int ELEMENT_BYTES = 2;
  uint32_t base;
  __device__ __forceinline__ uint32_t at(int row, int col) const {
    return base + tile_offset_k8<ROW_BYTES>(row, col * 2);
  }
};

// a lane's KPL values, value j at `at(j)`, packed into registers (16-bit values two to a
// register, bytes four), low part first
template <class I, class Tile, class At>
__device__ __forceinline__ void gather(uint32_t* f, const Tile&, At at) {
  constexpr int EB = Tile::ELEMENT_BYTES, PER = 4 / EB;
#pragma unroll
  for (int r = 0; r < I::KPL / PER; ++r) {
    uint32_t w = 0;
#pragma unroll
    for (int j = 0; j < PER; ++j) {
      const uint32_t v = EB == 2 ? static_cast<uint32_t>(ld_shared<uint16_t>(at(r * PER + j)))
                                 : static_cast<uint32_t>(ld_shared<uint8_t>(at(r * PER + j)));
      w |= v << (8 * EB * j);
    }
    f[r] = w;
  }
}

// a lane's KPL values along a stored row, from (row, col) on: one 4- or 8-byte read
template <class I, class Tile>
__device__ __forceinline__ void read_run(uint32_t* f, const Tile& t, int row, int col) {
  if constexpr (I::KPL * Tile::ELEMENT_BYTES == 8) {
    const u32x2 v = ld_shared<u32x2>(t.at(row, col));
    f[0] = v.x;
    f[1] = v.y;
  } else {
    static_assert(I::KPL * Tile::ELEMENT_BYTES == 4, "a lane reads 4 or 8 bytes");
    f[0] = ld_shared<uint32_t>(t.at(row, col));
  }
}

// The lanes of an instruction's rows and columns: its own M and N (LM, LN), which a Narrow
// instruction keeps while its M or N is the part the atom uses
template <class I, class = void> struct Lanes {
  static constexpr int M = I::M, N = I::N;
};
template <class I> struct Lanes<I, decltype(void(I::LM))> {
  static constexpr int M = I::LM, N = I::LN;
};

// An instruction used for its first MU rows and NU columns (ptc/lower/atoms.py: narrowed):
// the lanes of the others load the same operand elements (row or column mod MU, NU), so
// the instruction computes copies of the used part there, as the fragment layouts say.
template <class I, int MU, int NU>
struct Narrow : I {
  static constexpr int M = MU, N = NU, LM = I::M, LN = I::N;
};

// the A fragment of rows m0.. and k-columns k0..; TRANS: the tile is stored [k][m]
template <class I, bool TRANS, class Tile>
__device__ __forceinline__ void load_a(uint32_t* f, const Tile& t, int m0, int k0, int lane) {
  const int row = m0 + lane % Lanes<I>::M % I::M, k = k0 + I::KPL * (lane / Lanes<I>::M);
  if constexpr (!TRANS)
    read_run<I>(f, t, row, k);
  else
    gather<I>(f, t, [&](int j) { return t.at(k + j, row); });
}

// the B fragment of k-rows k0.. and columns n0..; TRANS: the tile is stored [n][k]
template <class I, bool TRANS, class Tile>
__device__ __forceinline__ void load_b(uint32_t* f, const Tile& t, int k0, int n0, int lane) {
  const int col = n0 + lane % Lanes<I>::N % I::N, k = k0 + I::KPL * (lane / Lanes<I>::N);
  if constexpr (TRANS)
    read_run<I>(f, t, col, k);
  else
    gather<I>(f, t, [&](int j) { return t.at(k + j, col); });
}

template <int MI, int KS>
struct RegA {
  const uint32_t* r;
  template <class I>
  __device__ __forceinline__ void load(uint32_t (&a)[MI][I::REGS], int ks, int) const {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int j = 0; j < I::REGS; ++j) a[mi][j] = r[(mi * KS + ks) * I::REGS + j];
  }
};

template <int NI, int KS>
struct RegB {
  const uint32_t* r;
  template <class I>
  __device__ __forceinline__ void load(uint32_t (&b)[NI][I::REGS], int ks, int) const {
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int j = 0; j < I::REGS; ++j) b[ni][j] = r[(ni * KS + ks) * I::REGS + j];
  }
};

// i8 operands in registers (int8_t values in the atom's register order): packed on the way
template <int MI, int KS>
struct RegA8 {
  const int8_t* r;
  template <class I>
  __device__ __forceinline__ void load(uint32_t (&a)[MI][I::REGS], int ks, int) const {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int j = 0; j < I::REGS; ++j) a[mi][j] = pack_bytes(r + ((mi * KS + ks) * I::REGS + j) * 4);
  }
};

template <int NI, int KS>
struct RegB8 {
  const int8_t* r;
  template <class I>
  __device__ __forceinline__ void load(uint32_t (&b)[NI][I::REGS], int ks, int) const {
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int j = 0; j < I::REGS; ++j) b[ni][j] = pack_bytes(r + ((ni * KS + ks) * I::REGS + j) * 4);
  }
};

// rows m0 + M mi of an LDS A tile ([m][k], or [k][m] when TRANS)
template <int MI, bool TRANS, class Tile>
struct SharedA {
  Tile t;
  int m0;
  template <class I>
  __device__ __forceinline__ void load(uint32_t (&a)[MI][I::REGS], int ks, int lane) const {
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
  __device__ __forceinline__ void load(uint32_t (&b)[NI][I::REGS], int ks, int lane) const {
#pragma unroll
    for (int ni = 0; ni < NI; ++ni) load_b<I, TRANS>(b[ni], t, ks * I::K, n0 + ni * I::N, lane);
  }
};

// c += A @ B for one wave's MI x NI atoms, k-steps unrolled (C: float, or int for i8;
// FP8 on CDNA3 in quarter units between the two scalings: MfmaFnuz)
template <int MI, int NI, int KS, class I, class C, class A, class B>
__device__ __forceinline__ void mfma_tile(C* c, const A& a, const B& b, int lane) {
  if constexpr (Fnuz<I>::value) I::template scale<MI * NI * I::CREGS>(c, 0.25f);
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) {
    uint32_t af[MI][I::REGS], bf[NI][I::REGS];
    a.template load<I>(af, ks, lane);
    b.template load<I>(bf, ks, lane);
    if constexpr (Fnuz<I>::value) {
      I::template step<MI, NI>(c, af, bf);
    } else {
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) I::mma(c + (mi * NI + ni) * I::CREGS, af[mi], bf[ni]);
    }
  }
  if constexpr (Fnuz<I>::value) I::template scale<MI * NI * I::CREGS>(c, 4.0f);
}

// Read an LDS operand into A-operand registers once (loop-invariant operands).
template <class I, int MI, int KS, bool TRANS, class Tile>
__device__ __forceinline__ void load_a_fragments(uint32_t* r, const Tile& t, int m0, int lane) {
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) load_a<I, TRANS>(r + (mi * KS + ks) * I::REGS, t, m0 + mi * I::M, ks * I::K, lane);
}

template <class I, int NI, int KS, bool TRANS, class Tile>
__device__ __forceinline__ void load_b_fragments(uint32_t* r, const Tile& t, int n0, int lane) {
#pragma unroll
  for (int ni = 0; ni < NI; ++ni)
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) load_b<I, TRANS>(r + (ni * KS + ks) * I::REGS, t, ks * I::K, n0 + ni * I::N, lane);
}

}  // namespace ptc
