// CPU tests of include/xstage/bench/protocol.hpp (+ protocol_json.hpp, nvml.hpp): the shared cases of
// tests/bench/protocol_cases.json (also checked by the Python twin, test_bench_protocol.py), the
// warm-up and the driver on a fake clock, NVML absent, and the probes' balanced passes (passes.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "xstage/bench/nvml.hpp"
#include "xstage/bench/passes.hpp"
#include "xstage/bench/protocol.hpp"
#include "xstage/bench/protocol_json.hpp"

namespace xb = xstage::bench;
using nlohmann::json;

namespace {

const json& cases() {
  static const json j = [] {
    std::ifstream f(XSTAGE_BENCH_CASES);
    return json::parse(f);
  }();
  return j;
}

std::optional<double> opt(const json& j) { return j.is_null() ? std::nullopt : std::optional<double>(j.get<double>()); }

// got (our JSON) equals expect: same keys; numbers within 1e-9 relative; null/bool/int exactly.
void expect_json_close(const json& got, const json& expect, const std::string& what) {
  std::set<std::string> kg, ke;
  for (auto it = got.begin(); it != got.end(); ++it) kg.insert(it.key());
  for (auto it = expect.begin(); it != expect.end(); ++it) ke.insert(it.key());
  EXPECT_EQ(kg, ke) << what;
  for (auto it = expect.begin(); it != expect.end(); ++it) {
    const json& g = got.at(it.key());
    const json& e = it.value();
    if (e.is_number() && g.is_number() && !e.is_boolean()) {
      const double a = g.get<double>(), b = e.get<double>();
      EXPECT_NEAR(a, b, 1e-9 * std::max(1.0, std::fabs(b))) << what << "." << it.key();
    } else {
      EXPECT_EQ(g, e) << what << "." << it.key();
    }
  }
}

std::vector<std::string> keys(const json& j) {
  std::vector<std::string> k;
  for (auto it = j.begin(); it != j.end(); ++it) k.push_back(it.key());
  return k;
}

std::vector<std::string> field_list(const char* name) {
  return cases().at("json_fields").at(name).get<std::vector<std::string>>();
}

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

TEST(BenchProtocol, CasesBlockOrder) {
  for (const auto& c : cases().at("block_order")) {
    const auto got = xb::block_order(c.at("n_backends"), c.at("rounds"));
    const auto& e = c.at("expect");
    ASSERT_EQ(got.size(), e.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].backend, e[i][0].get<int>()) << i;
      EXPECT_EQ(got[i].round, e[i][1].get<int>()) << i;
      EXPECT_EQ(xb::half_name(got[i].half), e[i][2].get<std::string>()) << i;
    }
  }
  EXPECT_THROW(xb::block_order(0, 1), std::invalid_argument);
  EXPECT_THROW(xb::block_order(1, 0), std::invalid_argument);
}

TEST(BenchProtocol, CasesCallsAndInputSets) {
  for (const auto& c : cases().at("calls_for_block"))
    EXPECT_EQ(xb::calls_for_block(c.at("block_s"), c.at("per_call_s"), c.at("min_calls"), c.at("max_calls")),
              c.at("expect").get<long>())
        << c.dump();
  for (const auto& c : cases().at("n_input_sets"))
    EXPECT_EQ(xb::n_input_sets(c.at("set_bytes"), c.at("l2_bytes")), c.at("expect").get<int>()) << c.dump();
}

TEST(BenchProtocol, CasesAggregateSamples) {
  for (const auto& c : cases().at("aggregate_samples")) {
    std::vector<std::optional<xb::Sample>> samples;
    for (const auto& s : c.at("samples")) {
      if (s.is_null()) {
        samples.push_back(std::nullopt);
        continue;
      }
      samples.push_back(xb::Sample{opt(s.at("sm_clock_mhz")), opt(s.at("power_w")), opt(s.at("temp_c")),
                                   opt(s.value("energy_mj", json())), opt(s.value("t_s", json()))});
    }
    expect_json_close(xb::to_json(xb::aggregate_samples(samples)), c.at("expect"), "aggregate_samples");
  }
}

