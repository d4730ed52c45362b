// ptc: values from other lanes of a wave64, for row reductions over a register layout's
// lanes (ptc/lower: Reduce.lane_masks). Lane l receives lane l ^ MASK's value, by the
// cheapest instruction that reaches it (docs/hip.md, "Cross-lane operations"):
//   MASK 1, 2     DPP quad_perm [1,0,3,2] / [2,3,0,1] (folded into the consuming VALU op)
//   MASK 4..16    ds_swizzle in bit mode, within 32 lanes: offset = xor << 10 | and 0x1f
//   MASK 32       ds_bpermute from lane l ^ 32 (any lane; LDS crossbar, no LDS memory)
#pragma once
#include "ptc_types.h"

namespace ptc {

__device__ __forceinline__ int lane_id() { return thread_id() & 63; }

template <int MASK> __device__ __forceinline__ int lane_xor(int v) {
  static_assert(MASK > 0 && MASK < 64, "a wave64 lane mask");
  if constexpr (MASK == 1)
    return __builtin_amdgcn_mov_dpp(v, 0xB1, 0xF, 0xF, true);   // quad_perm:[1,0,3,2]
  else if constexpr (MASK == 2)
    return __builtin_amdgcn_mov_dpp(v, 0x4E, 0xF, 0xF, true);   // quad_perm:[2,3,0,1]
  else if constexpr (MASK < 32)
    return __builtin_amdgcn_ds_swizzle(v, (MASK << 10) | 0x1F);
  else
    return __builtin_amdgcn_ds_bpermute((lane_id() ^ MASK) << 2, v);
}

template <int MASK> __device__ __forceinline__ float lane_xor(float v) {
  return bits_f32(static_cast<uint32_t>(lane_xor<MASK>(static_cast<int>(f32_bits(v)))));
}

}  // namespace ptc
