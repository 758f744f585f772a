// Runs the built `xstage` binary: model subcommands (platform, eval, design, fit).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../common/cli_runner.hpp"

namespace {
using cli_test::CliRun;
using cli_test::expect_usage;
using cli_test::xstage;
std::string tmp(const std::string& stem) { return cli_test::tmp_path(stem); }

std::string probe() { return std::string(XSTAGE_SOURCE_DIR) + "/tests/data/h200x2-probe-2026-11-29.csv"; }

}  // namespace

TEST(CliModel, PlatformListAndShow) {
  auto r = xstage("platform list");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("h200-nvlink4"), std::string::npos);
  EXPECT_NE(r.out.find("paper-b200"), std::string::npos);
  r = xstage("platform show h200-nvlink4 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  std::ifstream preset_file(std::string(XSTAGE_SOURCE_DIR) + "/platforms/h200-nvlink4.json");
  EXPECT_DOUBLE_EQ(j["R_GBps"].get<double>(), nlohmann::json::parse(preset_file)["R_GBps"].get<double>());
  EXPECT_EQ(j["sm_count"].get<int>(), 132);
  r = xstage("platform show paper-b200");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("717.0"), std::string::npos);
}

TEST(CliModel, EvalFollowsTheBurstGapLaw) {
  auto r = xstage("eval --platform '" + std::string(XSTAGE_SOURCE_DIR) +
                  "/tests/data/h200-probe-platform.json' -K 132 -B 32K --gap 0,4us,20000ns --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  double V = 132 * 32768.0, VR = V / 370e9 * 1e6;
  ASSERT_EQ(j["gaps"].size(), 3u);
  EXPECT_NEAR(j["gaps"][0]["tiss_us"].get<double>(), VR, 1e-9);
  EXPECT_NEAR(j["gaps"][1]["tiss_us"].get<double>(), VR - 4, 1e-9);
  EXPECT_NEAR(j["gaps"][2]["tiss_us"].get<double>(), 0.615, 1e-9);
  EXPECT_NEAR(j["gaps"][2]["period_us"].get<double>(), 20.615, 1e-9);
  EXPECT_FALSE(j["capacity_ok"].get<bool>());
  r = xstage("eval -B 32K -G 12");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("T_iss us"), std::string::npos);
}

TEST(CliModel, DesignPaperGivesBothVerdictsWithoutAGpu) {
  auto r = xstage("design paper");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("no GPU was used"), std::string::npos);
  r = xstage("design paper --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_FALSE(j["gpu_used"].get<bool>());
  bool some_reshape = false;
  for (const auto& m : j["moe"])
    if (m["inter"].get<int>() <= 1024) {
      EXPECT_EQ(m["verdict"], "reshape");
      EXPECT_FALSE(m["expert_wave"]["rate_ok"].get<bool>());
      some_reshape = true;
    }
  EXPECT_TRUE(some_reshape);
  for (const auto& a : j["attention"]) {
    EXPECT_GE(a["M"].get<int>(), 8192);
    EXPECT_EQ(a["verdict"], "piggyback");
  }
}

TEST(CliModel, DesignMoeAndAttention) {
  auto r = xstage("design moe --hidden 4096 --inter 1024 --experts 128 --topk 8 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["verdict"], "reshape");
  EXPECT_EQ(j["P"].get<int>(), 2);
  r = xstage("design moe --hidden 4096 --inter 1024 --experts 128 --topk 8 -P 8 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j["expert_wave"]["remote_fraction"].get<double>(), 7.0 / 8, 1e-12);
  r = xstage("design attention --seq 8K,64K --sigma 1.7us --json");
  ASSERT_EQ(r.code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_NEAR(j[0]["G_Qloop_us"].get<double>(), 64 * 1.7, 1e-9);
  EXPECT_EQ(j[1]["verdict"], "piggyback");
  r = xstage("design attention --platform paper-b200 --seq 8K");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("piggyback"), std::string::npos);
}

TEST(CliModel, FitProbeCsvAndReloadThePlatform) {
  std::string out = tmp("xstage_fit_") + ".json";
  auto r = xstage("fit '" + probe() + "' --json -o '" + out + "' --name probe-fit --world-size 2");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j["platform"]["R_GBps"].get<double>(), 370.0, 0.05 * 370);
  EXPECT_GT(j["prediction_error"]["gap_max"].get<double>(), 0);
  r = xstage("platform show '" + out + "' --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["name"], "probe-fit");
  r = xstage("design attention --seq 8K --platform '" + out + "' --sigma 1.7");
  EXPECT_EQ(r.code, 0) << r.err;
  std::filesystem::remove(out);
  r = xstage("fit '" + probe() + "' --errors");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("gap sweep, period:"), std::string::npos);
}

TEST(CliModel, BadInputIsOneErrorLineAndExitCode2) {
  expect_usage("eval -B 0", "must be positive");
  expect_usage("eval -B -5K", "must be positive");
  expect_usage("eval -B 32K -K 0", "-K must be positive");
  expect_usage("eval -B 32K --gap -1", "--gap");
  expect_usage("eval -B 32K --platform nope", "unknown platform 'nope'");
  expect_usage("platform show nope", "unknown platform");
  expect_usage("design moe --hidden 1000 --inter 1024 --experts 128 --topk 8", "hidden size 1000");
  expect_usage("design moe --hidden 4096 --inter 1024 --experts 128 --topk 300", "top-k");
  expect_usage("design moe --hidden 4096 --inter 1024 --experts 127 --topk 8", "not divisible");
  expect_usage("design attention --seq 0", "must be positive");
  expect_usage("design attention -P 1", "world size");
  expect_usage("fit /nonexistent.csv", "'/nonexistent.csv' does not exist");
  std::string bad = tmp("xstage_bad_") + ".csv";
  std::ofstream(bad) << "mode,target,K,B,V,gap_ns,tiss_ns,period_ns,wall_us\nzerogap,remote,x,1,1,0,1,1,1\n";
  expect_usage("fit '" + bad + "'", bad + ":2:3 (column 'K')");
  std::filesystem::remove(bad);
  expect_usage("eval", "--bytes is required");  // CLI11 parse error
}
