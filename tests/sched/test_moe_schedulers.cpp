// Exhaustive CPU tests of the MoE tile schedulers (include/xstage/sched/moe_scheduler.hpp).
// Ordering semantics tested here are defined in docs/SCHEDULERS.md:
//  - per-CTA program order: the sequence get_initial_work / get_next_work yields;
//  - "L2 of row p after the L1 tiles of row p" across CTAs means: the union of all program orders and
//    the dependencies L1(p, *) -> L2(p, *) is acyclic, i.e. an in-order persistent kernel that waits on
//    per-row L1 counters always completes (checked by executing greedily until stuck);
//  - the lead D is an instance-local guarantee: when an instance emits L2 of row p, it has already
//    emitted every one of its own L1 tiles of rows < p + D.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <sstream>
#include <vector>

#include "../common/usage_error.hpp"
#include "xstage/sched/moe_scheduler.hpp"

namespace {

using namespace xstage::sched;

// Sequences of every CTA (index g * roles + r) of a scheduler configuration.
template <class Sched>
std::vector<std::vector<MoeTile>> sequences(const typename Sched::Params& p) {
  std::vector<std::vector<MoeTile>> out;
  for (int g = 0; g < p.instances; ++g)
    for (int r = 0; r < p.roles; ++r) {
      Sched s(p, g, r);
      std::vector<MoeTile> seq;
      for (auto w = s.get_initial_work(); w.is_valid(); w = s.get_next_work(w)) {
        seq.push_back(w.tile);
        if (seq.size() > (1u << 22)) break;  // a runaway scheduler fails the count checks below
      }
      out.push_back(std::move(seq));
    }
  return out;
}

// Every tile (kind, row, n) exactly once; fields consistent with the layout.
void expect_exactly_once(const MoeLayoutStorage& st, const std::vector<std::vector<MoeTile>>& seqs) {
  const MoeLayout& l = st.view();
  const int rows = l.rows();
  std::vector<int> seen1(size_t(rows) * l.l1_ntiles, 0), seen2(size_t(rows) * l.l2_ntiles, 0);
  for (const auto& seq : seqs)
    for (const MoeTile& t : seq) {
      ASSERT_TRUE(t.is_valid);
      ASSERT_GE(t.row, 0);
      ASSERT_LT(t.row, rows);
      const int e = t.expert;
      ASSERT_GE(e, 0);
      ASSERT_LT(e, l.num_experts);
      // Independent row -> expert check: the row lies in e's range.
      ASSERT_LE(st.row_offsets()[e], t.row);
      ASSERT_LT(t.row, st.row_offsets()[e + 1]);
      ASSERT_EQ(t.m, t.row - st.row_offsets()[e]);
      ASSERT_GE(t.n, 0);
      ASSERT_LT(t.n, l.ntiles(t.kind));
      auto& seen = t.kind == MoeTileKind::L1 ? seen1 : seen2;
      seen[size_t(t.row) * l.ntiles(t.kind) + t.n]++;
    }
  for (size_t i = 0; i < seen1.size(); ++i) ASSERT_EQ(seen1[i], 1) << "L1 tile " << i;
  for (size_t i = 0; i < seen2.size(); ++i) ASSERT_EQ(seen2[i], 1) << "L2 tile " << i;
}

// Runs the CTAs' program orders as an in-order persistent kernel would (an L2 tile of row p may run
// only when every L1 tile of row p has run), picking any runnable CTA, until done or stuck.
// Returns true when every tile ran (no cyclic wait).
bool executes_without_deadlock(const MoeLayout& l, const std::vector<std::vector<MoeTile>>& seqs) {
  std::vector<int> l1_done(l.rows(), 0);
  std::vector<size_t> pc(seqs.size(), 0);
  size_t left = 0;
  for (const auto& s : seqs) left += s.size();
  bool progress = true;
  while (left > 0 && progress) {
    progress = false;
    for (size_t c = 0; c < seqs.size(); ++c)
      while (pc[c] < seqs[c].size()) {
        const MoeTile& t = seqs[c][pc[c]];
        if (t.kind == MoeTileKind::L2 && l1_done[t.row] < l.l1_ntiles) break;
        if (t.kind == MoeTileKind::L1) l1_done[t.row]++;
        ++pc[c];
        --left;
        progress = true;
      }
  }
  return left == 0;
}

struct Case {
  std::vector<int> tokens;
  int b_m, l1_ntiles, l2_ntiles, instances, roles;
};

// Random layouts: 1-12 experts, uniform or skewed (one hot expert, many empty), varied tile grids.
Case random_case(std::mt19937& rng) {
  Case c;
  const int E = 1 + int(rng() % 12);
  const int mode = int(rng() % 3);
  c.tokens.resize(E);
  for (int e = 0; e < E; ++e) {
    if (mode == 0) c.tokens[e] = int(rng() % 400);                                  // uneven
    if (mode == 1) c.tokens[e] = e == 0 ? 200 + int(rng() % 2000) : int(rng() % 3) * int(rng() % 40);  // skewed
    if (mode == 2) c.tokens[e] = 256;                                               // balanced
  }
  c.b_m = 1 << (4 + rng() % 4);  // 16..128
  c.roles = 1 + int(rng() % 2);
  c.l1_ntiles = c.roles * (1 + int(rng() % 8));
  c.l2_ntiles = c.roles * (1 + int(rng() % 8));
  c.instances = 1 + int(rng() % 70);
  return c;
}

constexpr int kRandomCases = 400;

TEST(MoeLayout, RowsExpertsAndPartialRows) {
  MoeLayoutStorage st({5, 0, 0, 16, 1, 0}, 4, 2, 2);
  // rows: 2, 0, 0, 4, 1, 0 -> offsets 0 2 2 2 6 7 7
  EXPECT_EQ(st.row_offsets(), (std::vector<int>{0, 2, 2, 2, 6, 7, 7}));
  EXPECT_EQ(st.rows(), 7);
  const int want_e[] = {0, 0, 3, 3, 3, 3, 4};
  for (int p = 0; p < 7; ++p) EXPECT_EQ(st.view().expert_of_row(p), want_e[p]) << "row " << p;
  EXPECT_EQ(st.tokens_in_row(0), 4);
  EXPECT_EQ(st.tokens_in_row(1), 1);
  EXPECT_EQ(st.tokens_in_row(5), 4);
  EXPECT_EQ(st.tokens_in_row(6), 1);
}

TEST(MoeLayout, RejectsBadInput) {
  EXPECT_THROW(MoeLayoutStorage({}, 4, 2, 2), xstage::UsageError);
  EXPECT_THROW(MoeLayoutStorage({1, -1}, 4, 2, 2), xstage::UsageError);
  EXPECT_THROW(MoeLayoutStorage({1}, 0, 2, 2), xstage::UsageError);
  EXPECT_THROW(MoeLayoutStorage({1}, 4, 0, 2), xstage::UsageError);
  MoeLayoutStorage st({8}, 4, 3, 2);
  // 3 N-tiles cannot be split over 2 roles.
  EXPECT_THROW(MoeInterleavedScheduler::validate({st.view(), 4, 2, 1}), xstage::UsageError);
  EXPECT_THROW(MoeInterleavedScheduler::validate({st.view(), 0, 1, 1}), xstage::UsageError);
  EXPECT_THROW(MoeInterleavedScheduler::validate({st.view(), 4, 1, -1}), xstage::UsageError);
  EXPECT_THROW(MoeExpertWaveScheduler::validate({st.view(), 4, 1, 0}), xstage::UsageError);
  // Counts whose int cursor arithmetic would overflow are refused by name (UBSan found 2^31 - 1 of each in the
  // simulator's CLI); the largest allowed ones still walk every tile once.
  using xstage::testing::usage_error;
  MoeLayoutStorage two({8}, 4, 2, 2);
  EXPECT_NE(usage_error([&] { MoeInterleavedScheduler::validate({two.view(), 2147483647, 1, 1}); })
                .find("instance count 2147483647 exceeds 2^30"), std::string::npos);
  EXPECT_NE(usage_error([&] { MoeExpertWaveScheduler::validate({two.view(), (1 << 30) + 1, 1, 1}); })
                .find("instance count 1073741825 exceeds 2^30"), std::string::npos);
  EXPECT_NE(usage_error([&] { MoeExpertWaveScheduler::validate({two.view(), 4, 1, 2147483647}); })
                .find("experts per wave 2147483647"), std::string::npos);
  for (int lag : {0, 1}) {
    const MoeExpertWaveScheduler::Params big{two.view(), 1 << 30, 1, 1 << 30, 0, lag};
    MoeExpertWaveScheduler::validate(big);
    std::vector<int> seen(size_t(two.rows()) * 4, 0);
    for (int g : {0, 1, 2, 3, 4, 5, 6, 7, 8, (1 << 30) - 1}) {  // instances past the tile count get nothing
      const MoeExpertWaveScheduler sched(big, g, 0);
      for (auto w = sched.get_initial_work(); w.is_valid(); w = sched.get_next_work(w))
        ++seen[size_t(w.tile.m) * 4 + (w.tile.kind == MoeTileKind::L1 ? 0 : 2) + w.tile.n];
    }
    for (int v : seen) EXPECT_EQ(v, 1) << "lag " << lag;
  }
  const MoeInterleavedScheduler::Params wide{two.view(), 1 << 30, 1, 1};
  MoeInterleavedScheduler::validate(wide);
  int tiles = 0;
  for (int g = 0; g < 8; ++g) {
    const MoeInterleavedScheduler sched(wide, g, 0);
    for (auto w = sched.get_initial_work(); w.is_valid(); w = sched.get_next_work(w)) ++tiles;
  }
  EXPECT_EQ(tiles, two.rows() * 4);
}

// Reference Algorithm 1, written independently: build instance g's two tile-pair streams as explicit
// lists, then merge them with the lead rule.
std::vector<MoeTile> reference_interleaved(const MoeLayout& l, int S, int roles, int D, int g, int r) {
  const int P1 = l.l1_ntiles / roles, P2 = l.l2_ntiles / roles, rows = l.rows();
  std::vector<int> s1, s2;
  for (int k = g; k < rows * P1; k += S) s1.push_back(k);
  for (int k = g; k < rows * P2; k += S) s2.push_back(k);
  std::vector<MoeTile> out;
  size_t i1 = 0, i2 = 0;
  while (i1 < s1.size() || i2 < s2.size()) {
    const long long p1 = i1 < s1.size() ? s1[i1] / P1 : (1LL << 40);
    if (i2 < s2.size() && s2[i2] / P2 + (long long)D <= p1) {
      out.push_back(l.tile(MoeTileKind::L2, s2[i2] / P2, roles * (s2[i2] % P2) + r));
      ++i2;
    } else {
      out.push_back(l.tile(MoeTileKind::L1, s1[i1] / P1, roles * (s1[i1] % P1) + r));
      ++i1;
    }
  }
  return out;
}

bool same(const MoeTile& a, const MoeTile& b) {
  return a.is_valid == b.is_valid && a.kind == b.kind && a.row == b.row && a.n == b.n &&
         a.expert == b.expert && a.m == b.m;
}

TEST(MoeInterleaved, RandomLayoutsExactlyOnceDeterministicAndMatchesReference) {
  std::mt19937 rng(20261129);
  for (int it = 0; it < kRandomCases; ++it) {
    const Case c = random_case(rng);
    MoeLayoutStorage st(c.tokens, c.b_m, c.l1_ntiles, c.l2_ntiles);
    const int rows = st.rows();
    for (int D : {0, 1, 2, 3, 7, rows, rows + 5}) {
      SCOPED_TRACE(::testing::Message() << "case " << it << " rows " << rows << " S " << c.instances
                                        << " roles " << c.roles << " D " << D);
      MoeInterleavedScheduler::Params p{st.view(), c.instances, c.roles, D};
      MoeInterleavedScheduler::validate(p);
      const auto seqs = sequences<MoeInterleavedScheduler>(p);
      expect_exactly_once(st, seqs);
      const auto again = sequences<MoeInterleavedScheduler>(p);
      for (size_t cta = 0; cta < seqs.size(); ++cta) {
        ASSERT_EQ(again[cta].size(), seqs[cta].size());
        const int g = int(cta) / c.roles, r = int(cta) % c.roles;
        const auto ref = reference_interleaved(st.view(), c.instances, c.roles, D, g, r);
        ASSERT_EQ(ref.size(), seqs[cta].size());
        for (size_t i = 0; i < ref.size(); ++i) {
          ASSERT_TRUE(same(again[cta][i], seqs[cta][i])) << "non-deterministic at " << i;
          ASSERT_TRUE(same(ref[i], seqs[cta][i])) << "differs from reference at " << i;
        }
      }
    }
  }
}

// The instance-local lead: when instance g emits L2 of row p, all of g's own L1 tile pairs of rows
// < p + D were emitted earlier (all of them once L1 is exhausted). And the rule is tight: an L1 tile
// is emitted while L2 tiles remain only if the lead is not yet reached.
TEST(MoeInterleaved, InstanceLocalLeadHoldsAndIsTight) {
  std::mt19937 rng(7);
  for (int it = 0; it < kRandomCases; ++it) {
    const Case c = random_case(rng);
    MoeLayoutStorage st(c.tokens, c.b_m, c.l1_ntiles, c.l2_ntiles);
    const MoeLayout& l = st.view();
    const int rows = st.rows(), P1 = l.l1_ntiles / c.roles, S = c.instances;
    for (int D : {0, 1, 2, 5, rows}) {
      MoeInterleavedScheduler::Params p{l, S, c.roles, D};
      for (int g = 0; g < S; ++g) {
        MoeInterleavedScheduler s(p, g, 0);
        std::vector<MoeTile> seq;
        for (auto w = s.get_initial_work(); w.is_valid(); w = s.get_next_work(w)) seq.push_back(w.tile);
        // Own L1 pairs of g with row < x: k = g + jS < min(x * P1, rows * P1).
        auto own_l1_below = [&](long long x) {
          const long long lim = std::min<long long>(x, rows) * P1;
          return lim > g ? (lim - g + S - 1) / S : 0;
        };
        const long long own_l1_total = own_l1_below(rows);
        long long l1_emitted = 0, l2_left = 0;
        for (const auto& t : seq) l2_left += t.kind == MoeTileKind::L2;
        for (size_t i = 0; i < seq.size(); ++i) {
          const MoeTile& t = seq[i];
          if (t.kind == MoeTileKind::L2) {
            ASSERT_GE(l1_emitted, own_l1_below((long long)t.row + D))
                << "case " << it << " g " << g << " D " << D << " L2 row " << t.row << " at " << i;
            --l2_left;
          } else {
            if (l2_left > 0) {
              // The next L2 of g (first L2 later in seq) must not yet be allowed: p2 + D > p1.
              auto nx = std::find_if(seq.begin() + i, seq.end(),
                                     [](const MoeTile& u) { return u.kind == MoeTileKind::L2; });
              ASSERT_GT((long long)nx->row + D, t.row) << "case " << it << " L1 emitted past the lead";
            }
            ++l1_emitted;
          }
        }
        ASSERT_EQ(l1_emitted, own_l1_total);
      }
    }
  }
}

// D >= 1: every configuration executes to completion as an in-order kernel with per-row waits.
TEST(MoeInterleaved, LeadAtLeastOneNeverDeadlocks) {
  std::mt19937 rng(11);
  for (int it = 0; it < kRandomCases; ++it) {
    const Case c = random_case(rng);
    MoeLayoutStorage st(c.tokens, c.b_m, c.l1_ntiles, c.l2_ntiles);
    for (int D : {1, 2, 4, st.rows(), st.rows() + 1}) {
      const auto seqs = sequences<MoeInterleavedScheduler>({st.view(), c.instances, c.roles, D});
      ASSERT_TRUE(executes_without_deadlock(st.view(), seqs))
          << "case " << it << " S " << c.instances << " D " << D;
    }
  }
}

// D = 0 is the degenerate lead: Algorithm 1 then emits L2 of row p while the instance's own L1 cursor
// is still inside row p, so an in-order kernel waits on itself. The smallest example: one instance,
// one expert, one row. Every tile is still emitted exactly once.
TEST(MoeInterleaved, LeadZeroEmitsL2BeforeOwnL1AndCanDeadlock) {
  MoeLayoutStorage st({16}, 16, 2, 2);
  const MoeInterleavedScheduler::Params p{st.view(), 1, 1, 0};
  const auto seqs = sequences<MoeInterleavedScheduler>(p);
  expect_exactly_once(st, seqs);
  ASSERT_EQ(seqs[0].front().kind, MoeTileKind::L2);
  EXPECT_FALSE(executes_without_deadlock(st.view(), seqs));
  // With D = 1 the same layout runs all L1 first.
  const auto ok = sequences<MoeInterleavedScheduler>({st.view(), 1, 1, 1});
  EXPECT_EQ(ok[0][0].kind, MoeTileKind::L1);
  EXPECT_EQ(ok[0][1].kind, MoeTileKind::L1);
  EXPECT_TRUE(executes_without_deadlock(st.view(), ok));
}

// D >= rows: the L2 stream waits until the instance's L1 stream is exhausted, i.e. all L1, then all L2.
TEST(MoeInterleaved, LeadAtLeastRowsIsAllL1ThenAllL2) {
  std::mt19937 rng(3);
  for (int it = 0; it < 100; ++it) {
    const Case c = random_case(rng);
    MoeLayoutStorage st(c.tokens, c.b_m, c.l1_ntiles, c.l2_ntiles);
    for (int D : {st.rows(), st.rows() + 3}) {
      for (const auto& seq : sequences<MoeInterleavedScheduler>({st.view(), c.instances, c.roles, D})) {
        auto first_l2 = std::find_if(seq.begin(), seq.end(),
                                     [](const MoeTile& t) { return t.kind == MoeTileKind::L2; });
        ASSERT_TRUE(std::all_of(first_l2, seq.end(), [](const MoeTile& t) { return t.kind == MoeTileKind::L2; }));
      }
    }
  }
}

// Roles of one instance walk the same tile pairs and differ only in the N-tile within the pair.
TEST(MoeInterleaved, RolesShareTilePairs) {
  MoeLayoutStorage st({300, 0, 77, 1000}, 64, 8, 14);
  const auto seqs = sequences<MoeInterleavedScheduler>({st.view(), 5, 2, 2});
  for (int g = 0; g < 5; ++g) {
    const auto& a = seqs[2 * g];
    const auto& b = seqs[2 * g + 1];
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].kind, b[i].kind);
      EXPECT_EQ(a[i].row, b[i].row);
      EXPECT_EQ(a[i].n % 2, 0);
      EXPECT_EQ(b[i].n, a[i].n + 1);
    }
  }
}

