#pragma once
// Device-side runtime helpers: peer pointers and LSA barriers with a timeout.
#include <nccl_device.h>

#include <cstdint>
#include <cstdio>

#include "xstage/ptx/timer.cuh"
#include "xstage/runtime/device_error.hpp"

namespace xstage::runtime {

// A peer's address of `offset` bytes into a symmetric window (rank = LSA rank; LSA = world here).
template <class T>
__device__ __forceinline__ T* peer(ncclWindow_t win, size_t offset, int rank) {
  return static_cast<T*>(ncclGetLsaPointer(win, offset, rank));
}

// ncclLsaBarrierSession with a bounded wait: arrive() is NCCL's; wait_or_timeout() polls the same
// inboxes as NCCL's unicast wait but gives up after timeout_ns, records who it waited for in `err`
// and returns false (NCCL's own wait spins forever when a peer never arrives).
// One session per CTA (index = barrier slot); the result is uniform across the CTA.
struct TimedLsaBarrierCta : ncclLsaBarrierSession<ncclCoopCta> {
  __device__ TimedLsaBarrierCta(const ncclDevComm& comm, uint32_t index)
      : ncclLsaBarrierSession<ncclCoopCta>(ncclCoopCta{}, comm, ncclTeamTagLsa{}, index, /*multimem=*/false) {}

  __device__ bool sync_or_timeout(cuda::memory_order order, uint64_t timeout_ns, DeviceError* err) {
    ncclCoopCta coop;
    this->arrive(coop, order);
    bool ok = true;
    const uint64_t t0 = ptx::globaltimer_ns();
    for (int i = this->coop.thread_rank(); i < this->team.nRanks - 1; i += this->coop.size()) {
      int peer_rank = i + (this->team.rank <= i ? 1 : 0);
      cuda::atomic_ref<uint32_t> inbox(*this->ucInbox(this->team.rank, peer_rank));
      while (true) {
        uint32_t got = inbox.load(nccl::utility::acquireOrderOf(order));
        if (got - (this->epoch + 1) <= uint32_t(-1) >> 1) break;
        if (ptx::globaltimer_ns() - t0 > timeout_ns) {
          if (record_device_error(err, DeviceErrorCode::kLsaBarrierTimeout, this->team.rank, peer_rank, this->index,
                                  this->epoch + 1, got))
            printf("xstage: rank %d: LSA barrier %d timed out waiting for rank %d (inbox %u, expected %u)\n",
                   this->team.rank, this->index, peer_rank, got, this->epoch + 1);
          ok = false;
          break;
        }
      }
    }
    this->epoch += 1;
    return __syncthreads_or(!ok) == 0;
  }
};

}  // namespace xstage::runtime
