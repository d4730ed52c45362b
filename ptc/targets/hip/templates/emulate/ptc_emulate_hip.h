// ptc CPU emulation for HIP (gfx90a, gfx942): the kernel.hip that clang compiles for the GPU,
// compiled by g++ -std=c++20 -DPTC_EMULATE (ptc/render/emulate.py). ptc_types.h includes
// this file under PTC_EMULATE, after defining the vector types ptc::f32x4, f32x16, i16x4,
// f16x4, i32x4 and i32x16. Nothing here is used by GPU builds.
//
// It supplies what hip_runtime.h gives kernels (keywords, vector types, min / max, atomicAdd:
// emulate_core/ptc_emulate_lang.h, shared with CUDA) and, as host functions of the same
// names, the clang AMDGPU builtins the device headers call, with wave64 semantics: a wave
// is 64 consecutive threads of the workgroup. The execution model is the shared core's
// (emulate_core/ptc_emulate_core.h): threads are fibers, waves run as far as the barriers
// allow in forward, reverse or random order, LDS (ptc_smem, at most 64 KB) is filled with
// 0xFF bytes (NaN) and bounds-checked, s_barrier deadlocks are reported.
//
// Cross-lane builtins (DPP, ds_swizzle, ds_bpermute, readfirstlane, readlane) and the MFMA
// instructions are wave collectives: every lane of the wave deposits its operands, the wave
// meets, each lane computes its own result from the deposits. A wave in which some lanes
// skip the instruction deadlocks (reported); lanes at different collectives, or giving
// different immediates (controls, patterns, MFMA modifiers), are reported. Sources for each
// instruction's semantics are given where it is defined (docs/hip.md has them all).
//
// LDS bank conflicts are counted for the loads and stores of ptc::ld_shared / st_shared
// (shared_load / shared_store), by AMD's rule (docs/hip.md, "LDS"; CK's
// lds_bank_conflicts.rst): 32 banks of 4 bytes; ds_read_b128 in 8 phases of lanes {0-3,
// 20-23}, {4-7, 16-19}, {8-11, 28-31}, {12-15, 24-27} and the same + 32; other accesses in
// phases of 128 bytes of consecutive lanes (ds_write_b128 8 lanes, b64 16, b32 and less 32).
//
// Register-staged tile copies (global_to_shared.h) need nothing of the emulator: the global
// loads read the tensors (bounds-checked) when issued and `land` writes LDS when called, so a
// landing that is missing or comes after its readers shows up as wrong numbers. Waits
// (s_waitcnt) are the compiler's on this path and no-ops here.
#pragma once
#ifndef PTC_EMULATE
#error "ptc_emulate_hip.h is ptc's CPU emulation of HIP: compile with -DPTC_EMULATE"
#endif
#include <cstdint>
#include <source_location>

#ifndef PTC_EMU_SMEM_CAPACITY
#define PTC_EMU_SMEM_CAPACITY (64 * 1024)   // LDS per workgroup on gfx90a and gfx942
#endif
#define PTC_EMU_WARP 64
#define PTC_EMU_WARP_NAME "wave"
#define PTC_EMU_BARRIER_NAME "s_barrier"
#define PTC_EMU_SMEM_NAME "LDS"

namespace ptc {
namespace emu {
enum State { READY, AT_BLOCK_BARRIER, AT_WARP_BARRIER, DONE, STATES };
struct FiberExt {};
}  // namespace emu
}  // namespace ptc

#include "ptc_emulate_core.h"
#include "ptc_emulate_half.h"   // f16 codes decoded (MFMA operands)
#include "ptc_emulate_lang.h"   // keywords, uint2 / make_uint2, min / max, atomicAdd: as HIP's

// what the launch code returns (HIP's hipError_t values)
typedef enum hipError_t {
  hipSuccess = 0,
  hipErrorInvalidValue = 1,
  hipErrorInvalidConfiguration = 9,
  hipErrorIllegalAddress = 700,
  hipErrorLaunchFailure = 719,
} hipError_t;
typedef struct ihipStream_t* hipStream_t;

