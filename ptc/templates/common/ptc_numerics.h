// ptc device code every backend shares, written once (docs/architecture.md, "Device
// headers"): the .pt language's integer semantics, the FP8 codes, the conversions between
// dtypes that are not 16-bit floats, and the packing of i8 operands and of 16-bit pairs. A
// backend's ptc_types header includes it after defining, in namespace ptc, its primitives:
// f32_bits / bits_f32 (an f32's bits and back), rint_f32 (to nearest even), fmin_f32 /
// fmax_f32, and the macro PTC_IN_FLIGHT_F32 (the sm90 emulator's check of a value read from
// accumulators in flight; nothing elsewhere); it specializes Half16 and Bias16 later.
#pragma once

namespace ptc {

// first <= i < left: the rows or columns of a tile that lie inside the tensor. `first` is
// 0 but for an offset tile that starts before the tensor; a caller that passes no firsts
// (a literal 0) gets `i < left` alone, the code of copies before offset tiles.
__device__ __forceinline__ bool inside(int i, int first, int left) {
  return (first == 0 || i >= first) && i < left;
}

__host__ __device__ inline long long tiles(long long extent, long long size) {
  return extent <= 0 ? 0 : (extent + size - 1) / size;
}

// FP8 (OCP), one byte of storage; arithmetic happens in f32 (docs/language.md, rule 9).
// f8e4m3 is E4M3FN: bias 7, no infinities, NaN = S.1111.111, largest 448; f8e5m2 is E5M2:
// bias 15, IEEE infinities and NaNs, largest 57344. The conversions are ptc's own bit
// manipulation, the same on every target and in the CPU emulation (no cuda_fp8.h, which
// sm80 and HIP lack): to FP8 as CUDA's cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 -- nearest even;
// beyond the largest finite value, infinities included, that value with the sign; NaN of
// either sign -> 0x7F --, from FP8 to f32 exactly. A backend with that instruction
// (PTC_CVT_FP8: sm89+) converts to FP8 by it.
struct f8e4m3 { uint8_t bits; };
struct f8e5m2 { uint8_t bits; };

// the code of f32 `x` in an FP8 format of MAN mantissa bits and exponent bias BIAS whose
// largest finite value is MAX_F32 (as f32 bits), coded MAX_CODE
template <int MAN, int BIAS, uint32_t MAX_F32, uint32_t MAX_CODE>
__device__ __forceinline__ uint8_t fp8_code(float x) {
  const uint32_t u = f32_bits(x);
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t mag = u & 0x7fffffffu;
  if (mag > 0x7f800000u) return 0x7fu;                                 // NaN
  if (mag >= MAX_F32) return static_cast<uint8_t>(sign | MAX_CODE);    // satfinite
  uint32_t code;
  if (mag < ((128u - BIAS) << 23)) {
    // below the smallest normal, 2^(1-BIAS): a multiple of 2^(1-BIAS-MAN), to nearest even
    // (rint_f32); the scaling by a power of two is exact, and the multiple 2^MAN is the
    // smallest normal's code
    const float scale = bits_f32((127u + BIAS + MAN - 1u) << 23);
    code = static_cast<uint32_t>(rint_f32(bits_f32(mag) * scale));
  } else {
    // drop 23 - MAN mantissa bits, to nearest even (a carry moves into the exponent), and
    // rebias the exponent
    code = (mag + ((1u << (22 - MAN)) - 1u) + ((mag >> (23 - MAN)) & 1u)) >> (23 - MAN);
    code -= (127u - BIAS) << MAN;
  }
  return static_cast<uint8_t>(sign | code);
}
#ifdef PTC_CVT_FP8
// the backend's conversion instruction (PTC_CVT_FP8: cvt_e4m3x2 / cvt_e5m2x2, two codes in
// the low 16 bits), its NaN codes made 0x7F in each byte: e4m3's S.1111.111 loses its
// sign; e5m2's S.11111.xx (xx nonzero) becomes 0x7F
__device__ __forceinline__ uint32_t canonical_nans(f8e4m3, uint32_t w) {
  return w & ~(((w & 0x7f7fu) + 0x0101u) & 0x8080u);
}
__device__ __forceinline__ uint32_t canonical_nans(f8e5m2, uint32_t w) {
  const uint32_t nan = ((w & 0x7f7fu) + 0x0303u) & 0x8080u;     // 0x80 in a NaN's byte
  const uint32_t code = nan - (nan >> 7);                        // 0x7F there
  return (w & ~(nan | code)) | code;
}
__device__ __forceinline__ uint32_t cvt_x2(f8e4m3, float a, float b) { return cvt_e4m3x2(a, b); }
__device__ __forceinline__ uint32_t cvt_x2(f8e5m2, float a, float b) { return cvt_e5m2x2(a, b); }
// two values at a time: out[0] = a's code, out[1] = b's
template <class F8>
__device__ __forceinline__ void to_fp8x2(F8* out, float a, float b) {
  PTC_IN_FLIGHT_F32(a);
  PTC_IN_FLIGHT_F32(b);
  const uint32_t w = canonical_nans(F8{}, cvt_x2(F8{}, a, b));
  out[0].bits = static_cast<uint8_t>(w);
  out[1].bits = static_cast<uint8_t>(w >> 8);
}
__device__ __forceinline__ f8e4m3 to_f8e4m3(float x) {
  PTC_IN_FLIGHT_F32(x);
  return f8e4m3{static_cast<uint8_t>(canonical_nans(f8e4m3{}, cvt_e4m3x2(x, 0.0f)))};
}
__device__ __forceinline__ f8e5m2 to_f8e5m2(float x) {
  PTC_IN_FLIGHT_F32(x);
  return f8e5m2{static_cast<uint8_t>(canonical_nans(f8e5m2{}, cvt_e5m2x2(x, 0.0f)))};
}
#else
__device__ __forceinline__ f8e4m3 to_f8e4m3(float x) {
  PTC_IN_FLIGHT_F32(x);
  return f8e4m3{fp8_code<3, 7, 0x43e00000u, 0x7eu>(x)};       // 448 = 0x7e
}
__device__ __forceinline__ f8e5m2 to_f8e5m2(float x) {
  PTC_IN_FLIGHT_F32(x);
  return f8e5m2{fp8_code<2, 15, 0x47600000u, 0x7bu>(x)};      // 57344 = 0x7b
}
#endif
__device__ __forceinline__ float f32(f8e4m3 x) {
  const uint32_t sign = static_cast<uint32_t>(x.bits & 0x80u) << 24, mag = x.bits & 0x7fu;
  if (mag == 0x7fu) return bits_f32(sign | 0x7fc00000u);                  // NaN
  if (mag < 8u) return bits_f32(sign | f32_bits(static_cast<float>(mag) * 0x1p-9f));
  return bits_f32(sign | ((mag + (120u << 3)) << 20));
}
__device__ __forceinline__ float f32(f8e5m2 x) {
  const uint32_t sign = static_cast<uint32_t>(x.bits & 0x80u) << 24, mag = x.bits & 0x7fu;
  if (mag >= 0x7cu) return bits_f32(sign | 0x7f800000u | (mag > 0x7cu ? 0x400000u : 0u));
  if (mag < 4u) return bits_f32(sign | f32_bits(static_cast<float>(mag) * 0x1p-16f));
  return bits_f32(sign | ((mag + (112u << 2)) << 21));
}
__device__ __forceinline__ float round_f8e4m3(float x) { return f32(to_f8e4m3(x)); }
__device__ __forceinline__ float round_f8e5m2(float x) { return f32(to_f8e5m2(x)); }
// (gfx942's FP8 instructions take the FNUZ formats, a different code: hip/mfma.h.)

__device__ __forceinline__ float f32(float x) { return x; }
__device__ __forceinline__ float f32(int x) { return static_cast<float>(x); }
__device__ __forceinline__ float f32(int8_t x) { return static_cast<float>(x); }
__device__ __forceinline__ float f32(uint8_t x) { return static_cast<float>(x); }
__device__ __forceinline__ float f32(long long x) { return static_cast<float>(x); }
__device__ __forceinline__ float f32(bool x) { return x ? 1.0f : 0.0f; }

// i8 and u8 from f32 as CUDA's cvt.rni.sat.{s8,u8}.f32 (the language's one rule): to nearest even, saturating, NaN -> 0;
// from integers, saturating (docs/language.md, "Numerics")
template <int LO, int HI> __device__ __forceinline__ int narrow(float x) {
  return x != x ? 0 : static_cast<int>(rint_f32(fmin_f32(fmax_f32(x, (float)LO), (float)HI)));
}
template <int LO, int HI> __device__ __forceinline__ int narrow(int x) {
  return x < LO ? LO : (x > HI ? HI : x);
}
__device__ __forceinline__ int8_t to_i8(float x) { return static_cast<int8_t>(narrow<-128, 127>(x)); }
__device__ __forceinline__ int8_t to_i8(int x) { return static_cast<int8_t>(narrow<-128, 127>(x)); }
__device__ __forceinline__ uint8_t to_u8(float x) { return static_cast<uint8_t>(narrow<0, 255>(x)); }
__device__ __forceinline__ uint8_t to_u8(int x) { return static_cast<uint8_t>(narrow<0, 255>(x)); }

// a value of dtype T from f32 (the 16-bit float types' are the backend's)
template <typename T> __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ int from_f32<int>(float x) { return static_cast<int>(x); }
template <> __device__ __forceinline__ bool from_f32<bool>(float x) { return x != 0.0f; }
template <> __device__ __forceinline__ int8_t from_f32<int8_t>(float x) { return to_i8(x); }
template <> __device__ __forceinline__ uint8_t from_f32<uint8_t>(float x) { return to_u8(x); }
// a value of the FP8 dtype (rounded already) as its code; f8e5m2 keeps its infinities
template <> __device__ __forceinline__ f8e4m3 from_f32<f8e4m3>(float x) { return to_f8e4m3(x); }
template <> __device__ __forceinline__ f8e5m2 from_f32<f8e5m2>(float x) {
  const uint32_t u = f32_bits(x);
  return (u & 0x7fffffffu) == 0x7f800000u ? f8e5m2{static_cast<uint8_t>(((u >> 24) & 0x80u) | 0x7cu)}
                                          : to_f8e5m2(x);
}

// four int8_t registers as one 32-bit word, the first lowest
__device__ __forceinline__ uint32_t pack_bytes(const int8_t* p) {
  return static_cast<uint32_t>(static_cast<uint8_t>(p[0])) |
         static_cast<uint32_t>(static_cast<uint8_t>(p[1])) << 8 |
         static_cast<uint32_t>(static_cast<uint8_t>(p[2])) << 16 |
         static_cast<uint32_t>(static_cast<uint8_t>(p[3])) << 24;
}

// 16-bit register tiles hold two values per 32-bit register, the lower index in the low half.
// The backend specializes Half16 (lo, hi: a half as f32; one: f32 to a half's bits) and
// Bias16 (pair: the bias of ptc/lower/pairs.py's integers, in both halves) for its 16-bit
// types.
template <typename T> struct Half16;
template <typename T> struct Bias16;
template <typename T> __device__ __forceinline__ float unpack(const uint32_t* v, int i) {
  return (i & 1) ? Half16<T>::hi(v[i >> 1]) : Half16<T>::lo(v[i >> 1]);
}
template <typename T> __device__ __forceinline__ void set_half(uint32_t* v, int i, float x) {
  const uint32_t b = Half16<T>::one(x);
  v[i >> 1] = (i & 1) ? ((v[i >> 1] & 0xffffu) | (b << 16)) : ((v[i >> 1] & 0xffff0000u) | b);
}
// two integers in 0..1023 (0..127 for bf16) as one word of biased 16-bit values
template <typename T> __device__ __forceinline__ uint32_t biased16(uint32_t a0, uint32_t a1) {
  return a0 | (a1 << 16) | Bias16<T>::pair;
}

__host__ __device__ __forceinline__ long long floordiv(long long a, long long b) {
  long long q = a / b;
  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
__host__ __device__ __forceinline__ long long floormod(long long a, long long b) {
  long long r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

// shifts of i32 as the language defines them on every target: << wraps, >> is arithmetic,
// and an amount outside 0..31 shifts every bit out (PTX clamps it to 32, the AMD shifter
// keeps its low 5 bits, and C leaves it undefined: the clamp is explicit)
__host__ __device__ __forceinline__ int shift_left(int a, int b) {
  return static_cast<unsigned>(b) < 32u ? static_cast<int>(static_cast<unsigned>(a) << b) : 0;
}
__host__ __device__ __forceinline__ int shift_right(int a, int b) {
  return a >> (static_cast<unsigned>(b) < 32u ? b : 31);
}

}  // namespace ptc
