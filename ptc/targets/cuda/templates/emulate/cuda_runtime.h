// ptc CPU emulation: the part of CUDA's runtime and language a rendered kernel.cu uses,
// for the host compiler (g++ -std=c++20 -DPTC_EMULATE). See ptc_emulate.h; the keywords,
// vector types, min / max and 32-bit atomicAdd are the ones HIP has too (ptc_emulate_lang.h).
#pragma once
#ifndef PTC_EMULATE
#error "this cuda_runtime.h is ptc's CPU emulation stub: compile with -DPTC_EMULATE"
#endif

#include "ptc_emulate.h"
#include "ptc_emulate_lang.h"
#include "device_functions.h"

#define __align__(n) __attribute__((aligned(n)))
#define __grid_constant__

typedef enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchFailure = 719,
} cudaError_t;
typedef struct CUstream_st* cudaStream_t;

inline void __syncthreads() { ptc::emu::block_barrier(); }

inline size_t __cvta_generic_to_shared(const void* p) {
  return static_cast<size_t>(static_cast<const unsigned char*>(p) - ptc_smem);
}

// atomics of CUDA's 16-bit types (the 32-bit ones: ptc_emulate_lang.h)
inline __half atomicAdd(__half* p, __half v) {
  __half* q = ptc::emu::atomic_target(p); const __half old = *q;
  *q = __float2half_rn(__half2float(old) + __half2float(v)); return old;
}
inline __nv_bfloat16 atomicAdd(__nv_bfloat16* p, __nv_bfloat16 v) {
  __nv_bfloat16* q = ptc::emu::atomic_target(p); const __nv_bfloat16 old = *q;
  *q = __float2bfloat16_rn(__bfloat162float(old) + __bfloat162float(v)); return old;
}
