// ptc CPU emulation, the part every backend shares: threads as fibers, the block barrier,
// warp (wave) collectives' meeting point, shared-memory (LDS) and global bounds checks,
// bank-conflict accounting and the launcher. Included by a backend's emulation header
// (templates/cuda/emulate/ptc_emulate.h: warps of 32; templates/hip/emulate/
// ptc_emulate_hip.h: waves of 64); ptc/render/emulate.py puts this folder on the include
// path. Nothing here is used by GPU builds.
//
// Execution model. Blocks run one after another. The threads of a block are fibers
// (ucontext) on the calling OS thread: a fiber runs until it reaches a barrier (or a
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

// `extern __shared__ unsigned char ptc_smem[]` in the kernel refers to this array.
extern "C" {
__attribute__((aligned(1024))) unsigned char ptc_smem[PTC_EMU_SMEM_CAPACITY + PTC_EMU_CANARY_BYTES];
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
Config config;

struct Fiber : FiberExt {
  ucontext_t ctx;
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
  ucontext_t scheduler;
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
Runtime rt;

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

inline void fail(const char* fmt, ...) {
  ++rt.errors;
  if (!rt.error.empty()) return;
  char msg[1200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  char where[96] = "";
  if (rt.block >= 0 && rt.current >= 0)
    snprintf(where, sizeof where, "block %lld thread %d: ", rt.block, rt.current);
  else if (rt.block >= 0)
    snprintf(where, sizeof where, "block %lld: ", rt.block);
  rt.error = std::string(where) + msg;
}

inline Fiber& cur() { return rt.fibers[rt.current]; }
inline int lane_of(const Fiber& f) { return f.tid % WARP; }
inline int warp_of(const Fiber& f) { return f.tid / WARP; }

inline void yield() {
  Fiber& f = cur();
  swapcontext(&f.ctx, &rt.scheduler);
}

// ---- barriers ---------------------------------------------------------------------------
inline void converge(int warp);

inline void block_barrier() {
  if (rt.current < 0) { fail("%s outside a kernel", PTC_EMU_BARRIER_NAME); return; }
  Fiber& f = cur();
  f.state = AT_BLOCK_BARRIER;
  if (++rt.block_arrived == rt.threads) {
    rt.block_arrived = 0;
    ++rt.block_barriers;
    for (int w = 0; w < rt.threads / WARP; ++w) converge(w);
    for (Fiber& g : rt.fibers)
      if (g.state == AT_BLOCK_BARRIER) g.state = READY;
  }
  yield();
}

inline void warp_barrier(const char* what = "a " PTC_EMU_WARP_NAME "-collective instruction") {
  Fiber& f = cur();
  f.waiting_at = what;
  const int w = warp_of(f);
  f.state = AT_WARP_BARRIER;
  if (++rt.warp_arrived[w] == WARP) {
    rt.warp_arrived[w] = 0;
    converge(w);
    for (int l = 0; l < WARP; ++l)
      if (rt.fibers[w * WARP + l].state == AT_WARP_BARRIER) rt.fibers[w * WARP + l].state = READY;
  }
  yield();
}

// ---- address checks ---------------------------------------------------------------------
inline bool in_smem(const void* p, size_t n) {
  const unsigned char* a = static_cast<const unsigned char*>(p);
  return a >= ptc_smem && a + n <= ptc_smem + rt.smem_bytes;
}
inline bool in_tensor(const void* p, size_t n) {
  if (rt.tensors.empty()) return true;  // nothing registered: no checks
  const unsigned char* a = static_cast<const unsigned char*>(p);
  for (const auto& t : rt.tensors)
    if (a >= t.first && a + n <= t.first + t.second) return true;
  return false;
}
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

inline void account(int site, int kind, const uint32_t* offset, LaneMask mask, int bytes) {
  uint32_t words[WARP][5];      // per lane: the words it touches (16 bytes, unaligned: 5)
  int nwords[WARP] = {}, phase[WARP];
  int phases = 0;
  for (int l = 0; l < WARP; ++l) {
    if (!((mask >> l) & 1u)) continue;
    phase[l] = bank_phase(kind, bytes, l);
    phases = std::max(phases, phase[l] + 1);
    for (uint32_t w = offset[l] / 4, end = (offset[l] + bytes - 1) / 4; w <= end; ++w)
      words[l][nwords[l]++] = w;
  }
  long long wavefronts = 0, minimal = 0;
  for (int p = 0; p < phases; ++p) {
    uint32_t seen[WARP * 5];
    int n = 0;
    for (int l = 0; l < WARP; ++l) {
      if (!((mask >> l) & 1u) || phase[l] != p) continue;
      for (int i = 0; i < nwords[l]; ++i) seen[n++] = words[l][i];
    }
    if (n == 0) continue;
    std::sort(seen, seen + n);
    n = static_cast<int>(std::unique(seen, seen + n) - seen);
    int per_bank[32] = {}, most = 0;
    for (int i = 0; i < n; ++i) most = std::max(most, ++per_bank[seen[i] % 32]);
    wavefronts += most;
    ++minimal;
  }
  ++rt.instructions[kind];
  rt.wavefronts[kind] += wavefronts;
  rt.conflicts[kind] += wavefronts - minimal;
  SiteStats& s = rt.sites[site];
  ++s.instructions;
  s.wavefronts += wavefronts;
  s.conflicts += wavefronts - minimal;
}

inline int site_stats(const SiteKey& key) {
  auto it = rt.site_index.find(key);
  if (it != rt.site_index.end()) return it->second;
  rt.sites.push_back(SiteStats{key.kind, key.file, key.line, key.column});
  return rt.site_index[key] = static_cast<int>(rt.sites.size()) - 1;
}

// one lane's access of `bytes` bytes at `p` (inside shared memory) at a source site
inline void record(int kind, const std::source_location& where, const void* p, int bytes) {
  Fiber& f = cur();
  const int lane = lane_of(f);
  WarpAccesses& a = rt.accesses[warp_of(f)];
  const SiteKey key{where.file_name(), static_cast<unsigned>(where.line()),
                    static_cast<unsigned>(where.column()), kind, bytes};
  WarpSite* s = a.last;
  if (s == nullptr || !(a.last_key == key)) {
    auto it = a.sites.find(key);
    if (it == a.sites.end()) {
      it = a.sites.emplace(key, WarpSite{}).first;
      it->second.stats = site_stats(key);
      it->second.kind = kind;
      it->second.bytes = bytes;
    }
    s = a.last = &it->second;
    a.last_key = key;
  }
  if (!s->dirty) {
    s->dirty = true;
    a.dirty.push_back(s);
  }
  const size_t i = static_cast<size_t>(s->count[lane]++ - s->base);
  if (i >= s->pending.size()) s->pending.resize(i + 1);
  Instruction& in = s->pending[i];
  in.offset[lane] = static_cast<uint32_t>(static_cast<const unsigned char*>(p) - ptc_smem);
  in.mask |= LaneMask(1) << lane;
  if (in.mask == ALL_LANES) {
    account(s->stats, kind, in.offset, in.mask, bytes);
    in.done = true;
    while (!s->pending.empty() && s->pending.front().done) {
      s->pending.pop_front();
      ++s->base;
    }
  }
}

// the warp's lanes are all at one point: evaluate what is pending, restart the counts
inline void converge(int warp) {
  if (warp >= static_cast<int>(rt.accesses.size())) return;
  WarpAccesses& a = rt.accesses[warp];
  for (WarpSite* s : a.dirty) {
    for (const Instruction& in : s->pending)
      if (!in.done && in.mask) account(s->stats, s->kind, in.offset, in.mask, s->bytes);
    s->pending.clear();
    s->base = 0;
    std::fill(s->count, s->count + WARP, 0LL);
    s->dirty = false;
  }
  a.dirty.clear();
}

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
  rt.warps[warp_of(f)].kind[buf][lane_of(f)] = kind;
  return buf;
}

inline bool same_kind(const WarpScratch& s, int buf, int kind, const char* what) {
  for (int l = 0; l < WARP; ++l) {
    if (s.kind[buf][l] != kind) {
      fail("%s: lane %d of the %s executes a different %s-collective instruction", what, l,
           PTC_EMU_WARP_NAME, PTC_EMU_WARP_NAME);
      return false;
    }
  }
  return true;
}

// ---- the launcher -------------------------------------------------------------------------
extern "C" inline void ptc_emu_fiber_entry() {
  rt.body();
  cur().state = DONE;  // returning switches to uc_link: the scheduler
}

// no thread can go on: name the states the threads are in
inline void report_deadlock() {
  int counts[STATES] = {};
  for (const Fiber& f : rt.fibers) ++counts[f.state];
  int first = 0;
  while (rt.fibers[first].state == DONE) ++first;
  for (int i = 0; i < rt.threads; ++i)   // a warp collective that not every lane reaches
    if (rt.fibers[i].state == AT_WARP_BARRIER) { first = i; break; }
  std::string msg = "deadlock: ";
  bool listed = false;
  for (int s = 0; s < STATES; ++s) {
    const char* label = state_count_label(static_cast<State>(s));
    if (!label) continue;
    msg += (listed ? ", " : "") + std::to_string(counts[s]) + (listed ? " " : " thread(s) ") + label;
    listed = true;
  }
  const Fiber& g = rt.fibers[first];
  char detail[400] = "";
  state_detail(g, detail, sizeof detail);
  fail("%s (thread %d is %s%s)", msg.c_str(), first, state_name(g.state), detail);
}

template <typename Body>
int launch(long long blocks, int threads, int smem_bytes, Body&& body) {
  rt.error.clear();
  rt.errors = 0;
  rt.accesses.clear();
  rt.site_index.clear();
  rt.sites.clear();
  for (int k = 0; k < ACC_KINDS; ++k) rt.instructions[k] = rt.wavefronts[k] = rt.conflicts[k] = 0;
  rt.block = -1;
  rt.current = -1;
  if (threads <= 0 || threads % WARP != 0 || threads > 1024) {
    fail("%d threads per block: the emulator takes whole %ss, at most 1024 threads", threads,
         PTC_EMU_WARP_NAME);
    return 1;
  }
  if (smem_bytes < 0 || smem_bytes > PTC_EMU_SMEM_CAPACITY) {
    fail("%d bytes of %s, over the emulator's %d", smem_bytes, PTC_EMU_SMEM_NAME,
         PTC_EMU_SMEM_CAPACITY);
    return 1;
  }
  // the device's limit (its description's resources.shared_memory_bytes, which the caller
  // passes: ptc_emulate_limits): a launch asking for more fails on the device, as
  // cudaFuncSetAttribute(MaxDynamicSharedMemorySize) / hipFuncSetAttribute does
  if (config.smem_limit > 0 && smem_bytes > config.smem_limit) {
    fail("%d bytes of %s per block, over the %d a block of %s may have (its device "
         "description's resources.shared_memory_bytes; the launch would fail)", smem_bytes,
         PTC_EMU_SMEM_NAME, config.smem_limit, config.device);
    return 1;
  }
  const int nwarps = threads / WARP;
  rt.threads = threads;
  rt.smem_bytes = smem_bytes;
  rt.blocks = blocks;
  rt.body = [&body] { body(); };
  rt.fibers.assign(threads, Fiber{});
  rt.warps.assign(nwarps, WarpScratch{});
  rt.warp_arrived.assign(nwarps, 0);
  rt.accesses.assign(nwarps, WarpAccesses{});
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t stack_bytes = 256 * 1024;
  for (int i = 0; i < threads; ++i) {
    Fiber& f = rt.fibers[i];
    f.tid = i;
    f.stack_bytes = stack_bytes + page;
    void* m = mmap(nullptr, f.stack_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (m == MAP_FAILED) { fail("cannot allocate fiber stacks"); break; }
    f.stack = static_cast<unsigned char*>(m);
    mprotect(f.stack, page, PROT_NONE);  // guard page: a stack overflow faults
  }
  std::mt19937 rng(config.seed);
  std::vector<int> warp_order(nwarps), lane_order(WARP);
  backend_launch(blocks, threads);
  for (long long b = 0; b < blocks && rt.error.empty(); ++b) {
    rt.block = b;
    memset(ptc_smem, config.fill, smem_bytes);
    memset(ptc_smem + smem_bytes, 0xA5, PTC_EMU_CANARY_BYTES);
    rt.block_arrived = 0;
    rt.block_barriers = 0;
    std::fill(rt.warp_arrived.begin(), rt.warp_arrived.end(), 0);
    for (Fiber& f : rt.fibers) {
      getcontext(&f.ctx);
      f.ctx.uc_stack.ss_sp = f.stack + page;
      f.ctx.uc_stack.ss_size = stack_bytes;
      f.ctx.uc_link = &rt.scheduler;
      makecontext(&f.ctx, ptc_emu_fiber_entry, 0);
      f.state = READY;
      f.collectives = 0;
      f.waiting_at = "";
      static_cast<FiberExt&>(f) = FiberExt{};
    }
    backend_block_start(threads);
    for (;;) {
      // A pass runs each warp in turn until none of its lanes can go on (all at the block
      // barrier or finished): warps drift apart as far as the barriers allow.
      for (int i = 0; i < nwarps; ++i) warp_order[i] = config.order == 1 ? nwarps - 1 - i : i;
      for (int i = 0; i < WARP; ++i) lane_order[i] = config.order == 1 ? WARP - 1 - i : i;
      if (config.order == 2) std::shuffle(warp_order.begin(), warp_order.end(), rng);
      bool ran = false;
      for (int w : warp_order) {
        for (bool again = true; again;) {
          again = false;
          if (config.order == 2) std::shuffle(lane_order.begin(), lane_order.end(), rng);
          for (int l : lane_order) {
            const int i = w * WARP + l;
            Fiber& f = rt.fibers[i];
            if (f.state != READY) continue;
            rt.current = i;
            backend_switch(i);
            swapcontext(&rt.scheduler, &f.ctx);
            ran = again = true;
          }
        }
      }
      rt.current = -1;
      bool done = true;
      for (const Fiber& f : rt.fibers) done = done && f.state == DONE;
      if (done) break;
      if (!ran && backend_progress()) continue;   // e.g. deferred copies landed: waiters woke
      if (!ran) {
        report_deadlock();
        break;
      }
    }
    for (int w = 0; w < nwarps; ++w) converge(w);  // what the block's end left pending
    if (rt.error.empty()) backend_block_end();
    for (int i = 0; i < PTC_EMU_CANARY_BYTES; ++i) {
      if (ptc_smem[smem_bytes + i] != 0xA5) {
        fail("%s written past its %d bytes (at byte %d)", PTC_EMU_SMEM_NAME, smem_bytes,
             smem_bytes + i);
        break;
      }
    }
  }
  for (Fiber& f : rt.fibers)
    if (f.stack) munmap(f.stack, f.stack_bytes);
  rt.fibers.clear();
  rt.accesses.clear();
  rt.body = nullptr;
  rt.block = -1;
  return rt.error.empty() ? 0 : 700;  // cudaErrorIllegalAddress, hipErrorIllegalAddress
}

}  // namespace emu
}  // namespace ptc

// ---- what Python calls besides ptc_launch (ptc/render/emulate.py) -----------------------
extern "C" {
void ptc_emulate_config(int order, int eager, int break_layout, unsigned seed, int fill) {
  ptc::emu::config.order = order;
  ptc::emu::config.eager = eager;
  ptc::emu::config.break_layout = break_layout;
  ptc::emu::config.seed = seed;
  ptc::emu::config.fill = fill;
}
// the device's limits the launches are checked against: shared memory per block (bytes;
// 0: only the emulator's capacity) and the device's name for the messages
void ptc_emulate_limits(int smem_per_block, const char* device) {
  static std::string name;
  name = device ? device : "";
  ptc::emu::config.smem_limit = smem_per_block;
  ptc::emu::config.device = name.c_str();
}
void ptc_emulate_clear_tensors(void) { ptc::emu::rt.tensors.clear(); }
void ptc_emulate_register_tensor(const void* p, size_t bytes) {
  ptc::emu::rt.tensors.emplace_back(static_cast<const unsigned char*>(p), bytes);
}
const char* ptc_emulate_error(void) { return ptc::emu::rt.error.c_str(); }
long long ptc_emulate_error_count(void) { return ptc::emu::rt.errors; }
// the last launch's shared-memory bank conflicts by Access kind: ldmatrix, cp.async, lds, sts
void ptc_emulate_bank_conflicts(long long out[4]) {
  for (int k = 0; k < ptc::emu::ACC_KINDS; ++k) out[k] = ptc::emu::rt.conflicts[k];
}
// and per source site: out = {kind, line, column, instructions, wavefronts, conflicts}
int ptc_emulate_access_sites(void) { return static_cast<int>(ptc::emu::rt.sites.size()); }
const char* ptc_emulate_access_site(int i, long long out[6]) {
  const ptc::emu::SiteStats& s = ptc::emu::rt.sites.at(static_cast<size_t>(i));
  const long long values[6] = {s.kind, s.line, s.column, s.instructions, s.wavefronts,
                               s.conflicts};
  for (int k = 0; k < 6; ++k) out[k] = values[k];
  return s.file.c_str();
}
}