namespace ptc {
namespace emu {

// ---- the core's hooks -----------------------------------------------------------------------
inline void backend_launch(long long, int) {}
inline void backend_block_start(int) {}
inline void backend_switch(int) {}
inline bool backend_progress() { return false; }
inline void backend_block_end() {}

inline const char* state_count_label(State s) {
  switch (s) {
    case AT_BLOCK_BARRIER: return "at s_barrier";
    case AT_WARP_BARRIER: return "at a wave-collective instruction";
    case DONE: return "finished";
    default: return nullptr;
  }
}
inline const char* state_name(State s) {
  switch (s) {
    case READY: return "ready";
    case AT_BLOCK_BARRIER: return "at s_barrier";
    case AT_WARP_BARRIER: return "at a wave-collective instruction";
    default: return "finished";
  }
}
inline void state_detail(const Fiber& g, char* out, size_t n) {
  if (g.state == AT_WARP_BARRIER) snprintf(out, n, ": %s", g.waiting_at);
}

// ds_read_b128's phases (CK): lanes {0-3, 20-23}, {4-7, 16-19}, {8-11, 28-31}, {12-15, 24-27},
// then the same + 32; everything else in 128-byte phases of consecutive lanes
inline int bank_phase(int kind, int bytes, int lane) {
  if (kind == ACC_LDS && bytes == 16) {
    static const int quad_phase[8] = {0, 1, 2, 3, 1, 0, 3, 2};   // lanes 4q .. 4q + 3
    return quad_phase[(lane % 32) / 4] + 4 * (lane / 32);
  }
  return consecutive_phase(bytes, lane);
}

// ---- ids --------------------------------------------------------------------------------------
inline int thread_index(const char* what) {
  if (rt.current < 0) { fail("%s outside a kernel", what); return 0; }
  return rt.current;
}

// ---- wave collectives -------------------------------------------------------------------------
enum Kind { NONE = 0, DPP, SWIZZLE, BPERMUTE, READFIRSTLANE, READLANE, MFMA_16x16x16_F16,
            MFMA_16x16x16_BF16, MFMA_32x32x8_F16, MFMA_32x32x8_BF16, MFMA_16x16x16_I8,
            MFMA_32x32x8_I8, MFMA_16x16x32_I8, MFMA_32x32x16_I8, BALLOT,
            MFMA_16x16x32_F8,                   // + 2 (A is bf8) + (B is bf8): four kinds
            MFMA_32x32x16_F8 = MFMA_16x16x32_F8 + 4 };

// Deposit `value` and an immediate of this lane; after the wave meets, check that every lane
// reached the same instruction with the same immediate. Returns the buffer, or -1.
inline int exchange(Kind kind, unsigned long long value, unsigned immediate, const char* what) {
  if (rt.current < 0) { fail("%s outside a kernel", what); return -1; }
  Fiber& f = cur();
  WarpScratch& s = rt.warps[warp_of(f)];
  const int buf = deposit(kind);
  s.v[buf][lane_of(f)] = value;
  s.a[buf][lane_of(f)][3] = immediate;
  warp_barrier(what);
  if (!same_kind(s, buf, kind, what)) return -1;
  for (int l = 0; l < WARP; ++l) {
    if (s.a[buf][l][3] != immediate) {
      fail("%s: lane %d of the wave gives 0x%x, lane %d 0x%x: the lanes of a wave execute "
           "one instruction with one set of controls", what, l, s.a[buf][l][3], lane_of(f),
           immediate);
      return -1;
    }
  }
  return buf;
}

// DPP (GFX9 DppCtrl; LLVM AMDGPU::DPP, AMD "Vega" ISA 6.2.2): the lane `lane` reads, or -1 when
// the source is out of range (a shift past its row or the wave, a broadcast into row 0 or 1).
// Rows are 16 lanes. row_shl:n reads lane + n and row_shr:n lane - n within the row (LLVM's
// scans use row_shr so: lane l adds lane l - 2^i), row_ror:n reads (lane - n) mod 16 within
// the row; wave_shl/rol read lane + 1, wave_shr/ror lane - 1 (rol/ror wrapping in 64);
// row_bcast:15 gives each row the last lane of the row before, row_bcast:31 gives rows 2 and 3
// lane 31 (LLVM's GFX9 scan: bcast15 with row_mask 0xA, bcast31 with 0xC).
inline int dpp_source(int ctrl, int lane, bool& known) {
  known = true;
  const int row = lane & ~15, in_row = lane & 15;
  if (ctrl >= 0 && ctrl <= 0xFF) return (lane & ~3) | ((ctrl >> (2 * (lane & 3))) & 3);
  if (ctrl >= 0x101 && ctrl <= 0x10F) {
    const int n = ctrl - 0x100;
    return in_row + n < 16 ? lane + n : -1;
  }
  if (ctrl >= 0x111 && ctrl <= 0x11F) {
    const int n = ctrl - 0x110;
    return in_row - n >= 0 ? lane - n : -1;
  }
  if (ctrl >= 0x121 && ctrl <= 0x12F) return row | ((in_row - (ctrl - 0x120)) & 15);
  switch (ctrl) {
    case 0x130: return lane + 1 < WARP ? lane + 1 : -1;   // wave_shl:1
    case 0x134: return (lane + 1) % WARP;                 // wave_rol:1
    case 0x138: return lane >= 1 ? lane - 1 : -1;         // wave_shr:1
    case 0x13C: return (lane + WARP - 1) % WARP;          // wave_ror:1
    case 0x140: return row | (15 - in_row);               // row_mirror
    case 0x141: return (lane & ~7) | (7 - (lane & 7));    // row_half_mirror
    case 0x142: return row >= 16 ? row - 1 : -1;          // row_bcast:15
    case 0x143: return row >= 32 ? 31 : -1;               // row_bcast:31
    default: known = false; return -1;
  }
}

// v_mov_b32_dpp with `old` in the destination: a lane whose row (row_mask bit lane / 16) or
// bank (bank_mask bit (lane % 16) / 4) is disabled keeps `old`; a lane whose source is out of
// range gets 0 with bound_ctrl, else keeps `old`.
inline int update_dpp(int old, int src, int ctrl, int row_mask, int bank_mask, bool bound_ctrl) {
  const unsigned imm = static_cast<unsigned>(ctrl) | static_cast<unsigned>(row_mask & 15) << 12 |
                       static_cast<unsigned>(bank_mask & 15) << 16 | (bound_ctrl ? 1u << 20 : 0u);
  const int buf = exchange(DPP, static_cast<uint32_t>(src), imm, "DPP");
  if (buf < 0) return old;
  const int lane = lane_of(cur());
  bool known;
  const int from = dpp_source(ctrl, lane, known);
  if (!known) {
    fail("DPP control 0x%x is not one of GFX9's (quad_perm 0x00-0xFF, row_shl/shr/ror "
         "0x101-0x12F, wave_shl/rol/shr/ror 0x130/0x134/0x138/0x13C, row_mirror 0x140, "
         "row_half_mirror 0x141, row_bcast 0x142/0x143)", ctrl);
    return old;
  }
  if (!((row_mask >> (lane / 16)) & 1) || !((bank_mask >> ((lane % 16) / 4)) & 1)) return old;
  if (from < 0) return bound_ctrl ? 0 : old;
  return static_cast<int>(static_cast<uint32_t>(rt.warps[warp_of(cur())].v[buf][from]));
}

// ds_swizzle_b32 (AMD "Vega" ISA, DS_SWIZZLE_B32): offset bit 15 set: quad mode, lane 4q + i
// reads lane 4q + offset[2i + 1 : 2i]; else bit mode within groups of 32 lanes, lane
// ((lane & and) | or) ^ xor, and = offset[4:0], or = offset[9:5], xor = offset[14:10].
inline int swizzle_source(int pattern, int lane) {
  if (pattern & 0x8000) return (lane & ~3) | ((pattern >> (2 * (lane & 3))) & 3);
  const int and_mask = pattern & 31, or_mask = (pattern >> 5) & 31, xor_mask = (pattern >> 10) & 31;
  return (lane & ~31) | ((((lane & 31) & and_mask) | or_mask) ^ xor_mask);
}
inline int ds_swizzle(int v, int pattern) {
  const int buf = exchange(SWIZZLE, static_cast<uint32_t>(v), static_cast<unsigned>(pattern),
                           "ds_swizzle");
  if (buf < 0) return v;
  if (pattern < 0 || pattern > 0xFFFF) {
    fail("ds_swizzle offset 0x%x: the offset is 16 bits", pattern);
    return v;
  }
  const int from = swizzle_source(pattern, lane_of(cur()));
  return static_cast<int>(static_cast<uint32_t>(rt.warps[warp_of(cur())].v[buf][from]));
}

// ds_bpermute_b32: lane l reads lane (addr_l / 4) mod 64 ("backward" permute: every lane
// names its source)
inline int ds_bpermute(int byte_addr, int v) {
  const int buf = exchange(BPERMUTE, static_cast<uint32_t>(v), 0, "ds_bpermute");
  if (buf < 0) return v;
  const int from = (static_cast<unsigned>(byte_addr) >> 2) & (WARP - 1);
  return static_cast<int>(static_cast<uint32_t>(rt.warps[warp_of(cur())].v[buf][from]));
}

// v_readfirstlane_b32 / v_readlane_b32: the value of lane 0 (all lanes active) or of `lane`
inline int read_lane(int v, int lane, Kind kind, const char* what) {
  const int buf = exchange(kind, static_cast<uint32_t>(v), static_cast<unsigned>(lane), what);
  if (buf < 0) return v;
  if (lane < 0 || lane >= WARP) {
    fail("%s of lane %d: a wave has lanes 0 to 63", what, lane);
    return v;
  }
  return static_cast<int>(static_cast<uint32_t>(rt.warps[warp_of(cur())].v[buf][lane]));
}

// The MFMA emulation is an emulated run's hot loop: optimized whatever the kernel's -Og (a
// third off an emulated conv2d or W4A16 run, for no measurable compile time; CUDA's matrix
// instructions live in the -O2 runtime object instead, ptc_emulate.cc)
#pragma GCC push_options
#pragma GCC optimize("O2")
// ---- MFMA ---------------------------------------------------------------------------------
// An MFMA is a wave collective: each lane deposits its 64-bit A and B operands (the 32-bit ones
// zero-extended) and the modifiers; the wave meets; one instruction, modifiers 0, 0, 0 (the
// emulator has no broadcast or lane swizzle of the operands). The buffer, or -1.
inline int mfma_meet(int kind, uint64_t a, uint64_t b, int cbsz, int abid, int blgp,
                     const char* what) {
  const unsigned imm = static_cast<unsigned>(cbsz) | static_cast<unsigned>(abid) << 8 |
                       static_cast<unsigned>(blgp) << 16;
  if (rt.current < 0) { fail("%s outside a kernel", what); return -1; }
  Fiber& f = cur();
  WarpScratch& s = rt.warps[warp_of(f)];
  const int lane = lane_of(f);
  const int buf = deposit(kind);
  s.a[buf][lane][0] = static_cast<uint32_t>(a);
  s.a[buf][lane][1] = static_cast<uint32_t>(a >> 32);
  s.b[buf][lane][0] = static_cast<uint32_t>(b);
  s.b[buf][lane][1] = static_cast<uint32_t>(b >> 32);
  s.a[buf][lane][3] = imm;
  warp_barrier(what);
  if (!same_kind(s, buf, kind, what)) return -1;
  if (imm != 0) {
    fail("%s with cbsz %d, abid %d, blgp %d: the emulator takes 0, 0, 0 (no broadcast or lane "
         "swizzle of the operands)", what, cbsz, abid, blgp);
    return -1;
  }
  return buf;
}

// D = A B + C with f32 sums, from the deposits in `buf`, by AMD's layouts (matrix instruction
// calculator, CDNA2 and CDNA3; CK's xdlops_gemm.hpp; docs/hip.md "Layouts"): lane l, value r of
// the KPL = K M / 64 a lane holds (`value(regs, r)` decodes it from the lane's registers)
//   A[l % M][KPL (l / M) + r], B[KPL (l / M) + r][l % M]; D register r of lane l is
//   D[4 (l / M) + r][l % M] (16 x 16) or D[8 (r / 4) + 4 (l / M) + r % 4][l % M] (32 x 32).
// The products are exact in f32 (16-bit or 8-bit floats); they are added to C in f32, k in
// order. break_layout (a self-test): A's values 1 and 2 swapped.
template <int M, int K, typename VA, typename VB>
inline void mfma_f32_sums(float* d, int buf, VA a_value, VB b_value) {
  constexpr int REGS = M * M / WARP, KPL = K * M / WARP;
  static_assert(M * K <= 512, "WarpScratch::a_values holds A");
  WarpScratch& s = rt.warps[warp_of(cur())];
  const int lane = lane_of(cur());
  const bool broken = config.break_layout != 0;
  auto A = [&](int i, int k) {
    int r = k % KPL;
    if (broken && (r == 1 || r == 2)) r = 3 - r;
    return a_value(s.a[buf][i + M * (k / KPL)], r);
  };
  auto B = [&](int k, int j) { return b_value(s.b[buf][j + M * (k / KPL)], k % KPL); };
  float* a = s.a_values[buf];       // A, decoded once for the wave (same_kind checked it)
  if (s.decoded[buf] != s.same[buf] || s.same[buf] < 0) {
    for (int i = 0; i < M; ++i)
      for (int k = 0; k < K; ++k) a[i * K + k] = A(i, k);
    s.decoded[buf] = s.same[buf];
  }
  const int j = lane % M, block = lane / M;
  float column[K];                  // the lane's column of B, decoded once for every row
  for (int k = 0; k < K; ++k) column[k] = B(k, j);
  for (int r = 0; r < REGS; ++r) {
    const int i = M == 16 ? 4 * block + r : 8 * (r / 4) + 4 * block + r % 4;
    float acc = d[r];
    for (int k = 0; k < K; ++k) acc += a[i * K + k] * column[k];
    d[r] = acc;
  }
}

// v_mfma_f32_{16x16x16,32x32x8}{f16,bf16_1k}: four 16-bit values a lane, two per 32-bit
// register, low half first
// (f16 codes through the table every backend's emulation shares: ptc_emulate_half.h)
inline float half_value(uint16_t bits, bool bf16) {
  return bf16 ? __builtin_bit_cast(float, static_cast<uint32_t>(bits) << 16)
              : f16_bits_to_f32(bits);
}

template <int M, bool BF16>
inline void mfma(float* d, uint64_t a, uint64_t b, int cbsz, int abid, int blgp, const char* what) {
  static_assert(M == 16 || M == 32, "MFMA 16x16x16 or 32x32x8");
  const Kind kind = M == 16 ? (BF16 ? MFMA_16x16x16_BF16 : MFMA_16x16x16_F16)
                            : (BF16 ? MFMA_32x32x8_BF16 : MFMA_32x32x8_F16);
  const int buf = mfma_meet(kind, a, b, cbsz, abid, blgp, what);
  if (buf < 0) return;
  auto value = [](const unsigned* regs, int r) {
    return half_value(static_cast<uint16_t>(regs[r / 2] >> (16 * (r % 2))), BF16);
  };
  mfma_f32_sums<M, M == 16 ? 16 : 8>(d, buf, value, value);
}

// v_mfma_i32_{16x16x16,32x32x8}i8 (gfx908/gfx90a) and v_mfma_i32_{16x16x32,32x32x16}_i8
// (gfx940+): D = A B + C over the wave, s32 accumulate, with the layouts above, KPL signed
// bytes per lane in a 32- or 64-bit operand (CK's xdlops_gemm.hpp, k_per_blk 4 and 8). The
// products are exact; their sum is added to C modulo 2^32. break_layout: A's bytes 1 and 2
// swapped.
template <int M, int K>
inline void mfma_i8(int* d, uint64_t a, uint64_t b, int cbsz, int abid, int blgp, const char* what) {
  constexpr int REGS = M * M / WARP, BLOCKS = WARP / M, KPL = K / BLOCKS;
  static_assert((M == 16 && (K == 16 || K == 32)) || (M == 32 && (K == 8 || K == 16)),
                "MFMA i8 16x16x16, 32x32x8, 16x16x32 or 32x32x16");
  const Kind kind = M == 16 ? (K == 16 ? MFMA_16x16x16_I8 : MFMA_16x16x32_I8)
                            : (K == 8 ? MFMA_32x32x8_I8 : MFMA_32x32x16_I8);
  const int buf = mfma_meet(kind, a, b, cbsz, abid, blgp, what);
  if (buf < 0) return;
  const WarpScratch& s = rt.warps[warp_of(cur())];
  auto value = [](const unsigned* regs, int r) {   // byte r of a lane's operand, signed
    return static_cast<int>(static_cast<int8_t>(static_cast<uint8_t>(regs[r / 4] >> (8 * (r % 4)))));
  };
  const bool broken = config.break_layout != 0;
  auto A = [&](int i, int k) {
    int r = k % KPL;
    if (broken && (r == 1 || r == 2)) r = 3 - r;
    return value(s.a[buf][i + M * (k / KPL)], r);
  };
  auto B = [&](int k, int j) { return value(s.b[buf][j + M * (k / KPL)], k % KPL); };
  const int lane = lane_of(cur()), j = lane % M, block = lane / M;
  int column[K];                    // the lane's column of B, decoded once for every row
  for (int k = 0; k < K; ++k) column[k] = B(k, j);
  for (int r = 0; r < REGS; ++r) {
    const int i = M == 16 ? 4 * block + r : 8 * (r / 4) + 4 * block + r % 4;
    long long sum = 0;
    for (int k = 0; k < K; ++k) sum += A(i, k) * column[k];
    d[r] = static_cast<int>(static_cast<uint32_t>(d[r]) + static_cast<uint32_t>(sum));
  }
}

// v_mfma_f32_{16x16x32,32x32x16}_{fp8,bf8}_{fp8,bf8} (gfx940+): the i8 instructions' lanes
// and bytes (KPL = 8), each byte an FNUZ code -- fp8 e4m3fnuz (bias 8, 3 mantissa bits), bf8
// e5m2fnuz (bias 16, 2): exponent 0 subnormal, 0x80 the only NaN, no -0, no infinities (AMD
// CDNA3 ISA, "Data Types"; ml_dtypes float8_e4m3fnuz / float8_e5m2fnuz). Products of two
// codes are exact in f32; f32 sums as above.
inline float fnuz_definition(uint8_t code, bool e5m2) {
  if (code == 0x80) return __builtin_nanf("");
  const int mbits = e5m2 ? 2 : 3, bias = e5m2 ? 16 : 8;
  const int e = (code & 0x7f) >> mbits, m = code & ((1 << mbits) - 1);
  const float mag = e == 0 ? __builtin_ldexpf(static_cast<float>(m), 1 - bias - mbits)
                           : __builtin_ldexpf(static_cast<float>((1 << mbits) | m), e - bias - mbits);
  return code & 0x80 ? -mag : mag;
}

// every code's value, computed once per format (an MFMA reads 64 codes per lane)
inline float fnuz_value(uint8_t code, bool e5m2) {
  static const std::array<std::array<float, 256>, 2> values = [] {
    std::array<std::array<float, 256>, 2> t{};
    for (int f = 0; f < 2; ++f)
      for (int c = 0; c < 256; ++c) t[f][c] = fnuz_definition(static_cast<uint8_t>(c), f == 1);
    return t;
  }();
  return values[e5m2][code];
}

template <int M, bool A_BF8, bool B_BF8>
inline void mfma_fnuz(float* d, uint64_t a, uint64_t b, int cbsz, int abid, int blgp,
                      const char* what) {
  static_assert(M == 16 || M == 32, "MFMA FP8 16x16x32 or 32x32x16");
  const int kind = (M == 16 ? MFMA_16x16x32_F8 : MFMA_32x32x16_F8) + 2 * A_BF8 + B_BF8;
  const int buf = mfma_meet(kind, a, b, cbsz, abid, blgp, what);
  if (buf < 0) return;
  auto code = [](const unsigned* regs, int r) {
    return static_cast<uint8_t>(regs[r / 4] >> (8 * (r % 4)));
  };
  mfma_f32_sums<M, M == 16 ? 32 : 16>(
      d, buf, [&](const unsigned* regs, int r) { return fnuz_value(code(regs, r), A_BF8); },
      [&](const unsigned* regs, int r) { return fnuz_value(code(regs, r), B_BF8); });
}

template <int M, bool A_BF8, bool B_BF8, typename C>
inline C mfma_fnuz_builtin(long a, long b, C c, int cbsz, int abid, int blgp, const char* what) {
  float d[M * M / WARP];
  for (int r = 0; r < M * M / WARP; ++r) d[r] = c[r];
  mfma_fnuz<M, A_BF8, B_BF8>(d, static_cast<uint64_t>(a), static_cast<uint64_t>(b), cbsz, abid,
                             blgp, what);
  C out;
  for (int r = 0; r < M * M / WARP; ++r) out[r] = d[r];
  return out;
}

// v_cmp / s_ballot: a bit per lane of the wave whose predicate is true
inline uint64_t ballot(bool pred) {
  const int buf = exchange(BALLOT, pred ? 1u : 0u, 0, "ballot");
  if (buf < 0) return 0;
  uint64_t out = 0;
  for (int l = 0; l < WARP; ++l)
    out |= static_cast<uint64_t>(rt.warps[warp_of(cur())].v[buf][l] != 0) << l;
  return out;
}

template <int M, int K, typename V, typename C>
inline C mfma_i8_builtin(V a, V b, C c, int cbsz, int abid, int blgp, const char* what) {
  int d[M * M / WARP];
  for (int r = 0; r < M * M / WARP; ++r) d[r] = c[r];
  mfma_i8<M, K>(d, static_cast<uint64_t>(a), static_cast<uint64_t>(b), cbsz, abid, blgp, what);
  C out;
  for (int r = 0; r < M * M / WARP; ++r) out[r] = d[r];
  return out;
}

template <int M, bool BF16, typename V, typename C>
inline C mfma_builtin(V a, V b, C c, int cbsz, int abid, int blgp, const char* what) {
  float d[M * M / WARP];
  for (int r = 0; r < M * M / WARP; ++r) d[r] = c[r];
  mfma<M, BF16>(d, __builtin_bit_cast(uint64_t, a), __builtin_bit_cast(uint64_t, b), cbsz, abid,
                blgp, what);
  C out;
  for (int r = 0; r < M * M / WARP; ++r) out[r] = d[r];
  return out;
}

#pragma GCC pop_options
}  // namespace emu
}  // namespace ptc

