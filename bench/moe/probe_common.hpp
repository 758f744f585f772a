#pragma once
// Host helpers shared by the MoE probes (mainloop_probe.cu, stream_probe.cu): CUDA return codes checked with the
// probe's name, and the 2-d tensor maps moe_layer.cpp makes for the fused kernel. Programs, not a library: an error
// ends the process with a message.
#include <cuda_runtime.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "xstage/bench/passes.hpp"
#include "xstage/runtime/tensor_map.hpp"

namespace probe {

using xstage::bench::balanced_passes;  // the rows' passes (xstage/bench/passes.hpp)
using xstage::bench::passes_note;

inline const char* g_name = "probe";  // set by the program's main

// The value after argv[i] (i advanced past it); a missing one ends the program with the option named.
inline const char* arg_value(int argc, char** argv, int& i) {
  if (i + 1 >= argc) {
    std::fprintf(stderr, "%s: %s needs a value\n", g_name, argv[i]);
    std::exit(2);
  }
  return argv[++i];
}

// The value after argv[i] as a whole number (int range) or a finite number: all of the text, or the program ends
// naming the option and the text (atoi read "abc" as 0).
inline int int_value(int argc, char** argv, int& i) {
  const char* opt = argv[i];
  const char* v = arg_value(argc, argv, i);
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(v, &end, 10);
  if (*v == 0 || *end != 0 || errno == ERANGE || n < -2147483647LL || n > 2147483647LL) {
    std::fprintf(stderr, "%s: %s '%s' is not a whole number\n", g_name, opt, v);
    std::exit(2);
  }
  return int(n);
}
inline double num_value(int argc, char** argv, int& i) {
  const char* opt = argv[i];
  const char* v = arg_value(argc, argv, i);
  char* end = nullptr;
  const double x = std::strtod(v, &end);
  if (*v == 0 || *end != 0 || !std::isfinite(x)) {
    std::fprintf(stderr, "%s: %s '%s' is not a finite number\n", g_name, opt, v);
    std::exit(2);
  }
  return x;
}

inline void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s: %s\n", g_name, what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// A map of `base` with `rank` dimensions (dims innermost first, byte strides of dims 1.., box per dim), elementwise
// strides 1, L2 promotion 256 B; `what` names it in the error.
inline CUtensorMap encode_map_nd(const void* base, CUtensorMapDataType type, uint32_t rank, const cuuint64_t* dims,
                                 const cuuint64_t* strides, const cuuint32_t* box, CUtensorMapSwizzle swizzle,
                                 const char* what) {
  auto enc = xstage::runtime::tensor_map_encoder();
  if (enc == nullptr) {
    std::fprintf(stderr, "%s: cuTensorMapEncodeTiled is not available from the driver\n", g_name);
    std::exit(1);
  }
  CUtensorMap m;
  const cuuint32_t es[3] = {1, 1, 1};
  const CUresult r = enc(&m, type, rank, const_cast<void*>(base), dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                         swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "%s: tensor map rejected (CUresult %d; %s)\n", g_name, int(r), what);
    std::exit(1);
  }
  return m;
}

// A 2-d map of `base` ({cols, rows} elements of elem_bytes, row-major) with a {box_cols, box_rows} box.
inline CUtensorMap encode_map(const void* base, CUtensorMapDataType type, uint32_t elem_bytes, uint64_t cols,
                              uint64_t rows, uint32_t box_cols, uint32_t box_rows, CUtensorMapSwizzle swizzle) {
  const cuuint64_t dims[2] = {cols, rows};
  const cuuint64_t strides[1] = {cols * elem_bytes};
  const cuuint32_t box[2] = {box_cols, box_rows};
  char what[64];
  std::snprintf(what, sizeof what, "%llu x %llu", (unsigned long long)cols, (unsigned long long)rows);
  return encode_map_nd(base, type, 2, dims, strides, box, swizzle, what);
}

// FP8 bytes with the 128 B swizzle, or fp32 without, as moe_layer.cpp's maps.
inline CUtensorMap make_map(const void* base, bool fp32, uint64_t cols, uint64_t rows, uint32_t box_cols,
                            uint32_t box_rows) {
  return fp32 ? encode_map(base, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, cols, rows, box_cols, box_rows,
                           CU_TENSOR_MAP_SWIZZLE_NONE)
              : encode_map(base, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, cols, rows, box_cols, box_rows,
                           CU_TENSOR_MAP_SWIZZLE_128B);
}

// FP8 bytes with the 128 B swizzle as a 3-d view {cols, group_rows, rows / group_rows} (row groups on the third
// axis), box {box_cols, box_rows, box_groups}: one load of box_rows rows from each of box_groups consecutive groups.
inline CUtensorMap make_map_3d(const void* base, uint64_t cols, uint64_t rows, uint64_t group_rows, uint32_t box_cols,
                               uint32_t box_rows, uint32_t box_groups) {
  const cuuint64_t dims[3] = {cols, group_rows, rows / group_rows};
  const cuuint64_t strides[2] = {cols, cols * group_rows};
  const cuuint32_t box[3] = {box_cols, box_rows, box_groups};
  return encode_map_nd(base, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B,
                       "3-d row-group view");
}

// Bytes without swizzle (a box lands row after row): the int4 boxes of mainloop_probe's l1-w4 rows.
inline CUtensorMap make_map_plain(const void* base, uint64_t cols, uint64_t rows, uint32_t box_cols, uint32_t box_rows) {
  return encode_map(base, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, cols, rows, box_cols, box_rows, CU_TENSOR_MAP_SWIZZLE_NONE);
}

}  // namespace probe
