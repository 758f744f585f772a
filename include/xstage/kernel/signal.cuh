#pragma once
// Completion signals between ranks (real GPUs over NVLink, or emulated ranks on one GPU): one 32-bit
// counter per (slot, source rank) in the receiver's signal window, raised with release semantics by the
// sender and read with acquire semantics by the receiver. Counters only grow: a receiver waits for
// `epoch * count` (>= as a wrap-safe difference), so nothing is reset between launches.
//
// Why release only after completion: a release at system scope waits until this thread's earlier stores
// are performed. Issued right after remote stores it would couple the issuer to remote completion (the
// X-Stage would vanish), so senders signal once their stores are known complete (bulk_wait_group) or
// once per CTA at the end of their work.
#include <cstdint>
#include <cstdio>

#include "xstage/ptx/store.cuh"
#include "xstage/ptx/timer.cuh"
#include "xstage/runtime/device_error.hpp"

namespace xstage::kernel {

// Raise a peer's (or one's own) counter by `v`, releasing every write this thread has performed or
// observed before it.
__device__ __forceinline__ void signal_add_release(uint32_t* counter, uint32_t v = 1) {
  ptx::red_add_release_sys_u32(counter, v);
}
__device__ __forceinline__ void signal_store_release(uint32_t* counter, uint32_t v) {
  ptx::st_release_sys_u32(counter, v);
}
__device__ __forceinline__ uint32_t signal_load_acquire(const uint32_t* counter) {
  return ptx::ld_acquire_sys_u32(counter);
}

// True once `value` has reached `target` (wrap-safe: counters may wrap around 2^32).
__device__ __forceinline__ bool signal_reached(uint32_t value, uint32_t target) {
  return int32_t(value - target) >= 0;
}

// Who waits for what: named in the error record when the wait times out.
struct SignalWaitInfo {
  int rank;   // the waiting rank
  int peer;   // the rank whose signal is awaited
  int slot;   // the counter's slot (what the signal means to the kernel)
};

// Spins (acquire) until *counter >= target or timeout_ns of %globaltimer pass. On timeout records
// kSignalTimeout in `err` (first failure wins) and returns false.
__device__ __forceinline__ bool signal_wait_geq(const uint32_t* counter, uint32_t target, uint64_t timeout_ns,
                                                runtime::DeviceError* err, SignalWaitInfo who) {
  uint32_t got = signal_load_acquire(counter);
  if (signal_reached(got, target)) return true;
  const uint64_t t0 = ptx::globaltimer_ns();
  while (true) {
    got = signal_load_acquire(counter);
    if (signal_reached(got, target)) return true;
    if (ptx::globaltimer_ns() - t0 > timeout_ns) {
      // No printf here: a call inside a kernel that also issues wgmma serialises every wgmma (ptxas C7510);
      // the host decodes the record (runtime::describe) instead.
      runtime::record_device_error(err, runtime::DeviceErrorCode::kSignalTimeout, who.rank, who.peer, who.slot,
                                   target, got);
      return false;
    }
  }
}

}  // namespace xstage::kernel
