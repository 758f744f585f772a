// What bounds the fused MoE kernel's W8A8 mainloop? (docs/MOE.md, "What was measured and not kept": L1 tiles
// run at ~57 % and L2 tiles at ~48 % of the FP8 tensor rate per SM, with data ready 76-92 % of the time.)
// This probe runs the kernel's own mainloop building blocks (moe_kernel.cuh's mma_block and promote) on
// operands that stay in shared memory: no TMA, no producer, no epilogue, one CTA per SM, the kernel's 384
// threads and register split (warpgroup 0 idle at kProducerRegs, two consumer warpgroups at kConsumerRegs).
// What is left is the wgmma structure, so its rate is a ceiling for the kernel's mainloop.
//
//   mainloop_probe [--kblocks N] [--ctas N] [--reps N] [--rounds N] [--src-mb MB] [--pipe-only] [--rows A,B,...]
//                  [--json FILE]
//   mainloop_probe --power S [--kblocks N] [--ctas N] [--json FILE]
//
// --power S compares what the A operand holds instead (run_power): l1 and half-wide on random rows, zeros, 0xFF and
// partly zero / 0xFF rows (a tile's padding rows), as backends of the benchmark protocol with blocks of S seconds, the
// clock and power read by NVML: the tensor cores' power follows their operands, and at the 700 W limit the clock
// follows the power (docs/MOE-NOTEBOOK.md "Session 57").
//
// --src-mb larger than the L2 (e.g. 16384) streams the pipeline variants from HBM; --pipe-only skips the variants on
// shared-memory operands; --rows runs only the named variants.
//
// Variants (per 128-deep K block, per consumer warpgroup of 64 rows):
//   l2        one batch of 4 x m64n128k32 into the scratch, wait, promote into the final (the L2 tile)
//   l1        two such batches (gate, up), each waited and promoted (the L1 tile; also a 256-wide L2 tile)
//   l1-nopro  the two batches straight into two final accumulators, no scratch, no per-block wait (bf16-like:
//             what the tensor cores give this operand traffic without the FP8 promotion)
//   l1-inphase  l1 with both warpgroups meeting at a named barrier before every K block (as when both wait for
//             the same full barrier of a stage that lands late)
//   l1-alt    l1 with the warpgroups' batches strictly alternating (named barriers, FA3's ping-pong)
//   l1-ring   the block as four m64n64 batches through two 32-register scratches in turn, each batch issued before
//             the previous one is waited for and promoted (ring_loop; tried in the kernel in s31, not kept)
//   l1-ring-ip  l1-ring with the in-phase meeting before every K block
//   l1-spin   l1 while one thread of warpgroup 0 polls a global flag by acquire loads in a tight loop (as the
//             kernel's producer waits for row readiness or dispatch signals)
//   l1-spin-sleep  the same poll with __nanosleep(256) between loads
// and a half tile's K block (rows [0, 64) only: both warpgroups on the same 64 A rows, warpgroup wg on gate and up
// columns [64 wg, +64); per warpgroup and K block half an l1 block's work):
//   half      two m64n64 batches (gate, up), each waited for and promoted (MoeLayerParams::half_together 0)
//   half-tog  the two m64n64 batches issued together into two scratches, one wait (half_together 1)
//   half-wide one m64n128 batch over the warpgroup's gate and up rows laid out as one 128-row B (half_wide 1)
//   half-wide-ip  half-wide with both warpgroups meeting at a named barrier before every K block (as in the kernel,
//             where both wait for the same stage)
//   half-pipe half-wide with two scratches in turn: block kb + 1's batch issued before block kb's is waited for and
//             promoted (two_scratch_loop; tried in the kernel in s30 call 1, not kept: docs/MOE-NOTEBOOK.md "Session 30")
//   half-pipe-ip  half-pipe with the in-phase meeting before every batch
//   half-tog-pipe half-tog with two scratches in turn
// and with the operands streamed through the kernel's pipeline instead (4 stages of 48 KB, one producer thread,
// full/empty mbarriers, bulk copies from a global buffer of --src-mb MB that L2 holds, the weight block scales
// read per K block with __ldg as the kernel does):
//   l1-pipe   the l1 structure fed stage by stage (A 16 KB + B 32 KB per K block)
//   l2-pipe   the l2 structure fed stage by stage (A 16 KB + B 16 KB per K block)
//   l1-tma    l1-pipe with the kernel's tensor-map TMA loads instead of bulk copies: per stage A as two {128 B,
//             64 rows} boxes, the A row scales as one {128, 1} fp32 box, B as two {128 B, 128 rows} boxes, 128 B
//             swizzle, L2 promotion 256 B (src as a [rows][8192 B] matrix)
//   l1-tma-mix  l1-tma with the fused kernel's data mix at 8192 tokens: A from a few MB that stay in L2, the weights
//             streamed from the rest of the source without reuse (with --src-mb beyond L2: from HBM); the row to set
//             against the 8K layers' ceiling fraction (needs --src-mb >= 8)
//   l1-tma1-mix, l1-bulkw-mix  l1-tma-mix with a stage's 32 KB of weights as one {128 B, 256 rows} box, or as one bulk
//             copy of a pre-packed 32 KB block (what a W8A8 weight layout packed per tile and K block would allow);
//             l1-tmak-mix the same 32 KB as one {128 B, 256 rows} tensor box of the K-block-major view (the weights
//             stored [row group][K block][256 rows][128 B], so a box is 32 contiguous KB: the bulk copy's DRAM
//             locality at a tensor box's issue cost); l1-bulkaw-mix l1-bulkw-mix with A's 16 KB as one bulk copy too
//             (the token rows packed per row group and K block); l1-bulkw2-mix, l1-bulkw4-mix l1-bulkw-mix's block as
//             two 16 KB or four 8 KB bulk copies (s69: does a split copy keep the block's DRAM locality and get back
//             the per-SM rate a single 32 KB copy loses where few SMs stream or the L2 holds the weights);
//             l1-tma-mix-b is l1-tma-mix again after them
//   l1-tma-2p, l1-tma-mix-2p  l1-tma / l1-tma-mix with a second producer thread (warp 1) issuing the weight boxes
//             while warp 0's issues A's boxes and row scales (each prints its mean cycles per stage to issue its loads)
//   l1-w4, l1-w4-mix  l1-tma / l1-tma-mix in W4A8 form: the weights streamed as int4 (16 KB per stage) and expanded
//             to e4m3 in shared memory by the three epilogue warps, 3 stages (w4_kernel); -nocvt: no expansion
//   l1-w4c-mix  l1-w4-mix with the stage expanded by the consumer warps, block kb + 1's expansion beside block kb's
//             gate batch; 3 stages of 64 KB (w4c_kernel)
//   l1-w4s-mix, l1-w4cs-mix  l1-w4-mix / l1-w4c-mix with the packed sign-magnitude int4 form, expanded to e4m3
//             subnormals by a mask and a rotate (int4sm_x32_to_e4m3) instead of the two's complement form's prmt tables
//   l1-w4cn-mix  l1-w4cs-mix split over N instead of M: each warpgroup takes all 128 rows (two m64n128 batches) against
//             its own 64 gate + 64 up columns, expands only those and syncs with its own 128 threads, so the two
//             warpgroups never meet (w4c_kernel<kSm, kNSplit>); -nocvt: the same without the expansion
//   l1-w4ci-mix  l1-w4cn-mix with each warpgroup's int4 boxes landing in its own e4m3 operand and expanded in place
//             (two named barriers of the warpgroup per K block), so W4A8 keeps W8A8's 4 stages of 48 KB (w4ci_kernel)
//   l1-w4cn-mix-nofence, -nostore  diagnostics of l1-w4cn-mix (the tensor cores read stale codes): without the
//             fence.proxy.async after the expansion's stores, and without the stores
//   l1-w4rs-mix  the operands' roles swapped: the int4 weights the A operand, expanded in registers (wgmma's RS form),
//             the tokens the B operand; no shared-memory stores, no barrier between the warpgroups; 4 stages of 32 KB
//             (w4rs_kernel)
//   l1-tma-ring  l1-tma with the K blocks as l1-ring runs them
//   short-half, short-swap, short-none  a half tile's K blocks fed by the pipeline (A 8 or 4 KB + 32 KB of weights per
//             stage): the kernel's half_wide batch, a swap-AB form with 32 tokens (m64n32, half the tensor work), no
//             tensor work (short_kernel below)
//   short-tma, short-tma-k  short-half with the fused kernel's TMA loads (A box, A row scales, four 64-row weight
//             boxes per stage); -k also with the kernel's consumer (scales read per K block, the release rule)
//   short-bulkw-k  short-tma-k with the four weight pieces as 8 KB bulk copies out of a pre-packed 32 KB block;
//             short-tma3-k with each warpgroup's gate and up pieces as one 3-d box (two loads per stage, not four);
//             short-tmak-k with the four pieces as {128 B, 64 rows} boxes of the K-block-major view (8 contiguous KB);
//             short-bulkaw-k short-bulkw-k with A's 8 KB as one bulk copy too;
//             short-tma-k-b short-tma-k again after them
//   l1-tma-rs l1-tma with A from registers: read from shared memory once per K block (ldmatrix) instead of by each
//             of the two batches (wgmma's RS form; per K block the SM then reads 128 KB of shared memory, not 144)
// GB/s/SM: a pipeline variant's bytes per stage x K blocks / launch time, per CTA.
// The rate is FLOP per SM cycle (clock64 on the SM) and its fraction of 8192 (the H100/H200 dense FP8 rate per
// SM and cycle: 1979 TFLOP/s at 1830 MHz on 132 SMs); also TFLOP/s from CUDA events over all CTAs.
// Passes: each variant is a warm-up launch, then --reps timed launches; --rounds N [2] runs the variants N times in
// listed order and N times in reverse (A B .. B A), so a variant's neighbours and the clock the 700 W limit leaves
// differ between its passes. Each row shows its median-time pass and the spread of its launch time over the 2N passes
// ((max - min) / median); a ratio of two rows smaller than their spreads is not a result.
// A program, not a test: it checks only that every variant ran (finite sums); it prints a table and writes JSON.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "moe_kernel.cuh"
#include "probe_common.hpp"
#include "xstage/common/hash.hpp"
#include "xstage/bench/protocol_cuda.cuh"
#include "xstage/bench/protocol_json.hpp"
#include "xstage/bench/usage.hpp"

#include "mainloop_probe_usage.inc"  // kUsage: this header comment (--help)

namespace mk = xstage::moe_kernel;
namespace ptx = xstage::ptx;

