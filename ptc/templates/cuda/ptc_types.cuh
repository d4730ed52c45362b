// ptc device helpers: element types, rounding and integer semantics of the .pt language.
// Values are computed in f32 and rounded once to their dtype, as the reference interpreter
// does; // and % floor (Python semantics).
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

// Global-memory accesses of the helpers go through PTC_GLOBAL(pointer): the identity on the
// GPU, a bounds check against the caller's tensors in the CPU emulation (emulate/).
#ifdef PTC_EMULATE
#include "ptc_emulate.h"
#define PTC_GLOBAL(p) (::ptc::emu::global_access(p))
#else
#define PTC_GLOBAL(p) (p)
#endif

namespace ptc {

__host__ __device__ inline long long tiles(long long extent, long long size) {
  return extent <= 0 ? 0 : (extent + size - 1) / size;
}

__device__ __forceinline__ float f32(float x) { return x; }
__device__ __forceinline__ float f32(__half x) { return __half2float(x); }
__device__ __forceinline__ float f32(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float f32(int x) { return static_cast<float>(x); }
__device__ __forceinline__ float f32(long long x) { return static_cast<float>(x); }
__device__ __forceinline__ float f32(bool x) { return x ? 1.0f : 0.0f; }

// round an f32 value to the precision of a dtype, staying in f32
__device__ __forceinline__ float round_f16(float x) { return __half2float(__float2half_rn(x)); }
__device__ __forceinline__ float round_bf16(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }

template <typename T> __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ int from_f32<int>(float x) { return static_cast<int>(x); }
template <> __device__ __forceinline__ bool from_f32<bool>(float x) { return x != 0.0f; }

__device__ __forceinline__ long long floordiv(long long a, long long b) {
  long long q = a / b;
  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
__device__ __forceinline__ long long floormod(long long a, long long b) {
  long long r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
__device__ __forceinline__ float rsqrt_(float x) { return 1.0f / sqrtf(x); }

}  // namespace ptc
