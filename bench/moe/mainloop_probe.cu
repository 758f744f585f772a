// What bounds the fused MoE kernel's W8A8 mainloop? (docs/MOE.md, "What was measured and not kept": L1 tiles
// run at ~57 % and L2 tiles at ~48 % of the FP8 tensor rate per SM, with data ready 76-92 % of the time.)
// This probe runs the kernel's own mainloop building blocks (moe_kernel.cuh's mma_block and promote) on
// operands that stay in shared memory: no TMA, no producer, no epilogue, one CTA per SM, the kernel's 384
// threads and register split (warpgroup 0 idle at kProducerRegs, two consumer warpgroups at kConsumerRegs).
// What is left is the wgmma structure, so its rate is a ceiling for the kernel's mainloop.
//
//   mainloop_probe [--kblocks N] [--ctas N] [--reps N] [--json FILE]
//
// Variants (per 128-deep K block, per consumer warpgroup of 64 rows):
//   l2        one batch of 4 x m64n128k32 into the scratch, wait, promote into the final (the L2 tile)
//   l1        two such batches (gate, up), each waited and promoted (the L1 tile; also a 256-wide L2 tile)
//   l1-nopro  the two batches straight into two final accumulators, no scratch, no per-block wait (bf16-like:
//             what the tensor cores give this operand traffic without the FP8 promotion)
//   l1-inphase  l1 with both warpgroups meeting at a named barrier before every K block (as when both wait for
//             the same full barrier of a stage that lands late)
//   l1-alt    l1 with the warpgroups' batches strictly alternating (named barriers, FA3's ping-pong)
// The rate is FLOP per SM cycle (clock64 on the SM) and its fraction of 8192 (the H100/H200 dense FP8 rate per
// SM and cycle: 1979 TFLOP/s at 1830 MHz on 132 SMs); also TFLOP/s from CUDA events over all CTAs.
// A program, not a test: it checks only that every variant ran (finite sums); it prints a table and writes JSON.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "moe_kernel.cuh"

namespace mk = xstage::moe_kernel;
namespace ptx = xstage::ptx;

namespace {

using C = mk::ConfigT<mk::MoeWeightFormat::kFp8>;
enum class Variant : int { kL2 = 0, kL1 = 1, kL1NoPromote = 2, kL1InPhase = 3, kL1Alternate = 4 };
// Named barriers of this probe (kernel/barrier.cuh): the in-phase meeting, and the ping-pong turns
// (kTurn + wg: "warpgroup wg may issue").
enum class Bar : uint32_t { kInPhase = 1, kTurn = 2 };

constexpr int kABytes = 128 * 128, kBBytes = 256 * 128;  // one stage: A 128 rows, B gate + up boxes

__device__ __forceinline__ void fill(uint8_t* p, int n, uint32_t seed) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    uint32_t h = (uint32_t(i) + seed) * 2654435761u;
    h ^= h >> 15;
    p[i] = uint8_t(h & 0x77u);  // finite e4m3 codes (no 0x7F / 0xFF NaN patterns), both signs cleared of bit 3
  }
}