namespace {

using probe::make_map;
using probe::ok;

using C = mk::ConfigT<mk::MoeWeightFormat::kFp8>;
// Two scratch accumulators in turn: block kb + 1's batch is issued before block kb's is waited for and promoted
// (launch(d, kb) issues kGroups commit groups into d; retire(d) promotes a completed one), blocks retire in order.
// The kernel's l2_mainloop_fp8 has this loop order for Linear-2 (MoeLayerParams::l2_scratches = 2) written out in
// place: sharing it through a helper changes the scheduling of the measured kernels' SASS (s30), which is left for a
// kernel change that gets measured.
template <int kGroups, class Launch, class Retire>
__device__ __forceinline__ void two_scratch_loop(int KB, Launch&& launch, Retire&& retire) {
  float acc0[64], acc1[64];
  launch(acc0, 0);
  int kb = 1;
  for (; kb + 1 < KB; kb += 2) {
    launch(acc1, kb);
    ptx::wgmma_wait<kGroups>();
    retire(acc0);
    launch(acc0, kb + 1);
    ptx::wgmma_wait<kGroups>();
    retire(acc1);
  }
  if (kb < KB) {
    launch(acc1, kb);
    ptx::wgmma_wait<kGroups>();
    retire(acc0);
    ptx::wgmma_wait<0>();
    retire(acc1);
  } else {
    ptx::wgmma_wait<0>();
    retire(acc0);
  }
}

// A full tile's K block as four m64n64 batches through two 32-register scratches in turn: the gate box's columns
// [0, 64) and [64, 128), then the up box's; batches 0 and 1 go out together, each later batch is issued before the one
// before it is waited for and promoted, nothing is in flight across K blocks (carrying batch 3 into the next block
// made ptxas serialize every wgmma, C7514). The same 192 registers as one m64n128 scratch. Built into the fused kernel
// in s31 (MoeLayerParams::l1_ring, results/moe/runs/s31/l1-ring.patch) and measured 4-8 % slower there: an m64n64
// batch reads as many A bytes from shared memory as B bytes (docs/MOE-NOTEBOOK.md "Session 31"). begin(kb) waits for block
// kb's operands and returns them with their scales; release(kb) follows block kb's last batch.
struct RingBlock {
  const uint8_t* a;   // the warpgroup's 64 A rows
  const uint8_t* b0;  // gate box (128 B rows = output columns); up box at b1
  const uint8_t* b1;
  float s0[2], s1[2];  // gate / up scales for rows r0 and r0 + 8
};
template <class Begin, class Release>
__device__ __forceinline__ void ring_loop(float (&f0)[64], float (&f1)[64], int KB, Begin&& begin, Release&& release) {
  auto lo = [](float (&f)[64]) -> float (&)[32] { return *reinterpret_cast<float (*)[32]>(f); };
  auto hi = [](float (&f)[64]) -> float (&)[32] { return *reinterpret_cast<float (*)[32]>(f + 32); };
  mk::NoTurn free;
  float x[32], y[32];  // batches 0 and 2 of a block in x, 1 and 3 in y
  for (int kb = 0; kb < KB; ++kb) {
    const RingBlock blk = begin(kb);
    mk::issue_block(x, blk.a, blk.b0, free);
    mk::issue_block(y, blk.a, blk.b0 + 64 * mk::kBlockK, free);
    ptx::wgmma_wait<1>();
    mk::fence_regs(x);
    mk::promote(lo(f0), x, blk.s0[0], blk.s0[1]);
    mk::issue_block(x, blk.a, blk.b1, free);
    ptx::wgmma_wait<1>();
    mk::fence_regs(y);
    mk::promote(hi(f0), y, blk.s0[0], blk.s0[1]);
    mk::issue_block(y, blk.a, blk.b1 + 64 * mk::kBlockK, free);
    ptx::wgmma_wait<1>();
    mk::fence_regs(x);
    mk::promote(lo(f1), x, blk.s1[0], blk.s1[1]);
    ptx::wgmma_wait<0>();
    mk::fence_regs(y);
    release(kb);
    mk::promote(hi(f1), y, blk.s1[0], blk.s1[1]);
  }
}

enum class Variant : int { kL2 = 0, kL1 = 1, kL1NoPromote = 2, kL1InPhase = 3, kL1Alternate = 4, kL1Spin = 5,
                           kL1SpinSleep = 6, kHalf = 7, kHalfTogether = 8, kHalfWide = 9, kHalfWideInPhase = 10,
                           kHalfPipe = 11, kHalfPipeInPhase = 12, kHalfTogPipe = 13, kL1Ring = 14,
                           kL1RingInPhase = 15 };
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

// --power: what the A operand holds (AFill; kAPattern: the probe's own codes above, as every other run).
enum AFill : int {
  kAPattern = -1,
  kARandom = 0,      // random finite e4m3 codes in every row (token rows; an earlier call's rows)
  kAZero = 1,        // zeros
  kANaN = 2,         // 0xFF (e4m3 NaN: what the fused kernel's padding rows hold after poison)
  kAPadZero = 3,     // random rows [0, kPadRow), zeros from kPadRow: a full tile's padding
  kAPadNaN = 4,      // the same with 0xFF
  kAOneRowZero = 5,  // random row 0, zeros in every other row: a one-token expert's half tile
  kAOneRowNaN = 6,   // the same with 0xFF
};
constexpr int kPadRow = 102;  // 26 of 128 rows (20 %): about the share of padding among the A rows V4-Pro's 8K layers
                              // load (12032 of 61184, docs/MOE-NOTEBOOK.md "Session 57")

// Random finite e4m3 codes (every bit pattern but the NaNs 0x7F / 0xFF, which become +-448).
__device__ __forceinline__ uint8_t random_code(int i, uint32_t seed) {
  return xstage::hash::finite_e4m3(xstage::hash::lowbias32((uint32_t(i) * 0x9e3779b9u) ^ (seed * 0x85ebca6bu + 0x165667b1u)));
}

// A's 128 rows of 128 bytes (the 128-byte swizzle permutes 16-byte chunks within a row, so byte i is in row i / 128).
__device__ __forceinline__ void fill_a(uint8_t* p, int fill, uint32_t seed) {
  for (int i = threadIdx.x; i < kABytes; i += blockDim.x) {
    const int row = i / 128;
    const bool pad = (fill == kAPadZero || fill == kAPadNaN) ? row >= kPadRow
                     : (fill == kAOneRowZero || fill == kAOneRowNaN) ? row != 0
                                                                      : fill == kAZero || fill == kANaN;
    const bool nan = fill == kANaN || fill == kAPadNaN || fill == kAOneRowNaN;
    p[i] = pad ? (nan ? 0xFFu : 0u) : random_code(i, seed);
  }
}

template <Variant kV>
__global__ void __launch_bounds__(C::kThreads, 1) probe_kernel(int kblocks, float* sums, unsigned long long* cycles,
                                                                int a_fill = kAPattern) {
  extern __shared__ __align__(1024) uint8_t smem[];
  uint8_t* a = smem;
  uint8_t* b = smem + kABytes;
  if (a_fill == kAPattern) {
    fill(a, kABytes, blockIdx.x);
    fill(b, kBBytes, blockIdx.x * 7 + 3);
  } else {  // --power: the weights random finite codes, A as asked
    fill_a(a, a_fill, blockIdx.x);
    for (int i = threadIdx.x; i < kBBytes; i += blockDim.x) b[i] = random_code(i, blockIdx.x * 7 + 3);
  }
  ptx::fence_proxy_async_shared_cta();  // generic writes before the tensor cores' (async proxy) reads
  __syncthreads();
  const int warpgroup = ptx::warpgroup_idx_uniform(), tid = threadIdx.x % 128;
  __shared__ volatile int consumers_done;
  if (threadIdx.x == 0) consumers_done = 0;
  __syncthreads();
  if (warpgroup == 0) {
    ptx::setmaxnreg_dec<C::kProducerRegs>();
    if constexpr (kV == Variant::kL1Spin || kV == Variant::kL1SpinSleep) {
      if (tid == 0) {
        // a flag nobody sets (sums[gridDim.x] is never written): the poll runs until both warpgroups are done
        const uint32_t* flag = reinterpret_cast<const uint32_t*>(sums + gridDim.x);
        uint32_t seen = 0;
        while (consumers_done < 2) {
          seen += xstage::kernel::signal_load_acquire(flag);
          if constexpr (kV == Variant::kL1SpinSleep) __nanosleep(256);
        }
        if (seen == 12345u) sums[0] = 0.f;  // keep the loads
      }
    }
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
  if constexpr (kV == Variant::kL1Ring || kV == Variant::kL1RingInPhase) {
    // A full tile's K block as four m64n64 batches through two 32-register scratches in turn (ring_loop).
    ring_loop(
        fg, fu, kblocks,
        [&](int) {
          if constexpr (kV == Variant::kL1RingInPhase) xstage::kernel::bar_sync(Bar::kInPhase, 256);
          return RingBlock{a_wg, b, b + kBBytes / 2, {s0, s1}, {s0, s1}};
        },
        [](int) {});
  } else if constexpr (kV == Variant::kHalfPipe || kV == Variant::kHalfPipeInPhase || kV == Variant::kHalfTogPipe) {
    float (&hg)[32] = *reinterpret_cast<float (*)[32]>(fg);
    float (&hu)[32] = *reinterpret_cast<float (*)[32]>(fu);
    mk::NoTurn free;
    auto launch = [&](float (&d)[64], int) {
      if constexpr (kV == Variant::kHalfPipeInPhase) xstage::kernel::bar_sync(Bar::kInPhase, 256);
      if constexpr (kV == Variant::kHalfTogPipe) {
        const uint8_t* bg = b + wg * 64 * 128;
        mk::issue_block(*reinterpret_cast<float(*)[32]>(d), a, bg, free);
        mk::issue_block(*reinterpret_cast<float(*)[32]>(d + 32), a, bg + kBBytes / 2, free);
      } else {
        mk::issue_block(d, a, b + wg * 128 * 128, free);
      }
    };
    auto retire = [&](float (&d)[64]) {
      mk::fence_regs(d);
#pragma unroll
      for (int i = 0; i < 32; ++i) {
        hg[i] += d[i] * (((i / 2) % 2) ? s1 : s0);
        hu[i] += d[32 + i] * (((i / 2) % 2) ? s1 : s0);
      }
    };
    if constexpr (kV == Variant::kHalfTogPipe)
      two_scratch_loop<2>(kblocks, launch, retire);
    else
      two_scratch_loop<1>(kblocks, launch, retire);
  } else
  for (int kb = 0; kb < kblocks; ++kb) {
    if constexpr (kV == Variant::kL1InPhase || kV == Variant::kHalfWideInPhase)
      xstage::kernel::bar_sync(Bar::kInPhase, 256);
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
    } else if constexpr (kV == Variant::kHalf || kV == Variant::kHalfTogether || kV == Variant::kHalfWide ||
                         kV == Variant::kHalfWideInPhase) {
      // fg[0, 32) / fu[0, 32) stand for the half tile's 32-register finals (the rest stays zero).
      float (&hg)[32] = *reinterpret_cast<float (*)[32]>(fg);
      float (&hu)[32] = *reinterpret_cast<float (*)[32]>(fu);
      float (&h0)[32] = *reinterpret_cast<float (*)[32]>(acc);
      const uint8_t* bg = b + wg * 64 * 128;  // gate rows [64 wg, +64); up rows kBBytes / 2 further
      if constexpr (kV == Variant::kHalf) {
        mk::mma_block(h0, a, bg);
        mk::promote(hg, h0, s0, s1);
        mk::mma_block(h0, a, bg + kBBytes / 2);
        mk::promote(hu, h0, s0, s1);
      } else if constexpr (kV == Variant::kHalfTogether) {
        float h1[32];
        mk::NoTurn free;
        mk::issue_block(h0, a, bg, free);
        mk::issue_block(h1, a, bg + kBBytes / 2, free);
        ptx::wgmma_wait<0>();
        mk::fence_regs(h0);
        mk::fence_regs(h1);
        mk::promote(hg, h0, s0, s1);
        mk::promote(hu, h1, s0, s1);
      } else {  // the warpgroup's 128 rows of B at 16 KB x wg (the data differ; the structure is the kernel's)
        mk::mma_block(acc, a, b + wg * 128 * 128);
#pragma unroll
        for (int i = 0; i < 32; ++i) {
          hg[i] += acc[i] * (((i / 2) % 2) ? s1 : s0);
          hu[i] += acc[32 + i] * (((i / 2) % 2) ? s1 : s0);
        }
      }
    } else {  // kL1, kL1InPhase, kL1Spin, kL1SpinSleep
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
  if (tid == 0) atomicAdd(const_cast<int*>(&consumers_done), 1);
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 64; ++i) s += fg[i] + fu[i];
  atomicAdd(&sums[blockIdx.x], s);
  if (tid == 0) cycles[blockIdx.x * 2 + wg] = t1 - t0;
}

// A pipeline variant's consumer warpgroup, done: its finals' sum into sums[CTA] (the run's finiteness check) and its
// cycles since t0.
template <int N>
__device__ __forceinline__ void record_consumer(const float (&a)[N], const float (&b)[N], unsigned long long t0,
                                                float* sums, unsigned long long* cycles, int wg, int tid) {
  const unsigned long long t1 = clock64();
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < N; ++i) sum += a[i] + b[i];
  atomicAdd(&sums[blockIdx.x], sum);
  if (tid == 0) cycles[blockIdx.x * 2 + wg] = t1 - t0;
}

constexpr int kPipeStages = 4, kStageBytes = 48 * 1024;

// The pipeline variants' shared memory past their kPipeStages stages: with row scales, [stage][128] fp32 A row scales,
// then the full barriers (one producer arrival and the stage's bytes) and the empty barriers (the 8 consumer warps),
// initialized by thread 0 and visible to every thread after the __syncthreads.
struct Pipe {
  float* sa;  // null without row scales
  uint64_t* full;
  uint64_t* empty;
};
__device__ __forceinline__ Pipe init_pipe(uint8_t* smem, bool row_scales, uint32_t producers = 1) {
  Pipe p;
  p.sa = row_scales ? reinterpret_cast<float*>(smem + kPipeStages * kStageBytes) : nullptr;
  p.full = reinterpret_cast<uint64_t*>(smem + kPipeStages * kStageBytes + (row_scales ? kPipeStages * 128 * 4 : 0));
  p.empty = p.full + kPipeStages;
  if (threadIdx.x == 0) {
    for (int i = 0; i < kPipeStages; ++i) {
      ptx::mbar_init(&p.full[i], producers);  // each producer thread's arrival with its bytes
      ptx::mbar_init(&p.empty[i], 8);       // the consumer warps
    }
    ptx::fence_mbar_init_release_cluster();
  }
  __syncthreads();
  return p;
}

// The rows' bytes of a source of 8192-byte rows seen as packed [row group][K block][block_bytes] (a group's K blocks
// contiguous, what a weight or token pack per tile would store): the offset of K block kb of the group that starts at
// row `row`, wrapped at `total` (the pre-packed rows of l1-bulkw-mix, l1-tmak-mix, l1-bulkaw-mix and their short forms).
__device__ __forceinline__ size_t packed_offset(int row, int kb, uint32_t block_bytes, size_t total) {
  return (size_t(row) * 8192 + size_t(kb) * block_bytes) % total;
}

__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   ptx::smem_addr(dst)),
               "l"(src), "r"(bytes), "r"(ptx::smem_addr(bar))
               : "memory");
}

// The consumer warpgroups of both pipeline variants: per K block wait for the stage, run the l1 (or l2) block on
// it (A at the stage's start, B kA bytes in, weight scales by __ldg, A row scales from row_scale(stage, row)),
// release it; then record the warpgroup's cycles.
// An m64n128 batch over one 128-deep block with A from registers (the RS form): af[s] is k step s's fragment.
__device__ __forceinline__ void rs_block(float (&acc)[64], const uint32_t (&af)[4][4], const uint8_t* b) {
  const uint64_t db = mk::desc(b, 0);
  mk::fence_regs(acc);
  ptx::wgmma_fence();  // the fragments' register writes (ldmatrix) before the tensor cores read them
#pragma unroll
  for (int k = 0; k < 4; ++k) ptx::WgmmaFp8<128>::rs(acc, af[k], ptx::desc_advance(db, k * 32), k > 0);
  ptx::wgmma_commit();
  ptx::wgmma_wait<0>();
  mk::fence_regs(acc);
}
// This thread's A fragments of a warpgroup's 64 rows x 128-deep block in the kernel's 128 B swizzled layout: one
// ldmatrix .x4 per 32-byte k step, lanes 8 j .. 8 j + 7 addressing quarter j (rows + 8 (j & 1), bytes + 16 (j >> 1)).
__device__ __forceinline__ void load_a_frags(uint32_t (&af)[4][4], const uint8_t* a_wg, int tid) {
  const int lane = tid % 32, j = lane / 8, row = 16 * (tid / 32) + lane % 8 + 8 * (j & 1);
  const uint32_t base = ptx::smem_addr(a_wg) + uint32_t(row) * 128;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const uint32_t chunk = uint32_t(2 * k + (j >> 1)) ^ uint32_t(row & 7);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(af[k][0]), "=r"(af[k][1]), "=r"(af[k][2]), "=r"(af[k][3])
                 : "r"(base + chunk * 16));
  }
}

// kRing (l1 only): the K blocks as ring_loop runs them (four m64n64 batches, two scratches in turn; a stage released
// once its last batch is done). kRs (l1 only): the l1 structure with A from registers, read from shared memory once
// per K block (ldmatrix) instead of once per batch.
template <bool kL1, bool kRing = false, bool kRs = false, class RowScale>
__device__ __forceinline__ void consume_stream(const uint8_t* smem, uint64_t* full, uint64_t* empty, uint32_t kA,
                                               uint32_t kB, int kblocks, const float* scales, int wg, int tid,
                                               RowScale&& row_scale, float* sums, unsigned long long* cycles) {
  const int r0 = 16 * (tid / 32) + (tid % 32) / 4;
  float acc[64], fg[64], fu[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) fg[i] = fu[i] = 0.f;
  xstage::kernel::PipeState<kPipeStages> ps;
  const unsigned long long t0 = clock64();
  if constexpr (kRing) {
    int cur = -1;
    ring_loop(
        fg, fu, kblocks,
        [&](int kb) {
          ptx::mbar_wait_acquire_cta(&full[ps.stage], ps.phase);
          const uint8_t* st = smem + ps.stage * kStageBytes;
          const float a0 = row_scale(ps.stage, wg * 64 + r0), a1 = row_scale(ps.stage, wg * 64 + r0 + 8);
          const float gs = __ldg(scales + (kb % 1024)), us = __ldg(scales + 1024 + (kb % 1024));
          cur = ps.stage;
          ps.advance();
          return RingBlock{st + wg * 64 * 128, st + kA, st + kA + kB / 2, {a0 * gs, a1 * gs}, {a0 * us, a1 * us}};
        },
        [&](int) {
          __syncwarp();
          if (tid % 32 == 0) ptx::mbar_arrive_release_cta(&empty[cur]);
        });
  } else if constexpr (kRs) {
    for (int kb = 0; kb < kblocks; ++kb) {
      ptx::mbar_wait_acquire_cta(&full[ps.stage], ps.phase);
      const uint8_t* st = smem + ps.stage * kStageBytes;
      const float a0 = row_scale(ps.stage, wg * 64 + r0), a1 = row_scale(ps.stage, wg * 64 + r0 + 8);
      const float gs = __ldg(scales + (kb % 1024)), us = __ldg(scales + 1024 + (kb % 1024));
      uint32_t af[4][4];
      load_a_frags(af, st + wg * 64 * 128, tid);
      rs_block(acc, af, st + kA);
      mk::promote(fg, acc, a0 * gs, a1 * gs);
      rs_block(acc, af, st + kA + kB / 2);
      __syncwarp();
      if (tid % 32 == 0) ptx::mbar_arrive_release_cta(&empty[ps.stage]);
      ps.advance();
      mk::promote(fu, acc, a0 * us, a1 * us);
    }
  } else
  for (int kb = 0; kb < kblocks; ++kb) {
    ptx::mbar_wait_acquire_cta(&full[ps.stage], ps.phase);
    const uint8_t* st = smem + ps.stage * kStageBytes;
    const uint8_t* a_wg = st + wg * 64 * 128;
    const uint8_t* b = st + kA;
    const float a0 = row_scale(ps.stage, wg * 64 + r0), a1 = row_scale(ps.stage, wg * 64 + r0 + 8);
    const float gs = __ldg(scales + (kb % 1024)), us = __ldg(scales + 1024 + (kb % 1024));
    mk::mma_block(acc, a_wg, b);
    mk::promote(fg, acc, a0 * gs, a1 * gs);
    if constexpr (kL1) mk::mma_block(acc, a_wg, b + kB / 2);
    __syncwarp();
    if (tid % 32 == 0) ptx::mbar_arrive_release_cta(&empty[ps.stage]);
    ps.advance();
    if constexpr (kL1) mk::promote(fu, acc, a0 * us, a1 * us);
  }
  record_consumer(fg, fu, t0, sums, cycles, wg, tid);
}

