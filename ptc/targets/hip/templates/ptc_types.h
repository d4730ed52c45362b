// ptc device helpers for HIP (gfx90a, gfx942): element types, rounding and integer
// semantics of the .pt language, thread ids, the block barrier and LDS accesses.
// Device code uses clang's AMDGPU builtins only, never HIP's device library, so one source
// builds with a current ROCm (hipcc), with Debian's HIP 5.2 headers and clang-19
// `-nogpulib` (CI), and -- with -DPTC_EMULATE -- with g++ on the CPU, where
// emulate/ptc_emulate_hip.h supplies the same builtins with wave64 semantics (docs/hip.md).
// Values are computed in f32 and rounded once to their dtype, as the reference interpreter
// does; // and % floor (Python semantics).
#pragma once
#include <stdint.h>

namespace ptc {
// The operand and accumulator vectors of the matrix builtins (clang's ext_vector_type; the
// host compiler's vector_size in the emulation).
#ifdef PTC_EMULATE
#define PTC_VECTOR(T, N) __attribute__((vector_size((N) * sizeof(T))))
#else
#define PTC_VECTOR(T, N) __attribute__((ext_vector_type(N)))
#endif
typedef float f32x4 PTC_VECTOR(float, 4);
typedef float f32x16 PTC_VECTOR(float, 16);
typedef short i16x4 PTC_VECTOR(short, 4);
typedef _Float16 f16x4 PTC_VECTOR(_Float16, 4);
typedef int i32x2 PTC_VECTOR(int, 2);
typedef int i32x4 PTC_VECTOR(int, 4);
typedef int i32x16 PTC_VECTOR(int, 16);
#undef PTC_VECTOR

// 16-bit storage types: bits only; arithmetic happens in f32.
struct f16 { uint16_t bits; };
struct bf16 { uint16_t bits; };

// vectors of 32-bit words: one global or LDS access of 8 or 16 bytes
struct alignas(8) u32x2 { uint32_t x, y; };
struct alignas(16) u32x4 { uint32_t x, y, z, w; };
}  // namespace ptc

// Global-memory accesses of the helpers go through PTC_GLOBAL(pointer): the identity on the
// GPU, a bounds check against the caller's tensors in the CPU emulation.
#ifdef PTC_EMULATE
#include <source_location>
#include "emulate/ptc_emulate_hip.h"
#define PTC_GLOBAL(p) (::ptc::emu::global_access(p))
#else
#include <hip/hip_runtime.h>
#define PTC_GLOBAL(p) (p)
// the block's dynamic LDS (in the CPU emulation: ptc_emulate_hip.h's array)
extern __shared__ __attribute__((aligned(1024))) unsigned char ptc_smem[];
#endif

// A workgroup of T threads that leaves each SIMD room for W waves: the register budget the
// plan was made for (512 / W unified VGPRs per lane). Nothing in the CPU emulation (g++ parses
// the arguments of attributes it does not know, and rejects a conditional expression there).
#ifdef PTC_EMULATE
#define PTC_BOUNDS(T, W)
#else
#define PTC_BOUNDS(T, W) __attribute__((amdgpu_flat_work_group_size(1, T), amdgpu_waves_per_eu(W)))
#endif

namespace ptc {

__device__ __forceinline__ int thread_id() { return (int)__builtin_amdgcn_workitem_id_x(); }
// the wave of thread `tid`, in a scalar register (it is the same for all 64 lanes)
__device__ __forceinline__ int wave_id(int tid) {
#ifdef PTC_EMULATE
  return tid >> 6;
#else
  return __builtin_amdgcn_readfirstlane(tid >> 6);
#endif
}
__device__ __forceinline__ long long block_id() { return (long long)__builtin_amdgcn_workgroup_id_x(); }

// __syncthreads without the device library: the workgroup fences make the barrier wait for
// this wave's LDS writes (s_waitcnt lgkmcnt(0); s_barrier), CK's block_sync_lds.
__device__ __forceinline__ void syncthreads() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}

// LDS addresses are byte offsets into the block's dynamic LDS.
__device__ __forceinline__ uint32_t shared_base() { return 0u; }

