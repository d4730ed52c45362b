// ptc: shared -> global tile stores and atomic adds; positions outside the tensor are dropped.
#pragma once
#include "ptc_types.cuh"

namespace ptc {

template <typename T>
__device__ __forceinline__ void atomic_add(T* address, T value) { atomicAdd(address, value); }

template <typename T, int ROWS, int COLS, int LD, int THREADS, bool ATOMIC>
__device__ __forceinline__ void shared_to_global(T* dst, const T* src, long long row0,
                                                 long long nrows, long long row_stride,
                                                 long long col0, long long ncols,
                                                 long long col_stride) {
  for (int i = threadIdx.x; i < ROWS * COLS; i += THREADS) {
    const int r = i / COLS, c = i % COLS;
    const long long gr = row0 + r, gc = col0 + c;
    if (gr < 0 || gr >= nrows || gc < 0 || gc >= ncols) continue;
    T* out = PTC_GLOBAL(dst + gr * row_stride + gc * col_stride);
    if constexpr (ATOMIC) {
      atomic_add(out, src[r * LD + c]);
    } else {
      *out = src[r * LD + c];
    }
  }
}

}  // namespace ptc
