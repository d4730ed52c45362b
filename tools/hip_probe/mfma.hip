// One MFMA per kernel: every lane loads its A and B fragment registers from row-major
// global matrices by the layout formulas of docs/hip.md, issues the instruction and stores
// its accumulator registers by the same formulas. On a GPU, D == A @ B + C checks the
// formulas; here the build checks the builtins' types and that the ISA holds the mnemonic.
#include "prelude.h"

using namespace ptc;

// M x N x K atom, wave64.  G = 64 / M lane groups along k (2 for 32x32x8, 4 for 16x16x16).
//   A[i][k]: lane i + M * (k / 4), register k % 4          (i < M, k < K)
//   B[k][j]: lane j + M * (k / 4), register k % 4          (j < N)
//   D[i][j]: lane j + M * ((i / 4) % G), register (i % 4) + 4 * (i / (4 * G))
template <int M, int K, typename In, typename Vec>
PTC_DEVICE Vec load_a(const In* a, int lane) {         // a: [M][K] row-major
  Vec v;
  for (int r = 0; r < 4; ++r) v[r] = a[(lane % M) * K + 4 * (lane / M) + r];
  return v;
}
template <int M, int N, typename In, typename Vec>
PTC_DEVICE Vec load_b(const In* b, int lane) {         // b: [K][N] row-major
  Vec v;
  for (int r = 0; r < 4; ++r) v[r] = b[(4 * (lane / M) + r) * N + lane % M];
  return v;
}
template <int M, int N, int REGS, typename Acc>
PTC_DEVICE void acc_rows(int lane, int* rows) {
  constexpr int G = 64 / M;
  for (int r = 0; r < REGS; ++r) rows[r] = (r % 4) + 4 * ((lane / M) % G) + 4 * G * (r / 4);
}
template <int M, int N, int REGS, typename Acc>
PTC_DEVICE Acc load_c(const float* c, int lane) {
  int rows[REGS];
  acc_rows<M, N, REGS, Acc>(lane, rows);
  Acc v;
  for (int r = 0; r < REGS; ++r) v[r] = c[rows[r] * N + lane % M];
  return v;
}
template <int M, int N, int REGS, typename Acc>
PTC_DEVICE void store_d(float* d, int lane, Acc v) {
  int rows[REGS];
  acc_rows<M, N, REGS, Acc>(lane, rows);
  for (int r = 0; r < REGS; ++r) d[rows[r] * N + lane % M] = v[r];
}

// cbsz = abid = blgp = 0: no broadcast of A blocks, no B lane swizzle (single-block shapes).
#define PROBE(NAME, BUILTIN, M, N, K, In, Vec, Acc, REGS)                                   \
  extern "C" __global__ __launch_bounds__(64) void NAME(const In* a, const In* b,           \
                                                        const float* c, float* d) {        \
    const int lane = lane_id();                                                             \
    Acc acc = load_c<M, N, REGS, Acc>(c, lane);                                             \
    acc = BUILTIN(load_a<M, K, In, Vec>(a, lane), load_b<M, N, In, Vec>(b, lane), acc,      \
                  0, 0, 0);                                                                 \
    store_d<M, N, REGS, Acc>(d, lane, acc);                                                 \
  }

PROBE(mfma_32x32x8_f16, __builtin_amdgcn_mfma_f32_32x32x8f16, 32, 32, 8,
      _Float16, f16x4, f32x16, 16)
PROBE(mfma_16x16x16_f16, __builtin_amdgcn_mfma_f32_16x16x16f16, 16, 16, 16,
      _Float16, f16x4, f32x4, 4)
PROBE(mfma_32x32x8_bf16, __builtin_amdgcn_mfma_f32_32x32x8bf16_1k, 32, 32, 8,
      short, bf16x4, f32x16, 16)
PROBE(mfma_16x16x16_bf16, __builtin_amdgcn_mfma_f32_16x16x16bf16_1k, 16, 16, 16,
      short, bf16x4, f32x4, 4)

// A k-loop of 32x32x8 bf16 MFMAs into one accumulator: the chained form a main loop issues
// (back-to-back MFMAs on one accumulator need no s_nop; a VALU read of D does).
extern "C" __global__ __launch_bounds__(64) void mfma_chain_32x32x8_bf16(
    const short* a, const short* b, float* d, int k_steps) {
  const int lane = lane_id();
  f32x16 acc = {};
  for (int s = 0; s < k_steps; ++s)
    acc = __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(
        load_a<32, 8, short, bf16x4>(a + s * 32 * 8, lane),
        load_b<32, 32, short, bf16x4>(b + s * 8 * 32, lane), acc, 0, 0, 0);
  store_d<32, 32, 16, f32x16>(d, lane, acc);
}

// The register budget: six 32x32 accumulators (96 registers) under PTC_BOUNDS(256, W) --
// W = 4 waves per SIMD allows 128 unified VGPRs per lane (fits, accumulators in AGPRs or
// VGPRs as the compiler likes); W = 8 allows 64 (spills: the readout's scratch and spill)
#define BUDGET(NAME, WAVES)                                                                 \
  extern "C" __global__ PTC_BOUNDS(256, WAVES) void NAME(const f16x4* a, float* d, int n) { \
    const int t = thread_id();                                                              \
    f32x16 acc[6] = {};                                                                     \
    for (int s = 0; s < n; ++s)                                                             \
      for (int i = 0; i < 6; ++i)                                                           \
        acc[i] = __builtin_amdgcn_mfma_f32_32x32x8f16(a[s * 256 + t], a[s * 256 + 255 - t], \
                                                      acc[i], 0, 0, 0);                     \
    for (int i = 0; i < 6; ++i)                                                             \
      for (int r = 0; r < 16; ++r) d[(i * 16 + r) * 256 + t] = acc[i][r];                   \
  }
BUDGET(mfma_budget_4waves, 4)
BUDGET(mfma_budget_8waves, 8)
