// Model subcommands: platform list|show, eval, design moe|moe-order|attention|paper, fit.
// Every callback computes everything first and prints last, so a bad input prints only the error.
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>

#include "commands.hpp"
#include "xstage/common/error.hpp"
#include "xstage/common/table.hpp"
#include "xstage/model/burst_gap.hpp"
#include "xstage/model/design.hpp"
#include "xstage/model/fit.hpp"
#include "xstage/model/platform.hpp"
#include "xstage/moe/layer_bound.hpp"
#include "xstage/moe/order_choice.hpp"
#include "xstage/moe/routing.hpp"
#include "xstage/moe/order_sim.hpp"
#include "xstage/moe/shapes.hpp"

namespace xstage::cli {
namespace {

using namespace xstage::model;

std::string us(double s, int d = 2) { return fmt(s * 1e6, d); }
std::string mb(double b, int d = 2) { return fmt(b / 1e6, d); }
std::string gbps(double r) { return fmt(r / 1e9, 1); }
std::string yes(bool b) { return b ? "yes" : "NO"; }

void parse_tile(const std::string& t, int& bm, int& bn) {
  auto x = t.find('x');
  XSTAGE_REQUIRE(x != std::string::npos, "--tile must look like 128x128, got '", t, "'");
  double a = parse_size(t.substr(0, x), "--tile rows"), b = parse_size(t.substr(x + 1), "--tile columns");
  XSTAGE_REQUIRE(a == std::floor(a) && b == std::floor(b) && a < 1e6 && b < 1e6, "--tile must be integers, got '", t, "'");
  bm = int(a);
  bn = int(b);
}

int parse_count(const std::string& text, const std::string& what) {
  double v = parse_size(text, what);
  XSTAGE_REQUIRE(v == std::floor(v), what, " must be a whole number, got '", text, "'");
  XSTAGE_REQUIRE(v <= 2147483647.0, what, " ", text, " is too large (at most 2147483647)");
  return int(v);
}

// A positive, finite rate in `unit` (at most 1e6 of it); empty: 0 (the platform's).
double parse_rate(const std::string& text, const std::string& what, const char* unit) {
  if (text.empty()) return 0;
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(text, &pos);
  } catch (...) {
    pos = std::string::npos;
  }
  XSTAGE_REQUIRE(pos == text.size() && v > 0 && std::isfinite(v) && v <= 1e6, what, " must be a positive, finite rate (",
                 unit, ", at most 1e6), got '", text, "'");
  return v;
}
double parse_tflops(const std::string& text, const std::string& what) { return parse_rate(text, what, "TFLOP/s"); }

// Comma-separated list items (repeatable option): an empty item is an error, not skipped.
std::vector<std::string> items(const std::vector<std::string>& args, const std::string& what) {
  std::vector<std::string> out;
  for (const auto& a : args) {
    std::string cur;
    for (size_t i = 0; i <= a.size(); ++i) {
      if (i == a.size() || a[i] == ',') {
        XSTAGE_REQUIRE(!cur.empty(), what, ": empty item in '", a, "'");
        out.push_back(cur);
        cur.clear();
      } else {
        cur += a[i];
      }
    }
  }
  return out;
}

void print_platform_summary(std::ostream& os, const Platform& p) {
  os << "platform " << p.name << " (" << p.provenance.source << "): R = " << gbps(p.R) << " GB/s, "
     << "T_iss^0(" << p.sm_count << ", " << p.sm_count << "x32KB) = " << us(p.tiss0(p.sm_count, p.sm_count * 32768.0), 3)
     << " us, Q(" << p.sm_count << ") = " << mb(p.Q(p.sm_count)) << " MB, world size " << p.world_size << "\n";
}

// ---------------------------------------------------------------- platform
void add_platform(CLI::App& app) {
  auto* plat = app.add_subcommand("platform", "List or show platform models M_X (presets or JSON files)");
  plat->require_subcommand(1);
  auto* list = plat->add_subcommand("list", "List the embedded presets");
  auto json = std::make_shared<bool>(false);
  list->add_flag("--json", *json, "Print JSON");
  list->callback([json] {
    if (*json) {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& n : preset_names()) j.push_back(preset(n).to_json());
      std::cout << j.dump(2) << "\n";
      return;
    }
    Table t({"name", "source", "SMs", "P", "R GB/s", "T_iss^0 us (K=SMs, B=32KB)", "Q(SMs) MB", "date"});
    for (const auto& n : preset_names()) {
      auto p = preset(n);
      t.row({p.name, p.provenance.source, std::to_string(p.sm_count), std::to_string(p.world_size), gbps(p.R),
             us(p.tiss0(p.sm_count, p.sm_count * 32768.0), 3), mb(p.Q(p.sm_count)), p.provenance.date});
    }
    t.print(std::cout);
  });
  auto* show = plat->add_subcommand("show", "Show one platform: provenance and tables");
  auto name = std::make_shared<std::string>();
  auto json2 = std::make_shared<bool>(false);
  show->add_option("platform", *name, "Preset name or platform JSON file")->required();
  show->add_flag("--json", *json2, "Print JSON");
  show->callback([name, json2] {
    auto p = Platform::load(*name);
    if (*json2) {
      std::cout << p.to_json().dump(2) << "\n";
      return;
    }
    std::ostringstream os;
    os << "platform  " << p.name << "\n"
       << "machine   " << p.provenance.machine << "\n"
       << "date      " << p.provenance.date << "\n"
       << "source    " << p.provenance.source << "\n"
       << "command   " << p.provenance.command << "\n"
       << "note      " << p.provenance.note << "\n"
       << "SMs " << p.sm_count << ", world size " << p.world_size << ", R = " << gbps(p.R) << " GB/s\n";
    if (p.tc_bf16 > 0 || p.tc_fp8 > 0 || p.attn_bf16 > 0)
      os << "tensor-core rates per GPU (TFLOP/s): bf16 " << fmt(p.tc_bf16 / 1e12, 0) << ", fp8 "
         << fmt(p.tc_fp8 / 1e12, 0) << ", attention bf16 " << fmt(p.attn_bf16 / 1e12, 0) << " (0 = unknown)\n";
    os << "\nT_iss^0(K, V):\n";
    Table t({"K", "V MB", "T_iss^0 us"});
    auto tab = p.tiss0_table;
    std::sort(tab.begin(), tab.end(), [](auto& a, auto& b) { return a.K != b.K ? a.K < b.K : a.V < b.V; });
    for (const auto& e : tab) t.row({std::to_string(e.K), mb(e.V, 3), us(e.tiss0, 4)});
    t.print(os);
    os << "\nQ(K):\n";
    Table q({"K", "Q MB"});
    for (const auto& e : p.q_table) q.row({std::to_string(e.K), mb(e.Q, 3)});
    q.print(os);
    std::cout << os.str();
  });
}

