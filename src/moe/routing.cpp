// Synthetic top-k routings and top-k validation (include/xstage/moe/routing.hpp).
#include "xstage/moe/routing.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <numeric>
#include <random>
#include <utility>

#include "xstage/common/error.hpp"
#include "xstage/common/rng.hpp"

namespace xstage::moe {
namespace {

using rng::uniform01;

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

void validate_config(const RoutingConfig& c) {
  XSTAGE_REQUIRE(c.world >= 1, "routing: world size must be >= 1, got ", c.world);
  XSTAGE_REQUIRE(c.tokens_per_rank >= 0, "routing: tokens per rank must be >= 0, got ", c.tokens_per_rank);
  XSTAGE_REQUIRE(c.experts >= 1, "routing: number of experts must be >= 1, got ", c.experts);
  XSTAGE_REQUIRE(c.experts <= kMaxRoutingExperts, "routing: number of experts ", c.experts, " exceeds ",
                 kMaxRoutingExperts, ", the most a generated routing takes (its per-expert tables grow with the count)");
  XSTAGE_REQUIRE(c.topk >= 1 && c.topk <= c.experts, "routing: top-k must be in [1, ", c.experts, "] (the number of experts), got ",
                 c.topk);
  XSTAGE_REQUIRE(std::isfinite(c.zipf_alpha) && c.zipf_alpha > 0, "routing: Zipf exponent must be positive, got ",
                 c.zipf_alpha);
  const long long rows = 1LL * c.world * c.tokens_per_rank * c.topk;
  XSTAGE_REQUIRE(rows <= INT_MAX, "routing: world * tokens per rank * top-k = ", rows, " routed rows exceed 2^31 - 1");
}

}  // namespace

RoutingKind parse_routing_kind(const std::string& s) {
  if (s == "balanced") return RoutingKind::Balanced;
  if (s == "skewed") return RoutingKind::Skewed;
  throw UsageError("routing must be balanced or skewed, got '" + s + "'");
}

const char* to_string(RoutingKind k) { return k == RoutingKind::Balanced ? "balanced" : "skewed"; }

Routing generate_routing(const RoutingConfig& c) {
  validate_config(c);
  Routing r;
  r.world = c.world;
  r.tokens_per_rank = c.tokens_per_rank;
  r.experts = c.experts;
  r.topk = c.topk;
  const long long tokens = 1LL * c.world * c.tokens_per_rank;
  r.index.resize(std::size_t(tokens) * c.topk);
  r.weight.resize(r.index.size());

  std::mt19937_64 gen(c.seed);
  if (c.kind == RoutingKind::Balanced) {
    // A uniform k-subset per token (the simulator's "uniform" routing draws the same stream).
    rng::UniformSubsets subsets(c.experts);
    for (long long t = 0; t < tokens; ++t)
      subsets.draw(gen, c.topk, [&](int j, int e) { r.index[std::size_t(t) * c.topk + j] = e; });
  } else {
    // Same stream as sim::route_tokens: popularity order first, then E keys per token.
    rng::ZipfSubsets zipf(gen, c.experts, c.zipf_alpha);
    for (long long t = 0; t < tokens; ++t)
      zipf.draw(gen, c.topk, true, [&](int j, int e) { r.index[std::size_t(t) * c.topk + j] = e; });
  }

  std::mt19937_64 wgen(splitmix64(c.seed));
  std::vector<double> z(c.topk);
  for (long long t = 0; t < tokens; ++t) {
    double zmax = -1e300;
    for (int j = 0; j < c.topk; ++j) {
      const double u1 = uniform01(wgen), u2 = uniform01(wgen);
      z[j] = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
      zmax = std::max(zmax, z[j]);
    }
    double sum = 0;
    for (int j = 0; j < c.topk; ++j) sum += (z[j] = std::exp(z[j] - zmax));
    std::sort(z.begin(), z.end(), std::greater<double>());
    for (int j = 0; j < c.topk; ++j) r.weight[std::size_t(t) * c.topk + j] = float(z[j] / sum);
  }
  return r;
}

void validate_topk(const std::int32_t* index, int tokens, int topk, int experts, int rank) {
  XSTAGE_REQUIRE(tokens >= 0, "top-k indices: rank ", rank, ": token count must be >= 0, got ", tokens);
  XSTAGE_REQUIRE(topk >= 1 && topk <= experts, "top-k indices: rank ", rank, ": top-k must be in [1, ", experts,
                 "] (the number of experts), got ", topk);
  XSTAGE_REQUIRE(tokens == 0 || index != nullptr, "top-k indices: rank ", rank, ": no index array for ", tokens, " tokens");
  for (int t = 0; t < tokens; ++t) {
    const std::int32_t* row = index + std::size_t(t) * topk;
    for (int j = 0; j < topk; ++j) {
      if (row[j] < 0 || row[j] >= experts) throw UsageError(topk_entry_error(rank, t, j, row[j], experts, -1));
      for (int i = 0; i < j; ++i)
        if (row[i] == row[j]) throw UsageError(topk_entry_error(rank, t, j, row[j], experts, i));
    }
  }
}

std::string topk_entry_error(int rank, int token, int slot, int value, int experts, int repeats) {
  if (repeats >= 0)
    return detail::concat("top-k indices: rank ", rank, ", token ", token, ", slot ", slot, ": expert ", value,
                          " repeats slot ", repeats, " (a token's experts must be distinct)");
  return detail::concat("top-k indices: rank ", rank, ", token ", token, ", slot ", slot, ": expert ", value,
                        " is out of range [0, ", experts, ")");
}

void validate_routing(const Routing& r) {
  XSTAGE_REQUIRE(r.world >= 1 && r.tokens_per_rank >= 0, "routing: bad world ", r.world, " or tokens per rank ",
                 r.tokens_per_rank);
  const std::size_t n = std::size_t(r.world) * r.tokens_per_rank * std::size_t(r.topk < 0 ? 0 : r.topk);
  XSTAGE_REQUIRE(r.index.size() == n && r.weight.size() == n, "routing: expected ", n, " indices and weights (",
                 r.world, " ranks x ", r.tokens_per_rank, " tokens x top-", r.topk, "), got ", r.index.size(), " and ",
                 r.weight.size());
  for (int s = 0; s < r.world; ++s) {
    validate_topk(r.rank_index(s), r.tokens_per_rank, r.topk, r.experts, s);
    for (int t = 0; t < r.tokens_per_rank; ++t)
      for (int j = 0; j < r.topk; ++j)
        XSTAGE_REQUIRE(std::isfinite(r.w(s, t, j)), "routing weights: rank ", s, ", token ", t, ", slot ", j,
                       ": weight ", r.w(s, t, j), " is not finite");
  }
}

std::vector<int> expert_counts(const Routing& r) {
  std::vector<int> count(r.experts, 0);
  for (std::int32_t e : r.index) {
    XSTAGE_REQUIRE(e >= 0 && e < r.experts, "expert counts: expert ", e, " is out of range [0, ", r.experts, ")");
    count[e]++;
  }
  return count;
}

}  // namespace xstage::moe
