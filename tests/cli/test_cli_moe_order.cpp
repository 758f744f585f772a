// `xstage design moe-order` (`auto`: the fused MoE kernel's tile order, moe/order_choice.hpp): the choice
// and its numbers as JSON and text, and every bad argument as one error line with exit code 2.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "../common/cli_runner.hpp"

using cli_test::expect_usage;
using cli_test::xstage;

namespace {
const std::string kCmd = "design moe-order ";
const std::string kQwen = kCmd + "--shape qwen3-30b-a3b ";
}  // namespace

TEST(CliMoeOrder, ChoosesInterleavedAtDKneeForAFineGrainedLayerAtP8) {
  // h200-nvlink4 preset, fp8 1228 TFLOP/s over 132 SMs: T_L1 = 7.21 us, T_L2 = 2.71 us; tests/moe/
  // test_order_choice.cpp derives every number.
  auto r = xstage(kQwen + "--world 8 --tokens 8192 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["order"], "interleaved");
  EXPECT_EQ(j["lead"], 11);
  EXPECT_EQ(j["d_knee"], 11);
  EXPECT_EQ(j["experts_per_wave"], 0);
  EXPECT_NEAR(j["predicted_stall_wave_us"].get<double>(), 4.9956, 1e-4);
  EXPECT_DOUBLE_EQ(j["predicted_stall_interleaved_us"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(j["weight_working_set_bytes"].get<double>(), 2 * 4718592.0);
  EXPECT_DOUBLE_EQ(j["l2_bytes"].get<double>(), 60.0 * 1024 * 1024);
  EXPECT_NEAR(j["rate_per_sm_TFLOPs"].get<double>(), 1228.0 / 132, 1e-9);
  EXPECT_TRUE(j["drain_dominated"].get<bool>());
  EXPECT_DOUBLE_EQ(j["expert_wave"]["V_remote_bytes"].get<double>(), 3784704);

  r = xstage(kQwen + "--world 8 --tokens 8192");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("choice: interleaved, lead 11, experts_per_wave 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("reason: interleaved, D = 11 (D_knee): drain-dominated"), std::string::npos) << r.out;
}

TEST(CliMoeOrder, AtP1FollowsTheSimulatorAndExpertWaveWhenTheWorkingSetOverflows) {
  // P = 1: the discrete-event simulator's two layer times decide (tests/moe/test_order_choice.cpp); --no-sim
  // leaves auto without them: Expert-Wave.
  auto r = xstage(kQwen + "-P 1 --tokens 8192 --l1-cols 256 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["order"], "interleaved") << j["reason"];
  EXPECT_GT(j["sim_wave_us"].get<double>(), j["sim_interleaved_us"].get<double>());
  EXPECT_NE(j["reason"].get<std::string>().find("the discrete-event simulator"), std::string::npos);
  EXPECT_FALSE(j.contains("expert_wave"));
  r = xstage(kCmd + "--shape dit-moe-xl -P 1 --tokens 8192 --l1-cols 256");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("simulated layer (P = 1, discrete-event simulator): expert-wave "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" us, expert-wave with lagged waves "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" us, interleaved with every Linear-1 tile first "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("choice: interleaved with every Linear-1 tile first, lead 4"), std::string::npos) << r.out;
  r = xstage(kQwen + "-P 1 --tokens 8192 --no-sim --json");
  ASSERT_EQ(r.code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["order"], "expert-wave");
  EXPECT_NE(j["reason"].get<std::string>().find("no simulator prediction given"), std::string::npos);
  EXPECT_DOUBLE_EQ(j["sim_wave_us"].get<double>(), 0);

  // 256 tokens per rank: 16 experts x 4.72 MB = 75.5 MB in flight > 60 MiB; an 80 MiB L2 or W4A8 holds it.
  r = xstage(kQwen + "-P 8 --tokens 256 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["order"], "expert-wave");
  EXPECT_FALSE(j["fits_l2"].get<bool>());
  EXPECT_NE(j["reason"].get<std::string>().find("75.50 MB > L2 62.91 MB"), std::string::npos) << j["reason"];
  r = xstage(kQwen + "-P 8 --tokens 256 --l2 80MiB --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["order"], "interleaved");
  r = xstage(kQwen + "-P 8 --tokens 256 --precision w4a8 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["order"], "interleaved");

  // Measured mainloops replace the rate: T_L2 = 10 us covers every burst, so no stall in either order.
  r = xstage(kQwen + "-P 8 --tokens 8192 --t-l1 20us --t-l2 10000ns --json");
  ASSERT_EQ(r.code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["order"], "expert-wave");
  EXPECT_DOUBLE_EQ(j["query"]["t_l2_mma_us"].get<double>(), 10);
  EXPECT_DOUBLE_EQ(j["predicted_stall_wave_us"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(j["rate_per_sm_TFLOPs"].get<double>(), 0);

  // The kernel's L1 tile (128 gate + 128 up columns): D_knee = ceil(132 / 6) = 22.
  r = xstage(kQwen + "-P 8 --tokens 8192 --l1-cols 256 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["lead"], 22);

  // And its 256-column L2 tile (--l2-cols): 8 L2 tiles per row, bursts of 256 columns.
  r = xstage(kQwen + "-P 8 --tokens 8192 --l1-cols 256 --l2-cols 256");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("L1 / L2 tiles of 256 / 256 columns: 6 L1 / 8 L2 tiles per row"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("combine burst per L2 tile: B = 128.0 rows x 256 x 2 B = 65536 B per CTA"), std::string::npos)
      << r.out;
}

TEST(CliMoeOrder, EveryBadArgumentIsOneLineAndExit2) {
  const std::pair<std::string, std::string> table[] = {
      {kCmd + "--world 8", "give --shape (dit-moe-xl, qwen3-30b-a3b"},
      {kCmd + "--hidden 4096 --inter 1024 --experts 128", "or all of --hidden, --inter, --experts, --topk"},
      {kCmd + "--shape nosuch", "--shape: unknown shape 'nosuch' (shapes: dit-moe-xl"},
      {kQwen + "--sms 0", "--sms must be positive, got '0'"},
      {kQwen + "--inter 700 -P 8", "moe order: intermediate size 700 is not a multiple of the N-tile width b_n = 128"},
      {kQwen + "--hidden 2000 -P 8", "moe order: hidden size 2000 is not a multiple of the N-tile width b_n = 128"},
      {kQwen + "-P 3", "moe order: expert count 128 is not divisible by the world size P = 3"},
      {kQwen + "-P 0", "-P must be positive, got '0'"},
      {kQwen + "--tokens 0", "--tokens must be positive, got '0'"},
      {kQwen + "--t-l1 3", "give both --t-l1 and --t-l2 (measured MMA times), or neither"},
      {kQwen + "--t-l1 3 --t-l2 2 --tflops 900", "give --tflops or --t-l1/--t-l2, not both"},
      {kQwen + "--t-l1 0 --t-l2 2", "moe order: T_L1^mma must be positive, got 0 s"},
      {kQwen + "--tflops 0", "--tflops must be a positive, finite rate"},
      {kQwen + "--precision fp4", "--precision must be w8a8 or w4a8, got 'fp4'"},
      {kQwen + "--routing zipf", "routing must be balanced or skewed, got 'zipf'"},
      {kQwen + "--l2 0", "--l2 must be positive, got '0'"},
      {kQwen + "--min-gain -1", "--min-gain must be a number in [0, 100], got '-1'"},
      {kQwen + "--lead -1", "--lead must be >= 0 (0: the default), got '-1'"},
      {kQwen + "--lead 1.5", "--lead must be a whole number, got '1.5'"},
      {kQwen + "--l1-cols 1000", "moe order: 2 x intermediate size 1536 is not a multiple of the L1 tile width 1000"},
      {kQwen + "--l2-cols 192", "moe order: L2 tile width 192 is not a multiple of the N-tile width b_n = 128"},
      {kQwen + "--tile 128", "--tile must look like 128x128, got '128'"},
      {kQwen + "--platform paper-b200", "platform 'paper-b200' records no fp8 tensor-core rate"},
      {kQwen + "-P 1 --seed -3", "--seed must be a whole number in 0..18446744073709551615, got '-3'"},
  };
  for (const auto& [args, fragment] : table) expect_usage(args, fragment);
}