// ---------------------------------------------------------------- eval
void add_eval(CLI::App& app) {
  struct Opts {
    std::string platform = "h200-nvlink4", K, B;
    std::vector<std::string> gaps{"0"};
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  auto* c = app.add_subcommand("eval", "Evaluate the Burst-Gap model for K producers x B bytes, at gaps G "
                                       "(every byte remote, as in the microbenchmark)");
  c->add_option("--platform", o->platform, "Preset name or platform JSON file")->capture_default_str();
  c->add_option("-K,--producers", o->K, "Concurrent producers K (default: the platform's SM count)");
  c->add_option("-B,--bytes", o->B, "Bytes per producer per burst (K suffix = 1024)")->required();
  c->add_option("-G,--gap", o->gaps, "Producer-side gap(s) between bursts, comma-separated (ns|us|ms; plain = us)")
      ->capture_default_str();
  c->add_flag("--json", o->json, "Print JSON");
  c->callback([o] {
    auto p = Platform::load(o->platform);
    int K = o->K.empty() ? p.sm_count : parse_count(o->K, "-K");
    XSTAGE_REQUIRE(K > 0, "-K must be positive, got ", K);
    double B = parse_size(o->B, "-B");
    XSTAGE_REQUIRE(B == std::floor(B), "-B must be a whole number of bytes, got '", o->B, "'");
    XSTAGE_REQUIRE(B <= 1073741824.0, "-B ", o->B, " is too large: at most 1 GiB per producer per burst (the "
                   "model is calibrated up to 128 KB)");
    double V = K * B, R = p.R, T0 = p.tiss0(K, V), Q = p.Q(K);
    std::vector<double> G;
    for (const auto& g : items(o->gaps, "--gap")) {
      G.push_back(parse_time(g, "--gap"));
      XSTAGE_REQUIRE(G.back() <= 1.0, "--gap ", g, " is too large (at most 1 s)");
    }
    nlohmann::json j = {{"platform", p.name}, {"K", K}, {"B_bytes", B}, {"V_bytes", V}, {"R_GBps", R / 1e9},
                        {"tiss0_us", T0 * 1e6}, {"Q_bytes", Q}, {"V_over_R_us", V / R * 1e6},
                        {"g_star_us", bg::g_star(V, R, T0) * 1e6}, {"q_peak_bytes", bg::q_peak(V, R, T0)},
                        {"capacity_ok", bg::capacity_bound_ok(V, R, T0, Q)},
                        {"tiss_iso_us", bg::tiss_iso(V, R, T0, Q) * 1e6}};
    nlohmann::json rows = nlohmann::json::array();
    Table t({"G us", "T_iss us", "dT_iss us", "T_period us", "V/(T0+G) GB/s", "rate <= R"});
    for (double g : G) {
      bool ok = bg::rate_bound_ok(g, V, R, T0);
      rows.push_back({{"G_us", g * 1e6}, {"tiss_us", bg::tiss(g, V, R, T0) * 1e6},
                      {"delta_tiss_us", bg::delta_tiss(g, V, R, T0) * 1e6},
                      {"period_us", bg::t_period(g, V, R, T0) * 1e6},
                      {"offered_rate_GBps", bg::offered_rate(g, V, T0) / 1e9}, {"rate_ok", ok}});
      t.row({us(g), us(bg::tiss(g, V, R, T0)), us(bg::delta_tiss(g, V, R, T0)), us(bg::t_period(g, V, R, T0)),
             gbps(bg::offered_rate(g, V, T0)), yes(ok)});
    }
    j["gaps"] = rows;
    if (o->json) {
      std::cout << j.dump(2) << "\n";
      return;
    }
    std::ostringstream os;
    os << "platform " << p.name << ": K = " << K << ", B = " << fmt(B, 0) << " B, V = K*B = " << mb(V, 3)
       << " MB (all remote)\n"
       << "R = " << gbps(R) << " GB/s, T_iss^0(K,V) = " << us(T0, 3) << " us, V/R = " << us(V / R)
       << " us, G* = " << us(bg::g_star(V, R, T0)) << " us\n"
       << "q_peak = " << mb(bg::q_peak(V, R, T0), 3) << " MB vs Q(K) = " << mb(Q, 3) << " MB: capacity bound "
       << (bg::capacity_bound_ok(V, R, T0, Q) ? "holds" : "FAILS") << "; isolated T_iss^iso = "
       << us(bg::tiss_iso(V, R, T0, Q)) << " us\n";
    t.print(os);
    std::cout << os.str();
  });
}

// ---------------------------------------------------------------- design
std::string assumption(const DesignTest& d) {
  return "assumption: a tile goes to a remote rank with probability (P-1)/P = " + fmt(d.remote_fraction, 3) +
         ", so the aligned remote burst is V = K*B*(P-1)/P (K = " + std::to_string(d.spec.K) +
         ", P = " + std::to_string(d.spec.P) + ")\n";
}
std::string capacity_caveat(const DesignTest& d) {
  if (d.capacity_ok == d.capacity_ok_remote) return "";
  return "caveat: counting only the K_r = " + std::to_string(d.K_remote) + " remote producers, Q(K_r) = " +
         mb(d.Q_remote) + " MB " + (d.capacity_ok_remote ? ">=" : "<") + " q_peak = " + mb(d.q_peak) +
         " MB: an aligned burst would then overflow once, isolated T_iss = " +
         us(bg::tiss_iso(d.V, d.R, d.tiss0, d.Q_remote)) + " us instead of " + us(d.tiss0) + " us\n";
}

struct MoeOpts {
  std::string hidden, inter, tokens = "4096", tile = "128x128", dtype = "fp8", K, P, staging = "0", name = "moe";
  int experts = 0, topk = 0;
  std::string tflops;
};
void add_moe_options(CLI::App* c, MoeOpts& o) {
  c->add_option("--hidden", o.hidden, "Hidden size")->required();
  c->add_option("--inter", o.inter, "Expert intermediate size h_inter")->required();
  c->add_option("--experts", o.experts, "Number of experts")->required();
  c->add_option("--topk", o.topk, "Experts per token")->required();
  c->add_option("--tokens", o.tokens, "Tokens per rank")->capture_default_str();
  c->add_option("--tile", o.tile, "Tile b_m x b_n")->capture_default_str();
  c->add_option("--dtype", o.dtype, "MMA dtype: fp8 | bf16")->capture_default_str();
  c->add_option("--tflops", o.tflops, "Dense tensor-core rate per GPU, TFLOP/s (default: the platform's)");
  c->add_option("-K,--producers", o.K, "Producers K (default: the platform's SM count)");
  c->add_option("-P,--world-size", o.P, "World size / EP degree P (default: the platform's)");
  c->add_option("--staging", o.staging, "Fixed epilogue staging cost (ns|us; plain = us)")->capture_default_str();
}
MoeConfig moe_config(const MoeOpts& o) {
  MoeConfig c;
  c.name = o.name;
  c.hidden = parse_count(o.hidden, "--hidden");
  c.inter = parse_count(o.inter, "--inter");
  c.experts = o.experts;
  c.topk = o.topk;
  c.tokens = parse_count(o.tokens, "--tokens");
  parse_tile(o.tile, c.b_m, c.b_n);
  c.dtype = o.dtype;
  c.tc_rate = parse_tflops(o.tflops, "--tflops") * 1e12;
  c.K = o.K.empty() ? 0 : parse_count(o.K, "-K");
  c.P = o.P.empty() ? 0 : parse_count(o.P, "-P");
  c.staging = parse_time(o.staging, "--staging");
  return c;
}

void print_moe(std::ostream& os, const std::vector<MoeDesign>& ds) {
  Table t({"shape", "h", "h_inter", "T_L1 us", "T_L2 us", "n1/n2", "schedule", "G us", "V MB", "V/(T0+G) GB/s",
           "rate ok", "q_peak MB", "cap ok", "dT_iss us", "stall us", "verdict"});
  for (const auto& d : ds) {
    std::string ratio = fmt(double(d.n1) / double(d.n2), 2);
    t.row({d.cfg.name, std::to_string(d.cfg.hidden), std::to_string(d.cfg.inter), us(d.t_l1), us(d.t_l2), ratio,
           "expert-wave", us(d.wave.spec.G), mb(d.wave.V), gbps(d.wave.offered_rate), yes(d.wave.rate_ok),
           mb(d.wave.q_peak), yes(d.wave.capacity_ok), us(d.wave.delta_tiss), us(d.stall_wave), d.verdict});
    t.row({"", "", "", "", "", "", "interleaved", us(d.g_int), mb(d.interleaved.V), gbps(d.interleaved.offered_rate),
           yes(d.interleaved.rate_ok), mb(d.interleaved.q_peak), yes(d.interleaved.capacity_ok),
           us(d.interleaved.delta_tiss), us(d.stall_int), d.interleaved.ok() ? "(recovers)" : "(still fails)"});
  }
  t.print(os);
}

struct AttnOpts {
  std::vector<std::string> seq{"8K,16K,32K,64K"};
  std::string tile = "128x128", K, P, sigma, staging = "0";
  int d = 128, out_bytes = 2;
  std::string tflops, tflops_name = "--tflops";
};
void add_attn_options(CLI::App* c, AttnOpts& o) {
  c->add_option("--seq", o.seq, "KV sequence length(s) M, comma-separated (K suffix = 1024)")->capture_default_str();
  c->add_option("--head-dim", o.d, "Head dimension d")->capture_default_str();
  c->add_option("--tile", o.tile, "Tile b_m x b_n")->capture_default_str();
  c->add_option("--out-bytes", o.out_bytes, "Output element size s_out")->capture_default_str();
  c->add_option("--sigma", o.sigma, "Time per KV tile (ns|us; plain = us); default from the attention rate");
  c->add_option("--tflops", o.tflops, "Attention rate per GPU, TFLOP/s (default: the platform's)");
  c->add_option("-K,--producers", o.K, "Producers K (default: the platform's SM count)");
  c->add_option("-P,--world-size", o.P, "World size P (Ulysses degree; default: the platform's)");
  c->add_option("--staging", o.staging, "Fixed epilogue staging cost (ns|us; plain = us)")->capture_default_str();
}
std::vector<AttnDesign> attn_designs(const Platform& p, const AttnOpts& o) {
  std::vector<AttnDesign> out;
  const double tflops = parse_tflops(o.tflops, o.tflops_name);
  for (const auto& m : items(o.seq, "--seq")) {
    AttnConfig c;
    c.M = parse_count(m, "--seq");
    c.d = o.d;
    parse_tile(o.tile, c.b_m, c.b_n);
    c.out_bytes = o.out_bytes;
    if (!o.sigma.empty()) {
      c.sigma = parse_time(o.sigma, "--sigma");
      XSTAGE_REQUIRE(c.sigma >= 1e-9, "--sigma must be at least 1 ns per KV tile, got '", o.sigma, "'");
      XSTAGE_REQUIRE(c.sigma <= 1.0, "--sigma ", o.sigma, " is too large (at most 1 s per KV tile)");
    }
    c.attn_rate = tflops * 1e12;
    c.K = o.K.empty() ? 0 : parse_count(o.K, "-K");
    c.P = o.P.empty() ? 0 : parse_count(o.P, "-P");
    c.staging = parse_time(o.staging, "--staging");
    out.push_back(design_attention(p, c));
  }
  return out;
}
void print_attn(std::ostream& os, const std::vector<AttnDesign>& ds) {
  const auto& a = ds.front();
  os << "FlashAttention + Ulysses A2A: B_t = b_m*d*s_out = " << fmt(a.B_t, 0) << " B per producer, K = " << a.cfg.K
     << ", sigma = " << us(a.sigma) << " us per KV tile, G* = " << us(a.test.g_star) << " us, M_ub* = b_n*ceil(G*/sigma) = "
     << a.m_ub << " tokens\n";
  Table t({"M", "KV tiles", "G_Qloop us", "V MB", "T0 us", "V/(T0+G) GB/s", "rate ok", "q_peak MB", "Q MB", "cap ok",
           "T_iss us", "penalty %", "verdict"});
  for (const auto& d : ds)
    t.row({std::to_string(d.cfg.M), std::to_string((d.cfg.M + d.cfg.b_n - 1) / d.cfg.b_n), us(d.G), mb(d.test.V),
           us(d.test.tiss0, 3), gbps(d.test.offered_rate), yes(d.test.rate_ok), mb(d.test.q_peak), mb(d.test.Q),
           yes(d.test.capacity_ok), us(d.test.tiss_eff), fmt(100 * d.penalty_share, 2), d.test.verdict});
  t.print(os);
}

// Representative fine-grained MoE shapes (public configs): the paper's models are not public.
std::vector<MoeOpts> paper_moe_shapes() {
  auto mk = [](const char* n, const char* h, const char* i, int e, int k) {
    MoeOpts o;
    o.name = n;
    o.hidden = h;
    o.inter = i;
    o.experts = e;
    o.topk = k;
    return o;
  };
  return {mk("qwen3-30b-a3b", "2048", "768", 128, 8), mk("h4096-i1024", "4096", "1024", 128, 8),
          mk("qwen3-235b-a22b", "4096", "1536", 128, 8), mk("deepseek-v3", "7168", "2048", 256, 8)};
}

// ---------------------------------------------------------------- design moe-order (`auto`)
// A layer shape from --shape (the issue-11 table) and the dimension options that override it.
struct ShapeOpts {
  std::string shape, hidden, inter, experts, topk;
};

struct OrderOpts {
  ShapeOpts sh;
  std::string platform = "h200-nvlink4", tokens = "4096", P, K, l2 = "60MiB",
              tile = "128x128", l1_cols, l2_cols, tflops, t_l1, t_l2, precision = "w8a8", routing = "balanced", staging = "0",
              min_gain = "0.05", lead = "0", seed = "1";
  bool json = false, no_sim = false;
};

double parse_fraction(const std::string& text, const std::string& what) {
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(text, &pos);
  } catch (...) {
    pos = std::string::npos;
  }
  XSTAGE_REQUIRE(pos == text.size() && std::isfinite(v) && v >= 0 && v <= 100, what,
                 " must be a number in [0, 100], got '", text, "'");
  return v;
}

