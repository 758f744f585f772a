#pragma once
// Position in a ring of kStages shared-memory buffers guarded by full/empty mbarriers: the stage index
// and the parity of its current phase. Producer waits empty[stage] with phase ^ 1, consumer waits
// full[stage] with phase; both advance after each buffer.
#include <cstdint>

namespace xstage::kernel {

template <int kStages>
struct PipeState {
  int stage = 0;
  uint32_t phase = 0;
  __device__ __forceinline__ void advance() {
    stage = stage + 1 == kStages ? 0 : stage + 1;
    phase ^= (stage == 0);
  }
};

}  // namespace xstage::kernel
