// ptc CPU emulation, the part every backend shares: threads as fibers, the block barrier,
// warp (wave) collectives' meeting point, shared-memory (LDS) and global bounds checks,
// bank-conflict accounting and the launcher. Included by a backend's emulation header
// (targets/cuda/templates/emulate/ptc_emulate.h: warps of 32; targets/hip/templates/emulate/
// ptc_emulate_hip.h: waves of 64); ptc/render/emulate.py puts this folder on the include
// path. Nothing here is used by GPU builds.
//
// Execution model. Blocks run one after another. The threads of a block are fibers on the
// calling OS thread (Context: a stack switch of our own on x86-64, ucontext elsewhere): a fiber runs until it reaches a barrier (or a
// warp-collective instruction), then the scheduler runs the next ready fiber. It runs one
// warp as far as it can go -- until all its lanes wait at the block barrier -- before the
// next, so warps drift apart as far as the barriers allow; warps and lanes go in thread
// order, reverse order, or a fresh random order each time (`ptc_emulate_config`). So a
// missing barrier shows up as wrong numbers, deterministically, and a barrier that not
// every thread reaches is reported as a deadlock instead of hanging.
//
// Shared memory is one static array (`ptc_smem`), filled with 0xFF bytes (NaN in every
// float type) at the start of each block and followed by a canary that is checked after
// the block. Global tensors registered by the caller are bounds-checked on every access
// made through the helpers (global_access).
//
// Warp collectives: each lane deposits its operands in its warp's scratch slot (deposit),
// the warp meets (warp_barrier), and each lane computes its own result from the other
// lanes' deposits; same_kind reports lanes that reached different collectives.
//
// The backend, before including this file, defines
//   PTC_EMU_WARP            lanes per warp (32 or 64)
//   PTC_EMU_WARP_NAME       "warp" or "wave", in messages
//   PTC_EMU_BARRIER_NAME    the block barrier's name in messages ("__syncthreads")
//   PTC_EMU_SMEM_NAME       "shared memory" or "LDS", in messages
//   PTC_EMU_SMEM_CAPACITY   the most shared memory a block may ask for, in bytes
//   namespace ptc::emu: enum State (READY, AT_BLOCK_BARRIER, AT_WARP_BARRIER, its own
//   waiting states, DONE, STATES) and struct FiberExt (its per-thread state, value-
//   initialized at each block's start)
// and after it defines the hooks declared under "backend hooks".
//
// What does not depend on the kernel -- the runtime's state, the barriers, the bank-conflict
// accounting, the launcher's scheduling loop and the API Python calls -- is declared here
// and defined in ptc_emulate_core.cc, compiled once per backend into the runtime object that
// every emulated kernel links (ptc/render/emulate.py: runtime_object); what stays here is
// templates and the small functions a kernel calls on every access.
#pragma once
#include <ucontext.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <math.h>
#include <random>
#include <source_location>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#if !defined(PTC_EMU_WARP) || !defined(PTC_EMU_SMEM_CAPACITY) || !defined(PTC_EMU_WARP_NAME) || \
    !defined(PTC_EMU_BARRIER_NAME) || !defined(PTC_EMU_SMEM_NAME)
#error "a backend's emulation header defines the PTC_EMU_* parameters before including this"
#endif
static_assert(PTC_EMU_WARP == 32 || PTC_EMU_WARP == 64, "warps of 32 or 64 lanes");

#define PTC_EMU_CANARY_BYTES 4096

// `extern __shared__ unsigned char ptc_smem[]` in the kernel refers to this array (defined
// in ptc_emulate_core.cc, as is everything declared here without a body).
extern "C" {
extern unsigned char ptc_smem[PTC_EMU_SMEM_CAPACITY + PTC_EMU_CANARY_BYTES];
}

