// ptc CPU emulation: the part of CUDA's runtime and language a rendered kernel.cu uses,
// for the host compiler (g++ -std=c++20 -DPTC_EMULATE). See ptc_emulate.h.
#pragma once
#ifndef PTC_EMULATE
#error "this cuda_runtime.h is ptc's CPU emulation stub: compile with -DPTC_EMULATE"
#endif

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define __grid_constant__

#include "ptc_emulate.h"
#include "device_functions.h"

// CUDA's vector types (vector_types.h), with their alignment
struct __attribute__((aligned(8))) float2 { float x, y; };
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
struct __attribute__((aligned(8))) int2 { int x, y; };
struct __attribute__((aligned(16))) int4 { int x, y, z, w; };
struct __attribute__((aligned(8))) uint2 { unsigned x, y; };
struct __attribute__((aligned(16))) uint4 { unsigned x, y, z, w; };
struct __attribute__((aligned(16))) double2 { double x, y; };
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline int2 make_int2(int x, int y) { return {x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline double2 make_double2(double x, double y) { return {x, y}; }

typedef enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchFailure = 719,
} cudaError_t;
typedef struct CUstream_st* cudaStream_t;

inline void __syncthreads() { ptc::emu::block_barrier(); }

inline size_t __cvta_generic_to_shared(const void* p) {
  return static_cast<size_t>(static_cast<const unsigned char*>(p) - ptc_smem);
}

// CUDA's integer and float min / max overloads in the global namespace
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }

// atomics: the threads of a block are fibers on one OS thread, so a plain read-modify-write
// is atomic; the address must lie in a tensor or in shared memory.
namespace ptc { namespace emu {
template <typename T> inline T* atomic_target(T* p) {
  if (in_smem(p, sizeof(T))) return p;
  return global_access(p);
}
}}  // namespace ptc::emu
inline float atomicAdd(float* p, float v) {
  float* q = ptc::emu::atomic_target(p); const float old = *q; *q = old + v; return old;
}
inline int atomicAdd(int* p, int v) {
  int* q = ptc::emu::atomic_target(p); const int old = *q;
  *q = static_cast<int>(static_cast<unsigned>(old) + static_cast<unsigned>(v)); return old;
}
inline unsigned atomicAdd(unsigned* p, unsigned v) {
  unsigned* q = ptc::emu::atomic_target(p); const unsigned old = *q; *q = old + v; return old;
}
inline __half atomicAdd(__half* p, __half v) {
  __half* q = ptc::emu::atomic_target(p); const __half old = *q;
  *q = __float2half_rn(__half2float(old) + __half2float(v)); return old;
}
inline __nv_bfloat16 atomicAdd(__nv_bfloat16* p, __nv_bfloat16 v) {
  __nv_bfloat16* q = ptc::emu::atomic_target(p); const __nv_bfloat16 old = *q;
  *q = __float2bfloat16_rn(__bfloat162float(old) + __bfloat162float(v)); return old;
}
