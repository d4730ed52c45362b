// ptc: global -> shared tile copies. Rows and columns of a tile map to two dims of a
// tensor with arbitrary strides; positions outside the tensor read `pad`. The fast path
// issues 16-byte cp.async copies (zero-filled past the edge) when columns are contiguous
// and 16-byte aligned; otherwise every element is loaded and stored by a thread.
#pragma once
#include "ptc_types.cuh"

namespace ptc {

#ifdef PTC_EMULATE  // the CPU emulation (emulate/ptc_emulate.h)
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  ::ptc::emu::cp_async_16(smem, gmem, valid);
}
__device__ __forceinline__ void cp_async_commit() { ::ptc::emu::cp_async_commit(); }
template <int N> __device__ __forceinline__ void cp_async_wait() { ::ptc::emu::cp_async_wait(N); }
#else
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
#endif

// dst[r * LD + c] = src[(row0 + r) * row_stride + (col0 + c) * col_stride] for r < ROWS, c < COLS
template <typename T, int ROWS, int COLS, int LD, int THREADS>
__device__ __forceinline__ void global_to_shared(T* dst, const T* src, long long row0,
                                                 long long nrows, long long row_stride,
                                                 long long col0, long long ncols,
                                                 long long col_stride, float pad) {
  constexpr int VEC = 16 / sizeof(T);
  const bool vector = COLS % VEC == 0 && LD % VEC == 0 && col_stride == 1 && pad == 0.0f &&
                      ncols % VEC == 0 && col0 % VEC == 0 && row_stride % VEC == 0 &&
                      (reinterpret_cast<uintptr_t>(src) % 16) == 0;
  if (vector) {
    constexpr int CHUNKS = ROWS * (COLS / VEC);
    for (int i = threadIdx.x; i < CHUNKS; i += THREADS) {
      const int r = i / (COLS / VEC), c = (i % (COLS / VEC)) * VEC;
      const long long gr = row0 + r, gc = col0 + c;
      const bool valid = gr >= 0 && gr < nrows && gc >= 0 && gc < ncols;
      const T* g = valid ? src + gr * row_stride + gc : src;
      cp_async_16(dst + r * LD + c, g, valid);
    }
    return;
  }
  const T fill = from_f32<T>(pad);
  for (int i = threadIdx.x; i < ROWS * COLS; i += THREADS) {
    const int r = i / COLS, c = i % COLS;
    const long long gr = row0 + r, gc = col0 + c;
    const bool valid = gr >= 0 && gr < nrows && gc >= 0 && gc < ncols;
    dst[r * LD + c] = valid ? *PTC_GLOBAL(src + gr * row_stride + gc * col_stride) : fill;
  }
}

}  // namespace ptc
