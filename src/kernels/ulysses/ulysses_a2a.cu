// Ulysses all-to-all copy kernel (ulysses_a2a.cuh).
#include "ulysses_a2a.cuh"
#include "xstage/kernel/signal.cuh"
#include "xstage/layout/ulysses.hpp"
#include "xstage/ptx/store.cuh"

namespace xstage::ulysses {
namespace {

constexpr int kThreads = 512;

__global__ void __launch_bounds__(kThreads) a2a_kernel(const __grid_constant__ A2AArgs a) {
  const int g = blockIdx.x / a.ctas_per_rank, cta = blockIdx.x % a.ctas_per_rank;
  const int src_rank = a.view.first_rank + g;
  const int P = a.view.world, hp = a.heads / P, S = P * a.seq_per_rank;
  const int chunks = a.head_dim * a.elem_bytes / 16;  // 16-byte chunks per (token, head) row
  const layout::UlyssesIn in{P, a.seq_per_rank, hp};
  const layout::UlyssesOut out{P, a.seq_per_rank, hp};
  // Items per tensor: batch * seq_per_rank * heads rows (either direction) of `chunks` chunks.
  const int64_t rows = int64_t(a.batch) * a.seq_per_rank * a.heads, items = rows * chunks;
  for (int t = 0; t < a.tensors; ++t) {
    const char* src = a.src[t][g];
    for (int64_t i = int64_t(cta) * blockDim.x + threadIdx.x; i < items; i += int64_t(a.ctas_per_rank) * blockDim.x) {
      const int c = int(i % chunks);
      const int64_t row = i / chunks;
      int64_t src_off, dst_off;
      int d;
      if (a.direction == A2ADirection::kSeqToHead) {  // source row (b, token, head) of [b, spr, H]
        const int head = int(row % a.heads);
        const int64_t bt = row / a.heads;
        const int tok = int(bt % a.seq_per_rank), b = int(bt / a.seq_per_rank);
        d = in.dst_rank(head);
        src_off = row;
        dst_off = (int64_t(b) * S + in.dst_row(src_rank, tok)) * hp + in.dst_head(head, d);
      } else {  // source row (b, s, hl) of [b, S, H/P]
        const int hl = int(row % hp);
        const int64_t bs = row / hp;
        const int s = int(bs % S), b = int(bs / S);
        d = out.dst_rank(s);
        src_off = row;
        dst_off = (int64_t(b) * a.seq_per_rank + out.dst_row(s, d)) * a.heads + out.dst_head(src_rank, hl);
      }
      const int64_t row_bytes = int64_t(chunks) * 16;
      const uint4 v = *reinterpret_cast<const uint4*>(src + src_off * row_bytes + c * 16);
      ptx::st_weak_v4(a.dst[t].at<char>(d, dst_off * row_bytes + c * 16), v);
    }
  }
  __threadfence_system();  // this thread's stores are performed before the CTA's release below
  __syncthreads();
  if (threadIdx.x == 0)
    for (int d = 0; d < P; ++d)
      kernel::signal_add_release(a.signal.at<uint32_t>(d, runtime::signal_offset(P, a.slot, src_rank)));
}

}  // namespace

cudaError_t launch_a2a(const A2AArgs& a, cudaStream_t stream) {
  if (a.ctas_per_rank < 1 || a.view.ranks < 1 || a.tensors < 1 || a.tensors > kMaxTensors ||
      (a.head_dim * a.elem_bytes) % 16 != 0 || a.heads % a.view.world != 0)
    return cudaErrorInvalidValue;
  a2a_kernel<<<a.view.ranks * a.ctas_per_rank, kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace xstage::ulysses
