// NVML, read-only, through dlopen("libnvidia-ml.so.1") (no link-time dependency): SM clock, power,
// temperature and the cumulative energy counter (Volta and newer) of one GPU, and a Sampler that reads them in a background thread beside a timed block.
// Absent library or device: available() is false and every reading is nullopt. Only getters are called.
// Link: ${CMAKE_DL_LIBS} and Threads::Threads.
#pragma once

#include <dlfcn.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "xstage/bench/protocol.hpp"

namespace xstage::bench {

class NvmlReader {
 public:
  // By NVML index (NVML numbers every GPU of the host; CUDA_VISIBLE_DEVICES does not renumber it).
  explicit NvmlReader(int device = 0, const char* libname = "libnvidia-ml.so.1") {
    if (!open(libname)) return;
    auto by_index = sym<int (*)(unsigned, void**)>("nvmlDeviceGetHandleByIndex_v2");
    select(by_index && by_index(static_cast<unsigned>(device), &handle_) == 0,
           "no NVML device " + std::to_string(device));
  }
  // By PCI bus id ("0000:1b:00.0", the form cudaDeviceGetPCIBusId writes; protocol_cuda.cuh's cuda_pci_bus_id): the
  // GPU a CUDA device ordinal names, whatever CUDA_VISIBLE_DEVICES does to the numbering.
  explicit NvmlReader(const std::string& pci_bus_id, const char* libname = "libnvidia-ml.so.1") {
    if (pci_bus_id.empty()) {
      error_ = "no PCI bus id for the CUDA device";
      return;
    }
    if (!open(libname)) return;
    auto by_bus = sym<int (*)(const char*, void**)>("nvmlDeviceGetHandleByPciBusId_v2");
    select(by_bus && by_bus(pci_bus_id.c_str(), &handle_) == 0, "no NVML device at PCI bus id " + pci_bus_id);
  }
  ~NvmlReader() {
    if (available_) shutdown_();
    if (lib_) dlclose(lib_);
  }
  NvmlReader(const NvmlReader&) = delete;
  NvmlReader& operator=(const NvmlReader&) = delete;

  bool available() const { return available_; }
  const std::string& error() const { return error_; }

  std::optional<Sample> read() const {
    if (!available_) return std::nullopt;
    constexpr int kClockSm = 1, kTemperatureGpu = 0;  // NVML_CLOCK_SM, NVML_TEMPERATURE_GPU
    Sample s;
    unsigned v = 0;
    if (clock_(handle_, kClockSm, &v) == 0) s.sm_clock_mhz = v;
    if (power_(handle_, &v) == 0) s.power_w = v / 1000.0;  // mW
    if (temp_(handle_, kTemperatureGpu, &v) == 0) s.temp_c = v;
    unsigned long long mj = 0;
    if (energy_ && energy_(handle_, &mj) == 0) s.energy_mj = static_cast<double>(mj);
    return s;
  }

 private:
  template <class F>
  F sym(const char* name) {
    return reinterpret_cast<F>(dlsym(lib_, name));
  }
  // dlopen and nvmlInit; false (with error_) when either fails or an entry point is missing.
  bool open(const char* libname) {
    lib_ = dlopen(libname, RTLD_NOW | RTLD_LOCAL);
    if (!lib_) {
      const char* e = dlerror();
      error_ = e ? e : "dlopen failed";
      return false;
    }
    auto init = sym<int (*)()>("nvmlInit_v2");
    clock_ = sym<int (*)(void*, int, unsigned*)>("nvmlDeviceGetClockInfo");
    power_ = sym<int (*)(void*, unsigned*)>("nvmlDeviceGetPowerUsage");
    temp_ = sym<int (*)(void*, int, unsigned*)>("nvmlDeviceGetTemperature");
    shutdown_ = sym<int (*)()>("nvmlShutdown");
    energy_ = sym<int (*)(void*, unsigned long long*)>("nvmlDeviceGetTotalEnergyConsumption");  // optional
    if (!init || !clock_ || !power_ || !temp_ || !shutdown_) {
      error_ = "libnvidia-ml.so.1 lacks an NVML entry point";
      return false;
    }
    if (init() != 0) {
      error_ = "nvmlInit_v2 failed";
      return false;
    }
    return true;
  }
  // After open(): available when the handle was found, else NVML shut down again and error_ = why.
  void select(bool found, const std::string& why) {
    if (!found) {
      shutdown_();
      error_ = why;
      return;
    }
    available_ = true;
  }
  void* lib_ = nullptr;
  void* handle_ = nullptr;
  bool available_ = false;
  std::string error_;
  int (*clock_)(void*, int, unsigned*) = nullptr;
  int (*power_)(void*, unsigned*) = nullptr;
  int (*temp_)(void*, int, unsigned*) = nullptr;
  int (*shutdown_)() = nullptr;
  int (*energy_)(void*, unsigned long long*) = nullptr;
};

// Reads the NVML device at start(), every period in a thread, and at stop().
class NvmlSampler final : public Sampler {
 public:
  explicit NvmlSampler(int device = 0, double period_s = kDefaultSamplePeriodS) : reader_(device), period_(period_s) {}
  explicit NvmlSampler(const std::string& pci_bus_id, double period_s = kDefaultSamplePeriodS)
      : reader_(pci_bus_id), period_(period_s) {}
  ~NvmlSampler() override {
    if (thread_.joinable()) stop();
  }
  bool available() const override { return reader_.available(); }
  const NvmlReader& reader() const { return reader_; }

  void start() override {
    samples_.clear();
    if (!reader_.available()) return;
    t0_ = std::chrono::steady_clock::now();
    samples_.push_back(stamped());
    stop_ = false;
    thread_ = std::thread([this] {
      std::unique_lock<std::mutex> lk(mu_);
      while (!cv_.wait_for(lk, std::chrono::duration<double>(period_), [this] { return stop_; }))
        samples_.push_back(stamped());
    });
  }
  std::vector<std::optional<Sample>> stop() override {
    if (thread_.joinable()) {
      {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;
      }
      cv_.notify_all();
      thread_.join();
      samples_.push_back(stamped());
    }
    return samples_;
  }

 private:
  // A reading with its time since start() (Sample::t_s), taken after the getters return.
  std::optional<Sample> stamped() const {
    std::optional<Sample> s = reader_.read();
    if (s) s->t_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    return s;
  }
  std::chrono::steady_clock::time_point t0_;
  NvmlReader reader_;
  double period_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<std::optional<Sample>> samples_;
};

}  // namespace xstage::bench
