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
Sm90State sm90;

inline void sm90_block_start(int threads) {
  sm90.bars.clear();
  sm90.loads.clear();
  std::fill(std::begin(sm90.named_arrived), std::end(sm90.named_arrived), 0);
  std::fill(std::begin(sm90.named_count), std::end(sm90.named_count), 0);
  std::fill(std::begin(sm90.named_phase), std::end(sm90.named_phase), 0);
  for (auto& v : sm90.named_in) v.assign(threads, -1);
  sm90.group_arrived.assign((threads + 127) / 128, 0);
  sm90.wgmma.assign(threads, {});
  sm90.regsets.assign(threads, {});
  sm90.group_a.assign(threads, {});
  sm90.stores.assign(threads, {});
  sm90.bulk_commits.assign(threads, 0);
  sm90.writers.assign(static_cast<size_t>(rt.smem_bytes + 1) / 2, SharedWriter{});
  sm90.threads = threads;
}

// ---- the generic and the async proxy ----------------------------------------------------
// a value of the registers of a wgmma in flight, read by the thread (`what` reads it)
inline void in_flight_value(const char* what) {
  fail("%s reads a register of a wgmma.mma_async in flight (its accumulators or A "
       "fragments) before the wgmma.wait_group that retires it (PTX ISA 9.7.15.7.3 "
       "wgmma.wait_group: accessing them before is undefined)", what);
}
inline void check_f32(float x, const char* what) {
  uint32_t u;
  memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) == IN_FLIGHT_F32) in_flight_value(what);
}
inline void check_b16(uint16_t h, const char* what) {
  if ((h & 0x7fffu) == IN_FLIGHT_B16) in_flight_value(what);
}

// generic-proxy writes of shared memory (st.shared through the door, stmatrix, cp.async)
inline void generic_write(const void* p, size_t bytes) {
  if (rt.current < 0) return;
  const size_t o = static_cast<size_t>(static_cast<const unsigned char*>(p) - ptc_smem);
  const Fiber& f = cur();
  for (size_t i = o / 2; i < (o + bytes + 1) / 2 && i < sm90.writers.size(); ++i)
    sm90.writers[i] = SharedWriter{f.tid, f.proxy_fences};
  if (bytes == 4) {       // a 32-bit value read from an accumulator in flight
    float x;
    memcpy(&x, p, 4);
    check_f32(x, "a shared-memory store");
  }
}
inline void shared_written(const void* p, size_t bytes) { generic_write(p, bytes); }

// async-proxy writes (a TMA load landing): the bytes are the async proxy's
inline void async_write(uint32_t o, size_t bytes) {
  for (size_t i = o / 2; i < (o + bytes + 1) / 2 && i < sm90.writers.size(); ++i)
    sm90.writers[i] = SharedWriter{};
}

// an async-proxy read (a wgmma operand, a TMA store's box) of `bytes` at shared offset o
inline bool async_read(uint32_t o, size_t bytes, const char* what) {
  for (size_t i = o / 2; i < (o + bytes + 1) / 2 && i < sm90.writers.size(); ++i) {
    const SharedWriter& w = sm90.writers[i];
    if (w.tid >= 0 && rt.fibers[w.tid].proxy_fences <= w.epoch) {
      fail("%s reads shared offset %zu, which thread %d wrote through the generic proxy "
           "(st.shared, stmatrix, cp.async) and did not follow with fence.proxy.async "
           "(PTX ISA 9.7.15.4 / 9.7.9.25.2 \"Async Proxy\": a cross-proxy fence is needed "
           "between generic-proxy writes and async-proxy reads of the same memory)",
           what, 2 * i, w.tid);
      return false;
    }
  }
  return true;
}

// fence.proxy.async.shared::cta: this thread's generic writes so far are visible to the
// async proxy; so are its mbarrier.inits (as fence.mbarrier_init makes them)
inline void mbarrier_inits_fenced();
inline void fence_proxy_async() {
  ++cur().proxy_fences;
  mbarrier_inits_fenced();
}

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
inline Mbarrier* mbar(uint32_t addr, const char* what, bool async = false) {
  if (!in_smem(ptc_smem + addr, 8) || addr % 8 != 0) {
    fail("%s at shared offset %u: not an 8-byte aligned word of the %d bytes of shared memory",
         what, addr, rt.smem_bytes);
    return nullptr;
  }
  auto it = sm90.bars.find(addr);
  if (it == sm90.bars.end()) {
    fail("%s at shared offset %u, which no mbarrier.init set up", what, addr);
    return nullptr;
  }
  Mbarrier& b = it->second;
  // the async proxy sees the init once it was fenced; another thread once the block met
  // at a barrier after the fence; the initializing thread at once
  const int tid = rt.current >= 0 ? cur().tid : -1;
  const bool visible = async ? b.fenced
                             : tid == b.init_tid || (b.fenced && rt.block_barriers > b.fenced_at);
  if (!visible) {
    fail("%s at shared offset %u by %s before %s (PTX ISA 9.7.13.15.9 mbarrier.init and "
         "9.7.13.4 fence.mbarrier_init: the init must be made visible -- fenced by the "
         "thread %d that executed it, then a barrier -- before other threads or the async "
         "proxy use the mbarrier)", what, addr, async ? "the async proxy" : "another thread",
         b.fenced ? "the block met at a barrier after the init's fence"
                  : "the init was fenced (fence.mbarrier_init or fence.proxy.async)",
         b.init_tid);
    return nullptr;
  }
  return &b;
}

