#pragma once
// The parametric remote-store burst kernel (SPEC §4) and its destination check.
// One producer (a CTA, or a warp) stores B bytes per burst to its destination, then does G of
// producer-side work (a calibrated clock64 spin), `bursts` times. Thread 0 of each producer stamps
// burst start/end with %globaltimer (common clock across SMs) and clock64 (precise within the SM).
// Periodic bursts run free after the initial LSA barrier: between two bursts a producer touches no
// memory (a per-burst barrier's atomics would queue behind the outstanding remote stores and hide
// the backpressure as "gap"). Isolated bursts (align_bursts) are re-aligned by a per-burst barrier,
// which is harmless there because the recovery gap has drained everything before it runs.
#include <cuda_runtime.h>
#include <nccl.h>
#include <nccl_device.h>

#include <cstdint>

#include "xstage/runtime/device_error.hpp"

namespace xstage::bench {

enum class Path : int { St = 0, Tma = 1 };
enum class Pattern : int { P2P = 0, A2A = 1 };

struct BurstParams {
  ncclDevComm dev;
  ncclWindow_t win;
  int rank, nranks;
  int K;              // producers
  uint32_t B;         // bytes per producer per burst (multiple of 16)
  int bursts;
  uint64_t gap_cycles;
  Pattern pattern;
  int src, dst;       // p2p pair
  bool local;         // control: every producer stores into its own rank's window instead
  uint32_t period_bytes;  // fill pattern repeats every period_bytes inside a producer region (TMA staging)
  uint64_t* stamps;   // [bursts][K][4]: globaltimer start, end; clock64 start, end
  bool align_bursts;  // isolated mode: a burst-start barrier across this rank's producers before every burst
  uint32_t* arrive;   // [bursts] zeroed: burst-start barrier counters (align_bursts only)
  int active;         // producers of this rank that store (arrivals expected per burst)
  runtime::DeviceError* err;
  uint64_t timeout_ns;
};

// Which rank producer p of rank s stores to (-1: none). Shared by the sender and the checker.
__host__ __device__ inline int target_of(int s, int p, Pattern pattern, int src, int dst, bool local, int nranks) {
  if (pattern == Pattern::P2P) return s == src ? (local ? s : dst) : -1;
  return local ? s : (s + 1 + p % (nranks - 1)) % nranks;
}

// Byte offset of producer p of source rank s in the destination window: slot s, region p.
__host__ __device__ inline size_t region_offset(int s, int p, int K, uint32_t B) {
  return (static_cast<size_t>(s) * K + p) * B;
}

// Fill value of 32-bit word w in a region: depends on source rank, burst, producer and offset.
__host__ __device__ inline uint32_t fill_seed(int s, int burst, int p) {
  uint32_t x = 0x9E3779B1u * (s + 1) ^ 0x85EBCA77u * (burst + 1) ^ 0xC2B2AE3Du * (p + 1);
  x ^= x >> 15;
  x *= 0x2C1B3C6Du;
  return x ^ (x >> 12);
}
__host__ __device__ inline uint32_t fill_word(uint32_t seed, uint32_t w) { return seed ^ (w * 0x27D4EB2Fu + 0x165667B1u); }

void launch_burst(const BurstParams& p, Path path, bool warp_producers, int threads, cudaStream_t s);
// Counts wrong bytes in this rank's window after a run of `p` (regions nobody targets must still
// hold the zero poison). `wrong` is one device counter (zeroed by the caller).
void launch_verify(const BurstParams& p, unsigned long long* wrong, cudaStream_t s);
// Clock ratio: SM cycles per globaltimer ns, measured over `cycles` of spin.
void launch_clock_probe(uint64_t* out4, uint64_t cycles, cudaStream_t s);
// Host view of a peer pointer in a window (copy-engine anchor).
void launch_peer_pointer(ncclWindow_t win, int rank, void** out, cudaStream_t s);
// SM copy kernel (anchor): grid-stride 16-byte copy of `bytes`.
void launch_sm_copy(void* dst, const void* src, size_t bytes, int blocks, int threads, cudaStream_t s);

}  // namespace xstage::bench