int parse_count0(const std::string& text, const std::string& what) {  // 0 allowed (a default)
  if (text == "0") return 0;
  XSTAGE_REQUIRE(text.empty() || text[0] != '-', what, " must be >= 0 (0: the default), got '", text, "'");
  return parse_count(text, what);
}

std::string shape_names() {
  std::string s;
  for (const auto& m : xstage::moe::kMoeShapes) s += (s.empty() ? "" : ", ") + std::string(m.name);
  return s;
}

void add_shape_options(CLI::App* c, ShapeOpts& o) {
  c->add_option("--shape", o.shape, "Layer shape: " + shape_names());
  c->add_option("--hidden", o.hidden, "Hidden size (overrides --shape)");
  c->add_option("--inter", o.inter, "Expert intermediate size h_inter (overrides --shape)");
  c->add_option("--experts", o.experts, "Routed experts (overrides --shape)");
  c->add_option("--topk", o.topk, "Experts per token (overrides --shape)");
}
xstage::moe::MoeShape resolve_shape(const ShapeOpts& o) {
  xstage::moe::MoeShape s{"custom", 0, 0, 0, 0, ""};
  if (!o.shape.empty()) {
    const auto* f = xstage::moe::find_moe_shape(o.shape);
    XSTAGE_REQUIRE(f, "--shape: unknown shape '", o.shape, "' (shapes: ", shape_names(), ")");
    s = *f;
  } else {
    XSTAGE_REQUIRE(!o.hidden.empty() && !o.inter.empty() && !o.experts.empty() && !o.topk.empty(),
                   "give --shape (", shape_names(), ") or all of --hidden, --inter, --experts, --topk");
  }
  if (!o.hidden.empty()) s.hidden = parse_count(o.hidden, "--hidden");
  if (!o.inter.empty()) s.inter = parse_count(o.inter, "--inter");
  if (!o.experts.empty()) s.experts = parse_count(o.experts, "--experts");
  if (!o.topk.empty()) s.topk = parse_count(o.topk, "--topk");
  return s;
}

