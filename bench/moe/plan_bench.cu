// What the MoE layer's dispatch plan costs per call, made on the device (moe_plan.hpp: validate, per-expert
// ordinals, the counts exchange, the tables) against made on the host (DispatchPlan from every rank's routing, its
// tables uploaded). A program, not a test: one emulated team per world size, every layer of include/xstage/moe/
// shapes.hpp (or --shapes), balanced and skewed routing.
//
//   build/bench/moe/plan_bench [--shapes a,b] [--tokens 2048,8192,32768] [--worlds 1,8] [--batches 5] [--calls 20]
//                              [--json F]
//
// --tokens is the global batch: P emulated ranks get T / P tokens each (one GPU plays them all, as a layer call of
// the global batch split over P ranks would run).
// device GPU us: CUDA events around `calls` back-to-back prepares (the plan's kernels and the wait between them,
// every local rank), per call, the median of `batches` batches; device host us: the host's time to enqueue one.
// host plan us: the host's wall time of one prepare (plan built, tables copied) with the stream synchronised after
// it, per call, the median of the batches: what a caller waits for before the layer can be enqueued (not counted:
// getting every rank's routing to the host, a device-to-host copy and, with real ranks, an all-gather).
// The two plans alternate which runs first batch by batch; the JSON adds each one's range over the batches.
// The layer's tensors are never read by a prepare: one small buffer stands in for them.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "moe_layer.hpp"
#include "xstage/bench/usage.hpp"
#include "xstage/common/error.hpp"
#include "xstage/moe/routing.hpp"
#include "xstage/moe/shapes.hpp"
#include "xstage/runtime/team.hpp"

#include "plan_bench_usage.inc"  // kUsage: this header comment (--help)

namespace {

using namespace xstage;
namespace mk = xstage::moe_kernel;

void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "plan_bench: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string t; std::getline(ss, t, ',');)
    if (!t.empty()) out.push_back(t);
  return out;
}

std::vector<int> ints(const std::string& flag, const std::string& s) {
  std::vector<int> out;
  for (const std::string& t : split(s)) {
    char* end = nullptr;
    const long v = std::strtol(t.c_str(), &end, 10);
    if (*end != '\0' || v < 1 || v > (1 << 24)) {
      std::fprintf(stderr, "plan_bench: %s: '%s' is not a positive integer\n", flag.c_str(), t.c_str());
      std::exit(2);
    }
    out.push_back(int(v));
  }
  if (out.empty()) {
    std::fprintf(stderr, "plan_bench: %s: '%s' holds no value\n", flag.c_str(), s.c_str());
    std::exit(2);
  }
  return out;
}