inline void mbarrier_wake(uint32_t addr) {
  for (Fiber& f : rt.fibers)
    if (f.state == AT_MBARRIER && f.wait_bar == addr) f.state = READY;
}

inline void mbarrier_check(uint32_t addr, Mbarrier& b) {
  if (b.pending == 0 && b.tx == 0) {
    ++b.phases;
    b.pending = b.count;
    mbarrier_wake(addr);
  }
}

inline void mbarrier_init(uint32_t addr, int count) {
  if (!in_smem(ptc_smem + addr, 8) || addr % 8 != 0) {
    fail("mbarrier.init at shared offset %u: not an 8-byte aligned word of shared memory", addr);
    return;
  }
  if (count < 1 || count > (1 << 20) - 1) {
    fail("mbarrier.init with %d arrivals (1 to 2^20 - 1)", count);
    return;
  }
  sm90.bars[addr] = Mbarrier{count, count, 0, 0, cur().tid, false, 0};
}

// fence.mbarrier_init (and fence.proxy.async): the thread's inits so far are visible once
// the block meets at a barrier
inline void mbarrier_inits_fenced() {
  const int tid = cur().tid;
  for (auto& [addr, b] : sm90.bars)
    if (b.init_tid == tid && !b.fenced) {
      b.fenced = true;
      b.fenced_at = rt.block_barriers;
    }
}
inline void mbarrier_init_fence() {
  ++cur().proxy_fences;
  mbarrier_inits_fenced();
}

inline void mbarrier_arrive(uint32_t addr) {
  Mbarrier* b = mbar(addr, "mbarrier.arrive");
  if (!b) return;
  if (b->pending <= 0) {
    fail("mbarrier.arrive at shared offset %u: more arrivals than its %d", addr, b->count);
    return;
  }
  --b->pending;
  mbarrier_check(addr, *b);
}

inline void mbarrier_expect_tx(uint32_t addr, unsigned bytes) {
  Mbarrier* b = mbar(addr, "mbarrier.expect_tx");
  if (b) b->tx += bytes;
}

inline void mbarrier_arrive_expect_tx(uint32_t addr, unsigned bytes) {
  Mbarrier* b = mbar(addr, "mbarrier.arrive.expect_tx");
  if (!b) return;
  b->tx += bytes;
  mbarrier_arrive(addr);
}

inline void mbarrier_complete_tx(uint32_t addr, long long bytes) {
  Mbarrier* b = mbar(addr, "a TMA load's complete_tx", true);
  if (!b) return;
  b->tx -= bytes;
  mbarrier_check(addr, *b);
}

// mbarrier.try_wait.parity in a loop: returns once the phase of parity `parity` completed
inline void mbarrier_wait_parity(uint32_t addr, unsigned parity) {
  for (;;) {
    Mbarrier* b = mbar(addr, "mbarrier.try_wait.parity");
    if (!b) return;
    if (static_cast<unsigned>(b->phases & 1) != (parity & 1u)) return;
    Fiber& f = cur();
    f.state = AT_MBARRIER;
    f.wait_bar = addr;
    f.wait_parity = parity & 1u;
    yield();
  }
}

// ---- TMA ------------------------------------------------------------------------------------
inline void tma_land(const TmaLoad& l) {
  for (size_t o = 0; o < l.image.size(); o += 16) {
    const uint32_t at = swizzle_address(l.dst + static_cast<uint32_t>(o), l.swizzle);
    memcpy(ptc_smem + at, l.image.data() + o, std::min<size_t>(16, l.image.size() - o));
  }
  async_write(l.dst, l.image.size());
  mbarrier_complete_tx(l.bar, static_cast<long long>(l.image.size()));
}

// no thread can go on: land the deferred loads (their waiters wake); false if there were none
inline bool sm90_progress() {
  if (sm90.loads.empty()) return false;
  std::vector<TmaLoad> loads;
  loads.swap(sm90.loads);
  for (const TmaLoad& l : loads) tma_land(l);
  return true;
}

