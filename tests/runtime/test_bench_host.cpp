// Host-side benchmark logic: K sweep from the SM count, test-case sweeps and skip rules, and the
// burst statistics (aggregate spans on the common clock).
#include <gtest/gtest.h>

#include <unistd.h>

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

// stamps[b][p] = {gt start, gt end, clk start, clk end}
static void stamp(std::vector<uint64_t>& s, int K, int b, int p, uint64_t g0, double span_ns, double ghz) {
  uint64_t* x = &s[(size_t(b) * K + p) * 4];
  x[0] = g0;
  x[1] = g0 + uint64_t(span_ns);
  x[2] = 1000;
  x[3] = 1000 + uint64_t(span_ns * ghz + 0.5);
}

TEST(Stats, AggregateSpansOnTheCommonClock) {
  const int K = 2, n = 5;
  const double ghz = 2.0;
  std::vector<uint64_t> s(n * K * 4);
  for (int b = 0; b < n; ++b) {
    // A realistic %globaltimer epoch (~1.8e18 ns): spans must survive it without 256-ns rounding.
    const uint64_t t0 = 1795991597776461280ull + 1000 * b;
    stamp(s, K, b, 0, t0 + 3, 300.5, ghz);    // producer 0: 300.5 ns
    stamp(s, K, b, 1, t0 + 103, 400.5, ghz);  // producer 1: 100 ns later, 400.5 ns
  }
  Result r = burst_stats(s, n, K, {true, true}, 1, ghz);
  EXPECT_NEAR(r.tiss_ns, 500.5, 1e-6);   // first start -> last end
  EXPECT_NEAR(r.period_ns, 1000, 1e-6);  // start to start
  EXPECT_NEAR(r.gap_meas_ns, 499.5, 1e-6);  // aggregate: last end (b) -> first start (b+1)
  Result one = burst_stats(s, n, K, {true, false}, 1, ghz);
  EXPECT_NEAR(one.tiss_ns, 300.5, 1e-6);  // inactive producers are ignored
  EXPECT_THROW(burst_stats(s, n, K, {false, false}, 1, ghz), xstage::UsageError);
  EXPECT_THROW(burst_stats(s, n, K, {true, true}, n, ghz), xstage::UsageError);
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

// --refit: the report half of `xstage calibrate` (fit, validation without refit, knee check,
// summary keys) on the committed H200 run, without a GPU.
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "calibrate.hpp"

TEST(Refit, CommittedRunGivesEverySummaryKey) {
  namespace fs = std::filesystem;
  const fs::path src = fs::path(XSTAGE_SOURCE_DIR) / "results" / "calibration";
  if (!fs::exists(src / "calibration.csv")) GTEST_SKIP() << "no committed calibration run at " << src;
  const fs::path dir = fs::temp_directory_path() / ("xstage-refit-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(src / "calibration.csv", dir / "calibration.csv", fs::copy_options::overwrite_existing);
  fs::copy_file(src / "summary.json", dir / "summary.json", fs::copy_options::overwrite_existing);
  CalibrateOptions o;
  o.refit = dir.string();
  o.plots = false;
  EXPECT_EQ(calibrate(o), 0);
  nlohmann::json s = nlohmann::json::parse(std::ifstream(dir / "summary.json"));
  for (const char* k : {"R_GBps", "copy_engine_GBps", "T_iss0_us", "Q_MB", "model_median_err", "model_max_err",
                        "machine", "command"})
    EXPECT_TRUE(s.contains(k)) << k;
  EXPECT_GT(s["R_GBps"].get<double>(), 0);
  EXPECT_LT(s["R_GBps"].get<double>(), 478);  // an aggregate above NVLink line rate would be a bug
  EXPECT_EQ(s["wrong_bytes"].get<long long>(), 0);
  EXPECT_EQ(s["per_K"].size(), 3u);
  EXPECT_TRUE(fs::exists(dir / "platform.json"));
  EXPECT_TRUE(fs::exists(dir / "validation.csv"));
  fs::remove_all(dir);
  o.refit = (dir / "missing").string();
  EXPECT_THROW(calibrate(o), xstage::UsageError);
}
