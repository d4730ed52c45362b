// ptc CPU emulation runtime: runs a rendered kernel.cu on the host, compiled with
// `g++ -std=c++20 -DPTC_EMULATE -I templates/cuda/emulate -I templates/cuda` (see
// ptc/render/emulate.py). Nothing here is used by nvcc builds.
//
// Execution model. Blocks run one after another. The threads of a block are fibers
// (ucontext) on the calling OS thread: a fiber runs until it reaches a barrier (or a
// warp-collective instruction), then the scheduler runs the next ready fiber. It runs one
// warp as far as it can go -- until all its lanes wait at __syncthreads -- before the
// next, so warps drift apart as far as the barriers allow; warps and lanes go in thread
// order, reverse order, or a fresh random order each time (`ptc_emulate_config`). So a
// missing __syncthreads shows up as wrong numbers, deterministically, and a barrier that
// not every thread reaches is reported as a deadlock instead of hanging.
//
// Shared memory is one static array (`ptc_smem`), filled with 0xFF bytes (NaN in every
// float type) at the start of each block and followed by a canary that is checked after
// the block. Global tensors registered by the caller are bounds-checked on every access
// made through the helpers (cp.async, tile loads and stores, atomics).
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
// site, and reported per launch (ptc_emulate_bank_conflicts; see "bank conflicts").
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
#define PTC_EMU_CANARY_BYTES 4096

// `extern __shared__ unsigned char ptc_smem[]` in the kernel refers to this array.
extern "C" {
__attribute__((aligned(128))) unsigned char ptc_smem[PTC_EMU_SMEM_CAPACITY + PTC_EMU_CANARY_BYTES];
}
// Set by the scheduler before it switches to a fiber (external linkage on purpose: the
// compiler must assume that a context switch changes them).
uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

