#pragma once
// The fused MoE layer kernel, W8A8 / W4A8 / bf16, v1 (docs/MOE.md, "Fused kernel").
//
// One persistent launch serves every local rank: CTA b belongs to local rank g = b / ctas_per_rank and is
// instance b % ctas_per_rank of that rank's tile scheduler (any type with the sched/work_tile.hpp
// interface over MoeTile). Per CTA:
//   1. dispatch (all threads): copy this rank's routed rows (FP8 codes, 1x128 scales, and the row's
//      (source, token, slot)) into the destination ranks' receive buffers at DispatchLayout's rows; then
//      one release per destination (per-CTA completion signal, slot kSlotDispatch).
//   2. warp-specialised tiles, every role walking the same scheduler sequence:
//      - producer (warp 0 of warpgroup 0, one thread): every TMA load (A tile, its 128 A scales, B tiles)
//        into a kStages ring (full/empty mbarriers). Before an L1 tile it waits (acquire, timeout) for the
//        dispatch signals of the sources that own rows of the tile; before an L2 tile for
//        row_ready[p] == l1_ntiles. Both waits are followed by fence.proxy.async.global.
//      - MMA warpgroups 1 and 2 (64 rows each): FP8 wgmma m64n128k32 per 128-deep block into a scratch
//        accumulator, promoted in fp32 with a_scale[row] * b_scale (DeepGEMM's technique). Then
//          L1 tile (row p, n): 128 gate + 128 up columns -> h = silu(g) * u, per-row amax over the 128
//              columns (one 1x128 scale block) -> FP8 codes + scales into a staging slot;
//          L2 tile (row p, n): 128 hidden columns -> bf16 rows into a staging slot;
//        and on to the next tile: the MMA side only waits when both staging slots are still busy.
//      - epilogue warps (warps 1 and 2 of warpgroup 0), both walking every tile so the slots stay in step:
//          warp 1 (L1): one TMA store of the h tile + one bulk store of its scales into this rank's
//              intermediate buffer, slot freed once read, then (writes complete) row_ready[p] += 1;
//          warp 2 (L2): one bulk store per valid row (256 B) straight into entry (token, slot) of the row's
//              source rank's combine buffer (peer memory), slot freed once read: the remote stores drain
//              behind the MMA (the X-Stage); after the last tile, bulk_wait_group 0, a system fence and
//              one release of slot kSlotCombine on every rank (the per-CTA completion signal).
// W4A8 computes every tile transposed (the weights as wgmma's A operand, expanded from int4 in registers; the tokens
// as B): the producer loads the weights' fragment blocks by TMA, the MMA warpgroups run rs_mainloop and write the slot
// in the layouts above (rs_l1_epilogue, stage_l2_cols); the epilogue warps are the same.
// The weighted sum over the k slots is a second, small kernel (combine_kernel) after a stream-ordered
// wait for every rank's combine signals.
// bf16 (ConfigT<kBf16>, reference runs): the same roles and the same stage geometry with 64-deep K blocks of
// bf16 (128 bytes per row, as FP8's 128-deep blocks); no scales anywhere. The dispatch copies 2H bytes per
// row; the MMA warpgroups run bf16 wgmma m64n128k16 straight into the final accumulators with one block's
// batch in flight; the L1 tile's h stays bf16 (two TMA boxes of 64 columns, no amax, no scales) and Linear-2
// reads it as bf16. The L2 epilogue and the weighted sum are the same code for every format.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <cstdio>
#include <type_traits>

#include "moe_params.hpp"
#include "xstage/kernel/barrier.cuh"
#include "xstage/kernel/fragment.cuh"
#include "xstage/kernel/pipeline.cuh"
#include "xstage/kernel/signal.cuh"
#include "xstage/moe/dispatch_layout.hpp"
#include "xstage/moe/epilogue_rows.hpp"
#include "xstage/ptx/cluster.cuh"
#include "xstage/ptx/store.cuh"
#include "xstage/ptx/sync.cuh"
#include "xstage/ptx/timer.cuh"
#include "xstage/ptx/tma.cuh"
#include "xstage/ptx/wgmma.cuh"
#include "xstage/ptx/wgmma_fp8.cuh"
#include "xstage/runtime/device_error.hpp"
#include "xstage/runtime/peer_table.hpp"
#include "xstage/sched/moe_scheduler.hpp"

namespace xstage::moe_kernel {

// One scheduled tile as every role needs it (published by the producer; kind_row < 0: no more tiles).
struct TileDesc {
  int kind_row;  // kind (1 = L2) << 30 | gate-up interleaved (1) << 29 | row
  int n;         // N tile
  int expert;    // local expert
  int valid;     // rows of the tile holding tokens
  __device__ __forceinline__ bool end() const { return kind_row < 0; }
  __device__ __forceinline__ bool l2() const { return (kind_row >> 30) & 1; }
  // A half Linear-1 tile whose weight boxes the producer loaded gate-up interleaved (KernelParams::half_wide).
  __device__ __forceinline__ bool interleaved() const { return (kind_row >> 29) & 1; }
  __device__ __forceinline__ int row() const { return kind_row & ((1 << 29) - 1); }
};
inline constexpr int kTileRing = 4;  // descriptors the producer may run ahead

// Named barriers (kernel/barrier.cuh; 0 is __syncthreads). kHalfTileAmax: the two consumer warpgroups (256
// threads) exchange a half tile's row amax before quantizing h.
// kTurn + wg: "warpgroup wg may issue its next wgmma batch" (PingPong).
// kEpilogueDone: the epilogue warps, after their last combine stores, before the completion signal.
// kBorrowStage: the two consumer warpgroups, both done reading a 256-column Linear-2 tile's last stage before
// block 1 of its output is staged there (KernelParams::l2_borrow).
enum class Bar : uint32_t { kHalfTileAmax = 1, kTurn = 2, kEpilogueDone = 4, kBorrowStage = 5 };

// Warp roles of warpgroup 0 (the consumers are warpgroups 1 and 2).
enum Warp : int { kProducerWarp = 0, kL1EpilogueWarp = 1 };
inline constexpr int kEpilogueWarps = 3;  // warps 1-3 of warpgroup 0

template <class C>
struct SharedStorage {
  // A boxes (W4A8: none, its token box is in the stage's B buffer; a 16-byte placeholder per stage).
  alignas(1024) uint8_t a[C::kStages][C::kInt4 ? 16 : C::kABytes];
  alignas(1024) uint8_t b[C::kStages][C::kBStageBytes];  // e4m3 B: L1 gate box then up box, L2 one box (W4A8: above)
  // Epilogue staging between the MMA warpgroups and the epilogue warps (double-buffered):
  //   L1 tile: h codes [128][128] in the TMA 128 B swizzle at offset 0, the 128 row scales at kStageScales;
  //            (bf16: h [128][128] bf16 as two 64-column boxes in the 128 B swizzle, the second at kHPanelBytes);
  //   L2 tile: bf16 [128][128], 16-byte chunk c of row r at chunk c ^ (r % 8) (conflict-free both ways).
  alignas(1024) uint8_t stage[C::kEpiSlots][C::kStageBytes];
  alignas(128) float sa[C::kStages][C::kBf16 ? 1 : kBlockM];  // TMA destinations: 128-byte aligned (bf16: unused)
  // W4A8 weight scales of the stage, per column (gate 128, up 128; L2: 128), by TMA. (W8A8 has one 128x128
  // block scale per tile and k block, read by the MMA warpgroups from global memory.)
  alignas(128) float sb[C::kStages][C::kInt4 ? 2 * kBlockN : 1];
  uint64_t full[C::kStages], empty[C::kStages];
  uint64_t stage_full[C::kEpiSlots], stage_empty[C::kEpiSlots];
  // KernelParams::l2_borrow: a 256-column Linear-2 tile's first hand-off, block 1 in the B buffer of its last stage
  // (consumers -> epilogue warps; the stage goes back to the producer through its empty barrier).
  uint64_t borrow_full;
  uint32_t borrow_off;  // the staged block's byte offset in b
  // The schedule, walked once by the producer and published tile by tile: the other roles read a tile's
  // descriptor here instead of walking the scheduler themselves (a walk is three binary searches of
  // dependent global loads: ~2 us between tiles in the call-4 trace).
  TileDesc tiles[kTileRing];
  uint64_t tile_full[kTileRing], tile_empty[kTileRing];
  // The stage's A operand of the other formats, W4A8's token box (the B operand of its transposed tiles).
  __device__ __forceinline__ uint8_t* tokens(int s) {
    if constexpr (C::kInt4)
      return b[s] + C::kTokensOffset;
    else
      return a[s];
  }
};
static_assert(sizeof(SharedStorage<ConfigT<MoeWeightFormat::kFp8>>) <= 227 * 1024, "shared memory of one CTA per SM");
static_assert(sizeof(SharedStorage<ConfigT<MoeWeightFormat::kInt4>>) <= 227 * 1024, "shared memory of one CTA per SM");
static_assert(sizeof(SharedStorage<ConfigT<MoeWeightFormat::kBf16>>) <= 227 * 1024, "shared memory of one CTA per SM");

// ---------------------------------------------------------------- small device helpers
using ptx::tma_load_2d;

// tma_load_2d with an L2 cache policy (ptx::l2_policy_*; MoeLayerParams::l2_hints).
__device__ __forceinline__ void tma_load_2d_hint(const CUtensorMap* map, uint64_t* bar, void* dst, int c0, int c1,
                                                 uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%3, "
      "%4}], [%2], %5;\n" ::"r"(ptx::smem_addr(dst)),
      "l"(map), "r"(ptx::smem_addr(bar)), "r"(c0), "r"(c1), "l"(policy)
      : "memory");
}
// A weight load: with the hint when one is asked for (policy != 0), else the plain load.
__device__ __forceinline__ void tma_load_weights(const CUtensorMap* map, uint64_t* bar, void* dst, int c0, int c1,
                                                 uint64_t policy) {
  if (policy != 0)
    tma_load_2d_hint(map, bar, dst, c0, c1, policy);
  else
    tma_load_2d(map, bar, dst, c0, c1);
}

// A combine store: with the hint when one is asked for (policy != 0), else the plain store.
__device__ __forceinline__ void store_combine(void* dst, uint4 v, uint64_t policy) {
  if (policy != 0)
    ptx::st_weak_v4_hint(dst, v, policy);
  else
    ptx::st_weak_v4(dst, v);
}

__device__ __forceinline__ bool record_moe_error(MoeDeviceError* e, int code, int rank, int what, uint32_t expected,
                                                 uint32_t got) {
  if (e == nullptr || atomicCAS(&e->code, 0, code) != 0) return false;
  e->rank = rank;
  e->peer_or_row = what;
  e->expected = expected;
  e->got = got;
  __threadfence_system();
  return true;
}

// Waits (acquire) until a per-launch counter (zeroed before the launch) reaches `target`; false after the timeout,
// recorded as MoeDeviceError `code` with `what`: 2 = row p's Linear-1 tiles are all stored (what = the row).
__device__ __forceinline__ bool wait_counter(const uint32_t* ctr, uint32_t target, uint64_t timeout_ns,
                                             MoeDeviceError* err, int code, int rank, int what) {
  uint32_t got = kernel::signal_load_acquire(ctr);
  if (got >= target) return true;
  const uint64_t t0 = ptx::globaltimer_ns();
  while (true) {
    got = kernel::signal_load_acquire(ctr);
    if (got >= target) return true;
    if (ptx::globaltimer_ns() - t0 > timeout_ns) {
      record_moe_error(err, code, rank, what, target, got);  // no printf: see kernel/signal.cuh (ptxas C7510)
      return false;
    }
  }
}

__device__ __forceinline__ uint64_t desc(const void* smem, uint32_t byte_offset) {
  return ptx::make_desc_sw128(ptx::smem_addr(smem) + byte_offset, 16, 1024);
}

template <int N>
__device__ __forceinline__ void fence_regs(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) ptx::fence_operand(r[i]);
}

// A consumer warp's release of a stage it has read. In a CTA pair the peer's producer multicasts half of the A
// operand into this CTA's stage, so the release goes to the empty barrier of every CTA of the pair (each
// producer then knows both CTAs are done with the stage before it writes into both). cluster: 1 or 2.
__device__ __forceinline__ void release_stage(uint64_t* empty, int cluster) {
  if (cluster == 1) {
    ptx::mbar_arrive_release_cta(empty);
    return;
  }
  ptx::mbar_arrive_remote(empty, 0);
  ptx::mbar_arrive_remote(empty, 1);
}

// Strict alternation of the two consumer warpgroups' wgmma batches (FA3's ping-pong; MoeLayerParams::pingpong).
// Each batch is followed by a wait for it and an fp32 promotion the tensor cores cannot overlap within the
// warpgroup; left to themselves the two warpgroups drift into phase (both wait for the same stage) and promote
// at the same time. With the turn, warpgroup wg issues only after the other has issued its previous batch, so one
// promotes while the other's batch runs. Both walk the same tiles with the same batch count per tile (full and
// half tiles alike), so the turns pair up: warpgroup 0 starts holding the turn; at the end it takes warpgroup 1's
// last hand-off (finish), unless it never issued a batch (then neither did warpgroup 1). Measured: no faster
// than free-running warpgroups, before (s20: -4 % with 3 stages, 0.97-1.03x with 4) and after the uniform
// descriptors (s22: 0.91-1.07x); off by default (docs/MOE.md, "The wgmma issue stream").
struct PingPong {
  int wg;
  bool on, held;
  __device__ __forceinline__ PingPong(int wg_, bool on_) : wg(wg_), on(on_), held(wg_ == 0) {}
  __device__ __forceinline__ void wait() {
    if (!on) return;
    if (!held) kernel::bar_sync(Bar::kTurn, 256, wg);
    held = false;
  }
  __device__ __forceinline__ void pass() {
    if (on) kernel::bar_arrive(Bar::kTurn, 256, 1 - wg);
  }
  __device__ __forceinline__ void finish() {
    if (on && wg == 0 && !held) kernel::bar_sync(Bar::kTurn, 256, 0);
  }
};
// No turn (the mainloop probe's free-running variants).
struct NoTurn {
  __device__ __forceinline__ void wait() {}
  __device__ __forceinline__ void pass() {}
};

