// Dispatch/combine layout of the expert-parallel MoE layer (include/xstage/moe/dispatch_layout.hpp and
// dispatch_plan.hpp): exhaustive consistency on random routings at P = 1, 2, 4, 8 against an
// independent computation, the inverse map, the scheduler layout, edge cases and a hand-checked example.
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>
#include <algorithm>

#include "../model/test_seed.hpp"
#include "xstage/common/error.hpp"
#include "xstage/moe/dispatch_plan.hpp"
#include "../common/usage_error.hpp"

using namespace xstage::moe;
using xstage::UsageError;

namespace {
using xstage::testing::usage_error;

bool same(const CombineSrc& a, const CombineSrc& b) {
  return a.src_rank == b.src_rank && a.token == b.token && a.slot == b.slot;
}

// Every check of the layout against a routing, with expectations computed independently: one global
// counter per expert walked in (source, token, slot) order gives each row's place in its expert block.
void check_plan(const Routing& r, const DispatchPlan& plan) {
  const int P = r.world, T = r.tokens_per_rank, k = r.topk, E = r.experts, pr = E / P, b_m = plan.b_m();
  const DispatchLayout& v = plan.view();
  std::vector<int> next(E, 0);
  std::vector<std::vector<CombineSrc>> by_expert(E);  // rows of each expert in block order
  for (int s = 0; s < P; ++s)
    for (int t = 0; t < T; ++t)
      for (int j = 0; j < k; ++j) {
        const int e = r.expert(s, t, j);
        const DispatchDest d = plan.dest(s, t, j);
        ASSERT_EQ(d.rank, e / pr);
        ASSERT_EQ(d.local_expert, e % pr);
        ASSERT_EQ(d.row_in_expert, next[e]) << "rows of an expert follow (source, token, slot) order";
        ASSERT_EQ(d.recv_row, v.offset(d.rank, d.local_expert) * b_m + next[e]);
        next[e]++;
        by_expert[e].push_back({s, t, j});
        // The kernel's own computation from the view equals the plan's answer.
        const DispatchDest dv = v.dest(s, e, plan.pos_in_src(s, t, j));
        ASSERT_EQ(dv.recv_row, d.recv_row);
      }
  // Counts: per expert, per rank, in total.
  const std::vector<int> cnt = expert_counts(r);
  long long total = 0;
  for (int e = 0; e < E; ++e) {
    ASSERT_EQ(v.expert_tokens(e), cnt[e]);
    ASSERT_EQ(next[e], cnt[e]);
    int by_src = 0;
    for (int s = 0; s < P; ++s) {
      ASSERT_EQ(v.base(s, e), by_src);
      by_src += v.count(s, e);
    }
    ASSERT_EQ(by_src, cnt[e]);
  }
  for (int d = 0; d < P; ++d) {
    const std::vector<int> local = plan.local_tokens(d);
    ASSERT_EQ(int(local.size()), pr);
    for (int le = 0; le < pr; ++le) ASSERT_EQ(local[le], cnt[d * pr + le]);
    total += std::accumulate(local.begin(), local.end(), 0LL);
    // The receive rows are exactly the scheduler's layout rows (b_m-row tiles per expert).
    const xstage::sched::MoeLayoutStorage layout = plan.layout(d, 2, 4);
    for (int le = 0; le <= pr; ++le) ASSERT_EQ(layout.row_offsets()[le], v.offset(d, le)) << "rank " << d;
    ASSERT_EQ(plan.recv_rows(d), layout.rows() * b_m);
    ASSERT_LE(plan.recv_rows(d), max_recv_rows(P, T, k, pr, b_m));
    // Combine map: every row is a routed row of one of d's experts or padding past the expert's tokens,
    // and locate() agrees with it; together with the forward walk this makes dispatch a bijection
    // between routed rows and non-padding receive rows, and combine its inverse.
    const std::vector<CombineSrc>& map = plan.combine_map(d);
    ASSERT_EQ(int(map.size()), plan.recv_rows(d));
    int real = 0;
    for (int le = 0; le < pr; ++le) {
      const int e = d * pr + le;
      for (int row = v.offset(d, le) * b_m; row < v.offset(d, le + 1) * b_m; ++row) {
        const int r_in = row - v.offset(d, le) * b_m;
        int ll, rr, ss, pos;
        const bool found = v.locate(d, row, &ll, &rr, &ss, &pos);
        if (r_in >= cnt[e]) {
          ASSERT_FALSE(found) << "padding row " << row;
          ASSERT_LT(map[row].src_rank, 0);
          ASSERT_LT(map[row].token, 0);
          continue;
        }
        ++real;
        ASSERT_TRUE(found);
        ASSERT_TRUE(same(map[row], by_expert[e][r_in])) << "rank " << d << " row " << row;
        ASSERT_EQ(ll, le);
        ASSERT_EQ(rr, r_in);
        ASSERT_EQ(ss, map[row].src_rank);
        ASSERT_EQ(pos, plan.pos_in_src(ss, map[row].token, map[row].slot));
        ASSERT_EQ(plan.dest(ss, map[row].token, map[row].slot).recv_row, row);
      }
    }
    ASSERT_EQ(real, std::accumulate(local.begin(), local.end(), 0));
    int ll, rr, ss, pos;
    ASSERT_FALSE(v.locate(d, -1, &ll, &rr, &ss, &pos));
    ASSERT_FALSE(v.locate(d, plan.recv_rows(d), &ll, &rr, &ss, &pos));
  }
  ASSERT_EQ(total, 1LL * P * T * k) << "counts sum to tokens * topk";
}

}  // namespace

