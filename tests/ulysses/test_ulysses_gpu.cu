// GPU tests of the Ulysses layer (label gpu): ranks emulated on one H200 (P = 2, 4, 8) and real (P = 2 in two
// processes, skipped below 2 GPUs). Exact checks (no tolerance):
//   - Fused (all-to-all in the attention epilogue) equals Serial (attention, then the all-to-all) bit for bit;
//   - the layer equals the single-GPU attention of the gathered tensors (same kernel, every head over the
//     full sequence) bit for bit: the layer moves bytes, it computes nothing else.
// Odd sizes: seq_per_rank not a multiple of the 64-row tile (tiles straddle two ranks), heads per rank 1,
// D 64 and 128, bf16 and fp16, batch 2. Outputs are poisoned before every call.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../common/gpu_test.hpp"
#include "ulysses_layer.hpp"
#include "xstage/attention.h"
#include "xstage/common/error.hpp"
#include "xstage/runtime/comm.hpp"
#include "xstage/runtime/launcher.hpp"
#include "xstage/runtime/team.hpp"

using namespace xstage;

namespace {
using namespace xstage::testing_gpu;

struct Case {
  int world, batch, seq_per_rank, heads_per_rank, dim;
  bool bf16;
};

struct Outcome {
  long long fused_vs_serial = 0;     // differing 16-bit elements
  long long layer_vs_single = 0;     // differing elements against the gathered single-GPU attention
};

// Inputs of every rank are generated from one seed (all ranks agree on the whole tensors); this process
// checks the ranks it serves.
Outcome run_case(runtime::Team& team, const Case& c) {
  const int P = c.world, H = P * c.heads_per_rank, S = P * c.seq_per_rank, D = c.dim;
  const size_t full = size_t(c.batch) * S * H * D, local = full / P;
  std::mt19937 rng(test_seed() + 131u * P + c.seq_per_rank + D);
  std::vector<uint16_t> hq = random_halves(full, c.bf16, rng), hk = random_halves(full, c.bf16, rng),
                        hv = random_halves(full, c.bf16, rng);
  // Single-GPU reference: all heads over the full sequence, [batch, S, H, D].
  void *dq, *dk, *dv, *dref;
  for (void** p : {&dq, &dk, &dv, &dref}) CUDA_CHECK(cudaMalloc(p, full * 2));
  CUDA_CHECK(cudaMemcpy(dq, hq.data(), full * 2, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dk, hk.data(), full * 2, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dv, hv.data(), full * 2, cudaMemcpyHostToDevice));
  xstage_attn_fwd_params p{};
  p.q = dq;
  p.k = dk;
  p.v = dv;
  p.o = dref;
  p.batch = c.batch;
  p.seqlen_q = p.seqlen_kv = S;
  p.heads = H;
  p.head_dim = D;
  const int64_t st[3] = {int64_t(S) * H * D, int64_t(H) * D, D};
  for (int i = 0; i < 3; ++i) p.q_stride[i] = p.k_stride[i] = p.v_stride[i] = p.o_stride[i] = st[i];
  p.dtype = c.bf16 ? XSTAGE_DTYPE_BF16 : XSTAGE_DTYPE_FP16;
  if (xstage_attn_fwd(&p, nullptr) != XSTAGE_OK) throw std::runtime_error(xstage_last_error());
  std::vector<uint16_t> ref(full);
  CUDA_CHECK(cudaMemcpy(ref.data(), dref, full * 2, cudaMemcpyDeviceToHost));
  for (void* x : {dq, dk, dv, dref}) cudaFree(x);

  // Each local rank's sequence slice [batch, spr, H, D] of q, k, v.
  const int G = team.local_ranks();
  std::vector<void*> q(G), k(G), v(G);
  std::vector<uint16_t> slice(local);
  auto upload = [&](const std::vector<uint16_t>& src, int rank, void** dst) {
    CUDA_CHECK(cudaMalloc(dst, local * 2));
    for (int b = 0; b < c.batch; ++b)
      std::memcpy(&slice[size_t(b) * c.seq_per_rank * H * D],
                  &src[(size_t(b) * S + size_t(rank) * c.seq_per_rank) * H * D], size_t(c.seq_per_rank) * H * D * 2);
    CUDA_CHECK(cudaMemcpy(*dst, slice.data(), local * 2, cudaMemcpyHostToDevice));
  };
  for (int g = 0; g < G; ++g) {
    upload(hq, team.first_rank() + g, &q[g]);
    upload(hk, team.first_rank() + g, &k[g]);
    upload(hv, team.first_rank() + g, &v[g]);
  }
  ulysses::Shape shape;
  shape.batch = c.batch;
  shape.seq_per_rank = c.seq_per_rank;
  shape.heads = H;
  shape.head_dim = D;
  shape.dtype = p.dtype;
  ulysses::Layer layer(team, shape);
  Outcome res;
  std::vector<uint16_t> got(local);
  const ulysses::Variant order[3] = {ulysses::Variant::kFused, ulysses::Variant::kSerial, ulysses::Variant::kFused};
  std::vector<std::vector<uint16_t>> outs[3];
  for (int it = 0; it < 3; ++it) {
    for (int g = 0; g < G; ++g) CUDA_CHECK(cudaMemset(layer.next_output(team.first_rank() + g), 0xFF, local * 2));
    CUDA_CHECK(cudaDeviceSynchronize());
    team.barrier();  // every rank's next output is poisoned before any rank stores into it
    layer.forward(q.data(), k.data(), v.data(), order[it], team.stream());
    team.check(it == 1 ? "ulysses serial" : "ulysses fused");
    for (int g = 0; g < G; ++g) {
      CUDA_CHECK(cudaMemcpy(got.data(), layer.output(team.first_rank() + g), local * 2, cudaMemcpyDeviceToHost));
      outs[it].push_back(got);
    }
  }
  for (int g = 0; g < G; ++g) {
    const int r = team.first_rank() + g;
    for (size_t i = 0; i < local; ++i) {
      res.fused_vs_serial += outs[0][g][i] != outs[1][g][i];
      res.fused_vs_serial += outs[2][g][i] != outs[1][g][i];
    }
    for (int b = 0; b < c.batch; ++b)
      for (int t = 0; t < c.seq_per_rank; ++t)
        for (int e = 0; e < H * D; ++e) {
          const uint16_t want = ref[(size_t(b) * S + size_t(r) * c.seq_per_rank + t) * H * D + e];
          res.layer_vs_single += outs[0][g][(size_t(b) * c.seq_per_rank + t) * H * D + e] != want;
        }
  }
  team.barrier();
  for (int g = 0; g < G; ++g) {
    cudaFree(q[g]);
    cudaFree(k[g]);
    cudaFree(v[g]);
  }
  return res;
}

void report(const char* mode, const Case& c, const Outcome& o) {
  std::printf("[xstage-result] test=ulysses mode=%s world=%d batch=%d seq_per_rank=%d heads_per_rank=%d dim=%d "
              "dtype=%s fused_vs_serial=%lld layer_vs_single_gpu=%lld\n",
              mode, c.world, c.batch, c.seq_per_rank, c.heads_per_rank, c.dim, c.bf16 ? "bf16" : "fp16",
              o.fused_vs_serial, o.layer_vs_single);
  std::fflush(stdout);
}

int scenario_real() {
  return with_real_team(30, [](runtime::Team& team, runtime::Communicator& comm) {
    bool ok = true;
    for (const Case& c : {Case{comm.size(), 1, 100, 1, 128, true}, Case{comm.size(), 2, 640, 3, 64, false}}) {
      const Outcome r = run_case(team, c);
      report("real", c, r);
      ok = ok && r.fused_vs_serial == 0 && r.layer_vs_single == 0;
    }
    return ok ? 0 : 1;
  });
}

// Rank 1 of 2 never calls the layer: rank 0's wait for its pre-attention data must time out naming rank 1.
int missing_peer(runtime::Team& team_ref, runtime::Communicator& comm);
int scenario_missing_peer() {
  return with_real_team(5, [](runtime::Team& team, runtime::Communicator& comm) { return missing_peer(team, comm); });
}

int missing_peer(runtime::Team& team_ref, runtime::Communicator& comm) {
  runtime::Team* team = &team_ref;
  ulysses::Shape shape;
  shape.seq_per_rank = 128;
  shape.heads = 2 * comm.size();
  ulysses::Layer layer(*team, shape);
  team->barrier();
  if (comm.rank() == 1) {  // alive (its buffers stay mapped) but never calls the layer
    std::this_thread::sleep_for(std::chrono::seconds(10));
    return 0;
  }
  void *q = nullptr;
  CUDA_CHECK(cudaMalloc(&q, layer.tensor_bytes()));
  CUDA_CHECK(cudaMemset(q, 0, layer.tensor_bytes()));
  const void* qs[1] = {q};
  layer.forward(qs, qs, qs, ulysses::Variant::kFused, team->stream());
  try {
    team->check("ulysses forward");
  } catch (const RuntimeError& e) {
    const std::string m = e.what();
    std::fprintf(stderr, "expected failure: %s\n", m.c_str());
    return m.find("waiting for rank 1") != std::string::npos ? 0 : 1;
  }
  return 1;
}
}  // namespace

