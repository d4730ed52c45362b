// Wave64 cross-lane exchanges and row reductions (docs/hip.md, "Cross-lane").
// Sum reductions over 4 / 16 / 32 / 64 lanes; the result ends in every lane of the group.
#include "prelude.h"

using namespace ptc;

// DPP controls (GFX9 DPP16 encoding, LLVM AMDGPUUsage / SIDefines.h DppCtrl)
enum : int {
  DPP_QUAD_XOR1 = 0xB1,        // quad_perm:[1,0,3,2]
  DPP_QUAD_XOR2 = 0x4E,        // quad_perm:[2,3,0,1]
  DPP_ROW_SHR1 = 0x111,        // row_shr:1   (0x110 + n, n = 1..15; row_shl 0x100 + n)
  DPP_ROW_ROR4 = 0x124,        // row_ror:4   (0x120 + n)
  DPP_ROW_MIRROR = 0x140,      // lane i <- lane 15 - i within each row of 16
  DPP_ROW_HALF_MIRROR = 0x141, // lane i <- lane 7 - i within each half row of 8
  DPP_ROW_BCAST15 = 0x142,     // lane 15 of each row -> the next row (GFX8/9 only)
  DPP_ROW_BCAST31 = 0x143,     // lane 31 -> rows 2 and 3 (GFX8/9 only)
};

PTC_DEVICE float as_f(int x) { return __builtin_bit_cast(float, x); }
PTC_DEVICE int as_i(float x) { return __builtin_bit_cast(int, x); }

template <int CTRL>
PTC_DEVICE float dpp(float v) {   // row_mask = bank_mask = 0xF, bound_ctrl: read 0 if invalid
  return as_f(__builtin_amdgcn_update_dpp(0, as_i(v), CTRL, 0xF, 0xF, true));
}
// ds_swizzle bit mode (offset bit 15 = 0): lane' = ((lane & and) | or) ^ xor, 5-bit masks,
// within each group of 32 lanes: offset = xor << 10 | or << 5 | and
template <int XOR>
PTC_DEVICE float swizzle_xor(float v) {
  return as_f(__builtin_amdgcn_ds_swizzle(as_i(v), (XOR << 10) | 0x1F));
}
// ds_bpermute: lane l reads lane addr/4 of the source (any lane of the wave)
PTC_DEVICE float bpermute_xor(float v, int mask) {
  return as_f(__builtin_amdgcn_ds_bpermute((lane_id() ^ mask) << 2, as_i(v)));
}

// within quads (the 4 lanes of one quad_perm), two DPP adds
PTC_DEVICE float sum4(float v) {
  v += dpp<DPP_QUAD_XOR1>(v);
  return v + dpp<DPP_QUAD_XOR2>(v);
}
// within rows of 16: quads, then half-mirror (the other quad of 8), then mirror (the other
// 8 of 16); every lane of the row ends with the row's sum
PTC_DEVICE float sum16(float v) {
  v = sum4(v);
  v += dpp<DPP_ROW_HALF_MIRROR>(v);
  return v + dpp<DPP_ROW_MIRROR>(v);
}
PTC_DEVICE float sum32(float v) { v = sum16(v); return v + swizzle_xor<16>(v); }
PTC_DEVICE float sum64(float v) { v = sum32(v); return v + bpermute_xor(v, 32); }

#define REDUCE(NAME, EXPR)                                                      \
  extern "C" __global__ __launch_bounds__(64) void NAME(float* x) {             \
    const int t = thread_id();                                                  \
    x[t] = EXPR(x[t]);                                                          \
  }
REDUCE(sum4_dpp, sum4)
REDUCE(sum16_dpp, sum16)
REDUCE(sum32_dpp_swizzle, sum32)
REDUCE(sum64_dpp_swizzle_bpermute, sum64)

// max over a row of 16 the same way (v_max_f32 with a DPP source)
PTC_DEVICE float max16(float v) {
  v = __builtin_fmaxf(v, dpp<DPP_QUAD_XOR1>(v));
  v = __builtin_fmaxf(v, dpp<DPP_QUAD_XOR2>(v));
  v = __builtin_fmaxf(v, dpp<DPP_ROW_HALF_MIRROR>(v));
  return __builtin_fmaxf(v, dpp<DPP_ROW_MIRROR>(v));
}
REDUCE(max16_dpp, max16)

// xor butterflies with ds_bpermute only (what HIP's __shfl_xor does)
PTC_DEVICE float sum64_bpermute(float v) {
  for (int m = 32; m >= 1; m /= 2) v += bpermute_xor(v, m);
  return v;
}
REDUCE(sum64_bpermute, sum64_bpermute)

// the GFX9 row broadcasts: rows of 16 summed by DPP, then row_bcast:15 adds row 0 into
// row 1 and row 2 into row 3 (row_mask 0xA), row_bcast:31 adds lane 31 into rows 2 and 3
// (row_mask 0xC): the wave's sum is in lane 63 only, read into a scalar register
extern "C" __global__ __launch_bounds__(64) void sum64_row_bcast(float* x) {
  const int t = thread_id();
  float v = sum16(x[t]);
  v += as_f(__builtin_amdgcn_update_dpp(0, as_i(v), DPP_ROW_BCAST15, 0xA, 0xF, false));
  v += as_f(__builtin_amdgcn_update_dpp(0, as_i(v), DPP_ROW_BCAST31, 0xC, 0xF, false));
  x[t] = as_f(__builtin_amdgcn_readlane(as_i(v), 63));
}

#if PTC_HIP_HEADERS
// HIP's own: __shfl_xor(v, mask, 64) (ds_bpermute in the ROCm 5.2 headers)
extern "C" __global__ __launch_bounds__(64) void sum64_shfl_xor(float* x) {
  const int t = thread_id();
  float v = x[t];
  for (int m = 32; m >= 1; m /= 2) v += __shfl_xor(v, m, 64);
  x[t] = v;
}
#endif

// one exchange of each kind, to read the encodings back from the ISA
extern "C" __global__ __launch_bounds__(64) void exchanges(float* x) {
  const int t = thread_id();
  float v = x[t];
  x[t + 64 * 1] = dpp<DPP_ROW_SHR1>(v);
  x[t + 64 * 2] = dpp<DPP_ROW_ROR4>(v);
  x[t + 64 * 3] = swizzle_xor<1>(v);
  x[t + 64 * 4] = as_f(__builtin_amdgcn_ds_swizzle(as_i(v), 0x8000 | 0x1B));  // quad mode
  x[t + 64 * 5] = bpermute_xor(v, 5);
  x[t + 64 * 6] = as_f(__builtin_amdgcn_readlane(as_i(v), 7));
  x[t + 64 * 7] = as_f(__builtin_amdgcn_mov_dpp(as_i(v), DPP_ROW_BCAST15, 0xF, 0xF, false));
}