xstage::moe::OrderQuery order_query(const Platform& p, const OrderOpts& o, double& rate_per_sm) {
  xstage::moe::OrderQuery q;
  const xstage::moe::MoeShape s = resolve_shape(o.sh);
  q.hidden = s.hidden;
  q.inter = s.inter;
  q.experts = s.experts;
  q.topk = s.topk;
  q.tokens = parse_count(o.tokens, "--tokens");
  q.world = o.P.empty() ? p.world_size : parse_count(o.P, "-P");
  XSTAGE_REQUIRE(o.P.empty() || q.world >= 1, "-P must be >= 1, got ", q.world);
  XSTAGE_REQUIRE(q.world >= 1, "platform '", p.name, "' records no world size; give -P");
  q.sms = o.K.empty() ? p.sm_count : parse_count(o.K, "--sms");
  q.l2_bytes = parse_size(o.l2, "--l2");
  parse_tile(o.tile, q.b_m, q.b_n);
  q.l1_cols = o.l1_cols.empty() ? 0 : parse_count(o.l1_cols, "--l1-cols");
  q.l2_cols = o.l2_cols.empty() ? 0 : parse_count(o.l2_cols, "--l2-cols");
  XSTAGE_REQUIRE(o.precision == "w8a8" || o.precision == "w4a8", "--precision must be w8a8 or w4a8, got '",
                 o.precision, "'");
  q.weight_bytes = o.precision == "w8a8" ? 1.0 : 0.5;
  q.routing = xstage::moe::parse_routing_kind(o.routing);
  q.staging = parse_time(o.staging, "--staging");
  q.min_gain = parse_fraction(o.min_gain, "--min-gain");
  q.lead = parse_count0(o.lead, "--lead");
  XSTAGE_REQUIRE(o.t_l1.empty() == o.t_l2.empty(), "give both --t-l1 and --t-l2 (measured MMA times), or neither");
  if (!o.t_l1.empty()) {
    XSTAGE_REQUIRE(o.tflops.empty(), "give --tflops or --t-l1/--t-l2, not both");
    q.t_l1_mma = parse_time(o.t_l1, "--t-l1");
    q.t_l2_mma = parse_time(o.t_l2, "--t-l2");
    rate_per_sm = 0;
  } else {
    const double per_gpu = o.tflops.empty() ? p.tc_fp8 : parse_tflops(o.tflops, "--tflops") * 1e12;
    XSTAGE_REQUIRE(per_gpu > 0, "platform '", p.name, "' records no fp8 tensor-core rate; give --tflops or --t-l1/--t-l2");
    rate_per_sm = per_gpu / p.sm_count;  // a property of the SM: per-GPU rate over the GPU's SMs
    const auto t = xstage::moe::estimate_mma_times(q, rate_per_sm);
    q.t_l1_mma = t.t_l1;
    q.t_l2_mma = t.t_l2;
  }
  return q;
}