#ifdef PTC_EMULATE
template <typename T>
__device__ __forceinline__ T ld_shared(uint32_t addr,
                                       std::source_location where = std::source_location::current()) {
  return ::ptc::emu::shared_load(reinterpret_cast<const T*>(ptc_smem + addr), where);
}
template <typename T>
__device__ __forceinline__ void st_shared(uint32_t addr, T v,
                                          std::source_location where = std::source_location::current()) {
  ::ptc::emu::shared_store(reinterpret_cast<T*>(ptc_smem + addr), v, where);
}
#else
template <typename T> __device__ __forceinline__ T ld_shared(uint32_t addr) {
  return *reinterpret_cast<const T*>(ptc_smem + addr);
}
template <typename T> __device__ __forceinline__ void st_shared(uint32_t addr, T v) {
  *reinterpret_cast<T*>(ptc_smem + addr) = v;
}
#endif

// integer min and max of index arithmetic (HIP's overloads live in its device library headers)
template <typename T> __host__ __device__ __forceinline__ T min(T a, T b) { return a < b ? a : b; }
template <typename T> __host__ __device__ __forceinline__ T max(T a, T b) { return a < b ? b : a; }

__device__ __forceinline__ float bits_f32(uint32_t u) { return __builtin_bit_cast(float, u); }
__device__ __forceinline__ uint32_t f32_bits(float x) { return __builtin_bit_cast(uint32_t, x); }

// f32 -> bf16 to nearest even in integers (CDNA2/3 have no conversion instruction); NaN
// stays a quiet NaN
__device__ __forceinline__ uint16_t bf16_bits(float x) {
  const uint32_t u = f32_bits(x);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet = (u >> 16) | 0x40u;
  // a select of two computed values, not a branch around one
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
}
__device__ __forceinline__ uint16_t f16_bits(float x) {
  return __builtin_bit_cast(uint16_t, static_cast<_Float16>(x));   // v_cvt_f16_f32: nearest even
}
__device__ __forceinline__ float bf16_f32(uint16_t b) { return bits_f32(static_cast<uint32_t>(b) << 16); }
__device__ __forceinline__ float f16_f32(uint16_t b) {
  return static_cast<float>(__builtin_bit_cast(_Float16, b));
}

