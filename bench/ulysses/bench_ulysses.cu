// Ulysses study harness (issue 10; the two-GPU issue re-runs it with real ranks): one program, same inputs
// and ranks for every variant, timed with the project's benchmark protocol (docs/BENCHMARKING.md).
//
//   bench_ulysses --ranks 2 --seq 8K,16K --heads-per-rank 3,6 --out DIR        emulated ranks on one GPU
//   xstage launch -n 2 -- bench_ulysses --seq ... --out DIR                    real ranks (one process per GPU;
//                                                                              any launcher, any world, even 1)
//
// Variants (per rank, per call): fa (attention alone, local epilogue), fused_sender (the fused kernel alone:
// sender-visible, no completion wait), fused (fused kernel + completion wait), a2a (our all-to-all alone,
// + wait), serial (attention, then our all-to-all, + wait), pre_a2a (the pre-attention all-to-all + wait).
// Real ranks add nccl_a2a (the post-attention all-to-all as ncclAlltoAll with the layout transforms around
// it, cudaMemcpy2DAsync) and serial_nccl (fa, then nccl_a2a): what a user would build from NCCL.
// E_res = T(fused_sender) - T(fa): what fusing adds to the sender (the paper's residual); E_res_e2e uses
// the completion-waited time. Correctness first, on the same inputs: Fused == Serial bit for bit, and the
// output against a float64 reference on sampled rows (FA3's rule: max|out - ref| <= 2 max|lowprec - ref|
// + atol). Emulated ranks share one GPU and have no NVLink: every number is labelled "emulated".
// Output: a table, DIR/ulysses.csv, DIR/summary.json (written only here; `software`: the xstage version and git
// revision, the CUDA and NCCL versions built with and loaded), DIR/blocks.json (every block).
//
// Flags (defaults in brackets):
//   --out DIR               where the files go [none: the table only]
//   --ranks P               emulated ranks on this GPU [2]; refused under a launcher (the world is the launcher's)
//   --seq L1,L2,...         global sequence lengths, a K suffix for 1024 [8K,16K]
//   --heads-per-rank H1,... heads each rank holds after the all-to-all [3,6]
//   --dim D                 head dimension [128]
//   --platform NAME|FILE    the platform model the design test reads (platforms/) [h200-nvlink4]
//   --warmup-s S, --block-s S, --rounds N   the benchmark protocol's warm-up, block length and ABBA rounds [0.2, 0.4, 2]
//   --quick                 8K, 3 heads, 0.1 s warm-up, 0.2 s blocks, 1 round (a smoke run)
//   --help, -h              this text
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "ulysses_layer.hpp"
#include "xstage/bench/agreed_timer.cuh"
#include "xstage/bench/protocol_cuda.cuh"
#include "xstage/bench/protocol_json.hpp"
#include "xstage/bench/usage.hpp"
#include "xstage/common/error.hpp"
#include "xstage/model/design.hpp"
#include "xstage/model/platform.hpp"
#include "xstage/runtime/comm.hpp"
#include "xstage/runtime/env.hpp"
#include "xstage/runtime/team.hpp"
#include "xstage/runtime/versions.hpp"

#include "bench_ulysses_usage.inc"  // kUsage: this header comment (--help)

using namespace xstage;
using json = nlohmann::json;

namespace {

void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw RuntimeError(detail::concat(what, ": ", cudaGetErrorString(e)));
}

// Inputs from a hash of (tensor, batch, token, head, dim): every rank can generate any element (its own
// slice on the GPU, the reference rows on the CPU) without moving the full tensors.
__host__ __device__ inline float input_value(uint32_t seed, int tensor, int64_t b, int64_t tok, int64_t h, int64_t d,
                                             int64_t S, int64_t H, int64_t D) {
  uint64_t x = ((((uint64_t(tensor) * 0x9E3779B97F4A7C15ull) ^ uint64_t(b)) * S + uint64_t(tok)) * H + uint64_t(h)) * D +
               uint64_t(d) + seed * 0xD1B54A32D192ED03ull;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return float(int64_t(x >> 40) - (int64_t(1) << 23)) / float(1 << 23);  // [-1, 1)
}

