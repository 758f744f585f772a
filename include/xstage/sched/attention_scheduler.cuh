#pragma once
// Tile schedulers of the attention forward kernel (FA3-style interface). A tile is one kBlockM-row block
// of queries of one (batch, head). Pure __host__ __device__ index math so the CPU tests cover it; the
// kernel passes its CTA index and the grid size in.
//
// Interface every scheduler offers (the kernel is templated on it):
//   struct Params; static Params make_params(batch, heads, m_blocks, num_ctas, longest_first)
//   static int grid_size(const Params&)                        CTAs to launch
//   static WorkTileInfo get_initial_work(const Params&, int cta)
//   static WorkTileInfo get_next_work(const Params&, const WorkTileInfo&)
#if defined(__CUDACC__)
#define XSTAGE_HD __host__ __device__ __forceinline__
#else
#define XSTAGE_HD inline
#endif

namespace xstage::sched {

struct AttnBlockCoord {
  int m_block, head, batch;
};

struct WorkTileInfo {
  int tile_idx;
  bool is_valid;
  AttnBlockCoord coord;
};

// Persistent static schedule: CTA c takes tiles c, c + G, c + 2G, ... (G = grid size <= SM count).
// m_block varies fastest so the CTAs running at one time share (batch, head) and hence K/V in L2.
// longest_first (causal: a higher m_block sees more keys) hands out m_blocks from the last one down,
// so the short tiles fill the tail of the schedule.
struct StaticPersistentAttnScheduler {
  struct Params {
    int batch, heads, m_blocks;
    int num_tiles;
    int grid;
    bool longest_first;
  };

  XSTAGE_HD static Params make_params(int batch, int heads, int m_blocks, int num_ctas, bool longest_first = false) {
    const int tiles = batch * heads * m_blocks;
    return Params{batch, heads, m_blocks, tiles, tiles < num_ctas ? tiles : num_ctas, longest_first};
  }
  XSTAGE_HD static int grid_size(const Params& p) { return p.grid; }

  XSTAGE_HD static WorkTileInfo tile(const Params& p, int idx) {
    WorkTileInfo w{idx, idx < p.num_tiles, {0, 0, 0}};
    if (w.is_valid) {
      const int bh = idx / p.m_blocks, m = idx - bh * p.m_blocks;
      w.coord = AttnBlockCoord{p.longest_first ? p.m_blocks - 1 - m : m, bh % p.heads, bh / p.heads};
    }
    return w;
  }
  XSTAGE_HD static WorkTileInfo get_initial_work(const Params& p, int cta) { return tile(p, cta); }
  XSTAGE_HD static WorkTileInfo get_next_work(const Params& p, const WorkTileInfo& cur) {
    return tile(p, cur.tile_idx + p.grid);
  }
};

}  // namespace xstage::sched