// scratch = A_wg[64 x 128] * B[128 x 128]^T over one 128-deep block (4 k steps of 32 bytes).
// kAcc = 64: m64n128 (a warpgroup's rows of a full tile); 32: m64n64 (its columns of a half tile).
// Descriptors: built once per block, the k steps add constants (ptx::desc_advance); with a_wg and b warp-uniform
// (ptx::warpgroup_idx_uniform, uniform tile descriptors) they stay in uniform registers (ncu, s21 call 16: the
// per-step rebuild was ~150 dependent instructions per K block, 36 % of the consumer warps' samples).
// issue_block issues the batch into acc and commits it without waiting (the caller waits with wgmma_wait<N>);
// mma_block also waits for it. `turn` (PingPong or NoTurn) is taken before the batch is issued and passed on once
// it is.
template <int kAcc, class Turn>
__device__ __forceinline__ void issue_block(float (&acc)[kAcc], const uint8_t* a_wg, const uint8_t* b, Turn& turn) {
  const uint64_t da = desc(a_wg, 0), db = desc(b, 0);
  fence_regs(acc);
  turn.wait();
  ptx::wgmma_fence();
#pragma unroll
  for (int k = 0; k < kBlockK / 32; ++k)
    ptx::WgmmaFp8<2 * kAcc>::ss(acc, ptx::desc_advance(da, k * 32), ptx::desc_advance(db, k * 32), k > 0);
  ptx::wgmma_commit();
  turn.pass();
  fence_regs(acc);
}
template <int kAcc, class Turn>
__device__ __forceinline__ void mma_block(float (&acc)[kAcc], const uint8_t* a_wg, const uint8_t* b, Turn& turn) {
  issue_block(acc, a_wg, b, turn);
  ptx::wgmma_wait<0>();
  fence_regs(acc);
}
template <int kAcc>
__device__ __forceinline__ void mma_block(float (&acc)[kAcc], const uint8_t* a_wg, const uint8_t* b) {
  NoTurn free;
  mma_block(acc, a_wg, b, free);
}

// bf16: acc += A_wg[64 x 64] * B[128 x 64]^T over one 64-deep block: 4 k steps of 16 elements = 32 bytes
// inside the 128-byte swizzled rows (the descriptors of mma_block). Issued only: the caller commits the
// batch (one per stage, gate and up together in Linear-1) and waits for it when the stage must be released.
__device__ __forceinline__ void mma_block_bf16(float (&acc)[64], const uint8_t* a_wg, const uint8_t* b) {
  const uint64_t da = desc(a_wg, 0), db = desc(b, 0);
#pragma unroll
  for (int k = 0; k < 4; ++k)
    ptx::Wgmma<128, ptx::MmaType::kBF16>::ss(acc, ptx::desc_advance(da, k * 32), ptx::desc_advance(db, k * 32), 1);
}

// final += scratch * (a_scale[row] * b_scale): rows r0 (elements with (i/2)%2 == 0) and r0 + 8.
// Every promotion is an explicit fmaf: left to contraction, the compiler split the half tiles' product and sum
// across the join of l1_mainloop's paths (FMUL + FADD: twice the instructions on the consumers' chain and a second
// rounding; ncu of s43 call 6), so the rounding also depended on the code path a tile took.
template <int kAcc>
__device__ __forceinline__ void promote(float (&fin)[kAcc], const float (&acc)[kAcc], float s0, float s1) {
#pragma unroll
  for (int i = 0; i < kAcc; ++i) fin[i] = fmaf(acc[i], ((i / 2) % 2) ? s1 : s0, fin[i]);
}
// W4A8 (rs_mainloop): final += scratch * (w_scale[row] * x_scale[col]), x_scale per column (token) from shared memory
// (sb: the scale of the fragment's column 0). The scratch holds the products with the weights' e4m3 subnormal codes,
// in units of 2^-9 (int4sm_x8_to_e4m3x8): s0 and s1, the weight rows' scales, carry the 2^9 back (kInt4SmUnit: exact,
// a power of two).
template <int kAcc>
__device__ __forceinline__ void promote_cols(float (&fin)[kAcc], const float (&acc)[kAcc], float s0, float s1,
                                             const float* sb, int tid) {
#pragma unroll
  for (int i = 0; i < kAcc; i += 4) {
    const float2 b = *reinterpret_cast<const float2*>(sb + kernel::frag_col(i, tid));
    fin[i] = fmaf(acc[i], s0 * b.x, fin[i]);
    fin[i + 1] = fmaf(acc[i + 1], s0 * b.y, fin[i + 1]);
    fin[i + 2] = fmaf(acc[i + 2], s1 * b.x, fin[i + 2]);
    fin[i + 3] = fmaf(acc[i + 3], s1 * b.y, fin[i + 3]);
  }
}

// ---------------------------------------------------------------- W4A8: int4 -> e4m3
// Eight int4 values in the kernel's packed sign-magnitude form (moe::pack_int4_sm; values in [-7, 7]) -> eight e4m3
// codes whose values are the integers times 2^-9: an e4m3 code s.0000.mmm is the subnormal (-1)^s m 2^-9, exactly, so
// a value's sign and 3-bit magnitude only need to land in bits 7 and 0-2 of its byte. Byte i of w holds value i's
// sign (bit 7) and magnitude (bits 0-2), value 4 + i's magnitude (bits 4-6) and value 4 + (i + 3) % 4's sign (bit 3),
// so values 0-3 are w masked and values 4-7 w rotated by a nibble and masked: 3 integer instructions per 8 weights
// where the two's complement form needed two byte tables (session 45: 6 prmt and 4 others, the mainloop probe keeps it
// as int4x8_to_e4m3x8; the expansion runs on the integer pipes, which bounded it). The tensor cores multiply a normal
// activation code by a subnormal weight code exactly (tests/moe_gpu/test_fp8_wgmma_gpu.cu); the 2^-9 goes back in
// with the row scales the mainloops pass to promote_cols (kInt4SmUnit). The layer's outputs are not bit-identical to
// the two's complement form's: where activation codes are subnormal too the tensor cores round differently
// (docs/MOE-NOTEBOOK.md "Session 46"; the error against the reference moved by -2 % to +2 %).
__device__ __forceinline__ void int4sm_x8_to_e4m3x8(uint32_t w, uint32_t& lo, uint32_t& hi) {
  lo = w & 0x87878787u;
  hi = __funnelshift_r(w, w, 4) & 0x87878787u;
}
// ---------------------------------------------------------------- W4A8: the swapped tile (weights as the A operand)
// A W4A8 tile is computed transposed, C^T = W X^T: its weight rows are wgmma's A operand, expanded from int4 in
// registers (the RS form), and its token rows the B operand, straight from the stage's A box (the same 128 B swizzled
// rows, N = 128 tokens for a full tile, 64 for a half tile, 32 for a quarter tile). Nothing writes expanded weights
// anywhere: a stage carries half a byte per weight, and no shared-memory stores sit beside the tensor cores' reads
// (docs/MOE-NOTEBOOK.md "Session 46", items 8-9, "Session 47"). The weights are in the fragment layout (moe::pack_int4_frag,
// pack_int4_weights): 4 KB blocks of 64 rows x 128 K, a K block's row blocks adjacent, from which each thread's 32
// bytes are its A fragments.
// A stage holds four blocks: [gate rows 0-63, 64-127, up rows 0-63, 64-127] of a Linear-1 tile, or output columns
// [0, 64), [64, 128), [128, 192), [192, 256) of a 256-column Linear-2 tile (a 128-column one: the first two).
// Warpgroup wg computes blocks wg (into f0) and 2 + wg (into f1) against all the tile's tokens. The producer loads
// the blocks by TMA through maps of the layout's bytes as 256-byte rows (kInt4MapRow; moe_layer.cpp). Per thread:
// weight rows r0 and r0 + 8 of the warpgroup's 64 (accumulators with (i / 2) % 2 == 0 and 1), tokens
// kernel::frag_col(i, tid).

// This thread's A fragments of the four k steps of one block: words [4 tid, +4) and [512 + 4 tid, +4); word 2 s + h
// gives fragment registers h (values 0-3) and 2 + h (values 4-7) of step s (moe::int4_frag_slot).
__device__ __forceinline__ void int4_frags(uint32_t (&af)[4][4], const uint8_t* blk, int tid) {
  const uint4 w0 = *reinterpret_cast<const uint4*>(blk + tid * 16);
  const uint4 w1 = *reinterpret_cast<const uint4*>(blk + 2048 + tid * 16);
  const uint32_t w[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    int4sm_x8_to_e4m3x8(w[2 * k], af[k][0], af[k][2]);
    int4sm_x8_to_e4m3x8(w[2 * k + 1], af[k][1], af[k][3]);
  }
}
__device__ __forceinline__ void fence_frags(uint32_t (&af)[4][4]) {
#pragma unroll
  for (int k = 0; k < 4; ++k)
#pragma unroll
    for (int j = 0; j < 4; ++j) ptx::fence_operand(af[k][j]);
}
// acc = W_blk[64 x 128] * X[N x 128]^T over one K block (4 RS k steps), committed, not waited for. The fragments must
// stay as they are until the batch is waited for: the caller fences them after its wait (fence_frags), which keeps
// the compiler from giving their registers to other values while the tensor cores still read them.
template <int kAcc, class Turn>
__device__ __forceinline__ void issue_rs(float (&acc)[kAcc], const uint32_t (&af)[4][4], const uint8_t* tokens,
                                         Turn& turn) {
  const uint64_t db = desc(tokens, 0);
  fence_regs(acc);
  turn.wait();
  ptx::wgmma_fence();  // the fragments' register writes before the tensor cores read them
#pragma unroll
  for (int k = 0; k < 4; ++k) ptx::WgmmaFp8<2 * kAcc>::rs(acc, af[k], ptx::desc_advance(db, k * 32), k > 0);
  ptx::wgmma_commit();
  turn.pass();
  fence_regs(acc);
}

// The swapped mainloop (W4A8, every tile kind): per K block the warpgroup's block wg (and, kTwo, block 2 + wg), each
// expanded, issued, waited for and promoted with the weight rows' group scales (the stage's sb: 128 per pair of
// blocks) times the tokens' scales (the stage's sa, per column: promote_cols). The stage of block kb is released in
// the shadow of block kb + 1's first batch; keep_last: l1_mainloop's (a borrowed Linear-2 stage).
template <class C, int kAcc, bool kTwo, class S, class WaitFull>
__device__ __forceinline__ int rs_mainloop(S& sh, kernel::PipeState<C::kStages>& ps, float (&f0)[kAcc],
                                           float (&f1)[kAcc], int wg, int KB, int tid, int cluster, PingPong& turn,
                                           WaitFull&& wait_full, bool keep_last) {
  const int r0 = 16 * (tid / 32) + (tid % 32) / 4;
  float acc[kAcc];
  uint32_t af[4][4];
  int held = -1;
  for (int kb = 0; kb < KB; ++kb) {
    wait_full(kb);
    const uint8_t* w = sh.b[ps.stage];
    const float* ws = sh.sb[ps.stage];
    const float* ts = sh.sa[ps.stage];
    // (the 2^9 of the packed form's e4m3 subnormal codes folded into the row scales, once per K block)
    int4_frags(af, w + wg * kInt4BlockBytes, tid);
    issue_rs(acc, af, sh.tokens(ps.stage), turn);
    release_held(sh, held, cluster, tid);
    ptx::wgmma_wait<0>();
    fence_regs(acc);
    fence_frags(af);
    promote_cols(f0, acc, ws[64 * wg + r0] * kInt4SmUnit, ws[64 * wg + r0 + 8] * kInt4SmUnit, ts, tid);
    if constexpr (kTwo) {
      int4_frags(af, w + (2 + wg) * kInt4BlockBytes, tid);
      issue_rs(acc, af, sh.tokens(ps.stage), turn);
      ptx::wgmma_wait<0>();
      fence_regs(acc);
      fence_frags(af);
      promote_cols(f1, acc, ws[128 + 64 * wg + r0] * kInt4SmUnit, ws[128 + 64 * wg + r0 + 8] * kInt4SmUnit, ts, tid);
    }
    held = ps.stage;
    ps.advance();
  }
  if (keep_last) return held;
  release_held(sh, held, cluster, tid);
  return -1;
}

// silu(g) = g * sigmoid(g) = (g / 2)(1 + tanh(g / 2)): one MUFU op (tanh.approx, relative error ~2^-11, far below
// the FP8 rounding of h that follows) where exp2 and a reciprocal took two. The W8A8 / W4A8 Linear-1 tile ends in 64
// of these per thread while the tensor cores idle; on DiT-MoE-XL (9 K blocks per tile) the layer took 0.87-0.94x the
// time with this form (session 59, results/moe/runs/s59). Large |g|: tanh saturates to +-1, h = g or -0.
__device__ __forceinline__ float silu_fast(float g) {
  const float hg = 0.5f * g;
  float t;
  asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(hg));
  return fmaf(hg, t, hg);
}

