// Compile-only check (CUDA builds): the MoE XSTAGE_HD headers are valid device code under nvcc (C++17,
// sm_90a): placement, the dispatch destination and its inverse, the FP8/bf16 codecs, and the
// scheduler layout a rank's receive rows feed.
#include "xstage/moe/dispatch_layout.hpp"
#include "xstage/moe/quant.hpp"
#include "xstage/sched/moe_layout.hpp"

namespace {
__global__ void moe_layout_device(xstage::moe::DispatchLayout l, xstage::sched::MoeLayout sched, const int* expert,
                                  const int* pos, const float* x, int n, int* rows, unsigned char* codes, float* back) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const xstage::moe::DispatchDest d = l.dest(blockIdx.y, expert[i], pos[i]);
  int le = -1, r = -1, s = -1, p = -1;
  const bool real = l.locate(d.rank, d.recv_row, &le, &r, &s, &p);
  rows[i] = real ? d.recv_row + sched.tokens_in_row(d.recv_row / l.b_m) : -1;
  codes[i] = xstage::moe::fp8_e4m3_encode(x[i]);
  back[i] = xstage::moe::bf16_round(xstage::moe::fp8_e4m3_decode(codes[i])) +
            float(xstage::moe::max_recv_rows(l.place.world, l.tokens_per_rank, l.topk, l.place.per_rank(), l.b_m));
}
}  // namespace

void xstage_moe_nvcc_check_instantiate(const int* e, const int* p, const float* x, int* rows, unsigned char* c, float* b) {
  moe_layout_device<<<1, 32>>>({}, {}, e, p, x, 32, rows, c, b);
}
