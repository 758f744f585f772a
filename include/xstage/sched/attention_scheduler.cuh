#pragma once
// Tile scheduler of the attention forward kernel, behind the one scheduler interface
// (sched/work_tile.hpp). A tile is one kBlockM-row block of queries of one (batch, head).
//
// Rank groups: a launch may serve several ranks (ranks emulated on one GPU); each group owns `batch`
// consecutive batch entries of the launch's tensors and a disjoint set of CTAs (the group's share of the
// SMs), so a CTA only ever computes tiles of its own rank. With one group this is the plain persistent
// schedule. Pure __host__ __device__ index math: the CPU tests walk it exhaustively.
#include "xstage/common/hd.hpp"
#include "xstage/sched/work_tile.hpp"

namespace xstage::sched {

struct AttnTile {
  bool is_valid = false;
  int m_block = 0, head = 0;
  int batch = 0;  // index into the launch's batch dimension: group * batch_per_group + b
  int group = 0;  // the rank group (emulated rank within the launch) this tile belongs to
};

// Persistent static schedule in rounds of G tiles (G = the group's CTA count): in round k, CTA c takes
// the group's tile k*G + c. Non-causal: m_block varies fastest, so the CTAs running at one time share
// (batch, head) and hence K/V in L2. longest_first (causal: a higher m_block sees more keys): tiles in
// decreasing m_block over all (batch, head), so each round holds tiles of near-equal length and the
// short ones fill the tail (longest-processing-time-first, as FA3 orders causal work); odd rounds are
// dealt in reverse (tile k*G + G-1-c), so the CTA that took the longest tile of one round takes the
// shortest of the next and the work per CTA evens out (plain round-robin leaves CTA 0 ~6 % above the
// mean at S = 32K, 8 heads).
class StaticPersistentAttnScheduler {
 public:
  struct Params {
    int batch = 0, heads = 0, m_blocks = 0;  // per group
    int groups = 1;                          // rank groups in the launch
    int tiles = 0;                           // per group
    int ctas = 0;                            // CTAs per group
    bool longest_first = false;
  };
  using WorkTileInfo = sched::WorkTileInfo<AttnTile>;  // cursor[0] = the round

  // num_ctas: CTAs the device can run at once (SM count); each group gets num_ctas / groups of them
  // (at least one), never more than it has tiles.
  XSTAGE_HD static Params make_params(int batch, int heads, int m_blocks, int num_ctas, bool longest_first = false,
                                      int groups = 1) {
    Params p;
    p.batch = batch;
    p.heads = heads;
    p.m_blocks = m_blocks;
    p.groups = groups;
    p.tiles = batch * heads * m_blocks;
    const int share = num_ctas / groups > 0 ? num_ctas / groups : 1;
    p.ctas = p.tiles < share ? p.tiles : share;
    p.longest_first = longest_first;
    return p;
  }
  XSTAGE_HD static int grid_size(const Params& p) { return p.groups * p.ctas; }

  XSTAGE_HD StaticPersistentAttnScheduler(const Params& p, int cta) : p_(p), group_(cta / p.ctas), first_(cta % p.ctas) {}

  XSTAGE_HD WorkTileInfo get_initial_work() const { return at(0); }
  XSTAGE_HD WorkTileInfo get_next_work(const WorkTileInfo& cur) const { return at(cur.cursor[0] + 1); }

 private:
  XSTAGE_HD WorkTileInfo at(int round) const {
    WorkTileInfo w;
    w.cursor[0] = round;
    const int idx = round * p_.ctas + (p_.longest_first && (round & 1) ? p_.ctas - 1 - first_ : first_);
    if (idx >= p_.tiles || group_ >= p_.groups) return w;
    int bh, m;
    if (p_.longest_first) {
      const int pairs = p_.batch * p_.heads;
      m = p_.m_blocks - 1 - idx / pairs;
      bh = idx % pairs;
    } else {
      bh = idx / p_.m_blocks;
      m = idx - bh * p_.m_blocks;
    }
    w.tile.is_valid = true;
    w.tile.m_block = m;
    w.tile.head = bh % p_.heads;
    w.tile.batch = group_ * p_.batch + bh / p_.heads;
    w.tile.group = group_;
    return w;
  }

  Params p_;
  int group_, first_;
};

}  // namespace xstage::sched