namespace ptc {
namespace emu {

constexpr int WARP = PTC_EMU_WARP;
using LaneMask = std::conditional_t<WARP == 64, uint64_t, uint32_t>;
constexpr LaneMask ALL_LANES = ~LaneMask(0);

struct Config {
  int order = 0;            // 0: thread order, 1: reverse, 2: random each pass
  int eager = 0;            // 1: asynchronous copies land when issued
  int break_layout = 0;     // 1: a deliberately wrong matrix-fragment layout (self-test)
  unsigned seed = 1;
  int fill = 0xFF;          // shared memory bytes at the start of a block
  int smem_limit = 0;       // the device's shared memory per block (0: the capacity)
  const char* device = "";  // the device it comes from, for messages
};
extern Config config;

// Where a fiber (or the scheduler) goes on from. On x86-64 a switch pushes the callee-saved
// registers and the FP control words on the stack it leaves and keeps that stack pointer:
// glibc's swapcontext also saves and restores the signal mask, a system call per switch,
// which was a third of an emulated GEMM's time. Elsewhere, ucontext.
struct Context {
#if defined(__x86_64__)
  void* sp = nullptr;
#else
  ucontext_t uc;
#endif
};
// save the running context in `from`, resume `to`
void switch_context(Context& from, Context& to);
// `c` starts ptc_emu_fiber_entry on `stack` (`bytes` long) when first switched to
void start_context(Context& c, unsigned char* stack, size_t bytes);

struct Fiber : FiberExt {
  Context ctx;
  unsigned char* stack = nullptr;
  size_t stack_bytes = 0;
  int tid = 0;
  State state = READY;
  long long collectives = 0;    // warp-collective ops so far: picks the scratch buffer
  const char* waiting_at = "";  // the warp-collective instruction it waits at
};

struct WarpScratch {            // two alternating buffers, one slot per lane
  int kind[2][WARP];
  const void* addr[2][WARP];
  unsigned a[2][WARP][4];
  unsigned b[2][WARP][2];
  unsigned long long v[2][WARP];  // shuffles, votes, lane exchanges: each lane's value
  int same[2] = {-1, -1};         // the kind every lane deposited, once a lane checked it
  // a matrix instruction's A operand as values, decoded by the first lane that needs it
  // (`decoded` is the kind it was decoded for; every lane reads rows the others read too)
  int decoded[2] = {-1, -1};
  float a_values[2][512];
};

// Shared-memory bank conflicts (see "bank conflicts" below): the accesses of one source
// site by the lanes of one warp, the k-th by each lane forming one warp instruction.
enum Access { ACC_LDMATRIX = 0, ACC_CP_ASYNC, ACC_LDS, ACC_STS, ACC_KINDS };

struct SiteKey {
  const char* file;
  unsigned line, column;
  int kind, bytes;
  bool operator==(const SiteKey&) const = default;
};
struct SiteKeyHash {
  size_t operator()(const SiteKey& k) const {
    size_t h = std::hash<const void*>()(k.file);
    for (size_t v : {size_t(k.line), size_t(k.column), size_t(k.kind), size_t(k.bytes)})
      h = h * 1000003u ^ v;
    return h;
  }
};

struct SiteStats {              // one source site over the whole launch
  int kind;
  std::string file;
  unsigned line, column;
  long long instructions = 0, wavefronts = 0, conflicts = 0;
};

struct Instruction {            // one warp instruction: the lanes that executed it so far
  LaneMask mask = 0;
  bool done = false;
  uint32_t offset[WARP];        // each lane's shared-memory byte offset
};

struct WarpSite {               // one site's instructions in one warp since it last converged
  int stats = -1, kind = 0, bytes = 0;
  long long count[WARP] = {};   // executions by each lane
  long long base = 0;           // the index of pending.front()
  std::deque<Instruction> pending;
  bool dirty = false;
};

struct WarpAccesses {
  std::unordered_map<SiteKey, WarpSite, SiteKeyHash> sites;
  std::vector<WarpSite*> dirty; // the sites with pending instructions
  SiteKey last_key{};
  WarpSite* last = nullptr;
};

struct Runtime {
  std::vector<Fiber> fibers;
  std::vector<WarpScratch> warps;
  std::vector<int> warp_arrived;
  int block_arrived = 0;
  int threads = 0;
  int smem_bytes = 0;
  long long block = -1;
  long long blocks = 0;
  int current = -1;
  Context scheduler;
  std::function<void()> body;
  std::string error;
  long long errors = 0;
  long long block_barriers = 0;  // block barriers completed in this block
  // the backend's watch on shared-memory stores made through the door (shared_store)
  void (*shared_written)(const void* p, size_t bytes) = nullptr;
  std::vector<std::pair<const unsigned char*, size_t>> tensors;
  // bank conflicts, per launch
  std::vector<WarpAccesses> accesses;
  std::unordered_map<SiteKey, int, SiteKeyHash> site_index;
  std::vector<SiteStats> sites;
  long long instructions[ACC_KINDS] = {}, wavefronts[ACC_KINDS] = {}, conflicts[ACC_KINDS] = {};
};
extern Runtime rt;

// ---- backend hooks (defined by the backend after including this file) -------------------
inline void backend_launch(long long blocks, int threads);   // before the first block
inline void backend_block_start(int threads);                // each block, fibers reset
inline void backend_switch(int tid);                         // before running thread tid
inline bool backend_progress();      // no thread could go on: true if the backend woke some
inline void backend_block_end();     // after the block's threads finished (no error so far)
inline const char* state_count_label(State s);   // the deadlock report's count of s; null: none
inline const char* state_name(State s);
inline void state_detail(const Fiber& f, char* out, size_t n);   // after state_name
// the phase of an access by `lane` (kind: Access) within its warp instruction (bank conflicts)
inline int bank_phase(int kind, int bytes, int lane);

void fail(const char* fmt, ...);

inline Fiber& cur() { return rt.fibers[rt.current]; }
inline int lane_of(const Fiber& f) { return f.tid % WARP; }
inline int warp_of(const Fiber& f) { return f.tid / WARP; }

inline void yield() {
  Fiber& f = cur();
  switch_context(f.ctx, rt.scheduler);
}

// ---- barriers ---------------------------------------------------------------------------
void converge(int warp);

void block_barrier();

void warp_barrier(const char* what = "a " PTC_EMU_WARP_NAME "-collective instruction");

// ---- address checks ---------------------------------------------------------------------
inline bool in_smem(const void* p, size_t n) {
  const unsigned char* a = static_cast<const unsigned char*>(p);
  return a >= ptc_smem && a + n <= ptc_smem + rt.smem_bytes;
}
bool in_tensor(const void* p, size_t n);
template <typename T> inline T* global_access(T* p) {
  if (!in_tensor(p, sizeof(T))) {
    fail("global access of %zu bytes at %p is outside every tensor", sizeof(T), (const void*)p);
    // keep going without touching foreign memory
    alignas(16) static unsigned char dummy[sizeof(T) < 16 ? 16 : sizeof(T)];
    memset(dummy, 0, sizeof dummy);
    return reinterpret_cast<T*>(dummy);
  }
  return p;
}

// ---- bank conflicts ------------------------------------------------------------------------
// Shared memory has 32 banks of 4-byte words. A warp instruction is served in phases
// (bank_phase: the backend's rule; typically 128 bytes of lanes each: 32 lanes of up to 4
// bytes, 16 of 8, 8 of 16). A phase takes as many wavefronts as the most distinct words
// any one bank holds among its accesses (lanes reading the same word share it); its
// conflicts are its wavefronts beyond the first. Lanes that do not execute the instruction
// take no part.
//
// Which accesses form one warp instruction: the k-th execution of a source site (file, line
// and column, by std::source_location) by each lane of the warp, counting k from the point
// where the warp last converged (a warp collective or the block barrier; the counts restart
// there, so lanes that skipped a site in a divergent branch match up again). An instruction
// is evaluated when its last lane records it, or else when the warp converges or the block
// ends, with the lanes that executed it.

// phases of consecutive lanes, 128 bytes each
inline int consecutive_phase(int bytes, int lane) {
  return lane / (bytes <= 4 ? 32 : bytes <= 8 ? 16 : 8);
}

void account(int site, int kind, const uint32_t* offset, LaneMask mask, int bytes);

int site_stats(const SiteKey& key);

// one lane's access of `bytes` bytes at `p` (inside shared memory) at a source site
void record(int kind, const std::source_location& where, const void* p, int bytes);

// the warp's lanes are all at one point: evaluate what is pending, restart the counts
void converge(int warp);

// a checked, counted shared-memory access (CUDA: ptc::lds / ptc::sts; HIP: ld_shared /
// st_shared)
template <typename T> inline bool shared_access(const T* p, const char* what) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8 ||
                sizeof(T) == 16, "a shared-memory access moves 1, 2, 4, 8 or 16 bytes");
  if (rt.current < 0) { fail("%s outside a kernel", what); return false; }
  if (!in_smem(p, sizeof(T)) || reinterpret_cast<uintptr_t>(p) % sizeof(T) != 0) {
    fail("%s of %zu bytes at %p (shared offset %lld) is not inside %s of %d bytes, "
         "%zu-byte aligned", what, sizeof(T), (const void*)p,
         (long long)(reinterpret_cast<const unsigned char*>(p) - ptc_smem), PTC_EMU_SMEM_NAME,
         rt.smem_bytes, sizeof(T));
    return false;
  }
  return true;
}
template <typename T> inline T shared_load(const T* p, const std::source_location& where) {
  if (!shared_access(p, "lds")) return T{};
  record(ACC_LDS, where, p, sizeof(T));
  return *p;
}
template <typename T>
inline void shared_store(T* p, const T& v, const std::source_location& where) {
  if (!shared_access(p, "sts")) return;
  record(ACC_STS, where, p, sizeof(T));
  *p = v;
  if (rt.shared_written) rt.shared_written(p, sizeof(T));
}