void add_moe_order(CLI::App* des) {
  auto o = std::make_shared<OrderOpts>();
  auto* c = des->add_subcommand("moe-order", "auto: choose the fused MoE kernel's tile order (Expert-Wave or "
                                             "Interleaved with lead D) from M_X and the expert-weight working set");
  c->add_option("--platform", o->platform, "Preset name or platform JSON file")->capture_default_str();
  add_shape_options(c, o->sh);
  c->add_option("--tokens", o->tokens, "Tokens per rank")->capture_default_str();
  c->add_option("-P,--world-size,--world", o->P, "World size / EP degree P (1: no remote stores; default: the platform's)");
  c->add_option("-K,--sms", o->K, "Participating SMs = CTAs per rank (default: the platform's SM count)");
  c->add_option("--l2", o->l2, "L2 cache size (K/M suffix = 1024; H200: 60 MB, PLATFORM.md)")->capture_default_str();
  c->add_option("--tile", o->tile, "Tile b_m x b_n")->capture_default_str();
  c->add_option("--l1-cols", o->l1_cols, "Output columns of one L1 tile (default b_n, SPEC §5; the xstage kernel: 2*b_n)");
  c->add_option("--l2-cols", o->l2_cols,
                "Output columns of one L2 tile (default b_n; the xstage kernel: 2*b_n where hidden % 512 == 0, W8A8/W4A8)");
  c->add_option("--precision", o->precision, "Weights: w8a8 (1 B) | w4a8 (0.5 B)")->capture_default_str();
  c->add_option("--tflops", o->tflops, "Dense fp8 tensor-core rate per GPU, TFLOP/s (default: the platform's)");
  c->add_option("--t-l1", o->t_l1, "Measured L1 tile mainloop (ns|us; plain = us); with --t-l2, replaces --tflops");
  c->add_option("--t-l2", o->t_l2, "Measured L2 tile mainloop (ns|us; plain = us)");
  c->add_option("--routing", o->routing, "balanced | skewed")->capture_default_str();
  c->add_option("--staging", o->staging, "Fixed epilogue staging cost in T_RS (ns|us; plain = us)")->capture_default_str();
  c->add_option("--min-gain", o->min_gain, "Interleave only if it cuts the stall per L2 tile by this fraction of T_L2")
      ->capture_default_str();
  c->add_option("--lead", o->lead, "Lead D to use (0: D_knee)")->capture_default_str();
  c->add_option("--seed", o->seed, "Seed of the skewed routing the simulator draws (P = 1)")->capture_default_str();
  c->add_flag("--no-sim", o->no_sim, "P = 1: do not run the discrete-event simulator (auto then keeps Expert-Wave)");
  c->add_flag("--json", o->json, "Print JSON");
  c->callback([o] {
    auto p = Platform::load(o->platform);
    double rate_per_sm = 0;
    auto q = order_query(p, *o, rate_per_sm);
    if (q.world == 1 && !o->no_sim) {
      // auto at P = 1 follows the simulator (order_choice.hpp): both orders at the lead auto would run, the
      // kernel's staging slots (W8A8 1, W4A8 2), this tensor rate (or the one the measured L1 mainloop implies).
      const int l1_cols = q.l1_cols > 0 ? q.l1_cols : q.b_n;
      const double rate = rate_per_sm > 0 ? rate_per_sm : 2.0 * q.b_m * l1_cols * double(q.hidden) / q.t_l1_mma;
      q = xstage::moe::with_simulated_orders(p, q, q.weight_bytes < 1 ? 2 : 1, parse_seed(o->seed, "--seed"), rate);
    }
    const auto ch = xstage::moe::choose_moe_order(p, q);
    if (o->json) {
      auto j = ch.to_json();
      j["platform"] = p.name;
      j["shape"] = o->sh.shape;
      j["rate_per_sm_TFLOPs"] = rate_per_sm / 1e12;
      std::cout << j.dump(2) << "\n";
      return;
    }
    const auto& r = ch.query;
    std::ostringstream os;
    print_platform_summary(os, p);
    os << "layer " << (o->sh.shape.empty() ? std::string("(custom)") : o->sh.shape) << ": hidden " << r.hidden << ", h_inter "
       << r.inter << ", " << r.experts << " experts (" << ch.local_experts << " per rank), top-" << r.topk << ", "
       << r.tokens << " tokens per rank, P = " << r.world << ", " << o->precision << " (" << fmt(r.weight_bytes, 1)
       << " B per weight), " << xstage::moe::to_string(r.routing) << " routing\n"
       << "tiles " << r.b_m << "x" << r.b_n << ", L1 / L2 tiles of " << r.l1_cols << " / " << r.l2_cols << " columns: "
       << ch.n1_per_row << " L1 / "
       << ch.n2_per_row << " L2 tiles per row, " << ch.rows_per_expert << " rows per expert ("
       << fmt(ch.tokens_per_expert, 1) << " tokens); K = " << r.sms << " CTAs per rank; T_L1 = " << us(r.t_l1_mma)
       << " us, T_L2 = " << us(r.t_l2_mma) << " us"
       << (rate_per_sm > 0 ? " (" + fmt(rate_per_sm / 1e12, 2) + " TFLOP/s per SM)" : std::string(" (given)")) << "\n";
    if (r.world > 1) {
      os << "combine burst per L2 tile: B = " << fmt(ch.tile_rows, 1) << " rows x " << r.l2_cols << " x " << r.out_bytes
         << " B = " << fmt(ch.B, 0) << " B per CTA, V = K*B*(P-1)/P = " << mb(ch.wave.V) << " MB; T_iss^0 = "
         << us(ch.wave.tiss0, 3) << " us, V/R = " << us(ch.wave.V / ch.wave.R) << " us, q_peak " << mb(ch.wave.q_peak)
         << " MB vs Q " << mb(ch.wave.Q) << " MB\n";
      Table t({"order", "G us", "V/(T0+G) GB/s", "rate ok", "dT_iss us", "T_RS us", "cover us", "stall us/L2 tile"});
      t.row({"expert-wave", us(ch.wave.spec.G), gbps(ch.wave.offered_rate), yes(ch.wave.rate_ok), us(ch.wave.delta_tiss),
             us(ch.t_rs_wave), us(r.t_l2_mma), fmt(ch.predicted_stall_wave_us, 2)});
      t.row({"interleaved", us(ch.g_int), gbps(ch.interleaved.offered_rate), yes(ch.interleaved.rate_ok),
             us(ch.interleaved.delta_tiss), us(ch.t_rs_int), us(r.t_l1_mma), fmt(ch.predicted_stall_interleaved_us, 2)});
      t.print(os);
    }
    if (r.sim_wave_s > 0)
      os << "simulated layer (P = 1, discrete-event simulator): expert-wave " << us(r.sim_wave_s) << " us, interleaved "
         << us(r.sim_interleaved_s) << " us, expert-wave with lagged waves " << us(r.sim_wave_lag_s)
         << " us, interleaved with every Linear-1 tile first " << us(r.sim_interleaved_all_s) << " us\n";
    os << "working set: interleaved (D = " << ch.lead << ") " << ch.rows_in_flight << " rows in flight -> "
       << ch.experts_in_flight << " experts x " << mb(ch.expert_weight_bytes) << " MB = "
       << mb(ch.weight_working_set_bytes) << " MB; expert-wave (default wave of " << ch.default_experts_per_wave
       << " experts, W1) " << mb(ch.working_set_wave_bytes) << " MB; L2 " << mb(r.l2_bytes) << " MB\n"
       << "choice: " << xstage::moe::to_string(ch.order) << (ch.wave_lag ? " with lagged waves" : "")
       << (ch.l1_first ? " with every Linear-1 tile first" : "") << ", lead "
       << ch.lead << ", experts_per_wave " << ch.experts_per_wave << " (0: the kernel's default)\n"
       << "reason: " << ch.reason << "\n";
    std::cout << os.str();
  });
}