// cp.async.bulk.tensor.Nd.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// [dst], [map, {c0, ..}], [bar]: coordinates innermost first
// The bytes of one box of `m` at shared offset `at`, or -1 (reported) when the box is not
// aligned to its swizzle pattern (or 128 bytes) inside shared memory.
inline long long box_in_smem(const TensorMapData& m, uint32_t at, const char* what) {
  const uint32_t align = m.swizzle == 128 ? 1024 : m.swizzle == 64 ? 512 : m.swizzle == 32 ? 256 : 128;
  long long elems = 1;
  for (int i = 0; i < m.rank; ++i) elems *= m.box[i];
  const long long bytes = elems * m.elem_bytes;
  if (at % align != 0 || !in_smem(ptc_smem + at, static_cast<size_t>(bytes))) {
    fail("%s shared offset %u of %lld bytes: not %u-byte aligned inside shared memory of %d "
         "bytes", what, at, bytes, align, rt.smem_bytes);
    return -1;
  }
  return bytes;
}

inline void tma_load(uint32_t dst, const void* map, const int* coords, uint32_t bar) {
  const TensorMapData& m = *static_cast<const TensorMapData*>(map);
  const long long bytes = box_in_smem(m, dst, "TMA load to");
  if (bytes < 0) return;
  const long long elems = bytes / m.elem_bytes;
  if (!mbar(bar, "a TMA load's mbarrier", true)) return;
  TmaLoad l{bar, dst, std::vector<unsigned char>(static_cast<size_t>(bytes)), m.swizzle};
  long long idx[5] = {0, 0, 0, 0, 0};
  for (long long e = 0; e < elems; ++e) {
    bool inside = true;
    long long off = 0;
    for (int i = 0; i < m.rank; ++i) {
      const long long c = coords[i] + idx[i];
      inside = inside && c >= 0 && c < m.dims[i];
      off += c * m.strides[i];
    }
    unsigned char* out = l.image.data() + e * m.elem_bytes;
    if (inside) {
      const unsigned char* src = m.base + off;
      if (!in_tensor(src, m.elem_bytes)) {
        fail("TMA load reads %d bytes at %p outside every tensor", m.elem_bytes, (const void*)src);
        return;
      }
      memcpy(out, src, m.elem_bytes);
    } else {
      memset(out, 0, m.elem_bytes);    // out of bounds: zero fill
    }
    for (int i = 0; i < m.rank && ++idx[i] == m.box[i]; ++i) idx[i] = 0;
  }
  if (config.eager) tma_land(l);
  else sm90.loads.push_back(std::move(l));
}

// cp.async.bulk.tensor.Nd.global.shared::cta.bulk_group [map, {c0, ..}], [src]: the box
// is read out of shared memory (unswizzled) when a wait_group.read retires its group --
// as late as allowed, so a thread that rewrites the tile before waiting stores the new
// bytes -- or at once in eager mode; elements past the tensor's end are not written (PTX
// ISA 5.5.3.3 "Out of Boundary Access": the box may cross the tensor's boundary)
inline void tma_store_now(const TmaStore& st) {
  const TensorMapData& m = *st.map;
  long long elems = 1;
  for (int i = 0; i < m.rank; ++i) elems *= m.box[i];
  long long idx[5] = {0, 0, 0, 0, 0};
  for (long long e = 0; e < elems; ++e) {
    bool inside = true;
    long long off = 0;
    for (int i = 0; i < m.rank; ++i) {
      const long long c = st.coords[i] + idx[i];
      inside = inside && c < m.dims[i];
      off += c * m.strides[i];
    }
    if (inside) {
      const uint32_t o = static_cast<uint32_t>(e * m.elem_bytes);
      const uint32_t at = swizzle_address(st.src + (o & ~15u), m.swizzle) + (o & 15u);
      unsigned char* dst = const_cast<unsigned char*>(m.base) + off;
      if (!in_tensor(dst, m.elem_bytes)) {
        fail("TMA store writes %d bytes at %p outside every tensor", m.elem_bytes, (void*)dst);
        return;
      }
      memcpy(dst, ptc_smem + at, m.elem_bytes);
    }
    for (int i = 0; i < m.rank && ++idx[i] == m.box[i]; ++i) idx[i] = 0;
  }
}

