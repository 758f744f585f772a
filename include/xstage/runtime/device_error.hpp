#pragma once
// A kernel's first failure, written to device (or host-mapped) memory so the host can name it after
// the launch. Kernels claim the record with atomicCAS on `code` (first failure wins); the host decodes
// it with describe() (src/runtime/device_error.cpp), the one place that knows what the fields mean.
#include <cstdint>
#ifndef __CUDACC_RTC__
#include <string>
#endif

namespace xstage::runtime {

enum class DeviceErrorCode : int {
  kNone = 0,
  kLsaBarrierTimeout = 1,    // rank waited at LSA barrier `index` for `peer`; inbox held `got`, not `expected`
  kBurstBarrierTimeout = 2,  // burst-start barrier of burst `index`: `got` of `expected` producers arrived
  kSignalTimeout = 3,        // rank waited on signal slot `index` from `peer`: saw `got`, needed >= `expected`
};

struct DeviceError {
  int code;  // a DeviceErrorCode
  int rank, peer, index;
  uint32_t expected, got;
};

#if defined(__CUDACC__)
// Records the first failure of a launch (later ones are dropped); returns true for the thread that won.
__device__ __forceinline__ bool record_device_error(DeviceError* err, DeviceErrorCode code, int rank, int peer,
                                                    int index, uint32_t expected, uint32_t got) {
  if (err == nullptr || atomicCAS(&err->code, 0, int(code)) != 0) return false;
  err->rank = rank;
  err->peer = peer;
  err->index = index;
  err->expected = expected;
  err->got = got;
  __threadfence_system();
  return true;
}
#endif

#ifndef __CUDACC_RTC__
// One line naming what timed out, on which rank, waiting for whom ("" for kNone).
std::string describe(const DeviceError& e);
#endif

}  // namespace xstage::runtime
