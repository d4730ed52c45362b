// LDS, waits and barriers, buffer loads and global -> LDS direct loads
// (docs/hip.md, "LDS" and "Waits and barriers").
#include "prelude.h"

using namespace ptc;

typedef int i32x4 __attribute__((ext_vector_type(4)));
#define LDS __attribute__((address_space(3)))   // the local (LDS) address space
#define GLOBAL __attribute__((address_space(1)))

// s_waitcnt immediates (GFX9: vmcnt bits [3:0] and [15:14], expcnt [6:4], lgkmcnt [11:8];
// a field at its maximum does not wait)
enum : int {
  WAIT_VMCNT0 = 0x3F70,      // s_waitcnt vmcnt(0)
  WAIT_LGKMCNT0 = 0xC07F,    // s_waitcnt lgkmcnt(0)
  WAIT_VMCNT2 = 0x3F72,      // s_waitcnt vmcnt(2)
};

// 16-byte LDS accesses: ds_write_b128 / ds_read_b128 (16-byte aligned addresses)
extern "C" __global__ __launch_bounds__(256) void lds_b128(const f32x4* in, f32x4* out) {
  __shared__ f32x4 tile[2 * 256];          // 8 KB, static: .group_segment_fixed_size
  const int t = thread_id();
  tile[t] = in[t];
  tile[256 + t] = in[256 + t];
  syncthreads();
  out[t] = tile[(t * 17) % 512] + tile[511 - t];
}

// dynamic LDS: the size is the launch's (hipModuleLaunchKernel sharedMemBytes), up to
// 64 KB per workgroup on gfx90a and gfx942
extern "C" __global__ __launch_bounds__(256) void lds_dynamic(const float* in, float* out) {
  extern __shared__ float dyn[];
  const int t = thread_id();
  dyn[t] = in[t];
  syncthreads();
  out[t] = dyn[255 - t];
}

// A global load still in flight (the next stage's prefetch) across an LDS barrier:
// (1) syncthreads (release / acquire fences): the compiler puts s_waitcnt lgkmcnt(0) before
// s_barrier and leaves the prefetch in flight (workgroup scope, no tgsplit)
extern "C" __global__ __launch_bounds__(256) void prefetch_fenced(const float* in, float* out) {
  __shared__ float s[256];
  const int t = thread_id();
  const float next = in[256 + t];         // prefetch
  s[t] = in[t];
  syncthreads();
  out[t] = s[255 - t] + next;
}
// (2) CK's block_sync_lds: s_waitcnt lgkmcnt(0) then s_barrier, no fence
extern "C" __global__ __launch_bounds__(256) void prefetch_lgkm(const float* in, float* out) {
  __shared__ float s[256];
  const int t = thread_id();
  const float next = in[256 + t];
  s[t] = in[t];
  __builtin_amdgcn_s_waitcnt(WAIT_LGKMCNT0);
  __builtin_amdgcn_s_barrier();
  out[t] = s[255 - t] + next;
}
#if defined(__clang_major__) && __clang_major__ >= 19
// (3) a fence limited to LDS (the address-space argument: clang 19 accepts it; here it
// gives the same code as (1), since a workgroup-scope release waits for LDS only anyway)
extern "C" __global__ __launch_bounds__(256) void prefetch_local_fence(const float* in,
                                                                       float* out) {
  __shared__ float s[256];
  const int t = thread_id();
  const float next = in[256 + t];
  s[t] = in[t];
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup", "local");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup", "local");
  out[t] = s[255 - t] + next;
}
#endif

// explicit waits: the builtin emits exactly the immediate; the compiler still adds its own
// waits before any use of a loaded register
extern "C" __global__ __launch_bounds__(64) void waitcnt(const float* in, float* out) {
  const int t = thread_id();
  float a = in[t], b = in[t + 64], c = in[t + 128];
  __builtin_amdgcn_s_waitcnt(WAIT_VMCNT2);
  out[t] = a;
  __builtin_amdgcn_s_waitcnt(WAIT_VMCNT0);
  out[t + 64] = b + c;
}