inline void tma_store(const void* map, uint32_t src, const int* coords) {
  const TensorMapData& m = *static_cast<const TensorMapData*>(map);
  const long long bytes = box_in_smem(m, src, "TMA store from");
  if (bytes < 0) return;
  for (int i = 0; i < m.rank; ++i)
    if (coords[i] < 0) {
      fail("TMA store at coordinate %d of dim %d: the box of a shared-to-global "
           "cp.async.bulk.tensor starts at non-negative coordinates (PTX ISA 9.7.9.25.5.1 "
           "\"Restriction on Tensor Copy instructions\", the .global.shared::cta direction)",
           coords[i], i);
      return;
    }
  if (!async_read(src, static_cast<size_t>(bytes), "a TMA store (cp.async.bulk.tensor)")) return;
  Fiber& f = cur();
  TmaStore st{sm90.bulk_commits[f.tid], &m, src, {0, 0, 0, 0, 0}};
  for (int i = 0; i < m.rank; ++i) st.coords[i] = coords[i];
  if (config.eager) tma_store_now(st);
  else sm90.stores[f.tid].push_back(st);
}

inline void bulk_commit_group() { ++sm90.bulk_commits[cur().tid]; }

inline void bulk_wait_group_read(int n) {
  Fiber& f = cur();
  std::vector<TmaStore> keep;
  for (const TmaStore& st : sm90.stores[f.tid]) {
    if (st.group < sm90.bulk_commits[f.tid] - n) tma_store_now(st);
    else keep.push_back(st);
  }
  sm90.stores[f.tid].swap(keep);
}

// the block's end: a TMA store still reading shared memory is a kernel that did not wait
inline void sm90_block_end() {
  for (int t = 0; t < sm90.threads; ++t)
    if (!sm90.stores[t].empty()) {
      fail("thread %d ended with %zu TMA store(s) not waited for (cp.async.bulk.wait_group"
           ".read): shared memory may be gone before they read it", t, sm90.stores[t].size());
      return;
    }
  for (int t = 0; t < sm90.threads; ++t)
    if (!sm90.wgmma[t].empty()) {
      fail("thread %d ended with %zu wgmma.mma_async not retired by a wgmma.wait_group (PTX "
           "ISA 9.7.15.7.3 wgmma.wait_group: its accumulators are undefined until then, and "
           "it may still read shared memory)", t, sm90.wgmma[t].size());
      return;
    }
  for (int id = 0; id < 16; ++id)
    if (sm90.named_arrived[id] > 0) {
      fail("named barrier %d: the block ended with %d of its %d threads counted in (an "
           "arrive without its sync, or the other way round)", id, sm90.named_arrived[id],
           sm90.named_count[id]);
      return;
    }
}

// ---- named barriers -----------------------------------------------------------------------
// bar.sync id, count: the thread counts in and waits until `count` threads have (those
// waiting and those that arrived with bar.arrive); bar.arrive id, count counts in and goes
// on. The barrier then starts again from zero. A thread (a warp, on the GPU) counts in once
// per phase: an arrive followed by another arrive or sync at the same barrier before it
// completes is an error.
inline bool named_barrier_count_in(const char* what, int id, int count) {
  if (id < 0 || id > 15 || count <= 0 || count % 32 != 0 || count > rt.threads) {
    fail("%s %d, %d: the id is 0 to 15 and the count a multiple of 32 up to the block's "
         "%d threads", what, id, count, rt.threads);
    return false;
  }
  if (sm90.named_arrived[id] > 0 && sm90.named_count[id] != count) {
    fail("%s %d: threads arrive with counts %d and %d", what, id, sm90.named_count[id], count);
    return false;
  }
  const int tid = cur().tid;
  if (sm90.named_in[id][tid] == sm90.named_phase[id]) {
    fail("%s %d, %d: thread %d (warp %d) counts in a second time before the barrier "
         "completed (PTX ISA 9.7.13.1 bar, barrier: a warp must not execute bar.arrive and "
         "then another barrier instruction on the same barrier before the barrier resets)",
         what, id, count, tid, tid / 32);
    return false;
  }
  sm90.named_in[id][tid] = sm90.named_phase[id];
  sm90.named_count[id] = count;
  if (++sm90.named_arrived[id] == count) {
    sm90.named_arrived[id] = 0;
    ++sm90.named_phase[id];
    for (Fiber& g : rt.fibers)
      if (g.state == AT_NAMED_BARRIER && g.named == id) { g.state = READY; g.named = -1; }
    return true;
  }
  return false;
}

inline void named_barrier_sync(int id, int count) {
  Fiber& f = cur();
  f.state = AT_NAMED_BARRIER;
  f.named = id;
  if (named_barrier_count_in("bar.sync", id, count)) { f.state = READY; f.named = -1; }
  if (!rt.error.empty()) { f.state = READY; f.named = -1; }
  yield();
}

inline void named_barrier_arrive(int id, int count) {
  named_barrier_count_in("bar.arrive", id, count);
  yield();
}