// The swapped Linear-1 epilogue: h = silu(g) * u (tokens at or past `valid`: 0), each token's amax over the tile's 128
// h columns (one 1x128 scale block), the codes into the slot's TMA 128 B swizzle layout with the tokens as its rows
// (the layout of every other format's h tile) and the token scales at kStageScales. A token's 128 columns lie over 2
// rows of a thread, the 8 lanes that share its column, 4 warps and 2 warpgroups: shuffles, then the slot past the
// scales ([8 warps][128 tokens], then the 128 maxima) across two named barriers of the 256 consumer threads. Tokens
// past N (a half tile's rows [64, 128)) get zero codes and the floor's scale, what a full tile writes for its padding.
template <class C, int kAcc>
__device__ __forceinline__ void rs_l1_epilogue(uint8_t* st, float (&fg)[kAcc], const float (&fu)[kAcc], int valid,
                                               int wg, int tid) {
  constexpr int kN = 2 * kAcc;  // tokens of the batch: 128 or 64
  const int r0 = 16 * (tid / 32) + (tid % 32) / 4, lane = tid % 32, warp = 4 * wg + tid / 32;
  float cm[kAcc / 2];  // this thread's column maxima: cm[2 q + b] is token 8 q + 2 (lane % 4) + b
#pragma unroll
  for (int i = 0; i < kAcc; ++i) {
    const float gt = fg[i];
    fg[i] = kernel::frag_col(i, tid) < valid ? silu_fast(gt) * fu[i] : 0.f;  // swiglu_amax's
  }
#pragma unroll
  for (int q = 0; q < kAcc / 4; ++q) {
    cm[2 * q] = fmaxf(fabsf(fg[4 * q]), fabsf(fg[4 * q + 2]));
    cm[2 * q + 1] = fmaxf(fabsf(fg[4 * q + 1]), fabsf(fg[4 * q + 3]));
  }
#pragma unroll
  for (int j = 0; j < kAcc / 2; ++j)
#pragma unroll
    for (int m = 4; m < 32; m *= 2) cm[j] = fmaxf(cm[j], __shfl_xor_sync(0xffffffffu, cm[j], m));
  float* red = reinterpret_cast<float*>(st + C::kStageScales + kBlockM * sizeof(float));
  float* amax = red + 8 * kBlockM;
  float* hs = reinterpret_cast<float*>(st + C::kStageScales);
  if (lane < 4)
#pragma unroll
    for (int q = 0; q < kAcc / 4; ++q)
      *reinterpret_cast<float2*>(red + warp * kBlockM + 8 * q + 2 * lane) = make_float2(cm[2 * q], cm[2 * q + 1]);
  kernel::bar_sync(Bar::kHalfTileAmax, 256);
  const int T = 128 * wg + tid;  // 0-255: thread T reduces token T
  if (T < kBlockM) {
    float a = 0.f;
    if (T < kN)
#pragma unroll
      for (int w = 0; w < 8; ++w) a = fmaxf(a, red[w * kBlockM + T]);
    a = fmaxf(a, 1e-4f);  // moe::kAmaxFloor
    amax[T] = a;
    hs[T] = a / 448.0f;
  }
  kernel::bar_sync(Bar::kHalfTileAmax, 256);
  // Token 8 q + t (t = 2 (lane % 4) + b < 8) keeps its row's swizzle t over q: four base addresses (stage_l2_cols').
  uint8_t* base[2][2];
#pragma unroll
  for (int rr = 0; rr < 2; ++rr)
#pragma unroll
    for (int b = 0; b < 2; ++b) {
      const uint32_t col = uint32_t(64 * wg + r0 + 8 * rr), t = 2 * uint32_t(lane % 4) + b;
      base[rr][b] = st + t * 128 + (((col / 16) ^ t) * 16) + col % 16;
    }
#pragma unroll
  for (int q = 0; q < kAcc / 4; ++q) {
    const float2 am = *reinterpret_cast<const float2*>(amax + 8 * q + 2 * (lane % 4));
    const float i0 = 448.0f / am.x, i1 = 448.0f / am.y;
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const int i = 4 * q + 2 * rr;
      const __nv_fp8x2_storage_t c =
          __nv_cvt_float2_to_fp8x2(make_float2(fg[i] * i0, fg[i + 1] * i1), __NV_SATFINITE, __NV_E4M3);
      base[rr][0][q * 8 * 128] = uint8_t(c & 0xFF);
      base[rr][1][q * 8 * 128] = uint8_t(c >> 8);
    }
  }
  if constexpr (kN < kBlockM) {  // padding tokens [kN, 128): zero codes (8 or 12 KB over the 256 threads)
    uint4* z = reinterpret_cast<uint4*>(st + kN * 128);
#pragma unroll
    for (int j = 0; j < (kBlockM - kN) * 8 / 256; ++j) z[T + 256 * j] = make_uint4(0u, 0u, 0u, 0u);
  }
}

// The swapped Linear-2 staging: the part's outputs (output columns col0 + r0 (+ 8) of the 128-column block, tokens
// frag_col) as bf16 into the L2 slot layout stage_l2_rows writes (token rows of 256 B, 16-byte chunk c at c ^ (row %
// 8)), one 2-byte store each: the combine stores read token rows.
template <class C, int kAcc>
__device__ __forceinline__ void stage_l2_cols(uint8_t* st, const float (&fa)[kAcc], int col0, int tid) {
  // Token 8 q + t (t = 2 (lane % 4) + b < 8) keeps its row's swizzle t over q: four base addresses, q in immediates
  // (computed per element, the addresses spilled the 64-accumulator parts).
  const uint32_t r0 = 16 * (uint32_t(tid) / 32) + (uint32_t(tid) % 32) / 4, t2 = 2 * (uint32_t(tid) % 4);
  uint8_t* base[2][2];
#pragma unroll
  for (int rr = 0; rr < 2; ++rr)
#pragma unroll
    for (int b = 0; b < 2; ++b) {
      const uint32_t col = uint32_t(col0) + r0 + 8 * rr, t = t2 + b;
      base[rr][b] = st + t * C::kL2Pitch + (((col / 8) ^ t) * 16) + (col % 8) * 2;
    }
#pragma unroll
  for (int i = 0; i < kAcc; ++i)
    *reinterpret_cast<__nv_bfloat16*>(base[(i / 2) % 2][i % 2] + (i / 4) * 8 * C::kL2Pitch) = __float2bfloat16_rn(fa[i]);
}

// ---------------------------------------------------------------- phase 1: dispatch
// Rows of H elements: H bytes of e4m3 codes plus H/128 scales, or (bf16) 2H bytes and no scales.
// One warp per routed row (token, slot): its destination is computed once (lane 0, broadcast), the lanes copy the
// row's 16-byte chunks and its K-block scales. (The first version walked (row, chunk) pairs with a 64-bit division
// and a destination lookup per 16-byte chunk: instruction-bound.)
template <class C, class P>
__device__ void dispatch(const P& p, int g, int c) {
  const int s = p.view.first_rank + g, H = p.hidden, K = p.topk, KB = H / kBlockK;
  const int row_bytes = H * C::kElemBytes;
  const int32_t* idx = p.topk_index[g];
  const int32_t* pos = p.topk_pos[g];
  const int lane = threadIdx.x % 32, warps = blockDim.x / 32;
  const int64_t rows = int64_t(p.tokens[g]) * K;
  const int chunks = row_bytes / 16;
  for (int64_t q = int64_t(c) * warps + threadIdx.x / 32; q < rows; q += int64_t(p.ctas_per_rank) * warps) {
    moe::DispatchDest d{};
    if (lane == 0) d = p.dl.dest(s, idx[q], pos[q]);
    d.rank = __shfl_sync(0xffffffffu, d.rank, 0);
    d.recv_row = __shfl_sync(0xffffffffu, d.recv_row, 0);
    const int t = int(q / K);
    const uint4* src = reinterpret_cast<const uint4*>(p.x[g] + int64_t(t) * row_bytes);
    uint8_t* dst = p.recv_x.template at<uint8_t>(d.rank, size_t(d.recv_row) * row_bytes);
    for (int ch = lane; ch < chunks; ch += 32) ptx::st_weak_v4(dst + size_t(ch) * 16, src[ch]);
    if constexpr (!C::kBf16) {
      for (int kb = lane; kb < KB; kb += 32)
        *p.recv_sa.template at<float>(d.rank, (size_t(kb) * p.rows_cap + d.recv_row) * sizeof(float)) =
            p.x_scale[g][int64_t(t) * KB + kb];
    }
    if (lane == 0)
      *p.recv_meta.template at<RecvMeta>(d.rank, size_t(d.recv_row) * sizeof(RecvMeta)) = RecvMeta{s, t, int(q % K), 0};
  }
  __threadfence_system();  // this thread's stores are performed before the CTA's release below
  __syncthreads();
  if (threadIdx.x == 0)
    for (int d = 0; d < p.view.world; ++d)
      kernel::signal_add_release(p.signal.template at<uint32_t>(d, runtime::signal_offset(p.view.world, kSlotDispatch, s)));
}

// Producer, before the L1 tile of row `row` (local expert le, in-expert row m): the dispatch of every
// source that owns rows of the tile is complete. `seen` caches sources already waited for.
template <class P>
__device__ void wait_dispatch(const P& p, int rank, int le, int m, int valid, uint32_t& seen) {
  const int e = p.dl.place.global_of(rank, le);
  const int lo = m * kBlockM, hi = lo + valid;  // rows [lo, hi) of the expert's block
  for (int s = 0; s < p.view.world; ++s) {
    if (seen & (1u << s)) continue;
    const int b = p.dl.base(s, e), n = p.dl.count(s, e);
    if (n == 0 || b >= hi || b + n <= lo) continue;
    const uint32_t* ctr = p.signal.template at<uint32_t>(rank, runtime::signal_offset(p.view.world, kSlotDispatch, s));
    // (the target from device memory, once per source and CTA: a captured call replays with the epoch of its replay)
    kernel::signal_wait_geq(ctr, *p.dispatch_epoch, p.timeout_ns, p.team_err, kernel::SignalWaitInfo{rank, s, kSlotDispatch});
    seen |= 1u << s;  // a timeout is recorded once; the kernel goes on (results are then wrong, and reported)
  }
}

// ---------------------------------------------------------------- the fused kernel
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, const void* src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(map),
               "r"(ptx::smem_addr(src)), "r"(c0), "r"(c1)
               : "memory");
}

// Position in the epilogue staging ring; the MMA warpgroups and both epilogue warps walk every tile.

// The trace record of this CTA's tile number `i` (nullptr past the capacity or with the trace off).
template <bool kTrace, class P>
__device__ __forceinline__ uint64_t* trace_rec(const P& p, int i) {
  if constexpr (!kTrace) return nullptr;
  return i < p.trace_cap ? p.trace + (size_t(blockIdx.x) * p.trace_cap + i) * kTraceWords : nullptr;
}

// A warpgroup's part of an L2 tile as bf16 into a staging slot: 64 rows from slot row row0, 2 kAcc columns
// from column col0 (a full tile: rows 64 wg, all 128 columns; a half tile: rows 0, columns 64 wg). 16-byte chunk
// c of row r at chunk c ^ (r % 8) (conflict-free for these writes and for the L2 epilogue warp's row reads).
template <class C, int kAcc>
__device__ __forceinline__ void stage_l2_rows(uint8_t* st, const float (&fa)[kAcc], int row0, int col0, int tid) {
  const int r0 = 16 * (tid / 32) + (tid % 32) / 4;
#pragma unroll
  for (int i = 0; i < kAcc; i += 2) {
    const int r = row0 + r0 + 8 * ((i / 2) % 2), col = col0 + kernel::frag_col(i, tid);
    *reinterpret_cast<uint32_t*>(st + r * C::kL2Pitch + (((col / 8) ^ (r % 8)) * 16) + (col % 8) * 2) =
        kernel::pack2<__nv_bfloat16>(fa[i], fa[i + 1]);
  }
}

// ---------------------------------------------------------------- W8A8 / W4A8 consumer pieces
// A tile's part of one consumer warpgroup: a full tile (more than 64 rows of tokens) gives each warpgroup its
// 64 rows [64 wg, +64) x all 128 columns (kAcc = 64 accumulators, m64n128 batches); a half tile (at most 64
// rows, e.g. an expert's last partial row block) gives both warpgroups rows [0, 64), warpgroup wg columns
// [64 wg, +64) (kAcc = 32, m64n64): the padding half is not computed. The producer's loads are the same.
struct TilePart {
  int row0, col0;  // first tile row / first N column of this warpgroup's part
};
__device__ __forceinline__ TilePart tile_part(bool half, int wg) { return half ? TilePart{0, 64 * wg} : TilePart{64 * wg, 0}; }

// A consumer warp's release of the stage of the previous K block, issued in the shadow of the current block's first
// batch (after its commit, before its wait): the warp is idle there, while a release after the wait sat between
// a batch and the promotion the next batch waits for (ncu, s22 call 4: the cluster test, its constant load and
// branch were ~4 % of the consumer warps' L1-loop samples). `held` < 0: nothing held.
template <class S>
__device__ __forceinline__ void release_held(S& sh, int held, int cluster, int tid) {
  if (held < 0) return;
  __syncwarp();  // every lane's reads of that stage (sa, sb) before the release
  if ((tid % 32) == 0) release_stage(&sh.empty[held], cluster);
}

// Data-bound K blocks (KernelParams::early_release): true when the next K block's stage is not full yet, i.e. the
// warp would wait for it while holding the current stage, which the producer could already be refilling. Tested
// in the shadow of the current block's last batch; warp-uniform (the callers release by one lane after __syncwarp).
template <class C, class S>
__device__ __forceinline__ bool next_stage_late(S& sh, kernel::PipeState<C::kStages> ps) {
  ps.advance();
  return __any_sync(0xffffffffu, !ptx::mbar_test_wait_acquire_cta(&sh.full[ps.stage], ps.phase));
}

