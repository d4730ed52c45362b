// ptc CPU emulation, sm90 (Hopper): mbarriers, TMA tile loads and stores, wgmma,
// setmaxnreg and named barriers, for kernels that warp-specialize (included by
// ptc_emulate.h; see its execution model). Facts and sources: docs/sm90.md. The emulator is
// as strict as the PTX ISA: what it calls undefined, or requires, is an error here that
// names the rule and its section ("PTX ISA 9.7.15.7.1 wgmma.fence" and so on).
//
// mbarrier: a 64-bit object in shared memory, here a record keyed by its shared offset:
// the arrivals a phase takes, those still missing, the transaction bytes still expected,
// and the phases completed. A phase completes when its last arrival is in and its
// transaction count is zero; try_wait.parity(p) is true once the phase of parity p has
// completed, i.e. while the count of completed phases has the other parity. A thread that
// waits blocks (it yields) until the barrier completes a phase. The thread that
// initializes it must fence the init (fence.mbarrier_init or fence.proxy.async) and the
// block must meet at __syncthreads before another thread, or a TMA load, uses it.
//
// TMA (cp.async.bulk.tensor, tile mode): the box is read from the tensor when issued (the
// inputs do not change during a kernel) with out-of-bounds elements zero, and written to
// shared memory with the tensor map's swizzle -- applied to the absolute shared address,
// as the hardware does: the 16-byte chunk bits [4, 4 + b) XOR the bits [7, 7 + b), b = 3,
// 2, 1 for 128-, 64- and 32-byte swizzles -- then its bytes complete on the mbarrier. By
// default a load lands only when no thread can go on (as late as possible: a read of the
// slot before waiting sees stale bytes); in eager mode when issued. A store's box starts
// at non-negative coordinates; its elements past the tensor's end are not written.
//
// Proxies: TMA and wgmma read shared memory through the async proxy. Shared memory written
// by the generic proxy (st.shared, stmatrix, cp.async) is tracked per 2 bytes with its
// writer; an async read of bytes whose writer has not executed fence.proxy.async since it
// wrote them is an error (PTX ISA 9.7.15.4 and 9.7.9.25.2 "Async Proxy").
//
// wgmma.mma_async m64nNk16 (f16/bf16 in, f32 accumulate): a warpgroup collective. Issued,
// it records its operands (shared-memory descriptors, decoded after the PTX ISA's
// canonical layouts; or the A fragments of the warpgroup's registers). Its registers --
// the accumulators, and the A fragments of an RS wgmma -- belong to the async proxy until
// the wgmma.wait_group that retires it: the emulator keeps their values aside and fills
// the registers with a marker (an f32 NaN with a payload; two 16-bit NaNs for A), so that
// a read of them shows up (the marker reaching a conversion, a shuffle, a shared-memory
// store or an output is reported) and a write is seen at the wait (the marker changed).
// The result is computed, reading shared memory then, when the first thread of the
// warpgroup waits for it, and each thread's registers receive it at that thread's own
// wait. Reading the accumulators before that is an error; releasing a slot before the
// wait lets the producer overwrite what the wgmma reads (wrong numbers). wgmma.fence: the
// registers a wgmma reads must not have been written since the thread's last wgmma.fence
// (the fence keeps a copy of the thread's stack, where its registers live here).
#pragma once
#include <cmath>
#include <type_traits>