// ---- setmaxnreg -------------------------------------------------------------------------
// setmaxnreg.{inc,dec}.sync.aligned.u32 N: N a multiple of 8 in 24..256, the same in every
// thread of the warpgroup. The registers come from the CTA's pool (PTX ISA 9.7.19.5
// setmaxnreg: "a pool of available registers is maintained per-CTA"; SASS
// USETMAXREG.DEALLOC.CTAPOOL): the registers the block was launched with, its threads x
// `launch_registers`. An increase waits until decreases have returned enough to the pool;
// one the pool can never satisfy is a deadlock.
inline void setmaxnreg(int n, bool inc, int launch_registers) {
  Fiber& f = cur();
  if (n < 24 || n > 256 || n % 8 != 0) {
    fail("setmaxnreg.%s %d: the count is a multiple of 8 from 24 to 256", inc ? "inc" : "dec", n);
    return;
  }
  const long long pool = static_cast<long long>(rt.threads) * launch_registers;
  if (pool > 65536) {
    fail("setmaxnreg in a block of %d threads launched with %d registers each: %lld "
         "registers, more than an SM's 65536", rt.threads, launch_registers, pool);
    return;
  }
  const int before = f.maxnreg ? f.maxnreg : launch_registers;
  if ((inc && n < before) || (!inc && n > before)) {
    fail("setmaxnreg.%s %d from %d registers (PTX ISA 9.7.19.5 setmaxnreg: .inc may only "
         "raise the count, .dec only lower it)", inc ? "inc" : "dec", n, before);
    return;
  }
  // an increase waits until the decreases of other warps have freed the registers; a
  // warp's registers change together (its lanes that have not executed it yet are
  // counted at n too)
  for (;;) {
    long long total = 0;
    for (const Fiber& g : rt.fibers)
      total += (&g == &f || (inc && g.tid / 32 == f.tid / 32)) ? n
                                                             : (g.maxnreg ? g.maxnreg : launch_registers);
    if (!inc || total <= pool) break;
    f.state = AT_REGISTERS;         // woken by the next setmaxnreg.dec
    f.maxnreg_wanted = n;
    yield();
  }
  f.maxnreg = n;
  if (!inc)
    for (Fiber& g : rt.fibers)
      if (g.state == AT_REGISTERS) g.state = READY;
}

// ---- warpgroup collectives ----------------------------------------------------------------
inline void group_barrier(const char* what) {
  Fiber& f = cur();
  const int g = f.tid / 128;
  f.waiting_at = what;
  f.state = AT_GROUP_BARRIER;
  ++f.group_collectives;
  if (++sm90.group_arrived[g] == 128) {
    sm90.group_arrived[g] = 0;
    for (int t = g * 128; t < g * 128 + 128 && t < rt.threads; ++t)
      if (rt.fibers[t].state == AT_GROUP_BARRIER) rt.fibers[t].state = READY;
  }
  yield();
}

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
inline void fence_sees(Fiber& f, const void* p, size_t bytes) {
  const unsigned char* a = static_cast<const unsigned char*>(p);
  if (f.fence_lo && a >= f.fence_lo && a + bytes <= f.fence_lo + f.fence_stack.size())
    memcpy(f.fence_stack.data() + (a - f.fence_lo), a, bytes);
}

// a wgmma reads (or writes) `count` registers at p: they must be as the last fence saw them
inline bool fenced(Fiber& f, const uint32_t* p, int count, const char* what) {
  if (f.wgmma_fences == 0) {
    fail("wgmma.mma_async by thread %d with no wgmma.fence before it (PTX ISA 9.7.15.7.1 "
         "wgmma.fence: required before the first wgmma.mma_async of a warpgroup)", f.tid);
    return false;
  }
  const unsigned char* a = reinterpret_cast<const unsigned char*>(p);
  const size_t bytes = static_cast<size_t>(count) * 4;
  if (a < f.fence_lo || a + bytes > f.fence_lo + f.fence_stack.size()) return true;
  const unsigned char* seen = f.fence_stack.data() + (a - f.fence_lo);
  for (int r = 0; r < count; ++r)
    if (memcmp(seen + 4 * r, a + 4 * r, 4) != 0) {
      fail("thread %d wrote %s register %d after its last wgmma.fence and before the "
           "wgmma.mma_async that uses it (PTX ISA 9.7.15.7.1 wgmma.fence: required between "
           "a register access and a wgmma.mma_async that accesses the same registers)",
           f.tid, what, r);
      return false;
    }
  return true;
}

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
inline Desc decode_desc(uint64_t d) {
  static const int spans[4] = {0, 128, 64, 32};
  return Desc{static_cast<uint32_t>(d & 0x3fff) << 4,
              static_cast<uint32_t>((d >> 16) & 0x3fff) << 4,
              static_cast<uint32_t>((d >> 32) & 0x3fff) << 4, spans[(d >> 62) & 3],
              static_cast<int>((d >> 49) & 7)};
}

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
inline uint32_t operand_address(const Desc& d, int mn, int k, bool mn_major, int esize = 2) {
  const uint32_t span = d.swizzle ? static_cast<uint32_t>(d.swizzle) : 16;
  const int T = 16 / esize;
  uint32_t off;
  if (!mn_major) {
    off = (mn % 8) * span + (mn / 8) * d.sbo + (k % T) * esize +
          (k / T) * (d.swizzle ? 16 : d.lbo);
  } else if (d.swizzle) {
    const uint32_t per = span / 2;     // mn elements per swizzle row
    off = (mn % per) * 2 + (mn / per) * d.lbo + (k % 8) * span + (k / 8) * d.sbo;
  } else {                             // no swizzle: the two offsets trade places
    off = (mn % 8) * 2 + (mn / 8) * d.sbo + (k % 8) * 16 + (k / 8) * d.lbo;
  }
  return swizzle_address(d.start + off, d.swizzle);
}

