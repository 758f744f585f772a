#pragma once
// The P ranks a distributed kernel runs over, real or emulated, and their symmetric buffers.
//
//   real:     one process per GPU over NCCL 2.28 (Communicator): this process serves one rank; a
//             symmetric buffer is an LSA window (ncclMemAlloc + ncclCommWindowRegister) and its peer
//             table holds the peers' LSA pointers (ncclGetLsaPointer).
//   emulated: P ranks on ONE GPU in one process: this process serves all P; a symmetric buffer is one
//             allocation of P copies and the peer table points at them. Each rank gets SMs / P of the
//             device's SMs, and a kernel serving several ranks is ONE launch whose CTAs are partitioned
//             by rank (cooperative, so the launch fails instead of deadlocking if its CTAs cannot all be
//             resident). The X-Stage itself (the NVLink drain) is not emulated: label() says so, and
//             every number printed from an emulated run must carry that label.
//
// Kernels get a TeamView (which ranks this launch serves) and PeerTables (sym buffers); they never see
// the Team. Every rank count, rank and SM count comes from here, never from a literal.
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>

#include "xstage/runtime/device_error.hpp"
#include "xstage/runtime/peer_table.hpp"

namespace xstage::runtime {

class Communicator;
class SymmetricWindow;

// Which ranks one launch on this device serves: ranks [first_rank, first_rank + ranks) of world.
struct TeamView {
  int world = 1;
  int first_rank = 0;
  int ranks = 1;
};

class SymmetricBuffer {
 public:
  ~SymmetricBuffer();
  SymmetricBuffer(const SymmetricBuffer&) = delete;
  SymmetricBuffer& operator=(const SymmetricBuffer&) = delete;
  size_t bytes() const { return bytes_; }           // per rank
  const std::string& name() const { return name_; }
  void* local(int rank) const;                      // this process's copy of `rank` (UsageError if not local)
  const PeerTable& peers() const { return peers_; } // every rank's copy, as kernels of this process see it
  // Emulated teams: copies are `bytes` rounded up to 16 apart in one allocation (0 for real teams).
  size_t emulated_stride() const { return emulated_base_ ? (bytes_ + 15) / 16 * 16 : 0; }

 private:
  friend class Team;
  SymmetricBuffer() = default;
  std::string name_;
  size_t bytes_ = 0;
  int first_local_ = 0, local_ranks_ = 0;
  PeerTable peers_{};
  void* emulated_base_ = nullptr;               // emulated: the one allocation of world copies
  std::unique_ptr<SymmetricWindow> window_;     // real: the LSA window
};

class Team {
 public:
  // P ranks on one GPU (`device` < 0: the current one). UsageError when P is outside [1, kMaxRanks] or
  // exceeds the SM count.
  static std::unique_ptr<Team> emulated(int world, int device = -1, double timeout_s = 10);
  // The ranks of a communicator (this process = one rank). UsageError when the world exceeds kMaxRanks.
  static std::unique_ptr<Team> real(Communicator& comm);
  ~Team();
  Team(const Team&) = delete;
  Team& operator=(const Team&) = delete;

  bool is_emulated() const { return emulated_; }
  int world() const { return view_.world; }
  int first_rank() const { return view_.first_rank; }
  int local_ranks() const { return view_.ranks; }
  bool is_local(int rank) const { return rank >= view_.first_rank && rank < view_.first_rank + view_.ranks; }
  const TeamView& view() const { return view_; }
  int device() const { return device_; }
  int sm_count() const { return sms_; }
  int sms_per_rank() const { return sms_ / view_.ranks; }  // each local rank's share of the SMs
  cudaStream_t stream() const { return stream_; }
  double timeout_s() const { return timeout_s_; }
  uint64_t timeout_ns() const { return uint64_t(timeout_s_ * 1e9); }
  Communicator* communicator() const { return comm_; }
  // "emulated: 4 ranks on one GPU (no NVLink: the X-Stage drain is not emulated)" or "real: rank 1 of 2 ...".
  std::string label() const;

  // A zero-filled buffer of `bytes` per rank on every rank (collective in real mode: sizes must agree).
  std::unique_ptr<SymmetricBuffer> alloc(size_t bytes, const std::string& name);
  // Host: every rank has reached this point (real: an NCCL allreduce; emulated: one process, nothing to wait).
  void barrier();

  // The team's device error record (device memory, zero until a kernel records a failure).
  DeviceError* error_record() const { return err_; }
  // Waits for the team's stream (RuntimeError after the timeout naming `what`), then throws RuntimeError
  // with the decoded device error if a kernel recorded one (the record is cleared).
  void check(const std::string& what);

 private:
  Team() = default;
  void init_device(int device);
  bool emulated_ = false;
  TeamView view_;
  int device_ = 0, sms_ = 0;
  cudaStream_t stream_ = nullptr;
  bool own_stream_ = false;
  double timeout_s_ = 10;
  Communicator* comm_ = nullptr;
  DeviceError* err_ = nullptr;
};

// Completion signals: `slots` counters per source rank in every rank's signal buffer. A sender raises
// counter (slot, src) on rank dst (kernel::signal_add_release); a receiver waits until each of its
// counters reaches a target. Counters only grow (a target is the running sum of the signals sent so far), so
// nothing is reset between launches.
class SignalSet {
 public:
  SignalSet(Team& team, int slots, const std::string& name);
  const PeerTable& table() const { return buf_->peers(); }
  int slots() const { return slots_; }
  // Enqueues on `stream`: every local rank waits (acquire) until its counter (slot, src) >= target for every
  // src; a wait past the team's timeout records kSignalTimeout (rank, peer, slot, value seen) in the team's
  // error record and ends the wait.
  void wait(int slot, uint32_t target, cudaStream_t stream);
  // wait with the target read from device memory when the wait runs (a counter that earlier work on `stream`
  // advanced): a call whose targets live on the device can be captured in a CUDA graph and replayed.
  void wait_device(int slot, const uint32_t* target, cudaStream_t stream);
  // Host read of one counter (tests, diagnostics); synchronous.
  uint32_t read(int rank, int slot, int src) const;

 private:
  Team& team_;
  int slots_;
  std::unique_ptr<SymmetricBuffer> buf_;
};

// Zeroes `bytes` of device memory and waits for it (errors name `rank`). cudaMemset runs on the legacy default
// stream, which is not ordered with a caller's non-blocking streams (torch's side streams, the teams' own): without
// the wait a kernel there could run before the zeros land. For setup and error-record resets, not hot paths.
void zero_now(void* p, size_t bytes, int rank);

// Device-side helpers behind Team and SignalSet (team_kernels.cu).
namespace team_detail {
// Host copies of ncclGetLsaPointer(window, 0, r) for r < world (a one-thread kernel, synchronous).
void lsa_bases(void* window, int world, char** out, cudaStream_t stream);
void launch_signal_wait(const PeerTable& counters, TeamView view, int slot, uint32_t target, uint64_t timeout_ns,
                        DeviceError* err, cudaStream_t stream);
void launch_signal_wait(const PeerTable& counters, TeamView view, int slot, const uint32_t* target, uint64_t timeout_ns,
                        DeviceError* err, cudaStream_t stream);
}  // namespace team_detail

}  // namespace xstage::runtime