// ---------------------------------------------------------------- design moe-bound (the two floors)
struct BoundOpts {
  ShapeOpts sh;
  std::string platform = "h200-nvlink4", tokens = "8192", P = "1",
              precision = "w8a8", routing = "balanced", seed = "1", tflops, hbm;
  bool json = false;
};

void add_moe_bound(CLI::App* des) {
  auto o = std::make_shared<BoundOpts>();
  auto* c = des->add_subcommand(
      "moe-bound", "The two floors of a MoE layer call per rank: its FLOPs at the tensor-core rate and its "
                   "unavoidable bytes at the HBM rate (memory- or compute-bound; xstage/moe/layer_bound.hpp)");
  c->add_option("--platform", o->platform, "Preset name or platform JSON file (its measured rates)")->capture_default_str();
  add_shape_options(c, o->sh);
  c->add_option("--tokens", o->tokens, "Tokens per rank")->capture_default_str();
  c->add_option("-P,--world-size,--world", o->P, "Ranks (EP degree); the experts are split evenly")->capture_default_str();
  c->add_option("--precision", o->precision, "w8a8 | w4a8 | bf16")->capture_default_str();
  c->add_option("--routing", o->routing, "balanced | skewed (bench_moe's routing of --seed)")->capture_default_str();
  c->add_option("--seed", o->seed, "bench_moe's --seed: the same routing its tables timed")->capture_default_str();
  c->add_option("--tflops", o->tflops, "Tensor-core rate per GPU, TFLOP/s (default: the platform's, fp8 or bf16)");
  c->add_option("--hbm-tbps", o->hbm, "HBM read rate per GPU, TB/s (default: the platform's memory_tbps.hbm_read)");
  c->add_flag("--json", o->json, "Print JSON");
  c->callback([o] {
    const Platform p = Platform::load(o->platform);
    const xstage::moe::MoeShape s = resolve_shape(o->sh);
    const int T = parse_count(o->tokens, "--tokens"), P = parse_count(o->P, "-P");
    XSTAGE_REQUIRE(T >= 1, "--tokens must be >= 1, got ", T);
    XSTAGE_REQUIRE(P >= 1 && s.experts % P == 0, "-P ", P, " does not divide ", s.experts, " experts");
    XSTAGE_REQUIRE(o->precision == "w8a8" || o->precision == "w4a8" || o->precision == "bf16",
                   "--precision must be w8a8, w4a8 or bf16, got '", o->precision, "'");
    const auto wf = o->precision == "w8a8"   ? xstage::moe::WeightFormat::kFp8
                    : o->precision == "w4a8" ? xstage::moe::WeightFormat::kInt4
                                             : xstage::moe::WeightFormat::kBf16;
    double flops_rate = parse_rate(o->tflops, "--tflops", "TFLOP/s") * 1e12;
    if (flops_rate == 0) flops_rate = o->precision == "bf16" ? p.tc_bf16 : p.tc_fp8;
    XSTAGE_REQUIRE(flops_rate > 0, "platform '", p.name, "' records no ", o->precision == "bf16" ? "bf16" : "fp8",
                   " tensor-core rate; give --tflops");
    double hbm = parse_rate(o->hbm, "--hbm-tbps", "TB/s") * 1e12;
    if (hbm == 0) hbm = p.hbm_read;
    XSTAGE_REQUIRE(hbm > 0, "platform '", p.name, "' records no HBM read rate (memory_tbps.hbm_read); give --hbm-tbps");
    const auto kind = xstage::moe::parse_routing_kind(o->routing);
    const auto r = xstage::moe::generate_routing(
        {P, T, s.experts, s.topk, kind, 1.0, xstage::moe::harness_routing_seed(parse_seed(o->seed, "--seed"), T, kind)});
    const auto work = xstage::moe::rank_work(s, wf, r);
    // The layer's floor is its slowest rank's (a rank with no rows still reads its tokens: its floors stay positive).
    std::vector<xstage::moe::LayerBound> bounds;
    for (const auto& w : work)
      bounds.push_back(xstage::moe::make_layer_bound(std::max(w.flops, 1.0) / flops_rate * 1e3,
                                                     std::max<double>(double(w.bytes.total()), 1.0) / hbm * 1e3));
    size_t worst = 0;
    for (size_t i = 1; i < bounds.size(); ++i)
      if (bounds[i].bound_ms() > bounds[worst].bound_ms()) worst = i;
    const auto& w = work[worst];
    const auto& b = bounds[worst];
    if (o->json) {
      nlohmann::json j = {{"platform", p.name}, {"shape", std::string(s.name)}, {"hidden", s.hidden}, {"inter", s.inter},
                          {"experts", s.experts}, {"topk", s.topk}, {"tokens_per_rank", T}, {"world", P},
                          {"precision", o->precision}, {"routing", o->routing}, {"tflops", flops_rate / 1e12},
                          {"hbm_tbps", hbm / 1e12}, {"rank", w.rank}, {"rows", w.rows}, {"flops", w.flops},
                          {"experts_read", w.bytes.experts_read}, {"weight_bytes", double(w.bytes.weights)},
                          {"min_bytes", double(w.bytes.total())}, {"compute_ms", b.compute_ms},
                          {"memory_ms", b.memory_ms}, {"bound_ms", b.bound_ms()}, {"bound_by", b.bound_by()}};
      std::cout << j.dump(2) << "\n";
      return;
    }
    std::ostringstream os;
    os << "layer " << s.name << ": hidden " << s.hidden << ", inter " << s.inter << ", " << s.experts << " experts (" << s.experts / P
       << " per rank), top-" << s.topk << ", " << T << " tokens per rank, P = " << P << ", " << o->precision << ", "
       << o->routing << " routing; rates (" << p.name << "): " << fmt(flops_rate / 1e12, 0) << " TFLOP/s, HBM read "
       << fmt(hbm / 1e12, 2) << " TB/s\n";
    os << "rank " << w.rank << (P > 1 ? " (the slowest)" : "") << ": " << w.rows << " routed rows, " << w.bytes.experts_read
       << " of its experts read; FLOPs " << fmt(w.flops / 1e12, 3) << " T -> " << fmt(b.compute_ms, 3) << " ms; bytes "
       << fmt(double(w.bytes.total()) / 1e9, 3) << " GB (weights " << fmt(double(w.bytes.weights) / 1e9, 3) << ") -> "
       << fmt(b.memory_ms, 3) << " ms\n";
    os << "floor: " << fmt(b.bound_ms(), 3) << " ms, " << b.bound_by() << "-bound; 0.60 of the tensor-core ceiling ("
       << fmt(b.compute_ms / 0.6, 3) << " ms) is " << fmt(b.fraction(b.compute_ms / 0.6), 3) << " of this floor\n";
    std::cout << os.str();
  });
}

