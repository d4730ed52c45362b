// ptc: loads from and stores to shared memory through one door, so that the CPU emulation
// can watch them. Under nvcc they are plain dereferences; under PTC_EMULATE
// (emulate/ptc_emulate.h) each access is checked to lie inside the block's shared memory,
// aligned, and counted for bank conflicts by its source line (std::source_location of the
// caller), so `ptc run --emulate` reports the shared-memory bank conflicts of the kernel.
//   T v = ptc::lds(p);      // v = *p
//   ptc::sts(p, v);         // *p = v
// T is a type of 1, 2, 4, 8 or 16 bytes (one shared-memory instruction per lane).
#pragma once

#ifdef PTC_EMULATE
#include <cuda_runtime.h>
#include <source_location>

namespace ptc {
template <class T>
__device__ __forceinline__ T lds(const T* p,
                                 std::source_location where = std::source_location::current()) {
  return ::ptc::emu::shared_load(p, where);
}
template <class T>
__device__ __forceinline__ void sts(T* p, T v,
                                    std::source_location where = std::source_location::current()) {
  ::ptc::emu::shared_store(p, v, where);
}
}  // namespace ptc
#else
namespace ptc {
template <class T> __device__ __forceinline__ T lds(const T* p) { return *p; }
template <class T> __device__ __forceinline__ void sts(T* p, T v) { *p = v; }
}  // namespace ptc
#endif
