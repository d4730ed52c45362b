// ptc device helpers: element types, rounding and integer semantics of the .pt language.
// Values are computed in f32 and rounded once to their dtype, as the reference interpreter
// does; // and % floor (Python semantics).
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

// Global-memory accesses of the helpers go through PTC_GLOBAL(pointer): the identity on the
// GPU, a bounds check against the caller's tensors in the CPU emulation (emulate/).
#ifdef PTC_EMULATE
#include <source_location>
#include "ptc_emulate.h"
#define PTC_GLOBAL(p) (::ptc::emu::global_access(p))
#else
#define PTC_GLOBAL(p) (p)
#endif

#ifndef PTC_EMULATE
// the block's dynamic shared memory (in the CPU emulation: ptc_emulate.h's array)
extern __shared__ __align__(1024) unsigned char ptc_smem[];
#endif

// In the emulation, a conversion reports a value read from the registers of a wgmma in
// flight (ptc_emulate_sm90.h: they hold a marker until the wgmma.wait_group).
#ifdef PTC_EMULATE
#define PTC_IN_FLIGHT_F32(x) ::ptc::emu::check_f32((x), "a conversion to 16 bits")
#define PTC_IN_FLIGHT_B16(h) ::ptc::emu::check_b16((h), "a conversion from 16 bits")
#else
#define PTC_IN_FLIGHT_F32(x) ((void)0)
#define PTC_IN_FLIGHT_B16(h) ((void)0)
#endif