void add_design(CLI::App& app) {
  auto* des = app.add_subcommand("design", "Design test (piggyback or reshape) for a kernel's remote-store bursts");
  des->require_subcommand(1);
  add_moe_order(des);
  add_moe_bound(des);
  auto plat = std::make_shared<std::string>("h200-nvlink4");
  auto json = std::make_shared<bool>(false);

  auto* moe = des->add_subcommand("moe", "MegaMoE combine bursts: Expert-Wave vs interleaved schedule");
  auto mo = std::make_shared<MoeOpts>();
  add_moe_options(moe, *mo);
  moe->add_option("--platform", *plat, "Preset name or platform JSON file")->capture_default_str();
  moe->add_flag("--json", *json, "Print JSON");
  moe->callback([mo, plat, json] {
    auto p = Platform::load(*plat);
    auto d = design_moe(p, moe_config(*mo));
    if (*json) {
      std::cout << d.to_json().dump(2) << "\n";
      return;
    }
    std::ostringstream os;
    print_platform_summary(os, p);
    os << assumption(d.wave) << "MMA rate per SM " << fmt(d.rate_per_sm / 1e12, 2) << " TFLOP/s (" << d.cfg.dtype
       << "); combine tile B = " << fmt(d.B, 0) << " B; D_knee = " << d.d_knee << "\n";
    print_moe(os, {d});
    os << "verdict: " << d.verdict << ": " << d.reason << "\n" << capacity_caveat(d.wave);
    std::cout << os.str();
  });

  auto* att = des->add_subcommand("attention", "FlashAttention fused with the post-attention Ulysses all-to-all");
  auto ao = std::make_shared<AttnOpts>();
  add_attn_options(att, *ao);
  att->add_option("--platform", *plat, "Preset name or platform JSON file")->capture_default_str();
  att->add_flag("--json", *json, "Print JSON");
  att->callback([ao, plat, json] {
    auto p = Platform::load(*plat);
    auto ds = attn_designs(p, *ao);
    if (*json) {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& d : ds) j.push_back(d.to_json());
      std::cout << j.dump(2) << "\n";
      return;
    }
    std::ostringstream os;
    print_platform_summary(os, p);
    os << assumption(ds.front().test);
    print_attn(os, ds);
    os << capacity_caveat(ds.front().test);
    std::cout << os.str();
  });

  auto* paper = des->add_subcommand("paper", "The paper's two kernels on a platform: MegaMoE combine bursts "
                                             "(fine-grained experts) and FlashAttention-A2A at M = 8K..64K");
  auto pp = std::make_shared<std::string>();
  auto ptf = std::make_shared<std::string>(), patf = std::make_shared<std::string>();
  paper->add_option("--platform", *plat, "Preset name or platform JSON file")->capture_default_str();
  paper->add_option("-P,--world-size", *pp, "World size P (default: the platform's)");
  paper->add_option("--tflops", *ptf, "MoE dense fp8 tensor-core rate per GPU, TFLOP/s (default: the platform's)");
  paper->add_option("--attn-tflops", *patf, "Attention rate per GPU, TFLOP/s (default: the platform's)");
  paper->add_flag("--json", *json, "Print JSON");
  paper->callback([plat, pp, ptf, patf, json] {
    auto p = Platform::load(*plat);
    std::vector<MoeDesign> moes;
    for (auto o : paper_moe_shapes()) {
      o.P = *pp;
      o.tflops = *ptf;
      moes.push_back(design_moe(p, moe_config(o)));
    }
    AttnOpts ao;
    ao.P = *pp;
    ao.tflops = *patf;
    ao.tflops_name = "--attn-tflops";
    auto atts = attn_designs(p, ao);
    if (*json) {
      nlohmann::json j = {{"platform", p.to_json()}, {"gpu_used", false}, {"moe", nlohmann::json::array()},
                          {"attention", nlohmann::json::array()}};
      for (const auto& d : moes) j["moe"].push_back(d.to_json());
      for (const auto& d : atts) j["attention"].push_back(d.to_json());
      std::cout << j.dump(2) << "\n";
      return;
    }
    std::ostringstream os;
    os << "X-Stage design test on platform " << p.name << " (model only: no GPU was used)\n";
    print_platform_summary(os, p);
    os << "provenance: " << p.provenance.machine << ", " << p.provenance.date << ", " << p.provenance.source << "\n"
       << assumption(moes.front().wave) << "\n"
       << "1) MegaMoE combine bursts (Linear-2 epilogue remote stores, " << moes.front().cfg.b_m << "x"
       << moes.front().cfg.b_n << " tiles, " << moes.front().cfg.dtype << " MMA at "
       << fmt(moes.front().rate_per_sm / 1e12, 2) << " TFLOP/s per SM, bf16 output, "
       << moes.front().cfg.tokens << " tokens per rank, balanced routing)\n";
    print_moe(os, moes);
    for (const auto& d : moes) os << "  " << d.cfg.name << ": " << d.verdict << ": " << d.reason << "\n";
    os << "\n2) FlashAttention-A2A (piggyback candidate), bf16, d = 128\n";
    print_attn(os, atts);
    os << capacity_caveat(atts.front().test);
    std::cout << os.str();
  });
}

