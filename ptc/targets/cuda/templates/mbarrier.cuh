// ptc: mbarriers in shared memory (sm90): a producer's TMA loads complete on a "full"
// barrier the consumers wait on; the consumers arrive on an "empty" barrier the producer
// waits on before it overwrites the slot. Phase parity: a fresh barrier is in phase 0;
// wait_parity(bar, p) returns once the phase of parity p has completed, so a ring slot's
// k-th use waits parity (k / stages) & 1 on full, and its producer parity ((k / stages) & 1)
// ^ 1 on empty (the phase "before" the first passes at once). PTX ISA: mbarrier; docs/sm90.md.
#pragma once
#include "ptc_types.cuh"

namespace ptc {

__device__ __forceinline__ void mbarrier_init(uint32_t bar, int count) {
#ifdef PTC_EMULATE
  ::ptc::emu::mbarrier_init(bar, count);
#else
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count) : "memory");
#endif
}

// after one thread initialized the barriers: make them visible to the async proxy (TMA)
// before the __syncthreads that lets the other threads use them
__device__ __forceinline__ void mbarrier_init_fence() {
#ifdef PTC_EMULATE
  ::ptc::emu::mbarrier_init_fence();
#else
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
#ifdef PTC_EMULATE
  ::ptc::emu::mbarrier_arrive(bar);
#else
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(bar) : "memory");
#endif
}

// one arrival, and `bytes` more transaction bytes the phase waits for (the TMA loads)
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
#ifdef PTC_EMULATE
  ::ptc::emu::mbarrier_arrive_expect_tx(bar, bytes);
#else
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
               :: "r"(bar), "r"(bytes) : "memory");
#endif
}

__device__ __forceinline__ void mbarrier_wait_parity(uint32_t bar, uint32_t parity) {
#ifdef PTC_EMULATE
  ::ptc::emu::mbarrier_wait_parity(bar, parity);
#else
  asm volatile(
      "{\n.reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n}\n" :: "r"(bar), "r"(parity) : "memory");
#endif
}

}  // namespace ptc
