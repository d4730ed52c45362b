// ptc_signature.h: the tables that describe one kernel's signature to the harness. ptc writes
// their definitions into signature.cc, a file of data beside each kernel; the harness
// (harness.cu / harness.hip) is the same text for every kernel, so a machine compiles it once
// per compiler whatever kernels it builds.
#pragma once

namespace ptc_tables {

enum Dtype { F16, BF16, F32, I32, BOOL, I8, U8, F8E4M3, F8E5M2 };

struct TensorInfo {
  const char* name;
  Dtype dtype;
  int rank;
  const int* dim;           // the dim of each axis (an index into kDims), or -1: fixed
  const long long* fixed;   // the fixed extent of an axis whose dim is -1
  bool output;
};

struct NamedInfo {
  const char* name;
  long long default_value;  // dims: the `dims` default, or -1
  long long static_value;   // dims: the compile-time size, or -1
};

// What a dim must be a multiple of: the kernel's `tile A divides <dim>` lines, at the tile
// sizes of this build.
struct DimMultiple {
  int dim;                  // an index into kDims
  long long size;
  const char* why;
};

extern const char kSignature[];
// Tensor inputs in signature order, then the outputs (one sentinel entry at the end).
extern const int kNumTensors;
extern const int kNumInputs;
extern const TensorInfo kTensors[];
// Scalar parameters in signature order, and their dtypes (one sentinel entry at the end).
extern const int kNumScalars;
extern const NamedInfo kScalars[];
extern const Dtype kScalarDtypes[];
extern const int kNumMultiples;
extern const DimMultiple kMultiples[];
// Every dim, in the kernel's order (the order ptc_launch receives them).
extern const int kNumDims;
extern const NamedInfo kDims[];

}  // namespace ptc_tables
