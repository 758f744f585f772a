// How fast can one SM's TMA pipeline stream a Linear-1 tile's weights, and what bounds it? (docs/MOE-NOTEBOOK.md, "Session
// 29": at 8192 tokens every fused-MoE tile ingests ~40-42 GB/s per SM whatever its kind, and half tiles, bound by
// that stream, take 31-41 % of V4-Pro's SM-time.)
//
// No tensor work: per CTA one producer thread fills a ring of stages with a 256-row x 128-byte weight block (two
// {128 B, 128 rows} boxes, 128 B swizzle, as the kernel's gate + up boxes) and optionally an A box from a small
// L2-resident matrix; one consumer warp waits for each stage, optionally holds it `delay` ns (standing in for the MMA
// of the stage), and releases it. A CTA walks tiles of 256 weight rows x K (= the kernel's L1 tile at hidden K) one
// K block at a time, tile v = cluster id + i * clusters.
//
// Weight layouts:
//   rows    the kernel's: a [tiles * 256][K] row-major matrix; a K block's box is 128 bytes of each of 128 rows K
//           bytes apart (so one DRAM page holds few of a box's bytes)
//   packed  each (tile, K block, half) box stored as 16 KB in a row: the same boxes, contiguous in memory
// Clusters of 2: both CTAs walk the same tile; each loads one of the two boxes and multicasts it into both (the
// kernel's weight-sharing pairs), so a CTA receives 32 KB per stage and reads 16 KB from L2.
//
//   stream_probe [--gb G] [--k K] [--reps N] [--rounds R] [--csv FILE]
//
// Every configuration: one warm-up launch, then N timed launches (CUDA events); the source is a G GB buffer that
// no L2 holds (the `l2` rows use the first 16 tiles only, which the L2 holds). --rounds R [2] runs the configurations
// R times in listed order and R times in reverse (A B .. B A); each row shows its median-time pass and the spread of
// its time over the 2R passes ((max - min) / median), as the benchmark protocol's ABBA blocks do. Reported: GB/s
// delivered into shared memory (all CTAs; per CTA), and GB/s read through L2 (multicast counted once). A program, not
// a test: it checks that every stage arrived (the consumers count bytes) and prints a table.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "xstage/ptx/cluster.cuh"
#include "xstage/ptx/timer.cuh"
#include "probe_common.hpp"
#include "xstage/bench/usage.hpp"

#include "stream_probe_usage.inc"  // kUsage: this header comment (--help)

namespace ptx = xstage::ptx;

