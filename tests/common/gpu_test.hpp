#pragma once
// Shared by the GPU test programs: CUDA checks, the sm_90 skip rule, the fixed (overridable) seed, random
// 16-bit inputs, and the multi-process scaffolding of real-rank tests (the test binary re-executes itself
// as N ranks through the local launcher; a child runs one named scenario and exits with its status).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "xstage/runtime/comm.hpp"
#include "xstage/runtime/launcher.hpp"
#include "xstage/runtime/team.hpp"

namespace xstage::testing_gpu {

inline void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
#define CUDA_CHECK(expr) ::xstage::testing_gpu::cuda_check((expr), #expr)

inline int gpus() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

// Why the sm_90 tests cannot run here, or "" when they can.
inline std::string sm90_skip_reason() {
  if (gpus() == 0) return "no CUDA device";
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  if (prop.major != 9 || prop.minor != 0) return "needs an sm_90 GPU, found " + std::string(prop.name);
  return "";
}
#define NEED_SM90()                                                                       \
  if (const std::string why = ::xstage::testing_gpu::sm90_skip_reason(); !why.empty()) \
  GTEST_SKIP() << why
#define NEED_GPUS(n)                                   \
  if (::xstage::testing_gpu::gpus() < (n))             \
  GTEST_SKIP() << "needs " << (n) << " GPUs with peer access (found " << ::xstage::testing_gpu::gpus() << ")"

// A device allocation freed at scope exit.
struct DevBuf {
  void* p = nullptr;
  explicit DevBuf(size_t n) { CUDA_CHECK(cudaMalloc(&p, n)); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  ~DevBuf() { cudaFree(p); }
};

// Fills device memory with `byte` (a poison) and waits for it and for everything before it. The teams' streams are
// non-blocking: neither a plain cudaMemset (legacy default stream) nor the DMA a pageable cudaMemcpy may leave pending
// is ordered before their work, so a test fills and uploads, then waits, then runs.
inline void fill_now(void* p, int byte, size_t n) {
  CUDA_CHECK(cudaMemset(p, byte, n));
  CUDA_CHECK(cudaDeviceSynchronize());
}

// Fixed seed, overridable with XSTAGE_TEST_SEED.
inline uint32_t test_seed() {
  const char* s = std::getenv("XSTAGE_TEST_SEED");
  return s ? uint32_t(std::strtoul(s, nullptr, 10)) : 20261201u;
}

// Uniform [-1, 1) values as bf16 or fp16 bit patterns.
inline std::vector<uint16_t> random_halves(size_t n, bool bf16, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<uint16_t> out(n);
  for (auto& x : out) {
    const float f = u(rng);
    if (bf16) {
      __nv_bfloat16 h = __float2bfloat16(f);
      std::memcpy(&x, &h, 2);
    } else {
      __half h = __float2half(f);
      std::memcpy(&x, &h, 2);
    }
  }
  return out;
}

// The rank side: runs scenario XSTAGE_TEST_CHILD and exits with its status (skips when not a child).
inline void child_main(const std::map<std::string, std::function<int()>>& scenarios) {
  const char* s = std::getenv("XSTAGE_TEST_CHILD");
  if (!s) GTEST_SKIP() << "runs only as a rank started by a multi-rank test";
  int rc = 1;
  try {
    const auto it = scenarios.find(s);
    if (it != scenarios.end()) rc = it->second();
    else std::fprintf(stderr, "unknown scenario %s\n", s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "scenario %s: %s\n", s, e.what());
  }
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(rc);
}

// Starts `nproc` copies of this binary running only `child_filter` with XSTAGE_TEST_CHILD = scenario.
inline int run_child_ranks(const std::string& child_filter, const std::string& scenario, int nproc,
                           std::map<std::string, std::string> env = {}) {
  runtime::LaunchOptions o;
  o.nproc = nproc;
  o.argv = {"/proc/self/exe", "--gtest_filter=" + child_filter};
  o.extra_env = std::move(env);
  o.extra_env["XSTAGE_TEST_CHILD"] = scenario;
  o.timeout_s = 120;
  return runtime::launch_local(o, runtime::new_unique_id_hex());
}

// Runs body(team, comm) as one real rank of the launch that started this process (a child of
// run_child_ranks); body's result is the child's exit status.
template <class Body>
int with_real_team(double timeout_s, Body&& body) {
  runtime::CommOptions o;
  o.timeout_s = timeout_s;
  runtime::Communicator comm(runtime::detect_launch(runtime::process_env()), o);
  auto team = runtime::Team::real(comm);
  return body(*team, comm);
}

}  // namespace xstage::testing_gpu
