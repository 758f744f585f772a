// barrier_probe: does compute-sanitizer racecheck order shared-memory traffic across a named barrier of part of the
// block? The fused MoE kernel's half tiles exchange row amax between its two consumer warpgroups (threads
// [128, 384) of 384) through one word per row and `bar.sync 1, 256` (moe_kernel.cuh, Bar::kHalfTileAmax); racecheck
// reports hazards there (s24). This program runs that exchange alone, three ways, so racecheck can be asked:
//   named     warpgroups 1-2 exchange through bar.sync 1, 256 (warpgroup 0 idle), as the kernel does
//   named-all the same exchange with all 384 threads at bar.sync 1, 384
//   sync      the same exchange with __syncthreads
//   pingpong  as named, with the kernel's PingPong turn around each iteration (MoeLayerParams::pingpong: warpgroup
//             wg waits at bar.sync 2 + wg, 256 for the other's bar.arrive, warpgroup 0 starts holding the turn)
//   compute-sanitizer --tool racecheck barrier_probe named|named-all|sync|pingpong
// It checks every exchanged value and exits 1 on a wrong one; a program, not a test (a tool's behaviour).
#include <cstdio>
#include <cstring>

#include <cuda_runtime.h>

#include "xstage/bench/usage.hpp"

#include "barrier_probe_usage.inc"  // kUsage: this header comment (--help)

namespace {

constexpr int kIters = 64;

template <int kMode>  // 0 named (256 threads), 1 named with all 384, 2 __syncthreads, 3 named + the turn
__global__ void exchange(int* bad) {
  __shared__ float x[128];
  const int t = threadIdx.x;
  const bool consumer = t >= 128;
  const int tid = (t - 128) % 128, wg = (t - 128) / 128, r0 = 16 * (tid / 32) + (tid % 32) / 4;
  auto sync = [&] {
    if constexpr (kMode == 0 || kMode == 3) {
      if (consumer) asm volatile("bar.sync 1, 256;\n" ::: "memory");
    } else if constexpr (kMode == 1) {
      asm volatile("bar.sync 1, 384;\n" ::: "memory");
    } else {
      __syncthreads();
    }
  };
  for (int it = 0; it < kIters; ++it) {
    if (kMode == 3 && consumer) {  // the turn: wait for it (warpgroup 0 holds it first), then pass it on
      if (wg == 1 || it > 0) asm volatile("bar.sync %0, 256;\n" ::"r"(2 + wg) : "memory");
      asm volatile("bar.arrive %0, 256;\n" ::"r"(3 - wg) : "memory");
    }
    if (consumer && tid % 4 == 0) x[wg * 64 + r0] = float(it * 1000 + wg * 64 + r0);
    sync();
    if (consumer && x[(1 - wg) * 64 + r0] != float(it * 1000 + (1 - wg) * 64 + r0)) atomicAdd(bad, 1);
    sync();  // the next iteration's writes after these reads
  }
  if (kMode == 3 && consumer && wg == 0) asm volatile("bar.sync 2, 256;\n" ::: "memory");  // the last hand-off
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  if (xstage::bench::is_help_flag(mode)) xstage::bench::print_usage_and_exit(kUsage);
  void (*k)(int*) = std::strcmp(mode, "named") == 0       ? exchange<0>
                    : std::strcmp(mode, "named-all") == 0 ? exchange<1>
                    : std::strcmp(mode, "sync") == 0      ? exchange<2>
                    : std::strcmp(mode, "pingpong") == 0  ? exchange<3>
                                                          : nullptr;
  if (k == nullptr) {
    std::fprintf(stderr, "barrier_probe: mode must be named, named-all, sync or pingpong, got '%s' (barrier_probe --help)\n", mode);
    return 2;
  }
  int* bad = nullptr;
  if (cudaMalloc(&bad, sizeof(int)) != cudaSuccess || cudaMemset(bad, 0, sizeof(int)) != cudaSuccess) return 3;
  k<<<4, 384>>>(bad);
  int h = -1;
  cudaError_t e = cudaGetLastError();  // a refused launch is not sticky: the copy after it would succeed
  if (e == cudaSuccess) e = cudaMemcpy(&h, bad, sizeof(int), cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) {
    std::fprintf(stderr, "barrier_probe: %s\n", cudaGetErrorString(e));
    return 3;
  }
  std::printf("barrier_probe %s: %d wrong values\n", mode, h);
  return h == 0 ? 0 : 1;
}