int one_int(const std::string& flag, const std::string& s) {
  const std::vector<int> v = ints(flag, s);
  if (v.size() != 1) {
    std::fprintf(stderr, "plan_bench: %s: '%s' is not one positive integer\n", flag.c_str(), s.c_str());
    std::exit(2);
  }
  return v[0];
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> shapes;
  for (const auto& s : moe::kMoeShapes) shapes.emplace_back(s.name);
  std::vector<int> tokens{2048, 8192, 32768}, worlds{1, 8};
  int batches = 5, calls = 20;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (xstage::bench::is_help_flag(k)) xstage::bench::print_usage_and_exit(kUsage);
    auto val = [&]() -> std::string {  // every flag takes a value; asked for only once the flag is known
      if (i + 1 >= argc) {
        std::fprintf(stderr, "plan_bench: %s needs a value\n", k.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--shapes") shapes = split(val());
    else if (k == "--tokens") tokens = ints(k, val());
    else if (k == "--worlds") worlds = ints(k, val());
    else if (k == "--batches") batches = one_int(k, val());
    else if (k == "--calls") calls = one_int(k, val());
    else if (k == "--json") json = val();
    else {
      std::fprintf(stderr, "plan_bench: unknown argument %s (plan_bench --help lists the flags)\n", k.c_str());
      return 2;
    }
  }
  for (const std::string& s : shapes)
    if (moe::find_moe_shape(s) == nullptr) {
      std::fprintf(stderr, "plan_bench: unknown shape '%s' (include/xstage/moe/shapes.hpp)\n", s.c_str());
      return 2;
    }
  cudaDeviceProp prop{};
  ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  void* stand_in = nullptr;  // x, scales, weights, out: pointers a prepare checks but never reads
  ok(cudaMalloc(&stand_in, 256), "cudaMalloc");
  std::printf("%-18s %6s %-8s %2s %12s %12s %12s %8s\n", "shape", "tokens", "routing", "P", "device GPU us",
              "device host us", "host plan us", "host/dev");
  std::ostringstream rows;
  bool first_row = true;
  for (const int P : worlds) {
    auto team = runtime::Team::emulated(P);
    cudaStream_t st = team->stream();
    cudaEvent_t e0, e1;
    ok(cudaEventCreate(&e0), "cudaEventCreate");
    ok(cudaEventCreate(&e1), "cudaEventCreate");
    for (const std::string& name : shapes) {
      const moe::MoeShape& sh = *moe::find_moe_shape(name);
      for (const int Tg : tokens) {
        if (sh.experts % P != 0 || Tg % P != 0) continue;
        const int T = Tg / P;
        const mk::MoeShape shape{sh.hidden, sh.inter, sh.experts, sh.topk, T};
        if (!mk::check_moe_shape(shape, P).empty()) continue;
        mk::MoeWorkspace ws(*team, shape);
        for (const moe::RoutingKind kind : {moe::RoutingKind::Balanced, moe::RoutingKind::Skewed}) {
          const moe::Routing r = moe::generate_routing({P, T, sh.experts, sh.topk, kind, 1.0, 20261204});
          std::vector<void*> d_idx(P);
          mk::MoeLayerParams host, dev;
          host.shape = dev.shape = shape;
          for (auto* p : {&host, &dev}) {
            p->w1 = p->w2 = stand_in;
            p->w1_scale = p->w2_scale = static_cast<const float*>(stand_in);
            for (int g = 0; g < P; ++g)
              p->rank[g] = {stand_in, static_cast<const float*>(stand_in), static_cast<const float*>(stand_in),
                            static_cast<float*>(stand_in)};
          }
          host.topk_index_all = r.index.data();
          for (int g = 0; g < P; ++g) {
            ok(cudaMalloc(&d_idx[g], size_t(T) * sh.topk * 4), "cudaMalloc (routing)");
            ok(cudaMemcpy(d_idx[g], r.rank_index(g), size_t(T) * sh.topk * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
            dev.rank[g].topk_index = static_cast<const int32_t*>(d_idx[g]);
          }
          // warm-up of both (allocations, first launches)
          mk::prepare_moe_layer(*team, ws, dev, st);
          mk::prepare_moe_layer(*team, ws, host, st);
          ok(cudaStreamSynchronize(st), "sync");
          std::vector<double> dev_gpu, dev_host, host_us;
          auto time_device = [&] {
            ok(cudaStreamSynchronize(st), "sync");
            ok(cudaEventRecord(e0, st), "cudaEventRecord");
            const auto t0 = std::chrono::steady_clock::now();
            for (int c = 0; c < calls; ++c) mk::prepare_moe_layer(*team, ws, dev, st);
            const auto t1 = std::chrono::steady_clock::now();
            ok(cudaEventRecord(e1, st), "cudaEventRecord");
            ok(cudaEventSynchronize(e1), "cudaEventSynchronize");
            float ms = 0;
            ok(cudaEventElapsedTime(&ms, e0, e1), "cudaEventElapsedTime");
            dev_gpu.push_back(1e3 * ms / calls);
            dev_host.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / calls);
          };
          auto time_host = [&] {
            const auto h0 = std::chrono::steady_clock::now();
            for (int c = 0; c < calls; ++c) {
              mk::prepare_moe_layer(*team, ws, host, st);
              ok(cudaStreamSynchronize(st), "sync");
            }
            host_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - h0).count() /
                              calls);
          };
          for (int b = 0; b < batches; ++b) {  // A B, B A, ...: neither plan always runs first
            if (b % 2 == 0) {
              time_device();
              time_host();
            } else {
              time_host();
              time_device();
            }
          }
          ws.check(*team, "plan_bench", st);  // the device plans found the routing valid, and nothing timed out
          for (void* p : d_idx) cudaFree(p);
          const double dg = median(dev_gpu), dh = median(dev_host), hp = median(host_us);
          const char* rk = kind == moe::RoutingKind::Skewed ? "skewed" : "balanced";
          std::printf("%-18s %6d %-8s %2d %12.1f %12.1f %12.1f %8.1f\n", name.c_str(), Tg, rk, P, dg, dh, hp, hp / dg);
          std::fflush(stdout);
          rows << (first_row ? "" : ",\n") << "  {\"shape\": \"" << name << "\", \"tokens\": " << Tg
               << ", \"tokens_per_rank\": " << T
               << ", \"routing\": \"" << rk << "\", \"world\": " << P << ", \"device_plan_gpu_us\": " << dg
               << ", \"device_plan_host_us\": " << dh << ", \"host_plan_us\": " << hp
               << ", \"device_plan_gpu_us_range\": [" << *std::min_element(dev_gpu.begin(), dev_gpu.end()) << ", "
               << *std::max_element(dev_gpu.begin(), dev_gpu.end()) << "], \"host_plan_us_range\": ["
               << *std::min_element(host_us.begin(), host_us.end()) << ", "
               << *std::max_element(host_us.begin(), host_us.end()) << "]}";
          first_row = false;
        }
      }
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
  }
  cudaFree(stand_in);
  if (!json.empty()) {
    std::ofstream f(json);
    f << "{\"device\": \"" << prop.name << "\", \"sms\": " << prop.multiProcessorCount << ", \"batches\": " << batches
      << ", \"calls\": " << calls << ", \"rows\": [\n" << rows.str() << "\n]}\n";
    if (!f) {
      std::fprintf(stderr, "plan_bench: cannot write %s\n", json.c_str());
      return 1;
    }
  }
  return 0;
}
