#pragma once
// A kernel's first failure, written to host-mapped memory so the host can name it after the launch.
#include <cstdint>

namespace xstage::runtime {

struct DeviceError {
  int code;  // 0: none; 1: LSA barrier timeout (peer = the rank waited for); 2: burst-start barrier
             // timeout (index = burst, expected = producers, got = arrived)
  int rank, peer, index;
  uint32_t expected, got;
};

}  // namespace xstage::runtime
