#pragma once
// Seeded draws from mt19937_64 bits through integer and IEEE arithmetic only, so a seed gives the same numbers on
// every platform and standard library: the synthetic routings (moe::generate_routing) and the simulator's
// (sim::route_tokens) share them, stream for stream.
#include <algorithm>
#include <cmath>
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

// Weighted k-subsets of [0, n) without replacement, Zipf popularity w_e = 1 / (rank_e + 1)^alpha over a permutation
// drawn from g first (the constructor), then per draw one key log(u) / w_e per element (Efraimidis-Spirakis: the k
// largest keys are the weighted sample).
class ZipfSubsets {
 public:
  ZipfSubsets(std::mt19937_64& g, int n, double alpha) : inv_w_(n), keys_(n) {
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    for (int i = n - 1; i > 0; --i) std::swap(order[i], order[g() % (unsigned long long)(i + 1)]);
    for (int r = 0; r < n; ++r) inv_w_[order[r]] = std::pow(double(r + 1), alpha);
  }
  // take(j, element) for j = 0 .. k-1: by decreasing key if `sorted`, else in no particular order (cheaper).
  template <class Take>
  void draw(std::mt19937_64& g, int k, bool sorted, Take&& take) {
    for (size_t e = 0; e < keys_.size(); ++e) keys_[e] = {std::log(uniform01(g)) * inv_w_[e], int(e)};
    const auto before = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
    if (sorted)
      std::partial_sort(keys_.begin(), keys_.begin() + k, keys_.end(), before);
    else
      std::nth_element(keys_.begin(), keys_.begin() + (k - 1), keys_.end(), before);
    for (int j = 0; j < k; ++j) take(j, keys_[j].second);
  }

 private:
  std::vector<double> inv_w_;  // 1 / w_e
  std::vector<std::pair<double, int>> keys_;
};

}  // namespace xstage::rng
