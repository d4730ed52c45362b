// What a TMA store (cp.async.bulk.tensor .global.shared::cta) does with a box that starts at
// negative coordinates or crosses the tensor's end: one experiment per process (a trap
// would poison the context). Tensor: 16 rows x 64 f16, filled with -1; box 8 rows x 32,
// element (r, c) of the box = r * 32 + c.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>
#include "ptc_types.cuh"
#include "global_to_shared_tma.cuh"
#include "shared_to_global_tma.cuh"
#include "warpgroup.cuh"

__global__ void k(const __grid_constant__ CUtensorMap map, int c0, int c1) {
  const uint32_t base = ptc::shared_base();
  for (int i = threadIdx.x; i < 256; i += blockDim.x)
    ptc::st_shared<__half>(base + 2 * i, __float2half((float)i));
  ptc::fence_proxy_async();
  __syncthreads();
  if (threadIdx.x == 0) {
    ptc::tma_store<2>(&map, base, {c0, c1});
    ptc::bulk_commit_group();
    ptc::bulk_wait_group_read<0>();
  }
  __syncthreads();
}

int main(int argc, char** argv) {
  const int c0 = atoi(argv[1]), c1 = atoi(argv[2]);
  const int W = 64, H = 16;
  std::vector<__half> host(W * H, __float2half(-1.0f));
  __half* g;
  cudaMalloc(&g, W * H * 2);
  cudaMemcpy(g, host.data(), W * H * 2, cudaMemcpyHostToDevice);
  CUtensorMap map;
  const cuuint64_t dims[2] = {(cuuint64_t)W, (cuuint64_t)H}, strides[1] = {(cuuint64_t)W * 2};
  const cuuint32_t box[2] = {32, 8};
  int e = ptc::tensor_map(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, g, dims, strides, box,
                          CU_TENSOR_MAP_SWIZZLE_NONE);
  if (e) { printf("(%d,%d) tensor_map failed %d\n", c0, c1, e); return 1; }
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 1024);
  k<<<1, 128, 1024>>>(map, c0, c1);
  cudaError_t launch = cudaGetLastError();
  cudaError_t sync = cudaDeviceSynchronize();
  cudaError_t copy = cudaMemcpy(host.data(), g, W * H * 2, cudaMemcpyDeviceToHost);
  int written = 0, rmin = 99, rmax = -1, cmin = 99, cmax = -1, wrong = 0;
  for (int r = 0; r < H; ++r)
    for (int c = 0; c < W; ++c) {
      const float v = __half2float(host[r * W + c]);
      if (v == -1.0f) continue;
      ++written;
      rmin = r < rmin ? r : rmin; rmax = r > rmax ? r : rmax;
      cmin = c < cmin ? c : cmin; cmax = c > cmax ? c : cmax;
      const int br = r - c1, bc = c - c0;     // its place in the box
      if (br < 0 || br >= 8 || bc < 0 || bc >= 32 || v != (float)(br * 32 + bc)) ++wrong;
    }
  printf("coords (%d,%d): launch=%s sync=%s copy=%s written=%d rows %d..%d cols %d..%d "
         "not-from-the-box=%d\n", c0, c1, cudaGetErrorString(launch), cudaGetErrorString(sync),
         cudaGetErrorString(copy), written, rmin, rmax, cmin, cmax, wrong);
  return 0;
}