namespace ptc {

// first <= i < left: the rows or columns of a tile that lie inside the tensor. `first` is
// 0 but for an offset tile that starts before the tensor; a caller that passes no firsts
// (a literal 0) gets `i < left` alone, the code of copies before offset tiles.
__device__ __forceinline__ bool inside(int i, int first, int left) {
  return (first == 0 || i >= first) && i < left;
}

// Shared addresses are 32-bit offsets from here (0 in the emulation).
__device__ __forceinline__ uint32_t shared_base() {
  return static_cast<uint32_t>(__cvta_generic_to_shared(ptc_smem));
}

// Loads and stores at shared addresses; in the emulation through shared_access.cuh's door
// (bounds, alignment and bank conflicts, counted per calling line).
#ifdef PTC_EMULATE
template <typename T>
__device__ __forceinline__ T ld_shared(uint32_t addr,
                                       std::source_location where = std::source_location::current()) {
  return ::ptc::emu::shared_load(reinterpret_cast<const T*>(ptc_smem + addr), where);
}
template <typename T>
__device__ __forceinline__ void st_shared(uint32_t addr, T v,
                                          std::source_location where = std::source_location::current()) {
  ::ptc::emu::shared_store(reinterpret_cast<T*>(ptc_smem + addr), v, where);
}
#else
template <typename T> __device__ __forceinline__ T ld_shared(uint32_t addr) {
  return *reinterpret_cast<const T*>(ptc_smem + (addr - shared_base()));
}
template <typename T> __device__ __forceinline__ void st_shared(uint32_t addr, T v) {
  *reinterpret_cast<T*>(ptc_smem + (addr - shared_base())) = v;
}
#endif

__host__ __device__ inline long long tiles(long long extent, long long size) {
  return extent <= 0 ? 0 : (extent + size - 1) / size;
}

// FP8 (OCP), one byte of storage; arithmetic happens in f32 (docs/language.md, rule 9).
// f8e4m3 is E4M3FN: bias 7, no infinities, NaN = S.1111.111, largest 448; f8e5m2 is E5M2:
// bias 15, IEEE infinities and NaNs, largest 57344. The conversions are ptc's own bit
// manipulation, the same on every target and in the CPU emulation (no cuda_fp8.h, which
// sm80 and HIP lack): to FP8 as cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 -- nearest even;
// beyond the largest finite value, infinities included, that value with the sign; NaN of
// either sign -> 0x7F --, from FP8 to f32 exactly.
struct f8e4m3 { uint8_t bits; };
struct f8e5m2 { uint8_t bits; };

// the code of f32 `x` in an FP8 format of MAN mantissa bits and exponent bias BIAS whose
// largest finite value is MAX_F32 (as f32 bits), coded MAX_CODE
template <int MAN, int BIAS, uint32_t MAX_F32, uint32_t MAX_CODE>
__device__ __forceinline__ uint8_t fp8_code(float x) {
  const uint32_t u = __float_as_uint(x);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t mag = u & 0x7fffffffu;
  if (mag > 0x7f800000u) return 0x7fu;                                 // NaN
  if (mag >= MAX_F32) return static_cast<uint8_t>(sign | MAX_CODE);    // satfinite
  uint32_t code;
  if (mag < ((128u - BIAS) << 23)) {
    // below the smallest normal, 2^(1-BIAS): a multiple of 2^(1-BIAS-MAN), to nearest even
    // (rintf); the scaling by a power of two is exact, and the multiple 2^MAN is the
    // smallest normal's code
    const float scale = __uint_as_float((127u + BIAS + MAN - 1u) << 23);
    code = static_cast<uint32_t>(rintf(__uint_as_float(mag) * scale));
  } else {
    // drop 23 - MAN mantissa bits, to nearest even (a carry moves into the exponent), and
    // rebias the exponent
    code = (mag + ((1u << (22 - MAN)) - 1u) + ((mag >> (23 - MAN)) & 1u)) >> (23 - MAN);
    code -= (127u - BIAS) << MAN;
  }
  return static_cast<uint8_t>(sign | code);
}
__device__ __forceinline__ f8e4m3 to_f8e4m3(float x) {
  PTC_IN_FLIGHT_F32(x);
  return f8e4m3{fp8_code<3, 7, 0x43e00000u, 0x7eu>(x)};       // 448 = 0x7e
}
__device__ __forceinline__ f8e5m2 to_f8e5m2(float x) {
  PTC_IN_FLIGHT_F32(x);
  return f8e5m2{fp8_code<2, 15, 0x47600000u, 0x7bu>(x)};      // 57344 = 0x7b
}
__device__ __forceinline__ float f32(f8e4m3 x) {
  const uint32_t sign = static_cast<uint32_t>(x.bits & 0x80u) << 24, mag = x.bits & 0x7fu;
  if (mag == 0x7fu) return __uint_as_float(sign | 0x7fc00000u);                  // NaN
  if (mag < 8u) return __uint_as_float(sign | __float_as_uint(static_cast<float>(mag) * 0x1p-9f));
  return __uint_as_float(sign | ((mag + (120u << 3)) << 20));
}
__device__ __forceinline__ float f32(f8e5m2 x) {
  const uint32_t sign = static_cast<uint32_t>(x.bits & 0x80u) << 24, mag = x.bits & 0x7fu;
  if (mag >= 0x7cu) return __uint_as_float(sign | 0x7f800000u | (mag > 0x7cu ? 0x400000u : 0u));
  if (mag < 4u) return __uint_as_float(sign | __float_as_uint(static_cast<float>(mag) * 0x1p-16f));
  return __uint_as_float(sign | ((mag + (112u << 2)) << 21));
}
__device__ __forceinline__ float round_f8e4m3(float x) { return f32(to_f8e4m3(x)); }
__device__ __forceinline__ float round_f8e5m2(float x) { return f32(to_f8e5m2(x)); }

__device__ __forceinline__ float f32(float x) { return x; }
__device__ __forceinline__ float f32(__half x) { return __half2float(x); }
__device__ __forceinline__ float f32(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float f32(int x) { return static_cast<float>(x); }
__device__ __forceinline__ float f32(int8_t x) { return static_cast<float>(x); }
__device__ __forceinline__ float f32(uint8_t x) { return static_cast<float>(x); }
__device__ __forceinline__ float f32(long long x) { return static_cast<float>(x); }
__device__ __forceinline__ float f32(bool x) { return x ? 1.0f : 0.0f; }

// round an f32 value to the precision of a dtype, staying in f32
__device__ __forceinline__ float round_f16(float x) {
  PTC_IN_FLIGHT_F32(x);
  return __half2float(__float2half_rn(x));
}
__device__ __forceinline__ float round_bf16(float x) {
  PTC_IN_FLIGHT_F32(x);
  return __bfloat162float(__float2bfloat16_rn(x));
}
// TF32: 10 mantissa bits, to nearest with ties away from zero (cvt.rna.tf32.f32); the low
// 13 bits cleared, so the f32 holds exactly the value the tensor core multiplies
__device__ __forceinline__ float round_tf32(float x) {
#ifdef PTC_EMULATE
  uint32_t u = __float_as_uint(x);
  if ((u & 0x7f800000u) != 0x7f800000u) u += 0x1000u;
#else
  uint32_t u;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(u) : "f"(x));
#endif
  return __uint_as_float(u & 0xffffe000u);
}

// i8 and u8 from f32 as cvt.rni.sat.{s8,u8}.f32: to nearest even, saturating, NaN -> 0;
// from integers, saturating (docs/language.md, "Numerics")
template <int LO, int HI> __device__ __forceinline__ int narrow(float x) {
  return x != x ? 0 : static_cast<int>(rintf(fminf(fmaxf(x, (float)LO), (float)HI)));
}
template <int LO, int HI> __device__ __forceinline__ int narrow(int x) {
  return x < LO ? LO : (x > HI ? HI : x);
}
__device__ __forceinline__ int8_t to_i8(float x) { return static_cast<int8_t>(narrow<-128, 127>(x)); }
__device__ __forceinline__ int8_t to_i8(int x) { return static_cast<int8_t>(narrow<-128, 127>(x)); }
__device__ __forceinline__ uint8_t to_u8(float x) { return static_cast<uint8_t>(narrow<0, 255>(x)); }
__device__ __forceinline__ uint8_t to_u8(int x) { return static_cast<uint8_t>(narrow<0, 255>(x)); }

template <typename T> __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f32<__half>(float x) {
  PTC_IN_FLIGHT_F32(x);
  return __float2half_rn(x);
}
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) {
  PTC_IN_FLIGHT_F32(x);
  return __float2bfloat16_rn(x);
}
template <> __device__ __forceinline__ int from_f32<int>(float x) { return static_cast<int>(x); }
template <> __device__ __forceinline__ bool from_f32<bool>(float x) { return x != 0.0f; }
template <> __device__ __forceinline__ int8_t from_f32<int8_t>(float x) { return to_i8(x); }
template <> __device__ __forceinline__ uint8_t from_f32<uint8_t>(float x) { return to_u8(x); }
// a value of the FP8 dtype (rounded already) as its code; f8e5m2 keeps its infinities
template <> __device__ __forceinline__ f8e4m3 from_f32<f8e4m3>(float x) { return to_f8e4m3(x); }
template <> __device__ __forceinline__ f8e5m2 from_f32<f8e5m2>(float x) {
  const uint32_t u = __float_as_uint(x);
  return (u & 0x7fffffffu) == 0x7f800000u ? f8e5m2{static_cast<uint8_t>(((u >> 24) & 0x80u) | 0x7cu)}
                                          : to_f8e5m2(x);
}