TEST(MoeInterleaved, EmptyAndTinyLayouts) {
  MoeLayoutStorage none({0, 0, 0}, 64, 4, 4);
  for (const auto& seq : sequences<MoeInterleavedScheduler>({none.view(), 3, 1, 1})) EXPECT_TRUE(seq.empty());
  for (const auto& seq : sequences<MoeExpertWaveScheduler>({none.view(), 3, 1, 2})) EXPECT_TRUE(seq.empty());
  // One expert, one row, more instances than tiles: the extra instances get nothing.
  MoeLayoutStorage one({1}, 64, 2, 2);
  const auto seqs = sequences<MoeInterleavedScheduler>({one.view(), 8, 1, 1});
  expect_exactly_once(one, seqs);
  for (int g = 2; g < 8; ++g) EXPECT_TRUE(seqs[g].empty());
  EXPECT_TRUE(executes_without_deadlock(one.view(), seqs));
}

// A hand-checked sequence: one instance, 2 experts of 2 rows each, P1 = 2, P2 = 1, D = 1.
TEST(MoeInterleaved, HandCheckedSequence) {
  MoeLayoutStorage st({2, 2}, 1, 2, 1);
  const auto seq = sequences<MoeInterleavedScheduler>({st.view(), 1, 1, 1})[0];
  // k1 = 0,1 (row 0) -> then p1 = 1 >= p2 + 1 = 1: L2 row 0; then L1 row 1 (k1 = 2,3); L2 row 1; ...
  const char* want = "1:0 1:0 2:0 1:1 1:1 2:1 1:2 1:2 2:2 1:3 1:3 2:3";
  std::ostringstream got;
  for (size_t i = 0; i < seq.size(); ++i) got << (i ? " " : "") << int(seq[i].kind) + 1 << ":" << seq[i].row;
  EXPECT_EQ(got.str(), want);
  EXPECT_EQ(seq[3].expert, 0);
  EXPECT_EQ(seq[6].expert, 1);
  EXPECT_EQ(seq[6].m, 0);
}

