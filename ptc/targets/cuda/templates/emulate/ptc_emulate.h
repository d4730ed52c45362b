// ptc CPU emulation runtime for CUDA: runs a rendered kernel.cu on the host, compiled with
// `g++ -std=c++20 -DPTC_EMULATE -I targets/cuda/templates/emulate -I targets/cuda/templates
// -I templates/emulate_core` (see ptc/render/emulate.py). Nothing here is used by nvcc builds.
//
// The execution model -- threads as fibers, warps of 32 run as far as the barriers allow in
// forward, reverse or random order, shared memory NaN-filled and bounds-checked, deadlocks
// reported, bank conflicts counted -- is the shared core's (emulate_core/ptc_emulate_core.h);
// this file adds CUDA's thread ids, cp.async, the warp collectives and sm90's mbarriers,
// TMA and wgmma (ptc_emulate_sm90.h).
//
// Warp-collective instructions are emulated at the register level: ldmatrix and
// mma.sync gather what each lane holds according to the PTX ISA fragment layouts
// ("ldmatrix", "Matrix Fragments for mma.m16n8k16 with floating point type"); every lane
// deposits its operands in a per-warp scratch area, the warp meets at a barrier, and each
// lane computes its own result registers from the other lanes' deposits. A wrong
// fragment layout in the device headers therefore gives wrong numbers, as on hardware.
//
// Shuffles (shfl.sync), votes and __syncwarp are warp collectives the same way: each lane
// deposits its value and reads its source lane's deposit after the warp meets; only
// whole-warp masks are emulated (device_functions.h has the CUDA names).
//
// cp.async of 4, 8 or 16 bytes, zero-filling when the source is not valid: by default a
// copy is deferred until a cp.async.wait_group that covers its group (reading a buffer
// before waiting sees stale bytes); eager mode copies at issue time (overwriting a buffer
// other threads still read shows up instead).
//
// Shared-memory bank conflicts are counted for ldmatrix, cp.async destinations and the
// loads and stores of shared_access.cuh (ptc::lds, ptc::sts), per kind and per source
// site, and reported per launch (ptc_emulate_bank_conflicts; see the core's "bank
// conflicts"): phases of 128 bytes of consecutive lanes, an ldmatrix phase the 8 row
// addresses of one 8x8 matrix.
//
// Functions declared here and in ptc_emulate_sm90.h without a body are defined in
// ptc_emulate.cc, part of the runtime object (see emulate_core/ptc_emulate_core.h).
#pragma once
#include <cstdint>
#include <vector>

#include "cuda_fp16.h"
#include "cuda_bf16.h"

