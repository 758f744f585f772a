// Ranks real or emulated, symmetric buffers and completion signals (team.hpp).
#include "xstage/runtime/team.hpp"

#include <chrono>
#include <cmath>
#include <thread>

#include "xstage/common/error.hpp"
#include "xstage/runtime/comm.hpp"

namespace xstage::runtime {
namespace {
void cuda_ok(cudaError_t e, const char* what, int rank) { check_cuda(e, what, rank); }
}  // namespace

void zero_now(void* p, size_t bytes, int rank) {
  cuda_ok(cudaMemset(p, 0, bytes), "cudaMemset", rank);
  cuda_ok(cudaStreamSynchronize(0), "cudaStreamSynchronize (after cudaMemset)", rank);
}

// ---------------------------------------------------------------- SymmetricBuffer
SymmetricBuffer::~SymmetricBuffer() {
  if (emulated_base_) cudaFree(emulated_base_);
}

void* SymmetricBuffer::local(int rank) const {
  XSTAGE_REQUIRE(rank >= first_local_ && rank < first_local_ + local_ranks_, "symmetric buffer '", name_, "': rank ",
                 rank, " is not served by this process (local ranks ", first_local_, "..",
                 first_local_ + local_ranks_ - 1, ")");
  return peers_.base[rank];
}

// ---------------------------------------------------------------- Team
void Team::init_device(int device) {
  int ndev = 0;
  cuda_ok(cudaGetDeviceCount(&ndev), "cudaGetDeviceCount", view_.first_rank);
  XSTAGE_REQUIRE(ndev > 0, "no CUDA device is visible");
  if (device < 0) cuda_ok(cudaGetDevice(&device), "cudaGetDevice", view_.first_rank);
  XSTAGE_REQUIRE(device < ndev, "device ", device, " does not exist (", ndev, " visible)");
  device_ = device;
  cuda_ok(cudaSetDevice(device_), "cudaSetDevice", view_.first_rank);
  cuda_ok(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, device_), "cudaDeviceGetAttribute",
          view_.first_rank);
  cuda_ok(cudaMalloc(&err_, sizeof(DeviceError)), "cudaMalloc (device error record)", view_.first_rank);
  zero_now(err_, sizeof(DeviceError), view_.first_rank);
}

std::unique_ptr<Team> Team::emulated(int world, int device, double timeout_s) {
  XSTAGE_REQUIRE(world >= 1 && world <= kMaxRanks, "emulated world size must be in [1, ", kMaxRanks, "], got ",
                 world);
  require_timeout(timeout_s);
  std::unique_ptr<Team> t(new Team);
  t->emulated_ = true;
  t->view_ = TeamView{world, 0, world};
  t->timeout_s_ = timeout_s;
  t->init_device(device);
  XSTAGE_REQUIRE(world <= t->sms_, "cannot emulate ", world, " ranks on a GPU with ", t->sms_, " SMs");
  cuda_ok(cudaStreamCreateWithFlags(&t->stream_, cudaStreamNonBlocking), "cudaStreamCreate", 0);
  t->own_stream_ = true;
  return t;
}

std::unique_ptr<Team> Team::real(Communicator& comm) {
  XSTAGE_REQUIRE(comm.size() <= kMaxRanks, "world size ", comm.size(), " exceeds the ", kMaxRanks,
                 " ranks a peer table addresses (xstage's kernels serve one NVLink domain)");
  std::unique_ptr<Team> t(new Team);
  t->emulated_ = false;
  t->view_ = TeamView{comm.size(), comm.rank(), 1};
  t->timeout_s_ = comm.timeout_s();
  t->comm_ = &comm;
  t->init_device(comm.device());
  t->stream_ = comm.stream();
  return t;
}

Team::~Team() {
  if (err_) cudaFree(err_);
  if (own_stream_ && stream_) cudaStreamDestroy(stream_);
}

std::string Team::label() const {
  if (emulated_)
    return ::xstage::detail::concat("emulated: ", view_.world, " ranks on one GPU (", sms_per_rank(),
                          " SMs each; no NVLink: the X-Stage drain is not emulated)");
  return ::xstage::detail::concat("real: rank ", view_.first_rank, " of ", view_.world, " (one process per GPU, NCCL LSA)");
}