// Reference Expert-Wave order, written independently: the explicit global list of tile pairs, wave by
// wave (L1 pairs then L2 pairs), dealt round-robin to the instances.
std::vector<MoeTile> reference_wave(const MoeLayoutStorage& st, int S, int roles, int epw, int g, int r) {
  const MoeLayout& l = st.view();
  const int P1 = l.l1_ntiles / roles, P2 = l.l2_ntiles / roles;
  std::vector<MoeTile> all;
  for (int e0 = 0; e0 < l.num_experts; e0 += epw) {
    const int first = st.row_offsets()[e0], last = st.row_offsets()[std::min(e0 + epw, l.num_experts)];
    for (int p = first; p < last; ++p)
      for (int j = 0; j < P1; ++j) all.push_back(l.tile(MoeTileKind::L1, p, roles * j + r));
    for (int p = first; p < last; ++p)
      for (int j = 0; j < P2; ++j) all.push_back(l.tile(MoeTileKind::L2, p, roles * j + r));
  }
  std::vector<MoeTile> out;
  for (size_t k = g; k < all.size(); k += S) out.push_back(all[k]);
  return out;
}

// Both Expert-Wave orders on random layouts x experts per wave {1, 2, 3, E, E + 4}: every tile exactly once, two walks
// identical, each CTA's sequence equal to `reference` (an independent list of the order dealt round-robin), the
// order-specific program-order property `order_ok` per CTA, and no cyclic wait.
template <class Reference, class OrderOk>
void check_random_waves(unsigned seed, int wave_lag, Reference reference, OrderOk order_ok) {
  std::mt19937 rng(seed);
  for (int it = 0; it < kRandomCases; ++it) {
    const Case c = random_case(rng);
    MoeLayoutStorage st(c.tokens, c.b_m, c.l1_ntiles, c.l2_ntiles);
    const int E = int(c.tokens.size());
    for (int epw : {1, 2, 3, E, E + 4}) {
      SCOPED_TRACE(::testing::Message() << "case " << it << " experts/wave " << epw << " lag " << wave_lag);
      MoeExpertWaveScheduler::Params p{st.view(), c.instances, c.roles, epw, 0, wave_lag};
      MoeExpertWaveScheduler::validate(p);
      const auto seqs = sequences<MoeExpertWaveScheduler>(p);
      expect_exactly_once(st, seqs);
      const auto again = sequences<MoeExpertWaveScheduler>(p);
      for (size_t cta = 0; cta < seqs.size(); ++cta) {
        ASSERT_EQ(again[cta].size(), seqs[cta].size());
        const auto ref = reference(st, c.instances, c.roles, epw, int(cta) / c.roles, int(cta) % c.roles);
        ASSERT_EQ(ref.size(), seqs[cta].size());
        for (size_t i = 0; i < seqs[cta].size(); ++i) {
          ASSERT_TRUE(same(again[cta][i], seqs[cta][i]));
          ASSERT_TRUE(same(ref[i], seqs[cta][i])) << "differs from reference at " << i;
        }
        order_ok(seqs[cta], epw);
      }
      ASSERT_TRUE(executes_without_deadlock(st.view(), seqs));
    }
  }
}