TEST(BenchProtocol, CasesStatsAndRatios) {
  for (const auto& c : cases().at("stats")) {
    std::vector<xb::Block> blocks;
    for (const auto& b : c.at("blocks")) {
      xb::Block x;
      x.backend = b.at("backend");
      x.half = b.at("half") == "first" ? xb::Half::kFirst : xb::Half::kSecond;
      x.per_call_ms = b.at("per_call_ms");
      x.host_bound = b.at("host_bound");
      x.nvml.sm_clock_mhz = opt(b.at("sm_clock_mhz"));
      x.nvml.power_w = opt(b.at("power_w"));
      x.nvml.temp_c = opt(b.at("temp_c"));
      x.j_per_call = opt(b.value("j_per_call", json()));
      blocks.push_back(x);
    }
    for (auto it = c.at("expect").begin(); it != c.at("expect").end(); ++it)
      expect_json_close(xb::to_json(xb::backend_stats(blocks, it.key())), it.value(), "stats." + it.key());
    for (const auto& r : c.at("ratios")) {
      const auto a = xb::backend_stats(blocks, r.at("name")), ref = xb::backend_stats(blocks, r.at("ref"));
      expect_json_close(xb::to_json(xb::ratio(a, ref)), r.at("expect"), "ratio " + r.dump());
    }
  }
}

TEST(BenchProtocol, CasesGeomeanAndProtocolString) {
  for (const auto& c : cases().at("geomean")) {
    const auto g = xb::geomean(c.at("xs").get<std::vector<double>>());
    if (c.at("expect").is_null())
      EXPECT_FALSE(g.has_value());
    else
      EXPECT_NEAR(g.value(), c.at("expect").get<double>(), 1e-12);
  }
  for (const auto& c : cases().at("protocol_string"))
    EXPECT_EQ(xb::protocol_string(c.at("warmup_s"), c.at("block_s"), c.at("rounds"), c.at("timer"), c.at("n_inputs"),
                                  c.at("min_calls")),
              c.at("expect").get<std::string>());
}

TEST(BenchProtocol, MedianEdges) {
  EXPECT_EQ(xb::median({3, 1, 2}).value(), 2);
  EXPECT_EQ(xb::median({4, 1, 2, 3}).value(), 2.5);
  EXPECT_FALSE(xb::median({}).has_value());
  EXPECT_FALSE(xb::geomean({1.0, -1.0}).has_value());
  const auto r = xb::ratio(xb::backend_stats({}, "a"), xb::backend_stats({}, "b"));
  EXPECT_FALSE(r.ratio.has_value());
  EXPECT_FALSE(r.flipped.has_value());
}

namespace {

// Virtual time: call c of backend b advances the clock by cost[b]; records the input set it got.
class FakeTimer final : public xb::Timer {
 public:
  FakeTimer(std::vector<double> cost, int n_inputs, std::optional<double> host = std::nullopt)
      : cost_(std::move(cost)), n_inputs_(n_inputs), host_(host), seen_(cost_.size()) {}
  const char* name() const override { return "fake"; }
  double now() override { return t_; }
  xb::CallTiming time_calls(int backend, long first, long n) override {
    const double t0 = t_;
    for (long c = first; c < first + n; ++c) {
      t_ += cost_[backend];
      seen_[backend].push_back(static_cast<int>(c % n_inputs_));
    }
    chunks.push_back(n);
    std::optional<double> h;
    if (host_) h = *host_ * static_cast<double>(n);
    return {t_ - t0, n, h};
  }
  const std::vector<int>& seen(int b) const { return seen_[b]; }
  std::vector<long> chunks;

 private:
  std::vector<double> cost_;
  int n_inputs_;
  std::optional<double> host_;
  double t_ = 0;
  std::vector<std::vector<int>> seen_;
};

class FakeSampler final : public xb::Sampler {
 public:
  bool available() const override { return true; }
  void start() override { ++started; }
  std::vector<std::optional<xb::Sample>> stop() override {
    // The counter steps twice inside the block: at 0.05 s (between the readings at 0.04 and 0.06) to 61000 mJ and at
    // 0.15 s (between 0.14 and 0.16) to 121000 mJ: 60 J in 0.1 s, 600 W.
    const std::optional<double> none;
    return {xb::Sample{1500.0, 600.0, 50.0, 1000.0, 0.04}, xb::Sample{1700.0, 700.0, none, 61000.0, 0.06},
            xb::Sample{none, none, none, 61000.0, 0.14}, xb::Sample{none, none, none, 121000.0, 0.16}};
  }
  int started = 0;
};

}  // namespace

TEST(BenchProtocol, WarmUpDoublesAndStops) {
  FakeTimer t({1.0 / 64}, 1, 1e-4);
  const auto w = xb::warm_up(t, 0, 0.5, 0);
  EXPECT_EQ(t.chunks, (std::vector<long>{1, 2, 4, 8, 16, 1}));  // same as the Python test
  EXPECT_EQ(w.calls, 32);
  EXPECT_EQ(w.seconds, 0.5);
  EXPECT_NEAR(w.per_call_s, 1.0 / 64, 1e-15);
  EXPECT_NEAR(w.host_s_per_call.value(), 1e-4, 1e-15);
}