__global__ void fill_slice(__nv_bfloat16* out, uint32_t seed, int tensor, int batch, int spr, int rank, int S, int H,
                           int D) {
  const int64_t n = int64_t(batch) * spr * H * D;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t d = i % D, h = (i / D) % H, t = (i / (int64_t(D) * H)) % spr, b = i / (int64_t(D) * H * spr);
    out[i] = __float2bfloat16(input_value(seed, tensor, b, int64_t(rank) * spr + t, h, d, S, H, D));
  }
}

float bf16_round(float x) { return __bfloat162float(__float2bfloat16(x)); }

struct RefError {
  double max_err = 0, max_lowprec_err = 0;
};

// Float64 reference of rows (b = 0, token, head) of rank `rank`'s output: softmax(q k^T / sqrt(D)) v over the
// full sequence, and the same with P and the output rounded to bf16 (what the kernel does).
RefError check_rows(uint32_t seed, const std::vector<uint16_t>& out, int rank, int spr, int S, int H, int D,
                    int tokens_per_rank, int heads_sampled) {
  RefError e;
  std::vector<double> k(size_t(S) * D), v(size_t(S) * D), s(S);
  const double scale = 1.0 / std::sqrt(double(D));
  const int hstep = std::max(1, H / heads_sampled);
  for (int h = 0; h < H; h += hstep) {
    for (int j = 0; j < S; ++j)
      for (int d = 0; d < D; ++d) {
        k[size_t(j) * D + d] = bf16_round(input_value(seed, 1, 0, j, h, d, S, H, D));
        v[size_t(j) * D + d] = bf16_round(input_value(seed, 2, 0, j, h, d, S, H, D));
      }
    for (int ti = 0; ti < tokens_per_rank; ++ti) {
      const int t = int((int64_t(ti) * 7919 + h * 31) % spr), row = rank * spr + t;
      std::vector<double> q(D);
      for (int d = 0; d < D; ++d) q[d] = bf16_round(input_value(seed, 0, 0, row, h, d, S, H, D));
      double mx = -1e300;
      for (int j = 0; j < S; ++j) {
        double a = 0;
        for (int d = 0; d < D; ++d) a += q[d] * k[size_t(j) * D + d];
        s[j] = a * scale;
        mx = std::max(mx, s[j]);
      }
      double l = 0;
      for (int j = 0; j < S; ++j) l += std::exp(s[j] - mx);
      for (int d = 0; d < D; ++d) {
        double ref = 0, low = 0;
        for (int j = 0; j < S; ++j) {
          const double p = std::exp(s[j] - mx);
          ref += p * v[size_t(j) * D + d];
          low += double(bf16_round(float(p))) * v[size_t(j) * D + d];
        }
        ref /= l;
        low = bf16_round(float(low / l));
        uint16_t bits = out[(size_t(t) * H + h) * D + d];
        uint32_t f32 = uint32_t(bits) << 16;
        float got;
        std::memcpy(&got, &f32, 4);
        e.max_err = std::max(e.max_err, std::fabs(double(got) - ref));
        e.max_lowprec_err = std::max(e.max_lowprec_err, std::fabs(low - ref));
      }
    }
  }
  return e;
}

