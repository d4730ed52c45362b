// ptc: warpgroup matrix multiply-accumulate (sm90a): wgmma.mma_async m64nNk16, f16/bf16 in,
// f32 accumulators in registers, B (and A, or A from registers) read by the tensor cores
// from shared memory through matrix descriptors. The lowering places the fences, commits
// and waits: wgmma_fence() before the first wgmma after the accumulators or A registers were
// written, wgmma_commit() closes a group, wgmma_wait<N>() leaves N groups in flight (the
// accumulators may be read, and the operand slots released, only after the wait).
//
// Shared-memory operands are tiles written by TMA, in column panels of rows of SPAN bytes
// (128, 64 or 32: swizzled over the span; 16: not swizzled): a K-major operand (A [m][k]) is
// K-panels of its rows, a MN-major one (B [k][n]) N-panels of its k rows. The descriptor's
// two offsets mean different things per major-ness and swizzle (PTX ISA, "Matrix
// Descriptor Format" and "Canonical Layouts"; CUTLASS make_gmma_desc; docs/sm90.md):
//   K-major, swizzled:   SBO = 8 * SPAN (the next 8 rows), LBO unused (1); a k-step of 16
//                        moves 32 bytes within a row (the next panel for SPAN 32).
//   K-major, no swizzle: SBO = 128 (the next 8 rows of 16 bytes), LBO = the bytes of one
//                        panel (the next 8 k).
//   MN-major, swizzled:  LBO = the bytes of one panel (the next SPAN / 2 columns), SBO =
//                        8 * SPAN (the next 8 k rows).
//   MN-major, no swizzle: the other way round: SBO = the bytes of one panel (the next 8
//                        columns), LBO = 128 (the next 8 k rows of 16 bytes).
#pragma once
#include "ptc_types.cuh"
#ifndef PTC_EMULATE
#include "wgmma_instructions.cuh"
#endif

namespace ptc {

// the descriptor of an operand that starts at `addr`, swizzled over SPAN bytes (128, 64, 32;
// 16: none): layout types 1, 2, 3 and 0
template <int SPAN = 128>
__device__ __forceinline__ uint64_t wgmma_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  constexpr uint64_t TYPE = SPAN == 128 ? 1 : SPAN == 64 ? 2 : SPAN == 32 ? 3 : 0;
  return static_cast<uint64_t>((addr & 0x3FFFFu) >> 4) |
         (static_cast<uint64_t>((lbo >> 4) & 0x3FFFu) << 16) |
         (static_cast<uint64_t>((sbo >> 4) & 0x3FFFu) << 32) | (TYPE << 62);
}

// An operand tile in shared memory as TMA wrote it (docs/sm90.md): column panels of
// PANEL_BYTES, each rows of SPAN bytes, swizzled. K-major: the tile's rows are the operand's
// m (or n), its columns k; MN-major: rows are k, columns m (or n). desc(mn, k): the
// descriptor of the m64 (or whole-n) block at mn for the k-step at k.
//
// The descriptor of the tile's origin (this instance's first row, mn0) is built once; each
// (mn, k) adds its constant byte offset / 16 to the start-address field. That field holds
// shared-memory addresses up to 2^18 bytes, more than any block has, so the sum never
// carries out of it; ptxas keeps the origin in uniform registers and each k-step's
// descriptor costs one add. The split is exact because mn0 is a multiple of 64 rows: a
// whole panel (MN-major) or whole rows (K-major).
//
// ELEM is the element's bytes: 2 (f16/bf16) or 1 (8-bit, K-major only). The descriptor
// fields are in bytes either way: a row of SPAN bytes holds SPAN / ELEM elements, and a
// k-step (16 elements, or 32 of 8 bits) is 32 bytes of a row.
template <bool MN_MAJOR, int SPAN, int PANEL_BYTES, int ELEM = 2>
struct SmemOperand {
  static_assert(ELEM == 2 || !MN_MAJOR, "8-bit wgmma operands are K-major (PTX ISA)");
  uint32_t base;
  int mn0;         // the first m (or n) of the operand in the tile (a consumer's rows)
  // the byte offset of element (mn, k) from the tile's first one
  static __device__ __forceinline__ constexpr uint32_t offset(int mn, int k) {
    const int row = MN_MAJOR ? k : mn, col = (MN_MAJOR ? mn : k) * ELEM;
    return (col / SPAN) * PANEL_BYTES + row * SPAN + col % SPAN;
  }
  // the leading and stride byte offsets (see the top of this file)
  static constexpr uint32_t LBO = MN_MAJOR ? (SPAN == 16 ? 8 * 16 : PANEL_BYTES)
                                           : (SPAN == 16 ? PANEL_BYTES : 16);
  static constexpr uint32_t SBO = MN_MAJOR && SPAN == 16 ? PANEL_BYTES : 8 * SPAN;
  __device__ __forceinline__ uint64_t desc(int mn, int k) const {
    const uint64_t origin = wgmma_desc<SPAN>(base + offset(mn0, 0), LBO, SBO);
    return origin + (offset(mn, k) >> 4);
  }
};

