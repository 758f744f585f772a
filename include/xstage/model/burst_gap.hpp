#pragma once
// The Burst-Gap model's closed forms (SPEC §3, §5, §6), derived in docs/MODEL.md.
// Pure functions in SI units (bytes, seconds, bytes/second), header-only, usable from host and device
// code (the simulator tests compare against them). Inputs are assumed validated by the caller
// (V >= 0, R > 0, T_iss^0 >= 0, Q >= 0); the design layer (design.hpp) checks user input.
#include <cmath>

#include "xstage/common/hd.hpp"

namespace xstage::model::bg {

XSTAGE_HD inline double pos(double x) { return x > 0 ? x : 0; }
XSTAGE_HD inline double dmax(double a, double b) { return a > b ? a : b; }

// G*(K,V) = [V/R - T_iss^0]_+ : minimum producer-side gap for full recovery.
XSTAGE_HD inline double g_star(double V, double R, double tiss0) { return pos(V / R - tiss0); }

// Burst-Gap law: T_iss(G) = max(T_iss^0, V/R - G).
XSTAGE_HD inline double tiss(double G, double V, double R, double tiss0) { return dmax(tiss0, V / R - G); }

// T_period(G) = T_iss(G) + G = max(T_iss^0 + G, V/R).
XSTAGE_HD inline double t_period(double G, double V, double R, double tiss0) {
  return dmax(tiss0 + G, V / R);
}

// ΔT_iss(G) = T_iss - T_iss^0 = [V/R - G - T_iss^0]_+.
XSTAGE_HD inline double delta_tiss(double G, double V, double R, double tiss0) {
  return pos(V / R - G - tiss0);
}

// q_peak(K,V) = [V - R T_iss^0]_+ : outstanding volume at the end of an unconstrained issue.
XSTAGE_HD inline double q_peak(double V, double R, double tiss0) { return pos(V - R * tiss0); }

// Isolated burst from an empty X-Stage: T_iss^iso = max(T_iss^0, (V - Q)/R).
XSTAGE_HD inline double tiss_iso(double V, double R, double tiss0, double Q) {
  return dmax(tiss0, (V - Q) / R);
}

// With a finite capacity Q the issue is also limited by (V - Q)/R (the queue fills, then issue runs at R):
// T_iss(G; Q) = max(T_iss^0, V/R - G, (V - Q)/R). Equals tiss() while q_peak <= Q, and tiss_iso() once
// G >= G* (every burst starts from an empty X-Stage). Derivation: docs/MODEL.md §3.
XSTAGE_HD inline double tiss_cap(double G, double V, double R, double tiss0, double Q) {
  return dmax(tiss(G, V, R, tiss0), (V - Q) / R);
}
XSTAGE_HD inline double t_period_cap(double G, double V, double R, double tiss0, double Q) {
  return tiss_cap(G, V, R, tiss0, Q) + G;
}

// Offered rate of periodic bursts, V / (T_iss^0 + G); the rate bound is offered_rate <= R.
XSTAGE_HD inline double offered_rate(double G, double V, double tiss0) { return V / (tiss0 + G); }
XSTAGE_HD inline bool rate_bound_ok(double G, double V, double R, double tiss0) {
  return offered_rate(G, V, tiss0) <= R;
}
// Capacity bound: [V - R T_iss^0]_+ <= Q.
XSTAGE_HD inline bool capacity_bound_ok(double V, double R, double tiss0, double Q) {
  return q_peak(V, R, tiss0) <= Q;
}

// Interleaved MoE schedule (SPEC §5): n2 L2 bursts spread over n2 (T_iss^0 + T_L2) + n1 T_L1.
// Offered rate n2 V / (n2 (T_iss^0 + T_L2) + n1 T_L1); full recovery needs it <= R (independent of D).
XSTAGE_HD inline double interleave_rate(double n1, double n2, double V, double tiss0, double t_l1,
                                        double t_l2) {
  return n2 * V / (n2 * (tiss0 + t_l2) + n1 * t_l1);
}
// Steady-state interleaved gap G_int = T_L2 + (n1/n2) T_L1.
XSTAGE_HD inline double interleave_gap(double n1, double n2, double t_l1, double t_l2) {
  return t_l2 + n1 / n2 * t_l1;
}

// Anti-starvation lead D_knee = ceil(b_n K_SM / (2 h_inter)).
XSTAGE_HD inline long long d_knee(long long b_n, long long k_sm, long long h_inter) {
  return (b_n * k_sm + 2 * h_inter - 1) / (2 * h_inter);
}

// FlashAttention audit (SPEC §6): bytes per producer per output tile, B_t = b_m d s_out.
XSTAGE_HD inline double fa_tile_bytes(long long b_m, long long d, long long s_out) {
  return double(b_m) * double(d) * double(s_out);
}
// Q-loop gap G_Qloop(M) = sigma * ceil(M / b_n).
XSTAGE_HD inline double fa_gap(long long M, long long b_n, double sigma) {
  return sigma * double((M + b_n - 1) / b_n);
}
// Sufficient sequence length M_ub* = b_n * ceil(G* / sigma).
XSTAGE_HD inline long long fa_m_ub(double g_star_s, long long b_n, double sigma) {
  return b_n * (long long)std::ceil(g_star_s / sigma);
}

// Epilogue remote-store span T_RS ≈ T_iss^0 + ΔT_iss + staging, and the MMA-side stall per tile.
XSTAGE_HD inline double t_rs(double tiss0, double dtiss, double staging) { return tiss0 + dtiss + staging; }
XSTAGE_HD inline double stall(double t_rs_s, double t_cover) { return pos(t_rs_s - t_cover); }

}  // namespace xstage::model::bg
