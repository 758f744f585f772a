#include "xstage/runtime/versions.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

namespace xstage::runtime {

SoftwareVersions software_versions() {
  SoftwareVersions s;
  s.cuda_build = CUDART_VERSION;
  s.nccl_build = NCCL_VERSION_CODE;
  // Version queries need no context and no device; a failure (no driver) leaves 0, and is not an error here.
  if (cudaRuntimeGetVersion(&s.cuda_runtime) != cudaSuccess) s.cuda_runtime = 0;
  if (cudaDriverGetVersion(&s.cuda_driver) != cudaSuccess) s.cuda_driver = 0;
  if (ncclGetVersion(&s.nccl_runtime) != ncclSuccess) s.nccl_runtime = 0;
  return s;
}

}  // namespace xstage::runtime
