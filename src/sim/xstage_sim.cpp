// The X-Stage discrete-event simulator (include/xstage/sim/xstage_sim.hpp, docs/SIMULATOR.md).
//
// Time advances from event to event. Discrete events (a mainloop ends, an epilogue's local work ends)
// sit in a priority queue. Between them the store fabric is a fluid with piecewise-constant rates:
// each issuing producer i has its own no-backpressure rate rho_i = b_i / t0(b_i); the outstanding
// volume q grows at sum(rho) - R (never below 0); once q reaches Q with sum(rho) > R, issue is scaled by
// s = R / sum(rho) and q stays at Q. Because every issuer is scaled by the same s, a virtual clock tau
// (d tau = s dt) finishes issuer i exactly when tau reaches tau_start_i + t0_i, so the fluid events are:
// the smallest such finish, and q reaching Q.
#include "xstage/sim/xstage_sim.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>

#include "xstage/common/error.hpp"
#include "xstage/model/platform.hpp"

namespace xstage::sim {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kEpsT = 1e-13;  // s: events closer than this are simultaneous (0.1 ps)
constexpr double kEpsQ = 1e-3;   // bytes: q within this of Q counts as full

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

enum class Ev { MmaEnd, EpiLocalEnd };

struct Event {
  double t;
  long long seq;  // FIFO among equal times: deterministic
  Ev type;
  int producer;
  int tile;  // global tile index
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

struct Issuer {
  double tau_fin;
  double rho;
  int producer;
  int tile;
  bool operator>(const Issuer& o) const { return tau_fin != o.tau_fin ? tau_fin > o.tau_fin : tile > o.tile; }
};

class Engine {
 public:
  Engine(const SimConfig& cfg, const std::vector<std::vector<SimTile>>& prods) : cfg_(cfg), prods_(prods) {}

  SimResult run();

 private:
  void validate();
  void try_start_mma(int p, double now);
  void try_start_epi(int p, double now);
  void start_issue(int p, int i, double now);
  void finish_epi(int p, int i, double now);
  bool saturated() const {
    return std::isfinite(cfg_.R) && std::isfinite(cfg_.Q) && sum_rho_ > cfg_.R && q_ >= cfg_.Q - kEpsQ;
  }
  double next_fluid_dt();
  void advance(double dt);
  void push(double t, Ev type, int p, int i) { events_.push({t, seq_++, type, p, i}); }

