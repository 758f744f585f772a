// GPU tests of the expert-parallel unfused MoE baseline (bench/moe/unfused_ep.hpp), ranks emulated on one GPU
// (P = 1, 2, 4, 8), W8A8 and W4A8, and a real NCCL team of one rank. They skip cleanly without an
// sm_90 device; what they printed on H200s is under results/gpu-tests.
//
// Every case builds one GLOBAL batch of G = P*T tokens (rank r holds tokens [r T, (r+1) T)), the weights of
// all E experts (rank r gets experts [r E/P, (r+1) E/P)), and a routing [P][T][k] (= [G][k]): balanced,
// skewed (Zipf), or "first rank only" (every token of every rank goes to experts of rank 0: the other ranks
// receive nothing and their tokens have no local expert, most experts get no rows). Outputs and every
// intermediate buffer of the EP path are poisoned with NaN before each call. Checks:
//   1. the plan: rows each rank sends to each rank, rows received, rows per local expert (host recount);
//   2. each rank's output against MoeReference of the same precision, with test_unfused_gpu.cpp's
//      tolerances (tied to that reference's own error against MoeReference(Fp32), FA3 style):
//        rms(out - ref_p) <= c * rms(ref_p - ref_fp32)   (c = 0.5; 0.75 on the W4A8 requantisation fallback)
//        max|out - ref_p| <= 2 * max|ref_p - ref_fp32| + 1e-3 * max|ref_fp32|,  and no NaN;
//   3. BIT FOR BIT against UnfusedMoe (P = 1) on the concatenated global batch. This holds by construction
//      (unfused_ep.hpp, "Bit-exactness"): each expert's GEMMs see the same rows in the same order (source
//      rank, token, slot) with the same padded M = round_up(rows_e, 4) as UnfusedMoe on the global batch,
//      SwiGLU/requantisation is per row, the all-to-alls copy bytes, and the weighted sum is the same kernel
//      on the same bf16 values in slot order. The one assumption is cuBLASLt's: the same algorithm for the
//      same (N, K, M) from two handles (the heuristic sees no pointers), whose rows do not depend on the
//      block's offset in the buffer. If the first GPU run finds differences, that assumption failed (check 2
//      still bounds the error); the test then prints where.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/gpu_test.hpp"
#include "unfused.hpp"
#include "unfused_ep.hpp"
#include "xstage/common/error.hpp"
#include "xstage/moe/quant.hpp"
#include "xstage/moe/reference.hpp"
#include "xstage/moe/routing.hpp"
#include "xstage/moe/shapes.hpp"
#include "xstage/runtime/comm.hpp"
#include "xstage/runtime/team.hpp"

using namespace xstage;
using namespace xstage::testing_gpu;
namespace mb = xstage::moe_bench;

