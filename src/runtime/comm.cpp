// Communicator, symmetric windows and device communicator over NCCL 2.28 (see comm.hpp).
#include "xstage/runtime/comm.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include <unistd.h>

#include "xstage/common/error.hpp"

namespace xstage::runtime {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Rank 0 writes the id atomically (write, then rename) so a reader never sees half a file.
void write_id_file(const std::string& path, const std::string& hex, int rank) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp);
    XSTAGE_CHECK(f.good(), "rank ", rank, ": cannot write the NCCL id file ", tmp,
                 " (set XSTAGE_ID_DIR to a directory shared by all ranks)");
    f << hex;
  }
  std::filesystem::rename(tmp, path);
}

std::string read_id_file(const std::string& path, int rank, double timeout_s) {
  auto t0 = Clock::now();
  while (true) {
    std::ifstream f(path);
    std::string hex;
    if (f && (f >> hex) && hex.size() == 2 * sizeof(ncclUniqueId)) return hex;
    if (seconds_since(t0) > timeout_s)
      throw RuntimeError(detail::concat("rank ", rank, ": timed out after ", timeout_s,
                                        " s waiting for rank 0 to write the NCCL id file ", path,
                                        " (is rank 0 running, and is the directory shared?)"));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace

void check_cuda(cudaError_t e, const char* what, int rank) {
  if (e != cudaSuccess)
    throw RuntimeError(detail::concat("rank ", rank, ": ", what, " failed: ", cudaGetErrorString(e)));
}

void check_nccl(ncclResult_t r, const char* what, int rank) {
  if (r != ncclSuccess && r != ncclInProgress)
    throw RuntimeError(detail::concat("rank ", rank, ": ", what, " failed: ", ncclGetErrorString(r),
                                      " (", ncclGetLastError(nullptr), ")"));
}

std::string new_unique_id_hex() {
  ncclUniqueId id;
  check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId", 0);
  return to_hex(reinterpret_cast<const unsigned char*>(&id), sizeof id);
}

Communicator::Communicator(const LaunchInfo& info, const CommOptions& opt) : info_(info), opt_(opt) {
  // (every wait, and the device timeouts of a Team made from this communicator, read it: a negative one would
  // turn into an endless device wait once converted to nanoseconds)
  require_timeout(opt.timeout_s, "rank " + std::to_string(info.rank) + ": the communicator's ");
  rank_ = info.rank;
  size_ = info.world_size;
  static_assert(sizeof(ncclUniqueId) == kUniqueIdBytes);
  int ndev = 0;
  XSTAGE_CUDA_CHECK(cudaGetDeviceCount(&ndev), rank_);
  XSTAGE_CHECK(ndev > 0, "rank ", rank_, ": no CUDA device visible");
  device_ = info.local_rank % ndev;
  XSTAGE_CUDA_CHECK(cudaSetDevice(device_), rank_);

  std::string hex = info.id_hex;
  if (hex.empty()) {
    XSTAGE_CHECK(!info.id_file.empty(), "rank ", rank_, ": no NCCL id and no rendezvous file");
    if (rank_ == 0) {
      hex = new_unique_id_hex();
      write_id_file(info.id_file, hex, rank_);
    } else {
      hex = read_id_file(info.id_file, rank_, info.id_timeout_s);
    }
  }
  ncclUniqueId id;
  from_hex(hex, reinterpret_cast<unsigned char*>(&id), sizeof id, "XSTAGE_NCCL_ID");

  XSTAGE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), rank_);
  XSTAGE_CUDA_CHECK(cudaMalloc(&scratch_, 8), rank_);

  // Non-blocking init so a missing rank becomes a timeout message instead of a hang.
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  check_nccl(ncclCommInitRankConfig(&comm_, size_, id, rank_, &cfg), "ncclCommInitRankConfig", rank_);
  wait_nccl("communicator init (waiting for all ranks to join)");

  int nranks = 0, crank = 0;
  check_nccl(ncclCommCount(comm_, &nranks), "ncclCommCount", rank_);
  check_nccl(ncclCommUserRank(comm_, &crank), "ncclCommUserRank", rank_);
  XSTAGE_CHECK(nranks == size_ && crank == rank_, "rank ", rank_, ": communicator reports rank ", crank,
               " of ", nranks, ", launcher said ", rank_, " of ", size_);

  ncclDevCommRequirements req{};
  req.lsaMultimem = false;  // NVLink multicast stays off on these machines
  req.lsaBarrierCount = opt.lsa_barriers;
  check_nccl(ncclDevCommCreate(comm_, &req, &dev_), "ncclDevCommCreate", rank_);
  wait_nccl("ncclDevCommCreate");
  dev_created_ = true;
  // Every rank must be reachable by load/store (NVLink / P2P) for peer pointers and LSA barriers.
  XSTAGE_CHECK(dev_.lsaSize == size_, "rank ", rank_, ": only ", dev_.lsaSize, " of ", size_,
               " ranks are in this rank's LSA (load/store) team: peer access between the GPUs is "
               "unavailable (no NVLink/P2P path), which xstage's remote-store kernels need");
}

