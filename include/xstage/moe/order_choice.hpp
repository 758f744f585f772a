#pragma once
// `auto` for the fused MoE kernel: choose its tile order -- Expert-Wave (sched::MoeExpertWaveScheduler)
// or Interleaved (sched::MoeInterleavedScheduler, lead D) -- for one layer configuration, from the
// calibrated platform model M_X = (T_iss^0, R, Q) and the expert-weight working set against L2, and say
// why. Pure host code: every device property (participating SMs, L2 size) and every MMA time comes from
// the caller. docs/SCHEDULERS.md, section "auto", has the rule with its formulas.
//
// The rule (SPEC §3, §5; every formula is a call into model::design_test / model::bg):
//  1. P = 1: no remote stores, nothing for M_X to hide. What interleaving changes there is the slack between a
//     row's L1 and L2 tiles (and expert-weight L2 locality, which no model here describes): the discrete-event
//     simulator models the first, so the caller passes its predicted layer times of both orders
//     (q.sim_wave_s, q.sim_interleaved_s; moe::simulate_orders in order_sim.hpp runs it) and `auto` takes
//     Interleaved when the simulator predicts it strictly faster; without them, Expert-Wave. On a tie, L2 locality
//     decides: Interleaved where an expert holds at most kTieInterleavedMaxRows rows (its weights stream once in
//     either order), else Expert-Wave (a wave keeps its experts' weights in L2 across their rows). Given the simulated
//     time of Expert-Wave with lagged waves too (q.sim_wave_lag_s: each wave's L2 tiles after the next wave's L1 tiles,
//     so they do not wait for their wave's last L1 round), `auto` takes that where it is at least kLagMinGain faster
//     than both (OrderChoice::wave_lag = 1).
//  2. P > 1. Per L2 tile each of the K CTAs stores its output tile to the token's rank:
//     B = r_t * l2_cols * out_bytes bytes (r_t = the tile's filled rows: balanced routing, the mean
//     T*P*k/E / ceil(T*P*k/(E*b_m)); skewed, b_m, the hot experts' full tiles; out_bytes = 2, bf16),
//     remote with probability (P-1)/P, so the aligned burst is V = K*B*(P-1)/P (issue time T_iss^0(K, K*B),
//     capacity Q(K): model::design_test's assumptions).
//     Expert-Wave gap G_wave = T_L2^mma; drain-dominated when V/(T_iss^0 + T_L2^mma) > R, then
//       dT_iss^wave = [V/R - T_L2^mma - T_iss^0]_+.
//     Interleaved gap G_int = T_L2^mma + (n1/n2) T_L1^mma (n1, n2: L1 / L2 tiles per row),
//       dT_iss^int = [dT_iss^wave - (n1/n2) T_L1^mma]_+.
//     Capacity Q: T_iss = max(T_iss^0, V/R - G, (V - Q)/R), so a recovered burst whose
//       q_peak = [V - R T_iss^0]_+ stays within Q never backpressures; one above Q pays (V - Q)/R.
//     Epilogue span T_RS = T_iss^0 + dT_iss + staging (staging: q.staging, default 0), predicted stall per
//       L2 tile dt = [T_RS - T_cover^mma]_+ with T_cover = T_L2^mma (wave: an L2 tile follows) and
//       T_L1^mma (interleaved: an L1 tile follows).
//     Interleaved working set: the rows whose tiles are in flight at once span D + max(w1, w2) rows
//       (w1 = ceil(K/n1) = D_knee rows under one round of L1 tiles, w2 = ceil(K/n2) under one round of
//       L2 tiles, the L2 front trailing the L1 front by D), i.e. at most 1 + ceil((span - 1)/rows_per_expert)
//       experts (at most E/P), each with its W1 (2*inter*hidden) and W2 (hidden*inter) weights at
//       weight_bytes per element (block scales not counted).
//     Interleaved when dt_wave - dt_int >= min_gain * T_L2^mma AND that working set <= l2_bytes; else
//     Expert-Wave, with the reason.
//  Lead: D = D_knee = ceil(l1_cols * K / (2 * inter)) (SPEC §5 with l1_cols = b_n) unless q.lead is set;
//  experts_per_wave = 0 (the kernel's default: waves that fill the SMs).
#include <string>

