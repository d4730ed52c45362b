// A hand-written warp-specialized GEMM for sm90a, C = A @ B (f16 in, f32 accumulate, f16
// out), over the device headers alone: the test of TMA, mbarriers, wgmma, setmaxnreg and
// their emulation, before any of it is rendered (tests/test_sm90.py). One block per 128 x 64
// tile of C: warpgroup 0 is the producer (one thread issues the TMA loads of A [128 x 64]
// and B [64 x 64] into a 3-slot ring), warpgroups 1 and 2 the consumers (rows 0-63 and
// 64-127: wgmma m64n64k16 from the ring, then their rows of C). Follows the kernel ABI of
// ptc's harness (ptc_launch, ptc_kernel_name) for the signature of samples/gemm.pt.
#include <climits>
#include <cstdint>
#include <cuda_runtime.h>
#include "ptc_types.cuh"
#include "mbarrier.cuh"
#include "global_to_shared_tma.cuh"
#include "wgmma.cuh"
#include "warpgroup.cuh"

#ifndef SWIZZLE_MAP
#define SWIZZLE_MAP CU_TENSOR_MAP_SWIZZLE_128B   // a test builds it with another to break it
#endif
#ifndef SBO_A
#define SBO_A 1024
#endif
#ifndef WAIT_EMPTY
#define WAIT_EMPTY 1
#endif
#ifndef WAIT_WGMMA
#define WAIT_WGMMA 1
#endif

namespace {
constexpr int BM = 128, BN = 64, BK = 64, STAGES = 3, THREADS = 384, LAUNCH_REGS = 168;
constexpr int A_BYTES = BM * BK * 2, B_BYTES = BK * BN * 2;
constexpr int SMEM_BYTES = STAGES * (A_BYTES + B_BYTES) + 1024;
}  // namespace

__global__ void __launch_bounds__(THREADS, 1) ws_gemm(
    const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
    __half* __restrict__ g_C, long long d_M, long long d_K, long long d_N) {
  const uint32_t smem = ptc::shared_base();
  const int tid = threadIdx.x, wg = tid / 128;
  const uint32_t a_s = smem, b_s = smem + STAGES * A_BYTES;
  const uint32_t bars = smem + STAGES * (A_BYTES + B_BYTES);
  auto full = [&](int s) { return bars + 8u * s; };
  auto empty = [&](int s) { return bars + 8u * (STAGES + s); };
  const int n_tiles = (int)((d_N + BN - 1) / BN);
  const int m0 = (int)(blockIdx.x / n_tiles) * BM, n0 = (int)(blockIdx.x % n_tiles) * BN;
  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      ptc::mbarrier_init(full(s), 1);       // the producer's arrive.expect_tx
      ptc::mbarrier_init(empty(s), 2);      // one arrival per consumer warpgroup
    }
    ptc::mbarrier_init_fence();
  }
  __syncthreads();
  const int trips = (int)((d_K + BK - 1) / BK);
  if (wg == 0) {
    ptc::setmaxnreg_dec<40, LAUNCH_REGS>();
    if (tid == 0) {
      for (int k = 0; k < trips; ++k) {
        const int s = k % STAGES;
        const uint32_t phase = (k / STAGES) & 1;
        if (WAIT_EMPTY) ptc::mbarrier_wait_parity(empty(s), phase ^ 1);
        ptc::mbarrier_arrive_expect_tx(full(s), A_BYTES + B_BYTES);
        ptc::tma_load<2>(a_s + s * A_BYTES, &map_a, full(s), {k * BK, m0});
        ptc::tma_load<2>(b_s + s * B_BYTES, &map_b, full(s), {n0, k * BK});
      }
    }
  } else {
    ptc::setmaxnreg_inc<232, LAUNCH_REGS>();
    const int c = wg - 1, t = tid % 128;
    float acc[BN / 2];
#pragma unroll
    for (int r = 0; r < BN / 2; ++r) acc[r] = 0.0f;
    for (int k = 0; k < trips; ++k) {
      const int s = k % STAGES;
      ptc::mbarrier_wait_parity(full(s), (k / STAGES) & 1);
      ptc::wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < BK / 16; ++ks) {
        // A: K-major, this consumer's 64 rows; B: MN-major (n contiguous), one 64-wide panel
        const uint64_t da = ptc::wgmma_desc(a_s + s * A_BYTES + c * 64 * 128 + ks * 32, 16,
                                            SBO_A);
        const uint64_t db = ptc::wgmma_desc(b_s + s * B_BYTES + ks * 16 * 128, B_BYTES, 1024);
        ptc::wgmma_ss<BN, false, 0, 1>(acc, da, db, 1);
      }
      ptc::wgmma_commit();
      if (WAIT_WGMMA) ptc::wgmma_wait<0>();
      if (t == 0) ptc::mbarrier_arrive(empty(s));
    }
    ptc::wgmma_wait<0>();
    const int w = t / 32, l = t % 32;
#pragma unroll
    for (int r = 0; r < BN / 2; ++r) {
      const long long row = m0 + c * 64 + 16 * w + l / 4 + 8 * ((r / 2) % 2);
      const long long col = n0 + 8 * (r / 4) + 2 * (l % 4) + r % 2;
      if (row < d_M && col < d_N) g_C[row * d_N + col] = __float2half_rn(acc[r]);
    }
  }
}

extern "C" const char* ptc_kernel_name(void) { return "gemm"; }

extern "C" int ptc_launch(void* const* tensors, const double* scalars, const long long* dims,
                          void* stream) {
  (void)scalars;
  const long long d_M = dims[0], d_K = dims[1], d_N = dims[2];
  const long long blocks = ((d_M + BM - 1) / BM) * ((d_N + BN - 1) / BN);
  if (blocks == 0) return (int)cudaSuccess;
  CUtensorMap map_a, map_b;
  const cuuint64_t dims_a[2] = {(cuuint64_t)d_K, (cuuint64_t)d_M}, strides_a[1] = {(cuuint64_t)d_K * 2};
  const cuuint64_t dims_b[2] = {(cuuint64_t)d_N, (cuuint64_t)d_K}, strides_b[1] = {(cuuint64_t)d_N * 2};
  const cuuint32_t box_a[2] = {BK, BM}, box_b[2] = {BN, BK};
  int err = ptc::tensor_map(&map_a, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, tensors[0], dims_a,
                            strides_a, box_a, SWIZZLE_MAP);
  if (err == 0) err = ptc::tensor_map(&map_b, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, tensors[1],
                                      dims_b, strides_b, box_b, SWIZZLE_MAP);
  if (err != 0) return (int)cudaErrorInvalidValue;
#ifdef PTC_EMULATE
  (void)stream;
  return ptc::emu::launch(blocks, THREADS, SMEM_BYTES, [&] {
    ws_gemm(map_a, map_b, (__half*)tensors[2], d_M, d_K, d_N);
  });
#else
  cudaError_t e = cudaFuncSetAttribute(ws_gemm, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       SMEM_BYTES);
  if (e != cudaSuccess) return (int)e;
  ws_gemm<<<dim3((unsigned)blocks), THREADS, SMEM_BYTES, (cudaStream_t)stream>>>(
      map_a, map_b, (__half*)tensors[2], d_M, d_K, d_N);
  return (int)cudaGetLastError();
#endif
}
