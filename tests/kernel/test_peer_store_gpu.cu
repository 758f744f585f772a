// GPU tests of the kernel foundation (label gpu): ranks emulated on one GPU (P = 2, 4, 8) and real (P = 2,
// two processes, skipped below 2 GPUs); the attention kernel's peer-store epilogue (every output tile to
// its destination rank: the Ulysses post-attention all-to-all) against the local epilogue, byte for byte;
// completion signals and their timeout.
//
// Exactness: the peer-store epilogue stages the same fragments in shared memory and stores them with TMA
// exactly as the local epilogue does, so the gathered output must equal the local output bit for bit
// (no tolerance). Outputs are poisoned (0xFF bytes) before each call and every byte is compared.
// Each case prints one "[xstage-result]" line that scripts/foundation-summary.py collects.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "../common/gpu_test.hpp"
#include "sm90_fwd.hpp"
#include "xstage/attention.h"
#include "xstage/common/error.hpp"
#include "xstage/runtime/comm.hpp"
#include "xstage/runtime/launcher.hpp"
#include "xstage/runtime/team.hpp"

using namespace xstage;

namespace {
using namespace xstage::testing_gpu;

struct Case {
  int world, batch, seq_per_rank, heads, dim;
  bool bf16;
};

struct Outcome {
  long long wrong_bytes = 0;
  long long bad_counters = 0;
};

// Runs the head-partitioned attention of every rank this team serves twice (epochs 1 and 2) through the
// peer-store epilogue into the team buffer, and compares what every destination this process holds gathered,
// from every source rank, byte for byte with the local epilogue's output; checks the completion counters.
// Inputs: one global batch of world x batch entries from one seed, the same on every process; rank s owns
// entries [s * batch, (s + 1) * batch). So a real rank can compute what a peer's tiles must hold (the local
// epilogue over the whole global batch), and a tile stored from the wrong source or to the wrong place differs.
Outcome run_case(runtime::Team& team, const Case& c) {
  const int G = team.local_ranks(), GB = c.world * c.batch, S = c.world * c.seq_per_rank;
  const size_t per_entry = size_t(S) * c.heads * c.dim;
  const size_t elems = size_t(GB) * per_entry;
  std::mt19937 rng(test_seed() + 977u * c.world + 31u * c.seq_per_rank + c.dim);
  DevBuf q(elems * 2), k(elems * 2), v(elems * 2), o_ref(elems * 2);
  for (void* p : {q.p, k.p, v.p}) {
    const auto h = random_halves(elems, c.bf16, rng);
    CUDA_CHECK(cudaMemcpy(p, h.data(), elems * 2, cudaMemcpyHostToDevice));
  }
  xstage_attn_fwd_params ref{};  // the whole global batch through the local epilogue
  ref.q = q.p;
  ref.k = k.p;
  ref.v = v.p;
  ref.o = o_ref.p;
  ref.batch = GB;
  ref.seqlen_q = ref.seqlen_kv = S;
  ref.heads = c.heads;
  ref.head_dim = c.dim;
  const int64_t st[3] = {int64_t(S) * c.heads * c.dim, int64_t(c.heads) * c.dim, c.dim};
  for (int i = 0; i < 3; ++i) ref.q_stride[i] = ref.k_stride[i] = ref.v_stride[i] = ref.o_stride[i] = st[i];
  ref.dtype = c.bf16 ? XSTAGE_DTYPE_BF16 : XSTAGE_DTYPE_FP16;
  if (xstage_attn_fwd(&ref, team.stream()) != XSTAGE_OK) throw std::runtime_error(xstage_last_error());

  // This process's launch: the entries of the ranks it serves (all of them when emulated).
  const size_t first = size_t(team.first_rank()) * c.batch * per_entry * 2;
  xstage_attn_fwd_params p = ref;
  p.q = static_cast<const char*>(q.p) + first;
  p.k = static_cast<const char*>(k.p) + first;
  p.v = static_cast<const char*>(v.p) + first;
  p.o = nullptr;  // the peer-store epilogue writes the team buffer only
  p.batch = G * c.batch;

  const int heads_total = c.world * c.heads;
  const size_t out_elems = size_t(c.batch) * c.seq_per_rank * heads_total * c.dim;
  auto out = team.alloc(out_elems * 2, "attention output");
  runtime::SignalSet sig(team, 1, "signals");
  const attention::PeerOutput po = attention::contiguous_peer_output(team, out->peers(), c.batch, c.seq_per_rank,
                                                                     heads_total, c.dim, sig.table(), 0);
  if (const auto why = attention::check_peer_output(p, po); !why.empty()) throw std::runtime_error(why);

  Outcome res;
  std::vector<uint16_t> want_all(elems), got(out_elems);
  CUDA_CHECK(cudaStreamSynchronize(team.stream()));
  CUDA_CHECK(cudaMemcpy(want_all.data(), o_ref.p, elems * 2, cudaMemcpyDeviceToHost));
  for (uint32_t epoch = 1; epoch <= 2; ++epoch) {
    for (int r = team.first_rank(); r < team.first_rank() + G; ++r)
      fill_now(out->local(r), 0xFF, out_elems * 2);
    team.barrier();  // every rank's destination is poisoned before anyone stores into it
    int ctas = 0;
    CUDA_CHECK(attention::run_fwd_sm90_to_peers(p, po, &ctas, team.stream()));
    sig.wait(0, epoch * uint32_t(ctas), team.stream());
    team.check("peer-store attention");
    for (int d = team.first_rank(); d < team.first_rank() + G; ++d) {
      for (int s = 0; s < c.world; ++s)
        if (sig.read(d, 0, s) != epoch * uint32_t(ctas)) ++res.bad_counters;
      CUDA_CHECK(cudaMemcpy(got.data(), out->local(d), out_elems * 2, cudaMemcpyDeviceToHost));
      // Destination d, row r, head s*heads + h holds source s's row d*spr + r of head h: global entry
      // s*batch + b. Every source is checked, the peers' tiles of a real rank included.
      for (int b = 0; b < c.batch; ++b)
        for (int r = 0; r < c.seq_per_rank; ++r)
          for (int s = 0; s < c.world; ++s) {
            const int gb = s * c.batch + b;
            for (int h = 0; h < c.heads; ++h) {
              const uint16_t* want = &want_all[((size_t(gb) * S + size_t(d) * c.seq_per_rank + r) * c.heads + h) * c.dim];
              const uint16_t* have = &got[((size_t(b) * c.seq_per_rank + r) * heads_total + s * c.heads + h) * c.dim];
              for (int i = 0; i < c.dim; ++i) {
                const uint16_t x = want[i] ^ have[i];
                res.wrong_bytes += (x & 0xFF) != 0;
                res.wrong_bytes += (x >> 8) != 0;
              }
            }
          }
    }
  }
  return res;
}

void report(const char* mode, const Case& c, const Outcome& o) {
  std::printf("[xstage-result] mode=%s world=%d batch=%d seq_per_rank=%d heads=%d dim=%d dtype=%s wrong_bytes=%lld "
              "bad_counters=%lld\n",
              mode, c.world, c.batch, c.seq_per_rank, c.heads, c.dim, c.bf16 ? "bf16" : "fp16", o.wrong_bytes,
              o.bad_counters);
  std::fflush(stdout);
}

}  // namespace

