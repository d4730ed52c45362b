// npy.h: read and write NumPy .npy files (format 1.0-3.0, C order, little endian), for the
// ptc harness's `ptc_run DIR`. Header-only; host code.
//
// dtypes: '<f2' (f16), '<f4' (f32), '<i4' (i32), '|i1' (i8), '|u1' (u8), '|b1' (bool). bf16 has no NumPy dtype, so
// the convention is:
//   - a bf16 *input* may be stored as raw bits, '<u2' (or '<V2', which is what np.save writes
//     for an ml_dtypes.bfloat16 array), or as '<f4', which is rounded to nearest even;
//   - a bf16 *output* is written as '<f4', exactly (every bf16 value is an f32 value).
// FP8 (f8e4m3, f8e5m2) has none either: an input is raw bits, '|u1' (or what np.save writes
// for an ml_dtypes array: '<V1' for float8_e4m3fn, '<f1' for float8_e5m2, which only an
// f8e5m2 parameter takes), or '<f4', rounded as the language's `as`
// rounds (nearest even, saturating to the largest finite value, NaN -> 0x7f); an output is
// written as '<f4', exactly.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace ptc_npy {

struct Array {
  std::string descr;              // e.g. "<f4"
  std::vector<long long> shape;   // empty for a 0-d array
  std::vector<char> data;         // the elements, C order

  long long count() const {
    long long n = 1;
    for (long long d : shape) n *= d;
    return n;
  }
};

inline uint16_t f32_to_bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return (uint16_t)((u >> 16) | 0x40);  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return (uint16_t)(u >> 16);
}

inline float bf16_bits_to_f32(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// FP8 codes: f8e4m3 (E4M3FN: 3 mantissa bits, bias 7, largest 448, no infinities) and
// f8e5m2 (2 mantissa bits, bias 15, largest 57344), as the device helpers code them
// (templates/*/ptc_types: cvt.rn.satfinite's rounding), in host code.
inline uint8_t f32_to_fp8_bits(float f, bool e5m2) {
  const int man = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;
  const float largest = e5m2 ? 57344.0f : 448.0f;
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 24) & 0x80u, mag = u & 0x7fffffffu;
  if (mag > 0x7f800000u) return 0x7f;                                      // NaN
  float a;
  std::memcpy(&a, &mag, 4);
  if (a >= largest) return (uint8_t)(sign | (e5m2 ? 0x7bu : 0x7eu));       // saturate
  if (mag < ((uint32_t)(128 - bias) << 23)) {   // below the smallest normal: its multiples
    const float q = std::ldexp(1.0f, 1 - bias - man);                       // of 2^(1-bias-man)
    return (uint8_t)(sign | (uint32_t)std::nearbyint(a / q));                // nearest even
  }
  uint32_t code = (mag + ((1u << (22 - man)) - 1u) + ((mag >> (23 - man)) & 1u)) >> (23 - man);
  return (uint8_t)(sign | (code - ((uint32_t)(127 - bias) << man)));
}

inline float fp8_bits_to_f32(uint8_t b, bool e5m2) {
  const int man = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;
  const uint32_t mag = b & 0x7fu;
  float v;
  if (e5m2 ? mag >= 0x7cu : mag == 0x7fu)
    v = (e5m2 && mag == 0x7cu) ? HUGE_VALF : NAN;
  else if ((mag >> man) == 0)
    v = std::ldexp((float)mag, 1 - bias - man);                            // subnormal, zero
  else
    v = std::ldexp((float)((mag & ((1u << man) - 1)) | (1u << man)), (int)(mag >> man) - bias - man);
  return (b & 0x80u) ? -v : v;
}

// The value of `key` in the header dict: the text after "'key':" up to the next item.
inline bool find_key(const std::string& header, const char* key, size_t* pos) {
  std::string k1 = std::string("'") + key + "'", k2 = std::string("\"") + key + "\"";
  size_t at = header.find(k1);
  if (at == std::string::npos) at = header.find(k2);
  if (at == std::string::npos) return false;
  at = header.find(':', at);
  if (at == std::string::npos) return false;
  at++;
  while (at < header.size() && header[at] == ' ') at++;
  *pos = at;
  return true;
}

