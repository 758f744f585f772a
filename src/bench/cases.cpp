// The test cases: each builds its sweep from the device (SM count), the communicator (world size)
// and, for gap grids, the drain rate seen so far. Bench::run measures them all the same way.
#include <algorithm>
#include <cmath>

#include "calib.hpp"

namespace xstage::bench {
namespace {

constexpr uint32_t KiB = 1024;

std::vector<uint32_t> zerogap_B(bool quick) {
  if (quick) return {16 * KiB, 64 * KiB};
  return {4 * KiB, 8 * KiB, 16 * KiB, 32 * KiB, 64 * KiB, 128 * KiB};
}

// Isolated bursts: fine steps around the expected knee (the knee must be located within one step).
std::vector<uint32_t> isolated_B(bool quick) {
  if (quick) return {4 * KiB, 32 * KiB, 96 * KiB};
  std::vector<uint32_t> v;
  for (uint32_t b = 2; b <= 48; b += 2) v.push_back(b * KiB);
  for (uint32_t b : {56u, 64u, 80u, 96u, 112u, 128u}) v.push_back(b * KiB);
  return v;
}

// G grid in units of the burst's drain time V/R: recovery happens around G* = V/R − T_iss^0.
std::vector<double> gap_grid(double V, const SweepContext& ctx) {
  const double drain_ns = V / ctx.R_guess * 1e9;
  std::vector<double> g;
  const int steps = ctx.quick ? 6 : 16;
  for (int i = 0; i < steps; ++i) g.push_back(drain_ns * 1.5 * i / (steps - 1));
  return g;
}

// A recovery gap long enough that the previous burst has drained completely (2x its drain time + 5 us).
double recovery_gap(double V, const SweepContext& ctx) { return 2.0 * V / ctx.R_guess * 1e9 + 5000; }

struct Variant {
  std::string path = "st", pattern = "p2p", producer = "cta";
  std::string tag() const { return path + "_" + pattern + "_" + producer; }
  // One point of this variant's sweep.
  Config config(const char* mode, bool local, int K, uint32_t B, double gap_ns) const {
    Config c;
    c.mode = mode;
    c.local = local;
    c.path = path;
    c.pattern = pattern;
    c.producer = producer;
    c.K = K;
    c.B = B;
    c.gap_ns = gap_ns;
    return c;
  }
};

std::vector<int> producers(const Variant& v, const SweepContext& ctx, bool all_k) {
  if (v.producer == "warp") return {4 * ctx.sm_count};  // 4 warps per SM
  if (all_k) return k_sweep(ctx.sm_count);
  return {ctx.sm_count};
}

std::string common_skip(const Variant& v, const SweepContext& ctx) {
  if (ctx.world < 2) return "needs at least 2 ranks";
  if (v.producer == "warp" && v.path == "tma") return "TMA bulk stores are issued per CTA";
  return "";
}

class ZeroGap : public TestCase {
 public:
  ZeroGap(Variant v, bool all_k) : v_(std::move(v)), all_k_(all_k) {}
  std::string key() const override { return "zerogap_" + v_.tag(); }
  std::string description() const override {
    return "periodic bursts with G = 0 (drain-dominated steady state; gives R), " + v_.tag() +
           ", plus the local control at the largest K";
  }
  std::string skip_reason(const SweepContext& ctx) const override { return common_skip(v_, ctx); }
  std::vector<Config> configs(const SweepContext& ctx) const override {
    std::vector<Config> out;
    auto ks = producers(v_, ctx, all_k_);
    for (int K : ks)
      for (uint32_t B : zerogap_B(ctx.quick)) {
        if (v_.producer == "warp" && B > 32 * KiB) continue;
        for (bool local : {false, true}) {
          if (local && K != ks.back()) continue;
          out.push_back(v_.config("zerogap", local, K, B, 0));
        }
      }
    return out;
  }

