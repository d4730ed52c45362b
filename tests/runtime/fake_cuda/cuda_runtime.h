// A fake CUDA runtime on host memory, for tests only: harness.cu compiled by g++ against
// this header (with a host-side kernel.cu) runs the whole runtime -- allocation, copies,
// launches, timing, ptc_run -- on a machine without a GPU. "Device" pointers are host
// pointers. PTC_FAKE_CUDA_DEVICES=0 in the environment makes it report no device.
#pragma once
#include <chrono>
#include <cstdlib>
#include <cstring>

typedef enum cudaError { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2,
                         cudaErrorNoDevice = 100 } cudaError_t;
typedef void* cudaStream_t;
typedef struct FakeEvent { double ms; } *cudaEvent_t;
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2 };
struct cudaDeviceProp { char name[256]; int major; int minor; };

inline const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    default: return "cudaErrorInvalidValue";
  }
}
inline const char* cudaGetErrorString(cudaError_t e) {
  return e == cudaErrorNoDevice ? "no CUDA-capable device is detected" : "fake CUDA error";
}
inline bool fake_has_device() {
  const char* v = std::getenv("PTC_FAKE_CUDA_DEVICES");
  return !(v && std::strcmp(v, "0") == 0);
}
inline cudaError_t cudaGetDeviceCount(int* n) {
  if (!fake_has_device()) { *n = 0; return cudaErrorNoDevice; }
  *n = 1;
  return cudaSuccess;
}
inline cudaError_t cudaGetDevice(int* d) { *d = 0; return cudaSuccess; }
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) {
  std::strcpy(p->name, "fake CUDA device");
  p->major = 8; p->minor = 0;
  return cudaSuccess;
}
inline cudaError_t cudaMalloc(void** p, size_t n) {
  *p = std::aligned_alloc(256, (n + 255) / 256 * 256);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaFree(void* p) { std::free(p); return cudaSuccess; }
inline cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind) {
  std::memcpy(d, s, n);
  return cudaSuccess;
}
inline cudaError_t cudaMemset(void* d, int v, size_t n) { std::memset(d, v, n); return cudaSuccess; }
// What a test reads back through ctypes: how often the host waited, and the stream the
// last asynchronous call was queued on (weak: one definition in the library however many
// files include this header).
extern "C" {
__attribute__((weak)) int fake_cuda_waits = 0;
__attribute__((weak)) void* fake_cuda_last_stream = nullptr;
}
inline cudaError_t cudaMemsetAsync(void* d, int v, size_t n, cudaStream_t s) {
  fake_cuda_last_stream = s;
  return cudaMemset(d, v, n);
}
inline cudaError_t cudaDeviceSynchronize() { fake_cuda_waits++; return cudaSuccess; }
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { fake_cuda_waits++; return cudaSuccess; }
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline cudaError_t cudaEventCreate(cudaEvent_t* e) { *e = new FakeEvent{0.0}; return cudaSuccess; }
inline cudaError_t cudaEventDestroy(cudaEvent_t e) { delete e; return cudaSuccess; }
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t) {
  using namespace std::chrono;
  e->ms = duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
  return cudaSuccess;
}
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  *ms = (float)(b->ms - a->ms);
  return cudaSuccess;
}
