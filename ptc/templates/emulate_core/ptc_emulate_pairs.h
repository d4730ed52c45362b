// The packed 16-bit arithmetic of every backend's ptc_types (pk_add, pk_sub, pk_mul: two
// values a register at a time, ir.Compute.pairs) in the CPU emulation: each half rounded
// once by the backend's own add_rn / sub_rn / mul_rn, read by its from_bits and packed by
// its pack16, which ptc_types defines before including this.
#pragma once

namespace ptc {
template <typename T> __device__ __forceinline__ T half_of(uint32_t w, int i) {
  return from_bits<T>(static_cast<uint16_t>(i ? w >> 16 : w));
}
template <typename T> __device__ __forceinline__ uint32_t pk_add(uint32_t a, uint32_t b) {
  return pack16(add_rn(half_of<T>(a, 0), half_of<T>(b, 0)), add_rn(half_of<T>(a, 1), half_of<T>(b, 1)));
}
template <typename T> __device__ __forceinline__ uint32_t pk_sub(uint32_t a, uint32_t b) {
  return pack16(sub_rn(half_of<T>(a, 0), half_of<T>(b, 0)), sub_rn(half_of<T>(a, 1), half_of<T>(b, 1)));
}
template <typename T> __device__ __forceinline__ uint32_t pk_mul(uint32_t a, uint32_t b) {
  return pack16(mul_rn(half_of<T>(a, 0), half_of<T>(b, 0)), mul_rn(half_of<T>(a, 1), half_of<T>(b, 1)));
}
}  // namespace ptc
