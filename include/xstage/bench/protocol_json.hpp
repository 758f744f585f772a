// JSON of a protocol Result, with the field names of python/xstage/bench_protocol.py's run_protocol()
// (docs/BENCHMARKING.md lists them). nullopt becomes null. Needs nlohmann_json.
#pragma once

#include <nlohmann/json.hpp>

#include "xstage/bench/protocol.hpp"

namespace xstage::bench {

inline nlohmann::json opt_json(const std::optional<double>& x) { return x ? nlohmann::json(*x) : nlohmann::json(); }

inline nlohmann::json to_json(const SampleStats& s) {
  return {{"sm_clock_mhz", opt_json(s.sm_clock_mhz)}, {"sm_clock_mhz_min", opt_json(s.sm_clock_mhz_min)},
          {"sm_clock_mhz_max", opt_json(s.sm_clock_mhz_max)}, {"power_w", opt_json(s.power_w)},
          {"power_w_min", opt_json(s.power_w_min)}, {"power_w_max", opt_json(s.power_w_max)},
          {"temp_c", opt_json(s.temp_c)}, {"temp_c_min", opt_json(s.temp_c_min)},
          {"temp_c_max", opt_json(s.temp_c_max)}, {"nvml_samples", s.nvml_samples},
          {"energy_w", opt_json(s.energy_w)}};
}

inline nlohmann::json to_json(const Block& b) {
  nlohmann::json j = {{"index", b.index}, {"round", b.round}, {"half", half_name(b.half)}, {"backend", b.backend},
                      {"warmup_calls", b.warmup_calls}, {"warmup_s", b.warmup_s}, {"calls", b.calls},
                      {"block_ms", b.block_ms}, {"per_call_ms", b.per_call_ms},
                      {"host_ms_per_call", opt_json(b.host_ms_per_call)}, {"host_bound", b.host_bound}};
  j.update(to_json(b.nvml));
  j["energy_j"] = opt_json(b.energy_j);
  j["j_per_call"] = opt_json(b.j_per_call);
  return j;
}

inline nlohmann::json to_json(const BackendStats& s) {
  return {{"blocks", s.blocks}, {"median_ms", opt_json(s.median_ms)}, {"min_ms", opt_json(s.min_ms)},
          {"max_ms", opt_json(s.max_ms)}, {"spread", opt_json(s.spread)},
          {"median_ms_first_half", opt_json(s.median_ms_first_half)},
          {"median_ms_second_half", opt_json(s.median_ms_second_half)},
          {"sm_clock_mhz", opt_json(s.sm_clock_mhz)}, {"power_w", opt_json(s.power_w)},
          {"temp_c", opt_json(s.temp_c)}, {"host_bound_blocks", s.host_bound_blocks},
          {"j_per_call", opt_json(s.j_per_call)}};
}

inline nlohmann::json to_json(const Ratio& r) {
  return {{"ratio", opt_json(r.ratio)}, {"ratio_first_half", opt_json(r.ratio_first_half)},
          {"ratio_second_half", opt_json(r.ratio_second_half)},
          {"flipped", r.flipped ? nlohmann::json(*r.flipped) : nlohmann::json()},
          {"order_gap", opt_json(r.order_gap)}};
}

inline nlohmann::json to_json(const Result& r) {
  nlohmann::json blocks = nlohmann::json::array(), stats = nlohmann::json::object();
  for (const auto& b : r.blocks) blocks.push_back(to_json(b));
  for (size_t i = 0; i < r.backends.size(); ++i) stats[r.backends[i]] = to_json(r.stats[i]);
  return {{"protocol", r.protocol},
          {"params", {{"warmup_s", r.params.warmup_s}, {"block_s", r.params.block_s}, {"rounds", r.params.rounds},
                      {"min_calls", r.params.min_calls}, {"max_calls", r.params.max_calls}, {"timer", r.timer},
                      {"n_inputs", r.params.n_inputs}, {"nvml_device", r.params.nvml_device}}},
          {"nvml", r.nvml},
          {"backends", r.backends},
          {"order", r.order},
          {"blocks", blocks},
          {"stats", stats}};
}

}  // namespace xstage::bench