// 16-bit arithmetic in 16 bits (the renderer's `native16`): the .rn forms, which ptxas
// never contracts into an fma. Each equals the interpreter's f32 operation rounded once to
// 16 bits: the f32 sum, difference or product of two 16-bit values rounds to 16 bits as
// the exact one does (24 >= 2 * 11 + 2 bits), so the emulation computes it that way.
#ifdef PTC_EMULATE
template <typename T> __device__ __forceinline__ T add_rn(T a, T b) { return from_f32<T>(float(a) + float(b)); }
template <typename T> __device__ __forceinline__ T sub_rn(T a, T b) { return from_f32<T>(float(a) - float(b)); }
template <typename T> __device__ __forceinline__ T mul_rn(T a, T b) { return from_f32<T>(float(a) * float(b)); }
template <typename T> __device__ __forceinline__ T from_int(int x) { return from_f32<T>(static_cast<float>(x)); }
template <typename T> __device__ __forceinline__ T from_short(short x) { return from_int<T>(x); }
#else
template <typename T> __device__ __forceinline__ T add_rn(T a, T b) { return __hadd_rn(a, b); }
template <typename T> __device__ __forceinline__ T sub_rn(T a, T b) { return __hsub_rn(a, b); }
template <typename T> __device__ __forceinline__ T mul_rn(T a, T b) { return __hmul_rn(a, b); }
template <typename T> __device__ __forceinline__ T from_int(int x);
template <> __device__ __forceinline__ __half from_int<__half>(int x) { return __int2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_int<__nv_bfloat16>(int x) {
  return __int2bfloat16_rn(x);
}
// an integer the renderer knows fits 16 bits (ptc.sema.ranges): cvt.rn.f16.s16
template <typename T> __device__ __forceinline__ T from_short(short x);
template <> __device__ __forceinline__ __half from_short<__half>(short x) { return __short2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_short<__nv_bfloat16>(short x) {
  return __short2bfloat16_rn(x);
}
#endif
// a 16-bit value from its bits (a literal), and any value as a 16-bit one: itself, or a
// float that holds a value of the dtype already
template <typename T> __device__ __forceinline__ T from_bits(uint16_t b) {
  T x;
  memcpy(&x, &b, 2);
  return x;
}
template <typename T> __device__ __forceinline__ T as16(T x) { return x; }
template <typename T> __device__ __forceinline__ T as16(float x) { return from_f32<T>(x); }

__host__ __device__ __forceinline__ long long floordiv(long long a, long long b) {
  long long q = a / b;
  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
__host__ __device__ __forceinline__ long long floormod(long long a, long long b) {
  long long r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
__device__ __forceinline__ float rsqrt_(float x) { return 1.0f / sqrtf(x); }
__device__ __forceinline__ float sigmoid_(float x) { return 1.0f / (1.0f + expf(-x)); }

// shifts of i32 as the language defines them on every target: << wraps, >> is arithmetic,
// and an amount outside 0..31 shifts every bit out (PTX clamps it to 32; C leaves it
// undefined)
__host__ __device__ __forceinline__ int shift_left(int a, int b) {
  return static_cast<unsigned>(b) < 32u ? static_cast<int>(static_cast<unsigned>(a) << b) : 0;
}
__host__ __device__ __forceinline__ int shift_right(int a, int b) {
  return a >> (static_cast<unsigned>(b) < 32u ? b : 31);
}

// exp2 and exp on the SFU (docs/language.md, "Numerics"): one ex2.approx.ftz.f32 (MUFU.EX2),
// and for exp a multiply by log2(e) before it -- what the cost model counts, and what
// CUDA's __expf is. Results below 2^-126 flush to zero; exp2(-inf) is 0.
__device__ __forceinline__ float exp2_sfu(float x) {
#ifdef PTC_EMULATE
  const float y = exp2f(x);
  return y < 1.17549435e-38f ? 0.0f : y;
#else
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#endif
}
__device__ __forceinline__ float exp_sfu(float x) { return exp2_sfu(x * 1.4426950408889634f); }

// 16-bit register tiles hold two values per 32-bit register, the lower index in the low half.
template <typename T> struct Half16;
template <> struct Half16<__half> {
  __device__ __forceinline__ static float lo(uint32_t r) {
    PTC_IN_FLIGHT_B16(static_cast<uint16_t>(r & 0xffffu));
    return __half2float(__ushort_as_half(static_cast<unsigned short>(r & 0xffffu)));
  }
  __device__ __forceinline__ static float hi(uint32_t r) {
    PTC_IN_FLIGHT_B16(static_cast<uint16_t>(r >> 16));
    return __half2float(__ushort_as_half(static_cast<unsigned short>(r >> 16)));
  }
  __device__ __forceinline__ static uint32_t pack(float a, float b) {
    PTC_IN_FLIGHT_F32(a);
    PTC_IN_FLIGHT_F32(b);
    return static_cast<uint32_t>(__half_as_ushort(__float2half_rn(a))) |
           (static_cast<uint32_t>(__half_as_ushort(__float2half_rn(b))) << 16);
  }
  __device__ __forceinline__ static uint32_t one(float a) {
    PTC_IN_FLIGHT_F32(a);
    return __half_as_ushort(__float2half_rn(a));
  }
};
template <> struct Half16<__nv_bfloat16> {
  __device__ __forceinline__ static float lo(uint32_t r) {
    PTC_IN_FLIGHT_B16(static_cast<uint16_t>(r & 0xffffu));
    return __uint_as_float(r << 16);
  }
  __device__ __forceinline__ static float hi(uint32_t r) {
    PTC_IN_FLIGHT_B16(static_cast<uint16_t>(r >> 16));
    return __uint_as_float(r & 0xffff0000u);
  }
  __device__ __forceinline__ static uint32_t pack(float a, float b) {
    PTC_IN_FLIGHT_F32(a);
    PTC_IN_FLIGHT_F32(b);
    return static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(a))) |
           (static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(b))) << 16);
  }
  __device__ __forceinline__ static uint32_t one(float a) {
    PTC_IN_FLIGHT_F32(a);
    return __bfloat16_as_ushort(__float2bfloat16_rn(a));
  }
};
// two 16-bit values, or one, as the register word of a packed tile
template <typename T> __device__ __forceinline__ uint32_t pack16(T a, T b) {
  uint16_t lo, hi;
  memcpy(&lo, &a, 2);
  memcpy(&hi, &b, 2);
  PTC_IN_FLIGHT_B16(lo);
  PTC_IN_FLIGHT_B16(hi);
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}
template <typename T> __device__ __forceinline__ uint32_t one16(T a) { return pack16(a, a) & 0xffffu; }
// value i of a packed tile as its own 16-bit type: its bits, no trip through f32
template <typename T> __device__ __forceinline__ T half_at(const uint32_t* v, int i) {
  const uint16_t bits = static_cast<uint16_t>((i & 1) ? v[i >> 1] >> 16 : v[i >> 1]);
  PTC_IN_FLIGHT_B16(bits);
  return from_bits<T>(bits);
}