// The mainloop fed by a pipeline like the kernel's: one producer thread bulk-copies each K block's A (16 KB) and B
// (L1: 32 KB, L2: 16 KB) from `src` (cycling through src_bytes) into a 4-stage ring; both consumer warpgroups wait
// for the stage, run the l1 / l2 block on it with the weight scales of `scales` read by __ldg, and release it.
template <bool kL1>
__global__ void __launch_bounds__(C::kThreads, 1) pipe_kernel(int kblocks, const uint8_t* src, size_t src_bytes,
                                                              const float* scales, float* sums,
                                                              unsigned long long* cycles) {
  extern __shared__ __align__(1024) uint8_t smem[];
  const Pipe pipe = init_pipe(smem, false);
  uint64_t* full = pipe.full;
  uint64_t* empty = pipe.empty;
  const int warpgroup = ptx::warpgroup_idx_uniform(), tid = threadIdx.x % 128;
  constexpr uint32_t kA = 16 * 1024, kB = kL1 ? 32 * 1024 : 16 * 1024;
  if (warpgroup == 0) {
    ptx::setmaxnreg_dec<C::kProducerRegs>();
    if (tid != 0) return;
    xstage::kernel::PipeState<kPipeStages> ps;
    size_t off = (size_t(blockIdx.x) * 7919 * 1024) % src_bytes;
    for (int kb = 0; kb < kblocks; ++kb) {
      ptx::mbar_wait_acquire_cta(&empty[ps.stage], ps.phase ^ 1);
      ptx::mbar_arrive_expect_tx_release_cta(&full[ps.stage], kA + kB);
      uint8_t* st = smem + ps.stage * kStageBytes;
      for (uint32_t b = 0; b < kA + kB; b += 16 * 1024) {
        if (off + 16 * 1024 > src_bytes) off = 0;
        bulk_load(st + b, src + off, 16 * 1024, &full[ps.stage]);
        off += 16 * 1024;
      }
      ps.advance();
    }
    return;
  }
  ptx::setmaxnreg_inc<C::kConsumerRegs>();
  consume_stream<kL1>(smem, full, empty, kA, kB, kblocks, scales, warpgroup - 1, tid,
                      [](int, int row) { return 1.0f + 1e-3f * row; }, sums, cycles);
}

// l1-pipe with the kernel's TMA tensor loads (moe_kernel.cuh's tma_load_2d; maps as moe_layer.cpp makes them).
// kProducers 2 (l1-tma-2p, l1-tma-mix-2p): a second producer thread (warp 1) issues the weight boxes, warp 0's the A
// boxes and row scales; each waits for the free stage and arrives on its full barrier with its own bytes. Each
// producer thread's mean cycles per stage from the free stage to its last load issued go to g_issue[CTA][thread]
// (s44: the fused kernel's one producer thread takes 700-970 cycles per stage for its TMA loads).
constexpr int kIssueCtas = 1024;  // CTAs whose issue cycles are kept
__device__ unsigned long long g_issue[2 * kIssueCtas];
// kWLoad (how a stage's 32 KB of weights arrive): 0 two {128 B, 128 rows} boxes, 1 one {128 B, 256 rows} box (the
// fused kernel's merged load is one box too), 2 one 32 KB bulk copy of a pre-packed weight block (the source read as
// [row group][K block][32 KB], the same bytes from HBM; a layout a W8A8 weight pack would have: l1-bulkw-mix), 3 one
// {128 B, 256 rows} box of that layout seen as a [bytes / 128][128 B] matrix (l1-tmak-mix: 32 KB contiguous per box),
// 4 kWLoad 2 with A's two boxes as one 16 KB bulk copy of the mix region packed [row group][K block] (l1-bulkaw-mix),
// 5, 6 kWLoad 2's block as two 16 KB or four 8 KB bulk copies (l1-bulkw2-mix, l1-bulkw4-mix).
template <bool kRing, bool kRs, int kProducers = 1, int kWLoad = 0>
__global__ void __launch_bounds__(C::kThreads, 1) tma_kernel(const __grid_constant__ CUtensorMap map_x,
                                                             const __grid_constant__ CUtensorMap map_w,
                                                             const __grid_constant__ CUtensorMap map_s, int arows,
                                                             int brows, int bstep, int kblocks, const float* scales,
                                                             float* sums, unsigned long long* cycles,
                                                             const uint8_t* asrc, const uint8_t* wsrc) {
  extern __shared__ __align__(1024) uint8_t smem[];
  const Pipe pipe = init_pipe(smem, true, kProducers);
  float* sa = pipe.sa;  // [stage][128] row scales
  uint64_t* full = pipe.full;
  uint64_t* empty = pipe.empty;
  const int warpgroup = ptx::warpgroup_idx_uniform(), tid = threadIdx.x % 128;
  constexpr uint32_t kA = 16 * 1024, kB = 32 * 1024, kCols = 8192;
  if (warpgroup == 0) {
    ptx::setmaxnreg_dec<C::kProducerRegs>();
    const int who = tid == 0 ? 0 : tid == 32 && kProducers == 2 ? 1 : -1;  // 0: A (and alone, everything); 1: weights
    if (who < 0) return;
    xstage::kernel::PipeState<kPipeStages> ps;
    // arows and brows are multiples of 256: every box lies inside its matrix. The weight rows move on by bstep
    // (< brows) after every full sweep of the 8192 columns (bstep 0: the CTA re-reads its 256 rows)
    const int arow = (blockIdx.x * 128) % arows;
    int brow = (blockIdx.x * 256 + brows / 2) % brows;
    const bool do_a = who == 0, do_w = kProducers == 1 || who == 1;
    const uint32_t bytes = (do_a ? kA + 128 * sizeof(float) : 0) + (do_w ? kB : 0);
    unsigned long long issue = 0;
    for (int kb = 0; kb < kblocks; ++kb) {
      ptx::mbar_wait_acquire_cta(&empty[ps.stage], ps.phase ^ 1);
      const unsigned long long c0 = clock64();
      ptx::mbar_arrive_expect_tx_release_cta(&full[ps.stage], bytes);
      uint8_t* st = smem + ps.stage * kStageBytes;
      const int k0 = (kb * 128) % kCols;
      if (k0 == 0 && kb > 0) brow = brow + bstep >= brows ? brow + bstep - brows : brow + bstep;
      if (do_a) {
        if constexpr (kWLoad == 4) {  // A's 128 rows as one 16 KB block of A's rows packed [row group][K block]
          bulk_load(st, asrc + packed_offset(arow, k0 / 128, kA, size_t(arows) * kCols), kA, &full[ps.stage]);
        } else {
          mk::tma_load_2d(&map_x, &full[ps.stage], st, k0, arow);
          mk::tma_load_2d(&map_x, &full[ps.stage], st + 64 * 128, k0, (arow + 64) % arows);
        }
        mk::tma_load_2d(&map_s, &full[ps.stage], sa + ps.stage * 128, 0, kb % 16);
      }
      if (do_w) {
        if constexpr (kWLoad == 0) {
          mk::tma_load_2d(&map_w, &full[ps.stage], st + kA, k0, brow);
          mk::tma_load_2d(&map_w, &full[ps.stage], st + kA + kB / 2, k0, (brow + 128) % brows);
        } else if constexpr (kWLoad == 1) {
          mk::tma_load_2d(&map_w, &full[ps.stage], st + kA, k0, brow < brows - 128 ? brow : brows - 256);
        } else {  // brow is a multiple of 128 and brows of 256: a 32 KB block never straddles the end
          const size_t off = packed_offset(brow, k0 / 128, kB, size_t(brows) * kCols);
          if constexpr (kWLoad == 2 || kWLoad == 4)
            bulk_load(st + kA, wsrc + off, kB, &full[ps.stage]);
          else if constexpr (kWLoad == 5 || kWLoad == 6) {  // the same block in 2 or 4 contiguous pieces
            constexpr uint32_t kPiece = kWLoad == 5 ? kB / 2 : kB / 4;
#pragma unroll
            for (uint32_t i = 0; i < kB / kPiece; ++i)
              bulk_load(st + kA + i * kPiece, wsrc + off + i * kPiece, kPiece, &full[ps.stage]);
          } else
            mk::tma_load_2d(&map_w, &full[ps.stage], st + kA, 0, int(off / 128));
        }
      }
      issue += clock64() - c0;
      ps.advance();
    }
    if (blockIdx.x < kIssueCtas) g_issue[2 * blockIdx.x + who] = issue / (unsigned long long)kblocks;
    return;
  }
  ptx::setmaxnreg_inc<C::kConsumerRegs>();
  consume_stream<true, kRing, kRs>(smem, full, empty, kA, kB, kblocks, scales, warpgroup - 1, tid,
                              [sa](int stage, int row) { return sa[stage * 128 + row]; }, sums, cycles);
}

// l1-w4, l1-w4-mix (and -nocvt): the W4A8 form of l1-tma / l1-tma-mix with the weights streamed as int4 and expanded in
// shared memory per stage, against the kernel's way (the epilogue warps write an e4m3 copy of every local expert's
// weights to global memory, which the weight maps then read: 2.5 bytes of DRAM traffic per weight instead of 0.5).
// The producer thread loads A's two boxes, A's row scales and the stage's 256 per-column weight scales into a 3-stage
// ring of 48 KB (the kernel's W4A8 depth). The three epilogue warps (96 threads) own a 4-slot ring of int4 boxes
// ({64 B, 256 rows} = 16 KB, no swizzle): per K block they wait for the raw slot and for the stage to be free, write
// its 256 x 128 e4m3 codes into the stage's B half in the 128 B swizzled layout the kernel's weight maps give
// (int4x32_to_e4m3, exact), order those writes before the tensor cores' reads (fence.proxy.async) and arrive on the
// stage's full barrier; after a named barrier of the 96, thread 0 of warp 1 loads the slot's next box. The consumers
// are l1-tma's with W4A8's per-column promotion (promote_cols). kConvert false (-nocvt): the same traffic and
// barriers, no expansion (the tensor cores read whatever the stage holds), to separate the converters' cost.
// The two's complement int4 form's expansion, which the fused kernel used until session 46 (it now takes the packed
// sign-magnitude form, int4sm_x32_to_e4m3), kept for the l1-w4-mix and l1-w4c-mix rows.
// Eight int4 values (value i in nibble i of w, two's complement) -> eight e4m3 codes, values 0-3 in lo and 4-7 in hi.
// Exact: every integer in [-8, 7] is an e4m3 value. Two 8-entry byte tables indexed by the low 3 bits (prmt), one for
// the non-negative nibbles 0..7 and one for 8..15 (= -8..-1), then a third prmt picks per byte by bit 3. prmt reads
// only the low 16 bits of its selector, so one mask and one pick computation serve both halves of the word (the
// expansion runs on the integer pipes, which bound it: docs/MOE-NOTEBOOK.md "Session 45").
__device__ __forceinline__ void int4x8_to_e4m3x8(uint32_t w, uint32_t& lo, uint32_t& hi) {
  // e4m3 of 0..7: 00 38 40 44 48 4A 4C 4E; of -8..-1: D0 CE CC CA C8 C4 C0 B8
  constexpr uint32_t kPosLo = 0x44403800u, kPosHi = 0x4E4C4A48u, kNegLo = 0xCACCCED0u, kNegHi = 0xB8C0C4C8u;
  const uint32_t idx = w & 0x77777777u;
  const uint32_t pick = ((w >> 1) & 0x44444444u) | 0x32103210u;  // byte i from pos (i) or neg (4 + i)
  const uint32_t idx_hi = idx >> 16, pick_hi = pick >> 16;
  uint32_t pos, neg;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(pos) : "r"(kPosLo), "r"(kPosHi), "r"(idx));
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(neg) : "r"(kNegLo), "r"(kNegHi), "r"(idx));
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(lo) : "r"(pos), "r"(neg), "r"(pick));
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(pos) : "r"(kPosLo), "r"(kPosHi), "r"(idx_hi));
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(neg) : "r"(kNegLo), "r"(kNegHi), "r"(idx_hi));
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(hi) : "r"(pos), "r"(neg), "r"(pick_hi));
}
// 16 raw bytes (32 int4, k ascending) -> 32 e4m3 codes (two 16-byte chunks).
__device__ __forceinline__ void int4x32_to_e4m3(const uint4 raw, uint4& lo, uint4& hi) {
  int4x8_to_e4m3x8(raw.x, lo.x, lo.y);
  int4x8_to_e4m3x8(raw.y, lo.z, lo.w);
  int4x8_to_e4m3x8(raw.z, hi.x, hi.y);
  int4x8_to_e4m3x8(raw.w, hi.z, hi.w);
}
// The same from the packed sign-magnitude form (the fused kernel's int4sm_x8_to_e4m3x8, four words).
__device__ __forceinline__ void int4sm_x32_to_e4m3(const uint4 raw, uint4& lo, uint4& hi) {
  mk::int4sm_x8_to_e4m3x8(raw.x, lo.x, lo.y);
  mk::int4sm_x8_to_e4m3x8(raw.y, lo.z, lo.w);
  mk::int4sm_x8_to_e4m3x8(raw.z, hi.x, hi.y);
  mk::int4sm_x8_to_e4m3x8(raw.w, hi.z, hi.w);
}
// Expands the int4 box at src (256 rows x 64 B) into dst (256 rows x 128 B e4m3, 128 B swizzle): chunks c, c + n, ...
// kSm: the packed sign-magnitude form (int4sm_x32_to_e4m3), else two's complement (int4x32_to_e4m3).
template <bool kSm = false>
__device__ __forceinline__ void expand_box(const uint8_t* src, uint8_t* dst, int c, int n) {
  for (int i = c; i < 256 * 4; i += n) {
    const int row = i >> 2, q = i & 3;
    uint4 lo, hi;
    const uint4 raw = *reinterpret_cast<const uint4*>(src + row * 64 + q * 16);
    if constexpr (kSm)
      int4sm_x32_to_e4m3(raw, lo, hi);
    else
      int4x32_to_e4m3(raw, lo, hi);
    *reinterpret_cast<uint4*>(dst + row * 128 + (((2 * q) ^ (row & 7)) * 16)) = lo;
    *reinterpret_cast<uint4*>(dst + row * 128 + (((2 * q + 1) ^ (row & 7)) * 16)) = hi;
  }
  ptx::fence_proxy_async_shared_cta();  // this thread's codes before the tensor cores read them
}
// The N-split form (l1-w4cn-mix): warpgroup wg's 128 weight rows, gate rows [64 wg, +64) and up rows [128 + 64 wg, +64)
// of the int4 box, into its own 16 KB e4m3 operand at dst + 16 KB wg (gate rows first): chunks c + 128 j of 512.
// (s46 call 6 ran it as a rolled loop over i = c, c + n, ...: 0.445; the four chunks are now loaded together.)
// kDiag (diagnostic rows, wrong codes by design): 1 = no fence.proxy.async, 2 = no stores (the codes folded into a
// register that is stored only if it takes a value it never does).
template <bool kSm, int kDiag = 0>
__device__ __forceinline__ void expand_rows(const uint8_t* src, uint8_t* dst, int c, int wg) {
  uint32_t sink = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int i = c + 128 * j;
    const int row = i >> 2, q = i & 3, srow = row < 64 ? 64 * wg + row : 128 + 64 * wg + (row - 64);
    uint4 lo, hi;
    const uint4 raw = *reinterpret_cast<const uint4*>(src + srow * 64 + q * 16);
    if constexpr (kSm)
      int4sm_x32_to_e4m3(raw, lo, hi);
    else
      int4x32_to_e4m3(raw, lo, hi);
    uint8_t* d = dst + wg * 16 * 1024;
    if constexpr (kDiag == 2) {
      sink ^= lo.x ^ lo.y ^ lo.z ^ lo.w ^ hi.x ^ hi.y ^ hi.z ^ hi.w;
    } else {
      *reinterpret_cast<uint4*>(d + row * 128 + (((2 * q) ^ (row & 7)) * 16)) = lo;
      *reinterpret_cast<uint4*>(d + row * 128 + (((2 * q + 1) ^ (row & 7)) * 16)) = hi;
    }
  }
  if constexpr (kDiag == 2)
    if (sink == 0x9E3779B9u) dst[c] = 1;
  if constexpr (kDiag == 0) ptx::fence_proxy_async_shared_cta();  // this thread's codes before the tensor cores read them
}
constexpr int kW4Stages = 3, kW4Raw = 4, kW4RawBytes = 16 * 1024, kW4Converters = 96;
constexpr size_t kW4Smem = size_t(kW4Stages) * kStageBytes + size_t(kW4Raw) * kW4RawBytes +
                           kW4Stages * (128 + 256) * sizeof(float) + (2 * kW4Stages + kW4Raw) * sizeof(uint64_t);
