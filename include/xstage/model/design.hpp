#pragma once
// Design tests (SPEC §3, §5, §6): audit a kernel's bursts against a platform M_X and decide between
// piggyback (the output-owning role issues the remote stores and returns to compute) and reshape
// (reorder work between bursts, or shrink the burst), keeping the numbers that decided it.
//
// World size P: in both kernels a producer's output tile goes to a remote rank with probability
// (P-1)/P (Ulysses post-attention all-to-all: sequence block s belongs to rank s*P/S; MoE combine: the
// token's source rank). The expected aligned remote volume of one burst of K producers is therefore
// V = K*B*(P-1)/P. Issue time is that of the whole burst (every producer issues its B bytes, local or
// remote): T_iss^0(K, K*B). Capacity is Q(K) for the K concurrent producers; the conservative variant
// Q(K_r) with only the K_r = round(K(P-1)/P) remote producers is reported next to it.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "xstage/model/platform.hpp"

namespace xstage::model {

// One periodic burst: K producers, B bytes each, producer-side gap G, world size P.
struct BurstSpec {
  int K = 0;
  double B = 0;  // bytes per producer
  int P = 0;     // world size (>= 2)
  double G = 0;  // seconds
};

struct DesignTest {
  BurstSpec spec;
  double remote_fraction = 0;  // (P-1)/P
  double V_total = 0;          // K*B
  double V = 0;                // expected aligned remote volume
  double tiss0 = 0, R = 0, Q = 0;
  int K_remote = 0;
  double Q_remote = 0;         // Q(K_remote), conservative
  double offered_rate = 0;     // V / (T_iss^0 + G)
  double q_peak = 0, g_star = 0;
  double tiss = 0, period = 0, delta_tiss = 0, tiss_iso = 0;
  double tiss_eff = 0;  // with the capacity limit: max(T_iss^0, V/R - G, (V - Q)/R)
  bool rate_ok = false, capacity_ok = false, capacity_ok_remote = false;
  bool ok() const { return rate_ok && capacity_ok; }
  std::string verdict;  // "piggyback" or "reshape"
  std::string reason;   // the inequality that decided it, with numbers
  nlohmann::json to_json() const;
};

DesignTest design_test(const Platform& p, const BurstSpec& s);

// MegaMoE layer (expert parallel, EP = P): Linear-1 hidden -> 2*inter, Linear-2 inter -> hidden,
// combine = remote stores of the Linear-2 output tile (b_m x b_n x out_bytes) to the token's rank.
struct MoeConfig {
  std::string name;
  long long hidden = 0, inter = 0;
  int experts = 0, topk = 0;
  long long tokens = 0;   // tokens per rank
  int b_m = 128, b_n = 128;
  std::string dtype = "fp8";  // MMA dtype: fp8 | bf16 (picks the platform's tensor-core rate)
  int out_bytes = 2;          // combine output element size (bf16)
  double tc_rate = 0;         // FLOP/s per GPU; 0: from the platform
  int K = 0, P = 0;           // 0: platform sm_count / world_size
  double staging = 0;         // fixed epilogue staging cost, seconds
};

struct MoeDesign {
  MoeConfig cfg;
  double rate_per_sm = 0;              // FLOP/s
  double t_l1 = 0, t_l2 = 0;           // MMA time of one L1 / L2 tile, seconds
  double B = 0;                        // bytes per producer per L2 tile
  long long rows_per_expert = 0, n1 = 0, n2 = 0;  // per rank
  double tokens_per_expert = 0;
  DesignTest wave;                     // Expert-Wave: G = T_L2
  double g_int = 0;                    // interleaved gap T_L2 + (n1/n2) T_L1
  DesignTest interleaved;              // G = G_int
  double interleave_rate = 0;          // n2 V / (n2 (T0 + T_L2) + n1 T_L1)
  long long d_knee = 0;
  // Epilogue span T_RS = T_iss^0 + ΔT_iss + staging, ΔT_iss including the capacity limit (tiss_eff).
  double t_rs_wave = 0, stall_wave = 0;  // cover = next L2 tile
  double t_rs_int = 0, stall_int = 0;    // cover = next L1 tile
  std::string verdict, reason;
  nlohmann::json to_json() const;
};

MoeDesign design_moe(const Platform& p, const MoeConfig& c);

// FlashAttention forward fused with the post-attention Ulysses all-to-all.
struct AttnConfig {
  long long M = 0;        // KV sequence length per head
  int d = 128, b_m = 128, b_n = 128;
  int out_bytes = 2;      // bf16 output
  double sigma = 0;       // seconds per KV tile; 0: from attn_rate
  double attn_rate = 0;   // attention FLOP/s per GPU; 0: from the platform
  int K = 0, P = 0;
  double staging = 0;
};

struct AttnDesign {
  AttnConfig cfg;
  double sigma = 0, B_t = 0, G = 0;
  long long m_ub = 0;       // M_ub* = b_n ceil(G*/sigma)
  DesignTest test;
  // Piggyback: the output-owning role issues the stores itself, so the backpressure penalty per tile is
  // T_iss_eff - T_iss^0 on that role's timeline (no separate epilogue to hide it).
  double penalty = 0, penalty_share = 0;  // seconds per tile; share of the tile's G + T_iss_eff
  nlohmann::json to_json() const;
};

AttnDesign design_attention(const Platform& p, const AttnConfig& c);

// Parses "4096", "32K", "32KB", "4.5MB", "2MiB" (decimal K/M/G = 1e3.., KiB = 1024..) into bytes or
// counts. Shorthand for sizes used by the CLI: "32K" here means 32*1024 when binary=true.
double parse_size(const std::string& text, const std::string& what, bool binary_k = true);
// "4us", "4000ns", "0.5ms", "4e-6s", plain number = microseconds.
double parse_time(const std::string& text, const std::string& what);

}  // namespace xstage::model
