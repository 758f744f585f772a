// `xstage design moe-bound` (the two floors of a MoE layer call, xstage/moe/layer_bound.hpp): the numbers by hand for
// given rates, the platform's rates by default, the slowest rank at P > 1, and every bad argument as one error line
// with exit code 2.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "../common/cli_runner.hpp"

using cli_test::expect_usage;
using cli_test::xstage;

namespace {
const std::string kCmd = "design moe-bound ";
}  // namespace

TEST(CliMoeBound, FloorsByHandAtGivenRates) {
  // V4-Pro W8A8, 8192 tokens, P = 1: 49152 rows, 6 * 7168 * 3072 FLOPs each; every expert routed:
  // 384 x 66076416 B of weights + 8192 x (7168 + 56 * 4 + 6 * 4) B in + 8192 x 7168 x 4 B out.
  auto r = xstage(kCmd + "--shape deepseek-v4-pro --tokens 8192 --tflops 1200 --hbm-tbps 4 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const double flops = 49152.0 * 6 * 7168 * 3072;
  const double bytes = 384.0 * 66076416 + 8192.0 * (7168 + 224 + 24) + 8192.0 * 7168 * 4;
  EXPECT_EQ(j["rows"], 49152);
  EXPECT_EQ(j["experts_read"], 384);
  EXPECT_DOUBLE_EQ(j["flops"].get<double>(), flops);
  EXPECT_DOUBLE_EQ(j["min_bytes"].get<double>(), bytes);
  EXPECT_NEAR(j["compute_ms"].get<double>(), flops / 1.2e15 * 1e3, 1e-9);
  EXPECT_NEAR(j["memory_ms"].get<double>(), bytes / 4e12 * 1e3, 1e-9);
  EXPECT_EQ(j["bound_by"], "memory");
  // W4A8 halves the codes and adds per-row scales: compute-bound at the same rates
  r = xstage(kCmd + "--shape deepseek-v4-pro --tokens 8192 --tflops 1200 --hbm-tbps 4 --precision w4a8 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["bound_by"], "compute");
}

TEST(CliMoeBound, PlatformRatesAndTheSlowestRank) {
  auto r = xstage(kCmd + "--shape deepseek-v4-pro --tokens 8192 --routing skewed");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("rates (h200-nvlink4): 1228 TFLOP/s, HBM read 4.28 TB/s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("memory-bound"), std::string::npos) << r.out;
  // P = 8 skewed: the most loaded rank holds more rows than the average 8192 * 6
  r = xstage(kCmd + "--shape deepseek-v4-pro --tokens 8192 --routing skewed -P 8 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["rows"].get<long long>(), 8192LL * 6);
  EXPECT_EQ(j["world"], 8);
  EXPECT_LE(j["experts_read"].get<int>(), 48);
  EXPECT_EQ(j["bound_by"], "compute");
}

TEST(CliMoeBound, BadArgumentsAreOneLine) {
  expect_usage(kCmd + "--shape nope", "--shape: unknown shape 'nope'");
  expect_usage(kCmd + "--hidden 4096", "give --shape");
  expect_usage(kCmd + "--shape deepseek-v4-pro --precision fp4", "--precision must be w8a8, w4a8 or bf16, got 'fp4'");
  expect_usage(kCmd + "--shape deepseek-v4-pro -P 5", "-P 5 does not divide 384 experts");
  expect_usage(kCmd + "--shape deepseek-v4-pro --hbm-tbps 0", "--hbm-tbps must be a positive, finite rate (TB/s, at most 1e6), got '0'");
  expect_usage(kCmd + "--shape deepseek-v4-pro --tflops x", "--tflops must be a positive, finite rate (TFLOP/s, at most 1e6), got 'x'");
  expect_usage(kCmd + "--shape deepseek-v4-pro --routing zipf", "zipf");
  expect_usage(kCmd + "--shape deepseek-v4-pro --platform paper-b200 --tflops 2000",
               "platform 'paper-b200' records no HBM read rate (memory_tbps.hbm_read); give --hbm-tbps");
  expect_usage(kCmd + "--shape deepseek-v4-pro --hidden 1000", "hidden 1000 is not a positive multiple of 128");
  // Refused at once, where it used to fill the host's memory (24 GB) generating the routing's per-expert tables.
  expect_usage(kCmd + "--shape deepseek-v4-pro --experts 2147483647", "number of experts 2147483647 exceeds 1048576");
}