template <bool kConvert, bool kSm = false>
__global__ void __launch_bounds__(C::kThreads, 1) w4_kernel(const __grid_constant__ CUtensorMap map_x,
                                                            const __grid_constant__ CUtensorMap map_w4,
                                                            const __grid_constant__ CUtensorMap map_s,
                                                            const __grid_constant__ CUtensorMap map_c, int arows,
                                                            int brows, int bstep, int kblocks, float* sums,
                                                            unsigned long long* cycles) {
  extern __shared__ __align__(1024) uint8_t smem[];
  uint8_t* raw = smem + kW4Stages * kStageBytes;
  float* sa = reinterpret_cast<float*>(raw + kW4Raw * kW4RawBytes);  // [stage][128] A row scales
  float* sc = sa + kW4Stages * 128;                                   // [stage][256] weight column scales
  uint64_t* full = reinterpret_cast<uint64_t*>(sc + kW4Stages * 256);
  uint64_t* empty = full + kW4Stages;
  uint64_t* raw_full = empty + kW4Stages;
  if (threadIdx.x == 0) {
    for (int i = 0; i < kW4Stages; ++i) {
      ptx::mbar_init(&full[i], 1 + kW4Converters / 32);  // the producer's bytes and each converter warp
      ptx::mbar_init(&empty[i], 8);                     // the consumer warps
    }
    for (int i = 0; i < kW4Raw; ++i) ptx::mbar_init(&raw_full[i], 1);
    ptx::fence_mbar_init_release_cluster();
  }
  __syncthreads();
  const int warpgroup = ptx::warpgroup_idx_uniform(), tid = threadIdx.x % 128;
  constexpr uint32_t kA = 16 * 1024, kB = 32 * 1024, kCols = 8192;
  if (warpgroup == 0) {
    ptx::setmaxnreg_dec<C::kProducerRegs>();
    if (tid == 0) {  // A, its row scales and the weight column scales
      const int arow = (blockIdx.x * 128) % arows;
      xstage::kernel::PipeState<kW4Stages> ps;
      for (int kb = 0; kb < kblocks; ++kb) {
        ptx::mbar_wait_acquire_cta(&empty[ps.stage], ps.phase ^ 1);
        ptx::mbar_arrive_expect_tx_release_cta(&full[ps.stage], kA + (128 + 256) * sizeof(float));
        uint8_t* st = smem + ps.stage * kStageBytes;
        const int k0 = (kb * 128) % kCols;
        mk::tma_load_2d(&map_x, &full[ps.stage], st, k0, arow);
        mk::tma_load_2d(&map_x, &full[ps.stage], st + 64 * 128, k0, (arow + 64) % arows);
        mk::tma_load_2d(&map_s, &full[ps.stage], sa + ps.stage * 128, 0, kb % 16);
        mk::tma_load_2d(&map_c, &full[ps.stage], sc + ps.stage * 256, 0, kb % 8);
        ps.advance();
      }
      return;
    }
    if (tid < 32) return;
    const int ct = tid - 32, lane = tid % 32;
    // K block kb's int4 box: bytes [64 (k0 / 128), +64) of 256 weight rows that move on by bstep after every sweep
    // of the 8192 columns (as l1-tma's weights), so the boxes loaded ahead know their rows.
    const int brow0 = (blockIdx.x * 256 + brows / 2) % brows;
    auto load_raw = [&](int kb, int slot) {
      const int brow = int((int64_t(brow0) + int64_t(kb / (kCols / 128)) * bstep) % brows);
      ptx::mbar_arrive_expect_tx_release_cta(&raw_full[slot], kW4RawBytes);
      mk::tma_load_2d(&map_w4, &raw_full[slot], raw + slot * kW4RawBytes, ((kb * 128) % kCols) / 2, brow);
    };
    if (ct == 0)
      for (int kb = 0; kb < kW4Raw && kb < kblocks; ++kb) load_raw(kb, kb);
    xstage::kernel::PipeState<kW4Stages> ps;
    for (int kb = 0; kb < kblocks; ++kb) {
      const int slot = kb % kW4Raw;
      ptx::mbar_wait_acquire_cta(&raw_full[slot], uint32_t(kb / kW4Raw) & 1u);
      ptx::mbar_wait_acquire_cta(&empty[ps.stage], ps.phase ^ 1);
      if constexpr (kConvert) expand_box<kSm>(raw + slot * kW4RawBytes, smem + ps.stage * kStageBytes + kA, ct, kW4Converters);
      __syncwarp();
      if (lane == 0) ptx::mbar_arrive_release_cta(&full[ps.stage]);
      ps.advance();
      ptx::named_barrier_sync(1, kW4Converters);  // every converter is done reading the slot
      if (ct == 0 && kb + kW4Raw < kblocks) load_raw(kb + kW4Raw, slot);
    }
    return;
  }
  ptx::setmaxnreg_inc<C::kConsumerRegs>();
  const int wg = warpgroup - 1, r0 = 16 * (tid / 32) + (tid % 32) / 4;
  float acc[64], fg[64], fu[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) fg[i] = fu[i] = 0.f;
  xstage::kernel::PipeState<kW4Stages> ps;
  const unsigned long long t0 = clock64();
  for (int kb = 0; kb < kblocks; ++kb) {
    ptx::mbar_wait_acquire_cta(&full[ps.stage], ps.phase);
    const uint8_t* st = smem + ps.stage * kStageBytes;
    const uint8_t* a_wg = st + wg * 64 * 128;
    const float a0 = sa[ps.stage * 128 + wg * 64 + r0], a1 = sa[ps.stage * 128 + wg * 64 + r0 + 8];
    mk::mma_block(acc, a_wg, st + kA);
    mk::promote_cols(fg, acc, a0, a1, sc + ps.stage * 256, tid);
    mk::mma_block(acc, a_wg, st + kA + kB / 2);
    mk::promote_cols(fu, acc, a0, a1, sc + ps.stage * 256 + 128, tid);  // reads the stage's scales: release after it
    __syncwarp();
    if (tid % 32 == 0) ptx::mbar_arrive_release_cta(&empty[ps.stage]);
    ps.advance();
  }
  record_consumer(fg, fu, t0, sums, cycles, wg, tid);
}

// The rows whose consumers expand (or whose weights are the A operand): shared memory past their kStages stages of
// kStageB bytes ([stage][128] A row or token scales, [stage][256] weight scales, full and empty barriers), and their
// producer thread: per K block A's two 64-row boxes at the stage's start, the stage's int4 boxes (load_w(stage,
// barrier, k0, brow): w_bytes in all; the 256 weight rows at brow move on by bstep after every 8192-column sweep, as
// l1-tma-mix's), the scales.
template <int kStages>
struct W4Pipe {
  float* sa;
  float* sc;
  uint64_t* full;
  uint64_t* empty;
};
template <int kStages, uint32_t kStageB>
constexpr size_t w4_pipe_smem() {
  return size_t(kStages) * kStageB + kStages * (128 + 256) * sizeof(float) + 2 * kStages * sizeof(uint64_t);
}
template <int kStages, uint32_t kStageB>
__device__ __forceinline__ W4Pipe<kStages> w4_pipe_init(uint8_t* smem) {
  W4Pipe<kStages> m;
  m.sa = reinterpret_cast<float*>(smem + kStages * kStageB);
  m.sc = m.sa + kStages * 128;
  m.full = reinterpret_cast<uint64_t*>(m.sc + kStages * 256);
  m.empty = m.full + kStages;
  if (threadIdx.x == 0) {
    for (int i = 0; i < kStages; ++i) {
      ptx::mbar_init(&m.full[i], 1);
      ptx::mbar_init(&m.empty[i], 8);  // the consumer warps
    }
    ptx::fence_mbar_init_release_cluster();
  }
  __syncthreads();
  return m;
}
template <int kStages, uint32_t kStageB, class LoadW>
__device__ __forceinline__ void w4_produce(const W4Pipe<kStages>& m, uint8_t* smem, const CUtensorMap* map_x,
                                           const CUtensorMap* map_s, const CUtensorMap* map_c, int arows, int brows,
                                           int bstep, int kblocks, uint32_t w_bytes, LoadW&& load_w) {
  constexpr int kCols = 8192;
  const int arow = (blockIdx.x * 128) % arows;
  int brow = (blockIdx.x * 256 + brows / 2) % brows;
  xstage::kernel::PipeState<kStages> ps;
  for (int kb = 0; kb < kblocks; ++kb) {
    ptx::mbar_wait_acquire_cta(&m.empty[ps.stage], ps.phase ^ 1);
    ptx::mbar_arrive_expect_tx_release_cta(&m.full[ps.stage], 16 * 1024 + w_bytes + (128 + 256) * sizeof(float));
    uint8_t* st = smem + ps.stage * kStageB;
    const int k0 = (kb * 128) % kCols;
    if (k0 == 0 && kb > 0) brow = brow + bstep >= brows ? brow + bstep - brows : brow + bstep;
    mk::tma_load_2d(map_x, &m.full[ps.stage], st, k0, arow);
    mk::tma_load_2d(map_x, &m.full[ps.stage], st + 64 * 128, k0, (arow + 64) % arows);
    load_w(st, &m.full[ps.stage], k0, brow);
    mk::tma_load_2d(map_s, &m.full[ps.stage], m.sa + ps.stage * 128, 0, kb % 16);
    mk::tma_load_2d(map_c, &m.full[ps.stage], m.sc + ps.stage * 256, 0, kb % 8);
    ps.advance();
  }
}

// The N-split consumers (l1-w4cn-mix, l1-w4ci-mix): each warpgroup takes all 128 rows of A (two m64n128 batches)
// against its own half of the N tile (64 gate + 64 up columns, one 128-row operand at stage + 16 KB (1 + wg)), expands
// only that half (expand(stage base), block kb + 1's while block kb's first batch runs) and syncs only its own 128
// threads, so the warpgroups are never made to meet.
template <int kStages, uint32_t kStageB, class Expand>
__device__ __forceinline__ void nsplit_consume(uint8_t* smem, const W4Pipe<kStages>& m, int kblocks, int wg, int tid,
                                               float* sums, unsigned long long* cycles, Expand&& expand) {
  const int r0 = 16 * (tid / 32) + (tid % 32) / 4;
  float acc[64], fg[64], fu[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) fg[i] = fu[i] = 0.f;
  xstage::kernel::PipeState<kStages> ps;
  mk::NoTurn free;
  const unsigned long long t0 = clock64();
  ptx::mbar_wait_acquire_cta(&m.full[0], 0);
  expand(smem);
  ptx::named_barrier_sync(2 + wg, 128);
  for (int kb = 0; kb < kblocks; ++kb) {
    const uint8_t* st = smem + ps.stage * kStageB;
    const uint8_t* b_wg = st + (1 + wg) * 16 * 1024;
    const int cur = ps.stage;
    const float* sa = m.sa + cur * 128;
    const float a0 = sa[r0], a1 = sa[r0 + 8], a2 = sa[64 + r0], a3 = sa[64 + r0 + 8];
    mk::issue_block(acc, st, b_wg, free);  // A rows [0, 64)
    ps.advance();
    if (kb + 1 < kblocks) {  // block kb + 1's half while the first batch runs
      ptx::mbar_wait_acquire_cta(&m.full[ps.stage], ps.phase);
      expand(smem + ps.stage * kStageB);
    }
    ptx::wgmma_wait<0>();
    mk::fence_regs(acc);
    mk::promote_cols(fg, acc, a0, a1, m.sc + cur * 256 + 128 * wg, tid);
    mk::mma_block(acc, st + 64 * 128, b_wg);  // A rows [64, 128)
    mk::promote_cols(fu, acc, a2, a3, m.sc + cur * 256 + 128 * wg, tid);  // reads the stage's scales: release after it
    __syncwarp();
    if (tid % 32 == 0) ptx::mbar_arrive_release_cta(&m.empty[cur]);
    ptx::named_barrier_sync(2 + wg, 128);  // block kb + 1's half expanded by this warpgroup
  }
  record_consumer(fg, fu, t0, sums, cycles, wg, tid);
}