namespace {

using probe::make_map;
using probe::ok;

constexpr int kBoxBytes = 128 * 128, kWBytes = 2 * kBoxBytes, kMaxStages = 8;

struct Args {
  CUtensorMap wmap, amap;  // amap's box has a_rows rows
  int packed, kblocks, tiles, visits, stages, stage_bytes, a_rows, a_tiles, delay_ns, cluster;
  // Mixed runs (mix_ctas > 0): CTAs [mix_ctas, grid) stream the first 16 tiles (which the L2 holds) instead, with
  // their own A box rows and hold per stage, for mix_visits tiles each: full tiles of big experts beside the
  // DRAM-streaming CTAs' half tiles. Single CTAs only.
  int mix_ctas, mix_a_rows, mix_delay_ns, mix_visits;
  CUtensorMap mix_amap;
  unsigned long long* stages_seen;  // per CTA: stages the consumer saw complete
  unsigned long long* span_ns;      // per CTA: first stage wait to last stage release
};

__global__ void __launch_bounds__(64, 1) stream_kernel(const __grid_constant__ Args a) {
  extern __shared__ __align__(1024) uint8_t smem[];
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + a.stages * a.stage_bytes);
  uint64_t* empty = full + kMaxStages;
  const uint32_t crank = a.cluster > 1 ? ptx::cluster_ctarank() : 0;
  const bool l2_side = a.mix_ctas > 0 && int(blockIdx.x) >= a.mix_ctas;
  const int cid = a.cluster > 1 ? int(ptx::cluster_id_x()) : l2_side ? int(blockIdx.x) - a.mix_ctas : int(blockIdx.x);
  const int ncl = a.cluster > 1 ? int(ptx::nclusters_x()) : a.mix_ctas > 0 ? (l2_side ? int(gridDim.x) - a.mix_ctas : a.mix_ctas)
                                                                    : int(gridDim.x);
  const int visits = l2_side ? a.mix_visits * ncl : a.visits, tiles = l2_side ? 16 : a.tiles;
  const int a_rows = l2_side ? a.mix_a_rows : a.a_rows, delay_ns = l2_side ? a.mix_delay_ns : a.delay_ns;
  const CUtensorMap* amap = l2_side ? &a.mix_amap : &a.amap;
  if (threadIdx.x == 0) {
    for (int i = 0; i < a.stages; ++i) {
      ptx::mbar_init(&full[i], 1);
      ptx::mbar_init(&empty[i], a.cluster);  // one consumer warp per CTA that writes into the stage
    }
    ptx::fence_mbar_init_release_cluster();
  }
  __syncthreads();
  if (a.cluster > 1) ptx::cluster_sync();  // the peer's barriers exist before anyone multicasts or arrives
  const uint32_t a_bytes = uint32_t(a_rows) * 128;
  if (threadIdx.x == 0) {  // producer
    int stage = 0;
    uint32_t phase = 0;
    for (int v = cid; v < visits; v += ncl) {
      const int t = v % tiles;
      for (int kb = 0; kb < a.kblocks; ++kb) {
        ptx::mbar_wait_acquire_cta(&empty[stage], phase ^ 1);
        ptx::mbar_arrive_expect_tx_release_cta(&full[stage], kWBytes + a_bytes);
        uint8_t* st = smem + stage * a.stage_bytes;
        for (int h = 0; h < 2; ++h) {
          if (a.cluster > 1 && h != int(crank)) continue;
          const int c0 = a.packed ? 0 : kb * 128;
          const int c1 = a.packed ? ((t * a.kblocks + kb) * 2 + h) * 128 : t * 256 + h * 128;
          if (a.cluster > 1)
            ptx::tma_load_2d_multicast(&a.wmap, &full[stage], st + h * kBoxBytes, c0, c1, uint16_t(0x3));
          else
            ptx::tma_load_2d(&a.wmap, &full[stage], st + h * kBoxBytes, c0, c1);
        }
        if (a_bytes) ptx::tma_load_2d(amap, &full[stage], st + kWBytes, kb * 128, (v % a.a_tiles) * 128);
        if (++stage == a.stages) stage = 0, phase ^= 1;
      }
    }
  } else if (threadIdx.x >= 32) {  // consumer warp
    int stage = 0;
    uint32_t phase = 0;
    unsigned long long seen = 0;
    const unsigned long long start = ptx::globaltimer_ns();
    for (int v = cid; v < visits; v += ncl)
      for (int kb = 0; kb < a.kblocks; ++kb) {
        ptx::mbar_wait_acquire_cta(&full[stage], phase);
        if (delay_ns > 0) {
          const unsigned long long t0 = ptx::globaltimer_ns();
          while (ptx::globaltimer_ns() - t0 < unsigned(delay_ns)) {
          }
        }
        __syncwarp();
        if (threadIdx.x == 32) {
          if (a.cluster > 1) {
            ptx::mbar_arrive_remote(&empty[stage], 0);
            ptx::mbar_arrive_remote(&empty[stage], 1);
          } else {
            ptx::mbar_arrive_release_cta(&empty[stage]);
          }
        }
        ++seen;
        if (++stage == a.stages) stage = 0, phase ^= 1;
      }
    if (threadIdx.x == 32) {
      a.stages_seen[blockIdx.x] = seen;
      a.span_ns[blockIdx.x] = ptx::globaltimer_ns() - start;
    }
  }
  __syncwarp();
  if (a.cluster > 1) ptx::cluster_sync();  // no CTA leaves while its peer may still arrive on its barriers
}

