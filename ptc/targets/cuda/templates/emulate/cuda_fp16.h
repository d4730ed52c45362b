// ptc CPU emulation: __half for the host compiler (g++ -DPTC_EMULATE), with the same
// conversions as CUDA's cuda_fp16.h: round to nearest even, subnormals, inf and NaN.
#pragma once
#include <stdint.h>
#include <string.h>

#include "ptc_emulate_half.h"

namespace ptc { namespace emu {
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
