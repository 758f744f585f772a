#pragma once
// Balanced passes for programs that time a list of rows once each (the MoE probes, bench/moe): rather than one pass
// in a fixed order, where a row's number carries the clock its neighbour left, `rounds` passes in listed order and
// `rounds` in reverse, and per row the median-time pass with its spread. Host-only; CPU-tested (tests/bench).
#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace xstage::bench {

// Balanced passes over a probe's rows: `rounds` times every row in listed order, then in reverse (A B .. B A), so
// a row's neighbours and the clock they leave differ between its passes. measure(i) returns row i's result (a type
// with `ms` and `ms_spread`); each row's result is its median-time pass, with ms_spread = (max - min) / median of ms
// over its 2 x rounds passes (a check over every pass belongs in measure, which sees each one).
template <class R, class Measure>
std::vector<R> balanced_passes(size_t rows, int rounds, Measure&& measure) {
  if (rounds < 1) throw std::invalid_argument("balanced_passes: rounds must be >= 1, got " + std::to_string(rounds));
  std::vector<std::vector<R>> passes(rows);
  for (int r = 0; r < rounds; ++r)
    for (int half = 0; half < 2; ++half)
      for (size_t j = 0; j < rows; ++j) {
        const size_t i = half ? rows - 1 - j : j;
        passes[i].push_back(measure(i));
      }
  std::vector<R> out;
  for (size_t i = 0; i < rows; ++i) {
    std::vector<R>& p = passes[i];
    std::sort(p.begin(), p.end(), [](const R& a, const R& b) { return a.ms < b.ms; });
    R m = p[(p.size() - 1) / 2];
    m.ms_spread = m.ms > 0 ? (p.back().ms - p.front().ms) / m.ms : 0;
    out.push_back(m);
  }
  return out;
}

// The header phrase both probes print for balanced_passes' protocol, e.g. "2 passes (1 round of listed + reverse
// order; each row its median-time pass)".
inline std::string passes_note(int rounds) {
  return std::to_string(2 * rounds) + " passes (" + std::to_string(rounds) + (rounds == 1 ? " round" : " rounds") +
         " of listed + reverse order; each row its median-time pass)";
}

}  // namespace xstage::bench