// Tile rows straddle destinations (seq_per_rank 100, 1000: not multiples of 64), one head per rank, both
// head dims and dtypes, batch 2.
TEST(PeerStoreEmulated, EveryTileByteExactAtItsDestination) {
  NEED_SM90();
  const Case cases[] = {
      {2, 1, 128, 3, 128, true}, {2, 2, 100, 1, 64, false}, {2, 1, 1000, 2, 128, false},
      {4, 1, 100, 2, 128, true}, {4, 2, 256, 1, 64, true},  {4, 1, 333, 3, 64, false},
      {8, 1, 64, 3, 128, true},  {8, 2, 100, 1, 128, false}, {8, 1, 250, 2, 64, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "P " << c.world << " batch " << c.batch << " spr " << c.seq_per_rank
                                    << " heads " << c.heads << " D " << c.dim << (c.bf16 ? " bf16" : " fp16"));
    auto team = runtime::Team::emulated(c.world);
    const Outcome o = run_case(*team, c);
    report("emulated", c, o);
    EXPECT_EQ(o.wrong_bytes, 0);
    EXPECT_EQ(o.bad_counters, 0);
  }
}

TEST(PeerStoreEmulated, SignalTimeoutNamesTheMissingPeer) {
  NEED_SM90();
  auto team = runtime::Team::emulated(2, -1, /*timeout_s=*/0.2);
  runtime::SignalSet sig(*team, 2, "signals");
  // Rank 0 has signalled slot 1 of both ranks; rank 1 never does.
  const uint32_t one = 1;
  for (int d = 0; d < 2; ++d)
    CUDA_CHECK(cudaMemcpy(sig.table().at<char>(d, runtime::signal_offset(2, 1, 0)), &one, 4, cudaMemcpyHostToDevice));
  sig.wait(1, 1, team->stream());
  try {
    team->check("signal wait");
    FAIL() << "a wait for a signal that never comes must fail";
  } catch (const RuntimeError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("waiting for rank 1 on signal slot 1"), std::string::npos) << m;
    EXPECT_NE(m.find("saw 0, needed >= 1"), std::string::npos) << m;
  }
  // The record is cleared: a wait that is satisfied passes.
  sig.wait(1, 0, team->stream());
  EXPECT_NO_THROW(team->check("satisfied wait"));
}