template <Variant kV>
__global__ void __launch_bounds__(C::kThreads, 1) probe_kernel(int kblocks, float* sums, unsigned long long* cycles) {
  extern __shared__ __align__(1024) uint8_t smem[];
  uint8_t* a = smem;
  uint8_t* b = smem + kABytes;
  fill(a, kABytes, blockIdx.x);
  fill(b, kBBytes, blockIdx.x * 7 + 3);
  ptx::fence_proxy_async_shared_cta();  // generic writes before the tensor cores' (async proxy) reads
  __syncthreads();
  const int warpgroup = threadIdx.x / 128, tid = threadIdx.x % 128;
  if (warpgroup == 0) {
    ptx::setmaxnreg_dec<C::kProducerRegs>();
    return;
  }
  ptx::setmaxnreg_inc<C::kConsumerRegs>();
  const int wg = warpgroup - 1;
  const uint8_t* a_wg = a + wg * 64 * 128;
  float acc[64], fg[64], fu[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) fg[i] = fu[i] = 0.f;
  const float s0 = 1.0f + 1e-3f * (tid % 7), s1 = 1.0f + 1e-3f * (tid % 5);  // a_scale * b_scale stand-ins
  const unsigned long long t0 = clock64();
  for (int kb = 0; kb < kblocks; ++kb) {
    if constexpr (kV == Variant::kL1InPhase) xstage::kernel::bar_sync(Bar::kInPhase, 256);
    if constexpr (kV == Variant::kL2) {
      mk::mma_block(acc, a_wg, b);
      mk::promote(fg, acc, s0, s1);
    } else if constexpr (kV == Variant::kL1NoPromote) {
      mk::fence_regs(fg);
      mk::fence_regs(fu);
      ptx::wgmma_fence();
#pragma unroll
      for (int k = 0; k < 4; ++k) ptx::WgmmaFp8<128>::ss(fg, mk::desc(a_wg, k * 32), mk::desc(b, k * 32), 1);
#pragma unroll
      for (int k = 0; k < 4; ++k)
        ptx::WgmmaFp8<128>::ss(fu, mk::desc(a_wg, k * 32), mk::desc(b + kBBytes / 2, k * 32), 1);
      ptx::wgmma_commit();
      ptx::wgmma_wait<1>();  // keep one block's batch in flight, as the bf16 path
      mk::fence_regs(fg);
      mk::fence_regs(fu);
    } else if constexpr (kV == Variant::kL1Alternate) {
      // Batches strictly alternate between the warpgroups: warpgroup wg issues once the other has issued
      // (turn barrier kTurn + wg, the other arrives on it); warpgroup 0 opens.
      auto batch = [&](const uint8_t* bb, float (&fin)[64], bool first) {
        if (!first || wg == 1) xstage::kernel::bar_sync(Bar::kTurn, 256, wg);
        mk::fence_regs(acc);
        ptx::wgmma_fence();
#pragma unroll
        for (int k = 0; k < 4; ++k) ptx::WgmmaFp8<128>::ss(acc, mk::desc(a_wg, k * 32), mk::desc(bb, k * 32), k > 0);
        ptx::wgmma_commit();
        xstage::kernel::bar_arrive(Bar::kTurn, 256, 1 - wg);
        ptx::wgmma_wait<0>();
        mk::fence_regs(acc);
        mk::promote(fin, acc, s0, s1);
      };
      batch(b, fg, kb == 0);
      batch(b + kBBytes / 2, fu, false);
    } else {  // kL1, kL1InPhase
      mk::mma_block(acc, a_wg, b);
      mk::promote(fg, acc, s0, s1);
      mk::mma_block(acc, a_wg, b + kBBytes / 2);
      mk::promote(fu, acc, s0, s1);
    }
  }
  if constexpr (kV == Variant::kL1NoPromote) {
    ptx::wgmma_wait<0>();
    mk::fence_regs(fg);
    mk::fence_regs(fu);
  }
  if constexpr (kV == Variant::kL1Alternate)  // warpgroup 1's last arrive hands warpgroup 0 a turn: take it
    if (wg == 0) xstage::kernel::bar_sync(Bar::kTurn, 256, 0);
  const unsigned long long t1 = clock64();
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 64; ++i) s += fg[i] + fu[i];
  atomicAdd(&sums[blockIdx.x], s);
  if (tid == 0) cycles[blockIdx.x * 2 + wg] = t1 - t0;
}

void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "mainloop_probe: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

struct Row {
  std::string name;
  double batches_per_kblock;  // m64n128k128 batches per warpgroup and K block
  double flop_per_cycle, fraction, tflops, ms, max_cycles, min_cycles;
  bool finite;
};