TEST(MoeExpertWave, RandomLayoutsExactlyOnceWaveOrderAndNoDeadlock) {
  // Program order: (wave, phase) non-decreasing; within a phase rows non-decreasing.
  check_random_waves(99, 0, reference_wave, [](const std::vector<MoeTile>& seq, int epw) {
    for (size_t i = 1; i < seq.size(); ++i) {
      const MoeTile &a = seq[i - 1], &b = seq[i];
      const int wa = a.expert / epw, wb = b.expert / epw;
      ASSERT_TRUE(wa < wb || (wa == wb && int(a.kind) <= int(b.kind))) << "wave order broken at " << i;
      if (wa == wb && a.kind == b.kind) {
        ASSERT_LE(a.row, b.row);
      }
    }
  });
}

// The lagged Expert-Wave order (Params::wave_lag 1), written independently: wave 0's L1 pairs, then for each later
// wave its L1 pairs followed by the previous wave's L2 pairs, then the last wave's L2 pairs; dealt round-robin.
std::vector<MoeTile> reference_lagged_wave(const MoeLayoutStorage& st, int S, int roles, int epw, int g, int r) {
  const MoeLayout& l = st.view();
  const int P1 = l.l1_ntiles / roles, P2 = l.l2_ntiles / roles;
  std::vector<MoeTile> all;
  auto rows_of = [&](int e0, int& first, int& last) {
    first = st.row_offsets()[std::min(e0, l.num_experts)];
    last = st.row_offsets()[std::min(e0 + epw, l.num_experts)];
  };
  for (int e0 = 0; e0 < l.num_experts + epw; e0 += epw) {
    int first, last;
    rows_of(e0, first, last);  // past the last wave: no rows (only the previous wave's L2 follow)
    for (int p = first; p < last; ++p)
      for (int j = 0; j < P1; ++j) all.push_back(l.tile(MoeTileKind::L1, p, roles * j + r));
    if (e0 == 0) continue;
    rows_of(e0 - epw, first, last);
    for (int p = first; p < last; ++p)
      for (int j = 0; j < P2; ++j) all.push_back(l.tile(MoeTileKind::L2, p, roles * j + r));
  }
  std::vector<MoeTile> out;
  for (size_t k = g; k < all.size(); k += S) out.push_back(all[k]);
  return out;
}

