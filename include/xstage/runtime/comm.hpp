#pragma once
// One process per GPU over NCCL 2.28: the communicator, symmetric windows (ncclMemAlloc +
// ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC)) and the device communicator (ncclDevCommCreate)
// that kernels use for peer pointers (ncclGetLsaPointer) and LSA barriers (multimem off).
// Every rank count, rank and device comes from the launch environment and the communicator.
#include <cuda_runtime.h>
#include <nccl.h>
#include <nccl_device.h>

#include <cmath>
#include <cstddef>
#include <string>

#include "xstage/common/error.hpp"
#include "xstage/runtime/env.hpp"

namespace xstage::runtime {

// The longest timeout a communicator or team takes, in seconds (~31.7 years): the device waits count it in uint64
// nanoseconds, which hold 1.8e10 s; an infinite or larger one would not convert.
inline constexpr double kMaxTimeoutS = 1e9;

// The one timeout rule of communicators, teams and the C ABI: UsageError "<who>timeout must be a positive number of
// seconds up to 1e+09, got T s" unless 0 < timeout_s <= kMaxTimeoutS (NaN and infinities refused).
inline void require_timeout(double timeout_s, const std::string& who = "") {
  XSTAGE_REQUIRE(std::isfinite(timeout_s) && timeout_s > 0 && timeout_s <= kMaxTimeoutS, who,
                 "timeout must be a positive number of seconds up to ", kMaxTimeoutS, ", got ", timeout_s, " s");
}

// Throws RuntimeError naming the call, the rank and NCCL's/CUDA's message.
void check_cuda(cudaError_t e, const char* what, int rank);
void check_nccl(ncclResult_t r, const char* what, int rank);
#define XSTAGE_CUDA_CHECK(call, rank) ::xstage::runtime::check_cuda((call), #call, (rank))

struct CommOptions {
  double timeout_s = 60;  // communicator init, rendezvous, every NCCL wait
  int lsa_barriers = 0;   // LSA barrier slots in the device communicator (0: none)
};

class Communicator {
 public:
  // Picks the GPU (local rank modulo visible devices), obtains the unique id (from the launch info,
  // or rank 0 creates it and writes the rendezvous file), creates the communicator (non-blocking,
  // polled against the timeout) and the device communicator. Errors: RuntimeError naming the rank
  // and what it waited for; UsageError when the world is < 2 ranks for a peer benchmark (caller).
  Communicator(const LaunchInfo& info, const CommOptions& opt);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int device() const { return device_; }
  ncclComm_t nccl() const { return comm_; }
  const ncclDevComm& dev() const { return dev_; }
  cudaStream_t stream() const { return stream_; }
  double timeout_s() const { return opt_.timeout_s; }

  // Host-side collectives on the communicator's stream (synchronous, timed out).
  double allreduce(double v, ncclRedOp_t op);
  long long allreduce(long long v, ncclRedOp_t op);
  void barrier() { allreduce(0LL, ncclSum); }
  // Throws RuntimeError when ranks disagree: "<what>: rank r has v, but ranks range over [min, max]".
  void require_same(long long v, const std::string& what);

  // Waits for the stream; RuntimeError after the timeout naming `what` (a kernel that spins on a
  // peer that never arrives becomes this message, not a hang).
  void sync(const std::string& what);

  // Polls a non-blocking NCCL operation to completion; RuntimeError on error or after the timeout.
  void wait_nccl(const char* what);
  // The result of an NCCL call on this (non-blocking) communicator: checked, then waited for until it is enqueued, as
  // the next NCCL call on it requires (a collective in a loop without the wait fails with "Attempt to use communicator
  // before the previous operation returned ncclSuccess").
  void enqueued(ncclResult_t r, const char* what) {
    check_nccl(r, what, rank_);
    wait_nccl(what);
  }

 private:
  template <class T>
  T allreduce_value(T v, ncclDataType_t type, ncclRedOp_t op);
  LaunchInfo info_;
  CommOptions opt_;
  int rank_ = 0, size_ = 1, device_ = 0;
  ncclComm_t comm_ = nullptr;
  ncclDevComm dev_{};
  bool dev_created_ = false;
  cudaStream_t stream_ = nullptr;
  void* scratch_ = nullptr;  // 8-byte device buffer for host collectives
};

// A symmetric window: the same size on every rank (checked), registered for load/store access.
class SymmetricWindow {
 public:
  SymmetricWindow(Communicator& comm, size_t bytes, const std::string& name);
  ~SymmetricWindow();
  SymmetricWindow(const SymmetricWindow&) = delete;
  SymmetricWindow& operator=(const SymmetricWindow&) = delete;
  void* local() const { return ptr_; }
  ncclWindow_t window() const { return win_; }
  size_t bytes() const { return bytes_; }

 private:
  Communicator& comm_;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  ncclWindow_t win_ = nullptr;
};

// The NCCL unique id as hex (ncclGetUniqueId), for the launcher.
std::string new_unique_id_hex();

}  // namespace xstage::runtime
