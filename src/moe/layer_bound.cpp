// The two floors of a MoE layer call (layer_bound.hpp).
#include "xstage/moe/layer_bound.hpp"

#include <cmath>

#include "xstage/common/error.hpp"

namespace xstage::moe {

namespace {
void check_shape(const MoeShape& s) {
  XSTAGE_REQUIRE(s.hidden > 0 && s.hidden % 128 == 0, "MoE shape ", s.name, ": hidden ", s.hidden,
                 " is not a positive multiple of 128");
  XSTAGE_REQUIRE(s.inter > 0 && s.inter % 128 == 0, "MoE shape ", s.name, ": inter ", s.inter,
                 " is not a positive multiple of 128");
  XSTAGE_REQUIRE(s.experts > 0 && s.topk > 0 && s.topk <= s.experts, "MoE shape ", s.name, ": top-k ", s.topk,
                 " of ", s.experts, " experts");
}
}  // namespace

ExpertWeightBytes expert_weight_bytes(const MoeShape& s, WeightFormat f) {
  check_shape(s);
  const std::size_t H = std::size_t(s.hidden), I = std::size_t(s.inter);
  ExpertWeightBytes b;
  switch (f) {
    case WeightFormat::kFp8:  // one byte a weight, one fp32 scale per 128 x 128 block
      b.w1 = 2 * I * H;
      b.w2 = H * I;
      b.s1 = 4 * (2 * I / 128) * (H / 128);
      b.s2 = 4 * (H / 128) * (I / 128);
      break;
    case WeightFormat::kInt4:  // two weights a byte, one fp32 scale per weight row and 128-deep K group
      b.w1 = I * H;
      b.w2 = H * I / 2;
      b.s1 = 4 * (2 * I) * (H / 128);
      b.s2 = 4 * H * (I / 128);
      break;
    case WeightFormat::kBf16:
      b.w1 = 2 * (2 * I * H);
      b.w2 = 2 * (H * I);
      break;
  }
  return b;
}

LayerBytes layer_min_bytes(const MoeShape& s, WeightFormat f, long long tokens,
                           const std::vector<long long>& rows_per_local_expert) {
  check_shape(s);
  XSTAGE_REQUIRE(tokens >= 0, "MoE layer bytes: tokens ", tokens, " < 0");
  const std::size_t n = rows_per_local_expert.size();
  XSTAGE_REQUIRE(n >= 1 && n <= std::size_t(s.experts), "MoE layer bytes: ", n, " local experts of shape ", s.name,
                 " (", s.experts, " experts)");
  LayerBytes b;
  for (std::size_t e = 0; e < n; ++e) {
    const long long r = rows_per_local_expert[e];
    XSTAGE_REQUIRE(r >= 0, "MoE layer bytes: local expert ", e, " has ", r, " rows");
    b.experts_read += r > 0;
  }
  const std::size_t H = std::size_t(s.hidden), T = std::size_t(tokens), k = std::size_t(s.topk);
  b.weights = std::size_t(b.experts_read) * expert_weight_bytes(s, f).total();
  const std::size_t act = f == WeightFormat::kBf16 ? 2 * H : H + 4 * (H / 128);  // codes (+ 1x128 scales)
  b.input = T * (act + 4 * k);
  b.output = T * H * 4;
  return b;
}

std::vector<long long> local_expert_rows(const std::vector<int>& expert_rows, int world, int rank) {
  const int experts = int(expert_rows.size());
  XSTAGE_REQUIRE(world >= 1 && experts >= 1 && experts % world == 0, "local expert rows: world ", world,
                 " does not divide ", experts, " experts");
  XSTAGE_REQUIRE(rank >= 0 && rank < world, "local expert rows: rank ", rank, " outside [0, ", world, ")");
  const int per = experts / world;
  return std::vector<long long>(expert_rows.begin() + rank * per, expert_rows.begin() + (rank + 1) * per);
}

std::vector<RankWork> rank_work(const MoeShape& s, WeightFormat f, const Routing& r) {
  check_shape(s);
  XSTAGE_REQUIRE(r.experts == s.experts && r.topk == s.topk, "rank work: a routing over ", r.experts, " experts, top-",
                 r.topk, " is not of shape ", s.name, " (", s.experts, " experts, top-", s.topk, ")");
  const std::vector<int> counts = expert_counts(r);  // one pass over every rank's slots
  std::vector<RankWork> w;
  for (int q = 0; q < r.world; ++q) {
    RankWork k;
    k.rank = q;
    const std::vector<long long> rows = local_expert_rows(counts, r.world, q);
    for (long long c : rows) k.rows += c;
    k.bytes = layer_min_bytes(s, f, r.tokens_per_rank, rows);
    k.flops = double(k.rows) * moe_row_flops(s);
    w.push_back(k);
  }
  return w;
}

double LayerBound::fraction(double layer_ms) const {
  XSTAGE_REQUIRE(layer_ms > 0 && std::isfinite(layer_ms), "layer bound: layer time ", layer_ms, " ms");
  return bound_ms() / layer_ms;
}

LayerBound make_layer_bound(double compute_ms, double memory_ms) {
  XSTAGE_REQUIRE(compute_ms > 0 && std::isfinite(compute_ms), "layer bound: compute time ", compute_ms, " ms");
  XSTAGE_REQUIRE(memory_ms > 0 && std::isfinite(memory_ms), "layer bound: memory time ", memory_ms, " ms");
  return LayerBound{compute_ms, memory_ms};
}

}  // namespace xstage::moe
