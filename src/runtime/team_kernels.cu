// Device side of Team and SignalSet: the host view of LSA peer pointers, and the signal wait.
#include <nccl_device.h>

#include "xstage/common/error.hpp"
#include "xstage/kernel/signal.cuh"
#include "xstage/runtime/team.hpp"

namespace xstage::runtime::team_detail {
namespace {

__global__ void lsa_bases_kernel(ncclWindow_t win, int world, char** out) {
  for (int r = 0; r < world; ++r) out[r] = static_cast<char*>(ncclGetLsaPointer(win, 0, r));
}

// Block b serves local rank view.first_rank + b; thread s waits for source s. target_dev: the target read from device
// memory instead (SignalSet::wait's device form).
__global__ void signal_wait_kernel(PeerTable counters, TeamView view, int slot, uint32_t target, uint64_t timeout_ns,
                                   DeviceError* err, const uint32_t* target_dev) {
  const int rank = view.first_rank + blockIdx.x;
  if (target_dev != nullptr) target = *target_dev;
  for (int src = threadIdx.x; src < view.world; src += blockDim.x) {
    const uint32_t* c = counters.at<uint32_t>(rank, signal_offset(view.world, slot, src));
    kernel::signal_wait_geq(c, target, timeout_ns, err, kernel::SignalWaitInfo{rank, src, slot});
  }
}

void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw RuntimeError(::xstage::detail::concat(what, " failed: ", cudaGetErrorString(e)));
}

}  // namespace

void lsa_bases(void* window, int world, char** out, cudaStream_t stream) {
  char** d = nullptr;
  ok(cudaMalloc(&d, sizeof(char*) * world), "cudaMalloc (peer pointers)");
  lsa_bases_kernel<<<1, 1, 0, stream>>>(static_cast<ncclWindow_t>(window), world, d);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaMemcpyAsync(out, d, sizeof(char*) * world, cudaMemcpyDeviceToHost, stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  cudaFree(d);
  ok(e, "peer pointer query (ncclGetLsaPointer)");
}

void launch_signal_wait(const PeerTable& counters, TeamView view, int slot, uint32_t target, uint64_t timeout_ns,
                        DeviceError* err, cudaStream_t stream) {
  signal_wait_kernel<<<view.ranks, 32, 0, stream>>>(counters, view, slot, target, timeout_ns, err, nullptr);
  ok(cudaGetLastError(), "signal wait launch");
}

void launch_signal_wait(const PeerTable& counters, TeamView view, int slot, const uint32_t* target, uint64_t timeout_ns,
                        DeviceError* err, cudaStream_t stream) {
  signal_wait_kernel<<<view.ranks, 32, 0, stream>>>(counters, view, slot, 0, timeout_ns, err, target);
  ok(cudaGetLastError(), "signal wait launch");
}

}  // namespace xstage::runtime::team_detail