namespace ptc {
namespace emu {

struct Mbarrier {
  int count = 0;          // arrivals per phase
  int pending = 0;        // arrivals the current phase still needs
  long long tx = 0;       // transaction bytes the current phase still expects
  long long phases = 0;   // phases completed
  int init_tid = -1;      // the thread that initialized it
  bool fenced = false;    // the init was fenced (fence.mbarrier_init / fence.proxy.async)
  long long fenced_at = 0;   // rt.block_barriers when it was
};

// the contents of an emulated CUtensorMap (written by cuTensorMapEncodeTiled in
// emulate/cuda.h): the tensor, and the box a load moves
struct TensorMapData {
  const unsigned char* base;
  int rank;
  int elem_bytes;
  int swizzle;            // 0, 32, 64 or 128: the swizzle span in bytes
  long long dims[5];      // elements, innermost first
  long long strides[5];   // bytes between consecutive indices of dim i (strides[0] = elem)
  int box[5];             // elements per dim
};

struct TmaLoad {
  uint32_t bar;
  uint32_t dst;
  std::vector<unsigned char> image;   // the box, unswizzled
  int swizzle;
};

struct TmaStore {
  long long group;        // the bulk-async group it belongs to
  const TensorMapData* map;
  uint32_t src;
  int coords[5];
};

struct WgmmaOp {
  long long group;        // the wgmma group it belongs to (commits at issue)
  long long seq;          // its place among the thread's wgmmas: the warpgroup's k-th one
  float* d;
  int n;
  bool bf16;
  int scale_d;
  bool a_in_regs;
  const unsigned* a;      // RS: the thread's A fragment registers
  uint64_t desc_a, desc_b;
  int trans_a, trans_b;
  bool computed;
  float a_rows[2][16];    // RS: this thread's two rows of A (g, g + 8 of its warp)
  int kind8;              // -1: 16-bit inputs (m64nNk16); m64nNk32: 0 .s8 (s32 accumulators),
                          // 1-4 FP8 A.B: e4m3.e4m3, e4m3.e5m2, e5m2.e4m3, e5m2.e5m2 (f32)
  int8_t a_bytes[2][32];  // RS m64nNk32: this thread's two rows of A (g, g + 8 of its warp)
};

// what the registers of a wgmma in flight hold (see the top): an f32 quiet NaN with a
// payload in each accumulator, and in each A register two 16-bit NaNs (f16 and bf16 alike)
constexpr uint32_t IN_FLIGHT_F32 = 0x7FE1F00Du;
constexpr uint16_t IN_FLIGHT_B16 = 0x7FA1u;
constexpr uint32_t IN_FLIGHT_A = 0x7FA17FA1u;

// registers of one thread that wgmma.mma_async ops in flight use
struct RegSet {
  uint32_t* regs;         // the thread's accumulator (float) or A fragment array
  int count;              // 32-bit registers
  bool acc;               // accumulators, else A fragments
  int in_flight;          // its ops issued and not yet retired by the thread's own wait
  std::vector<uint32_t> value;   // their values as the async proxy has them
};

struct SharedWriter {     // the last generic-proxy write of 2 bytes of shared memory
  int tid = -1;           // the writing thread, -1: none since the async proxy wrote them
  long long epoch = 0;    // its proxy_fences count at the write
};

struct Sm90State {
  std::unordered_map<uint32_t, Mbarrier> bars;
  std::vector<TmaLoad> loads;
  int named_arrived[16] = {};
  int named_count[16] = {};
  long long named_phase[16] = {};             // completions of each named barrier
  std::vector<long long> named_in[16];        // per thread: the phase it last counted in at
  std::vector<int> group_arrived;             // per warpgroup
  std::vector<std::vector<WgmmaOp>> wgmma;    // per thread: issued, not retired
  std::vector<std::vector<RegSet>> regsets;   // per thread: registers of wgmmas in flight
  std::vector<std::array<unsigned, 4>> group_a;   // RS deposits, per thread
  std::vector<std::vector<TmaStore>> stores;      // per thread: issued, not yet read
  std::vector<long long> bulk_commits;            // per thread
  std::vector<SharedWriter> writers;              // per 2 bytes of shared memory
  int threads = 0;
};
extern Sm90State sm90;   // defined in ptc_emulate.cc

void sm90_block_start(int threads);

// ---- the generic and the async proxy ----------------------------------------------------
// a value of the registers of a wgmma in flight, read by the thread (`what` reads it)
void in_flight_value(const char* what);
void check_f32(float x, const char* what);
void check_b16(uint16_t h, const char* what);

// generic-proxy writes of shared memory (st.shared through the door, stmatrix, cp.async)
void generic_write(const void* p, size_t bytes);
void shared_written(const void* p, size_t bytes);

// async-proxy writes (a TMA load landing): the bytes are the async proxy's
void async_write(uint32_t o, size_t bytes);

// an async-proxy read (a wgmma operand, a TMA store's box) of `bytes` at shared offset o
bool async_read(uint32_t o, size_t bytes, const char* what);

// fence.proxy.async.shared::cta: this thread's generic writes so far are visible to the
// async proxy; so are its mbarrier.inits (as fence.mbarrier_init makes them)
void fence_proxy_async();

// ---- swizzles -----------------------------------------------------------------------------
inline uint32_t swizzle_address(uint32_t a, int span) {
  switch (span) {
    case 128: return a ^ ((a >> 3) & 0x70u);
    case 64: return a ^ ((a >> 3) & 0x30u);
    case 32: return a ^ ((a >> 3) & 0x10u);
    default: return a;
  }
}

// ---- mbarrier ---------------------------------------------------------------------------
// the mbarrier at `addr`, for `what`; `async`: used by the async proxy (a TMA load's
// complete_tx), which needs the init fenced even for the initializing thread
Mbarrier* mbar(uint32_t addr, const char* what, bool async = false);

void mbarrier_wake(uint32_t addr);

void mbarrier_check(uint32_t addr, Mbarrier& b);

void mbarrier_init(uint32_t addr, int count);

// fence.mbarrier_init (and fence.proxy.async): the thread's inits so far are visible once
// the block meets at a barrier
void mbarrier_inits_fenced();
void mbarrier_init_fence();

void mbarrier_arrive(uint32_t addr);

void mbarrier_expect_tx(uint32_t addr, unsigned bytes);

void mbarrier_arrive_expect_tx(uint32_t addr, unsigned bytes);

void mbarrier_complete_tx(uint32_t addr, long long bytes);

// mbarrier.try_wait.parity in a loop: returns once the phase of parity `parity` completed
void mbarrier_wait_parity(uint32_t addr, unsigned parity);

// ---- TMA ------------------------------------------------------------------------------------
void tma_land(const TmaLoad& l);

// no thread can go on: land the deferred loads (their waiters wake); false if there were none
bool sm90_progress();

// cp.async.bulk.tensor.Nd.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// [dst], [map, {c0, ..}], [bar]: coordinates innermost first
// The bytes of one box of `m` at shared offset `at`, or -1 (reported) when the box is not
// aligned to its swizzle pattern (or 128 bytes) inside shared memory.
long long box_in_smem(const TensorMapData& m, uint32_t at, const char* what);

void tma_load(uint32_t dst, const void* map, const int* coords, uint32_t bar);

// cp.async.bulk.tensor.Nd.global.shared::cta.bulk_group [map, {c0, ..}], [src]: the box
// is read out of shared memory (unswizzled) when a wait_group.read retires its group --
// as late as allowed, so a thread that rewrites the tile before waiting stores the new
// bytes -- or at once in eager mode; elements past the tensor's end are not written (PTX
// ISA 5.5.3.3 "Out of Boundary Access": the box may cross the tensor's boundary)
void tma_store_now(const TmaStore& st);

void tma_store(const void* map, uint32_t src, const int* coords);

inline void bulk_commit_group() { ++sm90.bulk_commits[cur().tid]; }

void bulk_wait_group_read(int n);

// the block's end: a TMA store still reading shared memory is a kernel that did not wait
void sm90_block_end();

// ---- named barriers -----------------------------------------------------------------------
// bar.sync id, count: the thread counts in and waits until `count` threads have (those
// waiting and those that arrived with bar.arrive); bar.arrive id, count counts in and goes
// on. The barrier then starts again from zero. A thread (a warp, on the GPU) counts in once
// per phase: an arrive followed by another arrive or sync at the same barrier before it
// completes is an error.
bool named_barrier_count_in(const char* what, int id, int count);

void named_barrier_sync(int id, int count);

void named_barrier_arrive(int id, int count);

// ---- setmaxnreg -------------------------------------------------------------------------
// setmaxnreg.{inc,dec}.sync.aligned.u32 N: N a multiple of 8 in 24..256, the same in every
// thread of the warpgroup. The registers come from the CTA's pool (PTX ISA 9.7.19.5
// setmaxnreg: "a pool of available registers is maintained per-CTA"; SASS
// USETMAXREG.DEALLOC.CTAPOOL): the registers the block was launched with, its threads x
// `launch_registers`. An increase waits until decreases have returned enough to the pool;
// one the pool can never satisfy is a deadlock.
void setmaxnreg(int n, bool inc, int launch_registers);

// ---- warpgroup collectives ----------------------------------------------------------------
void group_barrier(const char* what);

// ---- wgmma.fence: the thread's registers as the fence saw them ----------------------------
// Here a thread's registers are its stack: the fence keeps a copy of the part in use (from
// this frame to the fiber's top); a register a wgmma reads must hold what it held then.
__attribute__((noinline)) inline void wgmma_fence() {
  Fiber& f = cur();
  asm volatile("" ::: "memory");
  unsigned char here = 0;
  const unsigned char* lo = &here;
  asm volatile("" : : "r"(lo) : "memory");
  const unsigned char* top = f.stack + f.stack_bytes;
  if (lo < f.stack || lo >= top) return;     // not on the fiber's stack
  f.fence_lo = lo;
  f.fence_stack.assign(lo, top);
  ++f.wgmma_fences;
}

// the emulator wrote the thread's registers: so would the fence's copy have them
void fence_sees(Fiber& f, const void* p, size_t bytes);

// a wgmma reads (or writes) `count` registers at p: they must be as the last fence saw them
bool fenced(Fiber& f, const uint32_t* p, int count, const char* what);

// ---- wgmma ----------------------------------------------------------------------------------
// The shared-memory matrix descriptor (PTX ISA 9.7.15.5.1.2.2 "Matrix Descriptor Format"):
// start address >> 4 in bits [0, 14), leading dimension byte offset >> 4 in [16, 30),
// stride dimension byte offset >> 4 in [32, 46), base offset in [49, 52), swizzle in
// [62, 64) (0 none, 1 128-byte, 2 64-byte, 3 32-byte).
struct Desc {
  uint32_t start, lbo, sbo;
  int swizzle;    // span in bytes, 0 for none
  int base_offset;
};
Desc decode_desc(uint64_t d);

// The byte address of 16-bit element (mn, k) of an operand described by `desc`: the PTX
// ISA's canonical layouts (9.7.15.5.1.2.1.3; CuTe notation, strides in elements, T = 8
// elements = 16 bytes, S = the swizzle span / 16), then Swizzle<log2 S, 4, 3> on the
// absolute address (the pattern starts on a span * 8 boundary: base offset 0):
//   K-major, none:      ((8,m),(T,2k)):((1T,SBO),(1,LBO))  rows 16 bytes apart, 8 rows SBO,
//                       the next 8 k LBO (K-adjacent core matrices)
//   K-major, swizzled:  ((8,m),(T,2k)):((ST,SBO),(1,T))    rows a span apart, 8 rows SBO,
//                       the next 8 k 16 bytes on (LBO unused)
//   MN-major, none:     ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))  8 mn contiguous, the next 8
//                       mn SBO; k rows 16 bytes apart, the next 8 k LBO
//   MN-major, swizzled: ((T,S,m),(8,k)):((1,T,LBO),(ST,SBO))  8 S mn contiguous (a span),
//                       the next 8 S mn LBO; k rows a span apart, the next 8 k SBO
// 8-bit elements (T = 16 per 16 bytes) take the K-major layouts only, k % 16 a byte of the
// row's 16-byte chunk (PTX ISA 9.7.15.5.1.2.1.3: T = 128 / sizeof-bits elements).
uint32_t operand_address(const Desc& d, int mn, int k, bool mn_major, int esize = 2);

float operand_element(const Desc& d, int mn, int k, bool mn_major, bool bf16);

// a shared-memory operand of a wgmma being issued: its descriptor is one the emulator
// models, and the bytes it reads are the async proxy's (or fenced generic writes)
bool check_operand(uint64_t desc, int mns, bool mn_major, const char* which,
                   int esize = 2);

float half_of(unsigned reg, int half, bool bf16);

RegSet* regset(int tid, const void* regs);

// The registers of a wgmma being issued by this thread go to the async proxy: their values
// aside, the marker in the registers. Returns their values (those the async proxy has, if
// a wgmma in flight already holds them).
RegSet* hand_over(Fiber& f, uint32_t* regs, int count, bool acc, const char* what);

// The accumulator of m64nNk16: thread t of the warpgroup (warp w = t / 32, lane l) holds in
// register r the element row 16w + l/4 + 8 * ((r / 2) % 2), column 8 * (r / 4) + 2 * (l % 4)
// + r % 2 (PTX ISA, "Register Fragments and Shared Memory Matrix Layouts" for wgmma D).
// Computed on the values the async proxy has for thread `tid`'s registers.
int8_t operand_byte(const Desc& d, int mn, int k);

// m64nNk32 .s32.s8.s8: the accumulator layout of m64nNk16 (s32 for f32), 32 k per
// instruction, the sum modulo 2^32 (no .satfinite)
void wgmma8_compute(WgmmaOp& op, RegSet* s, int tid);

// an FP8 code's value (OCP E4M3FN: bias 7, S.1111.111 NaN, no infinities; E5M2: bias 15,
// IEEE-like), from the formats' definitions
float fp8_value(uint8_t c, bool e5m2);

// cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 of one value, from the PTX ISA's rule: the finite
// code nearest x, ties to the even code, the largest beyond it; a NaN keeps its sign (the
// ISA does not say which NaN: the emulation gives the one ptc must not rely on)
uint8_t cvt_fp8(float x, bool e5m2);

// m64nNk32 .f32 with FP8 inputs: the accumulator layout of m64nNk16, 32 k per instruction,
// the exact products summed in f32 in k order
void wgmma_fp8_compute(WgmmaOp& op, RegSet* s, int tid);

void wgmma_compute(WgmmaOp& op, int tid);

template <int N, bool BF16>
inline void wgmma_issue(float* d, const unsigned* a, uint64_t desc_a, uint64_t desc_b,
                        int scale_d, int trans_a, int trans_b) {
  static_assert(N % 8 == 0 && N >= 8 && N <= 256, "wgmma m64nNk16: N a multiple of 8 up to 256");
  Fiber& f = cur();
  const int t = f.tid % 128;
  if (f.tid / 128 >= static_cast<int>(sm90.group_arrived.size()) ||
      (f.tid / 128 + 1) * 128 > rt.threads) {
    fail("wgmma issued by thread %d, outside a whole warpgroup", f.tid);
    return;
  }
  if (t == 0 && ((!a && !check_operand(desc_a, 64, trans_a != 0, "A")) ||
                 !check_operand(desc_b, N, trans_b != 0, "B")))
    return;
  // the registers go to the async proxy (A's values deposited for the warpgroup first)
  RegSet* acc = hand_over(f, reinterpret_cast<uint32_t*>(d), N / 2, true, "accumulator");
  if (!acc) return;
  if (a) {
    RegSet* as = hand_over(f, const_cast<uint32_t*>(reinterpret_cast<const uint32_t*>(a)), 4,
                           false, "A fragment");
    if (!as) return;
    for (int j = 0; j < 4; ++j) sm90.group_a[f.tid][j] = as->value[j];
  }
  // every copy of the op is recorded before the warpgroup goes on: the first thread to
  // wait computes the copies of all 128
  WgmmaOp op{f.wgmma_commits, f.wgmma_issued++, d, N, BF16, scale_d, a != nullptr, a, desc_a,
             desc_b, trans_a, trans_b, false, {}, -1};
  if (!a) {
    sm90.wgmma[f.tid].push_back(op);
    group_barrier("wgmma.mma_async");
    return;
  }
  group_barrier("wgmma.mma_async");    // the A registers of the warpgroup are deposited
  const int w = t / 32, g = (t % 32) / 4;   // rows g and g + 8 of this warp: lanes 4g .. 4g + 3
  for (int half = 0; half < 2; ++half)
    for (int k = 0; k < 16; ++k) {
      const int lane = 4 * g + (k % 8) / 2;
      const int reg = half + 2 * (k / 8);        // a0a1 (g), a2a3 (g+8), a4a5, a6a7 (k+8)
      op.a_rows[half][k] = half_of(sm90.group_a[(f.tid / 128) * 128 + w * 32 + lane][reg],
                                   k % 2, BF16);
    }
  sm90.wgmma[f.tid].push_back(op);
  group_barrier("wgmma.mma_async (registers read)");
}

// wgmma.mma_async m64nNk32 with 8-bit inputs, B by descriptor and A by descriptor or from
// registers (a: the thread's four registers of four bytes, null for a descriptor), both
// K-major (the 8-bit forms have no transpose operands). KIND 0: .s32.s8.s8 (int
// accumulators), N one of the PTX ISA's integer shapes (8, 16, 24, then multiples of 16);
// 1-4: .f32 with FP8 inputs (float accumulators), N a multiple of 8.
template <int N, int KIND, class Acc>
inline void wgmma8_issue(Acc* d, const uint32_t* a, uint64_t desc_a, uint64_t desc_b,
                         int scale_d) {
  static_assert(KIND >= 0 && KIND <= 4, "wgmma 8-bit kinds: 0 (.s8), 1-4 (FP8)");
  static_assert(std::is_same<Acc, int>::value == (KIND == 0),
                "wgmma m64nNk32: s32 accumulators for .s8, f32 for FP8");
  static_assert(KIND != 0 || N == 8 || N == 16 || N == 24 ||
                (N % 16 == 0 && N >= 32 && N <= 256),
                "wgmma m64nNk32.s32.s8.s8: N is 8, 16, 24 or a multiple of 16 up to 256");
  static_assert(N % 8 == 0 && N >= 8 && N <= 256, "wgmma m64nNk32: N a multiple of 8 up to 256");
  Fiber& f = cur();
  if (f.tid / 128 >= static_cast<int>(sm90.group_arrived.size()) ||
      (f.tid / 128 + 1) * 128 > rt.threads) {
    fail("wgmma issued by thread %d, outside a whole warpgroup", f.tid);
    return;
  }
  if (f.tid % 128 == 0 && ((!a && !check_operand(desc_a, 64, false, "A", 1)) ||
                           !check_operand(desc_b, N, false, "B", 1)))
    return;
  RegSet* acc = hand_over(f, reinterpret_cast<uint32_t*>(d), N / 2, true, "accumulator");
  if (!acc) return;
  if (a) {
    RegSet* as = hand_over(f, const_cast<uint32_t*>(a), 4, false, "A fragment");
    if (!as) return;
    for (int j = 0; j < 4; ++j) sm90.group_a[f.tid][j] = as->value[j];
  }
  WgmmaOp op{f.wgmma_commits, f.wgmma_issued++, reinterpret_cast<float*>(d), N, false, scale_d,
             a != nullptr, reinterpret_cast<const unsigned*>(a), desc_a, desc_b, 0, 0, false,
             {}, KIND, {}};
  if (!a) {
    sm90.wgmma[f.tid].push_back(op);
    group_barrier("wgmma.mma_async");
    return;
  }
  group_barrier("wgmma.mma_async");    // the A registers of the warpgroup are deposited
  // rows g and g + 8 of this warp, held by lanes 4g .. 4g + 3: register h + 2 (k / 16) of
  // lane 4g + (k % 16) / 4 holds k in its byte k % 4 (mma.sync m16n8k32's A per warp)
  const int t = f.tid % 128, w = t / 32, g = (t % 32) / 4;
  for (int half = 0; half < 2; ++half)
    for (int k = 0; k < 32; ++k) {
      const int lane = 4 * g + (k % 16) / 4, reg = half + 2 * (k / 16);
      const uint32_t word = sm90.group_a[(f.tid / 128) * 128 + w * 32 + lane][reg];
      op.a_bytes[half][k] = static_cast<int8_t>((word >> (8 * (k % 4))) & 0xffu);
    }
  sm90.wgmma[f.tid].push_back(op);
  group_barrier("wgmma.mma_async (registers read)");
}

inline void wgmma_commit() { ++cur().wgmma_commits; }

// wgmma.wait_group N: every group but the N most recent is complete. A wgmma is one
// operation of the whole warpgroup: once one thread sees it complete, it has read its
// operands and computed every thread's accumulators, so the first thread to wait computes
// the warpgroup's copies of it; each thread's registers receive them at its own wait.
void wgmma_wait(int n);

}  // namespace emu
}  // namespace ptc