// the rest of the primitives of the device code every backend shares, and that code
// (templates/common/ptc_numerics.h)
__device__ __forceinline__ float rint_f32(float x) { return __builtin_rintf(x); }
__device__ __forceinline__ float fmin_f32(float a, float b) { return __builtin_fminf(a, b); }
__device__ __forceinline__ float fmax_f32(float a, float b) { return __builtin_fmaxf(a, b); }
#define PTC_IN_FLIGHT_F32(x) ((void)0)      // (the sm90 emulator's check: nothing here)
}  // namespace ptc
#include "ptc_numerics.h"
namespace ptc {

__device__ __forceinline__ float f32(f16 x) { return f16_f32(x.bits); }
__device__ __forceinline__ float f32(bf16 x) { return bf16_f32(x.bits); }

// round an f32 value to the precision of a dtype, staying in f32
__device__ __forceinline__ float round_f16(float x) { return f16_f32(f16_bits(x)); }
__device__ __forceinline__ float round_bf16(float x) { return bf16_f32(bf16_bits(x)); }
// TF32: 10 mantissa bits, to nearest with ties away from zero (as CUDA's cvt.rna.tf32.f32);
// the low 13 bits cleared. CDNA2 has no TF32 instruction: the value is what `as tf32` means.
__device__ __forceinline__ float round_tf32(float x) {
  uint32_t u = f32_bits(x);
  if ((u & 0x7f800000u) != 0x7f800000u) u += 0x1000u;
  return bits_f32(u & 0xffffe000u);
}

template <> __device__ __forceinline__ f16 from_f32<f16>(float x) { return f16{f16_bits(x)}; }
template <> __device__ __forceinline__ bf16 from_f32<bf16>(float x) { return bf16{bf16_bits(x)}; }

// f16 arithmetic in 16 bits (the renderer's `native16`: v_add_f16, v_sub_f16, v_mul_f16,
// never contracted into an fma). Each equals the interpreter's f32 operation rounded once to
// f16: the f32 sum, difference or product of two f16 values rounds to f16 as the exact one
// does (24 >= 2 * 11 + 2 bits), so the emulation computes it that way. bf16 has no such
// instructions on CDNA2/3 and stays in f32.
#ifdef PTC_EMULATE
__device__ __forceinline__ f16 add_rn(f16 a, f16 b) { return f16{f16_bits(f16_f32(a.bits) + f16_f32(b.bits))}; }
__device__ __forceinline__ f16 sub_rn(f16 a, f16 b) { return f16{f16_bits(f16_f32(a.bits) - f16_f32(b.bits))}; }
__device__ __forceinline__ f16 mul_rn(f16 a, f16 b) { return f16{f16_bits(f16_f32(a.bits) * f16_f32(b.bits))}; }
#else
__device__ __forceinline__ _Float16 h16(f16 a) { return __builtin_bit_cast(_Float16, a.bits); }
__device__ __forceinline__ f16 f16_of(_Float16 x) { return f16{__builtin_bit_cast(uint16_t, x)}; }
__device__ __forceinline__ f16 add_rn(f16 a, f16 b) {
#pragma clang fp contract(off)
  return f16_of(h16(a) + h16(b));
}
__device__ __forceinline__ f16 sub_rn(f16 a, f16 b) {
#pragma clang fp contract(off)
  return f16_of(h16(a) - h16(b));
}
__device__ __forceinline__ f16 mul_rn(f16 a, f16 b) {
#pragma clang fp contract(off)
  return f16_of(h16(a) * h16(b));
}
#endif
// an integer as f16 (to nearest even: exact through f32 up to 2^24, infinite beyond 65519)
template <typename T> __device__ __forceinline__ T from_int(int x);
template <> __device__ __forceinline__ f16 from_int<f16>(int x) { return f16{f16_bits(static_cast<float>(x))}; }
// an integer the renderer knows fits 16 bits (ptc.sema.ranges) as f16: v_cvt_f16_i16, one
// instruction where a 32-bit one converts through f32 (the same value either way)
template <typename T> __device__ __forceinline__ T from_short(short x);
#ifdef PTC_EMULATE
template <> __device__ __forceinline__ f16 from_short<f16>(short x) { return from_int<f16>(x); }
#else
template <> __device__ __forceinline__ f16 from_short<f16>(short x) { return f16_of(static_cast<_Float16>(x)); }
#endif
// a 16-bit value from its bits (a literal), and any value as a 16-bit one: itself, or a
// float that holds a value of the dtype already
template <typename T> __device__ __forceinline__ T from_bits(uint16_t b) { return T{b}; }
template <typename T> __device__ __forceinline__ T as16(T x) { return x; }
template <typename T> __device__ __forceinline__ T as16(float x) { return from_f32<T>(x); }

// math without the device library (docs/hip.md, "Math without the device library")
__device__ __forceinline__ float log_(float x) { return __builtin_logf(x); }
__device__ __forceinline__ float sqrt_(float x) { return __builtin_sqrtf(x); }
__device__ __forceinline__ float rsqrt_(float x) { return 1.0f / __builtin_sqrtf(x); }
__device__ __forceinline__ float sigmoid_(float x) { return 1.0f / (1.0f + __builtin_expf(-x)); }

// tanh and erf from exp and polynomials (the device library's tanhf and erff are not
// linked), within 3 ulp of the exact values on [-10, 10] (checked in float32 against
// Python's math.tanh and math.erf when they were written). Horner's rule in fmas, written
// out: no coefficient array a compiler might leave in scratch memory.
__device__ __forceinline__ float tanh_(float x) {
  // |x| < 0.55: tanh(x) / x as a polynomial in x^2 (least squares at Chebyshev points);
  // beyond: 1 - 2 / (e^2|x| + 1), which has no cancellation there
  const float a = __builtin_fabsf(x), y = a * a;
  float p = 0.00033994284f;
  p = __builtin_fmaf(p, y, -0.0013220828f);
  p = __builtin_fmaf(p, y, 0.0035508634f);
  p = __builtin_fmaf(p, y, -0.0088555198f);
  p = __builtin_fmaf(p, y, 0.021868611f);
  p = __builtin_fmaf(p, y, -0.053968195f);
  p = __builtin_fmaf(p, y, 0.13333333f);
  p = __builtin_fmaf(p, y, -0.33333334f);
  p = __builtin_fmaf(p, y, 1.0f);
  const float t = a < 0.55f ? a * p : 1.0f - 2.0f / (__builtin_expf(2.0f * a) + 1.0f);
  return __builtin_copysignf(t, x);
}
__device__ __forceinline__ float erf_(float x) {
  // |x| < 1: erf(x) / x as a polynomial in x^2; beyond: 1 - erfc(x), with erfc(x) =
  // t exp(-x^2 + P(t)), t = 1 / (1 + x / 2) (Numerical Recipes' erfcc, relative error
  // below 1.2e-7)
  const float a = __builtin_fabsf(x);
  float e;
  if (a < 1.0f) {
    const float y = a * a;
    float p = -1.0278738e-07f;
    p = __builtin_fmaf(p, y, 1.5216295e-06f);
    p = __builtin_fmaf(p, y, -1.4777102e-05f);
    p = __builtin_fmaf(p, y, 0.00012044312f);
    p = __builtin_fmaf(p, y, -0.00085478078f);
    p = __builtin_fmaf(p, y, 0.0052239625f);
    p = __builtin_fmaf(p, y, -0.026866168f);
    p = __builtin_fmaf(p, y, 0.11283792f);
    p = __builtin_fmaf(p, y, -0.37612638f);
    p = __builtin_fmaf(p, y, 1.1283792f);
    e = a * p;
  } else {
    const float t = 1.0f / (1.0f + 0.5f * a);
    float p = 0.17087277f;
    p = __builtin_fmaf(p, t, -0.82215223f);
    p = __builtin_fmaf(p, t, 1.48851587f);
    p = __builtin_fmaf(p, t, -1.13520398f);
    p = __builtin_fmaf(p, t, 0.27886807f);
    p = __builtin_fmaf(p, t, -0.18628806f);
    p = __builtin_fmaf(p, t, 0.09678418f);
    p = __builtin_fmaf(p, t, 0.37409196f);
    p = __builtin_fmaf(p, t, 1.00002368f);
    p = __builtin_fmaf(p, t, -1.26551223f);
    e = 1.0f - t * __builtin_expf(p - a * a);
  }
  return __builtin_copysignf(e, x);
}

// exp2 and exp on the transcendental unit (docs/language.md, "Numerics"): one v_exp_f32,
// and for exp a multiply by log2(e) before it. Results below 2^-126 flush to zero;
// exp2(-inf) is 0.
__device__ __forceinline__ float exp2_sfu(float x) {
#if defined(PTC_EMULATE)
  const float y = __builtin_exp2f(x);
  return y < 1.17549435e-38f ? 0.0f : y;
#elif __has_builtin(__builtin_amdgcn_exp2f)
  return __builtin_amdgcn_exp2f(x);
#else
  return __builtin_exp2f(x);
#endif
}
__device__ __forceinline__ float exp_sfu(float x) { return exp2_sfu(x * 1.4426950408889634f); }

// atomic_add into 16-bit outputs: HIP's atomicAdd takes 32-bit values, so a 16-bit element
// is added by a compare-and-swap loop on the aligned 32-bit word that holds it (as CK adds
// half_t), the sum rounded once to the element's dtype, as CUDA's 16-bit atomicAdd does.
// In the CPU emulation a block's threads are fibers of one OS thread: a read-modify-write
// is atomic. (Issue 20's coverage: the renderer's atomicAdd of ptc::f16 / ptc::bf16 had
// no overload and built neither with clang nor with the emulator.)
template <typename T>
__device__ __forceinline__ void atomic_add16(T* p, T v) {
#ifdef PTC_EMULATE
  T* q = ::ptc::emu::atomic_target(p);
  *q = from_f32<T>(f32(*q) + f32(v));
#else
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  unsigned* word = reinterpret_cast<unsigned*>(at & ~static_cast<uintptr_t>(3));
  const unsigned shift = (at & 2) ? 16u : 0u;
  unsigned old = *word, seen;
  do {
    seen = old;
    const T now{static_cast<uint16_t>(seen >> shift)};
    const unsigned sum = from_f32<T>(f32(now) + f32(v)).bits;
    old = atomicCAS(word, seen, (seen & ~(0xffffu << shift)) | (sum << shift));
  } while (old != seen);
#endif
}
// found by argument-dependent lookup where the kernel adds a 16-bit value into an output
__device__ __forceinline__ void atomicAdd(f16* p, f16 v) { atomic_add16(p, v); }
__device__ __forceinline__ void atomicAdd(bf16* p, bf16 v) { atomic_add16(p, v); }

// 16-bit register tiles hold two values per 32-bit register, the lower index in the low half
// (unpack and set_half: ptc_numerics.h).
template <> struct Half16<f16> {
  __device__ __forceinline__ static float lo(uint32_t r) { return f16_f32(static_cast<uint16_t>(r & 0xffffu)); }
  __device__ __forceinline__ static float hi(uint32_t r) { return f16_f32(static_cast<uint16_t>(r >> 16)); }
  __device__ __forceinline__ static uint32_t pack(float a, float b) {
    return static_cast<uint32_t>(f16_bits(a)) | (static_cast<uint32_t>(f16_bits(b)) << 16);
  }
  __device__ __forceinline__ static uint32_t one(float a) { return f16_bits(a); }
};
template <> struct Half16<bf16> {
  __device__ __forceinline__ static float lo(uint32_t r) { return bits_f32(r << 16); }
  __device__ __forceinline__ static float hi(uint32_t r) { return bits_f32(r & 0xffff0000u); }
  __device__ __forceinline__ static uint32_t pack(float a, float b) {
    return static_cast<uint32_t>(bf16_bits(a)) | (static_cast<uint32_t>(bf16_bits(b)) << 16);
  }
  __device__ __forceinline__ static uint32_t one(float a) { return bf16_bits(a); }
};
// two 16-bit values, or one, as the register word of a packed tile
template <typename T> __device__ __forceinline__ uint32_t pack16(T a, T b) {
  return static_cast<uint32_t>(a.bits) | (static_cast<uint32_t>(b.bits) << 16);
}
template <typename T> __device__ __forceinline__ uint32_t one16(T a) { return a.bits; }

// ---- 16-bit values a register at a time (ir.Compute.pairs, ptc/lower/pairs.py) ------------
// An integer a in 0..1023 is the f16 with the bits 0x6400 | a, less 1024.0 (the mantissa
// holds a exactly): two such integers are one register word with one or.
template <> struct Bias16<f16> { static constexpr uint32_t pair = 0x64006400u; };
// nibble S / 4 of two words, biased: byte S / 8 of w0 and of w1 into the word's halves
// (v_perm_b32), shifted down where the nibble is the byte's high half, masked and biased
// (v_and_or_b32)
template <typename T, int S> __device__ __forceinline__ uint32_t nibbles16(uint32_t w0, uint32_t w1) {
  static_assert(S % 4 == 0 && S >= 0 && S < 32, "a nibble starts at a multiple of 4 bits");
  constexpr uint32_t b = S / 8;
  uint32_t t = __builtin_amdgcn_perm(w1, w0, b | (0x0cu << 8) | ((4u + b) << 16) | (0x0cu << 24));
  if (S % 8 == 4) t >>= 4;
#ifdef PTC_EMULATE
  return (t & 0x000f000fu) | Bias16<T>::pair;
#else
  // the bias in a VGPR the loop keeps (an empty asm hides the constant from folding), so
  // the mask and the or are one v_and_or_b32: a VOP3 on gfx9 takes no literal and reads one
  // scalar register at most, so with both constants literal clang splits it in two
  uint32_t bias = Bias16<T>::pair;
  asm("" : "+v"(bias));
  return (t & 0x000f000fu) | bias;
#endif
}
// + - * of two f16 pairs (v_pk_add_f16, v_pk_mul_f16: each half rounded once, as add_rn etc.)
#ifdef PTC_EMULATE
}  // namespace ptc
#include "ptc_emulate_pairs.h"
namespace ptc {
#else
typedef _Float16 f16x2 __attribute__((ext_vector_type(2)));
__device__ __forceinline__ f16x2 h16x2(uint32_t a) { return __builtin_bit_cast(f16x2, a); }
__device__ __forceinline__ uint32_t word_of(f16x2 x) { return __builtin_bit_cast(uint32_t, x); }
template <typename T> __device__ __forceinline__ uint32_t pk_add(uint32_t a, uint32_t b);
template <typename T> __device__ __forceinline__ uint32_t pk_sub(uint32_t a, uint32_t b);
template <typename T> __device__ __forceinline__ uint32_t pk_mul(uint32_t a, uint32_t b);
template <> __device__ __forceinline__ uint32_t pk_add<f16>(uint32_t a, uint32_t b) {
#pragma clang fp contract(off)
  return word_of(h16x2(a) + h16x2(b));
}
template <> __device__ __forceinline__ uint32_t pk_sub<f16>(uint32_t a, uint32_t b) {
#pragma clang fp contract(off)
  return word_of(h16x2(a) - h16x2(b));
}
template <> __device__ __forceinline__ uint32_t pk_mul<f16>(uint32_t a, uint32_t b) {
#pragma clang fp contract(off)
  return word_of(h16x2(a) * h16x2(b));
}
#endif

}  // namespace ptc