// Linear-1 mainloop (W8A8; W4A8 runs rs_mainloop): per K block the gate and up scratch batches of the part, each promoted
// (fp32) into fg / fu; block kb's stage is released in the shadow of block kb + 1's gate batch (release_held),
// the last one after the loop. The warp holds at most two stages, so 3 stages cannot deadlock the producer.
// keep_last (a 256-column Linear-2 tile with KernelParams::l2_borrow): the last stage is returned instead of
// released, to stage the tile's second output block in; the epilogue warps release it once they have read it.
// early (KernelParams::early_release): where the next stage is late (next_stage_late), block kb's stage is released
// as soon as its last batch is done, before the warp waits for the next one (a data-bound tile then has all but
// the stage being read in flight instead of one fewer).
// together (W8A8 half tiles, kAcc = 32, KernelParams::half_together): the gate and up batches go out back to back
// into two scratches and are waited for once, so a K block's chain is one batch latency instead of two (a half
// tile's m64n64 batches are short: its K block is bound by that chain and the data, docs/MOE-NOTEBOOK.md "Session 29"). The
// promotion sequence of every element is the same, so the results are bit-identical.
// interleaved (W8A8 half tiles whose producer loaded the weight boxes gate-up interleaved, KernelParams::half_wide):
// one m64n128 batch per warpgroup and K block over its gate and up columns instead of two m64n64 ones: an m64n64
// batch reads as many A bytes from shared memory as B bytes, 128 B per cycle at the tensor rate beside the TMA
// writes, which bound a half tile's K block at about half the rate (32 CTAs streaming V4-Pro at 2K, s29 call 6).
template <class C, int kAcc, class S, class WaitFull>
__device__ __forceinline__ int l1_mainloop(S& sh, kernel::PipeState<C::kStages>& ps, float (&fg)[kAcc],
                                           float (&fu)[kAcc], TilePart pt, const float* s1g, const float* s1u,
                                           int KB1, int tid, int cluster, PingPong& turn, WaitFull&& wait_full,
                                           bool early, bool keep_last = false, bool together = false,
                                           bool interleaved = false) {
  const int r0 = 16 * (tid / 32) + (tid % 32) / 4;
  float acc[kAcc];
  int held = -1;
  for (int kb = 0; kb < KB1; ++kb) {
    wait_full(kb);
    const float a0 = sh.sa[ps.stage][pt.row0 + r0], a1 = sh.sa[ps.stage][pt.row0 + r0 + 8];
    const uint8_t* a = sh.a[ps.stage] + pt.row0 * kBlockK;
    const uint8_t* bg = sh.b[ps.stage] + pt.col0 * kBlockK;  // B rows = output columns; 8 KB steps keep the swizzle
    const uint8_t* bu = bg + C::kBBytes;
    bool late;  // release this block's stage at once (early), not in the shadow of the next block's first batch
    if constexpr (!C::kInt4 && kAcc == 32) {
      if (interleaved) {
        // Warpgroup wg's gate rows [64 wg, +64) and up rows [64 wg, +64) lie as one 128-row B operand at 16 KB x wg
        // (pt.col0 = 64 wg): one m64n128 batch, whose fragments i < 32 are the gate columns and i >= 32 the up
        // columns of the same (row, column) positions as the m64n64 fragments.
        float acc2[2 * kAcc];
        const float gs = __ldg(s1g + kb), us = __ldg(s1u + kb);
        issue_block(acc2, a, sh.b[ps.stage] + 2 * pt.col0 * kBlockK, turn);
        release_held(sh, held, cluster, tid);
        late = early && kb + 1 < KB1 && next_stage_late<C>(sh, ps);
        ptx::wgmma_wait<0>();
        fence_regs(acc2);
        if (late) release_held(sh, ps.stage, cluster, tid);  // the scales are in registers
        const float g0 = a0 * gs, g1 = a1 * gs, u0 = a0 * us, u1 = a1 * us;
#pragma unroll
        for (int i = 0; i < kAcc; ++i) {  // promote's arithmetic on each half
          fg[i] = fmaf(acc2[i], ((i / 2) % 2) ? g1 : g0, fg[i]);
          fu[i] = fmaf(acc2[kAcc + i], ((i / 2) % 2) ? u1 : u0, fu[i]);
        }
        held = late ? -1 : ps.stage;
        ps.advance();
        continue;
      }
      if (together) {
        float acc_u[kAcc];
        const float gs = __ldg(s1g + kb), us = __ldg(s1u + kb);
        issue_block(acc, a, bg, turn);
        issue_block(acc_u, a, bu, turn);
        release_held(sh, held, cluster, tid);
        late = early && kb + 1 < KB1 && next_stage_late<C>(sh, ps);
        ptx::wgmma_wait<0>();
        fence_regs(acc);
        fence_regs(acc_u);
        if (late) release_held(sh, ps.stage, cluster, tid);  // the scales are in registers
        promote(fg, acc, a0 * gs, a1 * gs);
        promote(fu, acc_u, a0 * us, a1 * us);
        held = late ? -1 : ps.stage;
        ps.advance();
        continue;
      }
    }
    {
      const float gs = __ldg(s1g + kb), us = __ldg(s1u + kb);
      issue_block(acc, a, bg, turn);
      release_held(sh, held, cluster, tid);
      ptx::wgmma_wait<0>();
      fence_regs(acc);
      promote(fg, acc, a0 * gs, a1 * gs);
      issue_block(acc, a, bu, turn);
      late = early && kb + 1 < KB1 && next_stage_late<C>(sh, ps);
      ptx::wgmma_wait<0>();
      fence_regs(acc);
      if (late) release_held(sh, ps.stage, cluster, tid);  // the scales are in registers
      promote(fu, acc, a0 * us, a1 * us);
    }
    held = late ? -1 : ps.stage;
    ps.advance();
  }
  if (keep_last) return held;
  release_held(sh, held, cluster, tid);
  return -1;
}

// Linear-2 mainloop (W8A8), one scratch accumulator: per K block one batch of the part, waited for and promoted into
// fa with the block's scale (MoeLayerParams::l2_scratches = 1);
// block kb's stage is released in the shadow of block kb + 1's batch (release_held), the last after the loop
// (keep_last, early: as l1_mainloop's).
template <class C, int kAcc, class S, class WaitFull>
__device__ __forceinline__ int l2_mainloop(S& sh, kernel::PipeState<C::kStages>& ps, float (&fa)[kAcc], TilePart pt,
                                           const float* s2, int KB2, int tid, int cluster, PingPong& turn,
                                           WaitFull&& wait_full, bool early, bool keep_last = false) {
  const int r0 = 16 * (tid / 32) + (tid % 32) / 4;
  float acc[kAcc];
  int held = -1;
  for (int kb = 0; kb < KB2; ++kb) {
    wait_full(kb);
    const float a0 = sh.sa[ps.stage][pt.row0 + r0], a1 = sh.sa[ps.stage][pt.row0 + r0 + 8];
    const float bs = __ldg(s2 + kb);
    issue_block(acc, sh.a[ps.stage] + pt.row0 * kBlockK, sh.b[ps.stage] + pt.col0 * kBlockK, turn);
    release_held(sh, held, cluster, tid);
    const bool late = early && kb + 1 < KB2 && next_stage_late<C>(sh, ps);
    ptx::wgmma_wait<0>();
    fence_regs(acc);
    if (late) release_held(sh, ps.stage, cluster, tid);
    promote(fa, acc, a0 * bs, a1 * bs);
    held = late ? -1 : ps.stage;
    ps.advance();
  }
  if (keep_last) return held;
  release_held(sh, held, cluster, tid);
  return -1;
}
// W8A8 Linear-2 mainloop with two scratch accumulators: block kb's batch is issued before block kb - 1's is
// promoted, so one batch of this warpgroup is always in flight and its own promotion does not idle the tensor
// cores (Linear-1 has no registers for this: gate, up and a scratch are 192 already). The promotion order (block
// 0, 1, ...) is the single-scratch order, so the result is the same bit for bit. The stage of block kb - 1 is
// released after block kb's batch is issued (the warpgroup holds two stages).
template <class C, int kAcc, class S, class WaitFull>
__device__ __forceinline__ void l2_mainloop_fp8(S& sh, kernel::PipeState<C::kStages>& ps, float (&fa)[kAcc],
                                                TilePart pt, const float* s2, int KB2, int tid, int cluster,
                                                PingPong& turn, WaitFull&& wait_full) {
  const bool warp_leader = (tid % 32) == 0;
  const int r0 = 16 * (tid / 32) + (tid % 32) / 4;
  float acc0[kAcc], acc1[kAcc];
  float sc[2][2];  // per scratch: its rows' a_scale * the block's b_scale
  int stg[2];      // per scratch: the stage its batch reads
  auto launch = [&](float (&d)[kAcc], int kb, int slot) {
    wait_full(kb);
    const float bs = __ldg(s2 + kb);
    sc[slot][0] = sh.sa[ps.stage][pt.row0 + r0] * bs;
    sc[slot][1] = sh.sa[ps.stage][pt.row0 + r0 + 8] * bs;
    stg[slot] = ps.stage;
    issue_block(d, sh.a[ps.stage] + pt.row0 * kBlockK, sh.b[ps.stage] + pt.col0 * kBlockK, turn);
    ps.advance();
  };
  auto retire = [&](float (&d)[kAcc], int slot) {  // d's batch is complete (after a wgmma wait)
    fence_regs(d);
    __syncwarp();  // every lane's reads of the stage (sa) before the release
    if (warp_leader) release_stage(&sh.empty[stg[slot]], cluster);
    promote(fa, d, sc[slot][0], sc[slot][1]);
  };
  launch(acc0, 0, 0);
  int kb = 1;
  for (; kb + 1 < KB2; kb += 2) {
    launch(acc1, kb, 1);
    ptx::wgmma_wait<1>();
    retire(acc0, 0);
    launch(acc0, kb + 1, 0);
    ptx::wgmma_wait<1>();
    retire(acc1, 1);
  }
  if (kb < KB2) {
    launch(acc1, kb, 1);
    ptx::wgmma_wait<1>();
    retire(acc0, 0);
    ptx::wgmma_wait<0>();
    retire(acc1, 1);
  } else {
    ptx::wgmma_wait<0>();
    retire(acc0, 0);
  }
}

// h = silu(g) * u into fg (rows at or past `valid` of the part: 0) and this thread's two rows' amax over the
// part's columns (reduced over the quad that shares a row), floored at moe::kAmaxFloor.
// silu by silu_fast (with expf and an IEEE division each element was a branchy ~25-instruction chain the compiler
// could not interleave, ~5 % of the consumer warps' samples at the end of every Linear-1 tile while the tensor cores
// idle: ncu, s22 call 4; then __expf and __fdividef, two MUFU ops, until session 59).
template <int kAcc>
__device__ __forceinline__ void swiglu_amax(float (&fg)[kAcc], const float (&fu)[kAcc], int valid, int tid,
                                            float (&amax)[2]) {
  const int r0 = 16 * (tid / 32) + (tid % 32) / 4;
  amax[0] = amax[1] = 0.f;
#pragma unroll
  for (int i = 0; i < kAcc; ++i) {
    const int r = r0 + 8 * ((i / 2) % 2);
    const float gt = fg[i];
    const float h = r < valid ? silu_fast(gt) * fu[i] : 0.f;  // padding rows: zeros
    fg[i] = h;
    amax[(i / 2) % 2] = fmaxf(amax[(i / 2) % 2], fabsf(h));
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    amax[r] = fmaxf(amax[r], __shfl_xor_sync(0xffffffffu, amax[r], 1));
    amax[r] = fmaxf(amax[r], __shfl_xor_sync(0xffffffffu, amax[r], 2));
    amax[r] = fmaxf(amax[r], 1e-4f);  // moe::kAmaxFloor
  }
}

// The part's h as e4m3 codes (one 1x128 scale per row: 448 / amax) into the slot's TMA 128 B swizzle layout of
// a {128 B, 128 rows} box: 16-byte chunk index XOR row % 8.
template <int kAcc>
__device__ __forceinline__ void quantize_h(uint8_t* st, const float (&fg)[kAcc], const float (&amax)[2], TilePart pt,
                                           int tid) {
  const int r0 = 16 * (tid / 32) + (tid % 32) / 4;
  const float inv[2] = {448.0f / amax[0], 448.0f / amax[1]};
#pragma unroll
  for (int i = 0; i < kAcc; i += 2) {
    const int rr = (i / 2) % 2, r = pt.row0 + r0 + 8 * rr, col = pt.col0 + kernel::frag_col(i, tid);
    const __nv_fp8x2_storage_t q =
        __nv_cvt_float2_to_fp8x2(make_float2(fg[i] * inv[rr], fg[i + 1] * inv[rr]), __NV_SATFINITE, __NV_E4M3);
    *reinterpret_cast<uint16_t*>(st + r * 128 + (((col / 16) ^ (r % 8)) * 16) + col % 16) = q;
  }
}