std::unique_ptr<SymmetricBuffer> Team::alloc(size_t bytes, const std::string& name) {
  XSTAGE_REQUIRE(bytes > 0, "symmetric buffer '", name, "' must have a positive size");
  std::unique_ptr<SymmetricBuffer> b(new SymmetricBuffer);
  b->name_ = name;
  b->bytes_ = bytes;
  b->first_local_ = view_.first_rank;
  b->local_ranks_ = view_.ranks;
  cuda_ok(cudaSetDevice(device_), "cudaSetDevice", view_.first_rank);
  if (emulated_) {
    // One allocation; copies 16-byte aligned (TMA and vector stores need 16 B). A buffer whose size is a
    // multiple of 16 has its copies back to back, so P copies of [b, ...] read as one [P * b, ...] tensor
    // (a kernel serving all emulated ranks folds the rank into the batch).
    const size_t stride = (bytes + 15) / 16 * 16;
    XSTAGE_REQUIRE(stride <= SIZE_MAX / size_t(view_.world), "symmetric buffer '", name, "' of ", bytes,
                   " bytes per rank overflows for ", view_.world, " ranks");
    void* base = nullptr;
    const cudaError_t e = cudaMalloc(&base, stride * view_.world);
    if (e != cudaSuccess) {
      cudaGetLastError();
      throw RuntimeError(::xstage::detail::concat("symmetric buffer '", name, "': cannot allocate ", view_.world, " x ", bytes,
                                        " bytes on device ", device_, ": ", cudaGetErrorString(e)));
    }
    b->emulated_base_ = base;
    zero_now(base, stride * view_.world, 0);
    for (int r = 0; r < view_.world; ++r) b->peers_.base[r] = static_cast<char*>(base) + stride * r;
  } else {
    b->window_ = std::make_unique<SymmetricWindow>(*comm_, bytes, name);
    cuda_ok(cudaMemsetAsync(b->window_->local(), 0, bytes, stream_), "cudaMemsetAsync", view_.first_rank);
    team_detail::lsa_bases(b->window_->window(), view_.world, b->peers_.base, stream_);
    comm_->barrier();  // every rank's copy is zeroed before anyone writes to it
  }
  return b;
}

void Team::barrier() {
  if (!emulated_) comm_->barrier();
}

void Team::check(const std::string& what) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  while (true) {
    const cudaError_t e = cudaStreamQuery(stream_);
    if (e == cudaSuccess) break;
    if (e != cudaErrorNotReady) check_cuda(e, what.c_str(), view_.first_rank);
    if (std::chrono::duration<double>(Clock::now() - t0).count() > timeout_s_ + 5)
      throw RuntimeError(::xstage::detail::concat("rank ", view_.first_rank, ": timed out after ", timeout_s_ + 5,
                                        " s waiting for ", what, " (", label(), ")"));
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  DeviceError rec{};
  cuda_ok(cudaMemcpy(&rec, err_, sizeof rec, cudaMemcpyDeviceToHost), "cudaMemcpy (device error record)",
          view_.first_rank);
  if (rec.code != int(DeviceErrorCode::kNone)) {
    zero_now(err_, sizeof rec, view_.first_rank);
    throw RuntimeError(::xstage::detail::concat(what, ": ", describe(rec)));
  }
}

// ---------------------------------------------------------------- SignalSet
SignalSet::SignalSet(Team& team, int slots, const std::string& name) : team_(team), slots_(slots) {
  XSTAGE_REQUIRE(slots >= 1, "signal set '", name, "' needs at least one slot, got ", slots);
  buf_ = team.alloc(signal_offset(team.world(), slots, 0), name);
}

void SignalSet::wait(int slot, uint32_t target, cudaStream_t stream) {
  XSTAGE_REQUIRE(slot >= 0 && slot < slots_, "signal slot ", slot, " out of range [0, ", slots_, ")");
  team_detail::launch_signal_wait(table(), team_.view(), slot, target, team_.timeout_ns(), team_.error_record(), stream);
}

void SignalSet::wait_device(int slot, const uint32_t* target, cudaStream_t stream) {
  XSTAGE_REQUIRE(slot >= 0 && slot < slots_, "signal slot ", slot, " out of range [0, ", slots_, ")");
  XSTAGE_REQUIRE(target != nullptr, "signal wait: the device target is null");
  team_detail::launch_signal_wait(table(), team_.view(), slot, target, team_.timeout_ns(), team_.error_record(), stream);
}

uint32_t SignalSet::read(int rank, int slot, int src) const {
  XSTAGE_REQUIRE(slot >= 0 && slot < slots_ && src >= 0 && src < team_.world(), "signal counter (slot ", slot,
                 ", source ", src, ") out of range");
  uint32_t v = 0;
  const char* at = static_cast<const char*>(buf_->local(rank)) + signal_offset(team_.world(), slot, src);
  cuda_ok(cudaMemcpy(&v, at, sizeof v, cudaMemcpyDeviceToHost), "cudaMemcpy (signal counter)", rank);
  return v;
}

}  // namespace xstage::runtime