struct Config {
  std::string name;
  int packed, ctas, cluster, stages, a_rows, delay_ns, l2;
  int mix_ctas = 0, mix_a_rows = 0, mix_delay_ns = 0;  // mixed runs: CTAs [mix_ctas, ctas) on L2-held tiles
};
struct Result {
  Config c;
  double ms, delivered_gbs, per_cta_gbs, l2_read_gbs;
  double ms_spread = 0;  // (max - min) / median of the time over the passes (this row: the median-time one)
  double dram_side_cta_gbs = 0, l2_side_cta_gbs = 0, dram_side_span_ms = 0, l2_side_span_ms = 0;  // mixed runs
};

}  // namespace

int main(int argc, char** argv) {
  probe::g_name = "stream_probe";
  int gb = 16, K = 7168, reps = 3, rounds = 2;
  std::string csv;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (xstage::bench::is_help_flag(k)) xstage::bench::print_usage_and_exit(kUsage);
    auto val = [&]() -> std::string { return probe::arg_value(argc, argv, i); };
    if (k == "--gb") gb = probe::int_value(argc, argv, i);
    else if (k == "--k") K = probe::int_value(argc, argv, i);
    else if (k == "--reps") reps = probe::int_value(argc, argv, i);
    else if (k == "--rounds") rounds = probe::int_value(argc, argv, i);
    else if (k == "--csv") csv = val();
    else {
      std::fprintf(stderr, "stream_probe: unknown argument %s (stream_probe --help lists the flags)\n", k.c_str());
      return 2;
    }
  }
  if (gb < 1 || reps < 1 || rounds < 1 || K < 128 || K % 128 != 0) {
    std::fprintf(stderr, "stream_probe: need --gb >= 1, --reps >= 1, --rounds >= 1, --k a positive multiple of 128 "
                 "(got %d, %d, %d, %d)\n", gb, reps, rounds, K);
    return 2;
  }
  cudaDeviceProp prop{};
  ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  if (prop.major != 9) {
    std::fprintf(stderr, "stream_probe: needs sm_90a (Hopper); device 0 is sm_%d%d\n", prop.major, prop.minor);
    return 2;
  }
  const int sms = prop.multiProcessorCount, kblocks = K / 128;
  if (sms < 8) {  // the smallest row runs on an eighth of the SMs, the mixed rows on a quarter beside the rest
    std::fprintf(stderr, "stream_probe: needs at least 8 SMs (its smallest row is an eighth of them); device 0 has %d\n",
                 sms);
    return 2;
  }
  const size_t tile_bytes = size_t(256) * K;
  const int tiles = int((size_t(gb) << 30) / tile_bytes);
  const size_t wbytes = size_t(tiles) * tile_bytes;
  uint8_t* w = nullptr;
  uint8_t* am = nullptr;
  const int a_tiles = 16;  // 16 x 128 rows x K bytes: 14.7 MB at K = 7168, held by L2
  ok(cudaMalloc(&w, wbytes), "cudaMalloc (weights)");
  ok(cudaMemset(w, 0x33, wbytes), "memset (weights)");
  ok(cudaMalloc(&am, size_t(a_tiles) * 128 * K), "cudaMalloc (A)");
  ok(cudaMemset(am, 0x33, size_t(a_tiles) * 128 * K), "memset (A)");
  unsigned long long* seen = nullptr;
  unsigned long long* span = nullptr;
  ok(cudaMalloc(&seen, sms * sizeof(unsigned long long)), "cudaMalloc");
  ok(cudaMalloc(&span, sms * sizeof(unsigned long long)), "cudaMalloc");
  const CUtensorMap map_rows = make_map(w, false, uint64_t(K), uint64_t(tiles) * 256, 128, 128);
  const CUtensorMap map_packed = make_map(w, false, 128, wbytes / 128, 128, 128);
  const CUtensorMap map_a128 = make_map(am, false, uint64_t(K), uint64_t(a_tiles) * 128, 128, 128);
  const CUtensorMap map_a64 = make_map(am, false, uint64_t(K), uint64_t(a_tiles) * 128, 128, 64);

  // CTA counts as fractions of this GPU's SMs (on 132 SMs: 96, 66, 33, 16 and mixes of 33 / 66 / 99), so each row
  // measures the same share of the machine on any Hopper part.
  const int even = sms / 2 * 2, half = sms / 2, quarter = sms / 4, three_q = sms * 3 / 4;
  std::vector<Config> cfgs;
  for (int packed = 0; packed < 2; ++packed) {
    const char* lay = packed ? "packed" : "rows";
    for (int ctas : {sms, sms * 8 / 11, half, quarter, sms / 8}) cfgs.push_back({lay, packed, ctas, 1, 4, 0, 0, 0});
    for (int st : {2, 3, 6}) cfgs.push_back({lay, packed, sms, 1, st, 0, 0, 0});
    for (int st : {2, 6}) cfgs.push_back({lay, packed, quarter, 1, st, 0, 0, 0});
    for (int ar : {64, 128}) cfgs.push_back({lay, packed, sms, 1, 4, ar, 0, 0});
    for (int d : {300, 600, 1000}) cfgs.push_back({lay, packed, sms, 1, 4, 64, d, 0});
    cfgs.push_back({lay, packed, even, 2, 4, 0, 0, 0});
    cfgs.push_back({lay, packed, even, 2, 4, 128, 0, 0});
    cfgs.push_back({lay, packed, half / 2 * 2, 2, 4, 0, 0, 0});
  }
  // the L2 holds the source: the fabric's rate, single CTAs and multicast pairs
  cfgs.push_back({"rows", 0, sms, 1, 4, 0, 0, 1});
  cfgs.push_back({"rows", 0, sms, 1, 4, 128, 0, 1});
  cfgs.push_back({"rows", 0, sms, 1, 6, 0, 0, 1});
  cfgs.push_back({"rows", 0, even, 2, 4, 0, 0, 1});
  cfgs.push_back({"rows", 0, even, 2, 4, 128, 0, 1});
  cfgs.push_back({"rows", 0, half, 1, 4, 0, 0, 1});
  cfgs.push_back({"rows", 0, quarter, 1, 4, 0, 0, 1});
  // mixed: DRAM-streaming half tiles (32 KB weights + 8 KB A, held 300 ns) beside L2-fed full tiles (32 KB + 16 KB,
  // held 800 ns, or not at all)
  cfgs.push_back({"rows", 0, quarter, 1, 4, 64, 300, 0});
  cfgs.push_back({"rows", 0, sms, 1, 4, 64, 300, 0, quarter, 128, 800});
  cfgs.push_back({"rows", 0, sms, 1, 4, 64, 300, 0, half, 128, 800});
  cfgs.push_back({"rows", 0, sms, 1, 4, 64, 300, 0, quarter, 128, 0});
  cfgs.push_back({"rows", 0, sms, 1, 4, 64, 600, 0, quarter, 128, 800});
  cfgs.push_back({"rows", 0, sms, 1, 4, 64, 300, 0, three_q, 128, 800});
  cfgs.push_back({"rows", 0, sms, 1, 2, 64, 300, 0, quarter, 128, 800});
  // stages against a hold (s36): does a deeper ring raise a CTA's stream while its consumer holds each stage for the
  // time of a full tile's K block (~1 us at 8K) or a half tile's (~0.3-0.6 us)? Weights alone (32 KB stages) and with
  // a half tile's 8 KB A box (40 KB), from HBM, on all SMs and on half of them.
  for (int ctas : {sms, sms / 2})
    for (int d : {600, 1000})
      for (int st : {3, 4, 5, 6}) cfgs.push_back({"rows", 0, ctas, 1, st, 0, d, 0});
  for (int ctas : {sms, sms / 2})
    for (int st : {3, 4, 5})
      if (ctas != sms || st != 4) cfgs.push_back({"rows", 0, ctas, 1, st, 64, 1000, 0});  // (sms, 4): a row above

  // Every configuration's shared memory is checked before any runs: a bad one ends the program with nothing measured.
  auto stage_bytes = [](const Config& c) {
    return (kWBytes + std::max(c.a_rows, c.mix_ctas > 0 ? c.mix_a_rows : 0) * 128 + 1023) / 1024 * 1024;
  };
  auto smem_bytes = [&](const Config& c) {
    return size_t(c.stages) * stage_bytes(c) + 2 * kMaxStages * sizeof(uint64_t);
  };
  for (const Config& c : cfgs)
    if (smem_bytes(c) > prop.sharedMemPerBlockOptin || c.stages > kMaxStages) {  // the device's opt-in limit, read
      std::fprintf(stderr, "stream_probe: %d stages of %d B do not fit (%zu B of shared memory per block, %d stages)\n",
                   c.stages, stage_bytes(c), size_t(prop.sharedMemPerBlockOptin), kMaxStages);
      return 1;
    }
  bool all = true;
  auto measure = [&](const Config& c) -> Result {
    Args a{};
    a.wmap = c.packed ? map_packed : map_rows;
    a.amap = c.a_rows == 64 ? map_a64 : map_a128;
    a.packed = c.packed;
    a.kblocks = kblocks;
    a.tiles = c.l2 ? 16 : tiles;
    a.visits = c.l2 ? 16 * sms : tiles;
    a.stages = c.stages;
    a.stage_bytes = stage_bytes(c);
    a.a_rows = c.a_rows;
    a.a_tiles = a_tiles;
    a.delay_ns = c.delay_ns;
    a.cluster = c.cluster;
    a.stages_seen = seen;
    a.span_ns = span;
    a.mix_ctas = c.mix_ctas;
    a.mix_a_rows = c.mix_a_rows;
    a.mix_delay_ns = c.mix_delay_ns;
    a.mix_visits = 150;
    a.mix_amap = c.mix_a_rows == 64 ? map_a64 : map_a128;
    const size_t smem = smem_bytes(c);
    ok(cudaFuncSetAttribute(stream_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)), "smem attribute");
    cudaLaunchConfig_t lc{};
    lc.gridDim = dim3(c.ctas);
    lc.blockDim = dim3(64);
    lc.dynamicSmemBytes = smem;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = c.cluster;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    lc.attrs = at;
    lc.numAttrs = 1;
    cudaEvent_t e0, e1;
    ok(cudaEventCreate(&e0), "event");
    ok(cudaEventCreate(&e1), "event");
    ok(cudaMemset(seen, 0, sms * sizeof(unsigned long long)), "memset");
    ok(cudaLaunchKernelEx(&lc, stream_kernel, a), "launch (warm-up)");
    ok(cudaDeviceSynchronize(), "warm-up");
    ok(cudaEventRecord(e0), "record");
    for (int r = 0; r < reps; ++r) ok(cudaLaunchKernelEx(&lc, stream_kernel, a), "launch");
    ok(cudaEventRecord(e1), "record");
    ok(cudaEventSynchronize(e1), "run");
    float ms = 0;
    ok(cudaEventElapsedTime(&ms, e0, e1), "elapsed");
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    std::vector<unsigned long long> s(c.ctas), sp(c.ctas);
    ok(cudaMemcpy(s.data(), seen, c.ctas * sizeof(s[0]), cudaMemcpyDeviceToHost), "D2H");
    ok(cudaMemcpy(sp.data(), span, c.ctas * sizeof(sp[0]), cudaMemcpyDeviceToHost), "D2H");
    unsigned long long got = 0;
    for (auto x : s) got += x;
    unsigned long long want = (unsigned long long)a.visits * kblocks * c.cluster;  // each CTA of a pair sees all
    if (c.mix_ctas > 0) want += (unsigned long long)a.mix_visits * (c.ctas - c.mix_ctas) * kblocks;
    if (got != want) {
      std::fprintf(stderr, "stream_probe: %s: consumers saw %llu stages, expected %llu\n", c.name.c_str(), got, want);
      all = false;
    }
    const double t = ms * 1e-3 / reps;
    const double delivered = double(a.visits) * kblocks * (kWBytes + c.a_rows * 128) * c.cluster;
    const double l2read = double(a.visits) * kblocks * (kWBytes + c.a_rows * 128 * c.cluster);
    Result rr{c, ms / reps, delivered / t / 1e9, delivered / t / 1e9 / c.ctas, l2read / t / 1e9};
    if (c.mix_ctas > 0) {  // each side's bytes per CTA over its own mean span (last launch)
      double d_gbs = 0, l_gbs = 0, d_span = 0, l_span = 0;
      for (int i = 0; i < c.ctas; ++i) {
        const bool l2s = i >= c.mix_ctas;
        const double bytes = double(s[i]) * (kWBytes + (l2s ? c.mix_a_rows : c.a_rows) * 128);
        (l2s ? l_gbs : d_gbs) += bytes / (double(sp[i]) * 1e-9) / 1e9;
        (l2s ? l_span : d_span) += double(sp[i]) * 1e-6;
      }
      rr.dram_side_cta_gbs = d_gbs / c.mix_ctas;
      rr.l2_side_cta_gbs = l_gbs / (c.ctas - c.mix_ctas);
      rr.dram_side_span_ms = d_span / c.mix_ctas;
      rr.l2_side_span_ms = l_span / (c.ctas - c.mix_ctas);
    }
    return rr;
  };
  const std::vector<Result> res =
      probe::balanced_passes<Result>(cfgs.size(), rounds, [&](size_t i) { return measure(cfgs[i]); });
  std::printf("%s, %d SMs; weights %d GB (%d tiles of 256 rows x K %d), %d launches per row and pass, %s\n", prop.name,
              sms, gb, tiles, K, reps, probe::passes_note(rounds).c_str());
  std::printf("%-7s %3s %5s %7s %6s %6s %6s %9s %9s %12s %11s %10s\n", "layout", "l2", "ctas", "cluster", "stages",
              "A_KB", "delay", "ms", "ms_spread", "smem_GB/s", "per_CTA", "L2_GB/s");
  for (const Result& r : res)
    if (r.c.mix_ctas == 0)
      std::printf("%-7s %3d %5d %7d %6d %6d %6d %9.3f %9.3f %12.1f %11.2f %10.1f\n", r.c.name.c_str(), r.c.l2,
                  r.c.ctas, r.c.cluster, r.c.stages, r.c.a_rows / 8, r.c.delay_ns, r.ms, r.ms_spread, r.delivered_gbs,
                  r.per_cta_gbs, r.l2_read_gbs);
  std::printf("mixed: CTAs [0, dram) stream DRAM (A_KB, delay); the rest stream L2-held tiles (l2_A_KB, l2_delay)\n");
  std::printf("%5s %5s %6s %5s %6s %8s %9s %12s %10s %12s %10s %9s\n", "ctas", "dram", "stages", "A_KB", "delay",
              "l2_A_KB", "l2_delay", "dram_GB/s/CTA", "dram_ms", "l2_GB/s/CTA", "l2_ms", "ms_spread");
  for (const Result& r : res)
    if (r.c.mix_ctas > 0)
      std::printf("%5d %5d %6d %5d %6d %8d %9d %12.1f %10.3f %12.1f %10.3f %9.3f\n", r.c.ctas, r.c.mix_ctas,
                  r.c.stages, r.c.a_rows / 8, r.c.delay_ns, r.c.mix_a_rows / 8, r.c.mix_delay_ns, r.dram_side_cta_gbs,
                  r.dram_side_span_ms, r.l2_side_cta_gbs, r.l2_side_span_ms, r.ms_spread);
  if (!csv.empty()) {
    std::ofstream f(csv);
    f << "layout,l2_resident,ctas,cluster,stages,a_kb,delay_ns,ms,smem_gbs,per_cta_gbs,l2_read_gbs,mix_dram_ctas,"
         "mix_l2_a_kb,mix_l2_delay_ns,dram_side_cta_gbs,dram_side_span_ms,l2_side_cta_gbs,l2_side_span_ms,ms_spread,"
         "passes\n";
    for (const Result& r : res)
      f << r.c.name << "," << r.c.l2 << "," << r.c.ctas << "," << r.c.cluster << "," << r.c.stages << ","
        << r.c.a_rows / 8 << "," << r.c.delay_ns << "," << r.ms << "," << r.delivered_gbs << "," << r.per_cta_gbs << ","
        << r.l2_read_gbs << "," << r.c.mix_ctas << "," << r.c.mix_a_rows / 8 << "," << r.c.mix_delay_ns << ","
        << r.dram_side_cta_gbs << "," << r.dram_side_span_ms << "," << r.l2_side_cta_gbs << "," << r.l2_side_span_ms
        << "," << r.ms_spread << "," << 2 * rounds << "\n";
  }
  cudaFree(w);
  cudaFree(am);
  cudaFree(seen);
  cudaFree(span);
  return all ? 0 : 1;
}
