#pragma once
// Timers. %globaltimer is a nanosecond clock common to every SM of a GPU (use it to align spans of
// different producers); clock64 counts SM cycles and is only comparable within one SM.
#include <cstdint>

namespace xstage::ptx {

__device__ __forceinline__ uint64_t globaltimer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ uint64_t clock_cycles() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(t));
  return t;
}

// Busy producer-side work until clock64 reaches `until` (keeps the SM issuing; not a sleep).
__device__ __forceinline__ void spin_until_cycle(uint64_t until) {
  while (static_cast<int64_t>(clock_cycles() - until) < 0) {
  }
}

}  // namespace xstage::ptx