 private:
  Variant v_;
  bool all_k_;
};

class GapSweep : public TestCase {
 public:
  GapSweep(Variant v, bool all_k) : v_(std::move(v)), all_k_(all_k) {}
  std::string key() const override { return "gap_" + v_.tag(); }
  std::string description() const override {
    return "periodic bursts, B = 8 KB (below the isolated knee) and 32 KB (above it on H200), sweep G from 0 "
           "to 1.5 V/R (recovery to the plateau), " + v_.tag() + ", with the local control on the same grid";
  }
  std::string skip_reason(const SweepContext& ctx) const override {
    if (ctx.R_guess <= 0) return "no zero-gap measurement to scale the gap grid";
    return common_skip(v_, ctx);
  }
  std::vector<Config> configs(const SweepContext& ctx) const override {
    std::vector<Config> out;
    auto ks = producers(v_, ctx, all_k_);
    for (uint32_t B : {8 * KiB, 32 * KiB})
    for (int K : ks)
      for (double g : gap_grid(static_cast<double>(K) * B, ctx))
        for (bool local : {false, true}) {
          if (local && K != ks.back()) continue;
          out.push_back(v_.config("gap", local, K, B, g));
        }
    return out;
  }

 private:
  Variant v_;
  bool all_k_;
};

class Isolated : public TestCase {
 public:
  Isolated(Variant v, bool all_k) : v_(std::move(v)), all_k_(all_k) {}
  std::string key() const override { return "isolated_" + v_.tag(); }
  std::string description() const override {
    return "isolated bursts after full recovery, sweep V = K*B (the knee gives Q(K)), " + v_.tag();
  }
  std::string skip_reason(const SweepContext& ctx) const override {
    if (ctx.R_guess <= 0) return "no zero-gap measurement to size the recovery gap";
    return common_skip(v_, ctx);
  }
  std::vector<Config> configs(const SweepContext& ctx) const override {
    std::vector<Config> out;
    for (int K : producers(v_, ctx, all_k_))
      for (uint32_t B : isolated_B(ctx.quick)) {
        if (v_.producer == "warp" && B > 32 * KiB) continue;
        Config c = v_.config("isolated", false, K, B, recovery_gap(static_cast<double>(K) * B, ctx));
        c.bursts = 6;
        out.push_back(c);
      }
    return out;
  }

 private:
  Variant v_;
  bool all_k_;
};

// Every ordered pair of ranks (P from the communicator): zero-gap drain rate per pair.
class Pairs : public TestCase {
 public:
  std::string key() const override { return "pairs_st_p2p_cta"; }
  std::string description() const override {
    return "periodic bursts with G = 0, K = SMs, B = 32 KB, for every ordered pair src -> dst (drain rate per pair)";
  }
  std::string skip_reason(const SweepContext& ctx) const override { return common_skip(Variant{}, ctx); }
  std::vector<Config> configs(const SweepContext& ctx) const override {
    std::vector<Config> out;
    for (int s = 0; s < ctx.world; ++s)
      for (int d = 0; d < ctx.world; ++d) {
        if (s == d || (s == 0 && d == 1)) continue;  // 0 -> 1 is measured by zerogap_st_p2p_cta
        Config c;
        c.mode = "zerogap";
        c.K = ctx.sm_count;
        c.B = ctx.quick ? 8 * KiB : 32 * KiB;
        c.src = s;
        c.dst = d;
        out.push_back(c);
      }
    return out;
  }
};

}  // namespace

std::vector<std::unique_ptr<TestCase>> all_cases() {
  std::vector<std::unique_ptr<TestCase>> v;
  // The fitted family (st, p2p, cta) over every K; the other store path, pattern and producer kind
  // at K = SMs (warps: 4 per SM) to compare drain rate and capacity.
  const Variant base{}, tma{"tma", "p2p", "cta"}, a2a{"st", "a2a", "cta"}, warp{"st", "p2p", "warp"};
  v.push_back(std::make_unique<ZeroGap>(base, true));
  v.push_back(std::make_unique<ZeroGap>(tma, false));
  v.push_back(std::make_unique<ZeroGap>(a2a, false));
  v.push_back(std::make_unique<ZeroGap>(warp, false));
  v.push_back(std::make_unique<Pairs>());
  v.push_back(std::make_unique<GapSweep>(base, true));
  v.push_back(std::make_unique<GapSweep>(tma, false));
  v.push_back(std::make_unique<GapSweep>(a2a, false));
  v.push_back(std::make_unique<Isolated>(base, true));
  v.push_back(std::make_unique<Isolated>(tma, false));
  v.push_back(std::make_unique<Isolated>(a2a, false));
  v.push_back(std::make_unique<Isolated>(warp, false));
  return v;
}

}  // namespace xstage::bench
