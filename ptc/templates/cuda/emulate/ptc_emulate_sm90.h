// ptc CPU emulation, sm90 (Hopper): mbarriers, TMA tile loads, wgmma, setmaxnreg and named
// barriers, for kernels that warp-specialize (included by ptc_emulate.h; see its execution
// model). Facts and sources: docs/sm90.md.
//
// mbarrier: a 64-bit object in shared memory, here a record keyed by its shared offset:
// the arrivals a phase takes, those still missing, the transaction bytes still expected,
// and the phases completed. A phase completes when its last arrival is in and its
// transaction count is zero; try_wait.parity(p) is true once the phase of parity p has
// completed, i.e. while the count of completed phases has the other parity. A thread that
// waits blocks (it yields) until the barrier completes a phase.
//
// TMA (cp.async.bulk.tensor, tile mode): the box is read from the tensor when issued (the
// inputs do not change during a kernel) with out-of-bounds elements zero, and written to
// shared memory with the tensor map's swizzle -- applied to the absolute shared address,
// as the hardware does: the 16-byte chunk bits [4, 4 + b) XOR the bits [7, 7 + b), b = 3,
// 2, 1 for 128-, 64- and 32-byte swizzles -- then its bytes complete on the mbarrier. By
// default a load lands only when no thread can go on (as late as possible: a read of the
// slot before waiting sees stale bytes); in eager mode when issued.
//
// wgmma.mma_async m64nNk16 (f16/bf16 in, f32 accumulate): a warpgroup collective. Issued,
// it records its operands (shared-memory descriptors, decoded after the PTX ISA's
// canonical layouts; or the A fragments of the warpgroup's registers); its result is
// computed, reading shared memory then, and written to the accumulator registers only when
// a wgmma.wait_group retires its group. Reading the accumulators before that sees the old
// values; releasing a slot before the wait lets the producer overwrite what it reads.
#pragma once

