// `auto`: choose the fused MoE kernel's tile order from M_X and the expert-weight working set
// (include/xstage/moe/order_choice.hpp has the rule; docs/SCHEDULERS.md, section "auto").
#include "xstage/moe/order_choice.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "xstage/common/error.hpp"
#include "xstage/common/format.hpp"
#include "xstage/model/burst_gap.hpp"

namespace xstage::moe {
namespace {

namespace bg = model::bg;
using units::gbps;
using units::mb;
using units::us;

bool finite_pos(double v) { return std::isfinite(v) && v > 0; }

// The shape checks shared by estimate_mma_times and choose_moe_order; returns the L1 / L2 tile widths resolved.
struct TileCols {
  int l1, l2;
};
TileCols check_shape(const OrderQuery& q) {
  XSTAGE_REQUIRE(q.hidden > 0, "moe order: hidden size must be positive, got ", q.hidden);
  XSTAGE_REQUIRE(q.inter > 0, "moe order: expert intermediate size must be positive, got ", q.inter);
  XSTAGE_REQUIRE(q.b_m > 0, "moe order: tile rows b_m must be positive, got ", q.b_m);
  XSTAGE_REQUIRE(q.b_n > 0, "moe order: N-tile width b_n must be positive, got ", q.b_n);
  XSTAGE_REQUIRE(q.hidden % q.b_n == 0, "moe order: hidden size ", q.hidden,
                 " is not a multiple of the N-tile width b_n = ", q.b_n);
  XSTAGE_REQUIRE(q.inter % q.b_n == 0, "moe order: intermediate size ", q.inter,
                 " is not a multiple of the N-tile width b_n = ", q.b_n);
  XSTAGE_REQUIRE(q.l1_cols >= 0, "moe order: L1 tile columns must be positive (0: b_n), got ", q.l1_cols);
  const int l1 = q.l1_cols > 0 ? q.l1_cols : q.b_n;
  XSTAGE_REQUIRE((2 * q.inter) % l1 == 0, "moe order: 2 x intermediate size ", 2 * q.inter,
                 " is not a multiple of the L1 tile width ", l1);
  XSTAGE_REQUIRE(q.l2_cols >= 0, "moe order: L2 tile columns must be positive (0: b_n), got ", q.l2_cols);
  const int l2 = q.l2_cols > 0 ? q.l2_cols : q.b_n;
  // The last L2 tile may be ragged (the kernel's 256-column tiles where 256 does not divide hidden): it costs a whole
  // tile's mainloop, so n2 = ceil(hidden / l2) tiles of l2 columns each.
  XSTAGE_REQUIRE(l2 % q.b_n == 0, "moe order: L2 tile width ", l2, " is not a multiple of the N-tile width b_n = ",
                 q.b_n);
  return {l1, l2};
}

void check_query(const OrderQuery& q) {
  XSTAGE_REQUIRE(q.experts > 0, "moe order: expert count must be positive, got ", q.experts);
  XSTAGE_REQUIRE(q.topk > 0, "moe order: top-k must be positive, got ", q.topk);
  XSTAGE_REQUIRE(q.topk <= q.experts, "moe order: top-k ", q.topk, " exceeds the expert count ", q.experts);
  XSTAGE_REQUIRE(q.tokens > 0, "moe order: tokens per rank must be positive, got ", q.tokens);
  XSTAGE_REQUIRE(q.world >= 1, "moe order: world size P must be >= 1, got ", q.world);
  XSTAGE_REQUIRE(q.experts % q.world == 0, "moe order: expert count ", q.experts,
                 " is not divisible by the world size P = ", q.world, " (expert parallelism)");
  XSTAGE_REQUIRE(finite_pos(q.weight_bytes) && q.weight_bytes <= 8,
                 "moe order: bytes per weight element must be in (0, 8] (1: W8A8, 0.5: W4A8), got ", q.weight_bytes);
  XSTAGE_REQUIRE(q.sms > 0, "moe order: participating SMs (CTAs per rank) must be positive, got ", q.sms);
  XSTAGE_REQUIRE(finite_pos(q.l2_bytes), "moe order: L2 size must be positive, got ", q.l2_bytes, " bytes");
  XSTAGE_REQUIRE(finite_pos(q.t_l1_mma), "moe order: T_L1^mma must be positive, got ", q.t_l1_mma, " s");
  XSTAGE_REQUIRE(finite_pos(q.t_l2_mma), "moe order: T_L2^mma must be positive, got ", q.t_l2_mma, " s");
  XSTAGE_REQUIRE(q.out_bytes > 0, "moe order: combine element bytes must be positive, got ", q.out_bytes);
  XSTAGE_REQUIRE(std::isfinite(q.staging) && q.staging >= 0, "moe order: staging cost must be >= 0, got ",
                 q.staging, " s");
  XSTAGE_REQUIRE(std::isfinite(q.min_gain) && q.min_gain >= 0, "moe order: min_gain must be >= 0, got ", q.min_gain);
  XSTAGE_REQUIRE(q.lead >= 0, "moe order: lead D must be >= 1 (0: D_knee), got ", q.lead);
  XSTAGE_REQUIRE(std::isfinite(q.sim_wave_s) && q.sim_wave_s >= 0,
                 "moe order: simulated expert-wave time must be >= 0 s (0: not given), got ", q.sim_wave_s);
  XSTAGE_REQUIRE(std::isfinite(q.sim_interleaved_s) && q.sim_interleaved_s >= 0,
                 "moe order: simulated interleaved time must be >= 0 s (0: not given), got ", q.sim_interleaved_s);
  XSTAGE_REQUIRE(std::isfinite(q.sim_wave_lag_s) && q.sim_wave_lag_s >= 0,
                 "moe order: simulated lagged expert-wave time must be >= 0 s (0: not given), got ", q.sim_wave_lag_s);
  XSTAGE_REQUIRE(std::isfinite(q.sim_interleaved_all_s) && q.sim_interleaved_all_s >= 0,
                 "moe order: simulated interleaved (every Linear-1 tile first) time must be >= 0 s (0: not given), got ",
                 q.sim_interleaved_all_s);
  XSTAGE_REQUIRE(q.sim_wave_lag_s == 0 || q.sim_wave_s > 0,
                 "moe order: a simulated lagged expert-wave time needs both other orders' times too");
  XSTAGE_REQUIRE((q.sim_wave_s > 0) == (q.sim_interleaved_s > 0),
                 "moe order: give both simulated times or neither (expert-wave ", q.sim_wave_s, " s, interleaved ",
                 q.sim_interleaved_s, " s)");
}

long long ceil_div(long long a, long long b) { return (a + b - 1) / b; }

}  // namespace

const char* to_string(OrderChoice::Order o) {
  return o == OrderChoice::Order::kInterleaved ? "interleaved" : "expert-wave";
}

MmaTimes estimate_mma_times(const OrderQuery& q, double flops_per_sm) {
  const TileCols tc = check_shape(q);
  XSTAGE_REQUIRE(finite_pos(flops_per_sm), "moe order: tensor-core rate must be a positive FLOP/s per SM, got ",
                 flops_per_sm);
  // 2 FLOP per multiply-add: a b_m x N output tile over inner dimension k costs 2 b_m N k FLOP.
  return {2.0 * q.b_m * tc.l1 * double(q.hidden) / flops_per_sm, 2.0 * q.b_m * tc.l2 * double(q.inter) / flops_per_sm};
}

OrderChoice choose_moe_order(const model::Platform& mx, const OrderQuery& query) {
  OrderChoice c;
  c.query = query;
  OrderQuery& q = c.query;
  const TileCols tc = check_shape(query);
  q.l1_cols = tc.l1;
  q.l2_cols = tc.l2;
  check_query(q);
  mx.validate();
  const long long K = q.sms;

  // Tiles per row, lead, rows per expert (balanced mean: the formula of model::design_moe).
  c.n1_per_row = 2 * q.inter / q.l1_cols;
  c.n2_per_row = int(ceil_div(q.hidden, q.l2_cols));  // the last tile ragged where l2_cols does not divide hidden
  c.d_knee = bg::d_knee(q.l1_cols, K, q.inter);  // = ceil(K / n1_per_row)
  c.lead = int(q.lead > 0 ? q.lead : c.d_knee);
  c.experts_per_wave = 0;
  c.local_experts = q.experts / q.world;
  c.tokens_per_expert = double(q.tokens) * q.world * q.topk / q.experts;
  c.rows_per_expert = (long long)std::ceil(c.tokens_per_expert / q.b_m);
  c.tile_rows = q.routing == RoutingKind::Skewed ? double(q.b_m) : c.tokens_per_expert / double(c.rows_per_expert);

  // Working sets. Interleaved: rows from the L2 front to the L1 front, D + max(w1, w2).
  const double w1_bytes = 2.0 * double(q.inter) * double(q.hidden) * q.weight_bytes;
  const double w2_bytes = double(q.hidden) * double(q.inter) * q.weight_bytes;
  c.expert_weight_bytes = w1_bytes + w2_bytes;
  const long long w1_rows = c.d_knee, w2_rows = ceil_div(K, c.n2_per_row);
  c.rows_in_flight = c.lead + std::max(w1_rows, w2_rows);
  c.experts_in_flight =
      std::min<long long>(c.local_experts, 1 + ceil_div(c.rows_in_flight - 1, c.rows_per_expert));
  c.weight_working_set_bytes = double(c.experts_in_flight) * c.expert_weight_bytes;
  c.fits_l2 = c.weight_working_set_bytes <= q.l2_bytes;
  // Expert-Wave for comparison: the kernel's default wave (enough experts that the wave's L1 tiles cover
  // every CTA), whose larger phase reads W1 of each of its experts.
  c.default_experts_per_wave = int(std::clamp<long long>(ceil_div(K, c.rows_per_expert * c.n1_per_row), 1,
                                                         c.local_experts));
  c.working_set_wave_bytes = c.default_experts_per_wave * w1_bytes;

  const std::string ws = "interleaved working set " + std::to_string(c.experts_in_flight) + " experts x " +
                         mb(c.expert_weight_bytes) + " = " + mb(c.weight_working_set_bytes) +
                         (c.fits_l2 ? " <= " : " > ") + "L2 " + mb(q.l2_bytes) + " (D = " + std::to_string(c.lead) +
                         " + " + std::to_string(std::max(w1_rows, w2_rows)) + " rows in flight, " +
                         std::to_string(c.rows_per_expert) + " rows per expert)";

  if (q.world == 1) {
    // No remote stores at P = 1: M_X has no backpressure to remove. The orders still differ in the slack between
    // a row's L1 and L2 tiles (Expert-Wave's L2 tiles wait for their wave's last L1 round; Interleaved's wait when
    // D is short for long L2 tiles), which the discrete-event simulator models, and in expert-weight L2 locality,
    // which nothing here models (measured 0.69-1.21x at P = 1 on the H200: docs/SCHEDULERS.md).
    const std::string head = "no remote stores at P = 1: nothing for M_X to hide; ";
    if (q.sim_wave_s > 0) {
      const std::string sim = "the discrete-event simulator (row-dependency slack; not L2 locality) predicts " +
                              us(q.sim_interleaved_s) + " interleaved (D = " + std::to_string(c.lead) + ") vs " +
                              us(q.sim_wave_s) + " expert-wave (" + fmt(q.sim_wave_s / q.sim_interleaved_s, 3) + "x)";
      // A tie (the same simulated time, to the simulator's rounding) leaves the order's other effect to decide: the
      // L2 locality of the expert weights. With at most kTieInterleavedMaxRows rows per expert every expert's weights
      // stream from DRAM about once in either order, so Expert-Wave's waves keep nothing in L2 for a next row, and
      // Interleaved's lead runs later rows' L1 tiles beside earlier rows' L2 tiles, whose streaming times vary in a
      // way the simulator's fixed tile times do not see (measured: docs/SCHEDULERS.md, "auto", session 53).
      const bool tie = std::abs(q.sim_interleaved_s - q.sim_wave_s) <= 1e-6 * q.sim_wave_s;
      const bool few_rows = c.rows_per_expert <= kTieInterleavedMaxRows;
      const bool inter = tie ? few_rows : q.sim_interleaved_s < q.sim_wave_s;
      c.order = inter ? OrderChoice::Order::kInterleaved : OrderChoice::Order::kExpertWave;
      const std::string rows = std::to_string(c.rows_per_expert) + " rows per expert";
      const std::string why =
          !tie ? (inter ? "" : ", no faster")
          : few_rows ? ", a tie; " + rows + " (<= " + std::to_string(kTieInterleavedMaxRows) +
                           "): every expert's weights stream once in either order, nothing for a wave to keep in L2"
                     : ", a tie; " + rows + " (> " + std::to_string(kTieInterleavedMaxRows) +
                           "): a wave keeps its experts' weights in L2 across their rows";
      c.reason = std::string(inter ? "interleaved: " : "expert-wave: ") + head + sim + why + " (" + ws + ")";
      // Lagged waves: a wave's L2 tiles after the next wave's L1 tiles wait on rows a wave old. Taken only where the
      // simulator says so by kLagMinGain over both: it does not see what the lag costs in L2 locality.
      const double best = std::min(q.sim_wave_s, q.sim_interleaved_s);
      if (q.sim_wave_lag_s > 0 && q.sim_wave_lag_s <= (1 - kLagMinGain) * best) {
        c.order = OrderChoice::Order::kExpertWave;
        c.wave_lag = 1;
        c.reason = "expert-wave-lagged: " + head + "the discrete-event simulator predicts " + us(q.sim_wave_lag_s) +
                   " for Expert-Wave with lagged waves (each wave's L2 tiles after the next wave's L1 tiles), " +
                   fmt(q.sim_wave_lag_s / best, 3) + "x the better of " + us(q.sim_wave_s) + " expert-wave and " +
                   us(q.sim_interleaved_s) + " interleaved (D = " + std::to_string(c.lead) + "; taken at <= " +
                   fmt(1 - kLagMinGain, 2) + "x) (" + ws + ")";
      }
      // Every Linear-1 tile first (Interleaved with a lead past every row): where the simulator predicts it strictly
      // faster than both plain orders, the row-dependency slack is worth taking whole. The simulator gives it the
      // knee's time wherever a longer lead changes no critical path (every shape of the grid but DiT-MoE-XL), and
      // there L2 locality, which it does not model, decides as before; where it predicts a gain the lag is a partial
      // form of the same slack, measured slower than this order at every DiT-MoE-XL point both were timed on (s60).
      if (q.sim_interleaved_all_s > 0 && q.sim_interleaved_all_s < (1 - 1e-6) * best) {
        c.order = OrderChoice::Order::kInterleaved;
        c.l1_first = 1;
        c.wave_lag = 0;
        c.reason = "l1-first: " + head + "the discrete-event simulator predicts " + us(q.sim_interleaved_all_s) +
                   " for Interleaved with every Linear-1 tile first, " + fmt(q.sim_interleaved_all_s / best, 3) +
                   "x the better of " + us(q.sim_wave_s) + " expert-wave and " + us(q.sim_interleaved_s) +
                   " interleaved (D = " + std::to_string(c.lead) + ")" +
                   (q.sim_wave_lag_s > 0 ? " (lagged waves " + us(q.sim_wave_lag_s) + ")" : std::string()) + " (" + ws + ")";
      }
    } else {
      c.order = OrderChoice::Order::kExpertWave;
      c.reason = "expert-wave: " + head + "no simulator prediction given (the order's local effects, "
                 "row-dependency slack and L2 locality of expert weights, are outside M_X) (" + ws + ")";
    }
    return c;
  }

  // Per-L2-tile bursts under both orders: model::design_test with G = T_L2 and G = G_int.
  c.B = c.tile_rows * q.l2_cols * q.out_bytes;
  c.wave = model::design_test(mx, {q.sms, c.B, q.world, q.t_l2_mma});
  c.g_int = bg::interleave_gap(double(c.n1_per_row), double(c.n2_per_row), q.t_l1_mma, q.t_l2_mma);
  c.interleaved = model::design_test(mx, {q.sms, c.B, q.world, c.g_int});
  c.interleave_rate = bg::interleave_rate(double(c.n1_per_row), double(c.n2_per_row), c.wave.V, c.wave.tiss0,
                                          q.t_l1_mma, q.t_l2_mma);
  c.drain_dominated = !c.wave.rate_ok;
  // T_RS = T_iss^0 + dT_iss + staging, dT_iss with the capacity term (tiss_eff), as model::design_moe.
  c.t_rs_wave = bg::t_rs(c.wave.tiss0, c.wave.tiss_eff - c.wave.tiss0, q.staging);
  c.t_rs_int = bg::t_rs(c.interleaved.tiss0, c.interleaved.tiss_eff - c.interleaved.tiss0, q.staging);
  const double stall_wave = bg::stall(c.t_rs_wave, q.t_l2_mma);
  const double stall_int = bg::stall(c.t_rs_int, q.t_l1_mma);
  c.predicted_stall_wave_us = stall_wave * 1e6;
  c.predicted_stall_interleaved_us = stall_int * 1e6;
  c.gain = stall_wave - stall_int;
  c.margin = q.min_gain * q.t_l2_mma;

  const std::string rate = "V/(T_iss^0 + T_L2) = " + mb(c.wave.V) + "/(" + us(c.wave.tiss0) + " + " +
                           us(q.t_l2_mma) + ") = " + gbps(c.wave.offered_rate) +
                           (c.drain_dominated ? " > " : " <= ") + "R = " + gbps(c.wave.R);
  const std::string cap = c.wave.capacity_ok ? "" : "; capacity q_peak " + mb(c.wave.q_peak) + " > Q " + mb(c.wave.Q);
  const std::string stalls = "stall per L2 tile " + us(stall_wave) + " expert-wave (T_RS " + us(c.t_rs_wave) +
                             " vs T_L2 " + us(q.t_l2_mma) + ") vs " + us(stall_int) + " interleaved (G_int " +
                             us(c.g_int) + ", T_RS " + us(c.t_rs_int) + " vs T_L1 " + us(q.t_l1_mma) + ")";
  if (!(c.gain >= c.margin && c.gain > 0)) {
    c.order = OrderChoice::Order::kExpertWave;
    c.reason = std::string("expert-wave: ") + (c.drain_dominated ? "" : "not ") + "drain-dominated (" + rate + cap +
               (c.drain_dominated ? ") but " : "); ") + stalls + ": gain " + us(c.gain) + " < margin " + us(c.margin) + " (" + fmt(q.min_gain, 2) +
               " x T_L2)";
  } else if (!c.fits_l2) {
    c.order = OrderChoice::Order::kExpertWave;
    c.reason = "expert-wave: interleaving would cut the " + stalls + ", but its " + ws +
               ": expert weights would leave L2 between their uses";
  } else {
    c.order = OrderChoice::Order::kInterleaved;
    c.reason = "interleaved, D = " + std::to_string(c.lead) + (q.lead > 0 ? "" : " (D_knee)") +
               ": drain-dominated (" + rate + cap + "); " + stalls + ": gain " + us(c.gain) + " >= margin " +
               us(c.margin) + "; " + ws;
  }
  return c;
}

nlohmann::json OrderChoice::to_json() const {
  nlohmann::json j = {
      {"order", to_string(order)}, {"lead", lead}, {"experts_per_wave", experts_per_wave}, {"wave_lag", wave_lag}, {"l1_first", l1_first},
      {"predicted_stall_wave_us", predicted_stall_wave_us},
      {"predicted_stall_interleaved_us", predicted_stall_interleaved_us},
      {"weight_working_set_bytes", weight_working_set_bytes}, {"l2_bytes", query.l2_bytes}, {"fits_l2", fits_l2},
      {"reason", reason},
      {"sim_wave_us", query.sim_wave_s * 1e6}, {"sim_interleaved_us", query.sim_interleaved_s * 1e6},
      {"sim_wave_lag_us", query.sim_wave_lag_s * 1e6}, {"sim_interleaved_all_us", query.sim_interleaved_all_s * 1e6},
      {"query", {{"hidden", query.hidden}, {"inter", query.inter}, {"experts", query.experts}, {"topk", query.topk},
                 {"tokens_per_rank", query.tokens}, {"world", query.world}, {"weight_bytes", query.weight_bytes},
                 {"b_m", query.b_m}, {"b_n", query.b_n}, {"l1_cols", query.l1_cols}, {"l2_cols", query.l2_cols}, {"sms", query.sms},
                 {"t_l1_mma_us", query.t_l1_mma * 1e6}, {"t_l2_mma_us", query.t_l2_mma * 1e6},
                 {"routing", to_string(query.routing)}, {"out_bytes", query.out_bytes},
                 {"staging_us", query.staging * 1e6}, {"min_gain", query.min_gain}, {"lead", query.lead}}},
      {"d_knee", d_knee}, {"local_experts", local_experts}, {"tokens_per_expert", tokens_per_expert},
      {"rows_per_expert", rows_per_expert}, {"tile_rows", tile_rows}, {"n1_per_row", n1_per_row},
      {"n2_per_row", n2_per_row}, {"rows_in_flight", rows_in_flight}, {"experts_in_flight", experts_in_flight},
      {"expert_weight_bytes", expert_weight_bytes}, {"default_experts_per_wave", default_experts_per_wave},
      {"working_set_wave_bytes", working_set_wave_bytes}};
  if (query.world > 1) {
    j["B_bytes"] = B;
    j["drain_dominated"] = drain_dominated;
    j["g_int_us"] = g_int * 1e6;
    j["interleave_rate_GBps"] = interleave_rate / 1e9;
    j["t_rs_wave_us"] = t_rs_wave * 1e6;
    j["t_rs_interleaved_us"] = t_rs_int * 1e6;
    j["gain_us"] = gain * 1e6;
    j["margin_us"] = margin * 1e6;
    j["expert_wave"] = wave.to_json();
    j["interleaved"] = interleaved.to_json();
  }
  return j;
}

}  // namespace xstage::moe