// bf16: one consumer warpgroup's part of a tile (rows [64 wg, 64 wg + 64)), up to a written staging slot (the
// caller hands it to the epilogue warps). Mainloop: per 64-deep K block one wgmma batch (Linear-1: gate and
// up, 8 x m64n128k16; Linear-2: 4) straight into the final fp32 accumulators; no promotion, so no wait per
// block: the batch stays in flight while the next stage is awaited and issued, and wait_group<1> after the
// next commit says the previous batch has read its stage, which every warp then releases. Then
//   L1: h = silu(g) * u (padding rows 0) rounded to bf16, into the slot as two TMA boxes of 64 columns in
//       the 128 B swizzle (columns 64..127 at kHPanelBytes), which the L1 epilogue warp stores as they are;
//   L2: bf16 rows, as for the other formats.
template <class C, class S>
__device__ __forceinline__ void consume_bf16_tile(S& sh, kernel::PipeState<C::kStages>& ps,
                                                  const kernel::PipeState<C::kEpiSlots>& es, const TileDesc& t,
                                                  int KB1, int KB2, int wg, int tid, int cluster) {
  const bool warp_leader = (tid % 32) == 0;
  const int r0 = 16 * (tid / 32) + (tid % 32) / 4;  // this thread's two fragment rows: r0, r0 + 8
  const int valid = t.valid - wg * 64;               // rows of this warpgroup holding tokens
  int prev = -1;                                     // stage of the batch still in flight
  auto release_prev = [&] {
    __syncwarp();
    if (warp_leader) release_stage(&sh.empty[prev], cluster);
  };
  if (!t.l2()) {
    float fg[64], fu[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) fg[i] = fu[i] = 0.f;
    for (int kb = 0; kb < KB1; ++kb) {
      ptx::mbar_wait_acquire_cta(&sh.full[ps.stage], ps.phase);
      const uint8_t* a_wg = sh.a[ps.stage] + wg * 64 * kBlockK;
      fence_regs(fg);
      fence_regs(fu);
      ptx::wgmma_fence();
      mma_block_bf16(fg, a_wg, sh.b[ps.stage]);
      mma_block_bf16(fu, a_wg, sh.b[ps.stage] + C::kBBytes);
      ptx::wgmma_commit();
      ptx::wgmma_wait<1>();  // the previous block's batch is complete: its stage has been read
      fence_regs(fg);
      fence_regs(fu);
      if (prev >= 0) release_prev();
      prev = ps.stage;
      ps.advance();
    }
    ptx::wgmma_wait<0>();
    fence_regs(fg);
    fence_regs(fu);
    release_prev();  // KB1 >= 2: there was a batch
#pragma unroll
    for (int i = 0; i < 64; ++i) {
      const int r = r0 + 8 * ((i / 2) % 2);
      const float gt = fg[i];
      fg[i] = r < valid ? gt / (1.0f + expf(-gt)) * fu[i] : 0.f;  // padding rows: zeros
    }
    ptx::mbar_wait_acquire_cta(&sh.stage_empty[es.stage], es.phase ^ 1);
    uint8_t* st = sh.stage[es.stage];
#pragma unroll
    for (int i = 0; i < 64; i += 2) {
      const int r = wg * 64 + r0 + 8 * ((i / 2) % 2), col = kernel::frag_col(i, tid);
      // box (col / 64), row r: 128 bytes, 16-byte chunk ((col % 64) / 8) XOR r % 8 (the TMA 128 B swizzle)
      const int off = (col / 64) * int(C::kHPanelBytes) + r * 128 + ((((col % 64) / 8) ^ (r % 8)) * 16) + (col % 8) * 2;
      *reinterpret_cast<uint32_t*>(st + off) = kernel::pack2<__nv_bfloat16>(fg[i], fg[i + 1]);
    }
  } else {
    float fa[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) fa[i] = 0.f;
    for (int kb = 0; kb < KB2; ++kb) {
      ptx::mbar_wait_acquire_cta(&sh.full[ps.stage], ps.phase);
      fence_regs(fa);
      ptx::wgmma_fence();
      mma_block_bf16(fa, sh.a[ps.stage] + wg * 64 * kBlockK, sh.b[ps.stage]);
      ptx::wgmma_commit();
      ptx::wgmma_wait<1>();
      fence_regs(fa);
      if (prev >= 0) release_prev();
      prev = ps.stage;
      ps.advance();
    }
    ptx::wgmma_wait<0>();
    fence_regs(fa);
    release_prev();
    ptx::mbar_wait_acquire_cta(&sh.stage_empty[es.stage], es.phase ^ 1);
    stage_l2_rows<C>(sh.stage[es.stage], fa, wg * 64, 0, tid);
  }
}

// Reader side of the tile ring: the next descriptor; the warp's lane 0 frees the slot once all lanes hold it.
template <class S>
__device__ __forceinline__ TileDesc read_tile(S& sh, kernel::PipeState<kTileRing>& ts, int lane) {
  ptx::mbar_wait_acquire_cta(&sh.tile_full[ts.stage], ts.phase);
  TileDesc d = sh.tiles[ts.stage];
  // Broadcast from lane 0: the same values, now known warp-uniform to the compiler (operand addresses derived
  // from the tile stay in uniform registers; see mma_block).
  d.kind_row = __shfl_sync(0xffffffffu, d.kind_row, 0);
  d.n = __shfl_sync(0xffffffffu, d.n, 0);
  d.expert = __shfl_sync(0xffffffffu, d.expert, 0);
  d.valid = __shfl_sync(0xffffffffu, d.valid, 0);
  __syncwarp();
  if (lane == 0) ptx::mbar_arrive_release_cta(&sh.tile_empty[ts.stage]);
  ts.advance();
  return d;
}

