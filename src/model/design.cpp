// Design tests for periodic bursts, MegaMoE and FlashAttention-A2A (formulas: docs/MODEL.md).
#include "xstage/model/design.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>

#include "xstage/common/error.hpp"
#include "xstage/common/format.hpp"
#include "xstage/model/burst_gap.hpp"

namespace xstage::model {
namespace {
using units::gbps;
using units::mb;
using units::us;

int resolve_P(const Platform& p, int P) {
  int w = P > 0 ? P : p.world_size;
  XSTAGE_REQUIRE(P >= 0, "world size P must be >= 2, got ", P);
  XSTAGE_REQUIRE(w >= 2, "world size P must be >= 2 (with one rank nothing is remote); got ", w,
                 P > 0 ? "" : " from the platform; pass it explicitly");
  return w;
}
int resolve_K(const Platform& p, int K) {
  XSTAGE_REQUIRE(K >= 0, "producer count K must be positive, got ", K);
  return K > 0 ? K : p.sm_count;
}
double sm_rate(const Platform& p, double per_gpu, const char* what, const char* flag) {
  XSTAGE_REQUIRE(per_gpu >= 0, what, " rate must be positive, got ", per_gpu);
  XSTAGE_REQUIRE(per_gpu > 0, "platform '", p.name, "' records no ", what,
                 " tensor-core rate; give one with ", flag);
  return per_gpu / p.sm_count;
}

}  // namespace

DesignTest design_test(const Platform& p, const BurstSpec& s) {
  XSTAGE_REQUIRE(s.K > 0, "producer count K must be positive, got ", s.K);
  XSTAGE_REQUIRE(s.B > 0 && std::isfinite(s.B), "bytes per producer B must be positive, got ", s.B);
  XSTAGE_REQUIRE(s.P >= 2, "world size P must be >= 2 (with one rank nothing is remote), got ", s.P);
  XSTAGE_REQUIRE(s.G >= 0 && std::isfinite(s.G), "gap G must be >= 0, got ", s.G);
  DesignTest t;
  t.spec = s;
  t.remote_fraction = double(s.P - 1) / s.P;
  t.V_total = s.K * s.B;
  t.V = t.V_total * t.remote_fraction;
  t.tiss0 = p.tiss0(s.K, t.V_total);
  t.R = p.R;
  t.Q = p.Q(s.K);
  t.K_remote = std::max(1, int(std::lround(s.K * t.remote_fraction)));
  t.Q_remote = p.Q(t.K_remote);
  t.offered_rate = bg::offered_rate(s.G, t.V, t.tiss0);
  t.q_peak = bg::q_peak(t.V, t.R, t.tiss0);
  t.g_star = bg::g_star(t.V, t.R, t.tiss0);
  t.tiss = bg::tiss(s.G, t.V, t.R, t.tiss0);
  t.period = bg::t_period(s.G, t.V, t.R, t.tiss0);
  t.delta_tiss = bg::delta_tiss(s.G, t.V, t.R, t.tiss0);
  t.tiss_iso = bg::tiss_iso(t.V, t.R, t.tiss0, t.Q);
  t.tiss_eff = bg::tiss_cap(s.G, t.V, t.R, t.tiss0, t.Q);
  t.rate_ok = bg::rate_bound_ok(s.G, t.V, t.R, t.tiss0);
  t.capacity_ok = bg::capacity_bound_ok(t.V, t.R, t.tiss0, t.Q);
  t.capacity_ok_remote = t.q_peak <= t.Q_remote;
  std::string rate = "rate V/(T_iss^0+G) = " + mb(t.V) + "/(" + us(t.tiss0) + " + " + us(s.G) + ") = " +
                     gbps(t.offered_rate) + (t.rate_ok ? " <= " : " > ") + "R = " + gbps(t.R);
  std::string cap = "capacity q_peak = [V - R T_iss^0]_+ = " + mb(t.q_peak) + (t.capacity_ok ? " <= " : " > ") +
                    "Q(" + std::to_string(s.K) + ") = " + mb(t.Q);
  if (t.ok()) {
    t.verdict = "piggyback";
    t.reason = rate + "; " + cap;
  } else {
    t.verdict = "reshape";
    t.reason = !t.rate_ok ? rate + " (backpressure dT_iss = " + us(t.delta_tiss) + " per burst)"
                          : cap + " (isolated T_iss = " + us(t.tiss_iso) + ")";
    if (!t.rate_ok && !t.capacity_ok) t.reason += "; " + cap;
  }
  return t;
}

nlohmann::json DesignTest::to_json() const {
  return {{"K", spec.K}, {"B_bytes", spec.B}, {"P", spec.P}, {"G_us", spec.G * 1e6},
          {"remote_fraction", remote_fraction}, {"V_total_bytes", V_total}, {"V_remote_bytes", V},
          {"tiss0_us", tiss0 * 1e6}, {"R_GBps", R / 1e9}, {"Q_bytes", Q},
          {"K_remote", K_remote}, {"Q_remote_bytes", Q_remote},
          {"offered_rate_GBps", offered_rate / 1e9}, {"q_peak_bytes", q_peak}, {"g_star_us", g_star * 1e6},
          {"tiss_us", tiss * 1e6}, {"period_us", period * 1e6}, {"delta_tiss_us", delta_tiss * 1e6},
          {"tiss_iso_us", tiss_iso * 1e6}, {"tiss_eff_us", tiss_eff * 1e6}, {"rate_ok", rate_ok}, {"capacity_ok", capacity_ok},
          {"capacity_ok_remote_only", capacity_ok_remote}, {"verdict", verdict}, {"reason", reason},
          {"assumption", "expected aligned remote volume V = K*B*(P-1)/P (a tile goes to a remote rank "
                         "with probability (P-1)/P); T_iss^0 at (K, K*B); capacity Q(K)"}};
}

MoeDesign design_moe(const Platform& p, const MoeConfig& c) {
  XSTAGE_REQUIRE(c.hidden > 0, "MoE hidden size must be positive, got ", c.hidden);
  XSTAGE_REQUIRE(c.inter > 0, "MoE intermediate size must be positive, got ", c.inter);
  XSTAGE_REQUIRE(c.experts > 0, "MoE expert count must be positive, got ", c.experts);
  XSTAGE_REQUIRE(c.topk > 0, "MoE top-k must be positive, got ", c.topk);
  XSTAGE_REQUIRE(c.topk <= c.experts, "MoE top-k (", c.topk, ") exceeds the expert count (", c.experts, ")");
  XSTAGE_REQUIRE(c.tokens > 0, "MoE tokens per rank must be positive, got ", c.tokens);
  XSTAGE_REQUIRE(c.b_m > 0 && c.b_n > 0, "tile b_m x b_n must be positive, got ", c.b_m, "x", c.b_n);
  XSTAGE_REQUIRE(c.out_bytes > 0, "output element size must be positive, got ", c.out_bytes);
  XSTAGE_REQUIRE(c.staging >= 0, "staging cost must be >= 0, got ", c.staging);
  XSTAGE_REQUIRE(c.hidden % c.b_n == 0, "hidden size ", c.hidden, " is not a multiple of the tile width b_n = ", c.b_n);
  XSTAGE_REQUIRE((2 * c.inter) % c.b_n == 0, "2 x intermediate size ", 2 * c.inter,
                 " is not a multiple of the tile width b_n = ", c.b_n);
  MoeDesign d;
  d.cfg = c;
  d.cfg.K = resolve_K(p, c.K);
  d.cfg.P = resolve_P(p, c.P);
  XSTAGE_REQUIRE(c.experts % d.cfg.P == 0, "expert count ", c.experts, " is not divisible by the world size P = ",
                 d.cfg.P, " (expert parallelism)");
  XSTAGE_REQUIRE(c.dtype == "fp8" || c.dtype == "bf16", "MoE dtype must be fp8 or bf16, got '", c.dtype, "'");
  double per_gpu = c.tc_rate > 0 ? c.tc_rate : (c.dtype == "fp8" ? p.tc_fp8 : p.tc_bf16);
  if (c.tc_rate < 0) per_gpu = c.tc_rate;
  d.rate_per_sm = sm_rate(p, per_gpu, c.dtype.c_str(), "--tflops");
  // One output tile b_m x b_n over inner dimension k costs 2 b_m b_n k FLOP on one SM.
  d.t_l1 = 2.0 * c.b_m * c.b_n * double(c.hidden) / d.rate_per_sm;
  d.t_l2 = 2.0 * c.b_m * c.b_n * double(c.inter) / d.rate_per_sm;
  d.B = double(c.b_m) * c.b_n * c.out_bytes;
  // Balanced routing: each expert receives tokens*P*topk/E rows; a rank holds E/P experts.
  d.tokens_per_expert = double(c.tokens) * d.cfg.P * c.topk / c.experts;
  d.rows_per_expert = (long long)std::ceil(d.tokens_per_expert / c.b_m);
  long long local = c.experts / d.cfg.P;
  d.n1 = local * d.rows_per_expert * (2 * c.inter / c.b_n);
  d.n2 = local * d.rows_per_expert * (c.hidden / c.b_n);
  d.wave = design_test(p, {d.cfg.K, d.B, d.cfg.P, d.t_l2});
  d.g_int = bg::interleave_gap(double(d.n1), double(d.n2), d.t_l1, d.t_l2);
  d.interleaved = design_test(p, {d.cfg.K, d.B, d.cfg.P, d.g_int});
  d.interleave_rate = bg::interleave_rate(double(d.n1), double(d.n2), d.wave.V, d.wave.tiss0, d.t_l1, d.t_l2);
  d.d_knee = bg::d_knee(c.b_n, d.cfg.K, c.inter);
  d.t_rs_wave = bg::t_rs(d.wave.tiss0, d.wave.tiss_eff - d.wave.tiss0, c.staging);
  d.stall_wave = bg::stall(d.t_rs_wave, d.t_l2);
  d.t_rs_int = bg::t_rs(d.interleaved.tiss0, d.interleaved.tiss_eff - d.interleaved.tiss0, c.staging);
  d.stall_int = bg::stall(d.t_rs_int, d.t_l1);
  if (d.wave.ok()) {
    d.verdict = "piggyback";
    d.reason = "Expert-Wave L2 bursts pass: " + d.wave.reason;
  } else {
    d.verdict = "reshape";
    const auto& it = d.interleaved;
    d.reason = "Expert-Wave L2 bursts fail: " + d.wave.reason + ". Interleaved (G_int = " + us(d.g_int) + "): " +
               (it.ok() ? "passes" : "still fails") + ", rate " + gbps(d.interleave_rate) +
               (it.rate_ok ? " <= " : " > ") + "R" +
               (it.capacity_ok ? "" : ", capacity q_peak " + mb(it.q_peak) + " > Q " + mb(it.Q) +
                                          " (shrink the burst)");
  }
  return d;
}

nlohmann::json MoeDesign::to_json() const {
  return {{"name", cfg.name}, {"hidden", cfg.hidden}, {"inter", cfg.inter}, {"experts", cfg.experts},
          {"topk", cfg.topk}, {"tokens_per_rank", cfg.tokens}, {"b_m", cfg.b_m}, {"b_n", cfg.b_n},
          {"dtype", cfg.dtype}, {"out_bytes", cfg.out_bytes}, {"K", cfg.K}, {"P", cfg.P},
          {"rate_per_sm_TFLOPs", rate_per_sm / 1e12}, {"t_l1_mma_us", t_l1 * 1e6}, {"t_l2_mma_us", t_l2 * 1e6},
          {"B_bytes", B}, {"tokens_per_expert", tokens_per_expert}, {"rows_per_expert", rows_per_expert},
          {"n1", n1}, {"n2", n2}, {"expert_wave", wave.to_json()}, {"g_int_us", g_int * 1e6},
          {"interleaved", interleaved.to_json()}, {"interleave_rate_GBps", interleave_rate / 1e9},
          {"d_knee", d_knee}, {"staging_us", cfg.staging * 1e6}, {"t_rs_wave_us", t_rs_wave * 1e6},
          {"stall_wave_us", stall_wave * 1e6}, {"t_rs_interleaved_us", t_rs_int * 1e6},
          {"stall_interleaved_us", stall_int * 1e6}, {"verdict", verdict}, {"reason", reason}};
}

AttnDesign design_attention(const Platform& p, const AttnConfig& c) {
  XSTAGE_REQUIRE(c.M > 0, "sequence length M must be positive, got ", c.M);
  XSTAGE_REQUIRE(c.d > 0, "head dimension d must be positive, got ", c.d);
  XSTAGE_REQUIRE(c.b_m > 0 && c.b_n > 0, "tile b_m x b_n must be positive, got ", c.b_m, "x", c.b_n);
  XSTAGE_REQUIRE(c.out_bytes > 0, "output element size must be positive, got ", c.out_bytes);
  XSTAGE_REQUIRE(c.sigma >= 0, "sigma must be >= 0, got ", c.sigma);
  XSTAGE_REQUIRE(c.staging >= 0, "staging cost must be >= 0, got ", c.staging);
  AttnDesign a;
  a.cfg = c;
  a.cfg.K = resolve_K(p, c.K);
  a.cfg.P = resolve_P(p, c.P);
  if (c.sigma > 0) {
    a.sigma = c.sigma;
  } else {
    // One KV tile per producer: S = Q K^T and O += P V, 4 b_m b_n d FLOP on one SM.
    double rate = sm_rate(p, c.attn_rate > 0 ? c.attn_rate : (c.attn_rate < 0 ? c.attn_rate : p.attn_bf16),
                          "attention", "--tflops or --sigma");
    a.sigma = 4.0 * c.b_m * c.b_n * double(c.d) / rate;
  }
  a.B_t = bg::fa_tile_bytes(c.b_m, c.d, c.out_bytes);
  a.G = bg::fa_gap(c.M, c.b_n, a.sigma);
  a.test = design_test(p, {a.cfg.K, a.B_t, a.cfg.P, a.G});
  a.m_ub = bg::fa_m_ub(a.test.g_star, c.b_n, a.sigma);
  a.penalty = a.test.tiss_eff - a.test.tiss0;
  a.penalty_share = a.penalty / (a.G + a.test.tiss_eff);
  return a;
}

nlohmann::json AttnDesign::to_json() const {
  return {{"M", cfg.M}, {"d", cfg.d}, {"b_m", cfg.b_m}, {"b_n", cfg.b_n}, {"out_bytes", cfg.out_bytes},
          {"K", cfg.K}, {"P", cfg.P}, {"sigma_us", sigma * 1e6}, {"B_t_bytes", B_t}, {"G_Qloop_us", G * 1e6},
          {"M_ub", m_ub}, {"test", test.to_json()}, {"penalty_us", penalty * 1e6},
          {"penalty_share", penalty_share},
          {"verdict", test.verdict}};
}

namespace {
std::string lower(std::string s) {
  for (auto& ch : s) ch = char(std::tolower((unsigned char)ch));
  return s;
}
}  // namespace

namespace {
// "32K" -> (32, "k"): the leading number and the lower-cased unit after it.
std::pair<double, std::string> number_and_unit(const std::string& text, const std::string& what) {
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(text, &pos);
  } catch (...) {
    throw UsageError(what + ": '" + text + "' is not a number");
  }
  return {v, lower(text.substr(pos))};
}
}  // namespace

