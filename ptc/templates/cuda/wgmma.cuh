// ptc: warpgroup matrix multiply-accumulate (sm90a): wgmma.mma_async m64nNk16, f16/bf16 in,
// f32 accumulators in registers, B (and A, or A from registers) read by the tensor cores
// from shared memory through matrix descriptors. The lowering places the fences, commits
// and waits: wgmma_fence() before the first wgmma after the accumulators or A registers were
// written, wgmma_commit() closes a group, wgmma_wait<N>() leaves N groups in flight (the
// accumulators may be read, and the operand slots released, only after the wait).
//
// Shared-memory operands are tiles written by TMA with the 128-byte swizzle, in panels of
// 128-byte rows (64 16-bit elements): a K-major operand (A [m][k]) is K-panels of its rows, a
// MN-major one (B [k][n]) N-panels of its k rows. Descriptors (docs/sm90.md):
//   K-major:  SBO = 1024 (the next 8 rows), LBO unused; a k-step of 16 moves 32 bytes
//             within a panel; 64 rows (the next m64 atom) are 64 * 128 bytes on.
//   MN-major: LBO = the bytes of one N-panel (the next 64 columns), SBO = 1024 (the next 8
//             k rows); a k-step of 16 moves 16 * 128 bytes.
#pragma once
#include "ptc_types.cuh"
#ifndef PTC_EMULATE
#include "wgmma_instructions.cuh"
#endif

namespace ptc {

// layout type 1: the 128-byte swizzle
__device__ __forceinline__ uint64_t wgmma_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((addr & 0x3FFFFu) >> 4) |
         (static_cast<uint64_t>((lbo >> 4) & 0x3FFFu) << 16) |
         (static_cast<uint64_t>((sbo >> 4) & 0x3FFFu) << 32) | (uint64_t{1} << 62);
}

__device__ __forceinline__ void wgmma_fence() {
#ifndef PTC_EMULATE
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void wgmma_commit() {
#ifdef PTC_EMULATE
  ::ptc::emu::wgmma_commit();
#else
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

template <int N>
__device__ __forceinline__ void wgmma_wait() {
#ifdef PTC_EMULATE
  ::ptc::emu::wgmma_wait(N);
#else
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory");
#endif
}

// d (N / 2 floats) = (scale_d ? d : 0) + A B, A and B by descriptors
template <int N, bool BF16, int TRANS_A, int TRANS_B>
__device__ __forceinline__ void wgmma_ss(float* d, uint64_t desc_a, uint64_t desc_b,
                                         int scale_d) {
#ifdef PTC_EMULATE
  ::ptc::emu::wgmma_issue<N, BF16>(d, nullptr, desc_a, desc_b, scale_d, TRANS_A, TRANS_B);
#else
  if constexpr (N == 8) ptx::wgmma_ss_n8<BF16, TRANS_A, TRANS_B>(d, desc_a, desc_b, scale_d);
  else if constexpr (N == 16) ptx::wgmma_ss_n16<BF16, TRANS_A, TRANS_B>(d, desc_a, desc_b, scale_d);
  else if constexpr (N == 32) ptx::wgmma_ss_n32<BF16, TRANS_A, TRANS_B>(d, desc_a, desc_b, scale_d);
  else if constexpr (N == 64) ptx::wgmma_ss_n64<BF16, TRANS_A, TRANS_B>(d, desc_a, desc_b, scale_d);
  else if constexpr (N == 96) ptx::wgmma_ss_n96<BF16, TRANS_A, TRANS_B>(d, desc_a, desc_b, scale_d);
  else if constexpr (N == 128) ptx::wgmma_ss_n128<BF16, TRANS_A, TRANS_B>(d, desc_a, desc_b, scale_d);
  else if constexpr (N == 192) ptx::wgmma_ss_n192<BF16, TRANS_A, TRANS_B>(d, desc_a, desc_b, scale_d);
  else if constexpr (N == 256) ptx::wgmma_ss_n256<BF16, TRANS_A, TRANS_B>(d, desc_a, desc_b, scale_d);
  else static_assert(N == 0, "wgmma_instructions.cuh has no wrapper for this N");
#endif
}

// A from registers: the m64k16 fragment of 16-bit pairs, four per thread (as mma.sync's A)
template <int N, bool BF16, int TRANS_B>
__device__ __forceinline__ void wgmma_rs(float* d, const uint32_t* a, uint64_t desc_b,
                                         int scale_d) {
#ifdef PTC_EMULATE
  ::ptc::emu::wgmma_issue<N, BF16>(d, a, 0, desc_b, scale_d, 0, TRANS_B);
#else
  if constexpr (N == 8) ptx::wgmma_rs_n8<BF16, TRANS_B>(d, a, desc_b, scale_d);
  else if constexpr (N == 16) ptx::wgmma_rs_n16<BF16, TRANS_B>(d, a, desc_b, scale_d);
  else if constexpr (N == 32) ptx::wgmma_rs_n32<BF16, TRANS_B>(d, a, desc_b, scale_d);
  else if constexpr (N == 64) ptx::wgmma_rs_n64<BF16, TRANS_B>(d, a, desc_b, scale_d);
  else if constexpr (N == 96) ptx::wgmma_rs_n96<BF16, TRANS_B>(d, a, desc_b, scale_d);
  else if constexpr (N == 128) ptx::wgmma_rs_n128<BF16, TRANS_B>(d, a, desc_b, scale_d);
  else if constexpr (N == 192) ptx::wgmma_rs_n192<BF16, TRANS_B>(d, a, desc_b, scale_d);
  else if constexpr (N == 256) ptx::wgmma_rs_n256<BF16, TRANS_B>(d, a, desc_b, scale_d);
  else static_assert(N == 0, "wgmma_instructions.cuh has no wrapper for this N");
#endif
}

}  // namespace ptc