Communicator::~Communicator() {
  if (comm_) {
    if (dev_created_) ncclDevCommDestroy(comm_, &dev_);
    ncclCommAbort(comm_);  // nothing pending at this point; abort never waits on a dead peer
  }
  if (scratch_) cudaFree(scratch_);
  if (stream_) cudaStreamDestroy(stream_);
  if (rank_ == 0 && !info_.id_file.empty()) std::remove(info_.id_file.c_str());
}

void Communicator::wait_nccl(const char* what) {
  auto t0 = Clock::now();
  while (true) {
    ncclResult_t st = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(comm_, &st);
    check_nccl(r, "ncclCommGetAsyncError", rank_);
    if (st == ncclSuccess) return;
    if (st != ncclInProgress)
      throw RuntimeError(detail::concat("rank ", rank_, " of ", size_, ": ", what, " failed: ",
                                        ncclGetErrorString(st), " (", ncclGetLastError(comm_), ")"));
    const double waited = seconds_since(t0);
    if (waited > opt_.timeout_s)
      throw RuntimeError(detail::concat("rank ", rank_, " of ", size_, ": timed out after ", opt_.timeout_s,
                                        " s in ", what));
    // Spin for the first 2 ms: an enqueued collective (ncclAlltoAll in a timed loop) is usually done by then, and a
    // 200 us sleep from the first poll added ~300 us to every such call (two real ranks, s48); init and window
    // registration, which take longer, then sleep between polls.
    if (waited < 2e-3) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void Communicator::sync(const std::string& what) {
  auto t0 = Clock::now();
  while (true) {
    cudaError_t e = cudaStreamQuery(stream_);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) check_cuda(e, what.c_str(), rank_);
    if (seconds_since(t0) > opt_.timeout_s)
      throw RuntimeError(detail::concat("rank ", rank_, " of ", size_, ": timed out after ", opt_.timeout_s,
                                        " s waiting for ", what));
    std::this_thread::yield();
  }
}

// One 8-byte value through the scratch buffer (host collectives are rare: synchronous is fine).
template <class T>
T Communicator::allreduce_value(T v, ncclDataType_t type, ncclRedOp_t op) {
  static_assert(sizeof(T) == 8, "the scratch buffer holds 8 bytes");
  XSTAGE_CUDA_CHECK(cudaMemcpyAsync(scratch_, &v, 8, cudaMemcpyHostToDevice, stream_), rank_);
  enqueued(ncclAllReduce(scratch_, scratch_, 1, type, op, comm_, stream_), "host allreduce");
  XSTAGE_CUDA_CHECK(cudaMemcpyAsync(&v, scratch_, 8, cudaMemcpyDeviceToHost, stream_), rank_);
  sync("host allreduce");
  return v;
}

double Communicator::allreduce(double v, ncclRedOp_t op) { return allreduce_value(v, ncclFloat64, op); }

long long Communicator::allreduce(long long v, ncclRedOp_t op) {
  return allreduce_value(static_cast<int64_t>(v), ncclInt64, op);
}

void Communicator::require_same(long long v, const std::string& what) {
  long long lo = allreduce(v, ncclMin), hi = allreduce(v, ncclMax);
  if (lo != hi)
    throw RuntimeError(detail::concat(what, ": ranks disagree: rank ", rank_, " has ", v,
                                      ", values range over [", lo, ", ", hi, "]"));
}

SymmetricWindow::SymmetricWindow(Communicator& comm, size_t bytes, const std::string& name)
    : comm_(comm), bytes_(bytes) {
  XSTAGE_REQUIRE(bytes > 0, "symmetric window '", name, "' must have a positive size");
  comm.require_same(static_cast<long long>(bytes), "size of symmetric window '" + name + "'");
  check_nccl(ncclMemAlloc(&ptr_, bytes), "ncclMemAlloc", comm.rank());
  check_nccl(ncclCommWindowRegister(comm.nccl(), ptr_, bytes, &win_, NCCL_WIN_COLL_SYMMETRIC),
             "ncclCommWindowRegister", comm.rank());
  comm.wait_nccl("ncclCommWindowRegister");
  comm.barrier();  // also completes the (non-blocking) registration on every rank
  XSTAGE_CHECK(win_ != nullptr, "rank ", comm.rank(), ": window registration of '", name, "' returned no window");
}

SymmetricWindow::~SymmetricWindow() {
  if (win_) ncclCommWindowDeregister(comm_.nccl(), win_);
  if (ptr_) ncclMemFree(ptr_);
}

}  // namespace xstage::runtime