TEST(MoeExpertWave, LaggedWavesExactlyOnceInOrderAndNoDeadlock) {
  // Program order: an L1 tile of wave w comes after L2 tiles of waves up to w - 2 only, an L2 tile of wave w after L1
  // tiles of waves up to w + 1 only.
  check_random_waves(314, 1, reference_lagged_wave, [](const std::vector<MoeTile>& seq, int epw) {
    int max_l1 = -1, max_l2 = -1;
    for (const MoeTile& t : seq) {
      const int w = t.expert / epw;
      if (t.kind == MoeTileKind::L1) {
        if (max_l2 >= 0) ASSERT_GE(w, max_l2 + 2);
        max_l1 = std::max(max_l1, w);
      } else {
        if (max_l1 >= 0) ASSERT_GE(w, max_l1 - 1);
        max_l2 = std::max(max_l2, w);
      }
    }
  });
  MoeLayoutStorage st({3, 5}, 4, 2, 2);
  EXPECT_THROW(MoeExpertWaveScheduler::validate({st.view(), 2, 1, 1, 0, 2}), xstage::UsageError);
}

// Waves sized from the layout (experts_per_wave 0, wave_ctas: a device plan's layout exists only on the device): the
// exact ceil(ctas / max(1, rows * l1 / E)) clamped to [1, E], and the scheduler walks exactly the sequence of that
// value given explicitly.
TEST(MoeExpertWave, WavesSizedFromTheLayout) {
  using xstage::sched::auto_experts_per_wave;
  EXPECT_EQ(auto_experts_per_wave(10, 1, 16, 132), 16);     // fewer L1 tiles than experts: ctas, clamped to E
  EXPECT_EQ(auto_experts_per_wave(384, 24, 384, 132), 6);   // 9216 tiles / 384 experts = 24 per expert: ceil(5.5)
  EXPECT_EQ(auto_experts_per_wave(384, 24, 384, 144), 6);   // exactly 6: no rounding up past an integer
  EXPECT_EQ(auto_experts_per_wave(4096, 24, 8, 132), 1);    // one expert's tiles cover the CTAs
  EXPECT_EQ(auto_experts_per_wave(0, 24, 8, 132), 8);       // no rows at all
  std::mt19937 rng(7);
  for (int it = 0; it < kRandomCases; ++it) {
    const Case c = random_case(rng);
    MoeLayoutStorage st(c.tokens, c.b_m, c.l1_ntiles, c.l2_ntiles);
    const int E = int(c.tokens.size());
    const int ctas = c.instances * c.roles;
    MoeExpertWaveScheduler::Params sized{st.view(), c.instances, c.roles, 0, ctas};
    MoeExpertWaveScheduler::validate(sized);
    const int epw = auto_experts_per_wave(st.rows(), c.l1_ntiles, E, ctas);
    ASSERT_GE(epw, 1);
    ASSERT_LE(epw, E);
    EXPECT_EQ(MoeExpertWaveScheduler(sized, 0).experts_per_wave(), epw);
    const auto a = sequences<MoeExpertWaveScheduler>(sized);
    const auto b = sequences<MoeExpertWaveScheduler>({st.view(), c.instances, c.roles, epw});
    ASSERT_EQ(a.size(), b.size());
    for (size_t cta = 0; cta < a.size(); ++cta) {
      ASSERT_EQ(a[cta].size(), b[cta].size());
      for (size_t i = 0; i < a[cta].size(); ++i) ASSERT_TRUE(same(a[cta][i], b[cta][i]));
    }
  }
  MoeLayoutStorage st({3, 5}, 4, 2, 2);
  EXPECT_THROW(MoeExpertWaveScheduler::validate({st.view(), 2, 1, 0, 0}), xstage::UsageError);  // neither given
}

