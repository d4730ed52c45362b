// ptc: shared -> global tile stores by the Tensor Memory Accelerator (sm90), the epilogue
// of warp-specialized kernels. The warpgroup writes its tile into shared memory in the
// layout the tensor map names (tma_offset, global_to_shared_tma.cuh), fences it for the
// async proxy (fence_proxy_async, warpgroup.cuh) and meets; one thread stores one box per
// column panel, commits the bulk-async group and waits until the boxes have been read out
// of shared memory (`.read`: the global writes may still be in flight, which the kernel's
// end completes). Elements of a box outside the tensor are not written. PTX ISA:
// cp.async.bulk.tensor (.global.shared::cta, .bulk_group), cp.async.bulk.commit_group,
// cp.async.bulk.wait_group.read; docs/sm90.md.
#pragma once
#include "global_to_shared_tma.cuh"

namespace ptc {

// Device: the box of `map` at coordinates c (innermost first) from shared memory at `src`.
template <int RANK>
__device__ __forceinline__ void tma_store(const CUtensorMap* map, uint32_t src,
                                          const int (&c)[RANK]) {
  static_assert(RANK >= 1 && RANK <= 5, "TMA moves boxes of rank 1 to 5");
#ifdef PTC_EMULATE
  ::ptc::emu::tma_store(map, src, c);
#else
  const uint64_t m = reinterpret_cast<uint64_t>(map);
  if constexpr (RANK == 1)
    asm volatile("cp.async.bulk.tensor.1d.global.shared::cta.bulk_group [%0, {%2}], [%1];\n"
                 :: "l"(m), "r"(src), "r"(c[0]) : "memory");
  else if constexpr (RANK == 2)
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n"
                 :: "l"(m), "r"(src), "r"(c[0]), "r"(c[1]) : "memory");
  else if constexpr (RANK == 3)
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group"
                 " [%0, {%2, %3, %4}], [%1];\n"
                 :: "l"(m), "r"(src), "r"(c[0]), "r"(c[1]), "r"(c[2]) : "memory");
  else if constexpr (RANK == 4)
    asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group"
                 " [%0, {%2, %3, %4, %5}], [%1];\n"
                 :: "l"(m), "r"(src), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]) : "memory");
  else
    asm volatile("cp.async.bulk.tensor.5d.global.shared::cta.bulk_group"
                 " [%0, {%2, %3, %4, %5, %6}], [%1];\n"
                 :: "l"(m), "r"(src), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4])
                 : "memory");
#endif
}

__device__ __forceinline__ void bulk_commit_group() {
#ifdef PTC_EMULATE
  ::ptc::emu::bulk_commit_group();
#else
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}

// all but the N most recent bulk groups of this thread have read their shared memory
template <int N>
__device__ __forceinline__ void bulk_wait_group_read() {
#ifdef PTC_EMULATE
  ::ptc::emu::bulk_wait_group_read(N);
#else
  asm volatile("cp.async.bulk.wait_group.read %0;\n" :: "n"(N) : "memory");
#endif
}

}  // namespace ptc