template <Variant kV>
Row run(const char* name, double batches, int kblocks, int ctas, int reps) {
  const size_t smem = kABytes + kBBytes;
  ok(cudaFuncSetAttribute(probe_kernel<kV>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)), name);
  float* sums = nullptr;
  unsigned long long* cyc = nullptr;
  ok(cudaMalloc(&sums, ctas * sizeof(float)), "cudaMalloc");
  ok(cudaMalloc(&cyc, ctas * 2 * sizeof(unsigned long long)), "cudaMalloc");
  cudaEvent_t e0, e1;
  ok(cudaEventCreate(&e0), "event");
  ok(cudaEventCreate(&e1), "event");
  probe_kernel<kV><<<ctas, C::kThreads, smem>>>(kblocks, sums, cyc);  // warm-up
  ok(cudaGetLastError(), name);
  ok(cudaDeviceSynchronize(), name);
  ok(cudaMemset(sums, 0, ctas * sizeof(float)), "memset");
  ok(cudaEventRecord(e0), "record");
  for (int r = 0; r < reps; ++r) probe_kernel<kV><<<ctas, C::kThreads, smem>>>(kblocks, sums, cyc);
  ok(cudaEventRecord(e1), "record");
  ok(cudaEventSynchronize(e1), name);
  float ms = 0;
  ok(cudaEventElapsedTime(&ms, e0, e1), "elapsed");
  std::vector<unsigned long long> c(ctas * 2);
  std::vector<float> s(ctas);
  ok(cudaMemcpy(c.data(), cyc, c.size() * sizeof(c[0]), cudaMemcpyDeviceToHost), "D2H");
  ok(cudaMemcpy(s.data(), sums, s.size() * sizeof(float), cudaMemcpyDeviceToHost), "D2H");
  cudaFree(sums);
  cudaFree(cyc);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  const double flop_per_sm = 2.0 /*wg*/ * kblocks * batches * (2.0 * 64 * 128 * 128);  // last launch, per CTA
  const double mx = double(*std::max_element(c.begin(), c.end())), mn = double(*std::min_element(c.begin(), c.end()));
  Row row{name, batches, flop_per_sm / mx, flop_per_sm / mx / 8192.0,
          flop_per_sm * ctas * reps / (ms * 1e-3) / 1e12, ms / reps, mx, mn, true};
  for (float v : s) row.finite = row.finite && std::isfinite(v);
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  int kblocks = 4096, ctas = 0, reps = 5;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "mainloop_probe: %s needs a value\n", k.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--kblocks") kblocks = std::atoi(val().c_str());
    else if (k == "--ctas") ctas = std::atoi(val().c_str());
    else if (k == "--reps") reps = std::atoi(val().c_str());
    else if (k == "--json") json = val();
    else {
      std::fprintf(stderr, "mainloop_probe: unknown argument %s (see the file's header)\n", k.c_str());
      return 2;
    }
  }
  cudaDeviceProp prop{};
  ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  if (ctas <= 0) ctas = prop.multiProcessorCount;  // one CTA per SM
  if (kblocks < 1 || reps < 1 || ctas > prop.multiProcessorCount) {
    std::fprintf(stderr, "mainloop_probe: need --kblocks >= 1, --reps >= 1, --ctas <= %d SMs (got %d, %d, %d)\n",
                 prop.multiProcessorCount, kblocks, reps, ctas);
    return 2;
  }
  if (prop.major != 9) {
    std::fprintf(stderr, "mainloop_probe: needs sm_90a (Hopper); device 0 is sm_%d%d\n", prop.major, prop.minor);
    return 2;
  }
  std::vector<Row> rows;
  rows.push_back(run<Variant::kL2>("l2", 1, kblocks, ctas, reps));
  rows.push_back(run<Variant::kL1>("l1", 2, kblocks, ctas, reps));
  rows.push_back(run<Variant::kL1NoPromote>("l1-nopro", 2, kblocks, ctas, reps));
  rows.push_back(run<Variant::kL1InPhase>("l1-inphase", 2, kblocks, ctas, reps));
  rows.push_back(run<Variant::kL1Alternate>("l1-alt", 2, kblocks, ctas, reps));
  std::printf("%s, %d SMs; %d CTAs x 384 threads, %d K blocks, %d launches per variant\n", prop.name,
              prop.multiProcessorCount, ctas, kblocks, reps);
  std::printf("%-11s %8s %12s %9s %9s %10s %s\n", "variant", "batches", "FLOP/cyc/SM", "of 8192", "TFLOP/s",
              "cyc spread", "ok");
  bool all = true;
  for (const Row& r : rows) {
    std::printf("%-11s %8.0f %12.0f %9.3f %9.1f %10.3f %s\n", r.name.c_str(), r.batches_per_kblock, r.flop_per_cycle,
                r.fraction, r.tflops, (r.max_cycles - r.min_cycles) / r.max_cycles, r.finite ? "yes" : "NO");
    all = all && r.finite;
  }
  if (!json.empty()) {
    std::ofstream f(json);
    f << "{\"device\": \"" << prop.name << "\", \"sms\": " << prop.multiProcessorCount << ", \"ctas\": " << ctas
      << ", \"kblocks\": " << kblocks << ", \"reps\": " << reps << ", \"rows\": [";
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      f << (i ? ", " : "") << "{\"variant\": \"" << r.name << "\", \"batches_per_kblock\": " << r.batches_per_kblock
        << ", \"flop_per_cycle_sm\": " << r.flop_per_cycle << ", \"fraction_of_8192\": " << r.fraction
        << ", \"tflops\": " << r.tflops << ", \"ms_per_launch\": " << r.ms << ", \"max_cycles\": " << r.max_cycles
        << ", \"min_cycles\": " << r.min_cycles << ", \"finite\": " << (r.finite ? "true" : "false") << "}";
    }
    f << "]}\n";
  }
  return all ? 0 : 1;
}