// ---- the clang AMDGPU builtins, as host functions ---------------------------------------------
inline unsigned __builtin_amdgcn_workitem_id_x() {
  return static_cast<unsigned>(ptc::emu::thread_index("__builtin_amdgcn_workitem_id_x"));
}
inline unsigned __builtin_amdgcn_workitem_id_y() { return 0; }
inline unsigned __builtin_amdgcn_workitem_id_z() { return 0; }
inline unsigned __builtin_amdgcn_workgroup_id_x() {
  return static_cast<unsigned>(ptc::emu::rt.block);
}
inline unsigned __builtin_amdgcn_workgroup_id_y() { return 0; }
inline unsigned __builtin_amdgcn_workgroup_id_z() { return 0; }
// v_mbcnt_lo/hi: acc + the set bits of mask below this lane, in lanes 0-31 / 32-63
inline unsigned __builtin_amdgcn_mbcnt_lo(unsigned mask, unsigned acc) {
  const int lane = ptc::emu::thread_index("__builtin_amdgcn_mbcnt_lo") % 64;
  const uint64_t below = lane >= 32 ? 0xffffffffull : (1ull << lane) - 1;
  return acc + static_cast<unsigned>(__builtin_popcountll(mask & below));
}
inline unsigned __builtin_amdgcn_mbcnt_hi(unsigned mask, unsigned acc) {
  const int lane = ptc::emu::thread_index("__builtin_amdgcn_mbcnt_hi") % 64;
  const uint64_t below = lane < 32 ? 0 : (1ull << (lane - 32)) - 1;
  return acc + static_cast<unsigned>(__builtin_popcountll(mask & below));
}

