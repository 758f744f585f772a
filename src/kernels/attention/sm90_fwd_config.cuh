#pragma once
// sm_90a attention forward: compile-time configuration, named barriers and shared-memory layout, shared
// by the mainloop (sm90_fwd_kernel.cuh) and the epilogues (sm90_epilogue.cuh), which do not include
// each other.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "xstage/ptx/wgmma.cuh"

// Compile-time knobs, overridable with -D for the device script's variant builds; the defaults are the
// best measured on H200 (results/attention/call3, call5): D = 128: 2 consumer warpgroups, K/V block 176
// (+2-4 % over 128); D = 64: 3 consumer warpgroups (192-row tile), K/V block 128 (+5-15 % over two
// warpgroups with block 192; block 160 would spill within 160 registers); ping-pong on.
#ifndef XSTAGE_ATTN_BLOCK_N_D128
#define XSTAGE_ATTN_BLOCK_N_D128 176
#endif
#ifndef XSTAGE_ATTN_BLOCK_N_D64
#define XSTAGE_ATTN_BLOCK_N_D64 128
#endif
#ifndef XSTAGE_ATTN_D64_CONSUMER_WGS
#define XSTAGE_ATTN_D64_CONSUMER_WGS 3
#endif
#ifndef XSTAGE_ATTN_PINGPONG
#define XSTAGE_ATTN_PINGPONG 1
#endif
// Causal LPT groups (attention_scheduler.cuh, lpt_group_pairs): at least this many rounds of tiles per
// group, and grouping only when it gives at least this many groups (else one global LPT order).
#ifndef XSTAGE_ATTN_LPT_MIN_ROUNDS
#define XSTAGE_ATTN_LPT_MIN_ROUNDS 10
#endif
#ifndef XSTAGE_ATTN_LPT_MIN_GROUPS
#define XSTAGE_ATTN_LPT_MIN_GROUPS 4
#endif

namespace xstage::attention::sm90 {

// ---------------------------------------------------------------- config
template <class Element_, int kHeadDim_>
struct FwdConfig {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kConsumerWGs = kHeadDim == 64 ? XSTAGE_ATTN_D64_CONSUMER_WGS : 2;
  static constexpr int kBlockM = 64 * kConsumerWGs;  // 64 rows (the wgmma M) per consumer warpgroup
  static constexpr int kBlockN = kHeadDim == 128 ? XSTAGE_ATTN_BLOCK_N_D128 : XSTAGE_ATTN_BLOCK_N_D64;
  static constexpr int kStages = kHeadDim == 64 ? 3 : 2;  // K and V pipelines (D 128: smem allows 2)
  static constexpr int kPanels = kHeadDim / 64;   // 128 B swizzle: TMA boxes are 64 elements wide
  static constexpr int kThreads = 128 * (1 + kConsumerWGs);
  // 64K registers per SM: 128*24 + 256*240 (two consumers) or 128*24 + 384*160 (three).
  static constexpr int kProducerRegs = 24, kConsumerRegs = kConsumerWGs == 3 ? 160 : 240;
  static_assert(kConsumerWGs == 2 || kConsumerWGs == 3, "two or three consumer warpgroups");
  static constexpr bool kPingPong = XSTAGE_ATTN_PINGPONG != 0;
  static constexpr ptx::MmaType kMma =
      std::is_same_v<Element, __nv_bfloat16> ? ptx::MmaType::kBF16 : ptx::MmaType::kF16;
  static constexpr uint32_t kQBytes = kBlockM * kHeadDim * sizeof(Element);
  static constexpr uint32_t kKVBytes = kBlockN * kHeadDim * sizeof(Element);
  static_assert(kHeadDim == 64 || kHeadDim == 128, "head dim 64 or 128");
  // One 64 x d epilogue staging buffer per consumer warpgroup when shared memory allows, else one shared
  // (227 KB: the sm_90 opt-in maximum; the host still checks the device's own limit).
  static constexpr int kTileBytes = (kBlockM + 2 * kStages * kBlockN) * kHeadDim * int(sizeof(Element));
  static constexpr bool kSharedStaging = kTileBytes + kBlockM * kHeadDim * int(sizeof(Element)) + 2048 > 227 * 1024;
  static_assert(!kSharedStaging || kConsumerWGs == 2, "a shared staging buffer serves two warpgroups");
};

// ---------------------------------------------------------------- shared storage and params
// Tiles are stored as 64-column panels (rows x 128 B each, TMA 128 B swizzle), panel after panel.
template <class C>
struct SharedStorage {
  using E = typename C::Element;
  alignas(1024) E q[C::kBlockM * C::kHeadDim];
  alignas(1024) E k[C::kStages][C::kBlockN * C::kHeadDim];
  alignas(1024) E v[C::kStages][C::kBlockN * C::kHeadDim];
  alignas(1024) E o[(C::kSharedStaging ? 1 : C::kConsumerWGs) * 64 * C::kHeadDim];  // epilogue staging
  uint64_t q_full, q_empty;
  uint64_t k_full[C::kStages], k_empty[C::kStages], v_full[C::kStages], v_empty[C::kStages];
};

// Named barriers (0 is __syncthreads); "+ wg" ids take one slot per consumer warpgroup (at most 3).
enum class Bar : uint32_t {
  kEpilogueWG0 = 1,  // + wg: consumer warpgroup wg's staging buffer is free / filled (128 threads)
  kMmaTurnWG0 = 4,   // + wg: consumer warpgroup wg may issue its GEMMs (ping-pong, 256 threads)
  kStagingWG0 = 7,   // + wg: a staging buffer shared by two warpgroups is wg's to fill (256 threads)
  kConsumersDone = 10,  // every consumer warpgroup has finished its last tile (all consumer threads)
};

}  // namespace xstage::attention::sm90