// The post-attention all-to-all the NCCL way (one local rank, real ranks): oh (batch, S, H/P, d) -> per
// destination contiguous chunks (batch, S/P, H/P, d) -> ncclAlltoAll -> out (batch, S/P, H, d), source s's
// chunk at heads [s H/P, (s+1) H/P).
struct NcclA2A {
  runtime::Communicator& comm;
  int batch, spr, heads, dim;
  void *send = nullptr, *recv = nullptr, *out = nullptr;
  NcclA2A(runtime::Communicator& c, int b, int s, int h, int d) : comm(c), batch(b), spr(s), heads(h), dim(d) {
    const size_t bytes = size_t(b) * s * h * d * 2;
    ok(cudaMalloc(&send, bytes), "cudaMalloc");
    ok(cudaMalloc(&recv, bytes), "cudaMalloc");
    ok(cudaMalloc(&out, bytes), "cudaMalloc");
  }
  ~NcclA2A() {
    cudaFree(send);
    cudaFree(recv);
    cudaFree(out);
  }
  void run(const void* oh, cudaStream_t s) {
    const int P = comm.size(), hp = heads / P;
    const size_t row = size_t(hp) * dim * 2, chunk = size_t(batch) * spr * row;
    for (int d = 0; d < P; ++d)  // rows [d spr, (d+1) spr) of every batch entry, for destination d
      ok(cudaMemcpy2DAsync(static_cast<char*>(send) + d * chunk, spr * row, static_cast<const char*>(oh) + d * spr * row,
                           size_t(P) * spr * row, spr * row, batch, cudaMemcpyDeviceToDevice, s),
         "cudaMemcpy2DAsync (send layout)");
    comm.enqueued(ncclAlltoAll(send, recv, chunk / 2, ncclBfloat16, comm.nccl(), s), "ncclAlltoAll");
    for (int src = 0; src < P; ++src)  // source src's chunk: its heads of my rows
      ok(cudaMemcpy2DAsync(static_cast<char*>(out) + src * row, size_t(heads) * dim * 2,
                           static_cast<const char*>(recv) + src * chunk, row, row, size_t(batch) * spr,
                           cudaMemcpyDeviceToDevice, s),
         "cudaMemcpy2DAsync (receive layout)");
  }
};

std::vector<int> parse_list(const std::string& s, const char* what) {
  std::vector<int> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    XSTAGE_REQUIRE(!item.empty(), what, ": empty item in '", s, "'");
    double mult = 1;
    if (item.back() == 'K' || item.back() == 'k') {
      mult = 1024;
      item.pop_back();
    }
    char* end = nullptr;
    const double x = std::strtod(item.c_str(), &end);
    XSTAGE_REQUIRE(end && *end == '\0' && x >= 1 && x * mult < 1e9 && std::floor(x * mult) == x * mult, what,
                   ": '", item, "' is not a positive whole number");
    v.push_back(int(x * mult));
  }
  return v;
}

// A flag that takes one value: exactly one item of the list form.
int parse_one(const std::string& s, const char* what) {
  const std::vector<int> v = parse_list(s, what);
  XSTAGE_REQUIRE(v.size() == 1, what, ": one value, got '", s, "'");
  return v[0];
}

// A duration flag's value in seconds: all of the text a finite number in [lo, 3600].
double parse_seconds(const std::string& s, const char* what, double lo) {
  char* end = nullptr;
  const double x = std::strtod(s.c_str(), &end);
  XSTAGE_REQUIRE(!s.empty() && end && *end == '\0' && std::isfinite(x) && x >= lo && x <= 3600, what, ": '", s,
                 "' is not a number of seconds in [", lo, ", 3600]");
  return x;
}

struct Args {
  int ranks = 0;  // --ranks: emulated ranks (0: not given, 2)
  std::vector<int> seqs{8192, 16384};
  std::vector<int> heads_per_rank{3, 6};
  int dim = 128;
  std::string out, platform = "h200-nvlink4";
  double warmup_s = 0.2, block_s = 0.4;
  int rounds = 2;
  uint32_t seed = 20261201;
  std::string command;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 0; i < argc; ++i) a.command += (i ? " " : "") + std::string(argv[i]);
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (xstage::bench::is_help_flag(k)) xstage::bench::print_usage_and_exit(kUsage);
    auto val = [&]() -> std::string {
      XSTAGE_REQUIRE(i + 1 < argc, k, " needs a value");
      return argv[++i];
    };
    if (k == "--ranks") a.ranks = parse_one(val(), "--ranks");  // >= 1 (parse_list)
    else if (k == "--seq") a.seqs = parse_list(val(), "--seq");
    else if (k == "--heads-per-rank") a.heads_per_rank = parse_list(val(), "--heads-per-rank");
    else if (k == "--dim") a.dim = parse_one(val(), "--dim");
    else if (k == "--out") a.out = val();
    else if (k == "--platform") a.platform = val();
    else if (k == "--warmup-s") a.warmup_s = parse_seconds(val(), "--warmup-s", 0);
    else if (k == "--block-s") a.block_s = parse_seconds(val(), "--block-s", 1e-3);
    else if (k == "--rounds") a.rounds = parse_one(val(), "--rounds");
    else if (k == "--quick") { a.seqs = {8192}; a.heads_per_rank = {3}; a.block_s = 0.2; a.warmup_s = 0.1; a.rounds = 1; }
    else throw UsageError("unknown argument " + k + " (bench_ulysses --help lists the flags)");
  }
  return a;
}

