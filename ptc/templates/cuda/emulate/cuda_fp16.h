// ptc CPU emulation: __half for the host compiler (g++ -DPTC_EMULATE), with the same
// conversions as CUDA's cuda_fp16.h: round to nearest even, subnormals, inf and NaN.
#pragma once
#include <stdint.h>
#include <string.h>

namespace ptc { namespace emu {
inline uint32_t float_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
inline float bits_float(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

// f32 -> f16, round to nearest even (Giesen's float_to_half_fast3_rtne)
inline uint16_t f32_to_f16_bits(float f) {
  const uint32_t f32infty = 255u << 23, f16max = (127u + 16u) << 23;
  const uint32_t denorm_magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  uint32_t x = float_bits(f);
  const uint32_t sign = x & 0x80000000u;
  x ^= sign;
  uint16_t o;
  if (x >= f16max) {                       // overflow to inf, or NaN
    o = (x > f32infty) ? uint16_t(0x7fffu) : uint16_t(0x7c00u);  // NaN: canonical, as cvt.rn.f16.f32
  } else if (x < (113u << 23)) {           // subnormal or zero: let the FPU round
    const float r = bits_float(x) + bits_float(denorm_magic);
    o = uint16_t(float_bits(r) - denorm_magic);
  } else {                                 // normal
    const uint32_t mant_odd = (x >> 13) & 1u;
    x += (uint32_t(15 - 127) << 23) + 0xfffu;
    x += mant_odd;
    o = uint16_t(x >> 13);
  }
  return uint16_t(o | (sign >> 16));
}

inline float f16_bits_decode(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  uint32_t out;
  if (exp == 0x1f) {
    out = sign | 0x7f800000u | (mant << 13);
  } else if (exp == 0) {
    if (mant == 0) {
      out = sign;
    } else {                               // subnormal: normalise
      int e = -1;
      do { mant <<= 1; ++e; } while ((mant & 0x400u) == 0);
      out = sign | (uint32_t(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else {
    out = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return bits_float(out);
}

// Every f16 code decoded once, when the emulated kernel is loaded: the emulated tensor cores
// convert each operand element each lane reads, and the decode above per element was 11-14%
// of an emulated GEMM (perf).
struct F16Table {
  float value[65536];
  F16Table() { for (uint32_t h = 0; h < 65536; ++h) value[h] = f16_bits_decode(uint16_t(h)); }
};
inline const F16Table f16_table;
inline float f16_bits_to_f32(uint16_t h) { return f16_table.value[h]; }

// mul.rn.f16x2 of both halves of x by a float (rounded as the instruction rounds: the
// product in f32 is exact for f16 inputs times a power of two, then rounded to f16)
inline uint32_t f16x2_scale(uint32_t x, float by) {
  const uint16_t lo = f32_to_f16_bits(f16_bits_to_f32(uint16_t(x & 0xffffu)) * by);
  const uint16_t hi = f32_to_f16_bits(f16_bits_to_f32(uint16_t(x >> 16)) * by);
  return uint32_t(lo) | uint32_t(hi) << 16;
}
}}  // namespace ptc::emu

struct __half {
  uint16_t __x;
  __half() = default;
  __half(float f) : __x(ptc::emu::f32_to_f16_bits(f)) {}
  operator float() const { return ptc::emu::f16_bits_to_f32(__x); }
};
static_assert(sizeof(__half) == 2, "__half is 16 bits");

inline __half __float2half_rn(float f) { __half h; h.__x = ptc::emu::f32_to_f16_bits(f); return h; }
inline __half __float2half(float f) { return __float2half_rn(f); }
inline float __half2float(__half h) { return ptc::emu::f16_bits_to_f32(h.__x); }
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline __half __ushort_as_half(unsigned short u) { __half h; h.__x = u; return h; }