// Buffer loads through an LLVM intrinsic named by an asm label (what composable_kernel
// does; works with clang 15 and 19). The resource: base address (48 bits), stride (0),
// num_records (bytes; out-of-range loads return 0), dword 3 = 0x00020000 on gfx9
// (composable_kernel include/ck/ck.hpp CK_BUFFER_RESOURCE_3RD_DWORD).
__device__ f32x4 raw_buffer_load_f32x4(i32x4 rsrc, int voffset, int soffset, int aux)
    __asm("llvm.amdgcn.raw.buffer.load.v4f32");
__device__ void raw_buffer_load_lds(i32x4 rsrc, LDS void* lds, int size, int voffset,
                                    int soffset, int offset, int aux)
    __asm("llvm.amdgcn.raw.buffer.load.lds");

PTC_DEVICE i32x4 buffer_resource(const void* p, unsigned bytes) {
  const unsigned long long a = (unsigned long long)p;
  i32x4 r;
  r[0] = (int)(unsigned)a;
  r[1] = (int)(unsigned)(a >> 32) & 0xFFFF;  // stride 0
  r[2] = (int)bytes;
  r[3] = 0x00020000;
  return r;
}

extern "C" __global__ __launch_bounds__(64) void buffer_load(const f32x4* in, f32x4* out,
                                                             unsigned bytes) {
  const int t = thread_id();
  const i32x4 rsrc = buffer_resource(in, bytes);
  out[t] = raw_buffer_load_f32x4(rsrc, t * 16, 0, 0);
}

// global -> LDS without registers: buffer_load_dword ... lds (each lane one dword; the
// LDS address is M0 + lane * 4 + offset, M0 from the pointer, which must be uniform)
// (256 threads: with one wave per workgroup the compiler drops s_barrier altogether)
extern "C" __global__ __launch_bounds__(256) void buffer_load_to_lds(const float* in,
                                                                     float* out) {
  __shared__ float s[256];
  const int t = thread_id();
  // the wave's 64 dwords land at M0 = s + 256 * wave (uniform), lane l at + 4 l
  raw_buffer_load_lds(buffer_resource(in, 256 * 4), (LDS void*)(s + 64 * wave_id()), 4, t * 4,
                      0, 0, 0);
  __builtin_amdgcn_s_waitcnt(WAIT_VMCNT0);   // this wave's DMA is in LDS
  syncthreads();                             // ... and so is every wave's
  out[t] = s[255 - t];
}

#if __has_builtin(__builtin_amdgcn_make_buffer_rsrc)
// clang >= 19: the resource as a type (__amdgpu_buffer_rsrc_t) and typed buffer loads
extern "C" __global__ __launch_bounds__(64) void buffer_load_builtin(const float* in,
                                                                     float* out) {
  const int t = thread_id();
  __amdgpu_buffer_rsrc_t r =
      __builtin_amdgcn_make_buffer_rsrc((void*)in, 0, 64 * 4, 0x00020000);
  out[t] = __builtin_bit_cast(float, __builtin_amdgcn_raw_buffer_load_b32(r, t * 4, 0, 0));
}
#endif

#if __has_builtin(__builtin_amdgcn_global_load_lds)
// global_load_lds_dword: a per-lane global address, the LDS address uniform (M0)
extern "C" __global__ __launch_bounds__(256) void global_load_to_lds(const float* in,
                                                                     float* out) {
  __shared__ float s[256];
  const int t = thread_id();
  __builtin_amdgcn_global_load_lds((GLOBAL void*)(in + t), (LDS void*)(s + 64 * wave_id()), 4,
                                   0, 0);
  __builtin_amdgcn_s_waitcnt(WAIT_VMCNT0);
  syncthreads();
  out[t] = s[255 - t];
}
#endif