// The two schedulers emit the same tile set, only the order differs.
TEST(MoeSchedulers, SameTileMultiset) {
  MoeLayoutStorage st({640, 0, 130, 4096, 3}, 128, 16, 28);
  auto key = [](const MoeTile& t) { return (long long)t.row * 1000000 + int(t.kind) * 1000 + t.n; };
  std::vector<long long> a, b;
  for (const auto& s : sequences<MoeInterleavedScheduler>({st.view(), 33, 2, 3}))
    for (const auto& t : s) a.push_back(key(t));
  for (const auto& s : sequences<MoeExpertWaveScheduler>({st.view(), 33, 2, 2}))
    for (const auto& t : s) b.push_back(key(t));
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  EXPECT_EQ(a, b);
}

// ---------------------------------------------------------------------------------------------------
// Row orders (MoeLayout::row_order, spread_row_order): the walk visits rows in another order.

TEST(MoeRowOrder, SpreadHandChecked) {
  // b_m 128: expert 0 holds rows 0-2 (pair 0-1, row 2 alone), experts 1, 2 and 4 one short row each (rows 3, 4, 7,
  // streamed), expert 3 rows 5-6 (a pair). Three units, three streamed rows: one after each unit.
  MoeLayoutStorage st({300, 10, 20, 129, 5}, 128, 2, 2);
  EXPECT_EQ(spread_row_order(st.view()), (std::vector<int>{0, 1, 3, 2, 4, 5, 6, 7}));
  // A single row of more than b_m / 2 tokens is not streamed (a full tile); nothing to spread then.
  MoeLayoutStorage full({300, 65, 100}, 128, 2, 2);
  EXPECT_EQ(spread_row_order(full.view()), (std::vector<int>{0, 1, 2, 3, 4}));
  // Only streamed rows: the identity.
  MoeLayoutStorage small({3, 0, 64, 1}, 128, 2, 2);
  EXPECT_EQ(spread_row_order(small.view()), (std::vector<int>{0, 1, 2}));
}