inline float operand_element(const Desc& d, int mn, int k, bool mn_major, bool bf16) {
  const uint32_t a = operand_address(d, mn, k, mn_major);
  if (!in_smem(ptc_smem + a, 2)) {
    fail("wgmma reads shared offset %u, outside the %d bytes of shared memory", a, rt.smem_bytes);
    return 0.0f;
  }
  uint16_t bits;
  memcpy(&bits, ptc_smem + a, 2);
  return bf16 ? bf16_bits_to_f32(bits) : f16_bits_to_f32(bits);
}

// a shared-memory operand of a wgmma being issued: its descriptor is one the emulator
// models, and the bytes it reads are the async proxy's (or fenced generic writes)
inline bool check_operand(uint64_t desc, int mns, bool mn_major, const char* which,
                          int esize = 2) {
  const Desc d = decode_desc(desc);
  if (d.base_offset != 0) {
    fail("wgmma %s descriptor 0x%016llx has base offset %d: the emulator models swizzle "
         "patterns that start on their repeat boundary (base offset 0; PTX ISA 9.7.15.5.1.2.2 "
         "\"Matrix Descriptor Format\"), where ptc aligns every swizzled tile", which,
         static_cast<unsigned long long>(desc), d.base_offset);
    return false;
  }
  const int ks = 32 / esize;      // k per instruction: 32 bytes of a row
  for (int mn = 0; mn < mns; ++mn)
    for (int k = 0; k < ks; k += 2 / esize) {     // writers are tracked per 2 bytes
      const uint32_t a = operand_address(d, mn, k, mn_major, esize) & ~1u;
      if (in_smem(ptc_smem + a, 2) && !async_read(a, 2, "wgmma.mma_async (a shared operand)"))
        return false;
    }
  return true;
}

inline float half_of(unsigned reg, int half, bool bf16) {
  const uint16_t bits = static_cast<uint16_t>(half ? reg >> 16 : reg & 0xffffu);
  return bf16 ? bf16_bits_to_f32(bits) : f16_bits_to_f32(bits);
}

inline RegSet* regset(int tid, const void* regs) {
  for (RegSet& s : sm90.regsets[tid])
    if (s.regs == regs) return &s;
  return nullptr;
}

// The registers of a wgmma being issued by this thread go to the async proxy: their values
// aside, the marker in the registers. Returns their values (those the async proxy has, if
// a wgmma in flight already holds them).
inline RegSet* hand_over(Fiber& f, uint32_t* regs, int count, bool acc, const char* what) {
  RegSet* s = regset(f.tid, regs);
  if (s && s->count != count) {
    fail("a wgmma.mma_async uses %d of the %d %s registers of one in flight", count, s->count,
         what);
    return nullptr;
  }
  if (s) {                 // in flight already: its registers must still hold the marker
    for (int r = 0; r < count; ++r)
      if (regs[r] != (acc ? IN_FLIGHT_F32 : IN_FLIGHT_A)) {
        fail("thread %d wrote %s register %d of a wgmma.mma_async in flight before the "
             "wgmma.wait_group that retires it (PTX ISA 9.7.15.7.3 wgmma.wait_group: "
             "accessing it before is undefined)", f.tid, what, r);
        return nullptr;
      }
  } else {
    for (const RegSet& o : sm90.regsets[f.tid])
      if (regs < o.regs + o.count && o.regs < regs + count) {
        fail("a wgmma.mma_async's %s registers overlap, without being the same, those of "
             "one in flight (the emulator tracks whole operands)", what);
        return nullptr;
      }
    if (!fenced(f, regs, count, what)) return nullptr;
    sm90.regsets[f.tid].push_back(RegSet{regs, count, acc, 0, std::vector<uint32_t>(regs, regs + count)});
    s = &sm90.regsets[f.tid].back();
    for (int r = 0; r < count; ++r) regs[r] = acc ? IN_FLIGHT_F32 : IN_FLIGHT_A;
    fence_sees(f, regs, static_cast<size_t>(count) * 4);
  }
  ++s->in_flight;
  return s;
}