namespace ptc {
namespace emu {

struct Mbarrier {
  int count = 0;          // arrivals per phase
  int pending = 0;        // arrivals the current phase still needs
  long long tx = 0;       // transaction bytes the current phase still expects
  long long phases = 0;   // phases completed
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
  uint64_t desc_a, desc_b;
  int trans_a, trans_b;
  float a_rows[2][16];    // RS: this thread's two rows of A (g, g + 8 of its warp)
};

struct Sm90State {
  std::unordered_map<uint32_t, Mbarrier> bars;
  std::vector<TmaLoad> loads;
  int named_arrived[16] = {};
  int named_count[16] = {};
  std::vector<int> group_arrived;             // per warpgroup
  std::vector<std::vector<WgmmaOp>> wgmma;    // per thread: issued, not retired
  std::vector<std::array<unsigned, 4>> group_a;   // RS deposits, per thread
  std::vector<std::vector<TmaStore>> stores;      // per thread: issued, not yet read
  std::vector<long long> bulk_commits;            // per thread
  int threads = 0;
};
Sm90State sm90;

inline void sm90_block_start(int threads) {
  sm90.bars.clear();
  sm90.loads.clear();
  std::fill(std::begin(sm90.named_arrived), std::end(sm90.named_arrived), 0);
  std::fill(std::begin(sm90.named_count), std::end(sm90.named_count), 0);
  sm90.group_arrived.assign((threads + 127) / 128, 0);
  sm90.wgmma.assign(threads, {});
  sm90.group_a.assign(threads, {});
  sm90.stores.assign(threads, {});
  sm90.bulk_commits.assign(threads, 0);
  sm90.threads = threads;
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
inline Mbarrier* mbar(uint32_t addr, const char* what) {
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
  return &it->second;
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
  sm90.bars[addr] = Mbarrier{count, count, 0, 0};
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
  Mbarrier* b = mbar(addr, "a TMA load's complete_tx");
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
  if (!mbar(bar, "a TMA load's mbarrier")) return;
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
// bytes -- or at once in eager mode; elements outside the tensor are not written
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
      inside = inside && c >= 0 && c < m.dims[i];
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
  if (box_in_smem(m, src, "TMA store from") < 0) return;
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
// on. The barrier then starts again from zero.
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
  sm90.named_count[id] = count;
  if (++sm90.named_arrived[id] == count) {
    sm90.named_arrived[id] = 0;
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
  yield();
}

inline void named_barrier_arrive(int id, int count) {
  named_barrier_count_in("bar.arrive", id, count);
  yield();
}

// ---- setmaxnreg -------------------------------------------------------------------------
constexpr uint32_t REGISTER_POOL = 0xffffffffu;   // what a blocked setmaxnreg.inc waits on

// setmaxnreg.{inc,dec}.sync.aligned.u32 N: N a multiple of 8 in 24..256, the same in every
// thread of the warpgroup; the block's warps must then fit the 64K registers of an SM
inline void setmaxnreg(int n, bool inc, int launch_registers) {
  Fiber& f = cur();
  if (n < 24 || n > 256 || n % 8 != 0) {
    fail("setmaxnreg.%s %d: the count is a multiple of 8 from 24 to 256", inc ? "inc" : "dec", n);
    return;
  }
  const int before = f.maxnreg ? f.maxnreg : launch_registers;
  if ((inc && n < before) || (!inc && n > before)) {
    fail("setmaxnreg.%s %d from %d registers", inc ? "inc" : "dec", n, before);
    return;
  }
  // an increase waits until the decreases of other warps have freed the registers
  for (;;) {
    long long total = 0;
    for (const Fiber& g : rt.fibers)
      total += &g == &f ? n : (g.maxnreg ? g.maxnreg : launch_registers);
    if (!inc || total <= 65536) break;
    f.state = AT_MBARRIER;          // woken by the next setmaxnreg.dec
    f.wait_bar = REGISTER_POOL;
    f.wait_parity = 0;
    yield();
  }
  f.maxnreg = n;
  if (!inc) mbarrier_wake(REGISTER_POOL);
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

// ---- wgmma ----------------------------------------------------------------------------------
// The shared-memory matrix descriptor: start address >> 4 in bits [0, 14), leading
// dimension byte offset >> 4 in [16, 30), stride dimension byte offset >> 4 in [32, 46),
// base offset in [49, 52), swizzle in [62, 64) (0 none, 1 128-byte, 2 64-byte, 3 32-byte).
struct Desc {
  uint32_t start, lbo, sbo;
  int swizzle;    // span in bytes, 0 for none
};
inline Desc decode_desc(uint64_t d) {
  static const int spans[4] = {0, 128, 64, 32};
  return Desc{static_cast<uint32_t>(d & 0x3fff) << 4,
              static_cast<uint32_t>((d >> 16) & 0x3fff) << 4,
              static_cast<uint32_t>((d >> 32) & 0x3fff) << 4, spans[(d >> 62) & 3]};
}

// The byte address of element (mn, k) of an operand described by `desc`, from the PTX ISA's
// canonical layouts (in 16-byte units T = 8 elements of 16 bits, S = the swizzle span / 16):
//   K-major:  rows of the operand's m (or n) index; element k of row mn at
//             (mn % 8) * S*16 + (mn / 8) * SBO + (k / 8) * (S ? 16 : LBO) + (k % 8) * 2
//             (unswizzled: 8 x 16-byte core matrices, K-adjacent ones LBO apart)
//   MN-major: the contiguous dimension is mn: element (mn, k) at
//             (mn % (S*8)) * 2 + (mn / (S*8)) * LBO + (k % 8) * S*16 + (k / 8) * SBO
//             (unswizzled: 8 x 8 core matrices, MN-adjacent ones SBO apart, K-adjacent LBO)
// then swizzled as TMA writes it.
inline uint32_t operand_address(const Desc& d, int mn, int k, bool mn_major) {
  const uint32_t span = d.swizzle ? static_cast<uint32_t>(d.swizzle) : 16;
  uint32_t off;
  if (!mn_major) {
    off = (mn % 8) * span + (mn / 8) * d.sbo + (k % 8) * 2 +
          (k / 8) * (d.swizzle ? 16 : d.lbo);
  } else if (d.swizzle) {
    const uint32_t per = span / 2;     // mn elements per swizzle row
    off = (mn % per) * 2 + (mn / per) * d.lbo + (k % 8) * span + (k / 8) * d.sbo;
  } else {                             // interleave: the two offsets trade places
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

inline float half_of(unsigned reg, int half, bool bf16) {
  const uint16_t bits = static_cast<uint16_t>(half ? reg >> 16 : reg & 0xffffu);
  return bf16 ? bf16_bits_to_f32(bits) : f16_bits_to_f32(bits);
}

// The accumulator of m64nNk16: thread t of the warpgroup (warp w = t / 32, lane l) holds in
// register r the element row 16w + l/4 + 8 * ((r / 2) % 2), column 8 * (r / 4) + 2 * (l % 4)
// + r % 2 (PTX ISA, "Register Fragments and Shared Memory Matrix Layouts" for wgmma D).
inline void wgmma_compute(const WgmmaOp& op, int t) {
  const int w = t / 32, l = t % 32;
  for (int r = 0; r < op.n / 2; ++r) {
    const int row = 16 * w + l / 4 + 8 * ((r / 2) % 2);
    const int col = 8 * (r / 4) + 2 * (l % 4) + r % 2;
    float acc = op.scale_d ? op.d[r] : 0.0f;
    for (int k = 0; k < 16; ++k) {
      const float a = op.a_in_regs ? op.a_rows[(r / 2) % 2][k]
                                   : operand_element(decode_desc(op.desc_a), row, k,
                                                     op.trans_a != 0, op.bf16);
      const float b = operand_element(decode_desc(op.desc_b), col, k, op.trans_b != 0, op.bf16);
      acc += a * b;
    }
    op.d[r] = acc;
  }
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
  // every copy of the op is recorded before the warpgroup goes on: the first thread to
  // wait retires the copies of all 128
  if (a) for (int j = 0; j < 4; ++j) sm90.group_a[f.tid][j] = a[j];
  WgmmaOp op{f.wgmma_commits, f.wgmma_issued++, d, N, BF16, scale_d, a != nullptr, desc_a,
             desc_b, trans_a, trans_b, {}};
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

inline void wgmma_commit() { ++cur().wgmma_commits; }

// wgmma.wait_group N: every group but the N most recent is complete. A wgmma is one
// operation of the whole warpgroup: once one thread sees it complete, it has read its
// operands and written every thread's accumulators (reading them before one's own wait is
// undefined), so the warpgroup's copies of it retire together.
inline void wgmma_wait(int n) {
  Fiber& f = cur();
  long long last = -1;
  for (const WgmmaOp& op : sm90.wgmma[f.tid])
    if (op.group < f.wgmma_commits - n) last = std::max(last, op.seq);
  if (last < 0) return;
  const int first = (f.tid / 128) * 128;
  for (int t = first; t < first + 128 && t < rt.threads; ++t) {
    std::vector<WgmmaOp>& ops = sm90.wgmma[t];
    std::vector<WgmmaOp> keep;
    for (const WgmmaOp& op : ops) {
      if (op.seq <= last) wgmma_compute(op, t % 128);
      else keep.push_back(op);
    }
    ops.swap(keep);
  }
}

}  // namespace emu
}  // namespace ptc
