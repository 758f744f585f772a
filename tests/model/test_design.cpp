// Design tests on the presets: the sanity numbers from the probe platform, verdicts, bad shapes.
#include <gtest/gtest.h>

#include "xstage/common/error.hpp"
#include "xstage/model/burst_gap.hpp"
#include "xstage/model/design.hpp"

using namespace xstage::model;

// Hand-computed numbers below use the probe values of PLATFORM.md (a fixed fixture), not the
// h200-nvlink4 preset, which a new calibration replaces.
static std::string probe_platform() { return std::string(XSTAGE_SOURCE_DIR) + "/tests/data/h200-probe-platform.json"; }

TEST(Design, FlashAttentionOnH200MatchesHandNumbers) {
  auto p = Platform::load(probe_platform());
  AttnConfig c;
  c.M = 8192;
  auto a = design_attention(p, c);
  EXPECT_EQ(a.cfg.K, p.sm_count);
  EXPECT_EQ(a.cfg.P, p.world_size);
  EXPECT_EQ(a.B_t, 32768.0);
  EXPECT_NEAR(a.test.V, 132 * 32768.0 / 2, 1);                      // 2.16 MB expected remote
  // sigma = 4 b_m b_n d / (650 TFLOP/s / 132) = 1.70 us; 64 KV tiles.
  EXPECT_NEAR(a.sigma, 4.0 * 128 * 128 * 128 / (650e12 / 132), 1e-12);
  EXPECT_NEAR(a.G, 64 * a.sigma, 1e-15);
  EXPECT_NEAR(a.test.q_peak, 2162688 - 370e9 * 0.615e-6, 1);          // ≈ 1.94 MB
  EXPECT_LT(a.test.q_peak, a.test.Q);
  EXPECT_GT(a.G, 10 * a.test.g_star);
  EXPECT_TRUE(a.test.rate_ok);
  EXPECT_EQ(a.test.verdict, "piggyback");
  EXPECT_DOUBLE_EQ(a.penalty, 0.0);
  EXPECT_EQ(a.m_ub, 128 * (long long)std::ceil(a.test.g_star / a.sigma));
  // The conservative remote-producers-only capacity is reported, and here it disagrees.
  EXPECT_EQ(a.test.K_remote, 66);
  EXPECT_FALSE(a.test.capacity_ok_remote);
}

TEST(Design, CapacityLimitedIssueAtLargeWorldSize) {
  // P = 8 on the probe platform: q_peak = 3.78 MB - R T0 > Q(132) = 2.5 MB, so even with the long
  // Q-loop gap each burst overflows once: T_iss = (V - Q)/R, and the test says reshape (shrink the burst).
  auto p = Platform::load(probe_platform());
  AttnConfig c;
  c.M = 8192;
  c.P = 8;
  auto a = design_attention(p, c);
  EXPECT_TRUE(a.test.rate_ok);
  EXPECT_FALSE(a.test.capacity_ok);
  EXPECT_EQ(a.test.verdict, "reshape");
  EXPECT_NEAR(a.test.tiss_eff, (a.test.V - p.Q(132)) / p.R, 1e-15);
  EXPECT_NEAR(a.penalty, a.test.tiss_eff - a.test.tiss0, 1e-18);
  EXPECT_LT(a.penalty_share, 0.05);
}

TEST(Design, WorldSizeScalesTheRemoteVolume) {
  auto p = Platform::load(probe_platform());
  for (int P : {2, 4, 8}) {
    auto t = design_test(p, {132, 32768, P, 5e-6});
    EXPECT_NEAR(t.V, 132 * 32768.0 * (P - 1) / P, 1e-6);
    EXPECT_NEAR(t.offered_rate, t.V / (t.tiss0 + 5e-6), 1e-3);
  }
  EXPECT_THROW(design_test(p, {132, 32768, 1, 0}), xstage::UsageError);
}

