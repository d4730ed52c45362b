// ptc CPU emulation, shared by every backend: f16 <-> f32 as the hardware converts them
// (round to nearest even, subnormals, inf and NaN), and a table of every f16 code decoded
// once. CUDA's emulated __half (cuda/emulate/cuda_fp16.h) and HIP's emulated MFMA operands
// (hip/emulate/ptc_emulate_hip.h) both read it.
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
// of an emulated GEMM (perf; HIP's MFMA operands through libgcc's __extendhfsf2: 16%).
struct F16Table {
  float value[65536];
  F16Table() { for (uint32_t h = 0; h < 65536; ++h) value[h] = f16_bits_decode(uint16_t(h)); }
};
inline const F16Table f16_table;
inline float f16_bits_to_f32(uint16_t h) { return f16_table.value[h]; }

}}  // namespace ptc::emu