// l1-w4c-mix: the W4A8 stage expanded by the two consumer warpgroups themselves (256 threads; session 45 also ran the
// three epilogue warps beside them, 352 threads: 0.32 against 0.33, not kept). A stage holds A (16 KB), the e4m3 weights
// (32 KB) and their int4 box (16 KB): 64 KB, 3 stages. The producer thread loads A, its row scales, the column scales
// and the int4 box onto the stage's full barrier. Block kb + 1 is expanded while block kb's gate batch runs on the
// tensor cores: a consumer warp issues the gate batch, waits for stage kb + 1, expands its share of the box into
// the stage's e4m3 half, then waits for the batch, promotes, runs the up batch and releases stage kb; a named barrier
// of the 256 (after each one's fence.proxy.async) orders the expansion before block kb + 1's batches.
constexpr int kW4cStages = 3, kW4cConverters = 256;
constexpr uint32_t kW4cStageBytes = 64 * 1024;
constexpr size_t kW4cSmem = w4_pipe_smem<kW4cStages, kW4cStageBytes>();
template <bool kSm = false, bool kNSplit = false, bool kConvert = true, int kDiag = 0>
__global__ void __launch_bounds__(C::kThreads, 1) w4c_kernel(const __grid_constant__ CUtensorMap map_x,
                                                             const __grid_constant__ CUtensorMap map_w4,
                                                             const __grid_constant__ CUtensorMap map_s,
                                                             const __grid_constant__ CUtensorMap map_c, int arows,
                                                             int brows, int bstep, int kblocks, float* sums,
                                                             unsigned long long* cycles) {
  extern __shared__ __align__(1024) uint8_t smem[];
  const W4Pipe<kW4cStages> m = w4_pipe_init<kW4cStages, kW4cStageBytes>(smem);
  const float *sa = m.sa, *sc = m.sc;
  uint64_t *full = m.full, *empty = m.empty;
  const int warpgroup = ptx::warpgroup_idx_uniform(), tid = threadIdx.x % 128;
  constexpr uint32_t kA = 16 * 1024, kB = 32 * 1024, kRaw = kA + kB;
  auto stage_at = [&](int s) { return smem + s * kW4cStageBytes; };
  if (warpgroup == 0) {
    ptx::setmaxnreg_dec<C::kProducerRegs>();
    if (tid == 0)
      w4_produce<kW4cStages, kW4cStageBytes>(m, smem, &map_x, &map_s, &map_c, arows, brows, bstep, kblocks, 16 * 1024,
                                             [&](uint8_t* st, uint64_t* bar, int k0, int brow) {
                                               mk::tma_load_2d(&map_w4, bar, st + kRaw, k0 / 2, brow);
                                             });
    return;
  }
  ptx::setmaxnreg_inc<C::kConsumerRegs>();
  const int wg = warpgroup - 1, r0 = 16 * (tid / 32) + (tid % 32) / 4, c = wg * 128 + tid;
  if constexpr (kNSplit) {
    nsplit_consume<kW4cStages, kW4cStageBytes>(smem, m, kblocks, wg, tid, sums, cycles, [&](uint8_t* st) {
      if constexpr (kConvert) expand_rows<kSm, kDiag>(st + kRaw, st + kA, tid, wg);
    });
  } else {
  float acc[64], fg[64], fu[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) fg[i] = fu[i] = 0.f;
  xstage::kernel::PipeState<kW4cStages> ps;
  mk::NoTurn free;
  const unsigned long long t0 = clock64();
  ptx::mbar_wait_acquire_cta(&full[0], 0);
  expand_box<kSm>(stage_at(0) + kRaw, stage_at(0) + kA, c, kW4cConverters);
  ptx::named_barrier_sync(2, kW4cConverters);
  for (int kb = 0; kb < kblocks; ++kb) {
    const uint8_t* st = stage_at(ps.stage);
    const uint8_t* a_wg = st + wg * 64 * 128;
    const int cur = ps.stage;
    const float a0 = sa[cur * 128 + wg * 64 + r0], a1 = sa[cur * 128 + wg * 64 + r0 + 8];
    mk::issue_block(acc, a_wg, st + kA, free);
    ps.advance();
    if (kb + 1 < kblocks) {  // block kb + 1's weights while the gate batch runs
      ptx::mbar_wait_acquire_cta(&full[ps.stage], ps.phase);
      expand_box<kSm>(stage_at(ps.stage) + kRaw, stage_at(ps.stage) + kA, c, kW4cConverters);
    }
    ptx::wgmma_wait<0>();
    mk::fence_regs(acc);
    mk::promote_cols(fg, acc, a0, a1, sc + cur * 256, tid);
    mk::mma_block(acc, a_wg, st + kA + kB / 2);
    mk::promote_cols(fu, acc, a0, a1, sc + cur * 256 + 128, tid);  // reads the stage's scales: release after it
    __syncwarp();
    if (tid % 32 == 0) ptx::mbar_arrive_release_cta(&empty[cur]);
    ptx::named_barrier_sync(2, kW4cConverters);  // block kb + 1 expanded by every converter
  }
  record_consumer(fg, fu, t0, sums, cycles, wg, tid);
  }
}

// l1-w4ci-mix: the W4A8 stage expanded in place, so that W4A8 keeps W8A8's 4 stages of 48 KB. Split over N as
// l1-w4cn-mix: warpgroup wg's 64 gate + 64 up weight rows arrive as two int4 boxes ({64 B, 64 rows}, 4 KB each) in the
// upper half of its own 16 KB e4m3 operand, which the expansion then fills: every thread of the warpgroup first loads
// its four 16-byte chunks into registers, a named barrier of the 128 lets the stores overwrite the int4 bytes, and a
// second one (after each thread's fence.proxy.async) orders the codes before the warpgroup's batches. Block kb + 1 is
// expanded while block kb's first batch runs, as in l1-w4cn-mix.
constexpr int kW4iStages = 4;
constexpr uint32_t kW4iStageBytes = 48 * 1024;
constexpr size_t kW4iSmem = w4_pipe_smem<kW4iStages, kW4iStageBytes>();
template <bool kSm>
__device__ __forceinline__ void expand_in_place(uint8_t* b_wg, int tid, int wg) {
  uint4 raw[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) raw[j] = *reinterpret_cast<const uint4*>(b_wg + 8 * 1024 + (tid + 128 * j) * 16);
  ptx::named_barrier_sync(2 + wg, 128);  // every int4 chunk of the warpgroup read: the codes may overwrite them
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int i = tid + 128 * j, row = i >> 2, q = i & 3;  // int4 row `row` (64 B) -> e4m3 row `row` (128 B)
    uint4 lo, hi;
    if constexpr (kSm)
      int4sm_x32_to_e4m3(raw[j], lo, hi);
    else
      int4x32_to_e4m3(raw[j], lo, hi);
    *reinterpret_cast<uint4*>(b_wg + row * 128 + (((2 * q) ^ (row & 7)) * 16)) = lo;
    *reinterpret_cast<uint4*>(b_wg + row * 128 + (((2 * q + 1) ^ (row & 7)) * 16)) = hi;
  }
  ptx::fence_proxy_async_shared_cta();
}
__global__ void __launch_bounds__(C::kThreads, 1) w4ci_kernel(const __grid_constant__ CUtensorMap map_x,
                                                              const __grid_constant__ CUtensorMap map_w4,
                                                              const __grid_constant__ CUtensorMap map_s,
                                                              const __grid_constant__ CUtensorMap map_c, int arows,
                                                              int brows, int bstep, int kblocks, float* sums,
                                                              unsigned long long* cycles) {
  extern __shared__ __align__(1024) uint8_t smem[];
  const W4Pipe<kW4iStages> m = w4_pipe_init<kW4iStages, kW4iStageBytes>(smem);
  const int warpgroup = ptx::warpgroup_idx_uniform(), tid = threadIdx.x % 128;
  constexpr uint32_t kA = 16 * 1024;
  if (warpgroup == 0) {
    ptx::setmaxnreg_dec<C::kProducerRegs>();
    if (tid == 0)
      w4_produce<kW4iStages, kW4iStageBytes>(
          m, smem, &map_x, &map_s, &map_c, arows, brows, bstep, kblocks, 16 * 1024,
          [&](uint8_t* st, uint64_t* bar, int k0, int brow) {
            for (int w = 0; w < 2; ++w) {  // warpgroup w's gate rows [64 w, +64) and up rows [128 + 64 w, +64)
              uint8_t* dst = st + kA + w * 16 * 1024 + 8 * 1024;
              mk::tma_load_2d(&map_w4, bar, dst, k0 / 2, (brow + 64 * w) % brows);
              mk::tma_load_2d(&map_w4, bar, dst + 4 * 1024, k0 / 2, (brow + 128 + 64 * w) % brows);
            }
          });
    return;
  }
  ptx::setmaxnreg_inc<C::kConsumerRegs>();
  const int wg = warpgroup - 1;
  nsplit_consume<kW4iStages, kW4iStageBytes>(smem, m, kblocks, wg, tid, sums, cycles, [&](uint8_t* st) {
    expand_in_place<true>(st + kA + wg * 16 * 1024, tid, wg);
  });
}

// l1-w4rs-mix: the W4A8 tile with the roles of the operands swapped, so that the int4 weights are expanded in
// registers and never stored: C^T = W X^T, the weights the A operand from registers (wgmma's RS form: m64 weight rows
// per batch), the tokens the B operand from shared memory (the 128-token box as today's A box, n128). A stage holds
// the token box (16 KB) and 256 weight rows of int4 (16 KB, as laid out for the registers: per warpgroup and batch a
// 4 KB block from which each thread reads its 32 bytes by two 16-byte loads, conflict-free; a kernel would have
// pack_int4_weights lay the weights out so, as the fused kernel's W4A8 now does, s47): 4 stages of 32 KB. Per K block each warpgroup runs two batches (its 64
// gate and its 64 up rows), each: two loads, eight mask-and-rotate expansions into the four k steps' fragments, four
// RS wgmmas, wait, promote (weight-row scales x token scales). No barrier between the warpgroups, no shared-memory
// stores. (The values are the probe's filler bytes; the fragments' k order is what the layout would have to give.)
constexpr int kW4rStages = 4;
constexpr uint32_t kW4rStageBytes = 32 * 1024;
constexpr size_t kW4rSmem = w4_pipe_smem<kW4rStages, kW4rStageBytes>();
__global__ void __launch_bounds__(C::kThreads, 1) w4rs_kernel(const __grid_constant__ CUtensorMap map_x,
                                                              const __grid_constant__ CUtensorMap map_w4,
                                                              const __grid_constant__ CUtensorMap map_s,
                                                              const __grid_constant__ CUtensorMap map_c, int arows,
                                                              int brows, int bstep, int kblocks, float* sums,
                                                              unsigned long long* cycles) {
  extern __shared__ __align__(1024) uint8_t smem[];
  const W4Pipe<kW4rStages> m = w4_pipe_init<kW4rStages, kW4rStageBytes>(smem);
  const float *sa = m.sa, *sc = m.sc;  // [stage][128] token scales, [stage][256] weight-row scales
  uint64_t *full = m.full, *empty = m.empty;
  const int warpgroup = ptx::warpgroup_idx_uniform(), tid = threadIdx.x % 128;
  constexpr uint32_t kX = 16 * 1024;
  auto stage_at = [&](int s) { return smem + s * kW4rStageBytes; };
  if (warpgroup == 0) {
    ptx::setmaxnreg_dec<C::kProducerRegs>();
    if (tid == 0)
      w4_produce<kW4rStages, kW4rStageBytes>(m, smem, &map_x, &map_s, &map_c, arows, brows, bstep, kblocks, 16 * 1024,
                                             [&](uint8_t* st, uint64_t* bar, int k0, int brow) {
                                               mk::tma_load_2d(&map_w4, bar, st + kX, k0 / 2, brow);
                                             });
    return;
  }
  ptx::setmaxnreg_inc<C::kConsumerRegs>();
  const int wg = warpgroup - 1, r0 = 16 * (tid / 32) + (tid % 32) / 4;
  float acc[64], fg[64], fu[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) fg[i] = fu[i] = 0.f;
  xstage::kernel::PipeState<kW4rStages> ps;
  const unsigned long long t0 = clock64();
  for (int kb = 0; kb < kblocks; ++kb) {
    ptx::mbar_wait_acquire_cta(&full[ps.stage], ps.phase);
    const uint8_t* st = stage_at(ps.stage);
    const float* ws = sc + ps.stage * 256 + 128 * wg;  // this warpgroup's gate rows, then its up rows
    uint32_t af[4][4];
    mk::int4_frags(af, st + kX + (2 * wg) * 4096, tid);  // the fused kernel's fragment loads and expansion
    rs_block(acc, af, st);
    mk::promote_cols(fg, acc, ws[r0], ws[r0 + 8], sa + ps.stage * 128, tid);
    mk::int4_frags(af, st + kX + (2 * wg + 1) * 4096, tid);
    rs_block(acc, af, st);
    mk::promote_cols(fu, acc, ws[64 + r0], ws[64 + r0 + 8], sa + ps.stage * 128, tid);  // reads the stage's scales
    __syncwarp();
    if (tid % 32 == 0) ptx::mbar_arrive_release_cta(&empty[ps.stage]);
    ps.advance();
  }
  record_consumer(fg, fu, t0, sums, cycles, wg, tid);
}