TEST(Design, FineGrainedMoeFailsTheRateBoundAndInterleavingRecovers) {
  auto p = Platform::load(probe_platform());
  MoeConfig c;
  c.hidden = 4096;
  c.inter = 1024;
  c.experts = 128;
  c.topk = 8;
  c.tokens = 4096;
  auto d = design_moe(p, c);
  // T_L2 = 2*128*128*1024 / (1228 TFLOP/s / 132) ≈ 3.6 us: inside the 3-7 us range of fine-grained experts.
  EXPECT_NEAR(d.t_l2, 2.0 * 128 * 128 * 1024 / (1228e12 / 132), 1e-12);
  EXPECT_GT(d.t_l2, 3e-6);
  EXPECT_LT(d.t_l2, 7e-6);
  EXPECT_FALSE(d.wave.rate_ok);
  EXPECT_EQ(d.verdict, "reshape");
  EXPECT_GT(d.wave.delta_tiss, 0);
  EXPECT_NEAR(d.wave.delta_tiss, d.wave.V / p.R - d.t_l2 - d.wave.tiss0, 1e-12);
  // n1/n2 = 2 h_inter / hidden.
  EXPECT_NEAR(double(d.n1) / d.n2, 2.0 * 1024 / 4096, 1e-12);
  EXPECT_TRUE(d.interleaved.ok());
  EXPECT_NEAR(d.interleave_rate, d.interleaved.offered_rate, 1e-3);
  EXPECT_EQ(d.d_knee, (128 * 132 + 2 * 1024 - 1) / (2 * 1024));
}

TEST(Design, PaperPresetFlashAttention) {
  auto p = preset("paper-b200");
  AttnConfig c;
  c.M = 8192;
  auto a = design_attention(p, c);
  EXPECT_NEAR(a.sigma, 0.79e-6, 0.005e-6);  // the preset's attention rate reproduces the paper's sigma
  EXPECT_EQ(a.test.verdict, "piggyback");
}

TEST(Design, ImpossibleShapesAreUsageErrors) {
  auto p = Platform::load(probe_platform());
  MoeConfig c;
  c.hidden = 4096;
  c.inter = 1024;
  c.experts = 128;
  c.topk = 8;
  c.tokens = 1024;
  auto bad = [&](auto mutate) {
    MoeConfig x = c;
    mutate(x);
    EXPECT_THROW(design_moe(p, x), xstage::UsageError);
  };
  bad([](MoeConfig& x) { x.hidden = 1000; });     // not a multiple of b_n
  bad([](MoeConfig& x) { x.topk = 200; });        // more than the experts
  bad([](MoeConfig& x) { x.experts = 127; });     // not divisible by P = 2
  bad([](MoeConfig& x) { x.tokens = 0; });
  bad([](MoeConfig& x) { x.inter = -5; });
  bad([](MoeConfig& x) { x.dtype = "int3"; });
  bad([](MoeConfig& x) { x.P = 1; });
  AttnConfig a;
  a.M = 0;
  EXPECT_THROW(design_attention(p, a), xstage::UsageError);
  a.M = 1024;
  a.d = -1;
  EXPECT_THROW(design_attention(p, a), xstage::UsageError);
  Platform q = p;
  q.attn_bf16 = 0;
  a.d = 128;
  EXPECT_THROW(design_attention(q, a), xstage::UsageError);  // no rate and no sigma
  a.sigma = 1e-6;
  EXPECT_NO_THROW(design_attention(q, a));
}

TEST(Design, ParsesSizesAndTimes) {
  EXPECT_EQ(parse_size("32K", "B"), 32768.0);
  EXPECT_EQ(parse_size("4096", "B"), 4096.0);
  EXPECT_EQ(parse_size("2MiB", "B"), 2.0 * 1024 * 1024);
  EXPECT_THROW(parse_size("0", "B"), xstage::UsageError);
  EXPECT_THROW(parse_size("-3K", "B"), xstage::UsageError);
  EXPECT_THROW(parse_size("12Q", "B"), xstage::UsageError);
  EXPECT_THROW(parse_size("abc", "B"), xstage::UsageError);
  EXPECT_DOUBLE_EQ(parse_time("4", "G"), 4e-6);
  EXPECT_DOUBLE_EQ(parse_time("500ns", "G"), 500e-9);
  EXPECT_THROW(parse_time("-1us", "G"), xstage::UsageError);
}