TEST(PeerStoreEmulated, BadInputIsNamed) {
  NEED_SM90();
  EXPECT_THROW(runtime::Team::emulated(0), UsageError);
  try {
    runtime::Team::emulated(runtime::kMaxRanks + 1);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("got 9"), std::string::npos) << e.what();
  }
  auto team = runtime::Team::emulated(4);
  auto buf = team->alloc(4096, "x");
  EXPECT_THROW(team->alloc(0, "empty"), UsageError);
  attention::PeerOutput po;
  po.view = team->view();
  po.batch = 1;
  po.seq_per_rank = 100;
  po.sms_per_rank = team->sms_per_rank();
  xstage_attn_fwd_params p{};
  p.batch = 4;
  p.seqlen_q = 401;  // not world * seq_per_rank
  EXPECT_NE(attention::check_peer_output(p, po).find("seqlen_q 401 must be world (4) x seq_per_rank (100)"),
            std::string::npos);
  p.seqlen_q = 400;
  p.batch = 3;
  EXPECT_NE(attention::check_peer_output(p, po).find("launch batch 3"), std::string::npos);
}

// ---------------------------------------------------------------- real ranks (2 processes, 2 GPUs)
namespace {
int scenario_real_peer_store() {
  return with_real_team(30, [](runtime::Team& team, runtime::Communicator& comm) {
    bool ok = true;
    for (const Case& c : {Case{comm.size(), 1, 100, 2, 128, true}, Case{comm.size(), 2, 512, 3, 64, false}}) {
      const Outcome res = run_case(team, c);
      report("real", c, res);
      ok = ok && res.wrong_bytes == 0 && res.bad_counters == 0;
    }
    return ok ? 0 : 1;
  });
}
}  // namespace

TEST(PeerStoreRealChild, Scenario) { child_main({{"real_peer_store", scenario_real_peer_store}}); }

TEST(PeerStoreReal, EveryTileByteExactAtItsDestination) {
  NEED_SM90();
  NEED_GPUS(2);
  EXPECT_EQ(run_child_ranks("PeerStoreRealChild.*", "real_peer_store", 2), 0);
}
