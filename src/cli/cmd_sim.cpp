// Simulation subcommands: simulate moe (a MoE layer under the Expert-Wave and Interleaved schedules).
// The callback computes everything first and prints last, so bad input prints only the error line.
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iostream>
#include <memory>
#include <numeric>
#include <sstream>

#include "commands.hpp"
#include "xstage/common/error.hpp"
#include "xstage/common/table.hpp"
#include "xstage/model/design.hpp"
#include "xstage/model/platform.hpp"
#include "xstage/sim/moe.hpp"

namespace xstage::cli {
namespace {

std::string us(double s, int d = 2) { return fmt(s * 1e6, d); }
std::string mb(double b, int d = 2) { return fmt(b / 1e6, d); }

int count(const std::string& text, const std::string& what) {
  const double v = model::parse_size(text, what);
  XSTAGE_REQUIRE(v == std::floor(v), what, " must be a whole number, got '", text, "'");
  XSTAGE_REQUIRE(v <= 2147483647.0, what, " ", text, " is too large (at most 2147483647)");
  return int(v);
}

// Bytes a simulation may take: half of this machine's memory, at most 4 GB.
double memory_limit() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  const double phys = pages > 0 && page > 0 ? double(pages) * double(page) : 8e9;
  return std::min(phys / 2, 4e9);
}

// A plain integer (no size suffix), so that 0 and negatives reach the checks that explain them.
long long plain_int(const std::string& text, const std::string& what) {
  long long v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  XSTAGE_REQUIRE(ec == std::errc() && ptr == end && !text.empty(), what, " must be an integer, got '", text, "'");
  return v;
}

struct SimMoeOpts {
  std::string platform = "h200-nvlink4";
  std::string hidden, inter, tokens = "4096", tile = "128x128", dtype = "fp8", routing = "balanced";
  std::string staging = "0", lead;  // lead empty: D_knee
  std::string t_l1 = "0", t_l2 = "0";  // measured tile times (0: from the rate)
  std::string l1_cols, l2_cols;     // empty: b_n
  int experts = 0, topk = 0, out_bytes = 2, roles = 1, depth = 2, experts_per_wave = 0, wave_lag = 0;
  int K = 0, P = 0;
  double tflops = 0, skew = 1.0;
  std::string seed = "1";
  bool json = false, tiles = false;
};

void print_report(std::ostream& os, const sim::MoeSimReport& r) {
  const sim::MoeLayerConfig& c = r.config;
  const long long rank_pairs = std::accumulate(r.local_tokens.begin(), r.local_tokens.end(), 0LL);
  os << "xstage simulate moe: discrete-event X-Stage simulation (no GPU used)\n";
  os << "platform " << r.platform << ": R = " << fmt(r.R / 1e9, 1) << " GB/s, Q(" << c.sms << ") = " << mb(r.Q)
     << " MB, T_iss^0 of an aligned L2 burst = " << us(r.tiss0_l2, 3) << " us (K = " << c.sms << " x "
     << fmt(r.l2_bytes / 1024, 1) << " KB)\n";
  os << "layer: hidden " << c.hidden << ", h_inter " << c.h_inter << ", " << c.experts << " experts ("
     << c.experts / c.world << " local, P = " << c.world << "), top-" << c.topk << ", " << c.tokens_per_rank
     << " tokens/rank, routing " << c.routing;
  if (c.routing == "skewed") os << " (Zipf " << fmt(c.skew, 2) << ", seed " << c.seed << ")";
  if (c.routing == "uniform") os << " (seed " << c.seed << ")";
  os << "\n";
  os << "rank " << r.rank << " (most loaded): " << rank_pairs << " token-expert pairs (mean "
     << fmt(r.mean_rank_tokens, 0) << "), " << r.rows << " rows of " << c.b_m << ", N-tiles per row L1 "
     << r.l1_ntiles << " / L2 " << r.l2_ntiles << " (" << c.l1_cols << " / " << c.l2_cols << " columns)\n";
  os << "tiles: T_mma L1 " << us(r.t_l1) << " us" << (c.t_l1 > 0 ? " (measured)" : "") << ", L2 " << us(r.t_l2)
     << " us" << (c.t_l2 > 0 ? " (measured)" : "");
  if (c.t_l1 == 0 || c.t_l2 == 0) os << " at " << fmt(c.tc_rate / 1e12, 0) << " TFLOP/s";
  os << "; L2 remote bytes " << fmt(r.l2_bytes / 1024, 1) << " KB per full tile (remote fraction "
     << fmt(double(c.world - 1) / c.world, 2) << "); K = " << c.sms << " producers, " << c.roles
     << " per instance, staging depth " << c.staging << ", epilogue staging " << us(c.epi_time) << " us\n";
  Table t({"schedule", "setting", "total us", "L2 T_iss us", "L2 T_RS us", "T_RS max us", "stall/tile us",
           "MMA stall us/SM", "starved us/SM", "peak q MB"});
  for (const sim::MoeScheduleRun* run : {&r.wave, &r.interleaved}) {
    const sim::SimResult& s = run->sim;
    const sim::KindSummary& l2 = s.kinds.at(1);
    const std::string setting = run->schedule == "interleaved"
                                    ? "D = " + std::to_string(run->lead) + (run->lead == r.d_knee ? " (D_knee)" : "")
                                    : std::to_string(run->experts_per_wave) + " experts/wave" +
                                          (r.config.wave_lag ? ", lagged" : "");
    const double tiles = double(s.tiles.size());
    t.row({run->schedule, setting, us(s.total_time, 1), us(l2.tiss_mean), us(l2.t_rs_mean), us(l2.t_rs_max),
           us(s.mma_stall_total / tiles, 3), us(s.mma_stall_total / s.producers), us(s.starvation_total / s.producers), mb(s.peak_outstanding)});
  }
  t.print(os);
  os << "predicted speedup (expert-wave / interleaved): " << fmt(r.speedup(), 3) << "x\n";
}

void add_simulate_moe(CLI::App* sim) {
  auto o = std::make_shared<SimMoeOpts>();
  auto* c = sim->add_subcommand("moe", "A MoE layer's X-Stage under the Expert-Wave and Interleaved schedules");
  c->add_option("--platform", o->platform, "Preset name or platform JSON file")->capture_default_str();
  c->add_option("--hidden", o->hidden, "Hidden size")->required();
  c->add_option("--inter", o->inter, "Expert intermediate size h_inter")->required();
  c->add_option("--experts", o->experts, "Number of experts (all ranks)")->required();
  c->add_option("--topk", o->topk, "Experts per token")->required();
  c->add_option("--tokens", o->tokens, "Tokens per rank")->capture_default_str();
  c->add_option("--routing", o->routing, "balanced (exactly even) | uniform (bench_moe's balanced draw) | skewed")
      ->capture_default_str();
  c->add_option("--skew", o->skew, "Zipf exponent of expert popularity (skewed routing)")->capture_default_str();
  c->add_option("--seed", o->seed, "Seed of the skewed or uniform routing (0 .. 2^64-1)")->capture_default_str();
  c->add_option("--tile", o->tile, "Tile b_m x b_n")->capture_default_str();
  c->add_option("--l1-cols", o->l1_cols, "Output columns of one L1 tile (default b_n; the xstage kernel: 2*b_n)");
  c->add_option("--l2-cols", o->l2_cols, "Output columns of one L2 tile (default b_n; the xstage kernel: 2*b_n where "
                "hidden % 512 == 0, W8A8/W4A8)");
  c->add_option("--dtype", o->dtype, "MMA dtype: fp8 | bf16 (picks the platform's tensor-core rate)")
      ->capture_default_str();
  c->add_option("--out-bytes", o->out_bytes, "Combine output element size")->capture_default_str();
  auto* tflops = c->add_option("--tflops", o->tflops, "Dense tensor-core rate per GPU, TFLOP/s (default: the platform's)");
  auto* Kopt = c->add_option("-K,--producers", o->K, "Producers K, one CTA per SM (default: the platform's SM count)");
  auto* Popt = c->add_option("-P,--world-size", o->P, "World size / EP degree P (default: the platform's)");
  c->add_option("--roles", o->roles, "CTAs per scheduler instance (1, or 2 for CTA pairs)")->capture_default_str();
  c->add_option("-D,--lead", o->lead, "Interleaved lead D in rows (default: D_knee)");
  auto* epw = c->add_option("--experts-per-wave", o->experts_per_wave,
                "Expert-Wave grouping (default: enough experts to give every instance an L1 tile)");
  c->add_option("--wave-lag", o->wave_lag,
                "Expert-Wave: 1 = each wave's L2 tiles after the next wave's L1 tiles (the fused kernel's default at P = 1)")
      ->capture_default_str();
  c->add_option("--depth", o->depth, "Local staging depth between MMA and epilogue")->capture_default_str();
  c->add_option("--staging", o->staging, "Fixed epilogue staging cost per tile (ns|us; plain = us)")
      ->capture_default_str();
  c->add_option("--t-l1", o->t_l1, "Measured MMA-side time of one L1 tile, e.g. a trace's us/tile + gap to the "
                "next (ns|us; plain = us; 0: from the tensor-core rate)")->capture_default_str();
  c->add_option("--t-l2", o->t_l2, "Measured MMA-side time of one L2 tile (ns|us; plain = us; 0: from the "
                "tensor-core rate)")->capture_default_str();
  c->add_flag("--json", o->json, "Print JSON");
  c->add_flag("--tiles", o->tiles, "With --json: every tile's timeline (mainloop, waits, epilogue, issue span)");
  c->callback([o, tflops, Kopt, Popt, epw] {
    XSTAGE_REQUIRE(!o->tiles || o->json, "--tiles needs --json");
    const model::Platform p = model::Platform::load(o->platform);
    sim::MoeLayerConfig m;
    m.hidden = count(o->hidden, "--hidden");
    m.h_inter = count(o->inter, "--inter");
    m.experts = o->experts;
    m.topk = o->topk;
    m.tokens_per_rank = count(o->tokens, "--tokens");
    m.routing = o->routing;
    m.skew = o->skew;
    m.seed = parse_seed(o->seed, "--seed");
    const auto x = o->tile.find('x');
    XSTAGE_REQUIRE(x != std::string::npos, "--tile must look like 128x128, got '", o->tile, "'");
    m.b_m = count(o->tile.substr(0, x), "--tile rows");
    m.b_n = count(o->tile.substr(x + 1), "--tile columns");
    m.l1_cols = o->l1_cols.empty() ? 0 : count(o->l1_cols, "--l1-cols");
    m.l2_cols = o->l2_cols.empty() ? 0 : count(o->l2_cols, "--l2-cols");
    XSTAGE_REQUIRE(o->dtype == "fp8" || o->dtype == "bf16", "--dtype must be fp8 or bf16, got '", o->dtype, "'");
    m.dtype_bytes = o->dtype == "fp8" ? 1 : 2;
    m.out_bytes = o->out_bytes;
    XSTAGE_REQUIRE(!tflops->count() || (o->tflops > 0 && std::isfinite(o->tflops) && o->tflops <= 1e6),
                   "--tflops must be a positive, finite rate (at most 1e6 TFLOP/s), got ", o->tflops);
    m.tc_rate = o->tflops * 1e12;
    XSTAGE_REQUIRE(m.tc_rate > 0 || (m.dtype_bytes == 1 ? p.tc_fp8 : p.tc_bf16) > 0, "platform '", p.name,
                   "' records no ", o->dtype, " tensor-core rate: give --tflops");
    XSTAGE_REQUIRE(!Kopt->count() || o->K > 0, "-K must be positive, got ", o->K);
    m.sms = o->K;  // 0: the platform's
    m.world = o->P > 0 ? o->P : p.world_size;
    XSTAGE_REQUIRE(!Popt->count() || o->P >= 1, "-P must be >= 1, got ", o->P);
    XSTAGE_REQUIRE(m.world >= 1, "platform '", p.name, "' records no world size: give -P");
    m.roles = o->roles;
    const long long lead = o->lead.empty() ? -1 : plain_int(o->lead, "--lead");
    XSTAGE_REQUIRE(o->lead.empty() || (lead >= 1 && lead < (1LL << 30)), "--lead must be >= 1, got ", o->lead,
                   " (D = 0 lets an instance emit L2 of a row before its own L1 tiles: an in-order kernel "
                   "deadlocks; docs/SCHEDULERS.md)");
    m.lead = int(lead);
    XSTAGE_REQUIRE(!epw->count() || o->experts_per_wave > 0, "--experts-per-wave must be positive, got ",
                   o->experts_per_wave);
    m.experts_per_wave = o->experts_per_wave;
    m.wave_lag = o->wave_lag;  // (0 or 1: sim::simulate_moe names another value)
    m.staging = o->depth;
    m.epi_time = model::parse_time(o->staging, "--staging");
    m.t_l1 = model::parse_time(o->t_l1, "--t-l1");
    m.t_l2 = model::parse_time(o->t_l2, "--t-l2");
    XSTAGE_REQUIRE(m.t_l1 < 1, "--t-l1 must be below 1 s, got '", o->t_l1, "'");
    XSTAGE_REQUIRE(m.t_l2 < 1, "--t-l2 must be below 1 s, got '", o->t_l2, "'");
    m.memory_limit = memory_limit();
    m.json_tiles = o->tiles;
    const sim::MoeSimReport r = sim::simulate_moe(p, m);
    std::ostringstream os;
    if (o->json)
      os << r.to_json(o->tiles).dump(2) << "\n";
    else
      print_report(os, r);
    std::cout << os.str();
  });
}

}  // namespace

unsigned long long parse_seed(const std::string& text, const std::string& what) {
  unsigned long long seed = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, seed);
  XSTAGE_REQUIRE(!text.empty() && ec != std::errc::invalid_argument && ptr == end, what,
                 " must be a whole number in 0..18446744073709551615, got '", text, "'");
  XSTAGE_REQUIRE(ec != std::errc::result_out_of_range, what, " ", text, " is too large (at most 18446744073709551615)");
  return seed;
}

void register_sim_commands(CLI::App& app) {
  auto* sim = app.add_subcommand("simulate", "Discrete-event X-Stage simulation of a kernel's schedule");
  sim->require_subcommand(1);
  add_simulate_moe(sim);
}

}  // namespace xstage::cli
