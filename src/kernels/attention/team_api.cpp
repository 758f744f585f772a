// C ABI of teams and symmetric buffers (xstage/team.h) over runtime::Team, and the attention entry whose
// epilogue stores every output tile to its destination rank.
#include <cmath>
#include <cstring>
#include <exception>
#include <memory>
#include <string>

#include "api_internal.hpp"
#include "team_internal.hpp"
#include "sm90_fwd.hpp"
#include "xstage/common/error.hpp"
#include "xstage/runtime/comm.hpp"
#include "xstage/runtime/env.hpp"
#include "xstage/runtime/team.hpp"
#include "xstage/team.h"

using xstage::attention::capi::guarded;
using xstage::attention::capi::set_error;

namespace {
constexpr int kSlotAttnOut = 0;  // signal slot of the attention all-to-all output
constexpr int kSignalSlots = 4;

}  // namespace

extern "C" int xstage_nccl_unique_id(unsigned char* out, int out_bytes) {
  return guarded([&] {
    if (out == nullptr) return set_error(XSTAGE_ERR_INVALID, "the unique id's buffer is null");
    if (out_bytes < XSTAGE_NCCL_ID_BYTES)
      return set_error(XSTAGE_ERR_INVALID, "the unique id needs a buffer of " + std::to_string(XSTAGE_NCCL_ID_BYTES) +
                                               " bytes, got " + std::to_string(out_bytes));
    std::string hex = xstage::runtime::new_unique_id_hex();
    xstage::runtime::from_hex(hex, out, XSTAGE_NCCL_ID_BYTES, "NCCL unique id");
    return int(XSTAGE_OK);
  });
}

extern "C" int xstage_team_create_nccl(int rank, int world, int device, const unsigned char* id, int id_bytes,
                                       double timeout_s, xstage_team* out) {
  return guarded([&] {
    if (out == nullptr) return set_error(XSTAGE_ERR_INVALID, "out is null");
    *out = nullptr;
    XSTAGE_REQUIRE(world >= 1, "world size must be >= 1, got ", world);
    XSTAGE_REQUIRE(rank >= 0 && rank < world, "rank ", rank, " is outside [0, ", world, ")");
    XSTAGE_REQUIRE(device >= 0, "device must be >= 0, got ", device);
    XSTAGE_REQUIRE(id != nullptr && id_bytes == XSTAGE_NCCL_ID_BYTES, "the NCCL unique id must be ",
                   XSTAGE_NCCL_ID_BYTES, " bytes, got ", id == nullptr ? 0 : id_bytes);
    xstage::runtime::require_timeout(timeout_s);
    int ndev = 0;
    if (cudaError_t e = cudaGetDeviceCount(&ndev); e != cudaSuccess)
      return xstage::attention::capi::cuda_fail("cudaGetDeviceCount", e);
    XSTAGE_REQUIRE(device < ndev, "rank ", rank, ": device ", device, " does not exist (", ndev, " visible)");
    xstage::runtime::LaunchInfo info;
    info.launcher = "capi";
    info.rank = rank;
    info.world_size = world;
    info.local_rank = device;
    info.id_hex = xstage::runtime::to_hex(id, XSTAGE_NCCL_ID_BYTES);
    xstage::runtime::CommOptions opt;
    opt.timeout_s = timeout_s;
    auto t = std::make_unique<xstage_team_s>();
    t->comm = std::make_unique<xstage::runtime::Communicator>(info, opt);
    t->team = xstage::runtime::Team::real(*t->comm);
    t->signals = std::make_unique<xstage::runtime::SignalSet>(*t->team, kSignalSlots, "signals");
    *out = t.release();
    return int(XSTAGE_OK);
  });
}

extern "C" int xstage_team_create_emulated(int world, int device, double timeout_s, xstage_team* out) {
  return guarded([&] {
    if (out == nullptr) return set_error(XSTAGE_ERR_INVALID, "out is null");
    *out = nullptr;
    auto t = std::make_unique<xstage_team_s>();
    t->team = xstage::runtime::Team::emulated(world, device, timeout_s);
    t->signals = std::make_unique<xstage::runtime::SignalSet>(*t->team, kSignalSlots, "signals");
    *out = t.release();
    return int(XSTAGE_OK);
  });
}

extern "C" void xstage_team_destroy(xstage_team team) {
  if (team == nullptr) return;
  team->signals.reset();
  team->team.reset();
  team->comm.reset();
  delete team;
}

extern "C" int xstage_team_info(xstage_team team, int* world, int* first_rank, int* local_ranks, int* emulated,
                                int* sms_per_rank) {
  if (team == nullptr) return set_error(XSTAGE_ERR_INVALID, "team is null");
  const auto& t = *team->team;
  if (world) *world = t.world();
  if (first_rank) *first_rank = t.first_rank();
  if (local_ranks) *local_ranks = t.local_ranks();
  if (emulated) *emulated = t.is_emulated();
  if (sms_per_rank) *sms_per_rank = t.sms_per_rank();
  xstage::attention::capi::clear_error();  // (as every entry point: "" after a success)
  return XSTAGE_OK;
}