// The accumulator of m64nNk16: thread t of the warpgroup (warp w = t / 32, lane l) holds in
// register r the element row 16w + l/4 + 8 * ((r / 2) % 2), column 8 * (r / 4) + 2 * (l % 4)
// + r % 2 (PTX ISA, "Register Fragments and Shared Memory Matrix Layouts" for wgmma D).
// Computed on the values the async proxy has for thread `tid`'s registers.
inline int8_t operand_byte(const Desc& d, int mn, int k) {
  const uint32_t a = operand_address(d, mn, k, false, 1);
  if (!in_smem(ptc_smem + a, 1)) {
    fail("wgmma reads shared offset %u, outside the %d bytes of shared memory", a, rt.smem_bytes);
    return 0;
  }
  return static_cast<int8_t>(ptc_smem[a]);
}

// m64nNk32 .s32.s8.s8: the accumulator layout of m64nNk16 (s32 for f32), 32 k per
// instruction, the sum modulo 2^32 (no .satfinite)
inline void wgmma8_compute(WgmmaOp& op, RegSet* s, int tid) {
  const int t = tid % 128;
  const int w = t / 32, l = t % 32;
  const Desc da = decode_desc(op.desc_a), db = decode_desc(op.desc_b);
  for (int r = 0; r < op.n / 2; ++r) {
    const int row = 16 * w + l / 4 + 8 * ((r / 2) % 2);
    const int col = 8 * (r / 4) + 2 * (l % 4) + r % 2;
    uint32_t acc = op.scale_d ? s->value[r] : 0u;
    for (int k = 0; k < 32; ++k)
      acc += static_cast<uint32_t>(static_cast<int32_t>(operand_byte(da, row, k)) *
                                   static_cast<int32_t>(operand_byte(db, col, k)));
    s->value[r] = acc;
  }
  op.computed = true;
}

// an FP8 code's value (OCP E4M3FN: bias 7, S.1111.111 NaN, no infinities; E5M2: bias 15,
// IEEE-like), from the formats' definitions
inline float fp8_value(uint8_t c, bool e5m2) {
  const int sign = c >> 7, mbits = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;
  const int e = (c & 0x7f) >> mbits, m = c & ((1 << mbits) - 1);
  float v;
  if (e5m2 && e == 31) v = m ? NAN : INFINITY;
  else if (!e5m2 && e == 15 && m == 7) v = NAN;
  else if (e == 0) v = std::ldexp(static_cast<float>(m), 1 - bias - mbits);
  else v = std::ldexp(static_cast<float>(m + (1 << mbits)), e - bias - mbits);
  return sign ? -v : v;
}

// m64nNk32 .f32 with FP8 inputs: the accumulator layout of m64nNk16, 32 k per instruction,
// the exact products summed in f32 in k order
inline void wgmma_fp8_compute(WgmmaOp& op, RegSet* s, int tid) {
  const int t = tid % 128;
  const int w = t / 32, l = t % 32;
  const bool a5 = op.kind8 == 3 || op.kind8 == 4, b5 = op.kind8 == 2 || op.kind8 == 4;
  const Desc da = decode_desc(op.desc_a), db = decode_desc(op.desc_b);
  for (int r = 0; r < op.n / 2; ++r) {
    const int row = 16 * w + l / 4 + 8 * ((r / 2) % 2);
    const int col = 8 * (r / 4) + 2 * (l % 4) + r % 2;
    float acc;
    memcpy(&acc, &s->value[r], 4);
    if (!op.scale_d) acc = 0.0f;
    for (int k = 0; k < 32; ++k)
      acc += fp8_value(static_cast<uint8_t>(operand_byte(da, row, k)), a5) *
             fp8_value(static_cast<uint8_t>(operand_byte(db, col, k)), b5);
    memcpy(&s->value[r], &acc, 4);
  }
  op.computed = true;
}