// ---- 16-bit values a register at a time (ir.Compute.pairs, ptc/lower/pairs.py) ------------
// An integer a in 0..1023 is the f16 with the bits 0x6400 | a, less 1024.0 (the mantissa
// holds a exactly); a in 0..127 is the bf16 0x4300 | a, less 128.0. Two such integers are
// one register word with a shift and an or.
template <typename T> struct Bias16;
template <> struct Bias16<__half> { static constexpr uint32_t pair = 0x64006400u; };
template <> struct Bias16<__nv_bfloat16> { static constexpr uint32_t pair = 0x43004300u; };
template <typename T> __device__ __forceinline__ uint32_t biased16(uint32_t a0, uint32_t a1) {
  return a0 | (a1 << 16) | Bias16<T>::pair;
}
// nibble S / 4 of two words, biased: byte S / 8 of w0 and of w1 into the word's halves
// (PRMT), shifted down where the nibble is the byte's high half, masked and biased (LOP3)
template <typename T, int S> __device__ __forceinline__ uint32_t nibbles16(uint32_t w0, uint32_t w1) {
  static_assert(S % 4 == 0 && S >= 0 && S < 32, "a nibble starts at a multiple of 4 bits");
  constexpr uint32_t b = S / 8;
  uint32_t t = __byte_perm(w0, w1, b | (b << 4) | ((4u + b) << 8) | ((4u + b) << 12));
  if (S % 8 == 4) t >>= 4;
  return (t & 0x000f000fu) | Bias16<T>::pair;
}
// + - * of two pairs (HADD2 / HMUL2 and their bf16 forms, .rn: each half rounded once, as
// add_rn etc.)
#ifdef PTC_EMULATE
}  // namespace ptc
#include "ptc_emulate_pairs.h"
namespace ptc {
#else
template <typename T> struct Pair16;
template <> struct Pair16<__half> { using type = __half2; };
template <> struct Pair16<__nv_bfloat16> { using type = __nv_bfloat162; };
template <typename T> __device__ __forceinline__ typename Pair16<T>::type pair_of(uint32_t w) {
  typename Pair16<T>::type x;
  memcpy(&x, &w, 4);
  return x;
}
template <typename P> __device__ __forceinline__ uint32_t word_of(P x) {
  uint32_t w;
  memcpy(&w, &x, 4);
  return w;
}
template <typename T> __device__ __forceinline__ uint32_t pk_add(uint32_t a, uint32_t b) {
  return word_of(__hadd2_rn(pair_of<T>(a), pair_of<T>(b)));
}
template <typename T> __device__ __forceinline__ uint32_t pk_sub(uint32_t a, uint32_t b) {
  return word_of(__hsub2_rn(pair_of<T>(a), pair_of<T>(b)));
}
template <typename T> __device__ __forceinline__ uint32_t pk_mul(uint32_t a, uint32_t b) {
  return word_of(__hmul2_rn(pair_of<T>(a), pair_of<T>(b)));
}
#endif
template <typename T> __device__ __forceinline__ float unpack(const uint32_t* v, int i) {
  return (i & 1) ? Half16<T>::hi(v[i >> 1]) : Half16<T>::lo(v[i >> 1]);
}
template <typename T> __device__ __forceinline__ void set_half(uint32_t* v, int i, float x) {
  const uint32_t b = Half16<T>::one(x);
  v[i >> 1] = (i & 1) ? ((v[i >> 1] & 0xffffu) | (b << 16)) : ((v[i >> 1] & 0xffff0000u) | b);
}

}  // namespace ptc
