// Closed forms of the Burst-Gap model: identities and the paper's worked numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include <unistd.h>

#include "test_seed.hpp"

#include "xstage/model/burst_gap.hpp"

using namespace xstage::model::bg;

TEST(BurstGap, LawIdentitiesOnRandomInputs) {
  std::mt19937_64 rng(test_seed());
  std::uniform_real_distribution<double> uV(1e4, 5e7), uR(50e9, 2e12), uT(0.05e-6, 5e-6), uG(0, 100e-6),
      uQ(1e5, 1e7);
  for (int i = 0; i < 1000; ++i) {
    double V = uV(rng), R = uR(rng), T0 = uT(rng), G = uG(rng), Q = uQ(rng);
    double ti = tiss(G, V, R, T0), per = t_period(G, V, R, T0);
    EXPECT_NEAR(per, ti + G, 1e-12 * per);                        // T_period = T_iss + G
    EXPECT_GE(ti, T0);
    EXPECT_GE(per, V / R * (1 - 1e-12));                          // never faster than the drain
    EXPECT_NEAR(delta_tiss(G, V, R, T0), ti - T0, 1e-12 * per);
    double gs = g_star(V, R, T0);
    EXPECT_DOUBLE_EQ(tiss(gs + G, V, R, T0), T0);                 // recovered beyond G*
    if (G < gs) {
      EXPECT_GT(ti, T0);
    }
    // Rate bound V/(T0+G) <= R  <=>  G >= V/R - T0 (away from the boundary's rounding).
    if (std::fabs(G - (V / R - T0)) > 1e-12) {
      EXPECT_EQ(rate_bound_ok(G, V, R, T0), G > V / R - T0);
    }
    EXPECT_NEAR(q_peak(V, R, T0), std::max(0.0, V - R * T0), 1e-6);
    double iso = tiss_iso(V, R, T0, Q);
    EXPECT_GE(iso, T0);
    double tc = tiss_cap(G, V, R, T0, Q);
    EXPECT_GE(tc, ti);
    if (G >= gs) {
      EXPECT_DOUBLE_EQ(tc, iso);  // recovered bursts start empty: the isolated case
    }
    if (capacity_bound_ok(V, R, T0, Q)) {
      EXPECT_DOUBLE_EQ(tc, ti);   // capacity not binding: the plain Burst-Gap law
      EXPECT_DOUBLE_EQ(iso, T0);  // no self-backpressure while q_peak <= Q
    }
  }
}

TEST(BurstGap, ProbeGapSweepNumbers) {
  // h200 probe, K = 132, B = 32 KB: V/R = 11.69 us, so T_iss(0) = 11.69, T_iss(4us) = 7.69, plateau 0.615.
  double V = 132 * 32768.0, R = 370e9, T0 = 0.615e-6;
  EXPECT_NEAR(tiss(0, V, R, T0), V / R, 1e-15);
  EXPECT_NEAR(tiss(4e-6, V, R, T0), V / R - 4e-6, 1e-15);
  EXPECT_DOUBLE_EQ(tiss(16e-6, V, R, T0), T0);
  EXPECT_NEAR(t_period(16e-6, V, R, T0), 16.615e-6, 1e-15);
  EXPECT_NEAR(g_star(V, R, T0), V / R - T0, 1e-15);
}

TEST(BurstGap, PaperFlashAttentionAudit) {
  // Paper: b_m = d = 128 bf16 -> 32 KB per producer, V = 148 * 32 KB ≈ 4.63 MiB, R = 717 GB/s,
  // T_iss^0 = 0.76 us: G* ≈ 6.0 us; sigma = 0.79 us -> M_ub* ≈ 1.0K tokens.
  double Bt = fa_tile_bytes(128, 128, 2);
  EXPECT_EQ(Bt, 32768.0);
  double V = 148 * Bt;
  double gs = g_star(V, 717e9, 0.76e-6);
  EXPECT_NEAR(gs, 6.0e-6, 0.05e-6);
  EXPECT_EQ(fa_m_ub(gs, 128, 0.79e-6), 1024);
  EXPECT_NEAR(fa_gap(8192, 128, 0.79e-6), 64 * 0.79e-6, 1e-15);
  EXPECT_NEAR(fa_gap(8193, 128, 1e-6), 65e-6, 1e-15);  // ceil
  // Capacity: q_peak ≈ 4.1 MiB <= Q = 4.25 MiB.
  EXPECT_TRUE(capacity_bound_ok(V, 717e9, 0.76e-6, 4.25 * 1024 * 1024));
}

TEST(BurstGap, InterleaveAndKnee) {
  double V = 2e6, T0 = 0.5e-6, t1 = 8e-6, t2 = 3e-6;
  // With n1 = 0 the interleaved rate is the Expert-Wave rate V/(T0 + T_L2).
  EXPECT_NEAR(interleave_rate(0, 10, V, T0, t1, t2), V / (T0 + t2), 1e-3);
  // Equivalent to the rate bound at G_int = T_L2 + (n1/n2) T_L1.
  double g = interleave_gap(6, 8, t1, t2);
  EXPECT_NEAR(g, t2 + 0.75 * t1, 1e-18);
  EXPECT_NEAR(interleave_rate(6, 8, V, T0, t1, t2), offered_rate(g, V, T0), 1e-3);
  EXPECT_EQ(d_knee(128, 132, 2048), 5);   // ceil(16896 / 4096) = ceil(4.125)
  EXPECT_EQ(d_knee(128, 128, 2048), 4);   // exact division
  EXPECT_EQ(d_knee(128, 148, 768), 13);   // ceil(18944 / 1536) = ceil(12.33)
  EXPECT_NEAR(stall(t_rs(0.6e-6, 2e-6, 0.4e-6), 2.5e-6), 0.5e-6, 1e-18);
  EXPECT_DOUBLE_EQ(stall(1e-6, 2e-6), 0.0);
}