// kLean (KernelParams::lean): the same kernel compiled with every option that the defaults leave off fixed at its
// default (pingpong 0, l2_scratches 1, early_release 0, l2_prefetch 0, a_trim 0, merge_loads 1, l2_hints 0,
// half_together 1; a 256-column Linear-2 tile's second block staged in the borrowed stage, l2_borrow), so the other
// paths' code is not in the binary. Both Linear-2 widths (l2_wide: 128 columns where hidden / 128 is odd, e.g.
// DiT-MoE-XL; until session 55 those shapes ran the kernel holding every option's code). W8A8 and W4A8. The host
// launches it only where those values hold (lean_values_hold, moe_params.hpp).
template <class Sched, MoeWeightFormat kFormat, bool kTrace, bool kLean = false>
__global__ void __launch_bounds__(ConfigT<kFormat>::kThreads, 1) moe_fused_kernel(const __grid_constant__ KernelParams<Sched> p) {
  using C = ConfigT<kFormat>;
  static_assert(!kTrace || kFormat == MoeWeightFormat::kFp8, "the per-tile trace is compiled for W8A8 only");
  static_assert(!kLean || (kFormat != MoeWeightFormat::kBf16 && !kTrace), "the lean kernel: W8A8 and W4A8, untraced");
  using EpiState = kernel::PipeState<C::kEpiSlots>;
  // Dynamic shared memory starts at the CTA's shared window (no static shared memory here): 1024-aligned, as
  // the 128 B swizzle needs; checked, because the 4-stage layout has no room for manual alignment.
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  if (ptx::smem_addr(smem_raw) % 1024 != 0) __trap();
  SharedStorage<C>& sh = *reinterpret_cast<SharedStorage<C>*>(smem_raw);
  const int g = blockIdx.x / p.ctas_per_rank, c = blockIdx.x % p.ctas_per_rank;
  const int rank = p.view.first_rank + g;
  const int warpgroup = ptx::warpgroup_idx_uniform(), tid = threadIdx.x % 128;
  constexpr uint32_t kConsumerWarps = 4 * C::kConsumerWGs;

  if (threadIdx.x == 0) {
    for (int s = 0; s < C::kStages; ++s) {
      ptx::mbar_init(&sh.full[s], 1);
      ptx::mbar_init(&sh.empty[s], kConsumerWarps * uint32_t(p.cluster));  // both CTAs' consumers in a pair
    }
    for (int s = 0; s < C::kEpiSlots; ++s) {
      // Every thread that writes (the MMA warpgroups) or reads (the L2 epilogue warp, by generic loads) a
      // slot arrives itself: no ordering rests on a __syncwarp before one lane's release.
      ptx::mbar_init(&sh.stage_full[s], 256);
      ptx::mbar_init(&sh.stage_empty[s], 32 * kEpilogueWarps);  // every lane of every epilogue warp
    }
    ptx::mbar_init(&sh.borrow_full, 256);
    for (int s = 0; s < kTileRing; ++s) {
      ptx::mbar_init(&sh.tile_full[s], 1);
      ptx::mbar_init(&sh.tile_empty[s], kConsumerWarps + kEpilogueWarps);  // readers: consumer and epilogue warps
    }
    ptx::fence_mbar_init_release_cluster();
  }
  dispatch<C>(p, g, c);  // ends with __syncthreads (barrier init visible too)
  // CTA pair: the peer's barriers are initialised before anyone multicasts into them or arrives on them.
  if (p.cluster > 1) ptx::cluster_sync();
  const uint32_t crank = p.cluster > 1 ? ptx::cluster_ctarank() : 0u;  // = c % 2 (pairs never straddle ranks)

  const auto& sp = p.sched[g];
  const sched::MoeLayout& layout = sp.layout;
  // K blocks of Linear-1 and Linear-2 (kBlockKElems deep: 128 e4m3 or 64 bf16). The FP8 L1 epilogue also uses
  // KB2 as the number of 128-column h scale blocks (= I/128 there).
  const int KB1 = p.hidden / C::kBlockKElems, KB2 = p.inter / C::kBlockKElems;
  const int row_tiles = p.rows_cap / kBlockM;
  const Sched sched(sp, c);

  if (warpgroup == 0) {
    ptx::setmaxnreg_dec<C::kProducerRegs>();
    const int warp = tid / 32, lane = tid % 32;
    if (warp == kProducerWarp) {
      // ---- producer: one thread issues every TMA load.
      if (lane == 0) {
        ptx::prefetch_tma_map(&p.tma_x);
        if constexpr (!C::kBf16) ptx::prefetch_tma_map(&p.tma_sa);
        ptx::prefetch_tma_map(&p.tma_w1);
        ptx::prefetch_tma_map(&p.tma_h);
        ptx::prefetch_tma_map(&p.tma_ha);
        if constexpr (!C::kBf16) ptx::prefetch_tma_map(&p.tma_hs);
        ptx::prefetch_tma_map(&p.tma_w2);
        if (!C::kBf16 && (kLean || p.merge_loads)) {
          ptx::prefetch_tma_map(&p.tma_x128);
          if constexpr (!C::kInt4) ptx::prefetch_tma_map(&p.tma_w1gu);  // (W4A8: none)
          ptx::prefetch_tma_map(&p.tma_w2w);
        }
        if (!C::kBf16 && !kLean && p.a_trim) {
          ptx::prefetch_tma_map(&p.tma_x16);
          ptx::prefetch_tma_map(&p.tma_ha16);
        }
        kernel::PipeState<C::kStages> ps;
        kernel::PipeState<kTileRing> ts;
        uint32_t seen = 0;
        // MoeLayerParams::l2_hints: L2 policies of the weight loads (0 = no hint, the plain load).
        // (made where they are used: createpolicy is one instruction, two live 64-bit policies were spilled)
        auto w1_policy = [&]() -> uint64_t { return !kLean && (p.l2_hints & kHintW1EvictFirst) ? ptx::l2_policy_evict_first() : 0; };
        auto w2_policy = [&]() -> uint64_t { return !kLean && (p.l2_hints & kHintW2EvictLast) ? ptx::l2_policy_evict_last() : 0; };
        // A stage is free once the consumers of every CTA that receives its A operand have released it (in a
        // pair the empty barrier counts both CTAs' consumer warps).
        auto wait_empty = [&](const kernel::PipeState<C::kStages>& s) {
          ptx::mbar_wait_acquire_cta(&sh.empty[s.stage], s.phase ^ 1);
        };
        // The A operand's rows [0, a_rows) (128, 64 for a half tile, or with a_trim the valid rows rounded up to 16),
        // by halves of 64 rows: alone, both halves; in a CTA pair (same row, N tiles 2j and 2j + 1) this CTA loads
        // half `crank` once into both CTAs, which halves the pair's L2 reads of A. A whole half is one 64-row box, a
        // part of one is boxes of 16 rows (map16). Rows past a_rows are not loaded: the MMA reads what the stage held
        // there, which only ever reaches those rows' outputs (padding, never stored).
        // merge (KernelParams::merge_loads): a CTA loading all 128 rows alone does so by one load of map128.
        const bool merge = !C::kBf16 && (kLean || p.merge_loads != 0);
        auto load_a = [&](const CUtensorMap* map, const CUtensorMap* map16, const CUtensorMap* map128,
                          const kernel::PipeState<C::kStages>& s, int k0, int row0, bool share, int a_rows) {
          constexpr int kHalf = kBlockM / 2;
          uint8_t* dst = sh.tokens(s.stage);
          if (merge && !share && a_rows == kBlockM) {  // the whole 128-row box in one load
            tma_load_2d(map128, &sh.full[s.stage], dst, k0, row0);
            return;
          }
#pragma unroll 1
          for (int h = share ? int(crank) : 0; h < (share ? int(crank) + 1 : 2); ++h) {
            const int lo = h * kHalf, hi = min(a_rows, lo + kHalf);
            if (hi - lo == kHalf) {
              if (share)
                ptx::tma_load_2d_multicast(map, &sh.full[s.stage], dst + lo * 128, k0, row0 + lo, uint16_t(0x3));
              else
                tma_load_2d(map, &sh.full[s.stage], dst + lo * 128, k0, row0 + lo);
              continue;
            }
#pragma unroll 1
            for (int r = lo; r < hi; r += 16) {
              if (share)
                ptx::tma_load_2d_multicast(map16, &sh.full[s.stage], dst + r * 128, k0, row0 + r, uint16_t(0x3));
              else
                tma_load_2d(map16, &sh.full[s.stage], dst + r * 128, k0, row0 + r);
            }
          }
        };
        // A weight box of 128 rows: alone, one load; in a weight-sharing pair this CTA loads rows [64 crank, +64) of it
        // into both CTAs (the peer the other half), so the pair reads each weight box from L2 once.
        auto load_w = [&](const CUtensorMap* map, const CUtensorMap* half_map, const kernel::PipeState<C::kStages>& s,
                          uint8_t* dst, int k0, int row0, uint64_t policy, bool share) {
          constexpr int kHalf = kBlockN / 2;
          if (share)
            ptx::tma_load_2d_multicast(half_map, &sh.full[s.stage], dst + crank * kHalf * 128, k0,
                                       row0 + int(crank) * kHalf, uint16_t(0x3));
          else
            tma_load_weights(map, &sh.full[s.stage], dst, k0, row0, policy);
        };
        // The 128-row tile and the N tile this CTA computes for a scheduler tile, and what a pair shares. The
        // scheduler gives CTA crank of a pair row p and N tile 2j + crank (A shared). With weight-sharing pairs
        // (p.weight_pairs: MoeLayerParams::pair_share 2 or 3), where an expert's 128-rows b and b + 1 (b even within the
        // expert) qualify (2: both full tiles, row b + 1 holding more than 64 tokens; 3: row b + 1 exists), the pair's
        // positions of those two rows are remapped: at row b + s's position j, CTA crank takes row b + crank at N tile
        // 2j + s, and the pair shares the weight boxes (each CTA loads half of every box into both), so the two rows
        // read the expert's weights once. The same tiles run, in the slots of the same positions (call 1 of s26 walked
        // 256-token rows instead and skipped positions, which broke the instances' lockstep). An L2 tile may so compute
        // row b + 1 at row b's position: the interleaved lead is at least 2 (moe_layer.cpp).
        // Packed in two registers (the producer runs at kProducerRegs beside the epilogue warps' code): row, and
        // valid (bits 0-7) | share (8-9: 1 weights, 2 A) | expert (10-20) | N tile (21-30); the host checks the ranges
        // (check_params).
        struct OwnRow {
          int row, bits;
          __device__ __forceinline__ int valid() const { return bits & 0xFF; }
          __device__ __forceinline__ bool share_w() const { return (bits >> 8) & 1; }  // share == 1
          __device__ __forceinline__ bool share_a() const { return (bits >> 9) & 1; }  // share == 2
          __device__ __forceinline__ int expert() const { return (bits >> 10) & 0x7FF; }
          __device__ __forceinline__ int n() const { return bits >> 21; }
        };
        auto own_row = [&](const sched::MoeTile& st) -> OwnRow {
          if (!st.is_valid) return OwnRow{0, 0};
          const int tokens = layout.tokens[st.expert], b = st.m & ~1;
          int m = st.m, n = st.n, share = p.cluster > 1 ? 2 : 0;  // 1: weights, 2: A
          if (p.weight_pairs && tokens - (b + 1) * kBlockM > (p.weight_pairs == 1 ? kBlockM / 2 : 0)) {
            m = b + int(crank);
            n = (st.n & ~1) + (st.m & 1);
            share = 1;
          }
          const int left = tokens - m * kBlockM;
          return OwnRow{st.row - st.m + m,
                        (left < kBlockM ? left : kBlockM) | (share << 8) | (st.expert << 10) | (n << 21)};
        };
        // The walk runs one tile ahead: the next tile is found while the current one's loads are in flight.
        auto w = sched.get_initial_work();
        OwnRow own = own_row(w.tile);
        for (;;) {
          const sched::MoeTile t = w.tile;
          const bool more = w.is_valid();
          ptx::mbar_wait_acquire_cta(&sh.tile_empty[ts.stage], ts.phase ^ 1);
          // KernelParams::half_wide: a half Linear-1 tile that loads its own weights (not shared in a pair) gets its
          // weight boxes gate-up interleaved per warpgroup (the consumers' m64n128 batches).
          const bool interleave = !C::kBf16 && !C::kInt4 && p.half_wide && t.kind == sched::MoeTileKind::L1 &&
                                  own.valid() <= kBlockM / 2 && !own.share_w();
          sh.tiles[ts.stage] = more ? TileDesc{(int(t.kind == sched::MoeTileKind::L2) << 30) | (int(interleave) << 29) |
                                                   own.row,
                                               own.n(), own.expert(), own.valid()}
                                    : TileDesc{-1, 0, 0, 0};
          ptx::mbar_arrive_release_cta(&sh.tile_full[ts.stage]);
          ts.advance();
          if (!more) break;
          auto next = w;
          OwnRow next_own{0, 0};
          auto look_ahead = [&] {
            next = sched.get_next_work(w);
            next_own = own_row(next.tile);
          };
          const bool share = own.share_w(), share_a = own.share_a();
          // W8A8, W4A8: half tiles do not load the A box of the padding rows [64, 128); with a_trim no tile loads A
          // rows past its valid rows rounded up to 16 (load_a). The stage's byte count follows.
          const int a_rows = C::kBf16                  ? kBlockM
                             : !kLean && p.a_trim      ? min(kBlockM, (own.valid() + 15) & ~15)
                             : own.valid() <= kBlockM / 2 ? kBlockM / 2
                                                       : kBlockM;
          const uint32_t a_less = C::kABytes - uint32_t(a_rows) * (C::kABytes / kBlockM);
          const int own_n = own.n(), own_e = own.expert();
          const int grow = g * p.rows_cap + own.row * kBlockM;  // first row in the folded [ranks * rows_cap] maps
          const int ex = g * layout.num_experts + own_e;        // expert index in the weight tensors
          // L2 prefetch of the weights of K block kb + l2_prefetch (l2_prefetch_streamed: only for an expert's single
          // short row, whose weights come from HBM for this row alone). Evaluated where used: values kept live across
          // the K loop spill in the producer's 40 registers.
          auto prefetch_at = [&](int kb, int KB) {
            // (an expert of at most 64 tokens has exactly one row, a short one; W4A8 counts none: the token-count
            // load spilled its producer)
            return !C::kInt4 && !kLean && p.l2_prefetch > 0 && kb + p.l2_prefetch < KB &&
                   (!p.l2_prefetch_streamed || (!C::kInt4 && layout.tokens[own_e] <= kBlockM / 2));
          };
          if (t.kind == sched::MoeTileKind::L1) {
            wait_dispatch(p, rank, own_e, own.row - p.dl.offset(rank, own_e), own.valid(), seen);
            ptx::fence_proxy_async_global();
            for (int kb = 0; kb < KB1; ++kb) {
              wait_empty(ps);
              ptx::mbar_arrive_expect_tx_release_cta(&sh.full[ps.stage], C::kL1TxBytes - a_less);
              const int k0 = kb * C::kBlockKElems;  // first K element of the block
              load_a(&p.tma_x, &p.tma_x16, &p.tma_x128, ps, k0, grow, share_a, a_rows);
              if constexpr (!C::kBf16)
                tma_load_2d(&p.tma_sa, &sh.full[ps.stage], sh.sa[ps.stage], own.row * kBlockM, g * KB1 + kb);
              const int gate_row = ex * 2 * p.inter + own_n * kBlockN;
              if constexpr (C::kInt4) {
                // The tile's gate row blocks 2n, 2n + 1 (8 KB) and up row blocks I/64 + 2n, + 1 of K block kb (the
                // fragment layout of the expert's [2I][H] matrix: [H/128][2I/64] blocks), through the map of the
                // bytes as 256-byte rows (a block is 16 of them); a weight-sharing pair's CTA crank multicasts one of
                // the two into both.
                const int gate = int(((int64_t(ex) * KB1 + kb) * (2 * p.inter / 64) + 2 * own_n) * kInt4BlockRows);
                const int up = gate + (p.inter / 64) * kInt4BlockRows;
                if (share)
                  ptx::tma_load_2d_multicast(&p.tma_w1, &sh.full[ps.stage], sh.b[ps.stage] + crank * C::kWBytes, 0,
                                             crank ? up : gate, uint16_t(0x3));
                else {
                  tma_load_2d(&p.tma_w1, &sh.full[ps.stage], sh.b[ps.stage], 0, gate);
                  tma_load_2d(&p.tma_w1, &sh.full[ps.stage], sh.b[ps.stage] + C::kWBytes, 0, up);
                }
              } else if (interleave) {  // warpgroup h's 128 B rows: gate rows [64 h, +64), then up rows [64 h, +64)
#pragma unroll 1
                for (int h = 0; h < 2; ++h) {
                  tma_load_2d(&p.tma_w1h, &sh.full[ps.stage], sh.b[ps.stage] + h * C::kBBytes, k0, gate_row + h * 64);
                  tma_load_2d(&p.tma_w1h, &sh.full[ps.stage], sh.b[ps.stage] + h * C::kBBytes + C::kBBytes / 2, k0,
                              gate_row + p.inter + h * 64);
                }
              } else if (merge && share) {  // weight-sharing pair: CTA crank multicasts box crank (gate, up) into both
                ptx::tma_load_2d_multicast(&p.tma_w1, &sh.full[ps.stage], sh.b[ps.stage] + crank * C::kBBytes, k0,
                                           gate_row + int(crank) * p.inter, uint16_t(0x3));
              } else if (merge && (kLean || !(p.l2_hints & kHintW1EvictFirst))) {  // gate and up boxes by one 3-d load
                ptx::tma_load_3d(&p.tma_w1gu, &sh.full[ps.stage], sh.b[ps.stage], k0, own_n * kBlockN, 2 * ex);
              } else {
                load_w(&p.tma_w1, &p.tma_w1h, ps, sh.b[ps.stage], k0, gate_row, w1_policy(), share);
                load_w(&p.tma_w1, &p.tma_w1h, ps, sh.b[ps.stage] + C::kBBytes, k0, gate_row + p.inter, w1_policy(), share);
              }
              if constexpr (C::kInt4) {  // per-column group scales of gate and up
                if (merge) {
                  ptx::tma_load_3d(&p.tma_s1gu, &sh.full[ps.stage], &sh.sb[ps.stage][0], own_n * kBlockN, 0, ex * KB1 + kb);
                } else {
                  tma_load_2d(&p.tma_s1, &sh.full[ps.stage], &sh.sb[ps.stage][0], own_n * kBlockN, ex * KB1 + kb);
                  tma_load_2d(&p.tma_s1, &sh.full[ps.stage], &sh.sb[ps.stage][kBlockN], p.inter + own_n * kBlockN,
                              ex * KB1 + kb);
                }
              }
              if (prefetch_at(kb, KB1)) {  // the weights of a later K block into L2
                const int kp0 = (kb + p.l2_prefetch) * C::kBlockKElems;
                ptx::tma_prefetch_l2_2d(&p.tma_w1, kp0, gate_row);
                ptx::tma_prefetch_l2_2d(&p.tma_w1, kp0, gate_row + p.inter);
              }
              ps.advance();
              if (kb == 0) look_ahead();
            }
          } else {
            wait_counter(p.row_ready + g * row_tiles + own.row, uint32_t(layout.l1_ntiles), p.timeout_ns, p.err, 2, rank,
                         own.row);
            ptx::fence_proxy_async_global();
            // l2_wide: the tile is N blocks 2n and 2n + 1 (256 columns), two B boxes per stage as in Linear-1.
            const bool wide = p.l2_wide != 0;
            const int col0 = own_n * (wide ? 2 : 1) * kBlockN, w2_row = ex * p.hidden + col0;
            for (int kb = 0; kb < KB2; ++kb) {
              wait_empty(ps);
              ptx::mbar_arrive_expect_tx_release_cta(&sh.full[ps.stage], (wide ? C::kL2WideTxBytes : C::kL2TxBytes) - a_less);
              const int k0 = kb * C::kBlockKElems;
              load_a(&p.tma_ha, &p.tma_ha16, &p.tma_h, ps, k0, grow, share_a, a_rows);
              if constexpr (!C::kBf16)
                tma_load_2d(&p.tma_hs, &sh.full[ps.stage], sh.sa[ps.stage], own.row * kBlockM, g * KB2 + kb);
              if constexpr (C::kInt4) {
                // Row blocks col0/64 .. of K block kb (the expert's [H][I] matrix: [I/128][H/64] blocks), 16 KB for a
                // 256-column tile (tma_w2w's box), 8 KB for a 128-column one (tma_w2's), adjacent; a weight-sharing
                // pair's CTAs a half each (tma_w2, tma_w2h: 4 KB).
                const int row = int(((int64_t(ex) * KB2 + kb) * (p.hidden / 64) + col0 / 64) * kInt4BlockRows);
                if (share)
                  ptx::tma_load_2d_multicast(wide ? &p.tma_w2 : &p.tma_w2h, &sh.full[ps.stage],
                                             sh.b[ps.stage] + crank * (wide ? 2 : 1) * kInt4BlockBytes, 0,
                                             row + int(crank) * (wide ? 2 : 1) * kInt4BlockRows, uint16_t(0x3));
                else
                  tma_load_2d(wide ? &p.tma_w2w : &p.tma_w2, &sh.full[ps.stage], sh.b[ps.stage], 0, row);
              } else if (wide && merge && share) {  // weight-sharing pair: CTA crank multicasts block crank into both
                ptx::tma_load_2d_multicast(&p.tma_w2, &sh.full[ps.stage], sh.b[ps.stage] + crank * C::kBBytes, k0,
                                           w2_row + int(crank) * kBlockN, uint16_t(0x3));
              } else if (wide && merge && (kLean || !(p.l2_hints & kHintW2EvictLast))) {  // both blocks by one 256-row load
                tma_load_2d(&p.tma_w2w, &sh.full[ps.stage], sh.b[ps.stage], k0, w2_row);
              } else {
                load_w(&p.tma_w2, &p.tma_w2h, ps, sh.b[ps.stage], k0, w2_row, w2_policy(), share);
                if (wide)
                  load_w(&p.tma_w2, &p.tma_w2h, ps, sh.b[ps.stage] + C::kBBytes, k0, w2_row + kBlockN, w2_policy(), share);
              }
              if (prefetch_at(kb, KB2)) {
                ptx::tma_prefetch_l2_2d(&p.tma_w2, (kb + p.l2_prefetch) * C::kBlockKElems, w2_row);
                if (wide) ptx::tma_prefetch_l2_2d(&p.tma_w2, (kb + p.l2_prefetch) * C::kBlockKElems, w2_row + kBlockN);
              }
              if constexpr (C::kInt4) {
                if (wide && merge) {
                  tma_load_2d(&p.tma_s2w, &sh.full[ps.stage], &sh.sb[ps.stage][0], col0, ex * KB2 + kb);
                } else {
                  tma_load_2d(&p.tma_s2, &sh.full[ps.stage], &sh.sb[ps.stage][0], col0, ex * KB2 + kb);
                  if (wide)
                    tma_load_2d(&p.tma_s2, &sh.full[ps.stage], &sh.sb[ps.stage][kBlockN], col0 + kBlockN, ex * KB2 + kb);
                }
              }
              ps.advance();
              if (kb == 0) look_ahead();
            }
          }
          w = next;
          own = next_own;
        }
      }  // lane 0
    } else {
      // ---- epilogue warps 1-3 (kEpilogueWarps): all walk every tile (staging slots in step). An L1 tile is stored
      // by warp 1 alone (one TMA store of h, one bulk store of its scales); an L2 tile's rows are split over the
      // three warps (contiguous ranges of row pairs), so the slot is read and its combine stores issued three
      // times as fast as by one warp (s23: one warp took 5.1-5.7 us per 32 KB tile at 32K tokens).
      const int ew = warp - kL1EpilogueWarp;  // 0, 1, 2
      // MoeLayerParams::l2_hints: the combine entries are read once, by the weighted sum after the kernel.
      const uint64_t combine_policy = !kLean && (p.l2_hints & kHintCombineEvictFirst) ? ptx::l2_policy_evict_first() : 0;
      EpiState es;
      kernel::PipeState<kTileRing> ts;
      uint32_t borrow_phase = 0;  // of sh.borrow_full (l2_borrow)
      auto wait = [](uint64_t* bar, uint32_t ph) { ptx::mbar_wait_acquire_cta(bar, ph); };
      for (int tile_no = 0;; ++tile_no) {
        const TileDesc t = read_tile(sh, ts, lane);
        if (t.end()) break;
        // l2_borrow: an L2 tile's first hand-off is block 1 in the borrowed stage, the slot's comes second (below).
        // The first hand-off's wait comes before anything of the tile is read: it also orders the rows' metadata
        // (written by the dispatch) before the loads below, through the producer's acquire of the rows' readiness.
        const bool borrow = p.l2_borrow != 0 && t.l2();
        if (borrow)
          wait(&sh.borrow_full, borrow_phase);
        else
          wait(&sh.stage_full[es.stage], es.phase);
        // Trace: warp 1 records every tile (an L2 tile's T_RS: the longest span of the three warps, below).
        uint64_t* tr = ew == 0 && lane == 0 ? trace_rec<kTrace>(p, tile_no) : nullptr;
        uint64_t c0 = 0;
        if (kTrace && tr) {
          tr[kTrEpiStart] = ptx::globaltimer_ns();
          c0 = ptx::clock_cycles();
        }
        uint8_t* st = sh.stage[es.stage];
        if (!t.l2()) {
          if (ew == 0 && lane == 0) {
            // h codes by one 2-d TMA store, the 128 row scales by one bulk store; the row's readiness only
            // after both are complete (the consumers of h are other CTAs' TMA loads).
            if constexpr (C::kBf16) {
              // bf16 h: the tile's 128 columns are two boxes of 64 (128 bytes per row each); no scales.
              tma_store_2d(&p.tma_h, st, t.n * kBlockN, g * p.rows_cap + t.row() * kBlockM);
              tma_store_2d(&p.tma_h, st + C::kHPanelBytes, t.n * kBlockN + 64, g * p.rows_cap + t.row() * kBlockM);
            } else {
              tma_store_2d(&p.tma_h, st, t.n * kBlockN, g * p.rows_cap + t.row() * kBlockM);
              ptx::bulk_store(p.h_scale + (int64_t(g) * KB2 + t.n) * p.rows_cap + int64_t(t.row()) * kBlockM,
                              st + C::kStageScales, kBlockM * sizeof(float));
            }
            ptx::bulk_commit_group();
            ptx::bulk_wait_group_read<0>();
            if (kTrace && tr) tr[kTrEpiRead] = ptx::clock_cycles() - c0;
            ptx::mbar_arrive_release_cta(&sh.stage_empty[es.stage]);
            ptx::bulk_wait_group<0>();
            if (kTrace && tr) tr[kTrEpiDone] = ptx::clock_cycles() - c0;
            ptx::fence_proxy_async_global();
            __threadfence();
            kernel::signal_add_release(p.row_ready + g * row_tiles + t.row(), 1);
          } else {
            ptx::mbar_arrive_release_cta(&sh.stage_empty[es.stage]);  // reads nothing of an L1 tile
          }
        } else {
          // combine: every valid row's 256 bytes to entry (token, slot) of its source rank (peer memory), by
          // 16-byte stores, half a warp per row (coalesced). Warp ew takes row pairs [ew P, (ew + 1) P) of the
          // tile's (valid + 1) / 2; lane l first finds the destinations of its rows lo + l and lo + 32 + l, each
          // row's then goes round by shuffle. The slot is free once the stores are issued (their data left in
          // registers); the X-Stage drains them behind the MMA. A 256-column tile (l2_wide) arrives as two
          // hand-offs, N blocks 2n and 2n + 1.
          const moe::RowRange rows = moe::epilogue_rows(t.valid, ew, kEpilogueWarps);
          const int lo = rows.lo, hi = rows.hi;
          const int blocks = p.l2_wide ? 2 : 1;
          uint64_t dst[2];  // the row's combine entry at the tile's first column
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            const int r = lo + lane + 32 * j;
            dst[j] = 0;
            if (r < hi) {
              const RecvMeta m = *p.recv_meta.template at<const RecvMeta>(
                  rank, size_t(int64_t(t.row()) * kBlockM + r) * sizeof(RecvMeta));
              dst[j] = reinterpret_cast<uint64_t>(p.combine.template at<__nv_bfloat16>(
                  m.src, ((size_t(m.token) * p.topk + m.slot) * p.hidden + size_t(t.n) * blocks * kBlockN) *
                             sizeof(__nv_bfloat16)));
            }
          }
          const int chunk = lane % 16, half = lane / 16;
          // T_RS: the store issue span (backpressure stalls it), the longest of the three warps' (they start together).
          uint64_t* trs = kTrace && lane == 0 ? trace_rec<kTrace>(p, tile_no) : nullptr;
          if (kTrace && trs) c0 = ptx::clock_cycles();
          for (int b = 0; b < blocks; ++b) {
            const int blk = borrow ? 1 - b : b;  // the N block of this hand-off
            // A ragged last tile's block 1 (past the hidden size) is read from nowhere and stored nowhere: its
            // hand-off keeps the slot protocol only.
            const bool store = (t.n * blocks + blk) * kBlockN < p.hidden;
            if (borrow) {  // block 1 from the borrowed stage (waited for above), then block 0 from the slot
              if (b > 0) wait(&sh.stage_full[es.stage], es.phase);
              st = b == 0 ? reinterpret_cast<uint8_t*>(sh.b) + sh.borrow_off : sh.stage[es.stage];
            } else if (b > 0) {  // the second hand-off of a 256-column tile
              es.advance();
              wait(&sh.stage_full[es.stage], es.phase);
              st = sh.stage[es.stage];
            }
#pragma unroll 4
            for (int i = 0; store && lo + 2 * i < hi; ++i) {
              const int li = 2 * i + half, r = lo + li;  // li < 64; both halves of the warp use the same dst[li / 32]
              const uint64_t d = __shfl_sync(0xffffffffu, li < 32 ? dst[0] : dst[1], li % 32) + blk * kBlockN * 2;
              if (r < hi) {
                const uint4 v = *reinterpret_cast<const uint4*>(st + r * C::kL2Pitch + ((chunk ^ (r % 8)) * 16));
                store_combine(reinterpret_cast<uint8_t*>(d) + chunk * 16, v, combine_policy);
              }
            }
            __syncwarp();
            if (borrow && b == 0) {
              // The borrowed stage back to the producer(s): the arrivals its 8 consumer warps did not make, shared by
              // the three warps (3 + 3 + 2), each after its own reads, on every CTA of a pair as release_stage does.
              if (lane == 0) {
                const int stage = int(sh.borrow_off / sizeof(sh.b[0]));
                const int n = kConsumerWarps / kEpilogueWarps + (ew < int(kConsumerWarps % kEpilogueWarps) ? 1 : 0);
                for (int i = 0; i < n; ++i) release_stage(&sh.empty[stage], p.cluster);
              }
              borrow_phase ^= 1u;
            } else {
              ptx::mbar_arrive_release_cta(&sh.stage_empty[es.stage]);  // every lane: its reads are done
            }
          }
          if (kTrace && trs)  // every store of this warp's share issued; the record was zeroed at launch
            atomicMax(reinterpret_cast<unsigned long long*>(&trs[kTrEpiRead]), (unsigned long long)(ptx::clock_cycles() - c0));
        }
        es.advance();
      }
      // Per-CTA completion of the combine stores (docs/FOUNDATION.md: release only after completion): every
      // storing thread's stores are performed (system fence), then the three warps meet and one lane releases.
      __threadfence_system();
      kernel::bar_sync(Bar::kEpilogueDone, 32 * kEpilogueWarps);
      if (ew == 0 && lane == 0)
        for (int d = 0; d < p.view.world; ++d)
          kernel::signal_add_release(
              p.signal.template at<uint32_t>(d, runtime::signal_offset(p.view.world, kSlotCombine, rank)));
    }
  } else {
    // ---- consumers: warpgroup wg owns rows [64 wg, 64 wg + 64) of every full tile, columns [64 wg, 64 wg + 64)
    // of every half tile (tile_part).
    ptx::setmaxnreg_inc<C::kConsumerRegs>();
    const int wg = warpgroup - 1;
    const int r0 = 16 * (tid / 32) + (tid % 32) / 4;  // this thread's two fragment rows: r0, r0 + 8
    kernel::PipeState<C::kStages> ps;
    kernel::PipeState<kTileRing> ts;
    EpiState es;
    PingPong pp(wg, !kLean && p.pingpong != 0);
    for (int tile_no = 0;; ++tile_no) {
      const TileDesc t = read_tile(sh, ts, tid % 32);
      if (t.end()) break;
      const int ex = g * layout.num_experts + t.expert;
      uint64_t* tr = wg == 0 && tid == 0 ? trace_rec<kTrace>(p, tile_no) : nullptr;
      uint64_t c0 = 0, full_wait = 0;  // traced: the tile's data waits, stored once at the mainloop's end (a global
                                       // read-modify-write per K block sat in every K block's critical path)
      if (kTrace && tr) {
        tr[kTrTile] = (uint64_t(t.l2()) << 63) | (uint64_t(t.valid <= 64) << 62) | (uint64_t(t.expert) << 40) |
                      (uint64_t(t.row()) << 16) | uint64_t(t.n);
        tr[kTrMmaStart] = ptx::globaltimer_ns();
        c0 = ptx::clock_cycles();
      }
      // Waits for K block kb's stage; traced: the tile's first-stage wait and its total data wait.
      auto wait_full = [&](int kb) {
        if constexpr (kTrace) {
          const uint64_t w0 = ptx::clock_cycles();
          ptx::mbar_wait_acquire_cta(&sh.full[ps.stage], ps.phase);
          if (tr) {
            const uint64_t w1 = ptx::clock_cycles();
            if (kb == 0) tr[kTrFirstWait] = w1 - c0;
            full_wait += w1 - w0;
          }
        } else {
          ptx::mbar_wait_acquire_cta(&sh.full[ps.stage], ps.phase);
        }
      };
      if constexpr (C::kBf16) {
        consume_bf16_tile<C>(sh, ps, es, t, KB1, KB2, wg, tid, p.cluster);
      } else {
        const bool half = t.valid <= 64;  // half tile: rows [0, 64) only, the N tile split (tile_part)
        // Traced: the mainloop's span (L1: with SwiGLU), then the wait for a free staging slot.
        auto mma_done = [&] {
          if (kTrace && tr) {
            tr[kTrMmaEnd] = ptx::globaltimer_ns();
            const uint64_t c1 = ptx::clock_cycles();
            tr[kTrMmaCycles] = c1 - c0;
            tr[kTrFullWait] = full_wait;
            c0 = c1;
          }
        };
        auto wait_slot = [&]() -> uint8_t* {
          ptx::mbar_wait_acquire_cta(&sh.stage_empty[es.stage], es.phase ^ 1);
          if (kTrace && tr) tr[kTrSlotWait] = ptx::clock_cycles() - c0;
          return sh.stage[es.stage];
        };
        const TilePart pt = tile_part(half, wg);
        const bool early = !kLean && p.early_release != 0;
        // The Linear-2 mainloop of a part (MoeLayerParams::l2_scratches: W8A8 with two scratches, else one).
        // keep_last: l2_mainloop's (the host turns l2_borrow off with two scratches).
        auto l2_loop = [&](auto& fa, TilePart part, const float* scales, bool keep_last = false) -> int {
          if (!C::kInt4 && !kLean && p.l2_scratches == 2) {
            l2_mainloop_fp8<C>(sh, ps, fa, part, scales, KB2, tid, p.cluster, pp, wait_full);
            return -1;
          }
          return l2_mainloop<C>(sh, ps, fa, part, scales, KB2, tid, p.cluster, pp, wait_full, early, keep_last);
        };
        auto hand_off = [&] {  // this thread's part of the slot is written (or it writes none of this one)
          ptx::fence_proxy_async_shared_cta();
          ptx::mbar_arrive_release_cta(&sh.stage_full[es.stage]);
          es.advance();
        };
        // The borrowed stage's hand-off: its offset for the epilogue warps, then every consumer thread arrives. The
        // proxy fence orders these generic writes before the producer's TMA writes into the stage after its release.
        // Called after wait_slot: the slot's release follows the epilogue's whole previous tile (its borrowed block
        // first), so borrow_full and borrow_off are free again even if a tile is shorter than the pipeline.
        auto hand_off_borrowed = [&](uint32_t off) {
          if (wg == 0 && tid == 0) sh.borrow_off = off;
          ptx::fence_proxy_async_shared_cta();
          ptx::mbar_arrive_release_cta(&sh.borrow_full);
        };
        if constexpr (C::kInt4) {
          // W4A8: the swapped tile (rs_mainloop); a full tile's batches have N = 128 tokens, a half tile's 64, a quarter
          // tile's (at most 32 tokens, kInt4Quarter) 32.
          auto rs_tile = [&](auto acc_count) {
            constexpr int kAcc = decltype(acc_count)::value;
            float f0[kAcc], f1[kAcc];
#pragma unroll
            for (int i = 0; i < kAcc; ++i) f0[i] = f1[i] = 0.f;
            if (!t.l2()) {
              rs_mainloop<C, kAcc, true>(sh, ps, f0, f1, wg, KB1, tid, p.cluster, pp, wait_full, false);
              mma_done();
              rs_l1_epilogue<C>(wait_slot(), f0, f1, t.valid, wg, tid);
            } else if (p.l2_wide) {
              // 256 columns: blocks 2n (f0: this warpgroup's columns [64 wg, +64) of it) and 2n + 1 (f1), handed off
              // as the W8A8 path's l2_wide tile does (block 1 into the borrowed stage first, with l2_borrow).
              const bool borrow = kLean || p.l2_borrow != 0;
              const int kept = rs_mainloop<C, kAcc, true>(sh, ps, f0, f1, wg, KB2, tid, p.cluster, pp, wait_full, borrow);
              mma_done();
              if (borrow) {
                uint8_t* st0 = wait_slot();
                kernel::bar_sync(Bar::kBorrowStage, 256);  // both warpgroups have read the stage's weight blocks
                stage_l2_cols<C>(sh.b[kept], f1, 64 * wg, tid);
                hand_off_borrowed(uint32_t(kept) * sizeof(sh.b[0]));
                stage_l2_cols<C>(st0, f0, 64 * wg, tid);
              } else {
                stage_l2_cols<C>(wait_slot(), f0, 64 * wg, tid);
                hand_off();
                stage_l2_cols<C>(wait_slot(), f1, 64 * wg, tid);
              }
            } else {
              rs_mainloop<C, kAcc, false>(sh, ps, f0, f0, wg, KB2, tid, p.cluster, pp, wait_full, false);
              mma_done();
              stage_l2_cols<C>(wait_slot(), f0, 64 * wg, tid);
            }
          };
          if (!half)
            rs_tile(std::integral_constant<int, 64>{});
          else if (!kInt4Quarter || t.valid > 32)
            rs_tile(std::integral_constant<int, 32>{});
          else  // a quarter tile: at most 32 tokens, N = 32 (the producer's loads are a half tile's)
            rs_tile(std::integral_constant<int, 16>{});
        } else if (!t.l2()) {
          const float* s1g = p.w1_scale + (int64_t(ex) * (2 * p.inter / kBlockN) + t.n) * KB1;  // W8A8 gate scales
          const float* s1u = s1g + int64_t(p.inter / kBlockN) * KB1;                          // and up scales
          float* hs = nullptr;  // the slot's 128 row scales (SwiGLU then FP8 with one 1x128 scale per row:
          float amax[2];        // the tile's 128 h columns are one scale block)
          if (!half) {
            float fg[64], fu[64];
#pragma unroll
            for (int i = 0; i < 64; ++i) fg[i] = fu[i] = 0.f;
            l1_mainloop<C>(sh, ps, fg, fu, pt, s1g, s1u, KB1, tid, p.cluster, pp, wait_full, early);
            swiglu_amax(fg, fu, t.valid - pt.row0, tid, amax);
            mma_done();
            uint8_t* st = wait_slot();
            quantize_h(st, fg, amax, pt, tid);
            hs = reinterpret_cast<float*>(st + C::kStageScales);
          } else {
            float fg[32], fu[32];
#pragma unroll
            for (int i = 0; i < 32; ++i) fg[i] = fu[i] = 0.f;
            l1_mainloop<C>(sh, ps, fg, fu, pt, s1g, s1u, KB1, tid, p.cluster, pp, wait_full, early, false,
                           kLean || p.half_together != 0, t.interleaved());
            swiglu_amax(fg, fu, t.valid, tid, amax);
            mma_done();
            uint8_t* st = wait_slot();
            // A row's scale block spans both warpgroups' 64 columns: their amax meet in the slot (past its codes
            // and row scales) across one named barrier of the 256 consumer threads.
            float* xch = reinterpret_cast<float*>(st + C::kStageScales + kBlockM * sizeof(float));
            if (tid % 4 == 0) {
              xch[wg * 64 + r0] = amax[0];
              xch[wg * 64 + r0 + 8] = amax[1];
            }
            kernel::bar_sync(Bar::kHalfTileAmax, 256);
            amax[0] = fmaxf(amax[0], xch[(1 - wg) * 64 + r0]);
            amax[1] = fmaxf(amax[1], xch[(1 - wg) * 64 + r0 + 8]);
            // The other warpgroup writes these words again in the slot's next half tile: that write is ordered
            // after these reads by the epilogue's stage_full -> stage_empty chain already; this barrier orders it
            // here too, so the exchange does not depend on how the epilogue releases a slot (one barrier per half
            // tile). racecheck reports hazards on this exchange only with pingpong = 1 (the turn's bar.arrive):
            // bench/moe/barrier_probe reproduces them on a 40-line exchange that is correct (s24 calls 4-6).
            kernel::bar_sync(Bar::kHalfTileAmax, 256);
            quantize_h(st, fg, amax, pt, tid);
            // Rows [64, 128) are padding: zero codes (8 KB, half per warpgroup) and the floor's scale, what a full
            // tile writes for its padding rows.
            uint4* z = reinterpret_cast<uint4*>(st + 64 * 128 + wg * 4096);
            z[tid] = make_uint4(0u, 0u, 0u, 0u);
            z[tid + 128] = make_uint4(0u, 0u, 0u, 0u);
            hs = reinterpret_cast<float*>(st + C::kStageScales);
            if (wg == 1) {
              if (tid < 64) hs[64 + tid] = 1e-4f / 448.0f;  // moe::kAmaxFloor / 448
              hs = nullptr;                                 // rows [0, 64): warpgroup 0 writes them
            }
          }
          if (hs != nullptr && tid % 4 == 0) {
            hs[pt.row0 + r0] = amax[0] / 448.0f;
            hs[pt.row0 + r0 + 8] = amax[1] / 448.0f;
          }
        } else if (p.l2_wide) {
          // 256 columns: N blocks 2n (b = 0) and 2n + 1 (b = 1), their W8A8 block scales KB2 apart; the output goes
          // to the epilogue as two hand-offs of 128 columns (the slot holds one), in b order. With l2_borrow, block 1
          // goes first, into the B buffer of the tile's last pipeline stage, which the mainloop kept (every consumer
          // warp holds the same stage; the producer cannot write it before the epilogue warps release it), then
          // block 0 into the slot: the MMA warpgroups no longer wait for the epilogue's stores of block 0 (~3.5 us
          // per tile, s26 trace) before the next tile; the producer runs one stage short until the release.
          const float* s2 = p.w2_scale + (int64_t(ex) * (p.hidden / kBlockN) + 2 * t.n) * KB2;
          // A ragged last tile (hidden / 128 odd): block 1 lies past the hidden size. Its weights are the next
          // expert's rows (or the map's zero fill) and its outputs are never stored (the epilogue skips them), but its
          // scales must be read in bounds: block 0's stand in.
          const float* s2b = (2 * t.n + 1) * kBlockN < p.hidden ? s2 + KB2 : s2;
          const bool borrow = kLean || p.l2_borrow != 0;
          if (!half) {
            // Linear-1's structure: per K block two batches (blocks 0 and 1) into one scratch, promoted into f0, f1.
            float f0[64], f1[64];
#pragma unroll
            for (int i = 0; i < 64; ++i) f0[i] = f1[i] = 0.f;
            const int kept = l1_mainloop<C>(sh, ps, f0, f1, pt, s2, s2b, KB2, tid, p.cluster, pp, wait_full, early, borrow);
            mma_done();
            if (borrow) {
              uint8_t* st0 = wait_slot();
              kernel::bar_sync(Bar::kBorrowStage, 256);  // both warpgroups' wgmma have read the stage's B boxes
              stage_l2_rows<C>(sh.b[kept], f1, pt.row0, 0, tid);
              hand_off_borrowed(uint32_t(kept) * sizeof(sh.b[0]));
              stage_l2_rows<C>(st0, f0, pt.row0, 0, tid);
            } else {
              stage_l2_rows<C>(wait_slot(), f0, pt.row0, 0, tid);
              hand_off();
              stage_l2_rows<C>(wait_slot(), f1, pt.row0, 0, tid);
            }
          } else {
            // At most 64 rows: warpgroup wg computes block wg (rows [0, 64), m64n128 batches) and writes hand-off wg;
            // every consumer thread waits for each hand-off's slot and arrives (the barrier counts all 256).
            float fa[64];
#pragma unroll
            for (int i = 0; i < 64; ++i) fa[i] = 0.f;
            const int kept = l2_loop(fa, TilePart{0, kBlockN * wg}, wg == 0 ? s2 : s2b, borrow);
            mma_done();
            if (borrow) {
              uint8_t* st0 = wait_slot();
              // Into warpgroup 1's own B box of the stage (block 1's weights, read by its wgmma only): no barrier.
              if (wg == 1) stage_l2_rows<C>(sh.b[kept] + C::kBBytes, fa, 0, 0, tid);
              hand_off_borrowed(uint32_t(kept) * sizeof(sh.b[0]) + C::kBBytes);
              if (wg == 0) stage_l2_rows<C>(st0, fa, 0, 0, tid);
            } else {
              uint8_t* st0 = wait_slot();
              if (wg == 0) stage_l2_rows<C>(st0, fa, 0, 0, tid);
              hand_off();
              uint8_t* st1 = wait_slot();
              if (wg == 1) stage_l2_rows<C>(st1, fa, 0, 0, tid);
            }
          }
        } else {
          const float* s2 = p.w2_scale + (int64_t(ex) * (p.hidden / kBlockN) + t.n) * KB2;  // W8A8 block scales
          // The part's accumulators: 64 (full tile) or 32 (half tile) per thread, the same code otherwise.
          auto l2_part = [&](auto acc_count) {
            constexpr int kAcc = decltype(acc_count)::value;
            float fa[kAcc];
#pragma unroll
            for (int i = 0; i < kAcc; ++i) fa[i] = 0.f;
            l2_loop(fa, pt, s2);
            mma_done();
            stage_l2_rows<C>(wait_slot(), fa, pt.row0, pt.col0, tid);
          };
          if (!half)
            l2_part(std::integral_constant<int, 64>{});
          else
            l2_part(std::integral_constant<int, 32>{});
        }
      }
      // Hand the slot to the epilogue warps: generic-proxy smem writes before their bulk/TMA reads.
      ptx::fence_proxy_async_shared_cta();
      ptx::mbar_arrive_release_cta(&sh.stage_full[es.stage]);
      es.advance();
    }
    pp.finish();
  }  // consumers
  // CTA pair: no CTA leaves while its peer may still arrive on its barriers (the peer's last stage releases).
  if (p.cluster > 1) {
    __syncwarp();
    ptx::cluster_sync();
  }
}

