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
// decreasing m_block (longest-processing-time-first, as FA3 orders causal work), so each round holds
// tiles of near-equal length and the short ones fill the tail; odd rounds are dealt in reverse (tile
// k*G + G-1-c), so the CTA that took the longest tile of one round takes the shortest of the next and
// the work per CTA evens out (plain round-robin leaves CTA 0 ~6 % above the mean at S = 32K, 8 heads).
//
// LPT groups (longest_first only): LPT over all (batch, head) pairs at once spreads the CTAs running
// together over every pair, each pair's K/V read by only ~G/pairs CTAs in step, so about pairs/G of the
// K/V reads miss L2 (24 heads: ~20 %; 40: ~30 %): at 24 heads x 64K that HBM traffic costs ~10 % (power-
// capped clock). With lpt_group = g < pairs the pairs are cut into groups of g consecutive pairs (the
// last may be smaller), LPT within a group, groups one after another: G/g CTAs share each K/V. A round
// straddling two groups holds the old group's shortest tiles and the new group's longest; its slots are
// rotated so the deal still goes longest to shortest (rank r takes slot (r + j) mod G, j = the boundary's
// slot). lpt_group_pairs() picks g: as many pairs as fit L2 but at least min_rounds rounds of tiles per
// group (balance), and no grouping at all unless that leaves at least min_groups groups.
class StaticPersistentAttnScheduler {
 public:
  struct Params {
    int batch = 0, heads = 0, m_blocks = 0;  // per group
    int groups = 1;                          // rank groups in the launch
    int tiles = 0;                           // per group
    int ctas = 0;                            // CTAs per group
    bool longest_first = false;
    int lpt_group = 0;                       // (batch, head) pairs per LPT group (longest_first), 1..pairs
  };
  using WorkTileInfo = sched::WorkTileInfo<AttnTile>;  // cursor[0] = the round

  // num_ctas: CTAs the device can run at once (SM count); each group gets num_ctas / groups of them
  // (at least one), never more than it has tiles.
  // Pairs per LPT group: g = max(L2 / kv_pair_bytes, ceil(min_rounds * ctas / m_blocks)), evened out over
  // ceil(pairs / g) groups; all pairs (one group, plain global LPT) when fewer than min_groups groups would
  // result or when l2_bytes or kv_pair_bytes is 0. kv_pair_bytes: the K and V bytes of one (batch, head).
  XSTAGE_HD static int lpt_group_pairs(int pairs, int m_blocks, int ctas, long long kv_pair_bytes, long long l2_bytes,
                                       int min_rounds, int min_groups) {
    if (pairs < 1 || m_blocks < 1 || ctas < 1 || kv_pair_bytes <= 0 || l2_bytes <= 0) return pairs < 1 ? 1 : pairs;
    long long g = l2_bytes / kv_pair_bytes;
    const long long g_bal = (static_cast<long long>(min_rounds) * ctas + m_blocks - 1) / m_blocks;
    if (g < g_bal) g = g_bal;
    if (g < 1) g = 1;
    if (static_cast<long long>(pairs) < static_cast<long long>(min_groups < 1 ? 1 : min_groups) * g) return pairs;
    const long long n = (pairs + g - 1) / g;
    return static_cast<int>((pairs + n - 1) / n);
  }

  // lpt_group: pairs per LPT group (0 or >= batch * heads: one group); only used with longest_first.
  XSTAGE_HD static Params make_params(int batch, int heads, int m_blocks, int num_ctas, bool longest_first = false,
                                      int groups = 1, int lpt_group = 0) {
    Params p;
    p.batch = batch;
    p.heads = heads;
    p.m_blocks = m_blocks;
    p.groups = groups;
    p.tiles = batch * heads * m_blocks;
    const int share = num_ctas / groups > 0 ? num_ctas / groups : 1;
    p.ctas = p.tiles < share ? p.tiles : share;
    p.longest_first = longest_first;
    const int pairs = batch * heads;
    p.lpt_group = lpt_group < 1 || lpt_group > pairs ? pairs : lpt_group;
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
    if (group_ >= p_.groups) return w;
    const int base = round * p_.ctas;
    int bh, m;
    if (p_.longest_first) {
      const int rank = (round & 1) ? p_.ctas - 1 - first_ : first_;
      const int pairs = p_.batch * p_.heads, g = p_.lpt_group, group_tiles = g * p_.m_blocks;
      // first LPT-group boundary at or after this round's first slot; inside the round: rotate
      const int boundary = (base + group_tiles - 1) / group_tiles * group_tiles;
      const int end = base + p_.ctas < p_.tiles ? base + p_.ctas : p_.tiles;
      const int j = boundary < end ? boundary - base : 0;
      const int idx = base + (rank + j) % p_.ctas;
      if (idx >= p_.tiles) return w;
      const int k = idx / group_tiles, off = idx - k * group_tiles;
      const int size = pairs - k * g < g ? pairs - k * g : g;  // the last group may be smaller
      m = p_.m_blocks - 1 - off / size;
      bh = k * g + off % size;
    } else {
      const int idx = base + first_;
      if (idx >= p_.tiles) return w;
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
