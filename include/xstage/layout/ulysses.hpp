#pragma once
// Ulysses sequence parallelism over P ranks: index math of both all-to-alls, shared by the kernels
// (peer-store epilogue, the all-to-all copy kernel) and the CPU tests.
// Post-attention (UlyssesOut): source rank s holds attention output for the full sequence
// (S = P * seq_per_rank rows) of its heads_per_rank heads; after it, rank d holds rows
// [d * seq_per_rank, (d + 1) * seq_per_rank) of all P * heads_per_rank heads:
//   source (s, row, h)  ->  destination d = row / seq_per_rank, row - d * seq_per_rank, head s * heads_per_rank + h.
// Pre-attention (UlyssesIn) is its inverse: source rank s holds its seq_per_rank tokens of all heads;
//   source (s, token, head)  ->  destination d = head / heads_per_rank, row s * seq_per_rank + token,
//                                head head - d * heads_per_rank.
#include "xstage/common/hd.hpp"

namespace xstage::layout {

struct UlyssesOut {
  int world;          // P
  int seq_per_rank;   // S / P rows per destination
  int heads_per_rank; // heads each source computes

  XSTAGE_HD int seqlen() const { return world * seq_per_rank; }
  XSTAGE_HD int dst_rank(int row) const { return row / seq_per_rank; }
  XSTAGE_HD int dst_row(int row, int dst) const { return row - dst * seq_per_rank; }  // < 0 or >= seq_per_rank: not dst's
  XSTAGE_HD int dst_head(int src, int head) const { return src * heads_per_rank + head; }
  // Destinations [*first, *last] that rows [row0, row0 + rows) touch (rows past the sequence are padding
  // and touch nothing); *last < *first when the tile holds no real row.
  XSTAGE_HD void dst_range(int row0, int rows, int* first, int* last) const {
    const int end = row0 + rows < seqlen() ? row0 + rows : seqlen();
    *first = dst_rank(row0);
    *last = end > row0 ? dst_rank(end - 1) : *first - 1;
  }
};

struct UlyssesIn {
  int world, seq_per_rank, heads_per_rank;

  XSTAGE_HD int dst_rank(int head) const { return head / heads_per_rank; }
  XSTAGE_HD int dst_row(int src, int token) const { return src * seq_per_rank + token; }
  XSTAGE_HD int dst_head(int head, int dst) const { return head - dst * heads_per_rank; }
};

}  // namespace xstage::layout
