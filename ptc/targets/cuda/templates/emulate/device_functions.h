// ptc CPU emulation: CUDA's warp intrinsics and the device math functions that the host's
// <cmath> lacks, for the host compiler (g++ -DPTC_EMULATE; included by cuda_runtime.h).
//
// Warp shuffles, votes and __syncwarp are warp collectives (ptc_emulate.h): every lane of
// the warp must take part, with the mask 0xffffffff; anything else is reported. The fast
// math intrinsics (__expf, __fdividef, ...) compute the IEEE result, which is within the
// error bounds CUDA documents for them.
#pragma once
#include <cmath>
#include <cstring>

#include "ptc_emulate.h"

// ---- warp shuffles, votes ---------------------------------------------------------------
template <typename T>
inline T __shfl_sync(unsigned mask, T var, int srcLane, int width = 32) {
  return ptc::emu::shfl(ptc::emu::SHFL_IDX, mask, var, static_cast<unsigned>(srcLane), width,
                        "__shfl_sync");
}
template <typename T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  return ptc::emu::shfl(ptc::emu::SHFL_UP, mask, var, delta, width, "__shfl_up_sync");
}
template <typename T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  return ptc::emu::shfl(ptc::emu::SHFL_DOWN, mask, var, delta, width, "__shfl_down_sync");
}
template <typename T>
inline T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = 32) {
  return ptc::emu::shfl(ptc::emu::SHFL_BFLY, mask, var, static_cast<unsigned>(laneMask), width,
                        "__shfl_xor_sync");
}
inline unsigned __ballot_sync(unsigned mask, int pred) {
  return ptc::emu::ballot(mask, pred != 0, "__ballot_sync");
}
inline int __all_sync(unsigned mask, int pred) {
  return ptc::emu::ballot(mask, pred != 0, "__all_sync") == 0xffffffffu;
}
inline int __any_sync(unsigned mask, int pred) {
  return ptc::emu::ballot(mask, pred != 0, "__any_sync") != 0u;
}
inline void __syncwarp(unsigned mask = 0xffffffffu) { ptc::emu::syncwarp(mask); }

// ---- float intrinsics -------------------------------------------------------------------
inline float __expf(float x) { return expf(x); }
inline float __exp10f(float x) { return powf(10.0f, x); }
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __log10f(float x) { return log10f(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline void __sincosf(float x, float* s, float* c) { *s = sinf(x); *c = cosf(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __fdividef(float x, float y) { return x / y; }
inline float fdividef(float x, float y) { return x / y; }
inline float __saturatef(float x) { return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; }  // NaN -> 0
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __fdiv_rn(float x, float y) { return x / y; }
inline float __fadd_rn(float x, float y) { return x + y; }
inline float __fsub_rn(float x, float y) { return x - y; }
inline float __fmul_rn(float x, float y) { return x * y; }
inline float __fmaf_rn(float x, float y, float z) { return fmaf(x, y, z); }

// ---- bit casts and integer intrinsics -----------------------------------------------------
inline int __float_as_int(float x) { int i; memcpy(&i, &x, 4); return i; }
inline unsigned __float_as_uint(float x) { unsigned u; memcpy(&u, &x, 4); return u; }
inline float __int_as_float(int i) { float x; memcpy(&x, &i, 4); return x; }
inline float __uint_as_float(unsigned u) { float x; memcpy(&x, &u, 4); return x; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) {
  return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x));
}
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}
// prmt.b32 (default mode): byte n of the result is byte s<4n+2:4n> of the eight bytes
// {y, x} (x the low four); the selectors' fourth bits are not used
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const unsigned long long bytes = (static_cast<unsigned long long>(y) << 32) | x;
  unsigned out = 0;
  for (int n = 0; n < 4; ++n)
    out |= static_cast<unsigned>((bytes >> (8 * ((s >> (4 * n)) & 7u))) & 0xffu) << (8 * n);
  return out;
}
inline int __mul24(int x, int y) {
  return static_cast<int>((static_cast<long long>(x) << 40 >> 40) *
                          (static_cast<long long>(y) << 40 >> 40));
}
inline unsigned __umul24(unsigned x, unsigned y) { return (x & 0xffffffu) * (y & 0xffffffu); }
inline int __mulhi(int x, int y) {
  return static_cast<int>((static_cast<long long>(x) * y) >> 32);
}
inline unsigned __umulhi(unsigned x, unsigned y) {
  return static_cast<unsigned>((static_cast<unsigned long long>(x) * y) >> 32);
}

// read-only global loads: bounds-checked like the helpers' global accesses
template <typename T> inline T __ldg(const T* p) { return *ptc::emu::global_access(p); }
