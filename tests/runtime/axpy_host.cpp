// axpy.pt's kernel ABI on the CPU, for the fake CUDA runtime (fake_cuda/cuda_runtime.h):
// the same arithmetic as axpy.cu. tensors = {A: f32, B: bf16, C: f32, S: f32}.
#include <cstdint>
#include <cstring>

static float bf16_to_f32(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

extern "C" int ptc_launch(void* const* tensors, const double* scalars, const long long* dims,
                          void*) {
  const float* A = (const float*)tensors[0];
  const uint16_t* B = (const uint16_t*)tensors[1];
  float* C = (float*)tensors[2];
  float* S = (float*)tensors[3];
  float alpha = (float)scalars[0];
  long long M = dims[0], N = dims[1];
  for (long long i = 0; i < M * N; i++) {
    float c = A[i] + alpha * bf16_to_f32(B[i]);
    C[i] = c;
    S[i / N] += c;
  }
  return 0;
}

extern "C" const char* ptc_kernel_name(void) { return "axpy"; }
