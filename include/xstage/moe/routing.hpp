#pragma once
// Top-k routing of an expert-parallel MoE layer (issue 11), host side: synthetic routings for the tests
// and benchmarks, deterministic from a seed, and the validation of user-provided top-k indices.
//
// Layout of a routing: index[(rank * T + t) * k + j] = global expert of slot j of token t of `rank`
// (T tokens per rank, k slots), weight[...] its combine weight. Within a token the k experts are
// distinct (sampling without replacement) and the weights are softmax-normalised (positive, sum 1),
// sorted so that slot 0 has the largest weight.
//
// balanced: each token's k experts are a uniform sample without replacement of the E experts
//           (partial Fisher-Yates on mt19937_64 with unbiased bounded draws).
// skewed:   expert popularity w_e = 1 / (rank_e + 1)^alpha (Zipf, alpha = 1 by default) over a seeded
//           permutation of the experts; each token's k experts are a weighted sample without
//           replacement (Efraimidis-Spirakis keys log(u) / w_e, largest k, in key order). The expert
//           stream is the one of sim::route_tokens (same seed -> same per-expert counts, tested).
// Weights: logits z_j ~ N(0, 1) (Box-Muller on a second mt19937_64 stream derived from the seed),
//          w_j = softmax(z)_j, sorted descending.
// All random numbers come from mt19937_64 bits through integer and IEEE arithmetic only, so a seed
// gives the same routing with every standard library.
#include <cstdint>
#include <string>
#include <vector>

#include "xstage/moe/dispatch_layout.hpp"

namespace xstage::moe {

enum class RoutingKind { Balanced, Skewed };

// "balanced" | "skewed" (UsageError otherwise), and back.
RoutingKind parse_routing_kind(const std::string& s);
const char* to_string(RoutingKind k);

// The most experts a generated routing takes: its per-expert tables (popularity, permutation, sampler) cost tens of
// bytes an expert, so a typo like 2^31 experts would eat the host's memory before any other check; 2^20 is ~2700x
// DeepSeek-V4-Pro's 384 (the kernel itself takes at most 2047 experts per rank, moe_layer.cpp).
inline constexpr int kMaxRoutingExperts = 1 << 20;

struct RoutingConfig {
  int world = 1;            // P ranks, each with tokens_per_rank tokens
  int tokens_per_rank = 0;  // T (0 allowed: an empty routing)
  int experts = 0;          // E
  int topk = 0;             // k, 1 <= k <= E
  RoutingKind kind = RoutingKind::Balanced;
  double zipf_alpha = 1.0;  // skewed: popularity exponent (> 0)
  std::uint64_t seed = 1;
};

struct Routing {
  int world = 1, tokens_per_rank = 0, experts = 0, topk = 0;
  std::vector<std::int32_t> index;  // [P][T][k] global expert ids
  std::vector<float> weight;        // [P][T][k] combine weights

  std::int32_t expert(int rank, int token, int slot) const { return index[at(rank, token, slot)]; }
  float w(int rank, int token, int slot) const { return weight[at(rank, token, slot)]; }
  const std::int32_t* rank_index(int rank) const { return index.data() + std::size_t(rank) * tokens_per_rank * topk; }
  const float* rank_weight(int rank) const { return weight.data() + std::size_t(rank) * tokens_per_rank * topk; }
  std::size_t at(int rank, int token, int slot) const {
    return (std::size_t(rank) * tokens_per_rank + token) * topk + slot;
  }
};

// UsageError on a bad configuration (k > E, alpha <= 0, more than 2^31 routed rows, ...).
Routing generate_routing(const RoutingConfig& c);

// The routing seed bench_moe gives a configuration of a run with `--seed seed` (each token count and kind its own
// stream), so that any tool regenerates the routing a table timed: generate_routing({P, T, E, k, kind, 1.0,
// harness_routing_seed(seed, T, kind)}). The CPU test MoeRouting.HarnessRoutingsAreTheTableOfRecords pins what it
// gives on the grid: a change there makes later tables time other routings than results/moe/p1's.
inline std::uint64_t harness_routing_seed(std::uint64_t seed, int tokens_per_rank, RoutingKind kind) {
  return seed * 7919 + std::uint64_t(tokens_per_rank) * 31 + std::uint64_t(int(kind));
}

// Checks user top-k indices of one rank: `tokens` x `topk`, row-major. UsageError naming the rank,
// token, slot and value for an index outside [0, experts) or one that repeats an earlier slot of the
// same token ("top-k indices: rank 0, token 5, slot 2: expert 7 repeats slot 0").
void validate_topk(const std::int32_t* index, int tokens, int topk, int experts, int rank = 0);
// The message validate_topk throws for entry (token, slot) = value: out of range [0, experts) (repeats < 0), or a
// repeat of the token's earlier slot `repeats` (the device plan's MoeWorkspace::check names its errors with it).
std::string topk_entry_error(int rank, int token, int slot, int value, int experts, int repeats);
// Every rank of a routing, plus the weights' finiteness (UsageError naming rank, token, slot).
void validate_routing(const Routing& r);

// Routed rows per global expert over all ranks (E entries, summing to P * T * k).
std::vector<int> expert_counts(const Routing& r);

}  // namespace xstage::moe