double parse_size(const std::string& text, const std::string& what, bool binary_k) {
  const auto [v, suf] = number_and_unit(text, what);
  double base = binary_k ? 1024.0 : 1000.0;
  double mult = 0;
  if (suf.empty() || suf == "b") mult = 1;
  else if (suf == "k" || suf == "kb" || suf == "kib") mult = base;
  else if (suf == "m" || suf == "mb" || suf == "mib") mult = base * base;
  else if (suf == "g" || suf == "gb" || suf == "gib") mult = base * base * base;
  XSTAGE_REQUIRE(mult > 0, what, ": unknown unit in '", text, "' (use K, M, G; K = 1024)");
  XSTAGE_REQUIRE(std::isfinite(v) && v > 0, what, " must be positive, got '", text, "'");
  return v * mult;
}

double parse_time(const std::string& text, const std::string& what) {
  const auto [v, suf] = number_and_unit(text, what);
  double mult = 0;
  if (suf.empty() || suf == "us") mult = 1e-6;
  else if (suf == "ns") mult = 1e-9;
  else if (suf == "ms") mult = 1e-3;
  else if (suf == "s") mult = 1;
  XSTAGE_REQUIRE(mult > 0, what, ": unknown unit in '", text, "' (use ns, us, ms, s; default us)");
  XSTAGE_REQUIRE(std::isfinite(v) && v >= 0, what, " must be >= 0, got '", text, "'");
  return v * mult;
}

}  // namespace xstage::model
