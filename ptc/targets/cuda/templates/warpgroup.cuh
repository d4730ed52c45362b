// ptc: what warp-specialized roles need besides copies and mma (sm90a): register
// reallocation between roles (setmaxnreg), named barriers among a role's threads, one
// elected thread per warp, and the proxy fence between generic stores to shared memory and
// the tensor cores' or TMA's reads of it. PTX ISA; docs/sm90.md.
#pragma once
#include "ptc_types.cuh"

namespace ptc {

// The warpgroup of this thread, read from lane 0: every lane of a warp has the same one,
// and a value broadcast by shfl is one ptxas knows to be the same across the warp, so
// what depends on it (a consumer's rows, its wgmma descriptors) goes into uniform
// registers instead of being computed per thread and moved over (R2UR) at every wgmma.
__device__ __forceinline__ int warpgroup_index() {
  return __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0);
}

// setmaxnreg.{inc,dec}.sync.aligned.u32 N: every warp of the warpgroup, N a multiple of 8
// in 24..256; LAUNCH is the count every thread starts with (65536 / the block's threads)
template <int N, int LAUNCH>
__device__ __forceinline__ void setmaxnreg_inc() {
#ifdef PTC_EMULATE
  ::ptc::emu::setmaxnreg(N, true, LAUNCH);
#else
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n"(N));
#endif
}
template <int N, int LAUNCH>
__device__ __forceinline__ void setmaxnreg_dec() {
#ifdef PTC_EMULATE
  ::ptc::emu::setmaxnreg(N, false, LAUNCH);
#else
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" :: "n"(N));
#endif
}

// bar.sync id, count: the `count` threads of a role meet (id 0 is __syncthreads')
__device__ __forceinline__ void named_barrier(int id, int count) {
#ifdef PTC_EMULATE
  ::ptc::emu::named_barrier_sync(id, count);
#else
  asm volatile("bar.sync %0, %1;\n" :: "r"(id), "r"(count) : "memory");
#endif
}

// bar.arrive id, count: count this thread in without waiting (ping-pong hands the tensor
// cores to the other warpgroup, which waits at bar.sync id, count)
__device__ __forceinline__ void named_barrier_arrive(int id, int count) {
#ifdef PTC_EMULATE
  ::ptc::emu::named_barrier_arrive(id, count);
#else
  asm volatile("bar.arrive %0, %1;\n" :: "r"(id), "r"(count) : "memory");
#endif
}

// generic-proxy writes to shared memory (st.shared) made visible to the async proxy
// (wgmma operands, TMA stores) that reads them next; each writing thread, before the barrier
__device__ __forceinline__ void fence_proxy_async() {
#ifdef PTC_EMULATE
  ::ptc::emu::fence_proxy_async();
#else
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

}  // namespace ptc
