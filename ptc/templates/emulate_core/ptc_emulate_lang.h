// ptc CPU emulation: what CUDA and HIP both give kernels, for the host compiler (g++
// -DPTC_EMULATE), included by each backend after the core (ptc_emulate_core.h):
// - the keywords: kernels and device functions are plain functions, __shared__ memory is the
//   core's ptc_smem (dynamic shared memory only), launch bounds are the GPU's business;
// - the vector types (CUDA's vector_types.h, HIP's hip_vector_type.h), with their alignment,
//   and their make_ functions;
// - the integer and float min / max overloads in the global namespace;
// - atomicAdd of 32-bit values: the threads of a block are fibers on one OS thread, so a
//   plain read-modify-write is atomic; the address must lie in a tensor or in shared memory.
#pragma once
#include <cmath>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__
#define __constant__
#define __launch_bounds__(...)

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

inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }

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