// ---------------------------------------------------------------- the weighted sum
// out[t][h] = sum_j weight[t][j] * combine[t][j][h], fp32, slot order, no contraction (as the reference).
// Blocks walk tokens (grid-stride), threads 8-column chunks: one 16-byte load per slot and two 16-byte stores
// per chunk, no 64-bit division per element (the first version, one thread per element with i / H and i % H in
// 64 bits and 2-byte loads, was instruction-bound). H is a multiple of 128 (validated), so chunks never straddle.
__global__ void __launch_bounds__(kCombineThreads) combine_kernel(const __grid_constant__ CombineParams p) {
  const int g = blockIdx.y, rank = p.view.first_rank + g;
  if (p.plan_rec != nullptr && p.plan_rec[g].first_bad != kPlanClean) return;  // rejected routing: out untouched
  const int chunks = p.hidden / 8;
  const __nv_bfloat16* comb = p.combine.at<const __nv_bfloat16>(rank);
  for (int t = blockIdx.x; t < p.tokens[g]; t += gridDim.x) {
    const float* w = p.weight[g] + int64_t(t) * p.topk;
    const __nv_bfloat16* row = comb + int64_t(t) * p.topk * p.hidden;
    float4* out = reinterpret_cast<float4*>(p.out[g] + int64_t(t) * p.hidden);
    for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
      float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
      for (int j = 0; j < p.topk; ++j) {
        const float wt = w[j];
        const uint4 raw = *reinterpret_cast<const uint4*>(row + int64_t(j) * p.hidden + 8 * c);
        const uint32_t v[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          acc[2 * i] = __fadd_rn(acc[2 * i], __fmul_rn(wt, __uint_as_float(v[i] << 16)));
          acc[2 * i + 1] = __fadd_rn(acc[2 * i + 1], __fmul_rn(wt, __uint_as_float(v[i] & 0xFFFF0000u)));
        }
      }
      out[2 * c] = make_float4(acc[0], acc[1], acc[2], acc[3]);
      out[2 * c + 1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
    }
  }
}

}  // namespace xstage::moe_kernel