namespace {

enum class Route { kBalanced, kSkewed, kFirstRankOnly };

struct Case {
  int world, tokens, hidden, inter, experts, topk;  // tokens PER RANK, experts over all ranks
  Route route = Route::kBalanced;
  mb::WeightFormat format = mb::WeightFormat::kFp8;
  bool force_requant = false;
  int calls = 1;  // > 1: several calls on one object, a new routing and new activations each call
};

std::string name(const Case& c) {
  char b[200];
  std::snprintf(b, sizeof b, "%s P=%d T=%d H=%d I=%d E=%d k=%d route=%d%s", mb::to_string(c.format), c.world,
                c.tokens, c.hidden, c.inter, c.experts, c.topk, int(c.route), c.force_requant ? " forced-requant" : "");
  return b;
}

// Every token of every rank to experts of rank 0 only (the first max(k, (E/P)/2) of them, rotated).
moe::Routing first_rank_only(int P, int T, int E, int k, uint32_t seed) {
  moe::Routing r;
  r.world = P;
  r.tokens_per_rank = T;
  r.experts = E;
  r.topk = k;
  const int used = std::max(k, E / P / 2);
  r.index.resize(size_t(P) * T * k);
  r.weight.resize(r.index.size());
  for (int s = 0; s < P; ++s)
    for (int t = 0; t < T; ++t)
      for (int j = 0; j < k; ++j) {
        r.index[r.at(s, t, j)] = (t + j + int(seed % 7)) % used;
        r.weight[r.at(s, t, j)] = j == 0 ? 0.5f : 0.5f / float(k - 1);
      }
  return r;
}

template <class T>
std::unique_ptr<DevBuf> upload(const T* p, size_t n) {
  auto d = std::make_unique<DevBuf>(std::max<size_t>(n * sizeof(T), 16));
  CUDA_CHECK(cudaMemcpy(d->p, p, n * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}
template <class T>
std::unique_ptr<DevBuf> upload(const std::vector<T>& v) {
  return upload(v.data(), v.size());
}

// All E experts in the baseline's input format (unfused.hpp), on the device.
struct Weights {
  int experts = 0;
  std::vector<uint8_t> w1, w2;
  std::vector<float> w1s, w2s;
  std::unique_ptr<DevBuf> d_w1, d_w2, d_w1s, d_w2s;
};

Weights make_weights(const moe::MoeWeights& w, mb::WeightFormat f) {
  Weights q;
  q.experts = w.experts;
  const int H = w.hidden, I = w.inter;
  for (int e = 0; e < w.experts; ++e) {
    if (f == mb::WeightFormat::kFp8) {
      const moe::Fp8Tensor q1 = moe::quantize_weight_128x128(w.w1_of(e), 2 * I, H);
      const moe::Fp8Tensor q2 = moe::quantize_weight_128x128(w.w2_of(e), H, I);
      q.w1.insert(q.w1.end(), q1.code.begin(), q1.code.end());
      q.w1s.insert(q.w1s.end(), q1.scale.begin(), q1.scale.end());
      q.w2.insert(q.w2.end(), q2.code.begin(), q2.code.end());
      q.w2s.insert(q.w2s.end(), q2.scale.begin(), q2.scale.end());
    } else {
      const moe::Int4Tensor q1 = moe::quantize_int4(w.w1_of(e), 2 * I, H);
      const moe::Int4Tensor q2 = moe::quantize_int4(w.w2_of(e), H, I);
      q.w1.insert(q.w1.end(), q1.packed.begin(), q1.packed.end());
      q.w1s.insert(q.w1s.end(), q1.scale.begin(), q1.scale.end());
      q.w2.insert(q.w2.end(), q2.packed.begin(), q2.packed.end());
      q.w2s.insert(q.w2s.end(), q2.scale.begin(), q2.scale.end());
    }
  }
  q.d_w1 = upload(q.w1);
  q.d_w2 = upload(q.w2);
  q.d_w1s = upload(q.w1s);
  q.d_w2s = upload(q.w2s);
  return q;
}

// Rank r's slice (experts [r E/P, (r+1) E/P)) of every weight tensor, for each local rank.
void set_ep_weights(mb::UnfusedEpMoe& ep, const Weights& q) {
  const int E = q.experts, el = ep.experts_per_rank();
  auto slice = [&](const DevBuf& d, size_t total_bytes, int r) {
    return static_cast<const char*>(d.p) + total_bytes / E * size_t(r) * el;
  };
  for (int g = 0; g < ep.local_ranks(); ++g) {
    const int r = ep.first_rank() + g;
    ep.set_weights(g, reinterpret_cast<const uint8_t*>(slice(*q.d_w1, q.w1.size(), r)),
                   reinterpret_cast<const float*>(slice(*q.d_w1s, q.w1s.size() * 4, r)),
                   reinterpret_cast<const uint8_t*>(slice(*q.d_w2, q.w2.size(), r)),
                   reinterpret_cast<const float*>(slice(*q.d_w2s, q.w2s.size() * 4, r)));
  }
}

void set_base_weights(mb::UnfusedMoe& base, const Weights& q) {
  base.set_weights(static_cast<const uint8_t*>(q.d_w1->p), static_cast<const float*>(q.d_w1s->p),
                   static_cast<const uint8_t*>(q.d_w2->p), static_cast<const float*>(q.d_w2s->p));
}

// One global batch of P*T tokens.
struct Inputs {
  int world = 1, tokens = 0, hidden = 0, topk = 0;  // tokens per rank
  std::vector<float> x;                              // [P*T][H] unquantized (the references quantize alike)
  moe::Fp8Tensor xq;                                 // its 1x128 quantization (row-wise: rank slices agree)
  moe::Routing routing;                              // index / weight [P][T][k]
  int global_tokens() const { return world * tokens; }
};

Inputs make_inputs(int P, int T, int H, int E, int K, Route route, uint32_t seed) {
  Inputs in;
  in.world = P, in.tokens = T, in.hidden = H, in.topk = K;
  in.x = moe::random_activations(size_t(P) * T * H, seed);
  in.xq = moe::quantize_act_1x128(in.x.data(), P * T, H);
  in.routing = route == Route::kFirstRankOnly
                   ? first_rank_only(P, T, E, K, seed)
                   : moe::generate_routing({P, T, E, K,
                                            route == Route::kSkewed ? moe::RoutingKind::Skewed
                                                                    : moe::RoutingKind::Balanced,
                                            1.0, seed});
  return in;
}

// The EP layer on `in`: per-rank device tensors (slices of the global batch), outputs poisoned, intermediates
// poisoned, one call; returns the ranks' outputs concatenated ([P*T][H]).
std::vector<float> ep_forward(mb::UnfusedEpMoe& ep, const Inputs& in, cudaStream_t st) {
  const int T = in.tokens, H = in.hidden, K = in.topk, KB = H / 128;
  const int L = ep.local_ranks();
  std::vector<std::unique_ptr<DevBuf>> bufs;
  std::vector<mb::UnfusedRankIO> io(static_cast<size_t>(L));
  for (int g = 0; g < L; ++g) {
    const size_t r = size_t(ep.first_rank() + g);
    bufs.push_back(upload(in.xq.code.data() + r * T * H, size_t(T) * H));
    io[g].x = static_cast<const uint8_t*>(bufs.back()->p);
    bufs.push_back(upload(in.xq.scale.data() + r * T * KB, size_t(T) * KB));
    io[g].x_scale = static_cast<const float*>(bufs.back()->p);
    bufs.push_back(upload(in.routing.weight.data() + r * T * K, size_t(T) * K));
    io[g].topk_weight = static_cast<const float*>(bufs.back()->p);
    bufs.push_back(std::make_unique<DevBuf>(size_t(T) * H * sizeof(float)));
    fill_now(bufs.back()->p, 0xFF, size_t(T) * H * sizeof(float));  // NaN
    io[g].out = static_cast<float*>(bufs.back()->p);
  }
  ep.set_routing(in.routing.index.data());
  ep.poison(st);
  ep.run(io.data(), st);
  CUDA_CHECK(cudaStreamSynchronize(st));
  CUDA_CHECK(cudaGetLastError());
  std::vector<float> out(size_t(L) * T * H);
  for (int g = 0; g < L; ++g)
    CUDA_CHECK(cudaMemcpy(out.data() + size_t(g) * T * H, io[g].out, size_t(T) * H * sizeof(float),
                          cudaMemcpyDeviceToHost));
  return out;
}

// UnfusedMoe (P = 1) on the whole global batch.
std::vector<float> base_forward(mb::UnfusedMoe& base, const Inputs& in, cudaStream_t st) {
  const int G = in.global_tokens(), H = in.hidden;
  auto d_x = upload(in.xq.code), d_xs = upload(in.xq.scale), d_w = upload(in.routing.weight);
  DevBuf d_out(size_t(G) * H * sizeof(float));
  fill_now(d_out.p, 0xFF, size_t(G) * H * sizeof(float));
  base.set_routing(in.routing.index.data());  // [P][T][k] is [G][k]
  base.run(static_cast<const uint8_t*>(d_x->p), static_cast<const float*>(d_xs->p),
           static_cast<const float*>(d_w->p), static_cast<float*>(d_out.p), st);
  CUDA_CHECK(cudaStreamSynchronize(st));
  CUDA_CHECK(cudaGetLastError());
  std::vector<float> out(size_t(G) * H);
  CUDA_CHECK(cudaMemcpy(out.data(), d_out.p, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return out;
}

struct Refs {
  std::vector<float> p, fp32;  // [G][H]: the precision's reference and the fp32 one
};

Refs references(const moe::MoeReference& refp, const moe::MoeReference& ref32, const Inputs& in) {
  const int G = in.global_tokens(), K = in.topk;
  return {refp.forward(in.x.data(), G, in.routing.index.data(), in.routing.weight.data(), K),
          ref32.forward(in.x.data(), G, in.routing.index.data(), in.routing.weight.data(), K)};
}

// test_unfused_gpu.cpp's tolerance, on `tokens` tokens from `first` (one rank's slice of the global batch).
void check_vs_reference(const std::vector<float>& out, const Refs& ref, int first, int tokens, int H, double c_rms,
                        const std::string& what) {
  double se_k = 0, se_r = 0, max_k = 0, max_r = 0, max32 = 0;
  long long nan = 0;
  size_t n = 0;
  for (size_t i = size_t(first) * H; i < size_t(first + tokens) * H; ++i) {
    if (!std::isfinite(out[i])) {
      if (nan++ < 5) ADD_FAILURE() << what << ": token " << i / H << " channel " << i % H << ": " << out[i];
      continue;
    }
    const double dk = double(out[i]) - ref.p[i], dr = double(ref.p[i]) - ref.fp32[i];
    se_k += dk * dk;
    se_r += dr * dr;
    max_k = std::max(max_k, std::fabs(dk));
    max_r = std::max(max_r, std::fabs(dr));
    max32 = std::max(max32, std::fabs(double(ref.fp32[i])));
    ++n;
  }
  const double rms_k = n ? std::sqrt(se_k / n) : 0, rms_r = n ? std::sqrt(se_r / n) : 0;
  std::printf("%s: rms(out - ref) %.3e, rms(ref - fp32) %.3e, ratio %.3f (limit %.2f); max %.3e / %.3e; NaN %lld\n",
              what.c_str(), rms_k, rms_r, rms_r > 0 ? rms_k / rms_r : 0.0, c_rms, max_k, max_r, nan);
  EXPECT_EQ(nan, 0) << what;
  EXPECT_GT(rms_r, 0.0) << what;
  EXPECT_LE(rms_k, c_rms * rms_r) << what;
  EXPECT_LE(max_k, 2 * max_r + 1e-3 * max32) << what;
}

// Floats whose bits differ (the first few reported as failures).
long long bit_differences(const std::vector<float>& a, const std::vector<float>& b, int H, const std::string& what) {
  EXPECT_EQ(a.size(), b.size()) << what;
  long long n = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0 && n++ < 5)
      ADD_FAILURE() << what << ": token " << i / H << " channel " << i % H << ": " << a[i] << " vs " << b[i];
  return n;
}

// The plan recounted on the host from the routing: rows s -> d, rows received, rows per local expert.
void check_plan(const mb::UnfusedEpMoe& ep, const Inputs& in) {
  const int P = in.world, T = in.tokens, K = in.topk, el = ep.experts_per_rank();
  std::vector<int> cnt(size_t(P) * P, 0), per_expert(size_t(P) * el, 0);
  for (int s = 0; s < P; ++s)
    for (int t = 0; t < T; ++t)
      for (int j = 0; j < K; ++j) {
        const int e = in.routing.expert(s, t, j);
        ++cnt[size_t(s) * P + e / el];
        ++per_expert[size_t(e)];
      }
  for (int g = 0; g < ep.local_ranks(); ++g) {
    const int r = ep.first_rank() + g;
    int sent = 0, received = 0, padded = 0;
    for (int d = 0; d < P; ++d) {
      EXPECT_EQ(ep.send_count(g, d), cnt[size_t(r) * P + d]) << "rank " << r << " -> " << d;
      sent += ep.send_count(g, d);
      received += cnt[size_t(d) * P + r];
    }
    EXPECT_EQ(sent, T * K) << "rank " << r;
    EXPECT_EQ(ep.recv_rows(g), received) << "rank " << r;
    ASSERT_EQ(int(ep.expert_rows(g).size()), el);
    for (int le = 0; le < el; ++le) {
      EXPECT_EQ(ep.expert_rows(g)[le], per_expert[size_t(r) * el + le]) << "rank " << r << " local expert " << le;
      padded += (per_expert[size_t(r) * el + le] + mb::kRowAlign - 1) / mb::kRowAlign * mb::kRowAlign;
    }
    EXPECT_EQ(ep.padded_rows(g), padded) << "rank " << r;
  }
}

void run_case(const Case& c) {
  SCOPED_TRACE(name(c));
  const int P = c.world, T = c.tokens, H = c.hidden, I = c.inter, E = c.experts, K = c.topk;
  const uint32_t seed = test_seed() + 977u * P + 31u * T + 7u * H + E + K + (c.format == mb::WeightFormat::kInt4 ? 1000u : 0u);
  const moe::MoeWeights w = moe::random_moe_weights(H, I, E, seed);
  const Weights q = make_weights(w, c.format);
  const moe::Precision prec = c.format == mb::WeightFormat::kFp8 ? moe::Precision::W8A8 : moe::Precision::W4A8;
  const moe::MoeReference refp(w, prec), ref32(w, moe::Precision::Fp32);

  auto team = runtime::Team::emulated(P);
  ASSERT_EQ(team->local_ranks(), P);
  const mb::UnfusedOptions opt{c.force_requant};
  mb::UnfusedEpMoe ep(*team, {H, I, E, K, T}, c.format, opt);
  mb::UnfusedMoe base({H, I, E, K, P * T}, c.format, opt);
  std::printf("%s: int4 path: %s (%s)\n", name(c).c_str(), mb::to_string(ep.int4_path()), ep.int4_path_note().c_str());
  EXPECT_EQ(ep.int4_path(), base.int4_path());
  if (c.force_requant) {
    EXPECT_EQ(ep.int4_path(), mb::Int4Path::kRequant128x128);
  }
  EXPECT_DOUBLE_EQ(ep.flops(), 6.0 * T * K * double(H) * I);  // one rank's tokens
  EXPECT_EQ(ep.world(), P);
  EXPECT_EQ(ep.experts_per_rank(), E / P);
  set_ep_weights(ep, q);
  set_base_weights(base, q);
  const double c_rms = ep.int4_path() == mb::Int4Path::kRequant128x128 ? 0.75 : 0.5;
  cudaStream_t st = team->stream();

  for (int call = 0; call < c.calls; ++call) {
    SCOPED_TRACE("call " + std::to_string(call));
    // Repeated calls alternate the routing kind, so the receive-side buffers change size.
    const Route route = c.calls > 1 && call % 2 == 1 ? (c.route == Route::kSkewed ? Route::kBalanced : Route::kSkewed)
                                                     : c.route;
    const Inputs in = make_inputs(P, T, H, E, K, route, seed + 7919u * call);
    const std::vector<float> out = ep_forward(ep, in, st);
    check_plan(ep, in);
    int idle = 0;
    for (int g = 0; g < P; ++g) idle += ep.recv_rows(g) == 0;
    if (route == Route::kFirstRankOnly) {
      EXPECT_EQ(idle, P - 1);  // only rank 0 receives
      for (int g = 0; g < P; ++g)
        for (int d = 1; d < P; ++d) EXPECT_EQ(ep.send_count(g, d), 0);
    }
    const Refs ref = references(refp, ref32, in);
    for (int r = 0; r < P; ++r)
      check_vs_reference(out, ref, r * T, T, H, c_rms,
                         name(c) + " call " + std::to_string(call) + " rank " + std::to_string(r) + " (" +
                             std::to_string(ep.recv_rows(r)) + " rows received, " + std::to_string(idle) +
                             " idle ranks)");
    const std::vector<float> want = base_forward(base, in, st);
    const long long diff = bit_differences(out, want, H, name(c) + ": EP vs UnfusedMoe on the global batch");
    std::printf("%s call %d: %lld of %zu floats differ from UnfusedMoe (P = 1) on the %d-token global batch\n",
                name(c).c_str(), call, diff, out.size(), P * T);
    EXPECT_EQ(diff, 0);
  }
}

// One global batch through P = 1, 2, 4, 8 emulated ranks: every world size gives UnfusedMoe's bits.
void same_bits_at_every_world_size(mb::WeightFormat f) {
  const int G = 256, H = 256, I = 256, E = 16, K = 4;
  const uint32_t seed = test_seed() + 555u + (f == mb::WeightFormat::kInt4 ? 1000u : 0u);
  const moe::MoeWeights w = moe::random_moe_weights(H, I, E, seed);
  const Weights q = make_weights(w, f);
  // The routing of one rank of G tokens is the routing of P ranks of G/P tokens ([G][k] = [P][G/P][k]).
  Inputs in = make_inputs(1, G, H, E, K, Route::kSkewed, seed);
  mb::UnfusedMoe base({H, I, E, K, G}, f);
  set_base_weights(base, q);
  cudaStream_t st = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  const std::vector<float> want = base_forward(base, in, st);
  CUDA_CHECK(cudaStreamDestroy(st));
  for (int P : {1, 2, 4, 8}) {
    SCOPED_TRACE("P = " + std::to_string(P));
    Inputs inp = in;
    inp.world = P;
    inp.tokens = G / P;
    inp.routing.world = P;
    inp.routing.tokens_per_rank = G / P;
    auto team = runtime::Team::emulated(P);
    mb::UnfusedEpMoe ep(*team, {H, I, E, K, G / P}, f);
    EXPECT_EQ(ep.int4_path(), base.int4_path());
    set_ep_weights(ep, q);
    const std::vector<float> out = ep_forward(ep, inp, team->stream());
    check_plan(ep, inp);
    const long long diff = bit_differences(out, want, H, std::string(mb::to_string(f)) + " P = " + std::to_string(P));
    std::printf("%s, %d-token batch over P = %d emulated ranks: %lld floats differ from UnfusedMoe\n", mb::to_string(f),
                G, P, diff);
    EXPECT_EQ(diff, 0);
  }
}

// ---------------------------------------------------------------- real ranks: a world of one (this GPU)
// The NCCL path (ncclSend / ncclRecv to self in one group) on a real team of one rank, started as a child
// process by the local launcher; the child exits 0 when the output equals UnfusedMoe's bit for bit and is
// finite. Real teams of more ranks need more GPUs and are not tested here.
int scenario_real_world1() {
  return with_real_team(60, [](runtime::Team& team, runtime::Communicator&) {
    const int T = 96, H = 256, I = 256, E = 8, K = 2;
    const moe::MoeWeights w = moe::random_moe_weights(H, I, E, test_seed() + 99u);
    const Weights q = make_weights(w, mb::WeightFormat::kFp8);
    const Inputs in = make_inputs(1, T, H, E, K, Route::kSkewed, test_seed() + 99u);
    mb::UnfusedEpMoe ep(team, {H, I, E, K, T}, mb::WeightFormat::kFp8);
    set_ep_weights(ep, q);
    const std::vector<float> out = ep_forward(ep, in, team.stream());
    mb::UnfusedMoe base({H, I, E, K, T}, mb::WeightFormat::kFp8);
    set_base_weights(base, q);
    const std::vector<float> want = base_forward(base, in, team.stream());
    long long diff = 0, nonfinite = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      diff += std::memcmp(&out[i], &want[i], sizeof(float)) != 0;
      nonfinite += !std::isfinite(out[i]);
    }
    std::printf("real team of 1 rank (%s): %lld floats differ from UnfusedMoe, %lld not finite\n",
                team.label().c_str(), diff, nonfinite);
    return diff == 0 && nonfinite == 0 ? 0 : 1;
  });
}

}  // namespace

TEST(UnfusedEpGpu, W8A8P1MatchesUnfusedMoe) {
  NEED_SM90();
  run_case({1, 64, 256, 256, 8, 2});
}

TEST(UnfusedEpGpu, W8A8P2Skewed) {
  NEED_SM90();
  run_case({2, 100, 512, 256, 16, 4, Route::kSkewed});  // partial expert blocks, likely empty experts
}

TEST(UnfusedEpGpu, W8A8P4Balanced) {
  NEED_SM90();
  run_case({4, 64, 256, 256, 8, 2});
}

TEST(UnfusedEpGpu, W8A8P8Skewed) {
  NEED_SM90();
  run_case({8, 48, 256, 256, 16, 4, Route::kSkewed});
}

TEST(UnfusedEpGpu, W4A8P1MatchesUnfusedMoe) {
  NEED_SM90();
  run_case({1, 64, 256, 256, 8, 2, Route::kBalanced, mb::WeightFormat::kInt4});
}

TEST(UnfusedEpGpu, W4A8P2Balanced) {
  NEED_SM90();
  run_case({2, 64, 256, 384, 8, 2, Route::kBalanced, mb::WeightFormat::kInt4});
}

TEST(UnfusedEpGpu, W4A8P4Skewed) {
  NEED_SM90();
  run_case({4, 64, 512, 256, 16, 4, Route::kSkewed, mb::WeightFormat::kInt4});
}

TEST(UnfusedEpGpu, W4A8P8Balanced) {
  NEED_SM90();
  run_case({8, 32, 256, 256, 16, 2, Route::kBalanced, mb::WeightFormat::kInt4});
}

TEST(UnfusedEpGpu, W4A8RequantFallbackP2) {
  NEED_SM90();
  run_case({2, 64, 256, 256, 8, 2, Route::kBalanced, mb::WeightFormat::kInt4, true});
}

// Only rank 0 receives rows: the other ranks run no GEMM (W4A8 still converts their weights), their tokens are
// routed to no local expert, most experts are empty.
TEST(UnfusedEpGpu, IdleRanksAndEmptyExperts) {
  NEED_SM90();
  run_case({2, 64, 256, 256, 8, 2, Route::kFirstRankOnly});
  run_case({4, 96, 256, 256, 16, 2, Route::kFirstRankOnly});
  run_case({4, 64, 256, 256, 16, 2, Route::kFirstRankOnly, mb::WeightFormat::kInt4});
}

// Several calls on one object, routing kinds alternating (the receive-side buffers grow between calls).
TEST(UnfusedEpGpu, RepeatedCallsNewRouting) {
  NEED_SM90();
  run_case({4, 128, 256, 256, 8, 2, Route::kBalanced, mb::WeightFormat::kFp8, false, 3});
  run_case({2, 64, 256, 256, 8, 2, Route::kFirstRankOnly, mb::WeightFormat::kFp8, false, 2});
}

TEST(UnfusedEpGpu, SameBitsAtEveryWorldSizeW8A8) {
  NEED_SM90();
  same_bits_at_every_world_size(mb::WeightFormat::kFp8);
}

TEST(UnfusedEpGpu, SameBitsAtEveryWorldSizeW4A8) {
  NEED_SM90();
  same_bits_at_every_world_size(mb::WeightFormat::kInt4);
}

TEST(UnfusedEpRealChild, Scenario) { child_main({{"unfused_ep_real_world1", scenario_real_world1}}); }

TEST(UnfusedEpGpu, RealTeamOfOneRankMatchesUnfusedMoe) {
  NEED_SM90();
  EXPECT_EQ(run_child_ranks("UnfusedEpRealChild.*", "unfused_ep_real_world1", 1), 0);
}

// Validation and call order (a team needs a device).
TEST(UnfusedEpGpu, RejectsBadInput) {
  NEED_SM90();
  auto expect_usage = [](auto&& f, const std::string& needle) {
    try {
      f();
      ADD_FAILURE() << "no exception (expected one naming '" << needle << "')";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  auto team8 = runtime::Team::emulated(8);
  expect_usage([&] { mb::UnfusedEpMoe(*team8, {256, 256, 12, 2, 16}, mb::WeightFormat::kFp8); }, "experts = 12");
  expect_usage([&] { mb::UnfusedEpMoe(*team8, {256, 256, 12, 2, 16}, mb::WeightFormat::kInt4); }, "world size 8");
  expect_usage([&] { mb::UnfusedEpMoe(*team8, {200, 256, 16, 2, 16}, mb::WeightFormat::kFp8); }, "hidden = 200");
  expect_usage([&] { mb::UnfusedEpMoe(*team8, {256, 256, 16, 0, 16}, mb::WeightFormat::kFp8); }, "topk = 0");
  expect_usage([&] { mb::UnfusedEpMoe(*team8, {256, 256, 16, 2, 0}, mb::WeightFormat::kFp8); }, "tokens = 0");

  const int P = 2, T = 16, H = 256, I = 256, E = 8, K = 2;
  auto team = runtime::Team::emulated(P);
  mb::UnfusedEpMoe ep(*team, {H, I, E, K, T}, mb::WeightFormat::kFp8);
  DevBuf w1(size_t(E) * 2 * I * H), w2(size_t(E) * H * I), w1s(1 << 16), w2s(1 << 16);
  CUDA_CHECK(cudaMemset(w1.p, 0, size_t(E) * 2 * I * H));
  CUDA_CHECK(cudaMemset(w2.p, 0, size_t(E) * H * I));
  CUDA_CHECK(cudaMemset(w1s.p, 0, 1 << 16));
  CUDA_CHECK(cudaMemset(w2s.p, 0, 1 << 16));
  DevBuf x(size_t(T) * H), xs(size_t(T) * (H / 128) * 4), wt(size_t(T) * K * 4), out(size_t(T) * H * 4);
  for (DevBuf* b : {&x, &xs, &wt}) CUDA_CHECK(cudaMemset(b->p, 0, b == &x ? size_t(T) * H : b == &xs ? size_t(T) * (H / 128) * 4 : size_t(T) * K * 4));
  std::vector<mb::UnfusedRankIO> io(P, {static_cast<const uint8_t*>(x.p), static_cast<const float*>(xs.p),
                                        static_cast<const float*>(wt.p), static_cast<float*>(out.p)});
  auto set = [&](int g) {
    ep.set_weights(g, static_cast<const uint8_t*>(w1.p), static_cast<const float*>(w1s.p),
                   static_cast<const uint8_t*>(w2.p), static_cast<const float*>(w2s.p));
  };
  expect_usage([&] { ep.run(io.data(), team->stream()); }, "set_weights has not been called for local rank 0");
  expect_usage([&] { set(2); }, "g = 2");
  expect_usage([&] { set(-1); }, "g = -1");
  set(0);
  expect_usage([&] { ep.run(io.data(), team->stream()); }, "set_weights has not been called for local rank 1");
  set(1);
  expect_usage([&] { ep.run(io.data(), team->stream()); }, "set_routing has not been called");
  expect_usage([&] { ep.set_routing(nullptr); }, "null");

  std::vector<int32_t> index(size_t(P) * T * K);
  for (size_t i = 0; i < index.size(); i += K) index[i] = 0, index[i + 1] = 5;  // experts 0 (rank 0), 5 (rank 1)
  index[(size_t(1) * T + 5) * K + 1] = E;  // rank 1, token 5, slot 1 out of range
  expect_usage([&] { ep.set_routing(index.data()); }, "rank 1, token 5, slot 1");
  index[(size_t(1) * T + 5) * K + 1] = 0;  // repeats slot 0
  expect_usage([&] { ep.set_routing(index.data()); }, "repeats slot 0");
  index[(size_t(1) * T + 5) * K + 1] = 5;
  ep.set_routing(index.data());
  for (int g = 0; g < P; ++g) {
    EXPECT_EQ(ep.send_count(g, 0), T);
    EXPECT_EQ(ep.send_count(g, 1), T);
    EXPECT_EQ(ep.recv_rows(g), P * T);
  }
  EXPECT_EQ(ep.expert_rows(1)[1], P * T);  // expert 5 = rank 1's local expert 1
  expect_usage([&] { ep.send_count(0, 2); }, "d = 2");
  expect_usage([&] { ep.recv_rows(3); }, "g = 3");
  expect_usage([&] { ep.run(nullptr, team->stream()); }, "io is null");
  io[1].x = nullptr;
  expect_usage([&] { ep.run(io.data(), team->stream()); }, "io[1] (rank 1).x is null");
  io[1].x = static_cast<const uint8_t*>(x.p);
  io[0].out = reinterpret_cast<float*>(static_cast<char*>(out.p) + 4);
  expect_usage([&] { ep.run(io.data(), team->stream()); }, "io[0] (rank 0).out must be 16-byte aligned");
  io[0].out = static_cast<float*>(out.p);
  ep.run(io.data(), team->stream());  // zero weights and activations: valid, and must run
  CUDA_CHECK(cudaStreamSynchronize(team->stream()));
}