// A timer that spans ranks stops the warm-up only when every rank is done (AgreedTimer::all_done); here the other
// rank is done at 0.75 s of virtual time, so this rank, done at 0.5 s, goes on one call at a time (as Python's).
class LaggingPeerTimer final : public xb::Timer {
 public:
  FakeTimer inner{{1.0 / 64}, 1};
  const char* name() const override { return "lagging-peer"; }
  double now() override { return inner.now(); }
  xb::CallTiming time_calls(int b, long first, long n) override { return inner.time_calls(b, first, n); }
  bool all_done(bool done) override { return done && inner.now() >= 0.75; }
};

TEST(BenchProtocol, WarmUpWaitsForEveryRanksStop) {
  LaggingPeerTimer t;
  const auto w = xb::warm_up(t, 0, 0.5, 0);
  std::vector<long> want{1, 2, 4, 8, 16, 1};
  want.insert(want.end(), 16, 1L);
  EXPECT_EQ(t.inner.chunks, want);
  EXPECT_EQ(w.calls, 48);
  EXPECT_EQ(w.seconds, 0.75);
}

TEST(BenchProtocol, NvmlByPciBusId) {  // the CUDA ordinal's GPU, whatever CUDA_VISIBLE_DEVICES renumbers
  xb::NvmlReader none(std::string{});
  EXPECT_FALSE(none.available());
  EXPECT_NE(none.error().find("no PCI bus id"), std::string::npos) << none.error();
  xb::NvmlReader absent(std::string("0000:00:00.0"), "libnvidia-ml-definitely-absent.so.1");
  EXPECT_FALSE(absent.available());
  EXPECT_FALSE(absent.read().has_value());
  xb::NvmlReader nowhere(std::string("ffff:ff:1f.7"));  // GPU machine: no such bus; CPU machine: no NVML
  EXPECT_FALSE(nowhere.available());
  EXPECT_FALSE(nowhere.error().empty());
}

TEST(BenchProtocol, RunProtocolFakeClock) {
  FakeTimer t({0.001, 0.002}, 3, 5e-4);
  FakeSampler sampler;
  xb::Params p;
  p.warmup_s = 0.05;
  p.block_s = 0.2;
  p.rounds = 3;
  p.n_inputs = 3;
  int logged = 0;
  const auto res = xb::run_protocol({"fast", "slow"}, t, &sampler, p, [&](const xb::Block&) { ++logged; });
  EXPECT_EQ(logged, 12);
  EXPECT_EQ(sampler.started, 12);
  EXPECT_EQ(res.order, (std::vector<std::string>{"fast", "slow", "slow", "fast", "fast", "slow", "slow", "fast", "fast",
                                                 "slow", "slow", "fast"}));
  for (const auto& b : res.blocks) {
    const double cost = b.backend == "fast" ? 0.001 : 0.002;
    EXPECT_EQ(b.calls, std::lround(0.2 / cost));
    EXPECT_NEAR(b.per_call_ms, cost * 1e3, 1e-9);
    EXPECT_NEAR(b.host_ms_per_call.value(), 0.5, 1e-12);
    EXPECT_EQ(b.host_bound, 0.5 >= 0.8 * cost * 1e3);
    EXPECT_EQ(b.nvml.nvml_samples, 4);
    EXPECT_EQ(b.nvml.sm_clock_mhz.value(), 1600.0);
    EXPECT_FALSE(b.nvml.temp_c_max.value() != 50.0);
    EXPECT_NEAR(b.nvml.energy_w.value(), 600.0, 1e-9);  // the counter's two steps: 60 J in 0.1 s
    EXPECT_NEAR(b.energy_j.value(), 600.0 * 0.2, 1e-9);   // at that power over the block's 0.2 s
    EXPECT_NEAR(b.j_per_call.value(), 120.0 / double(b.calls), 1e-9);
  }
  const auto& fast = res.stats_of("fast");
  EXPECT_EQ(fast.blocks, 6);
  EXPECT_NEAR(fast.median_ms.value(), 1.0, 1e-9);
  EXPECT_NEAR(fast.spread.value(), 0.0, 1e-9);
  EXPECT_NEAR(fast.j_per_call.value(), 120.0 / double(res.blocks.at(0).calls), 1e-9);  // every fast block alike
  const auto r = xb::ratio(fast, res.stats_of("slow"));
  EXPECT_NEAR(r.ratio.value(), 2.0, 1e-9);
  EXPECT_FALSE(r.flipped.value());
  // inputs rotate per call over warm-ups and blocks
  for (int b = 0; b < 2; ++b) {
    const auto& s = t.seen(b);
    for (size_t i = 0; i < s.size(); ++i) EXPECT_EQ(s[i], static_cast<int>(i % 3));
  }
  // JSON: the field names of the Python protocol
  const json j = xb::to_json(res);
  EXPECT_EQ(keys(j), sorted(field_list("result")));  // nlohmann's object keeps keys sorted
  EXPECT_EQ(keys(j.at("params")), sorted(field_list("params")));
  EXPECT_EQ(keys(j.at("blocks").at(0)), sorted(field_list("block")));
  EXPECT_EQ(keys(j.at("stats").at("fast")), sorted(field_list("stats")));
  EXPECT_EQ(keys(xb::to_json(r)), sorted(field_list("ratio")));
  EXPECT_EQ(j.at("params").at("timer"), "fake");
  EXPECT_EQ(j.at("blocks").at(1).at("half"), "first");
  EXPECT_EQ(j.at("blocks").at(2).at("half"), "second");
  EXPECT_TRUE(j.at("nvml").get<bool>());
  EXPECT_EQ(res.protocol.rfind(xb::kProtocolName, 0), 0u);
}