struct uint3 { unsigned x, y, z; };
struct dim3 {
  unsigned x, y, z;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

#ifndef PTC_EMU_SMEM_CAPACITY
#define PTC_EMU_SMEM_CAPACITY (256 * 1024)
#endif
#define PTC_EMU_WARP 32
#define PTC_EMU_WARP_NAME "warp"
#define PTC_EMU_BARRIER_NAME "__syncthreads"
#define PTC_EMU_SMEM_NAME "shared memory"

namespace ptc {
namespace emu {

enum State { READY, AT_BLOCK_BARRIER, AT_WARP_BARRIER, AT_MBARRIER, AT_NAMED_BARRIER,
             AT_GROUP_BARRIER, AT_REGISTERS, DONE, STATES };
enum Kind { NONE = 0, LDM_X1, LDM_X2, LDM_X4, LDM_X1_T, LDM_X2_T, LDM_X4_T, MMA_F16, MMA_BF16,
            MMA_TF32, SHFL, VOTE, SYNCWARP, STM_X1, STM_X2, STM_X4, MMA_S8 };

struct Copy {
  unsigned char* dst;
  const unsigned char* src;
  bool valid;
  long long group;
  int bytes;
};

// a thread's CUDA state besides the core's, reset at each block
struct FiberExt {
  long long commits = 0;        // cp.async groups committed
  std::vector<Copy> pending;    // cp.async copies not yet done
  // sm90 (ptc_emulate_sm90.h): the mbarrier and parity it waits for, its named barrier,
  // its register count after setmaxnreg (0: the launch's), its wgmma groups
  uint32_t wait_bar = 0;
  unsigned wait_parity = 0;
  int named = -1;
  int maxnreg = 0;
  int maxnreg_wanted = 0;       // what a blocked setmaxnreg.inc asks for
  long long wgmma_commits = 0;
  long long wgmma_issued = 0;
  long long group_collectives = 0;
  // wgmma.fence: how many, and this thread's stack (its registers) as the last one saw it
  long long wgmma_fences = 0;
  const unsigned char* fence_lo = nullptr;
  std::vector<unsigned char> fence_stack;
  // fence.proxy.async (and fence.mbarrier_init) executed so far
  long long proxy_fences = 0;
};

}  // namespace emu
}  // namespace ptc

#include "ptc_emulate_core.h"

// Set by the scheduler before it switches to a fiber (defined in ptc_emulate.cc: the
// compiler must assume that a context switch changes them).
extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;

namespace ptc {
namespace emu {

// ptc_emulate_sm90.h: generic-proxy writes of shared memory, and values of the registers
// of a wgmma in flight
void generic_write(const void* p, size_t bytes);
void check_f32(float x, const char* what);

// ---- cp.async ---------------------------------------------------------------------------
// cp.async.{ca,cg}.shared.global [smem], [gmem], BYTES, src-size: BYTES of 4, 8 or 16, both
// addresses aligned to BYTES; valid == false is src-size 0: the destination is zero-filled
// and the source not read.
inline void do_copy(const Copy& c) {
  if (c.valid) memcpy(c.dst, c.src, c.bytes);
  else memset(c.dst, 0, c.bytes);
  generic_write(c.dst, c.bytes);     // cp.async is a generic-proxy write (PTX: weak)
}

template <int BYTES>
inline void cp_async(void* smem, const void* gmem, bool valid,
                     std::source_location where = std::source_location::current()) {
  static_assert(BYTES == 4 || BYTES == 8 || BYTES == 16, "cp.async copies 4, 8 or 16 bytes");
  if (rt.current < 0) { fail("cp.async outside a kernel"); return; }
  if (!in_smem(smem, BYTES) || reinterpret_cast<uintptr_t>(smem) % BYTES != 0) {
    fail("cp.async destination %p (shared offset %lld) is not %d bytes inside shared memory "
         "of %d bytes, %d-byte aligned", smem,
         (long long)(static_cast<unsigned char*>(smem) - ptc_smem), BYTES, rt.smem_bytes,
         BYTES);
    return;
  }
  if (valid && (reinterpret_cast<uintptr_t>(gmem) % BYTES != 0 || !in_tensor(gmem, BYTES))) {
    fail("cp.async source %p is misaligned or not %d bytes inside a tensor", gmem, BYTES);
    return;
  }
  record(ACC_CP_ASYNC, where, smem, BYTES);
  Fiber& f = cur();
  Copy c{static_cast<unsigned char*>(smem), static_cast<const unsigned char*>(gmem), valid,
         f.commits, BYTES};
  if (config.eager) do_copy(c);
  else f.pending.push_back(c);
}

inline void cp_async_16(void* smem, const void* gmem, bool valid,
                        std::source_location where = std::source_location::current()) {
  cp_async<16>(smem, gmem, valid, where);
}

inline void cp_async_commit() { ++cur().commits; }

void cp_async_wait(int n);

// ---- warp collectives ---------------------------------------------------------------------
// ldmatrix / stmatrix, once per warp instruction: the bank conflicts of its `rows` 16-byte
// rows (lanes 0 .. rows - 1 give their addresses), 8 rows per phase
void account_matrix_rows(const WarpScratch& s, int buf, int rows, Access acc,
                                const std::source_location& where);

// ldmatrix.sync.aligned.m8n8.x{NUM}[.trans].shared.b16: lane 8*i + r gives the address of
// row r of matrix i; lane L receives, in register i, elements (L/4, 2*(L%4)) and
// (L/4, 2*(L%4)+1) of matrix i (low half first); with .trans, elements (2*(L%4), L/4) and
// (2*(L%4)+1, L/4).
template <int NUM, bool TRANS>
inline void ldmatrix(unsigned* r, const void* p,
                     std::source_location where = std::source_location::current()) {
  static_assert(NUM == 1 || NUM == 2 || NUM == 4, "ldmatrix takes 1, 2 or 4 matrices");
  const Kind kind = static_cast<Kind>((NUM == 1 ? LDM_X1 : NUM == 2 ? LDM_X2 : LDM_X4) +
                                      (TRANS ? 3 : 0));
  const int lane = cur().tid % 32;
  WarpScratch& s = rt.warps[cur().tid / 32];
  const int buf = deposit(kind);
  s.addr[buf][lane] = p;
  warp_barrier("ldmatrix");
  for (int i = 0; i < NUM; ++i) r[i] = 0;
  if (!same_kind(s, buf, kind, "ldmatrix")) return;
  if (lane == 0) account_matrix_rows(s, buf, 8 * NUM, ACC_LDMATRIX, where);
  const int g = lane / 4, t = lane % 4;
  auto row = [&](int matrix, int rr) -> const uint16_t* {
    const void* a = s.addr[buf][matrix * 8 + rr];
    if (!in_smem(a, 16) || reinterpret_cast<uintptr_t>(a) % 16 != 0) {
      fail("ldmatrix row address %p of lane %d is not a 16-byte aligned row inside shared "
           "memory of %d bytes", a, matrix * 8 + rr, rt.smem_bytes);
      return nullptr;
    }
    return static_cast<const uint16_t*>(a);
  };
  for (int i = 0; i < NUM; ++i) {
    unsigned lo = 0, hi = 0;
    if (!TRANS) {
      const uint16_t* q = row(i, g);
      if (!q) continue;
      lo = q[2 * t];
      hi = q[2 * t + 1];
    } else {
      const uint16_t* q0 = row(i, 2 * t);
      const uint16_t* q1 = row(i, 2 * t + 1);
      if (!q0 || !q1) continue;
      lo = q0[g];
      hi = q1[g];
    }
    r[i] = lo | (hi << 16);
  }
}

// stmatrix.sync.aligned.m8n8.x{NUM}.shared.b16 [p], r: lane 8*i + r gives the address of
// row r of matrix i, lane L's register i holds elements (L/4, 2*(L%4)) and (L/4, 2*(L%4)+1)
// of matrix i (low half first). Each lane writes the row it gave the address of.
template <int NUM>
inline void stmatrix(const void* p, const unsigned* r,
                     std::source_location where = std::source_location::current()) {
  static_assert(NUM == 1 || NUM == 2 || NUM == 4, "stmatrix takes 1, 2 or 4 matrices");
  const Kind kind = static_cast<Kind>(NUM == 1 ? STM_X1 : NUM == 2 ? STM_X2 : STM_X4);
  const int lane = cur().tid % 32;
  WarpScratch& s = rt.warps[cur().tid / 32];
  const int buf = deposit(kind);
  s.addr[buf][lane] = p;
  for (int i = 0; i < NUM; ++i) s.a[buf][lane][i] = r[i];
  warp_barrier("stmatrix");
  if (!same_kind(s, buf, kind, "stmatrix")) return;
  if (lane >= 8 * NUM) return;
  const void* a = s.addr[buf][lane];
  if (!in_smem(a, 16) || reinterpret_cast<uintptr_t>(a) % 16 != 0) {
    fail("stmatrix row address %p of lane %d is not a 16-byte aligned row inside shared "
         "memory of %d bytes", a, lane, rt.smem_bytes);
    return;
  }
  if (lane == 0) account_matrix_rows(s, buf, 8 * NUM, ACC_STS, where);
  const int matrix = lane / 8, row = lane % 8;
  uint16_t* q = static_cast<uint16_t*>(const_cast<void*>(a));
  for (int t = 0; t < 4; ++t) {       // the row's elements come from lanes 4 row + t
    const unsigned v = s.a[buf][4 * row + t][matrix];
    q[2 * t] = static_cast<uint16_t>(v & 0xffffu);
    q[2 * t + 1] = static_cast<uint16_t>(v >> 16);
  }
  generic_write(q, 16);               // a generic-proxy write
}

// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32 d, a, b, d
// (groupID g = lane / 4, threadID_in_group t = lane % 4):
//   A: a_i at row g (+8 for i in {2,3,6,7}), col 2t + (i & 1) (+8 for i >= 4); reg j holds a_2j, a_2j+1
//   B: b_i at row 2t + (i & 1) (+8 for i >= 2), col g
//   C/D: c_i at row g (+8 for i >= 2), col 2t + (i & 1)
// Defined in ptc_emulate.cc, compiled once into the runtime (not into every kernel).
void mma_m16n8k16_16bit(float* d, const unsigned* a, const unsigned* b, bool bf16);

template <bool BF16>
inline void mma_m16n8k16(float* d, const unsigned* a, const unsigned* b) {
  mma_m16n8k16_16bit(d, a, b, BF16);
}

// mma.sync.m16n8k8.row.col.f32.tf32.tf32.f32 (PTX ISA, "Matrix Fragments for mma.m16n8k8"
// with .tf32): g = lane / 4, t = lane % 4; a0 (g, t), a1 (g + 8, t), a2 (g, t + 4),
// a3 (g + 8, t + 4); b0 (t, g), b1 (t + 4, g); c as m16n8k16's. Operands are f32 bits of
// which the tensor core reads the TF32 part (the 13 low mantissa bits are ignored).
void mma_m16n8k8_tf32(float* d, const unsigned* a, const unsigned* b);

// mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 d, a, b, d (PTX ISA, "Matrix Fragments for
// mma.m16n8k32", .s8; g = lane / 4, t = lane % 4; element i of a register is its byte i % 4,
// lowest first):
//   A: a_i at row g (+8 for i in 4-7 and 12-15), col 4t + (i & 3) (+16 for i >= 8):
//      register 0 (g, 4t..), 1 (g + 8, 4t..), 2 (g, 16 + 4t..), 3 (g + 8, 16 + 4t..)
//   B: b_i at row 4t + (i & 3) (+16 for i >= 4), col g: register 0 k 4t.., 1 k 16 + 4t..
//   C/D: s32 c_i at row g (+8 for i >= 2), col 2t + (i & 1)
// Products of s8 values summed exactly, the sum added to C modulo 2^32 (no .satfinite).
// break_layout (a self-test): A's registers 1 and 2 swapped.
void mma_m16n8k32_s8(int* d, const unsigned* a, const unsigned* b);

// ---- shuffles, votes, __syncwarp ----------------------------------------------------------
// shfl.sync.{idx,up,down,bfly}.b32 after the PTX ISA's pseudo-code, with CUDA's clamp values
// (c = ((32 - width) << 8) | 0x1f, and (32 - width) << 8 for up): each lane deposits its
// value, the warp meets, each lane reads its source lane's deposit, or keeps its own value
// where the source falls outside its width segment. Only whole-warp masks are emulated.
enum ShflMode { SHFL_IDX, SHFL_UP, SHFL_DOWN, SHFL_BFLY };

bool full_mask(unsigned mask, const char* what);

int shfl_source(ShflMode mode, int lane, unsigned b, int width);

template <typename T>
inline T shfl(ShflMode mode, unsigned mask, T var, unsigned b, int width, const char* what) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value,
                "the emulated shuffles take values of at most 8 bytes");
  if (rt.current < 0) { fail("%s outside a kernel", what); return var; }
  full_mask(mask, what);
  Fiber& f = cur();
  const int lane = f.tid % 32;
  WarpScratch& s = rt.warps[f.tid / 32];
  const int buf = deposit(SHFL);
  unsigned long long bits = 0;
  memcpy(&bits, &var, sizeof(T));
  if (sizeof(T) == 4) {
    float x;
    memcpy(&x, &bits, 4);
    check_f32(x, what);
  }
  s.v[buf][lane] = bits;
  warp_barrier(what);
  if (!same_kind(s, buf, SHFL, what)) return var;
  if (width < 1 || width > 32 || (width & (width - 1)) != 0) {
    fail("%s with width %d: the width must be a power of 2 from 1 to 32", what, width);
    return var;
  }
  T out;
  memcpy(&out, &s.v[buf][shfl_source(mode, lane, b, width)], sizeof(T));
  return out;
}

// vote.sync.ballot: bit l of the result is lane l's predicate
unsigned ballot(unsigned mask, bool pred, const char* what);

void syncwarp(unsigned mask);

}  // namespace emu
}  // namespace ptc