// A from registers: the fragments of (m64 block mi, k-step ks), four registers each
template <int KS>
struct RegOperand {
  const uint32_t* r;
  __device__ __forceinline__ const uint32_t* regs(int mi, int ks) const {
    return r + (mi * KS + ks) * 4;
  }
};

__device__ __forceinline__ void wgmma_fence() {
#ifdef PTC_EMULATE
  ::ptc::emu::wgmma_fence();
#else
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

// Pins the accumulators in their registers around a wgmma batch (an empty asm that reads
// and writes each): the compiler may not move their definitions or uses into the span
// from the fence to the wait, where ptxas would serialize the wgmmas (C7515).
// The same for the A fragments of a register-sourced wgmma (RS): they must not be redefined
// before its wait.
template <int SIZE>
__device__ __forceinline__ void wgmma_fence_operands(float* acc) {
#ifndef PTC_EMULATE
#pragma unroll
  for (int i = 0; i < SIZE; ++i) asm volatile("" : "+f"(acc[i])::"memory");
#else
  (void)acc;
#endif
}
template <int SIZE>
__device__ __forceinline__ void wgmma_fence_operands(uint32_t* regs) {
#ifndef PTC_EMULATE
#pragma unroll
  for (int i = 0; i < SIZE; ++i) asm volatile("" : "+r"(regs[i])::"memory");
#else
  (void)regs;
#endif
}

__device__ __forceinline__ void wgmma_commit() {
#ifdef PTC_EMULATE
  ::ptc::emu::wgmma_commit();
#else
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

template <int N>
__device__ __forceinline__ void wgmma_wait() {
#ifdef PTC_EMULATE
  ::ptc::emu::wgmma_wait(N);
#else
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory");
#endif
}

template <int SIZE>
__device__ __forceinline__ void wgmma_fence_operands(int* acc) {
#ifndef PTC_EMULATE
#pragma unroll
  for (int i = 0; i < SIZE; ++i) asm volatile("" : "+r"(acc[i])::"memory");
#else
  (void)acc;
#endif
}

// d (N / 2 floats) = (scale_d ? d : 0) + A B, A and B by descriptors
template <int N, bool BF16, int TRANS_A, int TRANS_B>
__device__ __forceinline__ void wgmma_ss(float* d, uint64_t desc_a, uint64_t desc_b,
                                         int scale_d) {
#ifdef PTC_EMULATE
  ::ptc::emu::wgmma_issue<N, BF16>(d, nullptr, desc_a, desc_b, scale_d, TRANS_A, TRANS_B);
#else
  ptx::Wgmma<N>::template ss<BF16, TRANS_A, TRANS_B>(d, desc_a, desc_b, scale_d);
#endif
}

// A from registers: the m64k16 fragment of 16-bit pairs, four per thread (as mma.sync's A)
template <int N, bool BF16, int TRANS_B>
__device__ __forceinline__ void wgmma_rs(float* d, const uint32_t* a, uint64_t desc_b,
                                         int scale_d) {
#ifdef PTC_EMULATE
  ::ptc::emu::wgmma_issue<N, BF16>(d, a, 0, desc_b, scale_d, 0, TRANS_B);
#else
  ptx::Wgmma<N>::template rs<BF16, TRANS_B>(d, a, desc_b, scale_d);
#endif
}

// One wgmma of m64 block mi and k-step ks: A from registers (RS) or by descriptor (SS)
template <int N, bool BF16, int TRANS_A, int TRANS_B, int KS>
__device__ __forceinline__ void wgmma_atom(float* d, const RegOperand<KS>& a, int mi, int ks,
                                           uint64_t desc_b, int scale_d) {
  wgmma_rs<N, BF16, TRANS_B>(d, a.regs(mi, ks), desc_b, scale_d);
}
template <int N, bool BF16, int TRANS_A, int TRANS_B, bool MN_MAJOR, int SPAN, int PANEL_BYTES>
__device__ __forceinline__ void wgmma_atom(float* d,
                                           const SmemOperand<MN_MAJOR, SPAN, PANEL_BYTES>& a,
                                           int mi, int ks, uint64_t desc_b, int scale_d) {
  wgmma_ss<N, BF16, TRANS_A, TRANS_B>(d, a.desc(mi * 64, ks * 16), desc_b, scale_d);
}

// acc (MI m64 blocks of N / 2 floats) = (accumulate ? acc : 0) + A B over KS k-steps, one
// wgmma per block and k-step, fenced before and committed after (wait with wgmma_wait).
// A is a RegOperand (its fragments in registers; TRANS_A is then 0) or a SmemOperand.
template <int N, int MI, int KS, bool BF16, int TRANS_A, int TRANS_B, class A, class B>
__device__ __forceinline__ void wgmma_tile(float* acc, const A& a, const B& b, bool accumulate) {
  wgmma_fence_operands<MI * N / 2>(acc);
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < KS; ++ks)
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
      wgmma_atom<N, BF16, TRANS_A, TRANS_B>(acc + mi * (N / 2), a, mi, ks, b.desc(0, ks * 16),
                                            (accumulate || ks > 0) ? 1 : 0);
  wgmma_commit();
  wgmma_fence_operands<MI * N / 2>(acc);
}

// ---- 8-bit inputs: wgmma.mma_async m64nNk32 ------------------------------------------------
// .s32.s8.s8 (int accumulators; sums wrap modulo 2^32 without .satfinite) and
// .f32.{e4m3,e5m2}.{e4m3,e5m2} (f32 accumulators). Both operands K-major: the instruction
// has no transpose operands for 8-bit types (PTX ISA, wgmma.mma_async). A k-step is 32
// elements = 32 bytes of each row, as k16 of f16.
enum class Wgmma8Kind { S8, E4M3_E4M3, E4M3_E5M2, E5M2_E4M3, E5M2_E5M2 };

// A by descriptor (a_regs null) or from registers (RS: four registers of four bytes, the
// m64k32 fragment of mma.sync m16n8k32's A per warp)
template <int N, Wgmma8Kind KIND>
__device__ __forceinline__ void wgmma8(int* d, const uint32_t* a_regs, uint64_t desc_a,
                                       uint64_t desc_b, int scale_d) {
  static_assert(KIND == Wgmma8Kind::S8, "int accumulators are .s8's");
#ifdef PTC_EMULATE
  ::ptc::emu::wgmma8_issue<N, static_cast<int>(KIND)>(d, a_regs, desc_a, desc_b, scale_d);
#else
  if (a_regs) ptx::Wgmma8<N>::rs_s8(d, a_regs, desc_b, scale_d);
  else ptx::Wgmma8<N>::ss_s8(d, desc_a, desc_b, scale_d);
#endif
}

template <int N, Wgmma8Kind KIND>
__device__ __forceinline__ void wgmma8(float* d, const uint32_t* a_regs, uint64_t desc_a,
                                       uint64_t desc_b, int scale_d) {
  static_assert(KIND != Wgmma8Kind::S8, "f32 accumulators are FP8's");
#ifdef PTC_EMULATE
  ::ptc::emu::wgmma8_issue<N, static_cast<int>(KIND)>(d, a_regs, desc_a, desc_b, scale_d);
#else
  using W = ptx::Wgmma8<N>;
  if (a_regs) {
    if constexpr (KIND == Wgmma8Kind::E4M3_E4M3) W::rs_e4m3_e4m3(d, a_regs, desc_b, scale_d);
    else if constexpr (KIND == Wgmma8Kind::E4M3_E5M2) W::rs_e4m3_e5m2(d, a_regs, desc_b, scale_d);
    else if constexpr (KIND == Wgmma8Kind::E5M2_E4M3) W::rs_e5m2_e4m3(d, a_regs, desc_b, scale_d);
    else W::rs_e5m2_e5m2(d, a_regs, desc_b, scale_d);
  } else {
    if constexpr (KIND == Wgmma8Kind::E4M3_E4M3) W::ss_e4m3_e4m3(d, desc_a, desc_b, scale_d);
    else if constexpr (KIND == Wgmma8Kind::E4M3_E5M2) W::ss_e4m3_e5m2(d, desc_a, desc_b, scale_d);
    else if constexpr (KIND == Wgmma8Kind::E5M2_E4M3) W::ss_e5m2_e4m3(d, desc_a, desc_b, scale_d);
    else W::ss_e5m2_e5m2(d, desc_a, desc_b, scale_d);
  }
#endif
}

// One 8-bit wgmma of m64 block mi and k-step ks: A from registers (RS) or by descriptor (SS)
template <int N, Wgmma8Kind KIND, class Acc, int KS>
__device__ __forceinline__ void wgmma8_atom(Acc* d, const RegOperand<KS>& a, int mi, int ks,
                                            uint64_t desc_b, int scale_d) {
  wgmma8<N, KIND>(d, a.regs(mi, ks), 0, desc_b, scale_d);
}
template <int N, Wgmma8Kind KIND, class Acc, int SPAN, int PANEL_BYTES>
__device__ __forceinline__ void wgmma8_atom(Acc* d, const SmemOperand<false, SPAN, PANEL_BYTES, 1>& a,
                                            int mi, int ks, uint64_t desc_b, int scale_d) {
  wgmma8<N, KIND>(d, nullptr, a.desc(mi * 64, ks * 32), desc_b, scale_d);
}

__device__ __forceinline__ uint8_t byte_bits(int8_t x) { return static_cast<uint8_t>(x); }
__device__ __forceinline__ uint8_t byte_bits(uint8_t x) { return x; }
__device__ __forceinline__ uint8_t byte_bits(f8e4m3 x) { return x.bits; }
__device__ __forceinline__ uint8_t byte_bits(f8e5m2 x) { return x.bits; }

// The four-byte registers of an 8-bit A operand (RS), from its bytes in the register tile's
// order (four consecutive k a register): byte 4w + j is bits 8j.. of word w
template <int WORDS, class T>
__device__ __forceinline__ void pack_bytes(uint32_t* words, const T* bytes) {
  static_assert(sizeof(T) == 1, "8-bit values");
#pragma unroll
  for (int w = 0; w < WORDS; ++w) {
    uint32_t v = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      v |= static_cast<uint32_t>(byte_bits(bytes[4 * w + j])) << (8 * j);
    }
    words[w] = v;
  }
}

// acc (MI m64 blocks of N / 2 ints or floats) = (accumulate ? acc : 0) + A B over KS k-steps
// of 32: B a K-major tile in shared memory (SmemOperand<false, SPAN, PANEL, 1>), A one too or
// its packed fragments in registers (RegOperand<KS>, from pack_bytes)
template <int N, int MI, int KS, Wgmma8Kind KIND, class Acc, class A, class B>
__device__ __forceinline__ void wgmma_tile8(Acc* acc, const A& a, const B& b, bool accumulate) {
  wgmma_fence_operands<MI * N / 2>(acc);
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < KS; ++ks)
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
      wgmma8_atom<N, KIND>(acc + mi * (N / 2), a, mi, ks, b.desc(0, ks * 32),
                           (accumulate || ks > 0) ? 1 : 0);
  wgmma_commit();
  wgmma_fence_operands<MI * N / 2>(acc);
}

}  // namespace ptc