int run(const Args& a) {
  // Ranks: real when a launcher started us (xstage launch / torchrun / mpirun / Slurm; one process per GPU, even a
  // world of 1, as bench_moe), else emulated (--ranks, default 2).
  const runtime::LaunchInfo li = runtime::detect_launch(runtime::process_env());
  std::unique_ptr<runtime::Communicator> comm;
  std::unique_ptr<runtime::Team> team;
  if (li.launcher != "none") {
    if (a.ranks != 0)
      throw UsageError(detail::concat("--ranks ", a.ranks, " sets emulated ranks, but ", li.launcher,
                                      " started this process as rank ", li.rank, " of ", li.world_size,
                                      ": the launcher sets the world size"));
    runtime::CommOptions o;
    o.timeout_s = 60;
    comm = std::make_unique<runtime::Communicator>(li, o);
    team = runtime::Team::real(*comm);
  } else {
    team = runtime::Team::emulated(a.ranks ? a.ranks : 2, -1, 30);
  }
  const bool lead = team->first_rank() == 0;
  const int P = team->world(), G = team->local_ranks();
  const model::Platform plat = model::Platform::load(a.platform);
  cudaDeviceProp prop{};
  ok(cudaGetDeviceProperties(&prop, team->device()), "cudaGetDeviceProperties");
  const std::string machine = detail::concat(prop.name, ", ", prop.multiProcessorCount, " SMs; ", team->label());
  if (lead) std::printf("# %s\n# ulysses study on %s\n", version_line().c_str(), machine.c_str());
  const cudaStream_t s = team->stream();

  json rows = json::array(), blocks = json::array();
  bool all_equal = true, all_within = true;
  double worst_err = 0, worst_tol = 0;
  const std::vector<std::string> names{"fa", "fused_sender", "fused", "a2a", "serial", "pre_a2a"};
  if (lead)
    std::printf("%7s %4s %5s %9s %9s %9s %9s %9s %9s %8s %8s %7s %6s %s\n", "M", "h/r", "heads", "fa_us", "fsend_us",
                "fused_us", "a2a_us", "serial_us", "pre_us", "E_res", "E_e2e", "spdup", "equal", "err/tol");
  for (int M : a.seqs)
    for (int hp : a.heads_per_rank) {
      XSTAGE_REQUIRE(M % P == 0, "sequence length ", M, " is not divisible by the world size ", P);
      ulysses::Shape shape;
      shape.seq_per_rank = M / P;
      shape.heads = hp * P;
      shape.head_dim = a.dim;
      ulysses::Layer layer(*team, shape);
      const size_t bytes = layer.tensor_bytes();
      std::vector<void*> q(G), k(G), v(G);
      for (int g = 0; g < G; ++g) {
        for (int t = 0; t < 3; ++t) {
          void** p = t == 0 ? &q[g] : t == 1 ? &k[g] : &v[g];
          ok(cudaMalloc(p, bytes), "cudaMalloc (inputs)");
          fill_slice<<<264, 256, 0, s>>>(static_cast<__nv_bfloat16*>(*p), a.seed, t, 1, shape.seq_per_rank,
                                         team->first_rank() + g, M, shape.heads, a.dim);
          ok(cudaGetLastError(), "fill_slice");
        }
      }
      // Correctness: fused, serial, fused again; compare bit for bit; float64 reference on sampled rows.
      std::vector<std::vector<uint16_t>> outs[2];
      const ulysses::Variant vs[2] = {ulysses::Variant::kFused, ulysses::Variant::kSerial};
      for (int it = 0; it < 2; ++it) {
        for (int g = 0; g < G; ++g) ok(cudaMemsetAsync(layer.next_output(team->first_rank() + g), 0xFF, bytes, s), "poison");
        team->check("poison");
        team->barrier();
        layer.forward(q.data(), k.data(), v.data(), vs[it], s);
        team->check(it == 0 ? "fused layer" : "serial layer");
        for (int g = 0; g < G; ++g) {
          outs[it].emplace_back(bytes / 2);
          ok(cudaMemcpy(outs[it].back().data(), layer.output(team->first_rank() + g), bytes, cudaMemcpyDeviceToHost),
             "copy out");
        }
      }
      bool equal = true;
      RefError err;
      for (int g = 0; g < G; ++g) {
        equal = equal && outs[0][g] == outs[1][g];
        const RefError e = check_rows(a.seed, outs[0][g], team->first_rank() + g, shape.seq_per_rank, M, shape.heads,
                                      a.dim, 2, 4);
        err.max_err = std::max(err.max_err, e.max_err);
        err.max_lowprec_err = std::max(err.max_lowprec_err, e.max_lowprec_err);
      }
      const double tol = 2 * err.max_lowprec_err + std::ldexp(1.0, -9);
      all_equal = all_equal && equal;
      all_within = all_within && err.max_err <= tol;
      worst_err = std::max(worst_err, err.max_err);
      worst_tol = std::max(worst_tol, tol);

      // Timing. Real ranks: AgreedTimer agrees the warm-up's calls and the block lengths.
      team->barrier();
      std::vector<std::function<void(int)>> fns = {
          [&](int) { layer.attention_local(s); },
          [&](int) { layer.attention_fused(s); },
          [&](int) {
            layer.attention_fused(s);
            layer.wait_output(s);
          },
          [&](int) {
            layer.post_a2a(s);
            layer.wait_output(s);
          },
          [&](int) {
            layer.attention_local(s);
            layer.post_a2a(s);
            layer.wait_output(s);
          },
          [&](int) { layer.pre_a2a(q.data(), k.data(), v.data(), s); },
      };
      std::vector<std::string> bnames = names;
      std::unique_ptr<NcclA2A> nccl;
      if (comm) {
        nccl = std::make_unique<NcclA2A>(*comm, 1, shape.seq_per_rank, shape.heads, a.dim);
        layer.attention_local(s);
        nccl->run(layer.local_attention_output(), s);
        team->check("nccl all-to-all");
        std::vector<uint16_t> via_nccl(bytes / 2);
        ok(cudaMemcpy(via_nccl.data(), nccl->out, bytes, cudaMemcpyDeviceToHost), "copy out");
        equal = equal && via_nccl == outs[1][0];  // the NCCL path must deliver the Serial output exactly
        bnames.push_back("nccl_a2a");
        bnames.push_back("serial_nccl");
        fns.push_back([&](int) { nccl->run(layer.local_attention_output(), s); });
        fns.push_back([&](int) {
          layer.attention_local(s);
          nccl->run(layer.local_attention_output(), s);
        });
      }
      bench::Params bp;
      bp.warmup_s = a.warmup_s;  // real ranks too: AgreedTimer agrees the warm-up's calls
      bp.block_s = a.block_s;
      bp.rounds = a.rounds;
      bp.nvml_device = team->device();
      bench::AgreedTimer timer(fns, s, comm.get());
      bench::NvmlSampler sampler(bench::cuda_pci_bus_id(team->device()));
      const bench::Result r = bench::run_protocol(bnames, timer, &sampler, bp);
      layer.wait_output(s);  // fused_sender blocks sent signals nobody waited for
      team->check("ulysses timing");
      auto us = [&](const char* n) { return r.stats_of(n).median_ms.value_or(NAN) * 1e3; };
      auto spread = [&](const char* n) { return r.stats_of(n).spread.value_or(NAN); };
      // Per-rank max of the medians (real ranks: the slowest rank sets the layer's time).
      auto rank_max = [&](double x) { return comm ? comm->allreduce(x, ncclMax) : x; };
      const double fa = rank_max(us("fa")), fsend = rank_max(us("fused_sender")), fused = rank_max(us("fused")),
                   a2a = rank_max(us("a2a")), serial = rank_max(us("serial")), pre = rank_max(us("pre_a2a"));
      const double nccl_a2a = comm ? rank_max(us("nccl_a2a")) : NAN, serial_nccl = comm ? rank_max(us("serial_nccl")) : NAN;
      // The ABBA order check of the row's comparisons (on any rank): a ratio whose halves fall on either side of 1, or
      // a difference whose halves differ in sign, is not a result.
      auto flipped = [&](const char* x, const char* y) {
        const bool f = bench::ratio(r.stats_of(x), r.stats_of(y)).flipped.value_or(false);
        return comm ? comm->allreduce(f ? 1LL : 0LL, ncclMax) != 0 : f;
      };
      const bool flip_speedup = flipped("fused", "serial"), flip_eres = flipped("fa", "fused_sender"),
                 flip_eres_e2e = flipped("fa", "fused");
      // Model audit: one 64 x d bf16 tile per consumer warpgroup, K = the CTAs of a rank (its SM share).
      const int K = team->sms_per_rank();
      model::AttnConfig ac;
      ac.M = M;
      ac.d = a.dim;
      ac.b_m = 64;
      ac.b_n = a.dim == 128 ? 176 : 128;
      ac.K = K;
      ac.P = P;
      const double tiles = double(shape.heads / P) * ((M + 63) / 64);  // 64-row tiles per rank
      const double g_qloop = fa * 1e-6 * K / tiles;                   // measured mainloop per tile per CTA
      ac.sigma = g_qloop / std::ceil(double(M) / ac.b_n);
      json audit;
      try {
        audit = model::design_attention(plat, ac).to_json();
      } catch (const std::exception& ex) {
        audit = {{"error", ex.what()}};
      }
      json row = {{"mode", team->is_emulated() ? "emulated" : "real"}, {"ranks", P}, {"M", M}, {"heads_per_rank", hp},
                  {"heads", shape.heads}, {"head_dim", a.dim}, {"fa_us", fa}, {"fused_sender_us", fsend},
                  {"fused_us", fused}, {"a2a_us", a2a}, {"serial_us", serial}, {"pre_a2a_us", pre},
                  {"spread_fa", spread("fa")}, {"spread_fused_sender", spread("fused_sender")},
                  {"spread_fused", spread("fused")}, {"spread_serial", spread("serial")},
                  {"spread_a2a", spread("a2a")}, {"spread_pre_a2a", spread("pre_a2a")},
                  {"speedup_vs_serial_flipped", flip_speedup}, {"E_res_flipped", flip_eres},
                  {"E_res_e2e_flipped", flip_eres_e2e},
                  {"E_res_us", fsend - fa}, {"E_res_e2e_us", fused - fa},
                  {"hidden_fraction", a2a > 0 ? (serial - fused) / a2a : NAN}, {"speedup_vs_serial", serial / fused},
                  {"nccl_a2a_us", comm ? json(nccl_a2a) : json(nullptr)},
                  {"serial_nccl_us", comm ? json(serial_nccl) : json(nullptr)},
                  {"fused_equals_serial", equal}, {"max_err", err.max_err}, {"tolerance", tol},
                  {"V_tile_bytes", 64 * a.dim * 2}, {"V_aggregate_bytes", double(K) * 64 * a.dim * 2},
                  {"G_qloop_measured_us", g_qloop * 1e6}, {"sigma_measured_us", ac.sigma * 1e6}, {"model", audit}};
      rows.push_back(row);
      for (const auto& b : r.blocks) blocks.push_back(bench::to_json(b));
      if (lead)
        std::printf("%7d %4d %5d %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %8.1f %8.1f %7.3f %6s %.2g/%.2g\n", M, hp,
                    shape.heads, fa, fsend, fused, a2a, serial, pre, fsend - fa, fused - fa, serial / fused,
                    equal ? "yes" : "NO", err.max_err, tol);
      for (int g = 0; g < G; ++g) {
        cudaFree(q[g]);
        cudaFree(k[g]);
        cudaFree(v[g]);
      }
    }
  if (lead && !a.out.empty()) {
    std::filesystem::create_directories(a.out);
    json summary = {{"emulated", team->is_emulated()}, {"ranks", P}, {"fused_equals_serial", all_equal},
                    {"max_err_vs_reference", worst_err}, {"tolerance", worst_tol}, {"within_tolerance", all_within},
                    {"machine", machine}, {"command", a.command},
                    {"software", runtime::to_json(runtime::software_versions())}, {"protocol", "xstage-steady-state/1 (docs/BENCHMARKING.md)"},
                    {"note", team->is_emulated() ? "emulated ranks on one GPU: no NVLink, the X-Stage drain is not "
                                                   "emulated; all-to-all times are local copies"
                                                 : "real ranks over NCCL LSA windows"},
                    {"rows", rows}};
    json flipped = json::array();  // rows whose speedup or E_res changed side between the ABBA halves: not results
    for (const auto& r : rows)
      if (r["speedup_vs_serial_flipped"].get<bool>() || r["E_res_flipped"].get<bool>() ||
          r["E_res_e2e_flipped"].get<bool>())
        flipped.push_back(detail::concat("M=", r["M"].get<int>(), " heads_per_rank=", r["heads_per_rank"].get<int>()));
    summary["order_checked_rows"] = rows.size();
    summary["flipped_rows"] = flipped;
    std::ofstream(a.out + "/summary.json") << summary.dump(2) << "\n";
    std::ofstream(a.out + "/blocks.json") << blocks.dump() << "\n";
    std::ofstream csv(a.out + "/ulysses.csv");
    csv << "# ulysses study; " << machine << "\nmode,ranks,M,heads_per_rank,heads,head_dim,fa_us,fused_sender_us,"
        << "fused_us,a2a_us,serial_us,pre_a2a_us,E_res_us,E_res_e2e_us,hidden_fraction,speedup_vs_serial,"
        << "fused_equals_serial,max_err,tolerance,speedup_vs_serial_flipped,E_res_flipped,E_res_e2e_flipped\n";
    for (const auto& r : rows)
      csv << r["mode"].get<std::string>() << ',' << r["ranks"] << ',' << r["M"] << ',' << r["heads_per_rank"] << ','
          << r["heads"] << ',' << r["head_dim"] << ',' << r["fa_us"] << ',' << r["fused_sender_us"] << ','
          << r["fused_us"] << ',' << r["a2a_us"] << ',' << r["serial_us"] << ',' << r["pre_a2a_us"] << ','
          << r["E_res_us"] << ',' << r["E_res_e2e_us"] << ',' << r["hidden_fraction"] << ',' << r["speedup_vs_serial"]
          << ',' << r["fused_equals_serial"] << ',' << r["max_err"] << ',' << r["tolerance"] << ','
          << r["speedup_vs_serial_flipped"] << ',' << r["E_res_flipped"] << ',' << r["E_res_e2e_flipped"] << "\n";
    std::printf("# wrote %s/{summary.json,ulysses.csv,blocks.json}\n", a.out.c_str());
  }
  if (lead)
    std::printf("# fused == serial: %s; max error %.3g vs tolerance %.3g: %s%s\n", all_equal ? "yes" : "NO", worst_err,
                worst_tol, all_within ? "ok" : "FAIL",
                team->is_emulated() ? "; emulated ranks (no NVLink): all-to-all numbers are local copies" : "");
  return all_equal && all_within ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const UsageError& e) {
    std::fprintf(stderr, "bench_ulysses: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_ulysses: %s\n", e.what());
    return 1;
  }
}