TEST(BenchProtocol, RunProtocolWithoutSampler) {
  FakeTimer t({0.001}, 1);
  xb::Params p;
  p.warmup_s = 0.01;
  p.block_s = 0.01;
  p.rounds = 1;
  const auto res = xb::run_protocol({"only"}, t, nullptr, p);
  ASSERT_EQ(res.blocks.size(), 2u);
  EXPECT_FALSE(res.nvml);
  EXPECT_FALSE(res.blocks[0].host_ms_per_call.has_value());
  EXPECT_TRUE(xb::to_json(res).at("blocks").at(0).at("sm_clock_mhz").is_null());
}

TEST(BenchProtocol, NvmlAbsentIsNull) {
  xb::NvmlReader absent(0, "libnvidia-ml-definitely-absent.so.1");
  EXPECT_FALSE(absent.available());
  EXPECT_FALSE(absent.read().has_value());
  EXPECT_FALSE(absent.error().empty());
  xb::NvmlSampler real(0, 0.001);  // GPU machine: readings; CPU machine: none, and no exception
  real.start();
  const auto samples = real.stop();
  EXPECT_EQ(samples.empty(), !real.available());
}

// The probes' balanced passes: rows run in listed then reverse order per round; each row reports its median-time pass
// and the spread over all of them; every pass is measured; rounds < 1 is refused with the value named.
struct PassRow {
  int row = 0, pass = 0;
  double ms = 0, ms_spread = 0;
};

TEST(BalancedPasses, OrderMedianAndSpread) {
  std::vector<int> order;
  int calls = 0;
  const std::vector<std::vector<double>> ms = {{1.0, 3.0, 2.0, 4.0}, {5.0, 5.0, 5.0, 5.0}, {2.0, 1.0, 4.0, 3.0}};
  std::vector<int> seen(3, 0);
  const auto rows = xb::balanced_passes<PassRow>(
      3, 2,
      [&](size_t i) {
        order.push_back(int(i));
        const int pass = int(std::count(order.begin(), order.end(), int(i))) - 1;
        ++calls;
        ++seen[i];
        return PassRow{int(i), pass, ms[i][size_t(pass)], 0};
      });
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 2, 1, 0, 0, 1, 2, 2, 1, 0}));
  EXPECT_EQ(calls, 12);
  EXPECT_EQ(seen, (std::vector<int>{4, 4, 4}));
  ASSERT_EQ(rows.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(rows[size_t(i)].row, i);  // each row's result is one of its own passes
  // row 0: passes 1, 3, 2, 4 -> sorted 1 2 3 4, median-time pass the lower middle (2.0), spread (4 - 1) / 2
  EXPECT_EQ(rows[0].ms, 2.0);
  EXPECT_EQ(rows[0].pass, 2);
  EXPECT_DOUBLE_EQ(rows[0].ms_spread, 1.5);
  EXPECT_EQ(rows[1].ms, 5.0);
  EXPECT_EQ(rows[1].ms_spread, 0.0);
  EXPECT_EQ(rows[2].ms, 2.0);
  EXPECT_DOUBLE_EQ(rows[2].ms_spread, 1.5);
}

TEST(BalancedPasses, RefusesNoRounds) {
  auto none = [](size_t) { return PassRow{}; };
  try {
    (void)xb::balanced_passes<PassRow>(2, 0, none);
    FAIL() << "rounds 0 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("rounds must be >= 1, got 0"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(xb::balanced_passes<PassRow>(0, 1, none).empty());
}

TEST(BalancedPasses, NoteNamesPassesAndRounds) {
  EXPECT_EQ(xb::passes_note(1), "2 passes (1 round of listed + reverse order; each row its median-time pass)");
  EXPECT_EQ(xb::passes_note(3), "6 passes (3 rounds of listed + reverse order; each row its median-time pass)");
}