// A short tile's K blocks (at most 64 token rows: the fused kernel's half tiles) fed through the same pipeline: per
// stage the tile's A rows at the stage start and 32 KB of weights (gate and up rows, as a half tile loads its own
// weights: per warpgroup 64 gate then 64 up rows) 16 KB in; the source streams from `src` (HBM when larger than the
// L2). Consumers per mode:
//   kShortHalf  the fused kernel's half tile (half_wide): both warpgroups on token rows [0, 64), warpgroup wg one
//               m64n128 batch over its 128 weight rows, waited for and promoted (A 8 KB per stage)
//   kShortSwap  swap-AB with 32 tokens: warpgroup wg's gate and up weight rows are the A operand (m64 each), the 32
//               token rows the B operand (n32): two m64n32 batches issued together, waited for once, promoted (16 + 16
//               registers; A 4 KB per stage); half the tensor work of kShortHalf for 32 tokens
//   kShortHalfLate  kShortHalf with the fused kernel's release rule: block kb - 1's stage released once block kb's
//               batch is issued (the warp holds two stages while it waits for the next)
//   kShortNone  no tensor work: every consumer warp releases the stage as soon as it is full (what the stream gives)
// (the rate probe promotes with per-row scale stand-ins in every mode; the swap-AB layout's per-token scales would be
// per column.)
enum class Short : int { kHalf = 0, kSwap = 1, kNone = 2, kHalfLate = 3 };
template <Short kMode>
__global__ void __launch_bounds__(C::kThreads, 1) short_kernel(int kblocks, const uint8_t* src, size_t src_bytes,
                                                               float* sums, unsigned long long* cycles) {
  extern __shared__ __align__(1024) uint8_t smem[];
  const Pipe pipe = init_pipe(smem, false);
  uint64_t* full = pipe.full;
  uint64_t* empty = pipe.empty;
  const int warpgroup = ptx::warpgroup_idx_uniform(), tid = threadIdx.x % 128;
  constexpr uint32_t kA = kMode == Short::kSwap ? 32 * 128 : 64 * 128, kBOff = 16 * 1024, kB = 32 * 1024;
  if (warpgroup == 0) {
    ptx::setmaxnreg_dec<C::kProducerRegs>();
    if (tid != 0) return;
    xstage::kernel::PipeState<kPipeStages> ps;
    size_t off = (size_t(blockIdx.x) * 7919 * 1024) % src_bytes;
    auto next = [&](uint32_t bytes) {
      if (off + bytes > src_bytes) off = 0;
      const uint8_t* p = src + off;
      off += bytes;
      return p;
    };
    for (int kb = 0; kb < kblocks; ++kb) {
      ptx::mbar_wait_acquire_cta(&empty[ps.stage], ps.phase ^ 1);
      ptx::mbar_arrive_expect_tx_release_cta(&full[ps.stage], kA + kB);
      uint8_t* st = smem + ps.stage * kStageBytes;
      bulk_load(st, next(kA), kA, &full[ps.stage]);
      bulk_load(st + kBOff, next(16 * 1024), 16 * 1024, &full[ps.stage]);
      bulk_load(st + kBOff + 16 * 1024, next(16 * 1024), 16 * 1024, &full[ps.stage]);
      ps.advance();
    }
    return;
  }
  ptx::setmaxnreg_inc<C::kConsumerRegs>();
  const int wg = warpgroup - 1;
  const float s0 = 1.0f + 1e-3f * (tid % 7), s1 = 1.0f + 1e-3f * (tid % 5);
  float hg[32], hu[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) hg[i] = hu[i] = 0.f;
  xstage::kernel::PipeState<kPipeStages> ps;
  const unsigned long long t0 = clock64();
  for (int kb = 0; kb < kblocks; ++kb) {
    ptx::mbar_wait_acquire_cta(&full[ps.stage], ps.phase);
    const uint8_t* st = smem + ps.stage * kStageBytes;
    const uint8_t* w = st + kBOff + wg * 128 * 128;  // this warpgroup's 64 gate, then 64 up weight rows
    if constexpr (kMode == Short::kHalfLate) {
      // the fused kernel's release rule: the previous block's stage released in the shadow of this block's batch
      float acc[64];
      mk::NoTurn free;
      mk::issue_block(acc, st, w, free);
      __syncwarp();
      if (kb > 0 && tid % 32 == 0) ptx::mbar_arrive_release_cta(&empty[(ps.stage + kPipeStages - 1) % kPipeStages]);
      ptx::wgmma_wait<0>();
      mk::fence_regs(acc);
#pragma unroll
      for (int i = 0; i < 32; ++i) {
        hg[i] += acc[i] * (((i / 2) % 2) ? s1 : s0);
        hu[i] += acc[32 + i] * (((i / 2) % 2) ? s1 : s0);
      }
      ps.advance();
      continue;
    } else if constexpr (kMode == Short::kHalf) {
      float acc[64];
      mk::mma_block(acc, st, w);
#pragma unroll
      for (int i = 0; i < 32; ++i) {
        hg[i] += acc[i] * (((i / 2) % 2) ? s1 : s0);
        hu[i] += acc[32 + i] * (((i / 2) % 2) ? s1 : s0);
      }
    } else if constexpr (kMode == Short::kSwap) {
      float g[16], u[16];
      const uint64_t dt = mk::desc(st, 0), dg = mk::desc(w, 0), du = mk::desc(w + 64 * 128, 0);
      mk::fence_regs(g);
      mk::fence_regs(u);
      ptx::wgmma_fence();
#pragma unroll
      for (int k = 0; k < 4; ++k)
        ptx::WgmmaFp8<32>::ss(g, ptx::desc_advance(dg, k * 32), ptx::desc_advance(dt, k * 32), k > 0);
#pragma unroll
      for (int k = 0; k < 4; ++k)
        ptx::WgmmaFp8<32>::ss(u, ptx::desc_advance(du, k * 32), ptx::desc_advance(dt, k * 32), k > 0);
      ptx::wgmma_commit();
      ptx::wgmma_wait<0>();
      mk::fence_regs(g);
      mk::fence_regs(u);
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        hg[i] += g[i] * (((i / 2) % 2) ? s1 : s0);
        hu[i] += u[i] * (((i / 2) % 2) ? s1 : s0);
      }
    }
    __syncwarp();
    if (tid % 32 == 0) ptx::mbar_arrive_release_cta(&empty[ps.stage]);
    ps.advance();
  }
  if constexpr (kMode == Short::kHalfLate) {  // the last block's stage
    __syncwarp();
    if (tid % 32 == 0) ptx::mbar_arrive_release_cta(&empty[(ps.stage + kPipeStages - 1) % kPipeStages]);
  }
  record_consumer(hg, hu, t0, sums, cycles, wg, tid);
}

// short-half with the kernel's loads: per stage, by TMA tensor maps over the source as a [rows][8192 B] matrix with the
// 128 B swizzle, the A box of 64 rows, the A row scales (one {128, 1} fp32 box) and the weights as four 64-row boxes
// (a half_wide tile's gate-up interleaved layout), as the fused kernel's producer issues them; every 64 K blocks the
// weights move to 256 new rows (so the stream comes from HBM once the source is larger than the L2). kKernel: the
// consumer also reads the A row scales from the stage and the weight block scales by __ldg per K block, and releases
// a block's stage in the next block's shadow (the fused kernel's consumer).
// kW (how a warpgroup's 64 gate and 64 up weight rows arrive): 0 two 64-row boxes each (the kernel's half_wide
// loads), 1 (short-bulkw-k) two 8 KB bulk copies each out of a pre-packed 32 KB block (gate rows [0, 128), up rows
// [0, 128), 128 B swizzled rows: pieces at 0, 16, 8 and 24 KB), 2 (short-tma3-k) one {128 B, 64 rows, 2} box of a 3-d
// view whose third axis steps from the gate rows to the up rows, 3 (short-tmak-k) kW 1's four pieces as {128 B, 64
// rows} tensor boxes of the pre-packed block seen as a [bytes / 128][128 B] matrix, 4 (short-bulkaw-k) kW 1 with A's
// box as one 8 KB bulk copy of the source packed [64-row group][K block]; the same bytes from HBM each way.
template <bool kKernel, int kW = 0>
__global__ void __launch_bounds__(C::kThreads, 1) short_tma_kernel(const __grid_constant__ CUtensorMap map_x,
                                                                   const __grid_constant__ CUtensorMap map_s,
                                                                   const __grid_constant__ CUtensorMap map_w3, int rows,
                                                                   int kblocks, const float* scales, float* sums,
                                                                   unsigned long long* cycles, const uint8_t* src) {
  extern __shared__ __align__(1024) uint8_t smem[];
  const Pipe pipe = init_pipe(smem, true);
  float* sa = pipe.sa;  // [stage][128] row scales
  uint64_t* full = pipe.full;
  uint64_t* empty = pipe.empty;
  const int warpgroup = ptx::warpgroup_idx_uniform(), tid = threadIdx.x % 128;
  constexpr uint32_t kBOff = 16 * 1024;
  if (warpgroup == 0) {
    ptx::setmaxnreg_dec<C::kProducerRegs>();
    if (tid != 0) return;
    xstage::kernel::PipeState<kPipeStages> ps;
    const int arow = (blockIdx.x * 64) % rows;  // rows is a multiple of 256
    for (int kb = 0; kb < kblocks; ++kb) {
      ptx::mbar_wait_acquire_cta(&empty[ps.stage], ps.phase ^ 1);
      ptx::mbar_arrive_expect_tx_release_cta(&full[ps.stage], 64 * 128 + 32 * 1024 + 128 * sizeof(float));
      uint8_t* st = smem + ps.stage * kStageBytes;
      const int k0 = (kb * 128) % 8192;
      const int brow = int((int64_t(blockIdx.x) * 8192 + int64_t(kb / 64) * 256 + 256) % rows);  // 64 MB per CTA
      const size_t total = size_t(rows) * 8192;
      const size_t woff = packed_offset(brow, k0 / 128, 32768, total);  // the pre-packed forms' 32 KB block
      if constexpr (kW == 4)  // A's 64 rows as one 8 KB block of the source packed [row group][K block]
        bulk_load(st, src + packed_offset(arow, k0 / 128, 8192, total), 8192, &full[ps.stage]);
      else
        mk::tma_load_2d(&map_x, &full[ps.stage], st, k0, arow);
      mk::tma_load_2d(&map_s, &full[ps.stage], sa + ps.stage * 128, 0, kb % 16);
#pragma unroll 1
      for (int h = 0; h < 2; ++h) {  // warpgroup h's rows: 64 gate, then 64 up
        if constexpr (kW == 1 || kW == 4) {
          const uint8_t* blk = src + woff;
          bulk_load(st + kBOff + h * 16384, blk + h * 8192, 8192, &full[ps.stage]);
          bulk_load(st + kBOff + h * 16384 + 8192, blk + 16384 + h * 8192, 8192, &full[ps.stage]);
        } else if constexpr (kW == 2) {  // rows brow + 64 h of group brow / 128 (gate) and of the next (up)
          ptx::tma_load_3d(&map_w3, &full[ps.stage], st + kBOff + h * 16384, k0, h * 64, brow / 128);
        } else if constexpr (kW == 3) {  // kW 1's pieces: 128-byte rows h * 64 and 128 + h * 64 of the block
          const int y = int(woff / 128);
          mk::tma_load_2d(&map_w3, &full[ps.stage], st + kBOff + h * 16384, 0, y + h * 64);
          mk::tma_load_2d(&map_w3, &full[ps.stage], st + kBOff + h * 16384 + 8192, 0, y + 128 + h * 64);
        } else {
          mk::tma_load_2d(&map_x, &full[ps.stage], st + kBOff + h * 16384, k0, brow + h * 64);
          mk::tma_load_2d(&map_x, &full[ps.stage], st + kBOff + h * 16384 + 8192, k0, brow + 128 + h * 64);
        }
      }
      ps.advance();
    }
    return;
  }
  ptx::setmaxnreg_inc<C::kConsumerRegs>();
  const int wg = warpgroup - 1, r0 = 16 * (tid / 32) + (tid % 32) / 4;
  float hg[32], hu[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) hg[i] = hu[i] = 0.f;
  xstage::kernel::PipeState<kPipeStages> ps;
  int held = -1;
  const unsigned long long t0 = clock64();
  for (int kb = 0; kb < kblocks; ++kb) {
    ptx::mbar_wait_acquire_cta(&full[ps.stage], ps.phase);
    const uint8_t* st = smem + ps.stage * kStageBytes;
    float g0 = 1.0f, g1 = 1.0f, u0 = 1.0f, u1 = 1.0f;
    if constexpr (kKernel) {
      const float a0 = sa[ps.stage * 128 + r0], a1 = sa[ps.stage * 128 + r0 + 8];
      const float gs = __ldg(scales + (kb % 1024)), us = __ldg(scales + 1024 + (kb % 1024));
      g0 = a0 * gs, g1 = a1 * gs, u0 = a0 * us, u1 = a1 * us;
    }
    float acc[64];
    mk::NoTurn free;
    mk::issue_block(acc, st, st + kBOff + wg * 16384, free);
    if constexpr (kKernel) {
      __syncwarp();
      if (held >= 0 && tid % 32 == 0) ptx::mbar_arrive_release_cta(&empty[held]);
    }
    ptx::wgmma_wait<0>();
    mk::fence_regs(acc);
    if constexpr (!kKernel) {
      __syncwarp();
      if (tid % 32 == 0) ptx::mbar_arrive_release_cta(&empty[ps.stage]);
    }
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      hg[i] += acc[i] * (((i / 2) % 2) ? g1 : g0);
      hu[i] += acc[32 + i] * (((i / 2) % 2) ? u1 : u0);
    }
    held = ps.stage;
    ps.advance();
  }
  if constexpr (kKernel) {
    __syncwarp();
    if (tid % 32 == 0) ptx::mbar_arrive_release_cta(&empty[held]);
  }
  record_consumer(hg, hu, t0, sums, cycles, wg, tid);
}

struct Row {
  std::string name;
  double batches_per_kblock;  // m64n128k128 batches per warpgroup and K block
  double flop_per_cycle, fraction, tflops, ms, max_cycles, min_cycles;
  bool finite;
  double gbs_per_sm = 0;  // streamed variants: bytes per stage x K blocks per launch / launch time, per CTA
  double issue_cycles[2] = {0, 0};  // l1-tma*: each producer thread's mean cycles per stage to issue its loads
  bool ran = true;                  // false: left out by --rows
  double ms_spread = 0;             // (max - min) / median of the launch time over the passes (this row: the median)
};

std::vector<std::string> g_rows;  // --rows: only these variants run (empty: all)

// One variant: a warm-up launch, then `reps` timed launches of `launch(ctas, sums, cycles)`.
template <class Launch>
Row run_launch(const char* name, double batches, int kblocks, int ctas, int reps, Launch&& launch) {
  if (!g_rows.empty() && std::find(g_rows.begin(), g_rows.end(), name) == g_rows.end()) {
    Row skipped{name, batches, 0, 0, 0, 0, 0, 0, true};
    skipped.ran = false;
    return skipped;
  }
  float* sums = nullptr;
  unsigned long long* cyc = nullptr;
  ok(cudaMalloc(&sums, (ctas + 1) * sizeof(float)), "cudaMalloc");  // + the never-set flag of l1-spin
  ok(cudaMemset(sums, 0, (ctas + 1) * sizeof(float)), "memset");
  ok(cudaMalloc(&cyc, ctas * 2 * sizeof(unsigned long long)), "cudaMalloc");
  cudaEvent_t e0, e1;
  ok(cudaEventCreate(&e0), "event");
  ok(cudaEventCreate(&e1), "event");
  launch(ctas, sums, cyc);  // warm-up
  ok(cudaGetLastError(), name);
  ok(cudaDeviceSynchronize(), name);
  ok(cudaMemset(sums, 0, ctas * sizeof(float)), "memset");
  ok(cudaEventRecord(e0), "record");
  for (int r = 0; r < reps; ++r) launch(ctas, sums, cyc);
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

template <Variant kV>
Row run(const char* name, double batches, int kblocks, int ctas, int reps) {
  const size_t smem = kABytes + kBBytes;
  ok(cudaFuncSetAttribute(probe_kernel<kV>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)), name);
  return run_launch(name, batches, kblocks, ctas, reps, [&](int n, float* sums, unsigned long long* cyc) {
    probe_kernel<kV><<<n, C::kThreads, smem>>>(kblocks, sums, cyc);
  });
}

// mix_bytes 0: A and the weights from the whole source, each CTA on its own 256 weight rows (l1-tma). Otherwise
// (l1-tma-mix) A comes from the source's first mix_bytes (small: the L2 keeps it, as it keeps the fused kernel's
// token rows, read by every N tile of their expert) and the weights stream from the rest, every CTA moving on to
// new rows after each 8192-column sweep (as the kernel's tiles walk an expert's weights once at 8192 tokens).
template <bool kRing, bool kRs = false, int kProducers = 1, int kWLoad = 0>
Row run_tma(const char* name, int kblocks, int ctas, int reps, const uint8_t* src, size_t src_bytes,
            const float* scales, size_t mix_bytes = 0) {
  const uint8_t* wsrc = src + mix_bytes;
  const int arows = int((mix_bytes ? mix_bytes : src_bytes) / 8192) / 256 * 256;  // src_mb >= 2 MB
  const int brows = int((src_bytes - mix_bytes) / 8192) / 256 * 256;
  const int bstep = mix_bytes ? (ctas * 256) % brows : 0;
  const CUtensorMap mx = make_map(src, false, 8192, uint64_t(arows), 128, 64);
  const CUtensorMap mw = kWLoad == 3 ? make_map(wsrc, false, 128, uint64_t(brows) * (8192 / 128), 128, 256)
                                     : make_map(wsrc, false, 8192, uint64_t(brows), 128, kWLoad == 1 ? 256 : 128);
  const CUtensorMap ms = make_map(scales, true, 128, 16, 128, 1);  // 16 rows of 128 row scales (2048 floats)
  const size_t smem = size_t(kPipeStages) * kStageBytes + kPipeStages * 128 * sizeof(float) +
                      2 * kPipeStages * sizeof(uint64_t);
  auto* kernel = tma_kernel<kRing, kRs, kProducers, kWLoad>;
  ok(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)), name);
  Row r = run_launch(name, 2, kblocks, ctas, reps, [&](int n, float* sums, unsigned long long* cyc) {
    kernel<<<n, C::kThreads, smem>>>(mx, mw, ms, arows, brows, bstep, kblocks, scales, sums, cyc, src, wsrc);
  });
  r.gbs_per_sm = (48.0 * 1024 + 128 * sizeof(float)) * kblocks / (r.ms * 1e-3) / 1e9;
  std::vector<unsigned long long> is(2 * kIssueCtas);
  ok(cudaMemcpyFromSymbol(is.data(), g_issue, is.size() * sizeof(is[0])), "g_issue");
  const int n = std::min(ctas, kIssueCtas);
  double s0 = 0, s1 = 0;
  for (int b = 0; b < n; ++b) {
    s0 += double(is[2 * b]);
    s1 += double(is[2 * b + 1]);
  }
  r.issue_cycles[0] = s0 / n;
  r.issue_cycles[1] = kProducers == 2 ? s1 / n : 0;
  return r;
}