  const SimConfig& cfg_;
  const std::vector<std::vector<SimTile>>& prods_;
  int P_ = 0;
  std::vector<int> base_;  // global index of producer p's first tile
  std::vector<const SimTile*> tile_;
  std::vector<TileRecord> rec_;
  std::vector<char> mma_done_, epi_done_;
  std::vector<int> mma_next_, epi_next_, waiting_on_;
  std::vector<char> mma_busy_, epi_busy_;
  std::vector<double> mma_free_at_;
  std::vector<int> group_of_produce_, group_of_wait_;  // dense group ids per tile (-1: none)
  std::vector<int> group_need_, group_have_;
  std::vector<double> group_done_at_;
  std::vector<std::vector<int>> group_waiters_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  std::priority_queue<Issuer, std::vector<Issuer>, std::greater<Issuer>> issuers_;
  long long seq_ = 0;
  double tau_ = 0, q_ = 0, sum_rho_ = 0, peak_q_ = 0;
  bool next_is_saturation_ = false;  // the next fluid event is q reaching Q
  int active_ = 0;
};

void Engine::validate() {
  XSTAGE_REQUIRE(!prods_.empty(), "simulate: need at least one producer");
  XSTAGE_REQUIRE(cfg_.R > 0, "simulate: drain rate R must be positive, got ", cfg_.R);
  XSTAGE_REQUIRE(cfg_.Q >= 0, "simulate: outstanding capacity Q must be >= 0, got ", cfg_.Q);
  XSTAGE_REQUIRE(cfg_.staging_depth >= 1, "simulate: staging depth must be >= 1, got ", cfg_.staging_depth);
  for (size_t p = 0; p < prods_.size(); ++p)
    for (size_t i = 0; i < prods_[p].size(); ++i) {
      const SimTile& t = prods_[p][i];
      auto ok = [](double x) { return std::isfinite(x) && x >= 0; };
      XSTAGE_REQUIRE(ok(t.mma_time), "simulate: producer ", p, " tile ", i, ": mma_time must be finite and >= 0, got ",
                     t.mma_time);
      XSTAGE_REQUIRE(ok(t.epi_time), "simulate: producer ", p, " tile ", i, ": epi_time must be finite and >= 0, got ",
                     t.epi_time);
      XSTAGE_REQUIRE(ok(t.remote_bytes), "simulate: producer ", p, " tile ", i,
                     ": remote_bytes must be finite and >= 0, got ", t.remote_bytes);
      if (t.remote_bytes > 0) XSTAGE_REQUIRE(bool(cfg_.tiss0), "simulate: remote bytes given but no T_iss^0 model");
    }
}

double Engine::next_fluid_dt() {
  next_is_saturation_ = false;
  if (active_ == 0) return kInf;
  const bool sat = saturated();
  const double s = sat ? cfg_.R / sum_rho_ : 1.0;
  double dt = std::max(0.0, (issuers_.top().tau_fin - tau_) / s);
  if (!sat && std::isfinite(cfg_.R) && std::isfinite(cfg_.Q) && sum_rho_ > cfg_.R) {
    const double dt_sat = std::max(0.0, (cfg_.Q - q_) / (sum_rho_ - cfg_.R));
    if (dt_sat < dt) {
      dt = dt_sat;
      next_is_saturation_ = true;
    }
  }
  return dt;
}

void Engine::advance(double dt) {
  if (dt <= 0) return;
  if (!std::isfinite(cfg_.R)) {  // local-like: nothing ever waits in the fabric
    tau_ += dt;
    return;
  }
  if (saturated()) {
    tau_ += cfg_.R / sum_rho_ * dt;
    q_ = cfg_.Q;
  } else {
    tau_ += dt;
    q_ = std::max(0.0, q_ + (sum_rho_ - cfg_.R) * dt);
    if (std::isfinite(cfg_.Q) && q_ > cfg_.Q - kEpsQ && sum_rho_ > cfg_.R) q_ = cfg_.Q;  // reached the cap
  }
  peak_q_ = std::max(peak_q_, q_);
}

void Engine::try_start_mma(int p, double now) {
  if (mma_busy_[p] || mma_next_[p] == int(prods_[p].size())) return;
  const int local = mma_next_[p];
  const int i = base_[p] + local;
  const int g = group_of_wait_[i];
  if (g >= 0 && group_have_[g] < group_need_[g]) {
    if (waiting_on_[p] != g) {
      waiting_on_[p] = g;
      group_waiters_[g].push_back(p);
    }
    return;
  }
  waiting_on_[p] = -1;
  if (local >= cfg_.staging_depth && !epi_done_[i - cfg_.staging_depth]) return;  // retried on slot release
  // Attribute the idle time since the previous mainloop: first to the dependency, then to the slot.
  const double free_at = mma_free_at_[p];
  const double dep_at = g >= 0 ? group_done_at_[g] : 0.0;
  const double ready = std::max(free_at, dep_at);
  TileRecord& r = rec_[i];
  r.starvation = std::max(0.0, std::min(now, dep_at) - free_at);
  r.mma_stall = std::max(0.0, now - ready);
  r.mma_start = now;
  r.mma_end = now + tile_[i]->mma_time;
  mma_busy_[p] = 1;
  push(r.mma_end, Ev::MmaEnd, p, i);
}

void Engine::try_start_epi(int p, double now) {
  if (epi_busy_[p] || epi_next_[p] == int(prods_[p].size())) return;
  const int i = base_[p] + epi_next_[p];
  if (!mma_done_[i]) return;
  epi_busy_[p] = 1;
  rec_[i].epi_start = now;
  push(now + tile_[i]->epi_time, Ev::EpiLocalEnd, p, i);
}

void Engine::start_issue(int p, int i, double now) {
  TileRecord& r = rec_[i];
  r.issue_start = now;
  if (r.bytes <= 0) {
    finish_epi(p, i, now);
    return;
  }
  const double t0 = cfg_.tiss0(r.bytes);
  XSTAGE_REQUIRE(std::isfinite(t0) && t0 > 0, "simulate: T_iss^0 of a ", r.bytes,
                 "-byte burst must be finite and positive, got ", t0);
  r.tiss0 = t0;
  const double rho = r.bytes / t0;
  issuers_.push({tau_ + t0, rho, p, i});
  sum_rho_ += rho;
  ++active_;
}

void Engine::finish_epi(int p, int i, double now) {
  TileRecord& r = rec_[i];
  r.issue_end = now;
  epi_done_[i] = 1;
  epi_busy_[p] = 0;
  ++epi_next_[p];
  const int g = group_of_produce_[i];
  if (g >= 0 && ++group_have_[g] == group_need_[g]) {
    group_done_at_[g] = now;
    std::vector<int> waiters;
    waiters.swap(group_waiters_[g]);
    for (int w : waiters) try_start_mma(w, now);
  }
  try_start_mma(p, now);  // a staging slot was released
  try_start_epi(p, now);
}

SimResult Engine::run() {
  validate();
  P_ = int(prods_.size());
  base_.assign(P_ + 1, 0);
  for (int p = 0; p < P_; ++p) base_[p + 1] = base_[p] + int(prods_[p].size());
  const int N = base_[P_];
  tile_.resize(N);
  rec_.resize(N);
  mma_done_.assign(N, 0);
  epi_done_.assign(N, 0);
  group_of_produce_.assign(N, -1);
  group_of_wait_.assign(N, -1);
  std::map<int, int> dense;  // user group id -> dense id
  for (int p = 0; p < P_; ++p)
    for (int k = 0; k < int(prods_[p].size()); ++k) {
      const int i = base_[p] + k;
      tile_[i] = &prods_[p][k];
      rec_[i].producer = p;
      rec_[i].index = k;
      rec_[i].kind = tile_[i]->kind;
      rec_[i].bytes = tile_[i]->remote_bytes;
      if (tile_[i]->produces >= 0) {
        auto [it, fresh] = dense.emplace(tile_[i]->produces, int(dense.size()));
        if (fresh) group_need_.push_back(0);
        group_of_produce_[i] = it->second;
        ++group_need_[it->second];
      }
    }
  for (int i = 0; i < N; ++i)
    if (tile_[i]->waits >= 0) {
      auto it = dense.find(tile_[i]->waits);
      XSTAGE_REQUIRE(it != dense.end(), "simulate: producer ", rec_[i].producer, " tile ", rec_[i].index,
                     " waits for dependency group ", tile_[i]->waits, ", which no tile produces");
      group_of_wait_[i] = it->second;
    }
  group_have_.assign(group_need_.size(), 0);
  group_done_at_.assign(group_need_.size(), 0);
  group_waiters_.assign(group_need_.size(), {});
  mma_next_.assign(P_, 0);
  epi_next_.assign(P_, 0);
  waiting_on_.assign(P_, -1);
  mma_busy_.assign(P_, 0);
  epi_busy_.assign(P_, 0);
  mma_free_at_.assign(P_, 0);

  double now = 0, last_issue_end = 0;
  for (int p = 0; p < P_; ++p) try_start_mma(p, now);
  for (;;) {
    const double tf = now + next_fluid_dt();
    const double td = events_.empty() ? kInf : events_.top().t;
    const double tn = std::min(tf, td);
    if (!std::isfinite(tn)) break;
    if (tn <= now && next_is_saturation_) {
      // The remaining headroom fills in less time than `now` can resolve: q is at Q.
      q_ = cfg_.Q;
      peak_q_ = std::max(peak_q_, q_);
      continue;
    }
    advance(tn - now);
    now = tn;
    // Issuers whose last byte went out now (the virtual clock reached their finish).
    while (!issuers_.empty() && issuers_.top().tau_fin <= tau_ + kEpsT) {
      const Issuer is = issuers_.top();
      issuers_.pop();
      sum_rho_ -= is.rho;
      if (--active_ == 0) sum_rho_ = 0;  // no drift in the running sum
      last_issue_end = now;
      finish_epi(is.producer, is.tile, now);
    }
    while (!events_.empty() && events_.top().t <= now + kEpsT) {
      const Event e = events_.top();
      events_.pop();
      if (e.type == Ev::MmaEnd) {
        mma_busy_[e.producer] = 0;
        mma_free_at_[e.producer] = now;
        mma_done_[e.tile] = 1;
        ++mma_next_[e.producer];
        try_start_epi(e.producer, now);
        try_start_mma(e.producer, now);
      } else {
        start_issue(e.producer, e.tile, now);
        last_issue_end = now;
      }
    }
  }

  for (int p = 0; p < P_; ++p)
    if (epi_next_[p] < int(prods_[p].size())) {
      const int i = base_[p] + mma_next_[p];
      const int g = mma_next_[p] < int(prods_[p].size()) ? tile_[i]->waits : -1;
      throw UsageError(detail::concat(
          "simulate: the schedule deadlocks: producer ", p, " is stuck at tile ", mma_next_[p],
          g >= 0 ? detail::concat(" waiting for dependency group ", g,
                                  ", whose remaining tiles are scheduled behind waiting tiles")
                 : std::string(" (staging slot never released)")));
    }

  SimResult res;
  res.producers = P_;
  res.issue_end = last_issue_end;
  res.drain_end = std::isfinite(cfg_.R) ? last_issue_end + q_ / cfg_.R : last_issue_end;
  res.total_time = std::max(res.issue_end, res.drain_end);
  res.peak_outstanding = peak_q_;
  res.per_producer.resize(P_);
  for (int i = 0; i < N; ++i) {
    TileRecord& r = rec_[i];
    ProducerStats& ps = res.per_producer[r.producer];
    ps.mma_busy += tile_[i]->mma_time;
    ps.mma_stall += r.mma_stall;
    ps.starvation += r.starvation;
    ps.finish = std::max(ps.finish, r.issue_end);
  }
  for (const auto& ps : res.per_producer) {
    res.mma_stall_total += ps.mma_stall;
    res.starvation_total += ps.starvation;
    res.mma_stall_max = std::max(res.mma_stall_max, ps.mma_stall);
    res.starvation_max = std::max(res.starvation_max, ps.starvation);
  }
  std::map<int, std::vector<double>> tiss, trs;
  for (int i = 0; i < N; ++i) {
    const TileRecord& r = rec_[i];
    KindSummary& k = res.kinds[r.kind];
    k.tiles++;
    k.mma_time += tile_[i]->mma_time;
    k.mma_stall_before += r.mma_stall;
    k.starvation += r.starvation;
    if (r.bytes > 0) {
      k.bursts++;
      k.tiss0_mean += r.tiss0;
      tiss[r.kind].push_back(r.tiss());
      trs[r.kind].push_back(r.t_rs());
    }
  }
  for (auto& [kind, k] : res.kinds) {
    k.name = kind >= 0 && kind < int(cfg_.kind_names.size()) ? cfg_.kind_names[kind] : std::to_string(kind);
    if (k.bursts == 0) continue;
    const auto& a = tiss[kind];
    const auto& b = trs[kind];
    k.tiss0_mean /= k.bursts;
    for (double x : a) k.tiss_mean += x / k.bursts;
    for (double x : b) k.t_rs_mean += x / k.bursts;
    k.tiss_max = *std::max_element(a.begin(), a.end());
    k.t_rs_max = *std::max_element(b.begin(), b.end());
    k.tiss_median = median(a);
    k.t_rs_median = median(b);
  }
  std::vector<double> sum, cnt;
  for (int p = 0; p < P_; ++p) {
    size_t j = 0;
    for (int i = base_[p]; i < base_[p + 1]; ++i)
      if (rec_[i].bytes > 0) {
        if (sum.size() <= j) sum.resize(j + 1, 0), cnt.resize(j + 1, 0);
        sum[j] += rec_[i].tiss();
        cnt[j] += 1;
        ++j;
      }
  }
  for (size_t j = 0; j < sum.size(); ++j) res.burst_tiss.push_back(sum[j] / cnt[j]);
  res.tiles = std::move(rec_);
  return res;
}

}  // namespace

SimConfig SimConfig::from_platform(const model::Platform& p, int K, int staging_depth) {
  XSTAGE_REQUIRE(K > 0, "simulate: producer count K must be positive, got ", K);
  SimConfig c;
  c.R = p.R;
  c.Q = p.Q(K);
  c.staging_depth = staging_depth;
  c.tiss0 = [p, K](double bytes) { return p.tiss0(K, double(K) * bytes); };
  return c;
}

SimResult simulate(const SimConfig& cfg, const std::vector<std::vector<SimTile>>& producers) {
  return Engine(cfg, producers).run();
}

nlohmann::json SimResult::to_json(bool with_tiles) const {
  constexpr double us = 1e6;
  nlohmann::json j;
  j["producers"] = producers;
  j["total_time_us"] = total_time * us;
  j["issue_end_us"] = issue_end * us;
  j["drain_end_us"] = drain_end * us;
  j["peak_outstanding_bytes"] = peak_outstanding;
  j["mma_stall_total_us"] = mma_stall_total * us;
  j["mma_stall_mean_us"] = producers ? mma_stall_total / producers * us : 0.0;
  j["mma_stall_max_us"] = mma_stall_max * us;
  j["starvation_total_us"] = starvation_total * us;
  j["starvation_mean_us"] = producers ? starvation_total / producers * us : 0.0;
  j["starvation_max_us"] = starvation_max * us;
  nlohmann::json kj = nlohmann::json::array();
  for (const auto& [kind, k] : kinds)
    kj.push_back({{"kind", k.name},
                  {"tiles", k.tiles},
                  {"bursts", k.bursts},
                  {"mma_time_us", k.mma_time * us},
                  {"tiss_mean_us", k.tiss_mean * us},
                  {"tiss_median_us", k.tiss_median * us},
                  {"tiss_max_us", k.tiss_max * us},
                  {"tiss0_mean_us", k.tiss0_mean * us},
                  {"t_rs_mean_us", k.t_rs_mean * us},
                  {"t_rs_median_us", k.t_rs_median * us},
                  {"t_rs_max_us", k.t_rs_max * us},
                  {"mma_stall_us", k.mma_stall_before * us},
                  {"starvation_us", k.starvation * us}});
  j["kinds"] = kj;
  nlohmann::json bt = nlohmann::json::array();
  for (double x : burst_tiss) bt.push_back(x * us);
  j["burst_tiss_mean_us"] = bt;
  if (with_tiles) {
    nlohmann::json tj = nlohmann::json::array();
    for (const auto& r : tiles)
      tj.push_back({{"producer", r.producer}, {"index", r.index}, {"kind", r.kind},
                    {"mma_start_us", r.mma_start * us}, {"mma_end_us", r.mma_end * us},
                    {"starvation_us", r.starvation * us}, {"mma_stall_us", r.mma_stall * us},
                    {"epi_start_us", r.epi_start * us}, {"issue_start_us", r.issue_start * us},
                    {"issue_end_us", r.issue_end * us}, {"bytes", r.bytes}, {"tiss0_us", r.tiss0 * us}});
    j["tiles"] = tj;
  }
  return j;
}

}  // namespace xstage::sim
