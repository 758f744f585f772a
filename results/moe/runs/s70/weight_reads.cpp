// s70: per-expert rows of bench_moe's V4-Pro routings (seed 1, 8192 tokens) and the weight bytes the layer reads if
// every weight-sharing pair of an expert's row blocks (or every row block) reads the expert's weights once from DRAM.
//   g++ -O2 -std=c++20 -Iinclude results/moe/runs/s70/weight_reads.cpp build/src/moe/libxstage_moe.a -o /tmp/wr && /tmp/wr
#include "xstage/moe/routing.hpp"
#include <cstdio>
#include <algorithm>
int main() {
  const int H = 7168, I = 3072, E = 384, k = 6, T = 8192;
  for (auto kind : {xstage::moe::RoutingKind::Balanced, xstage::moe::RoutingKind::Skewed}) {
    auto r = xstage::moe::generate_routing({1, T, E, k, kind, 1.0, xstage::moe::harness_routing_seed(1, T, kind)});
    auto c = xstage::moe::expert_counts(r);
    std::sort(c.begin(), c.end(), std::greater<int>());
    const double w = 3.0 * H * I;  // bytes of one expert's W1 + W2
    long used = 0, blocks = 0, pairs = 0, one_row = 0, le64 = 0; 
    for (int n : c) {
      if (!n) continue;
      ++used; int b = (n + 127) / 128; blocks += b; pairs += (b + 1) / 2; one_row += n == 1; le64 += n <= 64;
    }
    std::printf("%s: experts used %ld, rows max %d, median %d; row blocks %ld, pairs %ld; experts of 1 row %ld, <= 64 rows %ld\n",
                kind == xstage::moe::RoutingKind::Skewed ? "skewed" : "balanced", used, c[0], c[c.size() / 2], blocks, pairs, one_row, le64);
    std::printf("  weights once %.1f GB; once per pair %.1f GB (+%.1f); once per row block %.1f GB\n", used * w / 1e9,
                pairs * w / 1e9, (pairs - used) * w / 1e9, blocks * w / 1e9);
    std::printf("  top rows:"); for (int i = 0; i < 12; ++i) std::printf(" %d", c[i]); std::printf("\n");
  }
}
