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
// the primitives of the device code every backend shares (templates/common/ptc_numerics.h)
__device__ __forceinline__ uint32_t f32_bits(float x) { return __float_as_uint(x); }
__device__ __forceinline__ float bits_f32(uint32_t u) { return __uint_as_float(u); }
__device__ __forceinline__ float rint_f32(float x) { return rintf(x); }
__device__ __forceinline__ float fmin_f32(float a, float b) { return fminf(a, b); }
__device__ __forceinline__ float fmax_f32(float a, float b) { return fmaxf(a, b); }
#if defined(PTC_CVT_FP8) && defined(PTC_EMULATE)
// the instruction as the emulation runs it (ptc_emulate.cc: cvt_fp8, from the PTX ISA's
// rule, apart from ptc_numerics.h's bit manipulation), a NaN keeping its sign
__device__ __forceinline__ uint32_t cvt_e4m3x2(float a, float b) {
  return ::ptc::emu::cvt_fp8(a, false) | (::ptc::emu::cvt_fp8(b, false) << 8);
}
__device__ __forceinline__ uint32_t cvt_e5m2x2(float a, float b) {
  return ::ptc::emu::cvt_fp8(a, true) | (::ptc::emu::cvt_fp8(b, true) << 8);
}
#elif defined(PTC_CVT_FP8)
// FP8 codes by the instruction (sm89+; the kernel defines PTC_CVT_FP8 where the lowering
// chose it, LoweredKernel.fp8_cvt): cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 converts two f32
// (the second source into the low byte) to nearest even, saturating to the largest finite
// value -- the language's rule (docs/language.md). The PTX ISA does not say which NaN it
// gives, so ptc_numerics.h makes every NaN code 0x7F after it; the emulation's cvt keeps
// the NaN's sign, so that the fix-up is what gives 0x7F there too. cvt_*x2(a, b): a's
// code in the low byte, b's in the next.
__device__ __forceinline__ uint32_t cvt_e4m3x2(float a, float b) {
  uint16_t r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(b), "f"(a));
  return r;
}
__device__ __forceinline__ uint32_t cvt_e5m2x2(float a, float b) {
  uint16_t r;
  asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(b), "f"(a));
  return r;
}
#endif
}  // namespace ptc
#include "ptc_numerics.h"

namespace ptc {

// The blocks per SM the vector variant's __launch_bounds__ asks ptxas to keep resident:
// the lowering's count (0: ptxas's own choice) and, on the build's retries where ptxas
// spilled (PTC_REGISTER_TRY in kernel.cu, ptc.runtime.build), the plan's count, then one.
constexpr int tried_min_blocks(int lowered, int planned, int attempt) {
  return attempt == 0 ? lowered : attempt == 1 ? planned : 1;
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

__device__ __forceinline__ float f32(__half x) { return __half2float(x); }
__device__ __forceinline__ float f32(__nv_bfloat16 x) { return __bfloat162float(x); }

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

template <> __device__ __forceinline__ __half from_f32<__half>(float x) {
  PTC_IN_FLIGHT_F32(x);
  return __float2half_rn(x);
}
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) {
  PTC_IN_FLIGHT_F32(x);
  return __float2bfloat16_rn(x);
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

__device__ __forceinline__ float rsqrt_(float x) { return 1.0f / sqrtf(x); }
__device__ __forceinline__ float sigmoid_(float x) { return 1.0f / (1.0f + expf(-x)); }

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

// 16-bit register tiles hold two values per 32-bit register, the lower index in the low half
// (unpack and set_half: ptc_numerics.h).
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
template <> struct Bias16<__half> { static constexpr uint32_t pair = 0x64006400u; };
template <> struct Bias16<__nv_bfloat16> { static constexpr uint32_t pair = 0x43004300u; };
// nibble S / 4 of two words, biased: byte S / 8 of w0 and of w1 into the word's halves
// (PRMT), shifted down where the nibble is the byte's high half, masked and biased (LOP3)
template <typename T, int S> __device__ __forceinline__ uint32_t nibbles16(uint32_t w0, uint32_t w1) {
  static_assert(S % 4 == 0 && S >= 0 && S < 32, "a nibble starts at a multiple of 4 bits");
  constexpr uint32_t b = S / 8;
  uint32_t t = __byte_perm(w0, w1, b | (b << 4) | ((4u + b) << 8) | ((4u + b) << 12));
  if (S % 8 == 4) t >>= 4;
#ifdef PTC_EMULATE
  return (t & 0x000f000fu) | Bias16<T>::pair;
#else
  // one LOP3 for the mask and the bias: left to the compiler, (t & m) | b was two
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(r) : "r"(t), "n"(0x000f000fu), "n"(Bias16<T>::pair));
  return r;
#endif
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

}  // namespace ptc