// The W4A8 rows' operands: mix_bytes as run_tma's; the int4 weights are the rest of the source as a [rows][4096 B]
// matrix (8192 int4 per row, the same K as l1-tma's 8192-byte rows), loaded as unswizzled {64 B, 256 rows} boxes.
struct W4Args {
  CUtensorMap mx, mw, ms, mc;
  int arows, brows, bstep;
};
W4Args w4_args(int ctas, const uint8_t* src, size_t src_bytes, const float* scales, size_t mix_bytes) {
  W4Args w;
  w.arows = int((mix_bytes ? mix_bytes : src_bytes) / 8192) / 256 * 256;
  w.brows = int((src_bytes - mix_bytes) / 4096) / 256 * 256;
  w.bstep = mix_bytes ? (ctas * 256) % w.brows : 0;
  w.mx = make_map(src, false, 8192, uint64_t(w.arows), 128, 64);
  w.mw = probe::make_map_plain(src + mix_bytes, 4096, uint64_t(w.brows), 64, 256);
  w.ms = make_map(scales, true, 128, 16, 128, 1);  // 16 rows of 128 A row scales
  w.mc = make_map(scales, true, 256, 8, 256, 1);   // 8 rows of 256 column scales
  return w;
}
constexpr double kW4StageBytes = 16.0 * 1024 + 16 * 1024 + (128 + 256) * sizeof(float);  // A, int4, scales

template <bool kConvert, bool kSm = false>
Row run_w4(const char* name, int kblocks, int ctas, int reps, const uint8_t* src, size_t src_bytes, const float* scales,
           size_t mix_bytes = 0) {
  const W4Args w = w4_args(ctas, src, src_bytes, scales, mix_bytes);
  ok(cudaFuncSetAttribute(w4_kernel<kConvert, kSm>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kW4Smem)), name);
  Row r = run_launch(name, 2, kblocks, ctas, reps, [&](int n, float* sums, unsigned long long* cyc) {
    w4_kernel<kConvert, kSm><<<n, C::kThreads, kW4Smem>>>(w.mx, w.mw, w.ms, w.mc, w.arows, w.brows, w.bstep, kblocks,
                                                          sums, cyc);
  });
  r.gbs_per_sm = kW4StageBytes * kblocks / (r.ms * 1e-3) / 1e9;
  return r;
}

template <bool kSm = false, bool kNSplit = false, bool kConvert = true, int kDiag = 0>
Row run_w4c(const char* name, int kblocks, int ctas, int reps, const uint8_t* src, size_t src_bytes,
            const float* scales, size_t mix_bytes) {
  const W4Args w = w4_args(ctas, src, src_bytes, scales, mix_bytes);
  ok(cudaFuncSetAttribute(w4c_kernel<kSm, kNSplit, kConvert, kDiag>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         int(kW4cSmem)),
     name);
  Row r = run_launch(name, 2, kblocks, ctas, reps, [&](int n, float* sums, unsigned long long* cyc) {
    w4c_kernel<kSm, kNSplit, kConvert, kDiag><<<n, C::kThreads, kW4cSmem>>>(w.mx, w.mw, w.ms, w.mc, w.arows, w.brows, w.bstep, kblocks, sums, cyc);
  });
  r.gbs_per_sm = kW4StageBytes * kblocks / (r.ms * 1e-3) / 1e9;
  return r;
}

Row run_w4ci(const char* name, int kblocks, int ctas, int reps, const uint8_t* src, size_t src_bytes,
             const float* scales, size_t mix_bytes) {
  W4Args w = w4_args(ctas, src, src_bytes, scales, mix_bytes);
  w.mw = probe::make_map_plain(src + mix_bytes, 4096, uint64_t(w.brows), 64, 64);  // {64 B, 64 rows} int4 boxes
  ok(cudaFuncSetAttribute(w4ci_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kW4iSmem)), name);
  Row r = run_launch(name, 2, kblocks, ctas, reps, [&](int n, float* sums, unsigned long long* cyc) {
    w4ci_kernel<<<n, C::kThreads, kW4iSmem>>>(w.mx, w.mw, w.ms, w.mc, w.arows, w.brows, w.bstep, kblocks, sums, cyc);
  });
  r.gbs_per_sm = kW4StageBytes * kblocks / (r.ms * 1e-3) / 1e9;
  return r;
}

Row run_w4rs(const char* name, int kblocks, int ctas, int reps, const uint8_t* src, size_t src_bytes,
             const float* scales, size_t mix_bytes) {
  const W4Args w = w4_args(ctas, src, src_bytes, scales, mix_bytes);
  ok(cudaFuncSetAttribute(w4rs_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kW4rSmem)), name);
  Row r = run_launch(name, 2, kblocks, ctas, reps, [&](int n, float* sums, unsigned long long* cyc) {
    w4rs_kernel<<<n, C::kThreads, kW4rSmem>>>(w.mx, w.mw, w.ms, w.mc, w.arows, w.brows, w.bstep, kblocks, sums, cyc);
  });
  r.gbs_per_sm = kW4StageBytes * kblocks / (r.ms * 1e-3) / 1e9;
  return r;
}

template <bool kL1>
Row run_pipe(const char* name, int kblocks, int ctas, int reps, const uint8_t* src, size_t src_bytes,
             const float* scales) {
  const size_t smem = size_t(kPipeStages) * kStageBytes + 2 * kPipeStages * sizeof(uint64_t);
  ok(cudaFuncSetAttribute(pipe_kernel<kL1>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)), name);
  Row r = run_launch(name, kL1 ? 2 : 1, kblocks, ctas, reps, [&](int n, float* sums, unsigned long long* cyc) {
    pipe_kernel<kL1><<<n, C::kThreads, smem>>>(kblocks, src, src_bytes, scales, sums, cyc);
  });
  r.gbs_per_sm = double(kL1 ? 48 : 32) * 1024 * kblocks / (r.ms * 1e-3) / 1e9;
  return r;
}

template <Short kMode>
Row run_short(const char* name, int kblocks, int ctas, int reps, const uint8_t* src, size_t src_bytes) {
  const size_t smem = size_t(kPipeStages) * kStageBytes + 2 * kPipeStages * sizeof(uint64_t);
  ok(cudaFuncSetAttribute(short_kernel<kMode>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)), name);
  // batches: m64n128k128 equivalents per warpgroup and K block (a half tile's 64 x 256 x 128 is two of them in all)
  const double batches = kMode == Short::kHalf || kMode == Short::kHalfLate ? 1.0 : kMode == Short::kSwap ? 0.5 : 0.0;
  Row r = run_launch(name, batches, kblocks, ctas, reps, [&](int n, float* sums, unsigned long long* cyc) {
    short_kernel<kMode><<<n, C::kThreads, smem>>>(kblocks, src, src_bytes, sums, cyc);
  });
  const double stage = (kMode == Short::kSwap ? 32 * 128 : 64 * 128) + 32 * 1024;
  r.gbs_per_sm = stage * kblocks / (r.ms * 1e-3) / 1e9;
  return r;
}

template <bool kKernel, int kW = 0>
Row run_short_tma(const char* name, int kblocks, int ctas, int reps, const uint8_t* src, size_t src_bytes,
                  const float* scales) {
  const int rows = int(src_bytes / 8192) / 256 * 256;
  const CUtensorMap mx = make_map(src, false, 8192, uint64_t(rows), 128, 64);
  const CUtensorMap ms = make_map(scales, true, 128, 16, 128, 1);
  const size_t smem = size_t(kPipeStages) * kStageBytes + kPipeStages * 128 * sizeof(float) +
                      2 * kPipeStages * sizeof(uint64_t);
  const CUtensorMap mw3 = kW == 2   ? probe::make_map_3d(src, 8192, uint64_t(rows), 128, 128, 64, 2)
                         : kW == 3 ? make_map(src, false, 128, uint64_t(rows) * (8192 / 128), 128, 64)
                                   : CUtensorMap{};
  auto* kernel = short_tma_kernel<kKernel, kW>;
  ok(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)), name);
  Row r = run_launch(name, 1.0, kblocks, ctas, reps, [&](int n, float* sums, unsigned long long* cyc) {
    kernel<<<n, C::kThreads, smem>>>(mx, ms, mw3, rows, kblocks, scales, sums, cyc, src);
  });
  r.gbs_per_sm = (40.0 * 1024 + 128 * sizeof(float)) * kblocks / (r.ms * 1e-3) / 1e9;
  return r;
}

