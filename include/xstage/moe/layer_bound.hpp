#pragma once
// The two floors of one MoE layer call on one rank: its FLOPs at the tensor cores' rate and its unavoidable
// bytes at the memory's rate (a roofline, measured: the harness times a cuBLASLt GEMM of the FLOPs and a stream
// over the bytes in the same process, bench/moe/unfused.hpp). The layer can be no faster than the larger of the
// two; which one is larger says whether a point is compute- or memory-bound, and the fraction of that floor a
// kernel reaches is comparable across both kinds of points (the tensor-core ceiling alone is not: at P = 1 a
// layer whose weights take longer to stream than its FLOPs take to compute cannot reach it).
//
// Unavoidable bytes, one rank: the weights of every local expert with at least one routed row, read once, in the
// fused kernel's formats (W8A8: e4m3 codes + 128x128 block scales; W4A8: int4 codes + a scale per weight row and
// 128-deep K group; bf16: 2-byte values); the rank's tokens read once (FP8 codes + 1x128 scales, or bf16) with
// their top-k combine weights; its output written once (fp32). Not counted: the top-k indices (the plan reads
// them, 4 bytes per slot) and every intermediate (dispatched rows, h, combine rows), which a layer may keep on
// chip or in the L2, so the sum is a lower bound.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "xstage/moe/routing.hpp"
#include "xstage/moe/shapes.hpp"

namespace xstage::moe {

// The fused kernel's weight formats (moe_kernel::MoeWeightFormat, host side).
enum class WeightFormat { kFp8, kInt4, kBf16 };

struct ExpertWeightBytes {
  std::size_t w1 = 0, w2 = 0;  // codes: Linear-1 [2I][H], Linear-2 [H][I]
  std::size_t s1 = 0, s2 = 0;  // their fp32 scales (bf16: none)
  std::size_t total() const { return w1 + w2 + s1 + s2; }
};

// One expert's weight bytes. UsageError unless hidden and inter are positive multiples of 128.
ExpertWeightBytes expert_weight_bytes(const MoeShape& s, WeightFormat f);

struct LayerBytes {
  std::size_t weights = 0;  // experts_read x expert_weight_bytes
  std::size_t input = 0;    // tokens x (activation codes + scales + top-k weights)
  std::size_t output = 0;   // tokens x hidden x 4 (fp32)
  int experts_read = 0;     // local experts with at least one routed row
  std::size_t read() const { return weights + input; }
  std::size_t total() const { return weights + input + output; }
};

// The unavoidable bytes of one rank's layer call over `tokens` tokens, given the routed rows of each of its local
// experts (rows_per_local_expert.size() = its expert count). UsageError on a bad shape, tokens < 0, an empty or
// oversized expert list (more than s.experts) or a negative row count, each naming the value.
LayerBytes layer_min_bytes(const MoeShape& s, WeightFormat f, long long tokens,
                           const std::vector<long long>& rows_per_local_expert);

// The routed rows of each of `rank`'s experts (experts [rank * E / P, (rank + 1) * E / P)), sliced from the rows of
// every expert (expert_counts of a routing of every rank's tokens, E entries). UsageError when P does not divide E or
// rank is out of [0, P).
std::vector<long long> local_expert_rows(const std::vector<int>& expert_rows, int world, int rank);

// One rank's share of a routed layer: the rows its experts receive (from every rank's tokens), its unavoidable bytes
// and its FLOPs (rows x the two GEMMs' 6 * hidden * inter; at P = 1 moe_layer_flops). The layer takes as long as its
// most loaded rank.
struct RankWork {
  int rank = 0;
  long long rows = 0;
  LayerBytes bytes;
  double flops = 0;
};
// Every rank of a routing (its world, tokens per rank and experts): UsageError when the routing's experts or top-k are
// not the shape's, or its world does not divide E.
std::vector<RankWork> rank_work(const MoeShape& s, WeightFormat f, const Routing& r);

struct LayerBound {
  double compute_ms = 0;  // the FLOPs at the tensor cores' measured rate (the ceiling GEMM's time)
  double memory_ms = 0;   // the unavoidable bytes at the memory's measured rate (the stream's time)
  double bound_ms() const { return compute_ms > memory_ms ? compute_ms : memory_ms; }
  bool memory_bound() const { return memory_ms > compute_ms; }
  const char* bound_by() const { return memory_bound() ? "memory" : "compute"; }
  // The fraction of the floor a layer that took layer_ms reaches (1 = at the roofline).
  double fraction(double layer_ms) const;
};

// UsageError unless both times are positive and finite.
LayerBound make_layer_bound(double compute_ms, double memory_ms);

}  // namespace xstage::moe