#include "ptc_emulate_sm90.h"

namespace ptc {
namespace emu {

// ---- the core's hooks -----------------------------------------------------------------------
inline void backend_launch(long long blocks, int threads) {
  gridDim = dim3(static_cast<unsigned>(blocks));
  blockDim = dim3(static_cast<unsigned>(threads));
  rt.shared_written = shared_written;     // generic-proxy stores (ptc_emulate_sm90.h)
}
inline void backend_block_start(int threads) {
  blockIdx = {static_cast<unsigned>(rt.block), 0, 0};
  sm90_block_start(threads);
}
inline void backend_switch(int tid) { threadIdx = {static_cast<unsigned>(tid), 0, 0}; }
inline bool backend_progress() { return sm90_progress(); }   // deferred copies landed
inline void backend_block_end() { sm90_block_end(); }

inline const char* state_count_label(State s) {
  switch (s) {
    case AT_BLOCK_BARRIER: return "at __syncthreads";
    case AT_WARP_BARRIER: return "at a warp-collective instruction";
    case AT_MBARRIER: return "waiting on mbarriers";
    case AT_NAMED_BARRIER: return "at named barriers";
    case AT_GROUP_BARRIER: return "at warpgroup collectives";
    case AT_REGISTERS: return "at setmaxnreg.inc, waiting for registers the CTA's pool does "
                              "not have (PTX ISA 9.7.19.5 setmaxnreg: the pool is the "
                              "registers the CTA was launched with)";
    case DONE: return "finished";
    default: return nullptr;
  }
}

inline const char* state_name(State s) {
  switch (s) {
    case READY: return "ready";
    case AT_BLOCK_BARRIER: return "at __syncthreads";
    case AT_WARP_BARRIER: return "at a warp-collective instruction";
    case AT_MBARRIER: return "waiting on an mbarrier";
    case AT_NAMED_BARRIER: return "at a named barrier";
    case AT_GROUP_BARRIER: return "at a warpgroup-collective instruction";
    case AT_REGISTERS: return "at setmaxnreg.inc";
    default: return "finished";
  }
}

inline void state_detail(const Fiber& g, char* out, size_t n) {
  if (g.state == AT_WARP_BARRIER || g.state == AT_GROUP_BARRIER)
    snprintf(out, n, ": %s", g.waiting_at);
  else if (g.state == AT_REGISTERS)
    snprintf(out, n, " %d", g.maxnreg_wanted);
  else if (g.state == AT_MBARRIER)
    snprintf(out, n, " at shared offset %u for parity %u", g.wait_bar, g.wait_parity);
  else if (g.state == AT_NAMED_BARRIER)
    snprintf(out, n, " %d", g.named);
}

inline int bank_phase(int, int bytes, int lane) { return consecutive_phase(bytes, lane); }

}  // namespace emu
}  // namespace ptc