TEST(MoeDispatchLayout, RandomRoutingsExhaustivelyConsistent) {
  const std::uint64_t seed = test_seed();
  int plans = 0;
  for (int P : {1, 2, 4, 8})
    for (int E : {8, 16, 64})
      for (int k : {1, 2, 8})
        for (RoutingKind kind : {RoutingKind::Balanced, RoutingKind::Skewed})
          for (int T : {0, 1, 37})
            for (int b_m : {1, 3, 64}) {
              SCOPED_TRACE("seed " + std::to_string(seed) + " P " + std::to_string(P) + " E " + std::to_string(E) + " k " +
                           std::to_string(k) + " " + to_string(kind) + " T " + std::to_string(T) + " b_m " +
                           std::to_string(b_m));
              const Routing r = generate_routing({P, T, E, k, kind, 1.0, seed + plans});
              const DispatchPlan plan(r, make_placement(E, P), b_m);
              check_plan(r, plan);
              if (HasFatalFailure()) return;
              ++plans;
            }
  EXPECT_EQ(plans, 4 * 3 * 3 * 2 * 3 * 3);
}

TEST(MoeDispatchLayout, HandCheckedExample) {
  // P = 2, E = 4 (rank 0: experts 0, 1; rank 1: experts 2, 3), T = 3, k = 2, b_m = 2.
  const std::vector<std::int32_t> idx = {1, 2, 2, 0, 3, 1,   // rank 0: t0 {1,2}, t1 {2,0}, t2 {3,1}
                                         0, 1, 2, 3, 1, 0};  // rank 1: t0 {0,1}, t1 {2,3}, t2 {1,0}
  const DispatchPlan plan(idx, 3, 2, make_placement(4, 2), 2);
  EXPECT_EQ(plan.counts(), (std::vector<int>{1, 2, 2, 1, 2, 2, 1, 1}));
  EXPECT_EQ(plan.src_base(), (std::vector<int>{0, 0, 0, 0, 1, 2, 2, 1}));
  // Expert tokens 3, 4 | 3, 2 -> tiles 2, 2 | 2, 1.
  EXPECT_EQ(plan.row_offsets(), (std::vector<int>{0, 2, 4, 0, 2, 3}));
  EXPECT_EQ(plan.local_tokens(0), (std::vector<int>{3, 4}));
  EXPECT_EQ(plan.local_tokens(1), (std::vector<int>{3, 2}));
  EXPECT_EQ(plan.recv_rows(0), 8);
  EXPECT_EQ(plan.recv_rows(1), 6);
  const CombineSrc pad{};
  const std::vector<CombineSrc> want0 = {{0, 1, 1}, {1, 0, 0}, {1, 2, 1}, pad, {0, 0, 0}, {0, 2, 1}, {1, 0, 1}, {1, 2, 0}};
  const std::vector<CombineSrc> want1 = {{0, 0, 1}, {0, 1, 0}, {1, 1, 0}, pad, {0, 2, 0}, {1, 1, 1}};
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(same(plan.combine_map(0)[i], want0[i])) << "rank 0 row " << i;
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(same(plan.combine_map(1)[i], want1[i])) << "rank 1 row " << i;
  // Two destinations by hand: (rank 1, t2, slot 1) -> expert 0, its 2nd row from rank 1 after rank 0's one.
  DispatchDest d = plan.dest(1, 2, 1);
  EXPECT_EQ(d.rank, 0);
  EXPECT_EQ(d.local_expert, 0);
  EXPECT_EQ(d.row_in_expert, 2);
  EXPECT_EQ(d.recv_row, 2);
  d = plan.dest(1, 1, 1);  // expert 3 = rank 1 local 1, after rank 0's token 2
  EXPECT_EQ(d.rank, 1);
  EXPECT_EQ(d.local_expert, 1);
  EXPECT_EQ(d.row_in_expert, 1);
  EXPECT_EQ(d.recv_row, 5);
}

