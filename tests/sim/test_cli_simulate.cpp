// Runs the built `xstage` binary: `xstage simulate moe` (exit codes, table, JSON, error lines).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../common/cli_runner.hpp"

namespace {
using cli_test::CliRun;
using cli_test::expect_usage;
using cli_test::xstage;

const std::string kMoe = "simulate moe --hidden 4096 --inter 1024 --experts 32 --topk 8 --tokens 2048";

TEST(CliSimulate, HelpListsOptions) {
  const CliRun r = xstage("simulate moe --help");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* opt : {"--hidden", "--routing", "--lead", "--experts-per-wave", "--json"})
    EXPECT_NE(r.out.find(opt), std::string::npos) << opt;
}

TEST(CliSimulate, TableHasBothSchedulesAndSpeedup) {
  const CliRun r = xstage(kMoe);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  for (const char* s : {"no GPU used", "platform h200-nvlink4", "expert-wave", "interleaved", "D_knee",
                        "L2 T_RS us", "MMA stall us/SM", "predicted speedup (expert-wave / interleaved)"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
}

TEST(CliSimulate, JsonIsCompleteAndDeterministic) {
  const CliRun a = xstage(kMoe + " --routing skewed --seed 7 --json");
  ASSERT_EQ(a.code, 0) << a.err;
  const auto j = nlohmann::json::parse(a.out);
  ASSERT_EQ(j["schedules"].size(), 2u);
  EXPECT_EQ(j["schedules"][0]["schedule"], "expert-wave");
  EXPECT_EQ(j["schedules"][1]["schedule"], "interleaved");
  EXPECT_EQ(j["schedules"][1]["lead"], j["d_knee"]);
  EXPECT_EQ(j["config"]["sms"], 132);  // the preset's SM count
  EXPECT_EQ(j["config"]["world"], 2);  // the preset's world size
  for (const auto& s : j["schedules"]) {
    EXPECT_GT(s["total_time_us"].get<double>(), 0);
    EXPECT_GE(s["mma_stall_mean_us"].get<double>(), 0);
    EXPECT_EQ(s["kinds"].size(), 2u);
  }
  const double speedup = j["speedup_wave_over_interleaved"];
  EXPECT_NEAR(speedup, j["schedules"][0]["total_time_us"].get<double>() / j["schedules"][1]["total_time_us"].get<double>(),
              1e-9 * speedup);
  EXPECT_EQ(xstage(kMoe + " --routing skewed --seed 7 --json").out, a.out);  // same seed, same answer
  const auto other = nlohmann::json::parse(xstage(kMoe + " --routing skewed --seed 8 --json").out);
  EXPECT_NE(other["local_tokens"], j["local_tokens"]);
}

TEST(CliSimulate, PerTileTimelines) {
  const CliRun r = xstage(kMoe + " --json --tiles");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const auto& s : j["schedules"]) {
    long long tiles = 0;
    for (const auto& k : s["kinds"]) tiles += k["tiles"].get<long long>();
    ASSERT_EQ(s["tiles"].size(), size_t(tiles));
    for (const auto& t : s["tiles"]) ASSERT_LE(t["issue_start_us"].get<double>(), t["issue_end_us"].get<double>());
  }
  expect_usage(kMoe + " --tiles", "--tiles needs --json");
}

TEST(CliSimulate, ExplicitSettingsAreUsed) {
  const CliRun r = xstage(kMoe + " -D 3 --experts-per-wave 2 -K 64 -P 4 --roles 2 --dtype bf16 --staging 0.2us --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["schedules"][1]["lead"], 3);
  EXPECT_EQ(j["schedules"][0]["experts_per_wave"], 2);
  EXPECT_EQ(j["config"]["sms"], 64);
  EXPECT_EQ(j["config"]["world"], 4);
  EXPECT_EQ(j["config"]["roles"], 2);
  EXPECT_EQ(j["config"]["dtype_bytes"], 2);
  EXPECT_NEAR(j["config"]["epi_us"].get<double>(), 0.2, 1e-12);
  EXPECT_EQ(j["schedules"][0]["producers"], 64);
  // The kernel's tile widths: 256-column L1 and L2 tiles, half the tiles of the 128-column default.
  const CliRun w = xstage(kMoe + " --l1-cols 256 --l2-cols 256");
  ASSERT_EQ(w.code, 0) << w.err;
  EXPECT_NE(w.out.find("N-tiles per row L1 8 / L2 16 (256 / 256 columns)"), std::string::npos) << w.out;
  // Measured tile times and the harness's routing (a uniform draw from the seed).
  const CliRun m = xstage(kMoe + " --t-l1 14 --t-l2 23000ns --routing uniform --seed 71407 --json");
  ASSERT_EQ(m.code, 0) << m.err;
  const auto mj = nlohmann::json::parse(m.out);
  EXPECT_NEAR(mj["config"]["t_l1_us"].get<double>(), 14.0, 1e-9);
  EXPECT_NEAR(mj["t_l2_mma_us"].get<double>(), 23.0, 1e-9);
  EXPECT_EQ(mj["config"]["routing"], "uniform");
  const CliRun mt = xstage(kMoe + " --t-l1 14 --t-l2 23us --routing uniform");
  ASSERT_EQ(mt.code, 0) << mt.err;
  EXPECT_NE(mt.out.find("T_mma L1 14.00 us (measured), L2 23.00 us (measured);"), std::string::npos) << mt.out;
  EXPECT_NE(mt.out.find("routing uniform (seed 1)"), std::string::npos) << mt.out;
}

TEST(CliSimulate, BadInputIsOneErrorLineAndExitTwo) {
  const std::string base = "simulate moe --experts 32 --topk 8 --tokens 2048";
  expect_usage(base + " --hidden 0 --inter 1024", "--hidden");
  expect_usage(base + " --hidden 4000 --inter 1024", "not a multiple of b_n");
  expect_usage(base + " --hidden 4096 --inter 1024 -P 3", "not divisible by the world size");
  expect_usage(base + " --hidden 4096 --inter 1024 --routing zipf", "routing must be balanced, uniform or skewed");
  expect_usage(base + " --hidden 4096 --inter 1024 --t-l1 -2", "--t-l1 must be >= 0");
  expect_usage(base + " --hidden 4096 --inter 1024 --t-l2 3parsecs", "--t-l2: unknown unit");
  expect_usage(base + " --hidden 4096 --inter 1024 --lead 0", "--lead must be >= 1");
  expect_usage(base + " --hidden 4096 --inter 1024 --lead 2x", "--lead must be an integer");
  expect_usage(base + " --hidden 4096 --inter 1024 --platform no-such-machine", "no-such-machine");
  expect_usage(base + " --hidden 4096 --inter 1024 --tile 128", "--tile");
  expect_usage(base + " --hidden 4096 --inter 1024 --dtype fp4", "--dtype");
  expect_usage(base + " --hidden 4096 --inter 1024 -K -4", "-K");
  expect_usage(base + " --hidden 4096 --inter 1024 --roles 3", "roles per instance must be 1 or 2");
  expect_usage(base + " --hidden 4096 --inter 1024 --depth 0", "staging depth");
  expect_usage(base + " --hidden 4096 --inter 1024 --l2-cols 192", "L2 tile width 192 is not a multiple of b_n = 128");
  expect_usage("simulate moe --experts 32 --topk 40 --hidden 4096 --inter 1024", "exceeds the expert count");
  expect_usage("simulate moe --experts 32 --topk 8 --inter 1024", "--hidden");  // missing required option
  expect_usage(base + " --hidden 4096 --inter 1024 --platform paper-b200", "--tflops");  // preset without a rate
  // Found by fuzzing the sanitized CLI: these overflowed the schedulers' int cursors (UB) or ran for minutes.
  expect_usage(base + " --hidden 4096 --inter 1024 -K 2147483647", "instance count 2147483647 exceeds 2^30");
  expect_usage(base + " --hidden 4096 --inter 1024 --experts-per-wave 2147483647", "experts per wave 2147483647");
  expect_usage(base + " --hidden 4096 --inter 1024 --out-bytes 100000000", "must be in [1, 8], got 100000000");
}

}  // namespace