// v_perm_b32 D, S0, S1, sel: byte n of D is byte sel[n] of the eight bytes {S0, S1} (S1 the
// low four), 0x00 for selector 12 and 0xff from 13 up; the sign-replicating selectors 8-11
// are not used by ptc's headers, so the emulation refuses them
inline unsigned __builtin_amdgcn_perm(unsigned s0, unsigned s1, unsigned sel) {
  const uint64_t bytes = (static_cast<uint64_t>(s0) << 32) | s1;
  unsigned out = 0;
  for (int n = 0; n < 4; ++n) {
    const unsigned k = (sel >> (8 * n)) & 0xffu;
    unsigned byte = 0;
    if (k < 8) byte = static_cast<unsigned>(bytes >> (8 * k)) & 0xffu;
    else if (k >= 13) byte = 0xffu;
    else if (k != 12) ptc::emu::fail("v_perm_b32 selector 0x%x: the sign selectors 8-11 are "
                                     "not emulated", k);
    out |= byte << (8 * n);
  }
  return out;
}

inline void __builtin_amdgcn_s_barrier() { ptc::emu::block_barrier(); }
// Fences order memory for other waves; the fibers share one memory, so nothing to do.
// (clang 19 also takes a third argument, the address spaces)
inline void __builtin_amdgcn_fence(int, const char*, ...) {}
// waits and scheduling hints: the emulated loads and LDS accesses complete when issued
inline void __builtin_amdgcn_s_waitcnt(int) {}
inline void __builtin_amdgcn_sched_barrier(int) {}
inline void __builtin_amdgcn_s_setprio(short) {}