namespace ptc {
namespace emu {

struct Config {
  int order = 0;            // 0: thread order, 1: reverse, 2: random each pass
  int eager_cp_async = 0;   // 1: cp.async copies at issue time
  int break_layout = 0;     // 1: a deliberately wrong mma A-fragment layout (self-test)
  unsigned seed = 1;
  int fill = 0xFF;          // shared memory bytes at the start of a block
  int eager_tma = 0;        // 1: TMA loads land when issued (with eager cp.async)
};
Config config;

enum State { READY, AT_BLOCK_BARRIER, AT_WARP_BARRIER, AT_MBARRIER, AT_NAMED_BARRIER,
             AT_GROUP_BARRIER, DONE, STATES };
enum Kind { NONE = 0, LDM_X1, LDM_X2, LDM_X4, LDM_X1_T, LDM_X2_T, LDM_X4_T, MMA_F16, MMA_BF16,
            MMA_TF32, SHFL, VOTE, SYNCWARP, STM_X1, STM_X2, STM_X4 };

struct Copy {
  unsigned char* dst;
  const unsigned char* src;
  bool valid;
  long long group;
  int bytes;
};

struct Fiber {
  ucontext_t ctx;
  unsigned char* stack = nullptr;
  size_t stack_bytes = 0;
  int tid = 0;
  State state = READY;
  long long commits = 0;        // cp.async groups committed
  std::vector<Copy> pending;    // cp.async copies not yet done
  long long collectives = 0;    // warp-collective ops so far: picks the scratch buffer
  const char* waiting_at = "";  // the warp-collective instruction it waits at
  // sm90 (ptc_emulate_sm90.h): the mbarrier and parity it waits for, its named barrier,
  // its register count after setmaxnreg (0: the launch's), its wgmma groups
  uint32_t wait_bar = 0;
  unsigned wait_parity = 0;
  int named = -1;
  int maxnreg = 0;
  long long wgmma_commits = 0;
  long long wgmma_issued = 0;
  long long group_collectives = 0;
};

struct WarpScratch {            // two alternating buffers, one slot per lane
  int kind[2][32];
  const void* addr[2][32];
  unsigned a[2][32][4];
  unsigned b[2][32][2];
  unsigned long long v[2][32];  // shuffles and votes: each lane's value
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
  unsigned mask = 0;
  bool done = false;
  uint32_t offset[32];          // each lane's shared-memory byte offset
};

struct WarpSite {               // one site's instructions in one warp since it last converged
  int stats = -1, kind = 0, bytes = 0;
  long long count[32] = {};     // executions by each lane
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
  int current = -1;
  ucontext_t scheduler;
  std::function<void()> body;
  std::string error;
  long long errors = 0;
  std::vector<std::pair<const unsigned char*, size_t>> tensors;
  // bank conflicts, per launch
  std::vector<WarpAccesses> accesses;
  std::unordered_map<SiteKey, int, SiteKeyHash> site_index;
  std::vector<SiteStats> sites;
  long long instructions[ACC_KINDS] = {}, wavefronts[ACC_KINDS] = {}, conflicts[ACC_KINDS] = {};
};
Runtime rt;

inline void fail(const char* fmt, ...) {
  ++rt.errors;
  if (!rt.error.empty()) return;
  char msg[768];
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

inline void yield() {
  Fiber& f = cur();
  swapcontext(&f.ctx, &rt.scheduler);
}

// ---- barriers ---------------------------------------------------------------------------
inline void converge(int warp);

inline void block_barrier() {
  if (rt.current < 0) { fail("__syncthreads outside a kernel"); return; }
  Fiber& f = cur();
  f.state = AT_BLOCK_BARRIER;
  if (++rt.block_arrived == rt.threads) {
    rt.block_arrived = 0;
    for (int w = 0; w < rt.threads / 32; ++w) converge(w);
    for (Fiber& g : rt.fibers)
      if (g.state == AT_BLOCK_BARRIER) g.state = READY;
  }
  yield();
}

inline void warp_barrier(const char* what = "a warp-collective instruction") {
  Fiber& f = cur();
  f.waiting_at = what;
  const int w = f.tid / 32;
  f.state = AT_WARP_BARRIER;
  if (++rt.warp_arrived[w] == 32) {
    rt.warp_arrived[w] = 0;
    converge(w);
    for (int l = 0; l < 32; ++l)
      if (rt.fibers[w * 32 + l].state == AT_WARP_BARRIER) rt.fibers[w * 32 + l].state = READY;
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
// Shared memory has 32 banks of 4-byte words. A warp instruction whose lanes access W bytes
// each is served in phases of 32 lanes (W <= 4), 16 lanes (W = 8) or 8 lanes (W = 16; an
// ldmatrix phase is the 8 row addresses of one 8x8 matrix). A phase takes as many wavefronts
// as the most distinct words any one bank holds among its accesses (lanes reading the same
// word share it); its conflicts are its wavefronts beyond the first. Lanes that do not
// execute the instruction take no part.
//
// Which accesses form one warp instruction: the k-th execution of a source site (file, line
// and column, by std::source_location) by each lane of the warp, counting k from the point
// where the warp last converged (a warp collective or __syncthreads; the counts restart
// there, so lanes that skipped a site in a divergent branch match up again). An instruction
// is evaluated when its 32nd lane records it, or else when the warp converges or the block
// ends, with the lanes that executed it.
inline void account(int site, int kind, const uint32_t* offset, unsigned mask, int bytes) {
  const int per_phase = bytes <= 4 ? 32 : bytes <= 8 ? 16 : 8;
  long long wavefronts = 0, minimal = 0;
  for (int p0 = 0; p0 < 32; p0 += per_phase) {
    uint32_t words[160];
    int n = 0;
    for (int l = p0; l < p0 + per_phase; ++l) {
      if (!((mask >> l) & 1u)) continue;
      for (uint32_t w = offset[l] / 4, end = (offset[l] + bytes - 1) / 4; w <= end; ++w)
        words[n++] = w;
    }
    if (n == 0) continue;
    std::sort(words, words + n);
    n = static_cast<int>(std::unique(words, words + n) - words);
    int per_bank[32] = {}, most = 0;
    for (int i = 0; i < n; ++i) most = std::max(most, ++per_bank[words[i] % 32]);
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
  const int lane = f.tid % 32;
  WarpAccesses& a = rt.accesses[f.tid / 32];
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
  in.mask |= 1u << lane;
  if (in.mask == 0xffffffffu) {
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
    std::fill(s->count, s->count + 32, 0LL);
    s->dirty = false;
  }
  a.dirty.clear();
}

// ptc::lds / ptc::sts (shared_access.cuh): a checked, counted shared-memory access
template <typename T> inline bool shared_access(const T* p, const char* what) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8 ||
                sizeof(T) == 16, "a shared-memory access moves 1, 2, 4, 8 or 16 bytes");
  if (rt.current < 0) { fail("%s outside a kernel", what); return false; }
  if (!in_smem(p, sizeof(T)) || reinterpret_cast<uintptr_t>(p) % sizeof(T) != 0) {
    fail("%s of %zu bytes at %p (shared offset %lld) is not inside shared memory of %d bytes, "
         "%zu-byte aligned", what, sizeof(T), (const void*)p,
         (long long)(reinterpret_cast<const unsigned char*>(p) - ptc_smem), rt.smem_bytes,
         sizeof(T));
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
}

// ---- cp.async ---------------------------------------------------------------------------
// cp.async.{ca,cg}.shared.global [smem], [gmem], BYTES, src-size: BYTES of 4, 8 or 16, both
// addresses aligned to BYTES; valid == false is src-size 0: the destination is zero-filled
// and the source not read.
inline void do_copy(const Copy& c) {
  if (c.valid) memcpy(c.dst, c.src, c.bytes);
  else memset(c.dst, 0, c.bytes);
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
  if (config.eager_cp_async) do_copy(c);
  else f.pending.push_back(c);
}

inline void cp_async_16(void* smem, const void* gmem, bool valid,
                        std::source_location where = std::source_location::current()) {
  cp_async<16>(smem, gmem, valid, where);
}

inline void cp_async_commit() { ++cur().commits; }

inline void cp_async_wait(int n) {
  Fiber& f = cur();
  const long long limit = f.commits - n;  // groups [0, limit) must be complete
  std::vector<Copy> keep;
  for (const Copy& c : f.pending) {
    if (c.group < limit) do_copy(c);
    else keep.push_back(c);
  }
  f.pending.swap(keep);
}

// ---- warp collectives ---------------------------------------------------------------------
inline int deposit(Kind kind) {
  Fiber& f = cur();
  const int buf = static_cast<int>(f.collectives++ & 1);
  rt.warps[f.tid / 32].kind[buf][f.tid % 32] = kind;
  return buf;
}

inline bool same_kind(const WarpScratch& s, int buf, Kind kind, const char* what) {
  for (int l = 0; l < 32; ++l) {
    if (s.kind[buf][l] != kind) {
      fail("%s: lane %d of the warp executes a different warp-collective instruction", what, l);
      return false;
    }
  }
  return true;
}

// ldmatrix / stmatrix, once per warp instruction: the bank conflicts of its `rows` 16-byte
// rows (lanes 0 .. rows - 1 give their addresses), 8 rows per phase
inline void account_matrix_rows(const WarpScratch& s, int buf, int rows, Access acc,
                                const std::source_location& where) {
  uint32_t offset[32];
  bool inside = true;
  for (int l = 0; l < rows; ++l) {
    inside = inside && in_smem(s.addr[buf][l], 16);
    offset[l] = static_cast<uint32_t>(static_cast<const unsigned char*>(s.addr[buf][l]) -
                                      ptc_smem);
  }
  if (inside)
    account(site_stats(SiteKey{where.file_name(), static_cast<unsigned>(where.line()),
                               static_cast<unsigned>(where.column()), acc, 16}),
            acc, offset, rows == 32 ? 0xffffffffu : (1u << rows) - 1, 16);
}

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
}

// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32 d, a, b, d
// (groupID g = lane / 4, threadID_in_group t = lane % 4):
//   A: a_i at row g (+8 for i in {2,3,6,7}), col 2t + (i & 1) (+8 for i >= 4); reg j holds a_2j, a_2j+1
//   B: b_i at row 2t + (i & 1) (+8 for i >= 2), col g
//   C/D: c_i at row g (+8 for i >= 2), col 2t + (i & 1)
template <bool BF16>
inline void mma_m16n8k16(float* d, const unsigned* a, const unsigned* b) {
  const Kind kind = BF16 ? MMA_BF16 : MMA_F16;
  const int lane = cur().tid % 32;
  WarpScratch& s = rt.warps[cur().tid / 32];
  const int buf = deposit(kind);
  for (int i = 0; i < 4; ++i) s.a[buf][lane][i] = a[i];
  for (int i = 0; i < 2; ++i) s.b[buf][lane][i] = b[i];
  warp_barrier("mma.sync");
  if (!same_kind(s, buf, kind, "mma.sync")) return;
  auto elem = [](unsigned reg, int half) -> float {
    const uint16_t bits = static_cast<uint16_t>(half ? reg >> 16 : reg & 0xffffu);
    return BF16 ? bf16_bits_to_f32(bits) : f16_bits_to_f32(bits);
  };
  const bool broken = config.break_layout != 0;
  auto A = [&](int m, int k) -> float {
    const int owner = (m % 8) * 4 + (k % 8) / 2;
    const int reg = broken ? (m >= 8 ? 2 : 0) + (k >= 8 ? 1 : 0)   // a1 and a2 swapped
                           : (m >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0);
    return elem(s.a[buf][owner][reg], k % 2);
  };
  auto B = [&](int k, int n) -> float {
    const int owner = n * 4 + (k % 8) / 2;
    return elem(s.b[buf][owner][k >= 8 ? 1 : 0], k % 2);
  };
  const int g = lane / 4, t = lane % 4;
  for (int i = 0; i < 4; ++i) {
    const int m = g + (i >= 2 ? 8 : 0), n = 2 * t + (i & 1);
    float acc = d[i];
    for (int k = 0; k < 16; ++k) acc += A(m, k) * B(k, n);
    d[i] = acc;
  }
}

// mma.sync.m16n8k8.row.col.f32.tf32.tf32.f32 (PTX ISA, "Matrix Fragments for mma.m16n8k8"
// with .tf32): g = lane / 4, t = lane % 4; a0 (g, t), a1 (g + 8, t), a2 (g, t + 4),
// a3 (g + 8, t + 4); b0 (t, g), b1 (t + 4, g); c as m16n8k16's. Operands are f32 bits of
// which the tensor core reads the TF32 part (the 13 low mantissa bits are ignored).
inline void mma_m16n8k8_tf32(float* d, const unsigned* a, const unsigned* b) {
  const int lane = cur().tid % 32;
  WarpScratch& s = rt.warps[cur().tid / 32];
  const int buf = deposit(MMA_TF32);
  for (int i = 0; i < 4; ++i) s.a[buf][lane][i] = a[i];
  for (int i = 0; i < 2; ++i) s.b[buf][lane][i] = b[i];
  warp_barrier("mma.sync");
  if (!same_kind(s, buf, MMA_TF32, "mma.sync")) return;
  auto elem = [](unsigned reg) -> float {
    const unsigned bits = reg & 0xffffe000u;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  };
  const bool broken = config.break_layout != 0;
  auto A = [&](int m, int k) -> float {
    const int owner = (m % 8) * 4 + k % 4;
    const int reg = broken ? (m >= 8 ? 2 : 0) + (k >= 4 ? 1 : 0)   // a1 and a2 swapped
                           : (m >= 8 ? 1 : 0) + (k >= 4 ? 2 : 0);
    return elem(s.a[buf][owner][reg]);
  };
  auto B = [&](int k, int n) -> float { return elem(s.b[buf][n * 4 + k % 4][k >= 4 ? 1 : 0]); };
  const int g = lane / 4, t = lane % 4;
  for (int i = 0; i < 4; ++i) {
    const int m = g + (i >= 2 ? 8 : 0), n = 2 * t + (i & 1);
    float acc = d[i];
    for (int k = 0; k < 8; ++k) acc += A(m, k) * B(k, n);
    d[i] = acc;
  }
}

// ---- shuffles, votes, __syncwarp ----------------------------------------------------------
// shfl.sync.{idx,up,down,bfly}.b32 after the PTX ISA's pseudo-code, with CUDA's clamp values
// (c = ((32 - width) << 8) | 0x1f, and (32 - width) << 8 for up): each lane deposits its
// value, the warp meets, each lane reads its source lane's deposit, or keeps its own value
// where the source falls outside its width segment. Only whole-warp masks are emulated.
enum ShflMode { SHFL_IDX, SHFL_UP, SHFL_DOWN, SHFL_BFLY };

inline bool full_mask(unsigned mask, const char* what) {
  if (mask == 0xffffffffu) return true;
  fail("%s with mask 0x%08x: the emulator takes whole-warp masks only (0xffffffff), every "
       "lane of the warp taking part", what, mask);
  return false;
}

inline int shfl_source(ShflMode mode, int lane, unsigned b, int width) {
  const int segmask = 32 - width;                  // c[12:8]
  const int cval = mode == SHFL_UP ? 0 : 31;       // c[4:0]
  const int bval = static_cast<int>(b & 31u);
  const int max_lane = (lane & segmask) | (cval & ~segmask);
  const int min_lane = lane & segmask;
  int j = lane;
  bool ok = false;
  switch (mode) {
    case SHFL_UP: j = lane - bval; ok = j >= max_lane; break;
    case SHFL_DOWN: j = lane + bval; ok = j <= max_lane; break;
    case SHFL_BFLY: j = lane ^ bval; ok = j <= max_lane; break;
    case SHFL_IDX: j = min_lane | (bval & ~segmask & 31); ok = j <= max_lane; break;
  }
  return ok ? j : lane;
}

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
inline unsigned ballot(unsigned mask, bool pred, const char* what) {
  if (rt.current < 0) { fail("%s outside a kernel", what); return 0; }
  full_mask(mask, what);
  Fiber& f = cur();
  WarpScratch& s = rt.warps[f.tid / 32];
  const int buf = deposit(VOTE);
  s.v[buf][f.tid % 32] = pred ? 1 : 0;
  warp_barrier(what);
  if (!same_kind(s, buf, VOTE, what)) return 0;
  unsigned bits = 0;
  for (int l = 0; l < 32; ++l) bits |= (s.v[buf][l] ? 1u : 0u) << l;
  return bits;
}

inline void syncwarp(unsigned mask) {
  if (rt.current < 0) { fail("__syncwarp outside a kernel"); return; }
  full_mask(mask, "__syncwarp");
  Fiber& f = cur();
  const int buf = deposit(SYNCWARP);
  warp_barrier("__syncwarp");
  same_kind(rt.warps[f.tid / 32], buf, SYNCWARP, "__syncwarp");
}

}  // namespace emu
}  // namespace ptc

#include "ptc_emulate_sm90.h"

namespace ptc {
namespace emu {

// ---- the launcher -------------------------------------------------------------------------
extern "C" inline void ptc_emu_fiber_entry() {
  rt.body();
  cur().state = DONE;  // returning switches to uc_link: the scheduler
}

inline const char* state_name(State s) {
  switch (s) {
    case READY: return "ready";
    case AT_BLOCK_BARRIER: return "at __syncthreads";
    case AT_WARP_BARRIER: return "at a warp-collective instruction";
    case AT_MBARRIER: return "waiting on an mbarrier";
    case AT_NAMED_BARRIER: return "at a named barrier";
    case AT_GROUP_BARRIER: return "at a warpgroup-collective instruction";
    default: return "finished";
  }
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
  if (threads <= 0 || threads % 32 != 0 || threads > 1024) {
    fail("%d threads per block: the emulator takes whole warps, at most 1024 threads", threads);
    return 1;
  }
  if (smem_bytes < 0 || smem_bytes > PTC_EMU_SMEM_CAPACITY) {
    fail("%d bytes of shared memory, over the emulator's %d", smem_bytes, PTC_EMU_SMEM_CAPACITY);
    return 1;
  }
  rt.threads = threads;
  rt.smem_bytes = smem_bytes;
  rt.body = [&body] { body(); };
  rt.fibers.assign(threads, Fiber{});
  rt.warps.assign(threads / 32, WarpScratch{});
  rt.warp_arrived.assign(threads / 32, 0);
  rt.accesses.assign(threads / 32, WarpAccesses{});
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
  std::vector<int> warp_order(threads / 32), lane_order(32);
  gridDim = dim3(static_cast<unsigned>(blocks));
  blockDim = dim3(static_cast<unsigned>(threads));
  for (long long b = 0; b < blocks && rt.error.empty(); ++b) {
    rt.block = b;
    blockIdx = {static_cast<unsigned>(b), 0, 0};
    memset(ptc_smem, config.fill, smem_bytes);
    memset(ptc_smem + smem_bytes, 0xA5, PTC_EMU_CANARY_BYTES);
    rt.block_arrived = 0;
    std::fill(rt.warp_arrived.begin(), rt.warp_arrived.end(), 0);
    sm90_block_start(threads);
    for (Fiber& f : rt.fibers) {
      getcontext(&f.ctx);
      f.ctx.uc_stack.ss_sp = f.stack + page;
      f.ctx.uc_stack.ss_size = stack_bytes;
      f.ctx.uc_link = &rt.scheduler;
      makecontext(&f.ctx, ptc_emu_fiber_entry, 0);
      f.state = READY;
      f.commits = 0;
      f.pending.clear();
      f.collectives = 0;
      f.wait_bar = 0;
      f.wait_parity = 0;
      f.named = -1;
      f.maxnreg = 0;
      f.wgmma_commits = 0;
      f.wgmma_issued = 0;
      f.group_collectives = 0;
    }
    for (;;) {
      // A pass runs each warp in turn until none of its lanes can go on (all at
      // __syncthreads or finished): warps drift apart as far as the barriers allow.
      const int nwarps = threads / 32;
      for (int i = 0; i < nwarps; ++i) warp_order[i] = config.order == 1 ? nwarps - 1 - i : i;
      for (int i = 0; i < 32; ++i) lane_order[i] = config.order == 1 ? 31 - i : i;
      if (config.order == 2) std::shuffle(warp_order.begin(), warp_order.end(), rng);
      bool ran = false;
      for (int w : warp_order) {
        for (bool again = true; again;) {
          again = false;
          if (config.order == 2) std::shuffle(lane_order.begin(), lane_order.end(), rng);
          for (int l : lane_order) {
            const int i = w * 32 + l;
            Fiber& f = rt.fibers[i];
            if (f.state != READY) continue;
            rt.current = i;
            threadIdx = {static_cast<unsigned>(i), 0, 0};
            swapcontext(&rt.scheduler, &f.ctx);
            ran = again = true;
          }
        }
      }
      rt.current = -1;
      bool done = true;
      for (const Fiber& f : rt.fibers) done = done && f.state == DONE;
      if (done) break;
      if (!ran && sm90_progress()) continue;   // deferred copies landed: waiters woke
      if (!ran) {
        int counts[STATES] = {};
        for (const Fiber& f : rt.fibers) ++counts[f.state];
        int first = 0;
        while (rt.fibers[first].state == DONE) ++first;
        for (int i = 0; i < threads; ++i)   // a warp collective that not every lane reaches
          if (rt.fibers[i].state == AT_WARP_BARRIER) { first = i; break; }
        const Fiber& g = rt.fibers[first];
        char detail[160] = "";
        if (g.state == AT_WARP_BARRIER || g.state == AT_GROUP_BARRIER)
          snprintf(detail, sizeof detail, ": %s", g.waiting_at);
        else if (g.state == AT_MBARRIER)
          snprintf(detail, sizeof detail, " at shared offset %u for parity %u", g.wait_bar,
                   g.wait_parity);
        else if (g.state == AT_NAMED_BARRIER)
          snprintf(detail, sizeof detail, " %d", g.named);
        fail("deadlock: %d thread(s) at __syncthreads, %d at a warp-collective instruction, "
             "%d waiting on mbarriers, %d at named barriers, %d at warpgroup collectives, "
             "%d finished (thread %d is %s%s)", counts[AT_BLOCK_BARRIER],
             counts[AT_WARP_BARRIER], counts[AT_MBARRIER], counts[AT_NAMED_BARRIER],
             counts[AT_GROUP_BARRIER], counts[DONE], first, state_name(g.state), detail);
        break;
      }
    }
    for (int w = 0; w < threads / 32; ++w) converge(w);  // what the block's end left pending
    if (rt.error.empty()) sm90_block_end();
    for (int i = 0; i < PTC_EMU_CANARY_BYTES; ++i) {
      if (ptc_smem[smem_bytes + i] != 0xA5) {
        fail("shared memory written past its %d bytes (at byte %d)", smem_bytes, smem_bytes + i);
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
  return rt.error.empty() ? 0 : 700;  // cudaErrorIllegalAddress
}

}  // namespace emu
}  // namespace ptc

// ---- what Python calls besides ptc_launch (ptc/render/emulate.py) -----------------------
extern "C" {
void ptc_emulate_config(int order, int eager_cp_async, int break_layout, unsigned seed, int fill) {
  ptc::emu::config.eager_tma = eager_cp_async;
  ptc::emu::config.order = order;
  ptc::emu::config.eager_cp_async = eager_cp_async;
  ptc::emu::config.break_layout = break_layout;
  ptc::emu::config.seed = seed;
  ptc::emu::config.fill = fill;
}
void ptc_emulate_clear_tensors(void) { ptc::emu::rt.tensors.clear(); }
void ptc_emulate_register_tensor(const void* p, size_t bytes) {
  ptc::emu::rt.tensors.emplace_back(static_cast<const unsigned char*>(p), bytes);
}
const char* ptc_emulate_error(void) { return ptc::emu::rt.error.c_str(); }
long long ptc_emulate_error_count(void) { return ptc::emu::rt.errors; }
// the last launch's shared-memory bank conflicts: ldmatrix, cp.async, lds, sts
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