TEST(MoeRowOrder, RejectsBadOrders) {
  MoeLayoutStorage st({300, 10}, 128, 2, 2);  // 4 rows
  EXPECT_THROW(st.set_row_order({0, 1, 2}), xstage::UsageError);     // too short
  EXPECT_THROW(st.set_row_order({0, 1, 2, 2}), xstage::UsageError);  // a repeat
  EXPECT_THROW(st.set_row_order({0, 1, 2, 4}), xstage::UsageError);  // out of range
  st.set_row_order({3, 0, 1, 2});
  EXPECT_EQ(st.view().row_at(0), 3);
  MoeLayoutStorage copy(st);
  EXPECT_EQ(copy.view().row_at(0), 3);
  EXPECT_NE(copy.view().row_order, st.view().row_order);  // the copy owns its order
  st.set_row_order({});
  EXPECT_EQ(st.view().row_at(0), 0);
}

// spread_row_order on random layouts: a permutation; every other expert's rows in order with the pairs (2i, 2i + 1)
// adjacent; streamed rows in expert order, never more than ceil(S / U) of them in a run. Both schedulers then emit
// every tile once, run without deadlock, and Interleaved keeps its lead in positions.
TEST(MoeRowOrder, SpreadOnRandomLayoutsAndSchedulersWalkIt) {
  std::mt19937 rng(20261202);
  int spread = 0;  // cases whose order is not the identity
  for (int it = 0; it < kRandomCases; ++it) {
    Case c = random_case(rng);
    if (it % 2) {  // many short experts beside a few long ones, as Zipf routing gives
      for (int& t : c.tokens) t = int(rng() % 4) == 0 ? int(rng() % (8 * c.b_m)) : int(rng() % (c.b_m / 2 + 1));
    }
    MoeLayoutStorage st(c.tokens, c.b_m, c.l1_ntiles, c.l2_ntiles);
    const MoeLayout& l = st.view();
    const int rows = st.rows(), E = int(c.tokens.size());
    const std::vector<int> order = spread_row_order(l);
    SCOPED_TRACE(::testing::Message() << "case " << it << " rows " << rows);
    ASSERT_EQ(int(order.size()), rows);
    std::vector<int> pos(rows, -1);
    for (int q = 0; q < rows; ++q) {
      ASSERT_GE(order[q], 0);
      ASSERT_LT(order[q], rows);
      ASSERT_EQ(pos[order[q]], -1) << "row " << order[q] << " twice";
      pos[order[q]] = q;
    }
    size_t S = 0, U = 0;
    int last_streamed = -1;
    for (int e = 0; e < E; ++e) {
      const int first = st.row_offsets()[e], n = st.row_offsets()[e + 1] - first;
      if (n == 1 && c.tokens[e] <= c.b_m / 2) {
        ++S;
        ASSERT_GT(pos[first], last_streamed) << "streamed rows out of expert order";
        last_streamed = pos[first];
        continue;
      }
      U += size_t(n + 1) / 2;
      for (int b = 0; b + 1 < n; ++b) ASSERT_LT(pos[first + b], pos[first + b + 1]) << "expert " << e;
      for (int b = 0; b + 1 < n; b += 2) ASSERT_EQ(pos[first + b + 1], pos[first + b] + 1) << "pair split, expert " << e;
    }
    if (S > 0 && U > 0) {
      ++spread;
      const size_t most = (S + U - 1) / U;
      size_t run = 0;
      for (int q = 0; q < rows; ++q) {
        const int e = l.expert_of_row(order[q]);
        const bool streamed = st.row_offsets()[e + 1] - st.row_offsets()[e] == 1 && c.tokens[e] <= c.b_m / 2;
        run = streamed ? run + 1 : 0;
        ASSERT_LE(run, most) << "a run of streamed rows at position " << q;
      }
    } else {
      for (int q = 0; q < rows; ++q) ASSERT_EQ(order[q], q);
    }
    st.set_row_order(order);
    for (int D : {1, 2, 3}) {
      MoeInterleavedScheduler::Params p{st.view(), c.instances, c.roles, D};
      const auto seqs = sequences<MoeInterleavedScheduler>(p);
      expect_exactly_once(st, seqs);
      ASSERT_TRUE(executes_without_deadlock(st.view(), seqs));
      // The lead in positions: when an instance emits L2 at position q, it has emitted its own L1 tiles of every
      // position < q + D (all of them once its L1 stream is done).
      for (int g = 0; g < c.instances; ++g) {
        const auto& seq = seqs[size_t(g) * c.roles];
        std::vector<int> mine;  // positions of this instance's L1 tiles, in program order
        for (const MoeTile& t : seq)
          if (t.kind == MoeTileKind::L1) mine.push_back(pos[t.row]);
        size_t done = 0;
        for (const MoeTile& t : seq) {
          if (t.kind == MoeTileKind::L1) {
            ++done;
            continue;
          }
          for (size_t i = done; i < mine.size(); ++i) ASSERT_GE(mine[i], pos[t.row] + D) << "lead broken, instance " << g;
        }
      }
    }
    const int epw = 1 + int(rng() % 3);
    MoeExpertWaveScheduler::Params w{st.view(), c.instances, c.roles, epw};
    const auto wseqs = sequences<MoeExpertWaveScheduler>(w);
    expect_exactly_once(st, wseqs);
    ASSERT_TRUE(executes_without_deadlock(st.view(), wseqs));
  }
  EXPECT_GE(spread, kRandomCases / 4) << "too few layouts with rows to spread";
  std::printf("spread orders: %d of %d layouts\n", spread, kRandomCases);
}

}  // namespace
