// ptc CPU emulation for CUDA: the definitions of ptc_emulate.h and ptc_emulate_sm90.h that
// do not depend on the kernel, compiled once into the runtime object every emulated CUDA
// kernel links (see emulate_core/ptc_emulate_core.cc; ptc/render/emulate.py: runtime_object).
#ifndef PTC_EMU_RUNTIME
#error "ptc_emulate.cc is the emulation runtime's translation unit (ptc/render/emulate.py)"
#endif

// Set by the scheduler before it switches to a fiber.
uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

namespace ptc {
namespace emu {

Sm90State sm90;

void cp_async_wait(int n) {
  Fiber& f = cur();
  const long long limit = f.commits - n;  // groups [0, limit) must be complete
  std::vector<Copy> keep;
  for (const Copy& c : f.pending) {
    if (c.group < limit) do_copy(c);
    else keep.push_back(c);
  }
  f.pending.swap(keep);
}

void account_matrix_rows(const WarpScratch& s, int buf, int rows, Access acc,
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

// The warp meets at an mma.sync: each lane deposits its A (4 registers) and B (2)
// fragments; returns the deposit buffer every lane reads, or -1 where the lanes did not
// all issue the same kind of instruction (reported).
int mma_meet(Kind kind, const unsigned* a, const unsigned* b) {
  const int lane = cur().tid % 32;
  WarpScratch& s = rt.warps[cur().tid / 32];
  const int buf = deposit(kind);
  for (int i = 0; i < 4; ++i) s.a[buf][lane][i] = a[i];
  for (int i = 0; i < 2; ++i) s.b[buf][lane][i] = b[i];
  warp_barrier("mma.sync");
  return same_kind(s, buf, kind, "mma.sync") ? buf : -1;
}

void mma_m16n8k16_16bit(float* d, const unsigned* a, const unsigned* b, bool bf16) {
  const int buf = mma_meet(bf16 ? MMA_BF16 : MMA_F16, a, b);
  if (buf < 0) return;
  const int lane = cur().tid % 32;
  const WarpScratch& s = rt.warps[cur().tid / 32];
  auto elem = [bf16](unsigned reg, int half) -> float {
    const uint16_t bits = static_cast<uint16_t>(half ? reg >> 16 : reg & 0xffffu);
    return bf16 ? bf16_bits_to_f32(bits) : f16_bits_to_f32(bits);
  };
  const bool broken = config.break_layout != 0;
  const int g = lane / 4, t = lane % 4;
  // This lane's two rows of A (g, g + 8) and two columns of B (2t, 2t + 1), each element
  // read from the lane that holds it once; then each c_i sums over k in order.
  float A[2][16], B[2][16];
  for (int h = 0; h < 2; ++h)
    for (int k = 0; k < 16; ++k) {
      const int owner = g * 4 + (k % 8) / 2;
      const int reg = broken ? 2 * h + (k >= 8 ? 1 : 0)   // a1 and a2 swapped
                             : h + (k >= 8 ? 2 : 0);
      A[h][k] = elem(s.a[buf][owner][reg], k % 2);
      B[h][k] = elem(s.b[buf][(2 * t + h) * 4 + (k % 8) / 2][k >= 8 ? 1 : 0], k % 2);
    }
  for (int i = 0; i < 4; ++i) {
    float acc = d[i];
    for (int k = 0; k < 16; ++k) acc += A[i >= 2 ? 1 : 0][k] * B[i & 1][k];
    d[i] = acc;
  }
}

void mma_m16n8k8_tf32(float* d, const unsigned* a, const unsigned* b) {
  const int buf = mma_meet(MMA_TF32, a, b);
  if (buf < 0) return;
  const int lane = cur().tid % 32;
  const WarpScratch& s = rt.warps[cur().tid / 32];
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

void mma_m16n8k32_s8(int* d, const unsigned* a, const unsigned* b) {
  const int buf = mma_meet(MMA_S8, a, b);
  if (buf < 0) return;
  const int lane = cur().tid % 32;
  const WarpScratch& s = rt.warps[cur().tid / 32];
  auto byte = [](unsigned reg, int i) -> int {
    return static_cast<int8_t>(static_cast<uint8_t>(reg >> (8 * i)));
  };
  const bool broken = config.break_layout != 0;
  auto A = [&](int m, int k) -> int {
    const int owner = (m % 8) * 4 + (k % 16) / 4;
    const int reg = broken ? (m >= 8 ? 2 : 0) + (k >= 16 ? 1 : 0)   // a 1 and 2 swapped
                           : (m >= 8 ? 1 : 0) + (k >= 16 ? 2 : 0);
    return byte(s.a[buf][owner][reg], k % 4);
  };
  auto B = [&](int k, int n) -> int {
    return byte(s.b[buf][n * 4 + (k % 16) / 4][k >= 16 ? 1 : 0], k % 4);
  };
  const int g = lane / 4, t = lane % 4;
  for (int i = 0; i < 4; ++i) {
    const int m = g + (i >= 2 ? 8 : 0), n = 2 * t + (i & 1);
    long long sum = 0;
    for (int k = 0; k < 32; ++k) sum += A(m, k) * B(k, n);
    d[i] = static_cast<int>(static_cast<uint32_t>(d[i]) + static_cast<uint32_t>(sum));
  }
}

bool full_mask(unsigned mask, const char* what) {
  if (mask == 0xffffffffu) return true;
  fail("%s with mask 0x%08x: the emulator takes whole-warp masks only (0xffffffff), every "
       "lane of the warp taking part", what, mask);
  return false;
}

int shfl_source(ShflMode mode, int lane, unsigned b, int width) {
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

unsigned ballot(unsigned mask, bool pred, const char* what) {
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

void syncwarp(unsigned mask) {
  if (rt.current < 0) { fail("__syncwarp outside a kernel"); return; }
  full_mask(mask, "__syncwarp");
  Fiber& f = cur();
  const int buf = deposit(SYNCWARP);
  warp_barrier("__syncwarp");
  same_kind(rt.warps[f.tid / 32], buf, SYNCWARP, "__syncwarp");
}
void sm90_block_start(int threads) {
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

void in_flight_value(const char* what) {
  fail("%s reads a register of a wgmma.mma_async in flight (its accumulators or A "
       "fragments) before the wgmma.wait_group that retires it (PTX ISA 9.7.15.7.3 "
       "wgmma.wait_group: accessing them before is undefined)", what);
}

void check_f32(float x, const char* what) {
  uint32_t u;
  memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) == IN_FLIGHT_F32) in_flight_value(what);
}

void check_b16(uint16_t h, const char* what) {
  if ((h & 0x7fffu) == IN_FLIGHT_B16) in_flight_value(what);
}

void generic_write(const void* p, size_t bytes) {
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

void shared_written(const void* p, size_t bytes) { generic_write(p, bytes); }

void async_write(uint32_t o, size_t bytes) {
  for (size_t i = o / 2; i < (o + bytes + 1) / 2 && i < sm90.writers.size(); ++i)
    sm90.writers[i] = SharedWriter{};
}

bool async_read(uint32_t o, size_t bytes, const char* what) {
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

void fence_proxy_async() {
  ++cur().proxy_fences;
  mbarrier_inits_fenced();
}

Mbarrier* mbar(uint32_t addr, const char* what, bool async) {
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

void mbarrier_wake(uint32_t addr) {
  for (Fiber& f : rt.fibers)
    if (f.state == AT_MBARRIER && f.wait_bar == addr) f.state = READY;
}

void mbarrier_check(uint32_t addr, Mbarrier& b) {
  if (b.pending == 0 && b.tx == 0) {
    ++b.phases;
    b.pending = b.count;
    mbarrier_wake(addr);
  }
}

void mbarrier_init(uint32_t addr, int count) {
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

void mbarrier_inits_fenced() {
  const int tid = cur().tid;
  for (auto& [addr, b] : sm90.bars)
    if (b.init_tid == tid && !b.fenced) {
      b.fenced = true;
      b.fenced_at = rt.block_barriers;
    }
}

void mbarrier_init_fence() {
  ++cur().proxy_fences;
  mbarrier_inits_fenced();
}

void mbarrier_arrive(uint32_t addr) {
  Mbarrier* b = mbar(addr, "mbarrier.arrive");
  if (!b) return;
  if (b->pending <= 0) {
    fail("mbarrier.arrive at shared offset %u: more arrivals than its %d", addr, b->count);
    return;
  }
  --b->pending;
  mbarrier_check(addr, *b);
}

void mbarrier_expect_tx(uint32_t addr, unsigned bytes) {
  Mbarrier* b = mbar(addr, "mbarrier.expect_tx");
  if (b) b->tx += bytes;
}

void mbarrier_arrive_expect_tx(uint32_t addr, unsigned bytes) {
  Mbarrier* b = mbar(addr, "mbarrier.arrive.expect_tx");
  if (!b) return;
  b->tx += bytes;
  mbarrier_arrive(addr);
}

void mbarrier_complete_tx(uint32_t addr, long long bytes) {
  Mbarrier* b = mbar(addr, "a TMA load's complete_tx", true);
  if (!b) return;
  b->tx -= bytes;
  mbarrier_check(addr, *b);
}

void mbarrier_wait_parity(uint32_t addr, unsigned parity) {
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

void tma_land(const TmaLoad& l) {
  for (size_t o = 0; o < l.image.size(); o += 16) {
    const uint32_t at = swizzle_address(l.dst + static_cast<uint32_t>(o), l.swizzle);
    memcpy(ptc_smem + at, l.image.data() + o, std::min<size_t>(16, l.image.size() - o));
  }
  async_write(l.dst, l.image.size());
  mbarrier_complete_tx(l.bar, static_cast<long long>(l.image.size()));
}

bool sm90_progress() {
  if (sm90.loads.empty()) return false;
  std::vector<TmaLoad> loads;
  loads.swap(sm90.loads);
  for (const TmaLoad& l : loads) tma_land(l);
  return true;
}

long long box_in_smem(const TensorMapData& m, uint32_t at, const char* what) {
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

void tma_load(uint32_t dst, const void* map, const int* coords, uint32_t bar) {
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

void tma_store_now(const TmaStore& st) {
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

void tma_store(const void* map, uint32_t src, const int* coords) {
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

void bulk_wait_group_read(int n) {
  Fiber& f = cur();
  std::vector<TmaStore> keep;
  for (const TmaStore& st : sm90.stores[f.tid]) {
    if (st.group < sm90.bulk_commits[f.tid] - n) tma_store_now(st);
    else keep.push_back(st);
  }
  sm90.stores[f.tid].swap(keep);
}

void sm90_block_end() {
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

bool named_barrier_count_in(const char* what, int id, int count) {
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

void named_barrier_sync(int id, int count) {
  Fiber& f = cur();
  f.state = AT_NAMED_BARRIER;
  f.named = id;
  if (named_barrier_count_in("bar.sync", id, count)) { f.state = READY; f.named = -1; }
  if (!rt.error.empty()) { f.state = READY; f.named = -1; }
  yield();
}

void named_barrier_arrive(int id, int count) {
  named_barrier_count_in("bar.arrive", id, count);
  yield();
}

void setmaxnreg(int n, bool inc, int launch_registers) {
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

void group_barrier(const char* what) {
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

void fence_sees(Fiber& f, const void* p, size_t bytes) {
  const unsigned char* a = static_cast<const unsigned char*>(p);
  if (f.fence_lo && a >= f.fence_lo && a + bytes <= f.fence_lo + f.fence_stack.size())
    memcpy(f.fence_stack.data() + (a - f.fence_lo), a, bytes);
}

bool fenced(Fiber& f, const uint32_t* p, int count, const char* what) {
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

Desc decode_desc(uint64_t d) {
  static const int spans[4] = {0, 128, 64, 32};
  return Desc{static_cast<uint32_t>(d & 0x3fff) << 4,
              static_cast<uint32_t>((d >> 16) & 0x3fff) << 4,
              static_cast<uint32_t>((d >> 32) & 0x3fff) << 4, spans[(d >> 62) & 3],
              static_cast<int>((d >> 49) & 7)};
}

uint32_t operand_address(const Desc& d, int mn, int k, bool mn_major, int esize) {
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

float operand_element(const Desc& d, int mn, int k, bool mn_major, bool bf16) {
  const uint32_t a = operand_address(d, mn, k, mn_major);
  if (!in_smem(ptc_smem + a, 2)) {
    fail("wgmma reads shared offset %u, outside the %d bytes of shared memory", a, rt.smem_bytes);
    return 0.0f;
  }
  uint16_t bits;
  memcpy(&bits, ptc_smem + a, 2);
  return bf16 ? bf16_bits_to_f32(bits) : f16_bits_to_f32(bits);
}

bool check_operand(uint64_t desc, int mns, bool mn_major, const char* which, int esize) {
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

float half_of(unsigned reg, int half, bool bf16) {
  const uint16_t bits = static_cast<uint16_t>(half ? reg >> 16 : reg & 0xffffu);
  return bf16 ? bf16_bits_to_f32(bits) : f16_bits_to_f32(bits);
}

RegSet* regset(int tid, const void* regs) {
  for (RegSet& s : sm90.regsets[tid])
    if (s.regs == regs) return &s;
  return nullptr;
}

RegSet* hand_over(Fiber& f, uint32_t* regs, int count, bool acc, const char* what) {
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

int8_t operand_byte(const Desc& d, int mn, int k) {
  const uint32_t a = operand_address(d, mn, k, false, 1);
  if (!in_smem(ptc_smem + a, 1)) {
    fail("wgmma reads shared offset %u, outside the %d bytes of shared memory", a, rt.smem_bytes);
    return 0;
  }
  return static_cast<int8_t>(ptc_smem[a]);
}

// The operand bytes one thread's accumulators read (its two rows of A, its N / 4 columns of
// B: see wgmma_compute), 32 of k each, read from shared memory once per wgmma (A from the
// registers the issue read, for RS).
struct Operands8 {
  int8_t a[2][32];
  int8_t b[64][32];                      // N <= 256
};

// A shared-memory operand of one wgmma as its warpgroup reads it, every row decoded once:
// the 128 threads' ops of one wgmma hold the same descriptor, and a thread reads 2 of A's
// 64 rows and N / 4 of B's N (A read 4 times over, B 32 times over, by each thread alone).
// A wait computes its warpgroup's ops with nothing writing shared memory in between, so a
// decoded operand serves the ops whose key matches until the wait ends; an op with another
// descriptor (threads that disagree) is decoded for itself.
struct DecodedOperand {
  bool valid = false;
  uint64_t desc = 0;
  int rows = 0, trans = 0, kind = 0;     // kind: 0 f16, 1 bf16, 2 bytes (8-bit, K-major)
  float f[256][16];
  int8_t b[256][32];
};
static DecodedOperand decoded[2];        // A, B

static const DecodedOperand& decode_operand(int which, uint64_t desc, int rows, int trans,
                                            int kind) {
  DecodedOperand& c = decoded[which];
  if (c.valid && c.desc == desc && c.rows == rows && c.trans == trans && c.kind == kind)
    return c;
  const Desc d = decode_desc(desc);
  for (int mn = 0; mn < rows; ++mn) {
    if (kind == 2)
      for (int k = 0; k < 32; ++k) c.b[mn][k] = operand_byte(d, mn, k);
    else
      for (int k = 0; k < 16; ++k) c.f[mn][k] = operand_element(d, mn, k, trans != 0, kind == 1);
  }
  c.valid = true;
  c.desc = desc;
  c.rows = rows;
  c.trans = trans;
  c.kind = kind;
  return c;
}

void gather8(const WgmmaOp& op, int tid, Operands8& o) {
  const int t = tid % 128;
  const int w = t / 32, l = t % 32;
  if (op.a_in_regs) {
    memcpy(o.a, op.a_bytes, sizeof o.a);
  } else {
    const DecodedOperand& a = decode_operand(0, op.desc_a, 64, 0, 2);
    for (int h = 0; h < 2; ++h) memcpy(o.a[h], a.b[16 * w + l / 4 + 8 * h], 32);
  }
  const DecodedOperand& b = decode_operand(1, op.desc_b, op.n, 0, 2);
  for (int j = 0; j < op.n / 4; ++j) memcpy(o.b[j], b.b[8 * (j / 2) + 2 * (l % 4) + j % 2], 32);
}

void wgmma8_compute(WgmmaOp& op, RegSet* s, int tid) {
  Operands8 o;
  gather8(op, tid, o);
  for (int r = 0; r < op.n / 2; ++r) {
    const int8_t* ar = o.a[(r / 2) % 2];
    const int8_t* bc = o.b[(r / 4) * 2 + r % 2];
    uint32_t acc = op.scale_d ? s->value[r] : 0u;
    for (int k = 0; k < 32; ++k)
      acc += static_cast<uint32_t>(static_cast<int32_t>(ar[k]) * static_cast<int32_t>(bc[k]));
    s->value[r] = acc;
  }
  op.computed = true;
}

// an FP8 code's value from the format's definition (exponent, mantissa, bias)
static float fp8_definition(uint8_t c, bool e5m2) {
  const int sign = c >> 7, mbits = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;
  const int e = (c & 0x7f) >> mbits, m = c & ((1 << mbits) - 1);
  float v;
  if (e5m2 && e == 31) v = m ? NAN : INFINITY;
  else if (!e5m2 && e == 15 && m == 7) v = NAN;
  else if (e == 0) v = std::ldexp(static_cast<float>(m), 1 - bias - mbits);
  else v = std::ldexp(static_cast<float>(m + (1 << mbits)), e - bias - mbits);
  return sign ? -v : v;
}

// every code's value, computed once per format: the wgmma and the conversions read codes
// by the million, and two ldexp per read were a tenth of the emulation tests' time
struct Fp8Values {
  float v[2][256];
  Fp8Values() {
    for (int f = 0; f < 2; ++f)
      for (int c = 0; c < 256; ++c) v[f][c] = fp8_definition(static_cast<uint8_t>(c), f == 1);
  }
};
static const Fp8Values fp8_values;

float fp8_value(uint8_t c, bool e5m2) { return fp8_values.v[e5m2][c]; }

uint8_t cvt_fp8(float x, bool e5m2) {
  const uint8_t sign = std::signbit(x) ? 0x80u : 0u;
  if (std::isnan(x)) return static_cast<uint8_t>(sign | 0x7fu);
  const int top = e5m2 ? 0x7b : 0x7e;           // the largest finite code
  const float* value = fp8_values.v[e5m2];      // increasing over the codes 0..top
  const double a = std::fabs(static_cast<double>(x));
  if (a >= value[top]) return static_cast<uint8_t>(sign | top);
  // the two codes around a (below: the last whose value is <= a), the nearer one, ties to
  // the even code
  const int below = static_cast<int>(std::upper_bound(value, value + top + 1, a) - value) - 1;
  const double d_below = a - value[below], d_above = value[below + 1] - a;
  const int best = d_below < d_above ? below : d_above < d_below ? below + 1
                   : below % 2 == 0 ? below : below + 1;
  return static_cast<uint8_t>(sign | best);
}

void wgmma_fp8_compute(WgmmaOp& op, RegSet* s, int tid) {
  const bool a5 = op.kind8 == 3 || op.kind8 == 4, b5 = op.kind8 == 2 || op.kind8 == 4;
  Operands8 o;
  gather8(op, tid, o);
  float a[2][32], b[64][32];
  for (int h = 0; h < 2; ++h)
    for (int k = 0; k < 32; ++k) a[h][k] = fp8_value(static_cast<uint8_t>(o.a[h][k]), a5);
  for (int j = 0; j < op.n / 4; ++j)
    for (int k = 0; k < 32; ++k) b[j][k] = fp8_value(static_cast<uint8_t>(o.b[j][k]), b5);
  for (int r = 0; r < op.n / 2; ++r) {
    const float* ar = a[(r / 2) % 2];
    const float* bc = b[(r / 4) * 2 + r % 2];
    float acc;
    memcpy(&acc, &s->value[r], 4);
    if (!op.scale_d) acc = 0.0f;
    for (int k = 0; k < 32; ++k) acc += ar[k] * bc[k];
    memcpy(&s->value[r], &acc, 4);
  }
  op.computed = true;
}

void wgmma_compute(WgmmaOp& op, int tid) {
  RegSet* s = regset(tid, op.d);
  if (!s) { fail("internal: a wgmma in flight without its accumulators"); return; }
  if (op.kind8 == 0) { wgmma8_compute(op, s, tid); return; }
  if (op.kind8 > 0) { wgmma_fp8_compute(op, s, tid); return; }
  const int t = tid % 128;
  const int w = t / 32, l = t % 32;
  // This thread's operands, read from shared memory once: its two rows of A (16 w + l / 4,
  // and 8 below) and the N / 4 columns of B its accumulators hold (8 (r / 4) + 2 (l % 4) +
  // r % 2); then each accumulator sums over k in order, as before (the same float result).
  float a[2][16];
  float b[64][16];                       // N <= 256
  const int kind = op.bf16 ? 1 : 0;
  if (op.a_in_regs) {
    memcpy(a, op.a_rows, sizeof a);
  } else {
    const DecodedOperand& da = decode_operand(0, op.desc_a, 64, op.trans_a, kind);
    for (int h = 0; h < 2; ++h) memcpy(a[h], da.f[16 * w + l / 4 + 8 * h], sizeof a[h]);
  }
  const DecodedOperand& db = decode_operand(1, op.desc_b, op.n, op.trans_b, kind);
  for (int j = 0; j < op.n / 4; ++j)
    memcpy(b[j], db.f[8 * (j / 2) + 2 * (l % 4) + j % 2], sizeof b[j]);
  for (int r = 0; r < op.n / 2; ++r) {
    const float* ar = a[(r / 2) % 2];
    const float* bc = b[(r / 4) * 2 + r % 2];
    float acc;
    memcpy(&acc, &s->value[r], 4);
    if (!op.scale_d) acc = 0.0f;
    for (int k = 0; k < 16; ++k) acc += ar[k] * bc[k];
    memcpy(&s->value[r], &acc, 4);
  }
  op.computed = true;
}

void wgmma_wait(int n) {
  Fiber& f = cur();
  long long last = -1;
  for (const WgmmaOp& op : sm90.wgmma[f.tid])
    if (op.group < f.wgmma_commits - n) last = std::max(last, op.seq);
  if (last < 0) return;
  const int first = (f.tid / 128) * 128;
  // the warpgroup's wgmmas one at a time, each for all its threads (a thread's own in
  // order), so that each is decoded once (DecodedOperand)
  decoded[0].valid = decoded[1].valid = false;     // shared memory may have changed
  long long next = last + 1;
  for (int t = first; t < first + 128 && t < rt.threads; ++t)
    for (const WgmmaOp& op : sm90.wgmma[t])
      if (!op.computed) next = std::min(next, op.seq);
  for (long long q = next; q <= last; ++q)
    for (int t = first; t < first + 128 && t < rt.threads; ++t)
      for (WgmmaOp& op : sm90.wgmma[t])
        if (op.seq == q && !op.computed) wgmma_compute(op, t);
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