// --power S: the l1 and half-wide variants on shared-memory operands with the A contents of AFill as backends of the
// benchmark protocol (docs/BENCHMARKING.md: own warm-up of S / 2, ABBA blocks of S seconds, two rounds; NVML's SM
// clock, power and energy beside each block). Every SM runs the tensor cores flat out, so at the 700 W limit the
// clock, and with it the time per launch, follows the power their operands draw. Prints per backend the median time,
// its spread, TFLOP/s, clock, power, joules per launch and the time against the random rows of its variant (with the
// ABBA halves' flip); writes the same as JSON.
int run_power(double seconds, int kblocks, int ctas, const std::string& json) {
  struct Backend {
    const char* name;
    bool half;  // half-wide (one m64n128 batch per warpgroup on A rows [0, 64)) instead of l1
    int fill;
  };
  const Backend backends[] = {
      {"l1 random", false, kARandom},          {"l1 zero", false, kAZero},
      {"l1 nan", false, kANaN},                {"l1 pad20 zero", false, kAPadZero},
      {"l1 pad20 nan", false, kAPadNaN},       {"half-wide random", true, kARandom},
      {"half-wide 1row zero", true, kAOneRowZero}, {"half-wide 1row nan", true, kAOneRowNaN}};
  const size_t smem = kABytes + kBBytes;
  ok(cudaFuncSetAttribute(probe_kernel<Variant::kL1>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)), "l1");
  ok(cudaFuncSetAttribute(probe_kernel<Variant::kHalfWide>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
     "half-wide");
  float* sums = nullptr;
  unsigned long long* cyc = nullptr;
  ok(cudaMalloc(&sums, (ctas + 1) * sizeof(float)), "cudaMalloc");
  ok(cudaMalloc(&cyc, ctas * 2 * sizeof(unsigned long long)), "cudaMalloc");
  cudaStream_t st;
  ok(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreate");
  std::vector<std::string> names;
  std::vector<std::function<void(int)>> fns;
  for (const Backend& b : backends) {
    names.push_back(b.name);
    fns.push_back([&, b](int) {
      if (b.half)
        probe_kernel<Variant::kHalfWide><<<ctas, C::kThreads, smem, st>>>(kblocks, sums, cyc, b.fill);
      else
        probe_kernel<Variant::kL1><<<ctas, C::kThreads, smem, st>>>(kblocks, sums, cyc, b.fill);
    });
  }
  xstage::bench::Params p;
  p.warmup_s = seconds / 2;
  p.block_s = seconds;
  p.rounds = 2;
  p.sample_period_s = 0.005;  // each energy-counter step placed to within 2.5 ms: ~0.3 % of a 1 s block's power
  ok(cudaGetDevice(&p.nvml_device), "cudaGetDevice");  // the GPU the launches run on (mapped to NVML by PCI bus id)
  const xstage::bench::Result res = xstage::bench::run_protocol_cuda(names, fns, st, p);
  ok(cudaGetLastError(), "power launches");
  ok(cudaStreamSynchronize(st), "power launches");
  cudaDeviceProp prop{};
  ok(cudaGetDeviceProperties(&prop, p.nvml_device), "cudaGetDeviceProperties");
  std::printf("%s, %d CTAs x 384 threads, %d K blocks per launch; %s; NVML %s\n", prop.name, ctas, kblocks,
              res.protocol.c_str(), res.nvml ? "yes" : "no");
  std::printf("%-20s %9s %7s %8s %8s %7s %9s %s\n", "backend", "ms", "spread", "TFLOP/s", "SM MHz", "W (ctr)", "J/launch",
              "time / random (flipped)");
  auto opt = [](const std::optional<double>& v) { return v ? *v : NAN; };
  // The JSON through nlohmann (xstage::bench::opt_json: a value the run lacks, e.g. without NVML, is null).
  nlohmann::json rows = nlohmann::json::array();
  for (size_t i = 0; i < names.size(); ++i) {
    const Backend& b = backends[i];
    const xstage::bench::BackendStats& sb = res.stats_of(b.name);
    const xstage::bench::BackendStats& ref = res.stats_of(b.half ? "half-wide random" : "l1 random");
    const xstage::bench::Ratio r = xstage::bench::ratio(ref, sb);  // ref's speed against this one: time / random
    const double flop = 2.0 * kblocks * (b.half ? 1 : 2) * (2.0 * 64 * 128 * 128) * ctas;
    const double ms = opt(sb.median_ms);
    // W: the energy counter's mean power over the blocks (J per launch / time per launch); NVML's power reading is a
    // ~1 s average on Hopper that lags into the block before, so it goes to the JSON only (nvml_power_w).
    const std::optional<double> counter_w =
        sb.j_per_call && sb.median_ms ? std::optional<double>(*sb.j_per_call / (*sb.median_ms * 1e-3)) : std::nullopt;
    std::printf("%-20s %9.4f %7.4f %8.1f %8.0f %7.1f %9.4f %.4f%s\n", b.name, ms, opt(sb.spread), flop / (ms * 1e-3) / 1e12,
                opt(sb.sm_clock_mhz), opt(counter_w), opt(sb.j_per_call), opt(r.ratio),
                r.flipped && *r.flipped ? " (flipped)" : "");
    using xstage::bench::opt_json;
    rows.push_back({{"backend", b.name}, {"median_ms", opt_json(sb.median_ms)}, {"spread", opt_json(sb.spread)},
                    {"tflops", opt_json(sb.median_ms ? std::optional<double>(flop / (ms * 1e-3) / 1e12) : std::nullopt)},
                    {"sm_clock_mhz", opt_json(sb.sm_clock_mhz)}, {"power_w", opt_json(counter_w)},
                    {"nvml_power_w", opt_json(sb.power_w)}, {"j_per_launch", opt_json(sb.j_per_call)},
                    {"time_vs_random", opt_json(r.ratio)}, {"flipped", r.flipped && *r.flipped}});
  }
  if (!json.empty())
    std::ofstream(json) << nlohmann::json{{"device", prop.name}, {"ctas", ctas}, {"kblocks", kblocks},
                                          {"protocol", res.protocol}, {"rows", rows}}.dump(1)
                        << "\n";
  ok(cudaFree(sums), "cudaFree");
  ok(cudaFree(cyc), "cudaFree");
  ok(cudaStreamDestroy(st), "cudaStreamDestroy");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  probe::g_name = "mainloop_probe";
  int kblocks = 4096, ctas = 0, reps = 5, rounds = 2, src_mb = 16;
  bool pipe_only = false;  // --pipe-only: only the variants fed through the pipeline from the source buffer
  double power_s = 0;      // --power S: only the A-contents comparison under the benchmark protocol (run_power)
  std::string json;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (xstage::bench::is_help_flag(k)) xstage::bench::print_usage_and_exit(kUsage);
    auto val = [&]() -> std::string { return probe::arg_value(argc, argv, i); };
    if (k == "--kblocks") kblocks = probe::int_value(argc, argv, i);
    else if (k == "--ctas") ctas = probe::int_value(argc, argv, i);
    else if (k == "--reps") reps = probe::int_value(argc, argv, i);
    else if (k == "--rounds") rounds = probe::int_value(argc, argv, i);
    else if (k == "--src-mb") src_mb = probe::int_value(argc, argv, i);
    else if (k == "--json") json = val();
    else if (k == "--pipe-only") pipe_only = true;
    else if (k == "--power") power_s = probe::num_value(argc, argv, i);
    else if (k == "--rows") {  // a comma-separated list of variant names
      std::string v = val(), part;
      for (size_t a = 0; a <= v.size(); ++a)
        if (a == v.size() || v[a] == ',') {
          if (!part.empty()) g_rows.push_back(part);
          part.clear();
        } else {
          part += v[a];
        }
      if (g_rows.empty()) {
        std::fprintf(stderr, "mainloop_probe: --rows needs variant names, got '%s'\n", v.c_str());
        return 2;
      }
    }
    else {
      std::fprintf(stderr, "mainloop_probe: unknown argument %s (mainloop_probe --help lists the flags)\n", k.c_str());
      return 2;
    }
  }
  cudaDeviceProp prop{};
  ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  if (ctas <= 0) ctas = prop.multiProcessorCount;  // one CTA per SM
  if (kblocks < 1 || reps < 1 || rounds < 1 || ctas > prop.multiProcessorCount || src_mb < 2) {
    std::fprintf(stderr, "mainloop_probe: need --kblocks >= 1, --reps >= 1, --rounds >= 1, --ctas <= %d SMs, "
                 "--src-mb >= 2 (got %d, %d, %d, %d, %d)\n", prop.multiProcessorCount, kblocks, reps, rounds, ctas,
                 src_mb);
    return 2;
  }
  if (prop.major != 9) {
    std::fprintf(stderr, "mainloop_probe: needs sm_90a (Hopper); device 0 is sm_%d%d\n", prop.major, prop.minor);
    return 2;
  }
  if (power_s > 0) return run_power(power_s, kblocks, ctas, json);
  std::vector<std::function<Row()>> jobs;  // one per variant, run in balanced passes below
  if (!pipe_only) {
  jobs.push_back([&] { return run<Variant::kL2>("l2", 1, kblocks, ctas, reps); });
  jobs.push_back([&] { return run<Variant::kL1>("l1", 2, kblocks, ctas, reps); });
  jobs.push_back([&] { return run<Variant::kL1NoPromote>("l1-nopro", 2, kblocks, ctas, reps); });
  jobs.push_back([&] { return run<Variant::kL1InPhase>("l1-inphase", 2, kblocks, ctas, reps); });
  jobs.push_back([&] { return run<Variant::kL1Alternate>("l1-alt", 2, kblocks, ctas, reps); });
  jobs.push_back([&] { return run<Variant::kL1Ring>("l1-ring", 2, kblocks, ctas, reps); });
  jobs.push_back([&] { return run<Variant::kL1RingInPhase>("l1-ring-ip", 2, kblocks, ctas, reps); });
  jobs.push_back([&] { return run<Variant::kL1Spin>("l1-spin", 2, kblocks, ctas, reps); });
  jobs.push_back([&] { return run<Variant::kL1SpinSleep>("l1-spin-sleep", 2, kblocks, ctas, reps); });
  jobs.push_back([&] { return run<Variant::kHalf>("half", 1, kblocks, ctas, reps); });
  jobs.push_back([&] { return run<Variant::kHalfTogether>("half-tog", 1, kblocks, ctas, reps); });
  jobs.push_back([&] { return run<Variant::kHalfWide>("half-wide", 1, kblocks, ctas, reps); });
  jobs.push_back([&] { return run<Variant::kHalfWideInPhase>("half-wide-ip", 1, kblocks, ctas, reps); });
  jobs.push_back([&] { return run<Variant::kHalfPipe>("half-pipe", 1, kblocks, ctas, reps); });
  jobs.push_back([&] { return run<Variant::kHalfPipeInPhase>("half-pipe-ip", 1, kblocks, ctas, reps); });
  jobs.push_back([&] { return run<Variant::kHalfTogPipe>("half-tog-pipe", 1, kblocks, ctas, reps); });
  }
  // the pipeline variants' source (freed after the passes)
  const size_t src_bytes = size_t(src_mb) << 20;
  uint8_t* src = nullptr;
  float* scales = nullptr;
  ok(cudaMalloc(&src, src_bytes), "cudaMalloc (source)");
  ok(cudaMemset(src, 0x33, src_bytes), "memset (source)");  // finite e4m3 codes
  ok(cudaMalloc(&scales, 2048 * sizeof(float)), "cudaMalloc (scales)");
  ok(cudaMemset(scales, 0, 2048 * sizeof(float)), "memset (scales)");
  jobs.push_back([&] { return run_pipe<true>("l1-pipe", kblocks, ctas, reps, src, src_bytes, scales); });
  jobs.push_back([&] { return run_pipe<false>("l2-pipe", kblocks, ctas, reps, src, src_bytes, scales); });
  jobs.push_back([&] { return run_tma<false>("l1-tma", kblocks, ctas, reps, src, src_bytes, scales); });
  if (src_mb >= 8) {  // A from 2-8 MB, the weights from the rest
    const size_t mix = std::min<size_t>(8, size_t(src_mb) / 4) << 20;
    jobs.push_back([&, mix] { return run_tma<false>("l1-tma-mix", kblocks, ctas, reps, src, src_bytes, scales, mix); });
    jobs.push_back([&, mix] {
      return run_tma<false, false, 2>("l1-tma-mix-2p", kblocks, ctas, reps, src, src_bytes, scales, mix);
    });
    jobs.push_back([&, mix] {
      return run_tma<false, false, 1, 1>("l1-tma1-mix", kblocks, ctas, reps, src, src_bytes, scales, mix);
    });
    jobs.push_back([&, mix] {
      return run_tma<false, false, 1, 2>("l1-bulkw-mix", kblocks, ctas, reps, src, src_bytes, scales, mix);
    });
    jobs.push_back([&, mix] {
      return run_tma<false, false, 1, 3>("l1-tmak-mix", kblocks, ctas, reps, src, src_bytes, scales, mix);
    });
    jobs.push_back([&, mix] {
      return run_tma<false, false, 1, 4>("l1-bulkaw-mix", kblocks, ctas, reps, src, src_bytes, scales, mix);
    });
    jobs.push_back([&, mix] {
      return run_tma<false, false, 1, 5>("l1-bulkw2-mix", kblocks, ctas, reps, src, src_bytes, scales, mix);
    });
    jobs.push_back([&, mix] {
      return run_tma<false, false, 1, 6>("l1-bulkw4-mix", kblocks, ctas, reps, src, src_bytes, scales, mix);
    });
    jobs.push_back([&, mix] {
      return run_tma<false, false, 1, 0>("l1-tma-mix-b", kblocks, ctas, reps, src, src_bytes, scales, mix);
    });
    jobs.push_back([&, mix] { return run_w4<true>("l1-w4-mix", kblocks, ctas, reps, src, src_bytes, scales, mix); });
    jobs.push_back([&, mix] {
      return run_w4<false>("l1-w4-mix-nocvt", kblocks, ctas, reps, src, src_bytes, scales, mix);
    });
    jobs.push_back([&, mix] { return run_w4c("l1-w4c-mix", kblocks, ctas, reps, src, src_bytes, scales, mix); });
    jobs.push_back([&, mix] {
      return run_w4<true, true>("l1-w4s-mix", kblocks, ctas, reps, src, src_bytes, scales, mix);
    });
    jobs.push_back([&, mix] { return run_w4c<true>("l1-w4cs-mix", kblocks, ctas, reps, src, src_bytes, scales, mix); });
    jobs.push_back([&, mix] {
      return run_w4c<true, true>("l1-w4cn-mix", kblocks, ctas, reps, src, src_bytes, scales, mix);
    });
    jobs.push_back([&, mix] {
      return run_w4c<true, true, false>("l1-w4cn-mix-nocvt", kblocks, ctas, reps, src, src_bytes, scales, mix);
    });
    jobs.push_back([&, mix] { return run_w4ci("l1-w4ci-mix", kblocks, ctas, reps, src, src_bytes, scales, mix); });
    jobs.push_back([&, mix] {
      return run_w4c<true, true, true, 1>("l1-w4cn-mix-nofence", kblocks, ctas, reps, src, src_bytes, scales, mix);
    });
    jobs.push_back([&, mix] {
      return run_w4c<true, true, true, 2>("l1-w4cn-mix-nostore", kblocks, ctas, reps, src, src_bytes, scales, mix);
    });
    jobs.push_back([&, mix] { return run_w4rs("l1-w4rs-mix", kblocks, ctas, reps, src, src_bytes, scales, mix); });
  }
  jobs.push_back([&] { return run_w4<true>("l1-w4", kblocks, ctas, reps, src, src_bytes, scales); });
  jobs.push_back([&] { return run_tma<false, false, 2>("l1-tma-2p", kblocks, ctas, reps, src, src_bytes, scales); });
  jobs.push_back([&] { return run_tma<true>("l1-tma-ring", kblocks, ctas, reps, src, src_bytes, scales); });
  jobs.push_back([&] { return run_tma<false, true>("l1-tma-rs", kblocks, ctas, reps, src, src_bytes, scales); });
  jobs.push_back([&] { return run_short<Short::kHalf>("short-half", kblocks, ctas, reps, src, src_bytes); });
  jobs.push_back([&] { return run_short<Short::kHalfLate>("short-half-late", kblocks, ctas, reps, src, src_bytes); });
  jobs.push_back([&] { return run_short<Short::kSwap>("short-swap", kblocks, ctas, reps, src, src_bytes); });
  jobs.push_back([&] { return run_short<Short::kNone>("short-none", kblocks, ctas, reps, src, src_bytes); });
  jobs.push_back([&] { return run_short_tma<false>("short-tma", kblocks, ctas, reps, src, src_bytes, scales); });
  jobs.push_back([&] { return run_short_tma<true>("short-tma-k", kblocks, ctas, reps, src, src_bytes, scales); });
  jobs.push_back([&] { return run_short_tma<true, 1>("short-bulkw-k", kblocks, ctas, reps, src, src_bytes, scales); });
  jobs.push_back([&] { return run_short_tma<true, 2>("short-tma3-k", kblocks, ctas, reps, src, src_bytes, scales); });
  jobs.push_back([&] { return run_short_tma<true, 3>("short-tmak-k", kblocks, ctas, reps, src, src_bytes, scales); });
  jobs.push_back([&] { return run_short_tma<true, 4>("short-bulkaw-k", kblocks, ctas, reps, src, src_bytes, scales); });
  jobs.push_back([&] { return run_short_tma<true>("short-tma-k-b", kblocks, ctas, reps, src, src_bytes, scales); });
  // Balanced passes (the header's "Passes"); a row is finite only if every pass was.
  std::vector<bool> finite(jobs.size(), true);
  std::vector<Row> rows = probe::balanced_passes<Row>(jobs.size(), rounds, [&](size_t i) {
    Row r = jobs[i]();
    finite[i] = finite[i] && r.finite;
    return r;
  });
  for (size_t i = 0; i < rows.size(); ++i) rows[i].finite = finite[i];
  cudaFree(src);
  cudaFree(scales);
  std::printf("%s, %d SMs; %d CTAs x 384 threads, %d K blocks, %d launches per variant and pass, %s; pipe source %d "
              "MB\n", prop.name, prop.multiProcessorCount, ctas, kblocks, reps, probe::passes_note(rounds).c_str(),
              src_mb);
  std::printf("%-16s %8s %12s %9s %9s %9s %10s %8s %s\n", "variant", "batches", "FLOP/cyc/SM", "of 8192", "TFLOP/s",
              "ms spread", "cyc spread", "GB/s/SM", "ok");
  rows.erase(std::remove_if(rows.begin(), rows.end(), [](const Row& r) { return !r.ran; }), rows.end());
  if (rows.empty()) {  // (without --rows: every variant was left out by --pipe-only or --src-mb)
    std::fprintf(stderr, "mainloop_probe: no variant ran (names as in the file's header)\n");
    return 2;
  }
  for (const std::string& want : g_rows)
    if (std::none_of(rows.begin(), rows.end(), [&](const Row& r) { return r.name == want; })) {
      std::fprintf(stderr, "mainloop_probe: --rows names '%s', which did not run (unknown, or left out by --pipe-only "
                   "or a --src-mb below 8; names as in the file's header)\n", want.c_str());
      return 2;
    }
  bool all = true;
  for (const Row& r : rows) {
    char gbs[32] = "-";
    if (r.gbs_per_sm > 0) std::snprintf(gbs, sizeof gbs, "%.1f", r.gbs_per_sm);
    char iss[48] = "";
    if (r.issue_cycles[0] > 0)
      std::snprintf(iss, sizeof iss, r.issue_cycles[1] > 0 ? "  issue %.0f / %.0f cyc" : "  issue %.0f cyc",
                    r.issue_cycles[0], r.issue_cycles[1]);
    std::printf("%-16s %8.1f %12.0f %9.3f %9.1f %9.3f %10.3f %8s %s%s\n", r.name.c_str(), r.batches_per_kblock,
                r.flop_per_cycle, r.fraction, r.tflops, r.ms_spread, (r.max_cycles - r.min_cycles) / r.max_cycles, gbs,
                r.finite ? "yes" : "NO", iss);
    all = all && r.finite;
  }
  if (!json.empty()) {
    std::ofstream f(json);
    f << "{\"device\": \"" << prop.name << "\", \"sms\": " << prop.multiProcessorCount << ", \"ctas\": " << ctas
      << ", \"kblocks\": " << kblocks << ", \"reps\": " << reps << ", \"rounds\": " << rounds
      << ", \"src_mb\": " << src_mb << ", \"rows\": [";
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      f << (i ? ", " : "") << "{\"variant\": \"" << r.name << "\", \"batches_per_kblock\": " << r.batches_per_kblock
        << ", \"flop_per_cycle_sm\": " << r.flop_per_cycle << ", \"fraction_of_8192\": " << r.fraction
        << ", \"tflops\": " << r.tflops << ", \"ms_per_launch\": " << r.ms << ", \"passes\": " << 2 * rounds
        << ", \"ms_spread\": " << r.ms_spread << ", \"max_cycles\": " << r.max_cycles
        << ", \"min_cycles\": " << r.min_cycles << ", \"gbs_per_sm\": " << r.gbs_per_sm
        << ", \"issue_cycles\": [" << r.issue_cycles[0] << ", " << r.issue_cycles[1] << "], \"finite\": " << (r.finite ? "true" : "false") << "}";
    }
    f << "]}\n";
  }
  return all ? 0 : 1;
}
