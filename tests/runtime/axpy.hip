// Hand-written HIP for axpy.pt, following the ptc kernel ABI (what the renderer emits):
//   tensors = {A, B, C, S} (inputs in signature order, then outputs), scalars = {alpha},
//   dims = {M, N}. The caller zeroes S (atomic adds) before the launch.
// Device code uses clang builtins only (docs/hip.md, "Header strategy"), so it builds with
// and without a device library (clang++ -x hip -nogpulib).
#include <hip/hip_runtime.h>

#include <cstdint>

constexpr int kThreads = 256;

__global__ __launch_bounds__(kThreads) void axpy_kernel(
    const float* __restrict__ A, const uint16_t* __restrict__ B, float* __restrict__ C,
    float* __restrict__ S, float alpha, long long M, long long N) {
  long long idx = (long long)__builtin_amdgcn_workgroup_id_x() * kThreads +
                  __builtin_amdgcn_workitem_id_x();
  if (idx >= M * N) return;
  float b = __builtin_bit_cast(float, (uint32_t)B[idx] << 16);   // bf16 bits -> f32
  float c = A[idx] + alpha * b;
  C[idx] = c;
  __hip_atomic_fetch_add(&S[idx / N], c, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}

extern "C" int ptc_launch(void* const* tensors, const double* scalars, const long long* dims,
                          void* stream) {
  long long M = dims[0], N = dims[1], n = M * N;
  if (n == 0) return 0;
  axpy_kernel<<<(unsigned)((n + kThreads - 1) / kThreads), kThreads, 0, (hipStream_t)stream>>>(
      (const float*)tensors[0], (const uint16_t*)tensors[1], (float*)tensors[2],
      (float*)tensors[3], (float)scalars[0], M, N);
  return (int)hipGetLastError();
}

extern "C" const char* ptc_kernel_name(void) { return "axpy"; }
