#pragma once
// cuTensorMapEncodeTiled through the CUDA runtime's driver entry point (no libcuda link needed), looked up
// once per process; null when the driver does not offer it (callers then return cudaErrorNotSupported).
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

namespace xstage::runtime {

inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) !=
            cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      p = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

}  // namespace xstage::runtime
