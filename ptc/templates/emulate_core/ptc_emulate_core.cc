// ptc CPU emulation, the part every backend shares: the definitions of ptc_emulate_core.h
// that do not depend on the kernel (the runtime's state, barriers, bank-conflict accounting,
// the launcher's scheduling loop and the API Python calls). Compiled once per backend,
// compiler, flags and header contents into an object that every emulated kernel of that
// backend links (ptc/render/emulate.py: runtime_object), instead of again in every kernel:
// that was most of an emulated kernel's compile time.
#ifndef PTC_EMU_RUNTIME
#error "ptc_emulate_core.cc is the emulation runtime's translation unit (ptc/render/emulate.py)"
#endif

extern "C" {
__attribute__((aligned(1024))) unsigned char ptc_smem[PTC_EMU_SMEM_CAPACITY + PTC_EMU_CANARY_BYTES];
}

namespace ptc {
namespace emu {

Config config;
Runtime rt;

void fail(const char* fmt, ...) {
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

void block_barrier() {
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

void warp_barrier(const char* what) {
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

bool in_tensor(const void* p, size_t n) {
  if (rt.tensors.empty()) return true;  // nothing registered: no checks
  const unsigned char* a = static_cast<const unsigned char*>(p);
  for (const auto& t : rt.tensors)
    if (a >= t.first && a + n <= t.first + t.second) return true;
  return false;
}

void account(int site, int kind, const uint32_t* offset, LaneMask mask, int bytes) {
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

int site_stats(const SiteKey& key) {
  auto it = rt.site_index.find(key);
  if (it != rt.site_index.end()) return it->second;
  rt.sites.push_back(SiteStats{key.kind, key.file, key.line, key.column});
  return rt.site_index[key] = static_cast<int>(rt.sites.size()) - 1;
}

void record(int kind, const std::source_location& where, const void* p, int bytes) {
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

void converge(int warp) {
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

extern "C" void ptc_emu_fiber_entry() {
  rt.body();
  cur().state = DONE;
  switch_context(cur().ctx, rt.scheduler);   // never resumed: its stack is set up afresh
  abort();
}

#if defined(__x86_64__)
// ptc_emu_switch(&from_sp, to_sp): push rbp, rbx, r12-r15 (callee-saved in the SysV ABI)
// and the x87 and SSE control words, keep rsp in *from_sp, take to_sp, pop the same, return
// to where that context left off.
extern "C" void ptc_emu_switch(void** from_sp, void* to_sp);
asm(R"(
  .text
  .globl ptc_emu_switch
  .hidden ptc_emu_switch
  .type ptc_emu_switch, @function
ptc_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $16, %rsp
  stmxcsr 8(%rsp)
  fnstcw (%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  fldcw (%rsp)
  ldmxcsr 8(%rsp)
  addq $16, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size ptc_emu_switch, .-ptc_emu_switch
)");

void switch_context(Context& from, Context& to) { ptc_emu_switch(&from.sp, to.sp); }

void start_context(Context& c, unsigned char* stack, size_t bytes) {
  // the frame ptc_emu_switch pops: control words, six registers, then the return address
  // (the entry), above it a null return address for the entry's own frame, so that the
  // entry starts with rsp = 8 mod 16 as after a call
  uintptr_t top = (reinterpret_cast<uintptr_t>(stack) + bytes) & ~uintptr_t(15);
  uint64_t* p = reinterpret_cast<uint64_t*>(top);
  *--p = 0;
  *--p = reinterpret_cast<uint64_t>(&ptc_emu_fiber_entry);
  for (int i = 0; i < 6; ++i) *--p = 0;                  // rbp rbx r12 r13 r14 r15
  *--p = 0x1F80;                                         // mxcsr: the default
  *--p = 0x037F;                                         // x87 control word: the default
  c.sp = p;
}
#else
void switch_context(Context& from, Context& to) { swapcontext(&from.uc, &to.uc); }

void start_context(Context& c, unsigned char* stack, size_t bytes) {
  getcontext(&c.uc);
  c.uc.uc_stack.ss_sp = stack;
  c.uc.uc_stack.ss_size = bytes;
  c.uc.uc_link = nullptr;
  makecontext(&c.uc, ptc_emu_fiber_entry, 0);
}
#endif

void report_deadlock() {
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

int launch_blocks(long long blocks, int threads, int smem_bytes, std::function<void()> body) {
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
  rt.body = std::move(body);
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
      start_context(f.ctx, f.stack + page, stack_bytes);
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
            switch_context(rt.scheduler, f.ctx);
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