TEST(MoeDispatchLayout, ZeroTokenExpertsAndTokensWithNoLocalExpert) {
  // P = 4, E = 8: every token of every rank goes to experts 0 and 3 (rank 0 and rank 1). Ranks 2 and 3
  // receive nothing and none of their own tokens has a local expert; experts 1, 2, 4..7 are empty.
  const int P = 4, T = 5, k = 2, E = 8;
  std::vector<std::int32_t> idx;
  for (int s = 0; s < P; ++s)
    for (int t = 0; t < T; ++t) {
      idx.push_back(t % 2 ? 3 : 0);
      idx.push_back(t % 2 ? 0 : 3);
    }
  for (int b_m : {1, 4, 64}) {
    const DispatchPlan plan(idx, T, k, make_placement(E, P), b_m);
    EXPECT_EQ(plan.local_tokens(0), (std::vector<int>{P * T, 0}));
    EXPECT_EQ(plan.local_tokens(1), (std::vector<int>{0, P * T}));
    EXPECT_EQ(plan.local_tokens(2), (std::vector<int>{0, 0}));
    EXPECT_EQ(plan.recv_rows(2), 0);
    EXPECT_EQ(plan.recv_rows(3), 0);
    EXPECT_TRUE(plan.combine_map(3).empty());
    EXPECT_EQ(plan.layout(2, 2, 2).rows(), 0);  // the schedulers get an empty layout
    EXPECT_EQ(plan.recv_rows(0), (P * T + b_m - 1) / b_m * b_m);
    // Expert 1 is empty between expert 0 and rank 1: its offset repeats.
    EXPECT_EQ(plan.view().offset(0, 1), plan.view().offset(0, 2));
    Routing r;
    r.world = P;
    r.tokens_per_rank = T;
    r.experts = E;
    r.topk = k;
    r.index = idx;
    r.weight.assign(idx.size(), 0.5f);
    check_plan(r, plan);
  }
}

TEST(MoeDispatchLayout, OneRankKeepsEverything) {
  const Routing r = generate_routing({1, 64, 16, 4, RoutingKind::Skewed, 1.0, test_seed()});
  const DispatchPlan plan(r, make_placement(16, 1), 16);
  check_plan(r, plan);
  for (int t = 0; t < 64; ++t)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(plan.dest(0, t, j).rank, 0);
}