// ---- warp collectives ---------------------------------------------------------------------
inline int deposit(int kind) {
  Fiber& f = cur();
  const int buf = static_cast<int>(f.collectives++ & 1);
  WarpScratch& s = rt.warps[warp_of(f)];
  s.kind[buf][lane_of(f)] = kind;
  s.same[buf] = s.decoded[buf] = -1;
  return buf;
}

// After the warp met: did every lane deposit `kind`? The first lane to ask checks all of
// them; the others, at the same meeting, take its answer (a lane deposits in this buffer
// again only after every lane has passed the next meeting, so the deposits are the same).
inline bool same_kind(WarpScratch& s, int buf, int kind, const char* what) {
  if (s.same[buf] == kind) return true;
  for (int l = 0; l < WARP; ++l) {
    if (s.kind[buf][l] != kind) {
      fail("%s: lane %d of the %s executes a different %s-collective instruction", what, l,
           PTC_EMU_WARP_NAME, PTC_EMU_WARP_NAME);
      return false;
    }
  }
  s.same[buf] = kind;
  return true;
}

// ---- the launcher -------------------------------------------------------------------------

// no thread can go on: name the states the threads are in
void report_deadlock();

// Runs `blocks` blocks of `threads` threads, each thread calling `body` (ptc_emulate_core.cc).
// Returns 0, or 700 (cudaErrorIllegalAddress / hipErrorIllegalAddress) after an error.
int launch_blocks(long long blocks, int threads, int smem_bytes, std::function<void()> body);
template <typename Body>
int launch(long long blocks, int threads, int smem_bytes, Body&& body) {
  return launch_blocks(blocks, threads, smem_bytes, [&body] { body(); });
}

}  // namespace emu
}  // namespace ptc
