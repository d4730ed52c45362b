// ptc CPU emulation: the part of the CUDA driver API's cuda.h a rendered kernel.cu uses --
// tensor maps for TMA loads (global_to_shared_tma.cuh). An emulated CUtensorMap holds the
// fields the emulator reads (ptc::emu::TensorMapData, ptc_emulate_sm90.h).
#pragma once
#ifndef PTC_EMULATE
#error "this cuda.h is ptc's CPU emulation stub: compile with -DPTC_EMULATE"
#endif
#include <cstdint>
#include <cstring>

#include "ptc_emulate.h"

typedef uint64_t cuuint64_t;
typedef uint32_t cuuint32_t;
typedef int CUresult;
#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_NOT_FOUND 500

typedef struct alignas(64) CUtensorMap_st { unsigned char opaque[128]; } CUtensorMap;
static_assert(sizeof(ptc::emu::TensorMapData) <= sizeof(CUtensorMap), "the emulated map fits");

typedef enum { CU_TENSOR_MAP_DATA_TYPE_UINT8 = 0, CU_TENSOR_MAP_DATA_TYPE_UINT16,
               CU_TENSOR_MAP_DATA_TYPE_UINT32, CU_TENSOR_MAP_DATA_TYPE_INT32,
               CU_TENSOR_MAP_DATA_TYPE_UINT64, CU_TENSOR_MAP_DATA_TYPE_INT64,
               CU_TENSOR_MAP_DATA_TYPE_FLOAT16, CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
               CU_TENSOR_MAP_DATA_TYPE_FLOAT64, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 }
    CUtensorMapDataType;
typedef enum { CU_TENSOR_MAP_INTERLEAVE_NONE = 0 } CUtensorMapInterleave;
typedef enum { CU_TENSOR_MAP_SWIZZLE_NONE = 0, CU_TENSOR_MAP_SWIZZLE_32B,
               CU_TENSOR_MAP_SWIZZLE_64B, CU_TENSOR_MAP_SWIZZLE_128B } CUtensorMapSwizzle;
typedef enum { CU_TENSOR_MAP_L2_PROMOTION_NONE = 0, CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
               CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B }
    CUtensorMapL2promotion;
typedef enum { CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA } CUtensorMapFloatOOBfill;

// The driver's checks, then the fields the emulated TMA reads.
inline CUresult cuTensorMapEncodeTiled(CUtensorMap* map, CUtensorMapDataType dtype, cuuint32_t rank,
                                       void* base, const cuuint64_t* dims,
                                       const cuuint64_t* strides, const cuuint32_t* box,
                                       const cuuint32_t* elem_strides, CUtensorMapInterleave,
                                       CUtensorMapSwizzle swizzle, CUtensorMapL2promotion,
                                       CUtensorMapFloatOOBfill) {
  static const int bytes[] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2};
  static const int spans[] = {0, 32, 64, 128};
  ptc::emu::TensorMapData m{};
  if (rank < 1 || rank > 5 || reinterpret_cast<uintptr_t>(base) % 16 != 0)
    return CUDA_ERROR_INVALID_VALUE;
  m.base = static_cast<const unsigned char*>(base);
  m.rank = static_cast<int>(rank);
  m.elem_bytes = bytes[dtype];
  m.swizzle = spans[swizzle];
  m.strides[0] = m.elem_bytes;
  for (cuuint32_t i = 0; i < rank; ++i) {
    if (dims[i] == 0 || box[i] == 0 || box[i] > 256 || elem_strides[i] != 1)
      return CUDA_ERROR_INVALID_VALUE;
    m.dims[i] = static_cast<long long>(dims[i]);
    m.box[i] = static_cast<int>(box[i]);
    if (i > 0) {
      if (strides[i - 1] % 16 != 0) return CUDA_ERROR_INVALID_VALUE;
      m.strides[i] = static_cast<long long>(strides[i - 1]);
    }
  }
  if ((box[0] * m.elem_bytes) % 16 != 0 || (m.swizzle && box[0] * m.elem_bytes > m.swizzle))
    return CUDA_ERROR_INVALID_VALUE;
  memset(map, 0, sizeof *map);
  memcpy(map, &m, sizeof m);
  return CUDA_SUCCESS;
}
