// ptc CPU emulation: __nv_bfloat16 for the host compiler, round to nearest even as CUDA.
#pragma once
#include "cuda_fp16.h"

namespace ptc { namespace emu {
inline uint16_t f32_to_bf16_bits(float f) {
  const uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);  // quiet NaN
  return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
inline float bf16_bits_to_f32(uint16_t b) { return bits_float(uint32_t(b) << 16); }
}}  // namespace ptc::emu

struct __nv_bfloat16 {
  uint16_t __x;
  __nv_bfloat16() = default;
  __nv_bfloat16(float f) : __x(ptc::emu::f32_to_bf16_bits(f)) {}
  operator float() const { return ptc::emu::bf16_bits_to_f32(__x); }
};
static_assert(sizeof(__nv_bfloat16) == 2, "__nv_bfloat16 is 16 bits");

inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  __nv_bfloat16 b; b.__x = ptc::emu::f32_to_bf16_bits(f); return b;
}
inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
inline float __bfloat162float(__nv_bfloat16 b) { return ptc::emu::bf16_bits_to_f32(b.__x); }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.__x; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { __nv_bfloat16 b; b.__x = u; return b; }
