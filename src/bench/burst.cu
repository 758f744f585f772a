// Burst kernel, destination check and anchor kernels (see burst.cuh).
#include "burst.cuh"
#include "xstage/runtime/device.cuh"

#include "xstage/ptx/store.cuh"
#include "xstage/ptx/sync.cuh"
#include "xstage/ptx/tma.cuh"
#include "xstage/ptx/timer.cuh"

namespace xstage::bench {
namespace {

constexpr uint32_t kTmaChunk = 4096;  // bytes per cp.async.bulk (PLATFORM: chunking does not move the ceiling)

// The 16 bytes a thread stores at byte `off` of its region in burst `b`.
__device__ __forceinline__ uint4 fill_v4(const BurstParams& a, int b, int prod, uint32_t off) {
  const uint32_t seed = fill_seed(a.rank, b, prod), w = (off % a.period_bytes) / 4;
  return make_uint4(fill_word(seed, w), fill_word(seed, w + 1), fill_word(seed, w + 2), fill_word(seed, w + 3));
}

template <Path kPath, bool kWarpProducers>
__global__ void __launch_bounds__(1024) burst_kernel(BurstParams a) {
  extern __shared__ __align__(128) uint32_t stage[];
  runtime::TimedLsaBarrierCta bar(a.dev, blockIdx.x);
  // Start together on every rank: the senders' first burst meets an empty fabric.
  if (!bar.sync_or_timeout(cuda::memory_order_relaxed, a.timeout_ns, a.err)) return;

  const int lane = kWarpProducers ? threadIdx.x % 32 : threadIdx.x;
  const int lanes = kWarpProducers ? 32 : blockDim.x;
  const int prod = kWarpProducers ? blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32 : blockIdx.x;
  auto psync = [] {
    if (kWarpProducers) __syncwarp(); else __syncthreads();
  };
  const int target = prod < a.K ? target_of(a.rank, prod, a.pattern, a.src, a.dst, a.local, a.nranks) : -1;
  // CTA producers: `target` is uniform per CTA, so the loop's __syncthreads are uniform too.
  if (target >= 0) {
    char* dst = runtime::peer<char>(a.win, region_offset(a.rank, prod, a.K, a.B), target);
    const uint32_t period_words = a.period_bytes / 4;
    uint64_t next = ptx::clock_cycles();
    // Lane 0 keeps the previous burst's stamps in registers and stores them inside the next burst
    // (after its start stamp): a store between bursts could wait for a free slot behind the
    // outstanding remote stores, and that wait would be counted as gap.
    uint64_t pg0 = 0, pg1 = 0, pc0 = 0, pc1 = 0;
    // st.global: the data of the thread's next store, loop-carried across stores and bursts. A store
    // keeps its source registers locked until the memory pipeline takes its data (under
    // backpressure: when the fabric has room), and bar.sync does not wait for that (measured: the
    // wait then fell on the first later write to those registers, in the gap). Computing the next
    // store's data right after each store, into the same registers, puts that wait inside the burst:
    // after a burst's last store the thread prepares the next burst's first 16 bytes.
    uint4 v = fill_v4(a, 0, prod, lane * 16u);
    auto put_stamps = [&](int burst) {
      ulonglong2* s = reinterpret_cast<ulonglong2*>(a.stamps + (static_cast<size_t>(burst) * a.K + prod) * 4);
      s[0] = make_ulonglong2(pg0, pg1);
      s[1] = make_ulonglong2(pc0, pc1);
    };
    for (int b = 0; b < a.bursts; ++b) {
      if constexpr (kPath == Path::Tma) {
        const uint32_t seed = fill_seed(a.rank, b, prod);
        // Staging happens inside the gap (before `next`), like an epilogue writing its smem tile.
        for (uint32_t w = lane; w < period_words; w += lanes) stage[w] = fill_word(seed, w);
        ptx::fence_proxy_async_shared_cta();
      }
      ptx::spin_until_cycle(next);  // the gap G: producer-side work, no memory operations
      if (a.align_bursts) {
        // Isolated bursts only: every producer of this rank starts burst b together (one aggregate
        // burst of V = K*B). The recovery gap has drained the previous burst, so these atomics do
        // not queue behind remote stores. Relaxed: a release would wait for those stores anyway.
        psync();
        if (lane == 0) {
          ptx::red_add_relaxed_gpu_u32(a.arrive + b, 1);
          const uint64_t t0 = ptx::globaltimer_ns();
          uint32_t got;
          while ((got = ptx::ld_relaxed_gpu_u32(a.arrive + b)) < static_cast<uint32_t>(a.active)) {
            if (ptx::globaltimer_ns() - t0 > a.timeout_ns) {
              if (runtime::record_device_error(a.err, runtime::DeviceErrorCode::kBurstBarrierTimeout, a.rank, a.rank,
                                               b, a.active, got))
                printf("xstage: rank %d: burst-start barrier of burst %d timed out: %u of %d producers arrived\n",
                       a.rank, b, got, a.active);
              break;
            }
          }
        }
      }
      psync();  // the whole producer starts its burst after the gap
      uint64_t g0 = 0, c0 = 0;
      if (lane == 0) {
        g0 = ptx::globaltimer_ns();
        c0 = ptx::clock_cycles();
        if (b > 0) put_stamps(b - 1);  // part of this burst's issue (32 bytes next to B)
      }
      if constexpr (kPath == Path::St) {
#pragma unroll 1
        for (uint32_t off = lane * 16u; off < a.B; off += lanes * 16u) {
          ptx::st_weak_v4(dst + off, v);
          const uint32_t next_off = off + lanes * 16u;
          v = next_off < a.B ? fill_v4(a, b, prod, next_off) : fill_v4(a, b + 1, prod, lane * 16u);
        }
      } else {
        if (lane == 0) {
          for (uint32_t off = 0; off < a.B; off += kTmaChunk) {
            const uint32_t n = min(kTmaChunk, a.B - off);
            ptx::bulk_store(dst + off, reinterpret_cast<const char*>(stage) + off % a.period_bytes, n);
          }
          ptx::bulk_commit_group();
          // Sender-visible end of a TMA burst: the staging buffer may be reused (the bulk engine has
          // read it, which it can only do as fast as the fabric accepts the writes).
          ptx::bulk_wait_group_read<0>();
        }
      }
      psync();  // every store's data taken (St, see `v`) / the staging read by the bulk engine (TMA)
      if (lane == 0) {
        pc1 = ptx::clock_cycles();
        pg1 = ptx::globaltimer_ns();
        pg0 = g0;
        pc0 = c0;
      }
      next = ptx::clock_cycles() + a.gap_cycles;
    }
    if (lane == 0) put_stamps(a.bursts - 1);
    if constexpr (kPath == Path::Tma) {
      if (lane == 0) ptx::bulk_wait_group<0>();  // writes performed before the release below
    }
  }
  // Release our stores / acquire the peers': after this barrier the destination is complete.
  bar.sync_or_timeout(cuda::memory_order_acq_rel, a.timeout_ns, a.err);
}

__global__ void verify_kernel(BurstParams a, unsigned long long* wrong) {
  const int region = blockIdx.y;  // s * K + p
  const int s = region / a.K, p = region % a.K;
  const bool expected = target_of(s, p, a.pattern, a.src, a.dst, a.local, a.nranks) == a.rank;
  const uint32_t seed = fill_seed(s, a.bursts - 1, p);
  const uint32_t* buf =
      reinterpret_cast<const uint32_t*>(runtime::peer<char>(a.win, region_offset(s, p, a.K, a.B), a.rank));
  const uint32_t period_words = a.period_bytes / 4;
  unsigned long long bad = 0;
  for (uint32_t w = blockIdx.x * blockDim.x + threadIdx.x; w < a.B / 4; w += gridDim.x * blockDim.x) {
    const uint32_t want = expected ? fill_word(seed, w % period_words) : 0u;  // 0: the poison
    const uint32_t x = buf[w] ^ want;
    bad += ((x & 0xffu) != 0) + ((x & 0xff00u) != 0) + ((x & 0xff0000u) != 0) + ((x & 0xff000000u) != 0);
  }
  for (int o = 16; o > 0; o /= 2) bad += __shfl_down_sync(0xffffffffu, bad, o);
  if (threadIdx.x % 32 == 0 && bad) atomicAdd(wrong, bad);
}

__global__ void clock_probe_kernel(uint64_t* out, uint64_t cycles) {
  out[0] = ptx::globaltimer_ns();
  out[1] = ptx::clock_cycles();
  ptx::spin_until_cycle(out[1] + cycles);
  out[3] = ptx::clock_cycles();
  out[2] = ptx::globaltimer_ns();
}

__global__ void peer_pointer_kernel(ncclWindow_t win, int rank, void** out) { *out = runtime::peer<void>(win, 0, rank); }

__global__ void sm_copy_kernel(uint4* dst, const uint4* src, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<size_t>(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

}  // namespace

void launch_burst(const BurstParams& p, Path path, bool warp_producers, int threads, cudaStream_t s) {
  const int grid = warp_producers ? (p.K + threads / 32 - 1) / (threads / 32) : p.K;
  const size_t smem = path == Path::Tma ? p.period_bytes : 0;
  if (path == Path::Tma)
    burst_kernel<Path::Tma, false><<<grid, threads, smem, s>>>(p);
  else if (warp_producers)
    burst_kernel<Path::St, true><<<grid, threads, 0, s>>>(p);
  else
    burst_kernel<Path::St, false><<<grid, threads, 0, s>>>(p);
}

void launch_verify(const BurstParams& p, unsigned long long* wrong, cudaStream_t s) {
  const unsigned blocks_x = std::max(1u, std::min(8u, p.B / 4 / 256));
  verify_kernel<<<dim3(blocks_x, p.nranks * p.K), 256, 0, s>>>(p, wrong);
}

void launch_clock_probe(uint64_t* out4, uint64_t cycles, cudaStream_t s) { clock_probe_kernel<<<1, 1, 0, s>>>(out4, cycles); }

void launch_peer_pointer(ncclWindow_t win, int rank, void** out, cudaStream_t s) {
  peer_pointer_kernel<<<1, 1, 0, s>>>(win, rank, out);
}

void launch_sm_copy(void* dst, const void* src, size_t bytes, int blocks, int threads, cudaStream_t s) {
  sm_copy_kernel<<<blocks, threads, 0, s>>>(static_cast<uint4*>(dst), static_cast<const uint4*>(src), bytes / 16);
}

}  // namespace xstage::bench