extern "C" int xstage_team_label(xstage_team team, char* buf, int buf_bytes) {
  if (team == nullptr) return set_error(XSTAGE_ERR_INVALID, "team is null");
  if (buf == nullptr || buf_bytes < 1) return set_error(XSTAGE_ERR_INVALID, "label buffer is empty");
  const std::string s = team->team->label();
  std::strncpy(buf, s.c_str(), size_t(buf_bytes) - 1);
  buf[buf_bytes - 1] = '\0';
  xstage::attention::capi::clear_error();
  return XSTAGE_OK;
}

extern "C" int xstage_team_check(xstage_team team, void* stream, const char* what) {
  if (team == nullptr) return set_error(XSTAGE_ERR_INVALID, "team is null");
  return guarded([&] {
    const std::string w = what ? what : "team work";
    if (cudaError_t e = cudaStreamSynchronize(static_cast<cudaStream_t>(stream)); e != cudaSuccess)
      return xstage::attention::capi::cuda_fail(w.c_str(), e);
    team->team->check(w);
    return int(XSTAGE_OK);
  });
}

extern "C" int xstage_buffer_alloc(xstage_team team, size_t bytes, const char* name, xstage_buffer* out) {
  if (team == nullptr) return set_error(XSTAGE_ERR_INVALID, "team is null");
  if (out == nullptr) return set_error(XSTAGE_ERR_INVALID, "out is null");
  return guarded([&] {
    *out = nullptr;
    auto b = std::make_unique<xstage_buffer_s>();
    b->team = team;
    b->buf = team->team->alloc(bytes, name ? name : "buffer");
    *out = b.release();
    return int(XSTAGE_OK);
  });
}

extern "C" void xstage_buffer_free(xstage_buffer buf) { delete buf; }

extern "C" void* xstage_buffer_ptr(xstage_buffer buf, int rank) {
  if (buf == nullptr) {
    set_error(XSTAGE_ERR_INVALID, "buffer is null");
    return nullptr;
  }
  void* p = nullptr;
  guarded([&] {
    p = buf->buf->local(rank);
    return int(XSTAGE_OK);
  });
  return p;
}

extern "C" int xstage_attn_fwd_to_peers(const xstage_attn_fwd_params* p, xstage_team team, xstage_buffer out,
                                        int seq_per_rank, uint32_t epoch, void* stream) {
  if (team == nullptr) return set_error(XSTAGE_ERR_INVALID, "team is null");
  if (out == nullptr) return set_error(XSTAGE_ERR_INVALID, "output buffer is null");
  if (out->team != team) return set_error(XSTAGE_ERR_INVALID, "output buffer belongs to another team");
  if (p == nullptr) return set_error(XSTAGE_ERR_INVALID, "params is null");
  if (int rc = xstage::attention::capi::check_params(p, /*with_output=*/false); rc != XSTAGE_OK) return rc;
  return guarded([&] {
    const auto& t = *team->team;
    XSTAGE_REQUIRE(epoch == 0 || epoch == team->attn_calls + 1, "epoch ", epoch, ": this team has run ",
                   team->attn_calls, " peer-store attention calls, so this one is number ", team->attn_calls + 1,
                   " (or pass 0 and the library counts)");
    XSTAGE_REQUIRE(t.local_ranks() >= 1 && p->batch % t.local_ranks() == 0, "batch ", p->batch,
                   " is not a multiple of the ", t.local_ranks(), " ranks served here");
    XSTAGE_REQUIRE(seq_per_rank >= 1, "seq_per_rank must be >= 1, got ", seq_per_rank);
    const int64_t heads_total = int64_t(p->heads) * t.world();
    const int batch = p->batch / t.local_ranks();
    const auto po = xstage::attention::contiguous_peer_output(t, out->buf->peers(), batch, seq_per_rank,
                                                              int(heads_total), p->head_dim,
                                                              team->signals->table(), kSlotAttnOut);
    const size_t need = size_t(batch) * size_t(po.dst_stride[0]) * 2;
    XSTAGE_REQUIRE(out->buf->bytes() >= need, "output buffer '", out->buf->name(), "' holds ", out->buf->bytes(),
                   " bytes per rank; [", batch, ", ", seq_per_rank, ", ", heads_total, ", ", p->head_dim,
                   "] needs ", need);
    if (const std::string why = xstage::attention::check_peer_output(*p, po); !why.empty())
      return set_error(XSTAGE_ERR_INVALID, why);
    if (int rc = xstage::attention::capi::check_device(); rc != XSTAGE_OK) return rc;
    const auto s = static_cast<cudaStream_t>(stream);  // NULL: the default stream, as in CUDA
    int ctas = 0;
    if (cudaError_t e = xstage::attention::run_fwd_sm90_to_peers(*p, po, &ctas, s); e != cudaSuccess)
      return xstage::attention::capi::cuda_fail("sm90 attention forward (peer-store epilogue)", e);
    team->attn_calls += 1;
    team->attn_sent += uint32_t(ctas);
    team->signals->wait(kSlotAttnOut, team->attn_sent, s);
    return int(XSTAGE_OK);
  });
}