TEST(UlyssesEmulated, FusedEqualsSerialAndSingleGpuBitForBit) {
  NEED_SM90();
  const Case cases[] = {
      {2, 1, 512, 3, 128, true},  {2, 2, 100, 1, 64, false}, {4, 1, 333, 2, 128, false},
      {4, 1, 256, 1, 64, true},   {8, 1, 100, 3, 128, true}, {8, 2, 64, 1, 64, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "P " << c.world << " batch " << c.batch << " spr " << c.seq_per_rank << " hp "
                                    << c.heads_per_rank << " D " << c.dim);
    auto team = runtime::Team::emulated(c.world);
    const Outcome o = run_case(*team, c);
    report("emulated", c, o);
    EXPECT_EQ(o.fused_vs_serial, 0);
    EXPECT_EQ(o.layer_vs_single, 0);
  }
}

TEST(UlyssesEmulated, BadShapesAreNamed) {
  NEED_SM90();
  auto team = runtime::Team::emulated(4);
  ulysses::Shape s;
  s.seq_per_rank = 64;
  s.heads = 6;  // not divisible by 4
  try {
    ulysses::Layer layer(*team, s);
    FAIL() << "heads 6 over 4 ranks must be refused";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("heads = 6 is not divisible by the world size 4"), std::string::npos) << e.what();
  }
  s.heads = 8;
  s.head_dim = 96;
  EXPECT_THROW(ulysses::Layer(*team, s), UsageError);
}

