// The padding rows the fused kernel's tiles load (moe::loaded_padding_rows) on the harness's routings (generate_routing with
// bench_moe's seed for each configuration, moe::harness_routing_seed(1, T, kind); session 57's first version used seed 1),
// the numbers docs/MOE.md "Harness and results" and docs/MOE-NOTEBOOK.md "Session 57" quote. Built and run here (no GPU):
//   g++ -std=c++17 -O2 -I include results/moe/runs/s57/padcount.cpp build/src/moe/libxstage_moe.a -o /tmp/padcount && /tmp/padcount
#include <cstdio>
#include <vector>
#include "xstage/moe/routing.hpp"
#include "xstage/moe/dispatch_layout.hpp"
using namespace xstage::moe;
int main() {
  struct S { const char* n; int H, E, k; } shapes[] = {{"v4-pro", 7168, 384, 6}, {"v4-flash", 4096, 256, 6}, {"v3", 7168, 256, 8}, {"dit", 1152, 16, 2}};
  for (auto sh : shapes)
    for (int T : {8192, 32768})
      for (auto kind : {RoutingKind::Balanced, RoutingKind::Skewed}) {
        RoutingConfig c{1, T, sh.E, sh.k, kind, 1.0, harness_routing_seed(1, T, kind)};
        Routing r = generate_routing(c);
        std::vector<int> n(sh.E, 0);
        for (int v : r.index) n[v]++;
        long long rows = 0, all = 0;
        for (int e = 0; e < sh.E; ++e) {
          PaddingRows p = loaded_padding_rows(n[e], 128, false);
          rows += p.end - p.begin;
          all += (n[e] + 127) / 128 * 128 - n[e];
        }
        std::printf("%-9s T=%5d %-8s loaded padding rows %7lld (%.1f MB of codes), all padding rows %7lld, routed %d\n", sh.n, T,
                    kind == RoutingKind::Balanced ? "balanced" : "skewed", rows, rows * sh.H / 1e6, all, T * sh.k);
      }
}