inline int __builtin_amdgcn_update_dpp(int old, int src, int dpp_ctrl, int row_mask, int bank_mask,
                                       bool bound_ctrl) {
  return ptc::emu::update_dpp(old, src, dpp_ctrl, row_mask, bank_mask, bound_ctrl);
}
// v_mov_b32_dpp v, v: clang ties the destination to the source (llvm.amdgcn.mov.dpp selects
// V_MOV_B32_dpp with old = src), so a lane that is not written keeps its own value
inline int __builtin_amdgcn_mov_dpp(int src, int dpp_ctrl, int row_mask, int bank_mask,
                                    bool bound_ctrl) {
  return ptc::emu::update_dpp(src, src, dpp_ctrl, row_mask, bank_mask, bound_ctrl);
}
inline int __builtin_amdgcn_ds_swizzle(int v, int pattern) { return ptc::emu::ds_swizzle(v, pattern); }
inline int __builtin_amdgcn_ds_bpermute(int byte_addr, int v) {
  return ptc::emu::ds_bpermute(byte_addr, v);
}
inline int __builtin_amdgcn_readfirstlane(int v) {
  return ptc::emu::read_lane(v, 0, ptc::emu::READFIRSTLANE, "readfirstlane");
}
inline int __builtin_amdgcn_readlane(int v, int lane) {
  return ptc::emu::read_lane(v, lane, ptc::emu::READLANE, "readlane");
}