#include <nlohmann/json.hpp>

#include "xstage/model/design.hpp"
#include "xstage/model/platform.hpp"
#include "xstage/moe/routing.hpp"

namespace xstage::moe {

// P = 1, a simulated tie: Interleaved where the balanced mean rows per expert, ceil(T P k / E / b_m), is at most this.
// Set in session 53 from the ties of every P = 1 run with both orders timed (sessions 21-47: at <= 2 rows Interleaved
// faster in 103 of 127, median 1.025x; above, Expert-Wave faster in 280 of 312) and 128 / 512 tokens per rank
// (1 row per expert: Interleaved faster at all 28 points, 1.04-1.47x; 8 of them ties, where auto had kept Expert-Wave);
// validated on held-out token counts and seeds (docs/SCHEDULERS.md).
inline constexpr long long kTieInterleavedMaxRows = 2;

// P = 1: Expert-Wave with lagged waves where the simulator predicts it at most (1 - kLagMinGain) of both other orders'
// times. Set in session 54 from the W8A8 grid (call 4, every shape, 2K / 8K / 32K, both routings, lagged and plain
// Expert-Wave in one process): the simulator does not model L2 locality, and on the balanced hidden-4096 layers at
// 8K / 32K (and V4-Pro's at 32K) it predicted the lag 0-10 % faster than plain Expert-Wave and within 1 % of
// Interleaved, where it measured 1.02-1.12x slower than plain Expert-Wave; where it predicted >= 13 % ahead of both
// (DiT-MoE-XL at 2K and 8K), it measured 0.71-0.86x. Any bound between 0.03 and 0.12 picks the same points of that
// grid. Held out (call 6): DiT-MoE-XL at 1K and 4K, picked and the fastest of the three orders at all 8 points
// (docs/SCHEDULERS.md, "auto").
inline constexpr double kLagMinGain = 0.05;

// The Interleaved lead (rows) that runs every Linear-1 tile before any Linear-2 tile, whatever the layer: the
// scheduler compares p1 - p2 >= D, so a lead past every row cannot overflow. The kernel's XSTAGE_MOE_L1_FIRST and the
// simulator's time of that order (OrderQuery::sim_interleaved_all_s) both run it.
inline constexpr int kLeadAllRows = 1 << 30;

struct OrderQuery {
  // The layer (expert parallel over P ranks: rank r holds experts [r E/P, (r+1) E/P)).
  long long hidden = 0, inter = 0;  // h, h_inter
  int experts = 0, topk = 0;        // E, k
  long long tokens = 0;             // tokens per rank T
  int world = 1;                    // P (1: no remote stores at all)
  double weight_bytes = 1;          // bytes per weight element: 1 (W8A8), 0.5 (W4A8)
  int b_m = 128, b_n = 128;         // tile rows, N-tile width
  // Output columns of one Linear-1 tile; 0: b_n (SPEC §5's layout, n1 = 2*inter/b_n tiles per row,
  // D_knee = ceil(b_n K / (2 inter))). The kernel in src/kernels/moe computes b_n gate and the matching b_n
  // up columns in one L1 tile (l1_ntiles = inter/b_n): it passes 2*b_n, so D_knee = ceil(b_n K / inter).
  int l1_cols = 0;
  // Output columns of one L2 tile (a multiple of b_n); 0: b_n. The kernel's: moe_kernel::moe_l2_cols (256 for W8A8 /
  // W4A8 where hidden % 512 == 0 or hidden / 128 is odd): n2 = ceil(hidden / l2_cols) L2 tiles per row (the last one
  // ragged where l2_cols does not divide hidden, a whole tile's mainloop), T_L2^mma and the combine burst B scale with it.
  int l2_cols = 0;
  int sms = 0;           // participating SMs = CTAs per rank (K), read from the device by the caller
  double l2_bytes = 0;   // L2 cache bytes, read from the device by the caller
  double t_l1_mma = 0;   // mainloop of one L1 tile, seconds (measured, or estimate_mma_times)
  double t_l2_mma = 0;   // mainloop of one L2 tile, seconds
  RoutingKind routing = RoutingKind::Balanced;
  int out_bytes = 2;       // combine element bytes (bf16)
  double staging = 0;      // fixed epilogue staging cost added to T_RS, seconds
  double min_gain = 0.05;  // Interleaved must lower the stall per L2 tile by >= min_gain * T_L2^mma
  int lead = 0;            // D to use and evaluate; 0: D_knee
  // P = 1 only: the discrete-event simulator's layer times of both orders (seconds; 0 = not given, then
  // Expert-Wave), and of Expert-Wave with lagged waves (0 = not given: not considered). moe::simulate_orders
  // (order_sim.hpp) computes them for this query.
  double sim_wave_s = 0, sim_interleaved_s = 0, sim_wave_lag_s = 0;
  // P = 1: the simulator's time of Interleaved with every Linear-1 tile first (lead kLeadAllRows); 0 = not given
  double sim_interleaved_all_s = 0;
};

// T_L1^mma = 2 b_m l1_cols h / rate, T_L2^mma = 2 b_m l2_cols h_inter / rate (one b_m x N tile over its inner
// dimension on one SM; the formula of model::design_moe), from a dense tensor-core rate in FLOP/s per SM.
// W4A8 dequantizes to FP8 in the kernel: pass the FP8 rate (or a measured one). UsageError on bad input.
struct MmaTimes {
  double t_l1 = 0, t_l2 = 0;  // seconds
};
MmaTimes estimate_mma_times(const OrderQuery& q, double flops_per_sm);

struct OrderChoice {
  enum class Order { kExpertWave, kInterleaved } order = Order::kExpertWave;
  int lead = 1;              // D for Interleaved (D_knee unless q.lead), >= 1; reported whatever the order
  int experts_per_wave = 0;  // for Expert-Wave: 0 = the kernel's default (waves that fill the SMs)
  int wave_lag = 0;          // for Expert-Wave: 1 = lagged waves (MoeLayerParams::wave_lag; P = 1 only)
  int l1_first = 0;          // for Interleaved: 1 = every Linear-1 tile first (a lead past every row; P = 1 only)
  double predicted_stall_wave_us = 0, predicted_stall_interleaved_us = 0;  // per L2 tile
  double weight_working_set_bytes = 0;  // of the interleaved order, vs l2_bytes
  std::string reason;                   // one line, with the numbers