TEST(MoeDispatchLayout, ReceiveBoundIsTightAndHolds) {
  // Attained: every expert of the rank gets every token and a count = 1 mod b_m.
  {
    const std::vector<std::int32_t> idx = {0, 1, 1, 0, 0, 1, 1, 0, 0, 1};  // P = 1, T = 5, k = 2, E = 2
    const DispatchPlan plan(idx, 5, 2, make_placement(2, 1), 4);
    EXPECT_EQ(plan.recv_rows(0), 16);
    EXPECT_EQ(max_recv_rows(1, 5, 2, 2, 4), 16);
  }
  {
    // P = 2, T = 2, k = 2, E = 4, b_m = 3: all four tokens to experts 0 and 1 -> 4 rows each, 6 padded.
    const std::vector<std::int32_t> idx = {0, 1, 1, 0, 0, 1, 1, 0};
    const DispatchPlan plan(idx, 2, 2, make_placement(4, 2), 3);
    EXPECT_EQ(plan.recv_rows(0), 12);
    EXPECT_EQ(max_recv_rows(2, 2, 2, 2, 3), 12);
  }
  // k > E/P: a token sends at most E/P rows to one rank.
  EXPECT_EQ(max_recv_rows(8, 100, 8, 2, 1), 8LL * 100 * 2);
}

TEST(MoeDispatchLayout, CopiesViewTheirOwnTables) {
  const Routing r = generate_routing({2, 20, 8, 2, RoutingKind::Balanced, 1.0, 5});
  auto* original = new DispatchPlan(r, make_placement(8, 2), 4);
  const DispatchPlan copy(*original);
  delete original;
  check_plan(r, copy);
  EXPECT_EQ(copy.view().counts, copy.counts().data());
  EXPECT_EQ(copy.view().row_offset, copy.row_offsets().data());
}

// The fused kernel's host plan: moved (no copy of its tables), without the combine map, its index and pos tables read
// as a whole; the same dispatch side as a full plan.
TEST(MoeDispatchLayout, MovedPlanWithoutCombineMap) {
  const Routing r = generate_routing({3, 40, 12, 3, RoutingKind::Skewed, 1.0, 9});
  const DispatchPlan full(r, make_placement(12, 3), 8);
  auto* src = new DispatchPlan(r.index, r.tokens_per_rank, r.topk, make_placement(12, 3), 8, /*combine_map=*/false);
  const int* counts = src->counts().data();
  const DispatchPlan moved(std::move(*src));
  delete src;
  EXPECT_EQ(moved.counts().data(), counts);  // the buffer moved, not copied
  EXPECT_EQ(moved.view().counts, moved.counts().data());
  EXPECT_EQ(moved.view().src_base, moved.src_base().data());
  EXPECT_EQ(moved.view().row_offset, moved.row_offsets().data());
  EXPECT_EQ(moved.counts(), full.counts());
  EXPECT_EQ(moved.src_base(), full.src_base());
  EXPECT_EQ(moved.row_offsets(), full.row_offsets());
  ASSERT_EQ(moved.index().size(), r.index.size());
  for (int s = 0; s < 3; ++s)
    for (int t = 0; t < 40; ++t)
      for (int j = 0; j < 3; ++j) {
        const std::size_t i = r.at(s, t, j);
        EXPECT_EQ(moved.index()[i], full.expert(s, t, j));
        EXPECT_EQ(moved.positions()[i], full.pos_in_src(s, t, j));
        const DispatchDest a = moved.dest(s, t, j), b = full.dest(s, t, j);
        EXPECT_EQ(a.rank, b.rank);
        EXPECT_EQ(a.recv_row, b.recv_row);
      }
  EXPECT_EQ(usage_error([&] { moved.combine_map(0); }),
            "dispatch layout: this plan was built without its combine map (combine_map = false)");
  EXPECT_NE(usage_error([&] { full.combine_map(3); }).find("rank 3 is outside [0, 3)"), std::string::npos);
}