inline void wgmma_compute(WgmmaOp& op, int tid) {
  RegSet* s = regset(tid, op.d);
  if (!s) { fail("internal: a wgmma in flight without its accumulators"); return; }
  if (op.kind8 == 0) { wgmma8_compute(op, s, tid); return; }
  if (op.kind8 > 0) { wgmma_fp8_compute(op, s, tid); return; }
  const int t = tid % 128;
  const int w = t / 32, l = t % 32;
  for (int r = 0; r < op.n / 2; ++r) {
    const int row = 16 * w + l / 4 + 8 * ((r / 2) % 2);
    const int col = 8 * (r / 4) + 2 * (l % 4) + r % 2;
    float acc;
    memcpy(&acc, &s->value[r], 4);
    if (!op.scale_d) acc = 0.0f;
    for (int k = 0; k < 16; ++k) {
      const float a = op.a_in_regs ? op.a_rows[(r / 2) % 2][k]
                                   : operand_element(decode_desc(op.desc_a), row, k,
                                                     op.trans_a != 0, op.bf16);
      const float b = operand_element(decode_desc(op.desc_b), col, k, op.trans_b != 0, op.bf16);
      acc += a * b;
    }
    memcpy(&s->value[r], &acc, 4);
  }
  op.computed = true;
}

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

// wgmma.mma_async m64nNk32 with 8-bit inputs, A and B by descriptors, both K-major (the
// 8-bit forms have no transpose operands). KIND 0: .s32.s8.s8 (int accumulators), N one of
// the PTX ISA's integer shapes (8, 16, 24, then multiples of 16); 1-4: .f32 with FP8 inputs
// (float accumulators), N a multiple of 8.
template <int N, int KIND, class Acc>
inline void wgmma8_issue(Acc* d, uint64_t desc_a, uint64_t desc_b, int scale_d) {
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
  if (f.tid % 128 == 0 && (!check_operand(desc_a, 64, false, "A", 1) ||
                           !check_operand(desc_b, N, false, "B", 1)))
    return;
  RegSet* acc = hand_over(f, reinterpret_cast<uint32_t*>(d), N / 2, true, "accumulator");
  if (!acc) return;
  WgmmaOp op{f.wgmma_commits, f.wgmma_issued++, reinterpret_cast<float*>(d), N, false, scale_d,
             false, nullptr, desc_a, desc_b, 0, 0, false, {}, KIND};
  sm90.wgmma[f.tid].push_back(op);
  group_barrier("wgmma.mma_async");
}

inline void wgmma_commit() { ++cur().wgmma_commits; }

// wgmma.wait_group N: every group but the N most recent is complete. A wgmma is one
// operation of the whole warpgroup: once one thread sees it complete, it has read its
// operands and computed every thread's accumulators, so the first thread to wait computes
// the warpgroup's copies of it; each thread's registers receive them at its own wait.
inline void wgmma_wait(int n) {
  Fiber& f = cur();
  long long last = -1;
  for (const WgmmaOp& op : sm90.wgmma[f.tid])
    if (op.group < f.wgmma_commits - n) last = std::max(last, op.seq);
  if (last < 0) return;
  const int first = (f.tid / 128) * 128;
  for (int t = first; t < first + 128 && t < rt.threads; ++t)
    for (WgmmaOp& op : sm90.wgmma[t])
      if (op.seq <= last && !op.computed) wgmma_compute(op, t);
  // this thread's registers of the retired wgmmas come back from the async proxy
  std::vector<WgmmaOp> keep;
  for (const WgmmaOp& op : sm90.wgmma[f.tid]) {
    if (op.seq > last) { keep.push_back(op); continue; }
    if (RegSet* s = regset(f.tid, op.d)) --s->in_flight;
    if (op.a_in_regs)
      if (RegSet* s = regset(f.tid, op.a)) --s->in_flight;
  }
  sm90.wgmma[f.tid].swap(keep);
  std::vector<RegSet>& sets = sm90.regsets[f.tid];
  for (size_t i = 0; i < sets.size();) {
    RegSet& s = sets[i];
    if (s.in_flight > 0) { ++i; continue; }
    for (int r = 0; r < s.count; ++r)
      if (s.regs[r] != (s.acc ? IN_FLIGHT_F32 : IN_FLIGHT_A)) {
        fail("thread %d wrote %s register %d of a wgmma.mma_async in flight before the "
             "wgmma.wait_group that retires it (PTX ISA 9.7.15.7.3 wgmma.wait_group: "
             "accessing it before is undefined)", f.tid, s.acc ? "accumulator" : "A fragment",
             r);
        break;
      }
    memcpy(s.regs, s.value.data(), static_cast<size_t>(s.count) * 4);
    fence_sees(f, s.regs, static_cast<size_t>(s.count) * 4);
    sets.erase(sets.begin() + static_cast<long>(i));
  }
}

}  // namespace emu
}  // namespace ptc