// ---------------------------------------------------------------- fit
void add_fit(CLI::App& app) {
  struct Opts {
    std::string csv, out, name = "fitted", machine, date, command, note, path = "st", pattern = "p2p",
                                            producer = "cta";
    int bursts = 64, world_size = 0, sm_count = 0;
    bool json = false, errors = false;
  };
  auto o = std::make_shared<Opts>();
  auto* c = app.add_subcommand("fit", "Fit a platform M_X (R, T_iss^0(K,V), Q(K)) from a sample CSV (docs/CSV.md)");
  c->add_option("csv", o->csv, "Sample CSV")->required();
  c->add_option("-o,--out", o->out, "Write the fitted platform JSON here (a symlink: its target)");
  c->add_option("--name", o->name, "Name of the fitted platform")->capture_default_str();
  c->add_option("--machine", o->machine, "Provenance: machine");
  c->add_option("--date", o->date, "Provenance: date of the measurement");
  c->add_option("--command", o->command, "Provenance: command that produced the CSV");
  c->add_option("--note", o->note, "Provenance: note");
  c->add_option("--bursts", o->bursts, "Bursts per run when the CSV has no bursts column")->capture_default_str();
  c->add_option("--sm-count", o->sm_count, "SMs of the GPU (default: the largest K in the CSV)");
  c->add_option("--world-size", o->world_size, "Ranks of the calibration run (0: not recorded)");
  c->add_option("--store-path", o->path, "Which store path to fit: st | tma")->capture_default_str();
  c->add_option("--pattern", o->pattern, "Which pattern to fit: p2p | a2a")->capture_default_str();
  c->add_option("--producer", o->producer, "Which producer to fit: cta | warp")->capture_default_str();
  c->add_flag("--errors", o->errors, "Print the prediction error of every point");
  c->add_flag("--json", o->json, "Print JSON");
  c->callback([o] {  // (an empty -o is refused by name before this: main.cpp's refuse_empty_values)
    XSTAGE_REQUIRE(o->bursts > 0, "--bursts must be positive, got ", o->bursts);
    XSTAGE_REQUIRE(o->sm_count >= 0, "--sm-count must be positive, got ", o->sm_count);
    XSTAGE_REQUIRE(o->world_size >= 0, "--world-size must be >= 0, got ", o->world_size);
    std::error_code same_ec;
    XSTAGE_REQUIRE(o->out.empty() || !std::filesystem::equivalent(o->csv, o->out, same_ec), "-o ", o->out,
                   " is the input CSV ", o->csv, ": the platform file would replace the measurements");
    auto samples = read_samples_csv(o->csv, o->bursts);
    FitOptions fo;
    fo.default_bursts = o->bursts;
    fo.path = o->path;
    fo.pattern = o->pattern;
    fo.producer = o->producer;
    fo.name = o->name;
    fo.sm_count = o->sm_count;
    fo.world_size = o->world_size;
    Provenance pv{o->machine, o->date, o->command.empty() ? "xstage fit " + o->csv : o->command, "calibration fit",
                  o->note.empty() ? "fitted from " + o->csv : o->note};
    auto rep = fit_platform(samples, fo, pv);
    if (!o->out.empty()) rep.platform.save(o->out);
    if (o->json) {
      std::cout << rep.to_json().dump(2) << "\n";
      return;
    }
    const auto& p = rep.platform;
    std::ostringstream os;
    os << "fit of " << o->csv << " (" << samples.size() << " samples)\n"
       << "R        = " << gbps(p.R) << " GB/s  (" << rep.r_points_used << " zero-gap points, " << rep.r_points_rejected
       << " rejected; wall-time fit rel. RMSE " << fmt(100 * rep.r_fit_rel_rmse, 1) << " %, launch overhead "
       << us(rep.launch_overhead) << " us)\n";
    for (const auto& q : p.q_table) {
      std::string lhs = "Q(" + std::to_string(q.K) + ")";
      os << lhs << std::string(lhs.size() < 9 ? 9 - lhs.size() : 0, ' ') << "= " << mb(q.Q, 3) << " MB\n";
    }
    os << "Q fit: " << rep.q_points_used << " isolated points past the knee, T_iss rel. RMSE "
       << fmt(100 * rep.q_fit_rel_rmse, 1) << " %\n";
    for (int K : {p.sm_count})
      os << "T_iss^0(K=" << K << ", B=32KB) = " << us(p.tiss0(K, K * 32768.0), 3) << " us\n";
    os << "T_iss^0(K, V) table (one source per K row: gap plateaus of periodic bursts, else the isolated floor):\n";
    Table t({"K", "V MB", "T_iss^0 us", "measured us", "source", "points"});
    auto src = rep.tiss0_sources;
    std::sort(src.begin(), src.end(), [](auto& a, auto& b) { return a.K != b.K ? a.K < b.K : a.V < b.V; });
    int apart = 0;
    for (const auto& e : src) {
      if (!e.in_table) {
        ++apart;
        continue;
      }
      t.row({std::to_string(e.K), mb(e.V, 3), us(e.tiss0, 4), us(e.measured, 4), e.source, std::to_string(e.points)});
    }
    t.print(os);
    if (apart)
      os << "(" << apart << " isolated floor points kept out of rows that have gap plateaus; --json lists them)\n";
    os << "out of sample (points not used to fit T_iss^0 or Q), R, T_iss^0, Q fixed (|pred - meas| / meas):\n"
       << "  gap sweep, period, measured G:   " << rep.gap_period_oos.text() << "\n"
       << "  gap sweep, period, requested G:  " << rep.gap_period_oos_req.text() << "\n"
       << "  gap sweep, T_iss, measured G:    " << rep.gap_tiss_oos.text() << "\n"
       << "  gap sweep, T_iss, requested G:   " << rep.gap_tiss_oos_req.text() << "\n"
       << "  isolated bursts (T_iss):         " << rep.iso_oos.text() << "\n"
       << "in sample (the plateau points behind T_iss^0, the floor and Q points): gap period "
       << rep.gap_period_in.text() << "; isolated " << rep.iso_in.text() << "\n";
    os << "every point, in and out of sample (|pred - meas| / meas):\n"
       << "  gap sweep, period:             median " << fmt(100 * rep.gap_period_median_err, 1) << " %, max "
       << fmt(100 * rep.gap_period_max_err, 1) << " %\n"
       << "  gap sweep, T_iss:              median " << fmt(100 * rep.gap_tiss_median_err, 1) << " %, max "
       << fmt(100 * rep.gap_tiss_max_err, 1) << " % (max |error| " << fmt(rep.gap_tiss_max_abs_err * 1e6, 2)
       << " us)\n"
       << "  isolated bursts (T_iss):       median " << fmt(100 * rep.iso_median_err, 1) << " %, max "
       << fmt(100 * rep.iso_max_err, 1) << " %\n"
       << "  zero-gap per-producer periods:  median " << fmt(100 * rep.zerogap_median_err, 1) << " %, max "
       << fmt(100 * rep.zerogap_max_err, 1) << " % (per-producer clocks; biased for K < SMs, see docs/MODEL.md)\n";
    if (o->errors) {
      Table e({"line", "mode", "K", "B", "G us", "quantity", "measured us", "model us", "error %"});
      for (const auto& x : rep.errors)
        e.row({std::to_string(x.sample.line), x.sample.mode, std::to_string(x.sample.K), fmt(x.sample.B, 0),
               fmt(x.sample.gap_ns / 1e3, 1), x.quantity, us(x.measured, 3), us(x.predicted, 3),
               fmt(100 * x.rel_err, 1)});
      e.print(os);
    }
    os << "notes:\n";
    for (const auto& n : rep.notes) os << "  " << n << "\n";
    if (!o->out.empty()) os << "wrote " << o->out << "\n";
    std::cout << os.str();
  });
}

}  // namespace

void register_model_commands(CLI::App& app) {
  add_platform(app);
  add_eval(app);
  add_design(app);
  add_fit(app);
}

}  // namespace xstage::cli
