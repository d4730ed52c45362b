// The device prelude the HIP probes (and, proposed, ptc's generated kernels) include.
//
// One source for every compiler ptc meets (docs/hip.md, "Header strategy"):
//  * hipcc or `clang++ -x hip` with the HIP headers (ROCm 6.x, Debian's ROCm 5.2): clang
//    force-includes __clang_hip_runtime_wrapper.h, which defines
//    __CLANG_HIP_RUNTIME_WRAPPER_INCLUDED__; we then include <hip/hip_runtime.h> for the
//    keywords and the host API (the harness needs hipMalloc, hipModuleLaunchKernel, ...).
//  * `clang++ -x hip -nogpuinc -nogpulib` (gfx942 with Debian's clang-19: ROCm 5.2 ships
//    no gfx942 device library): no wrapper, no HIP headers; the few keywords are defined
//    here.
// The device code itself uses clang builtins only, in both modes: thread ids, barriers,
// shuffles, math and MFMA never reach the HIP headers' device functions, which call the
// device libraries (threadIdx -> __ockl_get_local_id, __syncthreads ->
// __atomic_work_item_fence, expf -> __ocml_exp_f32) and so fail to link with -nogpulib.
#pragma once

#if defined(__CLANG_HIP_RUNTIME_WRAPPER_INCLUDED__)
#include <hip/hip_runtime.h>
#define PTC_HIP_HEADERS 1
#else
#define PTC_HIP_HEADERS 0
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __launch_bounds__(threads) __attribute__((amdgpu_flat_work_group_size(1, threads)))
#endif

// Block size and register budget, the same in both modes. HIP's two-argument
// __launch_bounds__(T, W) means amdgpu_waves_per_eu(W) -- waves per SIMD, not CUDA's blocks
// per SM -- so say it explicitly: at most 512 / W unified VGPRs (arch + AGPR) per lane.
#define PTC_BOUNDS(threads, waves_per_simd) \
  __attribute__((amdgpu_flat_work_group_size(1, threads), amdgpu_waves_per_eu(waves_per_simd)))

#define PTC_DEVICE __device__ __attribute__((always_inline)) inline

namespace ptc {

// ---- ids (wave64; the block size is a compile-time constant in generated code) ----------
PTC_DEVICE int thread_id() { return (int)__builtin_amdgcn_workitem_id_x(); }
PTC_DEVICE int block_id_x() { return (int)__builtin_amdgcn_workgroup_id_x(); }
PTC_DEVICE int block_id_y() { return (int)__builtin_amdgcn_workgroup_id_y(); }
PTC_DEVICE int lane_id() {                       // 0..63 (v_mbcnt_lo/hi)
  return (int)__builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u));
}
// the wave's index in the block, in a scalar register
PTC_DEVICE int wave_id() { return __builtin_amdgcn_readfirstlane(thread_id() / 64); }

// ---- barriers ---------------------------------------------------------------------------
// __syncthreads: release fence, s_barrier, acquire fence. On gfx90a / gfx942 this compiles
// to `s_waitcnt lgkmcnt(0); s_barrier`: the wave's LDS accesses complete, in-flight global
// loads (a prefetch) do not have to. s_barrier alone waits for nothing (back-off barrier).
PTC_DEVICE void syncthreads() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}

// ---- math without a device library -------------------------------------------------------
// exp2: the bare v_exp_f32 (ptc's exp2 is the SFU approximation, as ex2.approx.ftz on CUDA).
// clang >= 17 has __builtin_amdgcn_exp2f; there __builtin_exp2f expands to a denormal-safe
// sequence (v_cmp, v_cndmask, v_exp_f32, v_mul) instead. clang 15 lowers __builtin_exp2f to
// v_exp_f32 alone.
PTC_DEVICE float exp2_sfu(float x) {
#if __has_builtin(__builtin_amdgcn_exp2f)
  return __builtin_amdgcn_exp2f(x);
#else
  return __builtin_exp2f(x);
#endif
}
PTC_DEVICE float exp_sfu(float x) { return exp2_sfu(x * 1.4426950408889634f); }
// log, sqrt: LLVM's own lowering (clang >= 17: accurate sequences around v_log_f32 /
// v_sqrt_f32; clang 15: v_log_f32 * ln 2 and v_sqrt_f32 alone)
PTC_DEVICE float log_(float x) { return __builtin_logf(x); }
PTC_DEVICE float sqrt_(float x) { return __builtin_sqrtf(x); }
PTC_DEVICE float rsqrt_(float x) { return 1.0f / __builtin_sqrtf(x); }   // as ptc's CUDA
PTC_DEVICE float rsqrt_fast(float x) { return __builtin_amdgcn_rsqf(x); }  // v_rsq_f32

// ---- vector types the MFMA builtins take --------------------------------------------------
typedef _Float16 f16x4 __attribute__((ext_vector_type(4)));
typedef short bf16x4 __attribute__((ext_vector_type(4)));   // 4 bf16 as raw 16-bit patterns
typedef float f32x4 __attribute__((ext_vector_type(4)));
typedef float f32x16 __attribute__((ext_vector_type(16)));

}  // namespace ptc
