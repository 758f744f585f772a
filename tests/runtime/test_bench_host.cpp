// Host-side benchmark logic: K sweep from the SM count, test-case sweeps and skip rules, and the
// burst statistics (periodic: steady window on the common clock, harmonic-mean aggregate period;
// isolated: aligned aggregate spans).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "calib.hpp"
#include "xstage/common/error.hpp"

using namespace xstage::bench;

TEST(Sweep, KFromSmCount) {
  EXPECT_EQ(k_sweep(132), (std::vector<int>{33, 66, 132}));
  EXPECT_EQ(k_sweep(148), (std::vector<int>{37, 74, 148}));
  EXPECT_EQ(k_sweep(3), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(k_sweep(1), (std::vector<int>{1}));
  EXPECT_THROW(k_sweep(0), xstage::UsageError);
}

TEST(Sweep, CasesFollowTheDeviceAndTheWorld) {
  SweepContext ctx;
  ctx.sm_count = 100;
  ctx.world = 4;
  ctx.R_guess = 0;
  std::set<std::string> keys;
  for (auto& tc : all_cases()) {
    EXPECT_TRUE(keys.insert(tc->key()).second) << "duplicate key " << tc->key();
    EXPECT_FALSE(tc->description().empty());
    // Gap and isolated sweeps need a measured drain rate to place their grid.
    if (tc->key().rfind("zerogap", 0) == 0 || tc->key().rfind("pairs", 0) == 0) {
      EXPECT_EQ(tc->skip_reason(ctx), "") << tc->key();
      for (const Config& c : tc->configs(ctx)) {
        EXPECT_EQ(c.mode, "zerogap");
        EXPECT_LE(c.K, c.producer == "warp" ? 400 : 100);
        EXPECT_EQ(c.gap_ns, 0);
      }
    } else {
      EXPECT_NE(tc->skip_reason(ctx), "") << tc->key();
    }
  }
  ctx.R_guess = 400e9;
  for (auto& tc : all_cases()) {
    ASSERT_EQ(tc->skip_reason(ctx), "") << tc->key();
    auto cs = tc->configs(ctx);
    ASSERT_FALSE(cs.empty()) << tc->key();
    if (tc->key() == "gap_st_p2p_cta") {
      std::set<int> ks;
      double gmax = 0;
      for (auto& c : cs) {
        ks.insert(c.K);
        gmax = std::max(gmax, c.gap_ns);
        if (c.local) {
          EXPECT_EQ(c.K, 100);  // local control at K = SMs
        }
      }
      EXPECT_EQ(ks, (std::set<int>{25, 50, 100}));
      EXPECT_NEAR(gmax, 1.5 * 100 * 32768 / 400e9 * 1e9, 1e-6);  // 1.5 x V/R at K = SMs, B = 32 KB
      // At K = SMs, both B = 8 KB (its burst fits the outstanding capacity) and 32 KB sweep G from 0
      // to 1.5 V/R, remote and local on the same grid.
      for (uint32_t B : {8192u, 32768u})
        for (bool local : {false, true}) {
          std::vector<double> g;
          for (auto& c : cs)
            if (c.K == 100 && c.B == B && c.local == local) g.push_back(c.gap_ns);
          ASSERT_GE(g.size(), 10u) << B << " " << local;
          EXPECT_EQ(*std::min_element(g.begin(), g.end()), 0);
          EXPECT_NEAR(*std::max_element(g.begin(), g.end()), 1.5 * 100.0 * B / 400e9 * 1e9, 1e-6);
        }
    }
    if (tc->key() == "pairs_st_p2p_cta") {
      EXPECT_EQ(cs.size(), 4u * 3u - 1u);  // every ordered pair of P = 4 but 0 -> 1
      for (auto& c : cs) EXPECT_NE(c.src, c.dst);
    }
    if (tc->key() == "isolated_st_p2p_warp") {
      for (auto& c : cs) EXPECT_EQ(c.K, 400);
    }
  }
  ctx.world = 1;
  for (auto& tc : all_cases()) EXPECT_NE(tc->skip_reason(ctx), "") << tc->key();
}

// Synthetic stamps: stamps[b][p] = {gt start, gt end, clk start, clk end}. Every producer has its
// own clock64 origin (different SMs) and the %globaltimer epoch is realistic (~1.8e18 ns), so the
// statistics must take durations from clock64 and only place them with %globaltimer.
struct Stamps {
  int K, n;
  double ghz;
  std::vector<uint64_t> s;
  Stamps(int K_, int n_, double ghz_) : K(K_), n(n_), ghz(ghz_), s(size_t(n_) * K_ * 4) {}
  static constexpr uint64_t kEpoch = 1795991597776461280ull;
  // Producer p: burst b starts at t (ns after the epoch) and lasts span ns.
  void set(int b, int p, double t, double span) {
    uint64_t* x = &s[(size_t(b) * K + p) * 4];
    const uint64_t clk0 = 1000003ull * (p + 1);  // per-SM clock64 origin
    x[0] = kEpoch + uint64_t(t);
    x[1] = kEpoch + uint64_t(t + span);
    x[2] = clk0 + uint64_t(t * ghz + 0.5);
    x[3] = clk0 + uint64_t((t + span) * ghz + 0.5);
  }
  // Producer p runs free from t0: burst b lasts span(b), then gap(b).
  template <class F, class G>
  void run(int p, double t0, F span, G gap) {
    double t = t0;
    for (int b = 0; b < n; ++b) {
      set(b, p, t, span(b));
      t += span(b) + gap(b);
    }
  }
};

TEST(Stats, PeriodicEqualProducers) {
  Stamps st(3, 32, 2.0);
  for (int p = 0; p < 3; ++p)  // staggered starts, same steady burst: span 700, gap 300
    st.run(p, 50.0 * p, [](int b) { return b < 3 ? 200.0 : 700.0; }, [](int) { return 300.0; });
  Result r = burst_stats(st.s, st.n, st.K, {true, true, true}, true, 8, 4, st.ghz);
  EXPECT_NEAR(r.period_ns, 1000, 1e-6);
  EXPECT_NEAR(r.gap_meas_ns, 300, 1e-6);
  EXPECT_NEAR(r.tiss_ns, 700, 1e-6);  // = period - gap
  EXPECT_NEAR(r.tiss_prod_med_ns, 700, 1e-6);
  EXPECT_NEAR(r.tiss_span_ns, 800, 1e-6);  // first start -> last end: 100 ns of stagger on top
  EXPECT_NEAR(r.period_spread, 1, 1e-12);
  EXPECT_NEAR(r.tiss_first_ns, 300, 1e-6);  // burst 0 (short warm-up burst)
  // Common window [start_2(8), start_0(27)] = [6.6 us, 25.5 us]: producer 1 (50 ns after producer
  // 0) has the fewest bursts starting in it, 9..26.
  EXPECT_EQ(r.steady_bursts, 18);
}

// Unfair service: producer 1 is served at half the rate of producer 0. The aggregate issue rate is
// B/P_0 + B/P_1, i.e. the harmonic mean of the periods, not their mean or median.
TEST(Stats, PeriodicHarmonicMeanOfProducerPeriods) {
  Stamps st(2, 40, 1.98);
  st.run(0, 0, [](int) { return 600.0; }, [](int) { return 400.0; });   // P_0 = 1000
  st.run(1, 0, [](int) { return 1600.0; }, [](int) { return 400.0; });  // P_1 = 2000
  Result r = burst_stats(st.s, st.n, st.K, {true, true}, true, 10, 5, st.ghz);
  const double hm = 2.0 / (1.0 / 1000 + 1.0 / 2000);
  EXPECT_NEAR(r.period_ns, hm, 0.01);
  EXPECT_NEAR(r.gap_meas_ns, 400, 0.01);
  EXPECT_NEAR(r.tiss_ns, hm - 400, 0.02);
  EXPECT_NEAR(r.period_spread, 2, 1e-4);
  // Common window [t_a, t_b] = [start_1(10), start_0(34)] = [20 us, 34 us]: producer 0 has bursts
  // 20..34 in it, producer 1 bursts 10..17.
  EXPECT_EQ(r.steady_bursts, 8);
}

// Producers with different gaps (e.g. one delayed by its own stall): the gap is averaged over the
// bursts issued (rate-weighted), so period = T_iss + G with T_iss the rate-weighted mean span.
TEST(Stats, PeriodicGapIsRateWeighted) {
  Stamps st(2, 40, 2.0);
  st.run(0, 0, [](int) { return 600.0; }, [](int) { return 400.0; });   // P_0 = 1000
  st.run(1, 0, [](int) { return 800.0; }, [](int) { return 1200.0; });  // P_1 = 2000
  Result r = burst_stats(st.s, st.n, st.K, {true, true}, true, 2, 1, st.ghz);
  const double rate = 1.0 / 1000 + 1.0 / 2000;
  EXPECT_NEAR(r.period_ns, 2 / rate, 1e-6);
  EXPECT_NEAR(r.gap_meas_ns, (400.0 / 1000 + 1200.0 / 2000) / rate, 1e-6);
  EXPECT_NEAR(r.tiss_ns, (600.0 / 1000 + 800.0 / 2000) / rate, 1e-6);
  EXPECT_GT(r.tiss_ns, 0);  // an unweighted mean gap (800) would give 1333 - 800 here, and < 0 elsewhere
}

// Warm-up bursts (an empty X-Stage: fast) and the tail (the others have finished: fast again) must
// not move the steady figures; only the bursts in the common window count.
TEST(Stats, PeriodicSteadyWindowSkipsWarmupAndTail) {
  const int n = 64, warm = 16, tail = 8;
  Stamps st(4, n, 2.0);
  for (int p = 0; p < 4; ++p)
    st.run(p, 10.0 * p, [&](int b) { return b < 4 || b >= n - 3 ? 400.0 : 2800.0; },
           [](int) { return 120.0; });
  Result r = burst_stats(st.s, n, st.K, {true, true, true, true}, true, warm, tail, st.ghz);
  EXPECT_NEAR(r.period_ns, 2920, 1e-6);
  EXPECT_NEAR(r.gap_meas_ns, 120, 1e-6);
  EXPECT_NEAR(r.tiss_ns, 2800, 1e-6);
  // Inactive producers (no stores on this rank) are ignored, even with garbage stamps.
  Stamps bad = st;
  bad.set(20, 2, 9e12, 1);
  EXPECT_NEAR(burst_stats(bad.s, n, bad.K, {true, true, false, true}, true, warm, tail, bad.ghz).tiss_ns, 2800, 1e-6);
}

// A producer that drifted out of the common window (it started after the others were done) falls
// back to its own steady bursts; steady_bursts = 0 flags it.
TEST(Stats, PeriodicDriftedProducerFallsBack) {
  Stamps st(2, 16, 2.0);
  st.run(0, 0, [](int) { return 500.0; }, [](int) { return 500.0; });
  st.run(1, 1e6, [](int) { return 1500.0; }, [](int) { return 500.0; });
  Result r = burst_stats(st.s, st.n, st.K, {true, true}, true, 4, 2, st.ghz);
  EXPECT_EQ(r.steady_bursts, 0);
  EXPECT_NEAR(r.period_ns, 2.0 / (1.0 / 1000 + 1.0 / 2000), 1e-6);
  EXPECT_NEAR(r.gap_meas_ns, 500, 1e-6);
}

TEST(Stats, AlignedBurstsOnTheCommonClock) {
  const int K = 2, n = 5;
  Stamps st(K, n, 2.0);
  for (int b = 0; b < n; ++b) {
    st.set(b, 0, 1000.0 * b + 3, 300.5);    // producer 0: 300.5 ns
    st.set(b, 1, 1000.0 * b + 103, 400.5);  // producer 1: 100 ns later, 400.5 ns
  }
  Result r = burst_stats(st.s, n, K, {true, true}, false, 1, 0, st.ghz);
  EXPECT_NEAR(r.tiss_ns, 500.5, 1e-6);      // first start -> last end
  EXPECT_NEAR(r.period_ns, 1000, 1e-6);     // start to start
  EXPECT_NEAR(r.gap_meas_ns, 499.5, 1e-6);  // aggregate: last end (b) -> first start (b+1)
  EXPECT_NEAR(r.tiss_prod_med_ns, 350.5, 1e-6);
  Result one = burst_stats(st.s, n, K, {true, false}, false, 1, 0, st.ghz);
  EXPECT_NEAR(one.tiss_ns, 300.5, 1e-6);  // inactive producers are ignored
  EXPECT_THROW(burst_stats(st.s, n, K, {false, false}, false, 1, 0, st.ghz), xstage::UsageError);
  EXPECT_THROW(burst_stats(st.s, n, K, {true, true}, false, n, 0, st.ghz), xstage::UsageError);
  EXPECT_THROW(burst_stats(st.s, n, K, {true, true}, true, 2, 2, st.ghz), xstage::UsageError);  // no window
}

TEST(Csv, SampleColumnsFollowTheFitSchema) {
  Config c;
  c.mode = "isolated";
  c.K = 4;
  c.B = 4096;
  c.gap_ns = 9999;  // the recovery gap is not a model G
  Result r;
  r.tiss_ns = 123;
  r.period_ns = 777;
  auto s = to_sample(c, r);
  EXPECT_EQ(s.V, 16384);
  EXPECT_EQ(s.gap_ns, 0);
  EXPECT_EQ(s.period_ns, 0);
  EXPECT_EQ(s.target, "remote");
}

// --refit: the host half of `xstage calibrate` (calib::refit: fit, validation in and out of sample, knee
// check, summary) on the committed H200 run, without a GPU. The numbers are the committed run's
// (results/calibration/summary.json), to a relative 1e-6. A reproducibility pin, not a check of the fit's
// correctness: that is Fit.* on synthetic data with known parameters (tests/model/test_fit.cpp).
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "report.hpp"

TEST(Refit, CommittedRunGivesTheCommittedNumbers) {
  namespace fs = std::filesystem;
  const fs::path src = fs::path(XSTAGE_SOURCE_DIR) / "results" / "calibration";
  ASSERT_TRUE(fs::exists(src / "calibration.csv")) << "no committed calibration run at " << src;
  const fs::path dir = fs::temp_directory_path() / ("xstage-refit-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  EXPECT_EQ(xstage::calib::refit(src.string(), dir.string(), false), 0);
  nlohmann::json s = nlohmann::json::parse(std::ifstream(dir / "summary.json"));
  // The numbers are the committed run's own summary (what the README and PLATFORM.md quote), not copies of them: a
  // refit must give them again to a relative 1e-6 (the fit is deterministic; the slack is for other compilers).
  const nlohmann::json want = nlohmann::json::parse(std::ifstream(src / "summary.json"));
  auto same = [](const nlohmann::json& got, const nlohmann::json& ref, const std::string& key) {
    ASSERT_TRUE(ref.contains(key) && ref[key].is_number()) << "committed summary.json has no number " << key;
    ASSERT_TRUE(got.contains(key) && got[key].is_number()) << "refit summary.json has no number " << key;
    const double g = got[key].get<double>(), r = ref[key].get<double>();
    EXPECT_NEAR(g, r, 1e-6 * std::fabs(r)) << key;
  };
  for (const char* key : {"R_GBps", "Q_MB", "T_iss0_us", "model_period_oos_median_err", "model_period_oos_max_err",
                          "model_tiss_oos_median_err", "model_tiss_oos_max_err", "model_period_oos_reqgap_median_err",
                          "iso_oos_median_err", "oos_points", "insample_points"})
    same(s, want, key);
  EXPECT_EQ(s["wrong_bytes"].get<long long>(), 0);
  EXPECT_GT(s["oos_points"].get<int>(), 0);  // the model is validated on points it was not fitted to
  ASSERT_EQ(s["per_K"].size(), 3u);
  ASSERT_EQ(want["per_K"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    same(s["per_K"][i], want["per_K"][i], "Q_MB");
    EXPECT_EQ(s["per_K"][i]["knee_steps_apart"], want["per_K"][i]["knee_steps_apart"]) << i;
  }
  // The warp family has no gap sweep: no error, not 0 %.
  EXPECT_TRUE(s["variants"][3]["gap_median_err"].is_null());
  EXPECT_TRUE(fs::exists(dir / "platform.json"));
  EXPECT_TRUE(fs::exists(dir / "validation.csv"));
  EXPECT_TRUE(fs::exists(dir / "calibration.csv"));
  fs::remove_all(dir);
  EXPECT_THROW(xstage::calib::refit((dir / "missing").string(), "", false), xstage::UsageError);
}