inline ptc::f32x4 __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(ptc::i16x4 a, ptc::i16x4 b, ptc::f32x4 c,
                                                             int cbsz, int abid, int blgp) {
  return ptc::emu::mfma_builtin<16, true>(a, b, c, cbsz, abid, blgp, "v_mfma_f32_16x16x16bf16_1k");
}
inline ptc::f32x4 __builtin_amdgcn_mfma_f32_16x16x16f16(ptc::f16x4 a, ptc::f16x4 b, ptc::f32x4 c,
                                                         int cbsz, int abid, int blgp) {
  return ptc::emu::mfma_builtin<16, false>(a, b, c, cbsz, abid, blgp, "v_mfma_f32_16x16x16f16");
}
inline ptc::f32x16 __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(ptc::i16x4 a, ptc::i16x4 b, ptc::f32x16 c,
                                                             int cbsz, int abid, int blgp) {
  return ptc::emu::mfma_builtin<32, true>(a, b, c, cbsz, abid, blgp, "v_mfma_f32_32x32x8bf16_1k");
}
inline ptc::f32x16 __builtin_amdgcn_mfma_f32_32x32x8f16(ptc::f16x4 a, ptc::f16x4 b, ptc::f32x16 c,
                                                         int cbsz, int abid, int blgp) {
  return ptc::emu::mfma_builtin<32, false>(a, b, c, cbsz, abid, blgp, "v_mfma_f32_32x32x8f16");
}
// the i8 MFMAs: gfx908/gfx90a's take four bytes (an int) per operand, gfx940+'s eight (a long)
inline ptc::i32x4 __builtin_amdgcn_mfma_i32_16x16x16i8(int a, int b, ptc::i32x4 c, int cbsz,
                                                       int abid, int blgp) {
  return ptc::emu::mfma_i8_builtin<16, 16>(static_cast<uint32_t>(a), static_cast<uint32_t>(b), c,
                                           cbsz, abid, blgp, "v_mfma_i32_16x16x16i8");
}
inline ptc::i32x16 __builtin_amdgcn_mfma_i32_32x32x8i8(int a, int b, ptc::i32x16 c, int cbsz,
                                                       int abid, int blgp) {
  return ptc::emu::mfma_i8_builtin<32, 8>(static_cast<uint32_t>(a), static_cast<uint32_t>(b), c,
                                          cbsz, abid, blgp, "v_mfma_i32_32x32x8i8");
}
inline ptc::i32x4 __builtin_amdgcn_mfma_i32_16x16x32_i8(long a, long b, ptc::i32x4 c, int cbsz,
                                                        int abid, int blgp) {
  return ptc::emu::mfma_i8_builtin<16, 32>(a, b, c, cbsz, abid, blgp, "v_mfma_i32_16x16x32_i8");
}
inline ptc::i32x16 __builtin_amdgcn_mfma_i32_32x32x16_i8(long a, long b, ptc::i32x16 c, int cbsz,
                                                         int abid, int blgp) {
  return ptc::emu::mfma_i8_builtin<32, 16>(a, b, c, cbsz, abid, blgp, "v_mfma_i32_32x32x16_i8");
}
// the FP8 MFMAs (gfx940+): eight FNUZ codes (a long) per operand; fp8 = e4m3fnuz, bf8 = e5m2fnuz
#define PTC_EMU_MFMA_FNUZ(SHAPE, M, NAME, ABF8, BBF8, C)                                      \
  inline C __builtin_amdgcn_mfma_f32_##SHAPE##_##NAME(long a, long b, C c, int cbsz, int abid,  \
                                                      int blgp) {                               \
    return ptc::emu::mfma_fnuz_builtin<M, ABF8, BBF8>(a, b, c, cbsz, abid, blgp,               \
                                                      "v_mfma_f32_" #SHAPE "_" #NAME);          \
  }
PTC_EMU_MFMA_FNUZ(16x16x32, 16, fp8_fp8, false, false, ptc::f32x4)
PTC_EMU_MFMA_FNUZ(16x16x32, 16, fp8_bf8, false, true, ptc::f32x4)
PTC_EMU_MFMA_FNUZ(16x16x32, 16, bf8_fp8, true, false, ptc::f32x4)
PTC_EMU_MFMA_FNUZ(16x16x32, 16, bf8_bf8, true, true, ptc::f32x4)
PTC_EMU_MFMA_FNUZ(32x32x16, 32, fp8_fp8, false, false, ptc::f32x16)
PTC_EMU_MFMA_FNUZ(32x32x16, 32, fp8_bf8, false, true, ptc::f32x16)
PTC_EMU_MFMA_FNUZ(32x32x16, 32, bf8_fp8, true, false, ptc::f32x16)
PTC_EMU_MFMA_FNUZ(32x32x16, 32, bf8_bf8, true, true, ptc::f32x16)
#undef PTC_EMU_MFMA_FNUZ

inline unsigned long __builtin_amdgcn_ballot_w64(bool pred) { return ptc::emu::ballot(pred); }

// MUBUF raw buffer loads (global_to_shared.h: buffer_load), each lane on its own: the
// resource must be gfx9's raw one (configuration word 0x00020000, stride 0, no cache
// controls); an offset at or past its range reads zeros (the ISA's range checking); a load
// that starts inside the range and ends past it is chipset-dependent (checked per dword on
// some chips, per access on others), so it is an error here; the rest reads the tensors
// like any global access (outside every tensor: an error).
namespace ptc {
namespace emu {
template <typename W>
inline W raw_buffer_load(i32x4 rsrc, int voffset, int soffset, int aux, const char* name) {
  const uint32_t range = static_cast<uint32_t>(rsrc[2]);
  const uint32_t config = static_cast<uint32_t>(rsrc[3]);
  const uint32_t stride = static_cast<uint32_t>(rsrc[1]) >> 16;
  W out{};
  if (config != 0x00020000u || stride != 0 || aux != 0) {
    fail("%s with a buffer resource that is not gfx9's raw one (word 3 %#x, stride %u, "
         "controls %d)", name, config, stride, aux);
    return out;
  }
  // the range check counts the scalar offset on some chips and not on others: where the
  // two disagree the kernel reads what the chip decides
  const uint64_t offset = uint64_t(uint32_t(voffset)) + uint32_t(soffset);
  if ((uint32_t(voffset) >= range) != (offset >= range)) {
    fail("%s at lane offset %u and scalar offset %u: whether it is past the buffer's range "
         "of %u bytes depends on whether the chip counts the scalar offset in its range check",
         name, uint32_t(voffset), uint32_t(soffset), range);
    return out;
  }
  if (offset >= range) return out;
  if (offset + sizeof(W) > range) {
    fail("%s of %zu bytes at offset %llu crosses the buffer's range of %u bytes (what it "
         "reads is chipset-dependent)", name, sizeof(W), (unsigned long long)offset, range);
    return out;
  }
  const uint64_t base = uint64_t(uint32_t(rsrc[0])) | (uint64_t(uint32_t(rsrc[1]) & 0xffffu) << 32);
  return *global_access(reinterpret_cast<const W*>(base + offset));
}
}  // namespace emu

inline i32x4 raw_buffer_load_b128(i32x4 rsrc, int voffset, int soffset, int aux) {
  return emu::raw_buffer_load<i32x4>(rsrc, voffset, soffset, aux, "buffer_load_dwordx4");
}
inline i32x2 raw_buffer_load_b64(i32x4 rsrc, int voffset, int soffset, int aux) {
  return emu::raw_buffer_load<i32x2>(rsrc, voffset, soffset, aux, "buffer_load_dwordx2");
}
inline int raw_buffer_load_b32(i32x4 rsrc, int voffset, int soffset, int aux) {
  return emu::raw_buffer_load<int>(rsrc, voffset, soffset, aux, "buffer_load_dword");
}
}  // namespace ptc