// loaded_padding_rows against the tiles walked one by one: each row tile of an expert of n tokens holds
// min(n - 128 m, 128) of them and loads 128 A rows (bf16, or more than 64 tokens) or 64, and always a 128-row scale
// box; the padding rows loaded are the loaded rows at or past n.
TEST(MoeDispatchLayout, LoadedPaddingRowsAreWhatTheTilesLoad) {
  for (bool whole : {false, true})
    for (int n = 0; n <= 520; ++n) {
      std::vector<int> codes, scales;  // loaded rows >= n, in order
      for (int m = 0; 128 * m < n; ++m) {
        const int valid = std::min(n - 128 * m, 128), a_rows = whole || valid > 64 ? 128 : 64;
        for (int r = 128 * m; r < 128 * m + a_rows; ++r)
          if (r >= n) codes.push_back(r);
        for (int r = 128 * m; r < 128 * m + 128; ++r)
          if (r >= n) scales.push_back(r);
      }
      const PaddingRows p = loaded_padding_rows(n, 128, whole);
      SCOPED_TRACE("n = " + std::to_string(n) + (whole ? " whole" : ""));
      EXPECT_EQ(p.begin, n);
      EXPECT_EQ(p.end - p.begin, int(codes.size()));
      EXPECT_EQ(p.scale_end - p.begin, int(scales.size()));
      if (!codes.empty()) {
        EXPECT_EQ(codes.front(), p.begin);
        EXPECT_EQ(codes.back(), p.end - 1);
      }
      if (!scales.empty()) {
        EXPECT_EQ(scales.back(), p.scale_end - 1);
      }
    }
  // hand-checked: a 1-token expert loads 63 padding rows (a half tile), 65 tokens 63 (a full tile), 129 tokens 63
  EXPECT_EQ(loaded_padding_rows(1, 128, false).end, 64);
  EXPECT_EQ(loaded_padding_rows(65, 128, false).end, 128);
  EXPECT_EQ(loaded_padding_rows(129, 128, false).end, 192);
  EXPECT_EQ(loaded_padding_rows(129, 128, true).end, 256);
  EXPECT_EQ(loaded_padding_rows(128, 128, false).end, 128);
}

TEST(MoeDispatchLayout, BadInputIsAUsageError) {
  const std::vector<std::int32_t> idx = {0, 1, 2, 3};
  EXPECT_NE(usage_error([&] { DispatchPlan(idx, 2, 2, ExpertPlacement{6, 4}, 1); }).find("cannot be split evenly"),
            std::string::npos);
  EXPECT_NE(usage_error([&] { DispatchPlan(idx, 2, 2, make_placement(4, 2), 0); }).find("b_m must be >= 1"), std::string::npos);
  EXPECT_NE(usage_error([&] { DispatchPlan(idx, 3, 2, make_placement(4, 2), 1); }).find("expected 12 top-k indices"),
            std::string::npos);
  // Rank 1's first token repeats an expert: the error names rank 1 (indices are [P][T][k]).
  const std::vector<std::int32_t> dup = {0, 1, 2, 3, 3, 3, 0, 1};
  EXPECT_EQ(usage_error([&] { DispatchPlan(dup, 2, 2, make_placement(4, 2), 1); }),
            "top-k indices: rank 1, token 0, slot 1: expert 3 repeats slot 0 (a token's experts must be distinct)");
  const std::vector<std::int32_t> oor = {0, 1, 2, 3, 0, 4, 0, 1};
  EXPECT_EQ(usage_error([&] { DispatchPlan(oor, 2, 2, make_placement(4, 2), 1); }),
            "top-k indices: rank 1, token 0, slot 1: expert 4 is out of range [0, 4)");
  const DispatchPlan ok(idx, 1, 2, make_placement(4, 2), 1);
  EXPECT_NE(usage_error([&] { ok.local_tokens(2); }).find("rank 2 is outside [0, 2)"), std::string::npos);
}