inline bool parse_header(const std::string& h, Array* out, std::string* err) {
  size_t at;
  if (!find_key(h, "descr", &at) || at >= h.size() || (h[at] != '\'' && h[at] != '"')) {
    *err = "no 'descr' in the .npy header";
    return false;
  }
  size_t end = h.find(h[at], at + 1);
  if (end == std::string::npos) { *err = "a broken 'descr' in the .npy header"; return false; }
  out->descr = h.substr(at + 1, end - at - 1);
  if (!find_key(h, "fortran_order", &at)) { *err = "no 'fortran_order' in the .npy header"; return false; }
  if (h.compare(at, 4, "True") == 0) { *err = "the array is in Fortran order; save it C-contiguous"; return false; }
  if (!find_key(h, "shape", &at) || at >= h.size() || h[at] != '(') {
    *err = "no 'shape' in the .npy header";
    return false;
  }
  end = h.find(')', at);
  if (end == std::string::npos) { *err = "a broken 'shape' in the .npy header"; return false; }
  out->shape.clear();
  std::string dims = h.substr(at + 1, end - at - 1);
  size_t i = 0;
  while (i < dims.size()) {
    while (i < dims.size() && (dims[i] == ' ' || dims[i] == ',')) i++;
    if (i >= dims.size()) break;
    size_t j = i;
    while (j < dims.size() && dims[j] >= '0' && dims[j] <= '9') j++;
    if (j == i) { *err = "a broken 'shape' in the .npy header"; return false; }
    out->shape.push_back(std::stoll(dims.substr(i, j - i)));
    i = j;
    while (i < dims.size() && (dims[i] == 'L' || dims[i] == ' ')) i++;
  }
  return true;
}

// Element size of a supported descr, or 0.
inline int descr_bytes(const std::string& d) {
  if (d == "<f4" || d == "<i4") return 4;
  if (d == "<f2" || d == "<u2" || d == "<V2" || d == "|V2") return 2;
  if (d == "|b1" || d == "<b1" || d == "|i1" || d == "|u1" || d == "<V1" || d == "|V1" ||
      d == "<f1")
    return 1;
  return 0;
}

inline bool read(const char* path, Array* out, std::string* err) {
  FILE* f = std::fopen(path, "rb");
  if (!f) { *err = "cannot open it"; return false; }
  char magic[8];
  bool ok = std::fread(magic, 1, 8, f) == 8 && std::memcmp(magic, "\x93NUMPY", 6) == 0;
  if (!ok) { std::fclose(f); *err = "not a .npy file"; return false; }
  uint32_t header_len = 0;
  if (magic[6] == 1) {
    unsigned char b[2];
    ok = std::fread(b, 1, 2, f) == 2;
    header_len = b[0] | (b[1] << 8);
  } else {
    unsigned char b[4];
    ok = std::fread(b, 1, 4, f) == 4;
    header_len = b[0] | (b[1] << 8) | (b[2] << 16) | ((uint32_t)b[3] << 24);
  }
  std::string header(header_len, '\0');
  if (!ok || std::fread(&header[0], 1, header_len, f) != header_len) {
    std::fclose(f); *err = "a truncated .npy header"; return false;
  }
  if (!parse_header(header, out, err)) { std::fclose(f); return false; }
  int elem = descr_bytes(out->descr);
  if (!elem) {
    std::fclose(f);
    *err = "unsupported dtype '" + out->descr + "' (ptc reads <f2, <f4, <i4, |i1, |u1, |b1, <u2 for bf16 bits and |V1 for FP8 bits)";
    return false;
  }
  size_t bytes = (size_t)out->count() * (size_t)elem;
  out->data.resize(bytes);
  if (bytes && std::fread(out->data.data(), 1, bytes, f) != bytes) {
    std::fclose(f); *err = "the file is shorter than its shape says"; return false;
  }
  std::fclose(f);
  return true;
}

inline bool write(const char* path, const char* descr, const std::vector<long long>& shape,
                  const void* data, size_t bytes, std::string* err) {
  std::string dict = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); i++) {
    dict += std::to_string(shape[i]);
    if (shape.size() == 1 || i + 1 < shape.size()) dict += ",";
    if (i + 1 < shape.size()) dict += " ";
  }
  dict += "), }";
  size_t total = 10 + dict.size() + 1;           // magic, version, length, dict, '\n'
  size_t pad = (64 - total % 64) % 64;           // NumPy aligns the data to 64 bytes
  dict.append(pad, ' ');
  dict += '\n';
  std::string tmp = std::string(path) + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) { *err = "cannot create it"; return false; }
  unsigned char head[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                            (unsigned char)(dict.size() & 0xff), (unsigned char)(dict.size() >> 8)};
  bool ok = std::fwrite(head, 1, 10, f) == 10 && std::fwrite(dict.data(), 1, dict.size(), f) == dict.size() &&
            (bytes == 0 || std::fwrite(data, 1, bytes, f) == bytes);
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path) != 0) {
    std::remove(tmp.c_str());
    *err = "cannot write it";
    return false;
  }
  return true;
}

}  // namespace ptc_npy