TEST(UlyssesEmulated, RefusedCallKeepsTheOutputBuffers) {
  // A call refused for a null input must not turn the epoch: the outputs are double-buffered by epoch, and a turned
  // epoch would hand the next call the buffer the last call returned (valid "until the second next call").
  NEED_SM90();
  auto team = runtime::Team::emulated(2);
  ulysses::Shape s;
  s.seq_per_rank = 64;
  s.heads = 2;
  s.head_dim = 64;
  ulysses::Layer layer(*team, s);
  const size_t bytes = size_t(s.batch) * s.seq_per_rank * s.heads * s.head_dim * 2;
  void* in[2] = {};
  for (auto& p : in) {
    ASSERT_EQ(cudaMalloc(&p, bytes), cudaSuccess);
    ASSERT_EQ(cudaMemset(p, 0x3c, bytes), cudaSuccess);  // bf16 ~0.0117 everywhere: finite inputs
  }
  const void* const q[2] = {in[0], in[1]};
  const void* const null_q[2] = {in[0], nullptr};
  layer.forward(q, q, q, ulysses::Variant::kFused, team->stream());
  const void* first = layer.output(0);
  EXPECT_THROW(layer.forward(null_q, q, q, ulysses::Variant::kFused, team->stream()), UsageError);
  EXPECT_EQ(layer.output(0), first) << "the refused call turned the epoch";
  layer.forward(q, q, q, ulysses::Variant::kFused, team->stream());
  EXPECT_NE(layer.output(0), first) << "the next call wrote the buffer the last call returned";
  team->check("ulysses after a refused call");
  for (auto p : in) cudaFree(p);
}

TEST(UlyssesRealChild, Scenario) {
  child_main({{"ulysses_real", scenario_real}, {"ulysses_missing", scenario_missing_peer}});
}

TEST(UlyssesReal, FusedEqualsSerialAndSingleGpuBitForBit) {
  NEED_SM90();
  NEED_GPUS(2);
  EXPECT_EQ(run_child_ranks("UlyssesRealChild.*", "ulysses_real", 2), 0);
}

TEST(UlyssesReal, MissingPeerTimesOutNamingIt) {
  NEED_SM90();
  NEED_GPUS(2);
  EXPECT_EQ(run_child_ranks("UlyssesRealChild.*", "ulysses_missing", 2), 0);
}
