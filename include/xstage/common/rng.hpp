#pragma once
// Seeded draws from mt19937_64 bits through integer and IEEE arithmetic only, so a seed gives the same numbers on
// every platform and standard library: the synthetic routings (moe::generate_routing) and the simulator's
// (sim::route_tokens) share them, stream for stream.
#include <cstdint>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

namespace xstage::rng {

// Uniform double in (0, 1).
inline double uniform01(std::mt19937_64& g) { return (double(g() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

// Unbiased integer in [0, n), n >= 1 (rejection below 2^64 mod n).
inline std::uint64_t bounded(std::mt19937_64& g, std::uint64_t n) {
  const std::uint64_t threshold = (0 - n) % n;
  for (;;) {
    const std::uint64_t r = g();
    if (r >= threshold) return r % n;
  }
}

// Uniform k-subsets of [0, n) in uniform order, one per draw: a partial Fisher-Yates on a persistent permutation
// (k steps from any permutation give a uniform k-subset, so it never needs resetting).
class UniformSubsets {
 public:
  explicit UniformSubsets(int n) : perm_(n) { std::iota(perm_.begin(), perm_.end(), 0); }
  // take(j, element) for j = 0 .. k-1.
  template <class Take>
  void draw(std::mt19937_64& g, int k, Take&& take) {
    const int n = int(perm_.size());
    for (int j = 0; j < k; ++j) {
      const int i = j + int(bounded(g, std::uint64_t(n - j)));
      std::swap(perm_[j], perm_[i]);
      take(j, perm_[j]);
    }
  }

 private:
  std::vector<int> perm_;
};

}  // namespace xstage::rng
