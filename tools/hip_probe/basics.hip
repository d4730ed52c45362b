// Ids, the barrier and the math functions ptc's language needs, with builtins only: this
// must build with -nogpulib (no device library), i.e. no __ocml_* / __ockl_* call is left.
#include "prelude.h"

using namespace ptc;

extern "C" __global__ __launch_bounds__(256) void ids(int* out) {
  const int t = thread_id();
  out[block_id_x() * 256 + t] = (wave_id() << 16) | (lane_id() << 8) | block_id_y();
}

// one LDS store, the barrier, a read of another wave's value: the release fence must put
// `s_waitcnt lgkmcnt(0)` before s_barrier (gfx90a / gfx942 have back-off barriers: the
// hardware does not wait for the wave's memory operations itself).
extern "C" __global__ __launch_bounds__(256) void barrier(float* out) {
  __shared__ float s[256];
  const int t = thread_id();
  s[t] = out[t];
  syncthreads();
  out[t] = s[255 - t];
}

// the same without the fences: nothing waits for the ds_write before s_barrier.
extern "C" __global__ __launch_bounds__(256) void barrier_no_fence(float* out) {
  __shared__ float s[256];
  const int t = thread_id();
  s[t] = out[t];
  __builtin_amdgcn_s_barrier();
  out[t] = s[255 - t];
}

#define UNARY(NAME, EXPR)                                                   \
  extern "C" __global__ __launch_bounds__(64) void NAME(float* x) {         \
    const int t = thread_id();                                              \
    x[t] = EXPR(x[t]);                                                      \
  }
UNARY(math_exp2, exp2_sfu)           // v_exp_f32
UNARY(math_exp2_libm, __builtin_exp2f)  // clang >= 17: denormal-safe sequence
UNARY(math_exp, exp_sfu)             // v_mul_f32 (log2 e) + v_exp_f32
UNARY(math_log, log_)                // v_log_f32 + scale by ln 2
UNARY(math_sqrt, sqrt_)
UNARY(math_rsqrt, rsqrt_)            // 1 / sqrt: v_sqrt + IEEE division
UNARY(math_rsqrt_fast, rsqrt_fast)   // v_rsq_f32
UNARY(math_abs, __builtin_fabsf)

extern "C" __global__ __launch_bounds__(64) void math_max(float* x) {
  const int t = thread_id();
  x[t] = __builtin_fmaxf(x[t], x[t + 64]);
}

// f32 -> f16 (v_cvt_f16_f32, round to nearest even) and f32 -> bf16 by integer rounding
// (gfx90a / gfx942 have no f32 -> bf16 conversion instruction; gfx950 adds
// v_cvt_pk_bf16_f32).
PTC_DEVICE unsigned short bf16_bits(float x) {
  unsigned u = __builtin_bit_cast(unsigned, x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}
extern "C" __global__ __launch_bounds__(64) void convert(const float* x, _Float16* h,
                                                         unsigned short* b) {
  const int t = thread_id();
  h[t] = (_Float16)x[t];
  b[t] = bf16_bits(x[t]);
}

// register pressure past the budget: 1024 threads leave 128 VGPRs per lane (512 / 4 waves
// per SIMD), 192 live values do not fit -> scratch (the readout's spill and scratch columns)
extern "C" __global__ __launch_bounds__(1024) void pressure(const float* in, float* out) {
  const int t = thread_id();
  float v[192];
  for (int i = 0; i < 192; ++i) v[i] = in[t + 1024 * i];
  float s = 0.0f;
  for (int r = 0; r < 4; ++r)
    for (int i = 0; i < 192; ++i) s = __builtin_fmaf(s, v[i], v[(i * 7 + r) % 192]);
  out[t] = s;
}
