// Three small kernels whose device assembly tests ptc.targets.hip.isa (tests/test_hip_build.py):
// a k-loop of MFMAs fed from LDS, a private array the compiler keeps in scratch, and five
// accumulators over a 64-register budget (spills). Clang builtins only (no device library).
#include <hip/hip_runtime.h>

typedef float f32x16 __attribute__((ext_vector_type(16)));
typedef _Float16 f16x4 __attribute__((ext_vector_type(4)));

#define BOUNDS(threads, waves) \
  __attribute__((amdgpu_flat_work_group_size(1, threads), amdgpu_waves_per_eu(waves)))

__device__ inline void barrier() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}

// two waves (one wave alone gets no s_barrier); per iteration: 1 global load, 1 ds_write,
// 2 ds_read, 2 MFMAs, 2 barriers
extern "C" __global__ BOUNDS(128, 1) void mma_loop(const f16x4* a, float* d, int steps) {
  __shared__ f16x4 tile[2][128];
  const int t = (int)__builtin_amdgcn_workitem_id_x();
  f32x16 acc = {};
  for (int s = 0; s < steps; ++s) {
    tile[s & 1][t] = a[s * 128 + t];
    barrier();
    acc = __builtin_amdgcn_mfma_f32_32x32x8f16(tile[s & 1][t], tile[s & 1][127 - t], acc, 0, 0, 0);
    acc = __builtin_amdgcn_mfma_f32_32x32x8f16(tile[s & 1][127 - t], tile[s & 1][t], acc, 0, 0, 0);
    barrier();
  }
  for (int r = 0; r < 16; ++r) d[r * 128 + t] = acc[r];
}

// a dynamically indexed private array: scratch, but no spill
extern "C" __global__ BOUNDS(64, 1) void scratch_array(const int* in, float* out) {
  const int t = (int)__builtin_amdgcn_workitem_id_x();
  float v[64];
  for (int i = 0; i < 64; ++i) v[i] = (float)in[i * 64 + t];
  out[t] = v[in[t] & 63];
}

// five 32x32 accumulators (80 values per lane) under 8 waves per SIMD (64 registers): spills
extern "C" __global__ BOUNDS(256, 8) void spilling(const f16x4* a, float* d, int n) {
  const int t = (int)__builtin_amdgcn_workitem_id_x();
  f32x16 acc[5] = {};
  for (int s = 0; s < n; ++s)
    for (int i = 0; i < 5; ++i)
      acc[i] = __builtin_amdgcn_mfma_f32_32x32x8f16(a[s * 256 + t], a[s * 256 + 255 - t], acc[i], 0, 0, 0);
  for (int i = 0; i < 5; ++i)
    for (int r = 0; r < 16; ++r) d[(i * 16 + r) * 256 + t] = acc[i][r];
}