  // The numbers behind the choice (SI units). P = 1 leaves the burst fields at 0.
  OrderQuery query;  // with l1_cols and l2_cols resolved
  long long d_knee = 0;
  int local_experts = 0;
  double tokens_per_expert = 0;    // balanced mean T*P*k/E
  long long rows_per_expert = 0;   // ceil(tokens_per_expert / b_m)
  double tile_rows = 0;            // filled rows of an L2 tile (see the rule above)
  long long n1_per_row = 0, n2_per_row = 0;  // L1 / L2 tiles per row
  double B = 0;                    // bytes per CTA per L2 tile
  model::DesignTest wave;          // G = T_L2^mma
  model::DesignTest interleaved;   // G = G_int
  double g_int = 0;
  double interleave_rate = 0;      // n2 V / (n2 (T_iss^0 + T_L2) + n1 T_L1)
  bool drain_dominated = false;    // V/(T_iss^0 + T_L2) > R
  double t_rs_wave = 0, t_rs_int = 0;
  double gain = 0, margin = 0;     // stall_wave - stall_int, min_gain * T_L2 (seconds)
  long long rows_in_flight = 0, experts_in_flight = 0;
  double expert_weight_bytes = 0;  // W1 + W2 of one expert
  double working_set_wave_bytes = 0;  // Expert-Wave for comparison: experts of a default wave x W1
  int default_experts_per_wave = 0;   // the kernel's default wave, for that comparison
  bool fits_l2 = false;

  nlohmann::json to_json() const;
};

const char* to_string(OrderChoice::Order o);  // "expert-wave" | "interleaved"

// The choice for one configuration; UsageError naming the bad value for an invalid query (zero SMs, inter
// not a multiple of b_n, experts not divisible by P, ...) or platform.
OrderChoice choose_moe_order(const model::Platform& mx, const OrderQuery& q);

}  // namespace xstage::moe
