#pragma once
// MoE tile schedulers for a persistent, warp-specialized MoE kernel (SPEC §5), pure __host__ __device__
// C++17 behind one interface (the FlashAttention-3 tile-scheduler shape), so a kernel is templated on
// the scheduler type and swapping Expert-Wave for Interleaved is a change of one type:
//
//   typename Sched::Params params{layout, instances, roles, ...};
//   Sched sched(params, cta);                      // CTA c = instance c / roles, role c % roles
//   for (auto w = sched.get_initial_work(); w.is_valid(); w = sched.get_next_work(w)) use(w.tile);
//
// (the interface of sched/work_tile.hpp: grid_size(params) = instances * roles). A scheduler object is
// immutable; the cursor state travels in WorkTileInfo (as in FA3), so the producer warps (TMA) and
// consumer warps (MMA, epilogue) can each walk the same sequence.
//
// Instances and roles: `instances` scheduler instances run concurrently (one per CTA on Hopper, one
// per CTA pair with 2-CTA MMA); each has `roles` CTAs, and role r takes N-tile 2*j + r of tile pair j
// (in general roles*j + r). A row of kind i therefore has P_i = ntiles_i / roles tile pairs, and the
// global tile-pair index of stream i is k_i = p * P_i + j. Instance g walks k_i = g, g + S, g + 2S, ...
// with S = instances (the paper's "stride G"; not the Burst-Gap gap G). Nothing here assumes an SM
// count: instances and roles are parameters. See docs/SCHEDULERS.md for the ordering guarantees.
#include "xstage/common/hd.hpp"
#include "xstage/sched/moe_layout.hpp"
#include "xstage/sched/work_tile.hpp"

#ifndef __CUDA_ARCH__
#include "xstage/common/error.hpp"
#endif

namespace xstage::sched {

namespace detail {
// Checks shared by both schedulers' host-side validation.
#ifndef __CUDA_ARCH__
inline void check_moe_params(const MoeLayout& l, int instances, int roles) {
  XSTAGE_REQUIRE(l.row_offset != nullptr && l.num_experts > 0, "MoE scheduler: empty layout");
  XSTAGE_REQUIRE(instances > 0, "MoE scheduler: instance count must be positive, got ", instances);
  // The cursors are int positions that step by `instances` past the last tile; a layout holds fewer than 2^30 tile
  // positions (MoeLayoutStorage, the MoE layer), so 2^30 instances keep every cursor below 2^31.
  XSTAGE_REQUIRE(instances <= (1 << 30), "MoE scheduler: instance count ", instances,
                 " exceeds 2^30 (the int cursors step by it)");
  XSTAGE_REQUIRE(roles > 0, "MoE scheduler: roles per instance must be positive, got ", roles);
  XSTAGE_REQUIRE(l.l1_ntiles % roles == 0, "MoE scheduler: Linear-1 N-tiles per row (", l.l1_ntiles,
                 ") is not a multiple of the roles per instance (", roles, ")");
  XSTAGE_REQUIRE(l.l2_ntiles % roles == 0, "MoE scheduler: Linear-2 N-tiles per row (", l.l2_ntiles,
                 ") is not a multiple of the roles per instance (", roles, ")");
}
#endif
}  // namespace detail

// ---------------------------------------------------------------------------------------------------
// Interleaved (SPEC §5, Algorithm 1). Both cursors start at g and advance by S. With
// p1 = floor(k1 / P1) (+inf once L1 is exhausted) and p2 = floor(k2 / P2), each step emits
//   L2(e(p2), m = p2 - O_e, n = roles*(k2 mod P2) + r), k2 += S   if k2 < rows*P2 and p2 + D <= p1,
//   L1(e(p1), m = p1 - O_e, n = roles*(k1 mod P1) + r), k1 += S   otherwise,
// until both streams are exhausted. D >= 1 is needed for an in-order kernel that waits on L1 rows:
// with D = 0 an instance may emit L2 of row p before its own L1 tiles of row p (docs/SCHEDULERS.md).
class MoeInterleavedScheduler {
 public:
  struct Params {
    MoeLayout layout;
    int instances = 1;  // S: concurrently running scheduler instances (the stride)
    int roles = 1;      // CTAs per instance (1 on Hopper per-CTA, 2 for CTA pairs)
    int lead = 1;       // D: L1 rows the instance's L1 cursor must lead the L2 cursor by
  };
  using WorkTileInfo = sched::WorkTileInfo<MoeTile>;  // cursor = {k1, k2} after this tile

  XSTAGE_HD MoeInterleavedScheduler(const Params& p, int instance, int role)
      : p_(p), g_(instance), r_(role) {}
  XSTAGE_HD MoeInterleavedScheduler(const Params& p, int cta) : p_(p), g_(cta / p.roles), r_(cta % p.roles) {}
  XSTAGE_HD static int grid_size(const Params& p) { return p.instances * p.roles; }

#ifndef __CUDA_ARCH__
  // Host-side validation with named values (kernels validate once on the host before launch).
  static void validate(const Params& p) {
    detail::check_moe_params(p.layout, p.instances, p.roles);
    XSTAGE_REQUIRE(p.lead >= 0, "interleaved scheduler: lead D must be >= 0, got ", p.lead);
  }
#endif

  XSTAGE_HD WorkTileInfo get_initial_work() const { return step(g_, g_); }
  XSTAGE_HD WorkTileInfo get_next_work(const WorkTileInfo& cur) const { return step(cur.cursor[0], cur.cursor[1]); }

 private:
  XSTAGE_HD WorkTileInfo step(int k1, int k2) const {
    const MoeLayout& l = p_.layout;
    const int P1 = l.l1_ntiles / p_.roles, P2 = l.l2_ntiles / p_.roles;
    const int rows = l.rows();
    const int T1 = rows * P1, T2 = rows * P2;
    WorkTileInfo w;
    w.cursor[0] = k1;
    w.cursor[1] = k2;
    if (k1 >= T1 && k2 >= T2) return w;  // invalid: both streams done
    const bool l1_done = k1 >= T1;
    const int p1 = l1_done ? 0 : k1 / P1;  // p1 = +inf when l1_done (handled by the flag)
    const int p2 = k2 / P2;
    // p2 + D <= p1, written as p1 - p2 >= D so a large D cannot overflow.
    if (k2 < T2 && (l1_done || p1 - p2 >= p_.lead)) {
      w.tile = l.tile(MoeTileKind::L2, p2, p_.roles * (k2 % P2) + r_);
      w.cursor[1] = k2 + p_.instances;
    } else {
      w.tile = l.tile(MoeTileKind::L1, p1, p_.roles * (k1 % P1) + r_);
      w.cursor[0] = k1 + p_.instances;
    }
    return w;
  }

  Params p_;
  int g_, r_;
};

// ---------------------------------------------------------------------------------------------------
// Expert-Wave (the MegaMoE baseline): local experts are grouped into waves of `experts_per_wave`
// consecutive experts; each wave runs all its L1 tile pairs, then all its L2 tile pairs. All tile pairs
// are laid out in one global order -- wave 0 L1 (row-major: (p - first row) * P1 + j), wave 0 L2, wave 1
// L1, ... -- and instance g takes positions k = g, g + S, g + 2S, ... (the usual persistent-kernel
// rotation), so the work of consecutive waves is balanced across instances and no instance restarts.
// Wave w starts at position O_{w * experts_per_wave} * (P1 + P2) because waves hold contiguous rows.
// Params::wave_lag 1 lags each wave's L2 tiles by one wave: wave 0 L1, wave 1 L1, wave 0 L2, wave 2 L1, wave 1 L2, ...,
// the last wave's L2. An L2 tile then waits on Linear-1 rows a whole wave earlier instead of the ones just issued: with
// few rows per wave (DiT-MoE-XL at 8K: one expert of 8 rows a wave) the first L2 tiles of a wave otherwise start
// while the CTAs still run the wave's last L1 tiles, and wait for them (docs/MOE-NOTEBOOK.md, "Session 54"). Segment s of the
// lagged order is wave s's L1 tiles then wave s - 1's L2 tiles; it starts at position O_s P1 + O_{s-1} P2 (O_w: the
// first row of wave w, O_{-1} = 0). Every L2 tile still follows all L1 tiles of its row, so the deadlock argument
// (an L2 tile waits only on earlier positions) holds as for wave_lag 0.
// Experts per wave so that a wave's Linear-1 tiles cover `ctas` CTAs: ceil(ctas / max(1, rows * l1_ntiles / experts))
// in exact integer arithmetic, clamped to [1, experts] (rows: the layout's rows over all its experts). The host picks
// it from a host plan's layout; a device plan's layout exists only in device memory, so its scheduler computes the
// same value from there (Params::wave_ctas).
XSTAGE_HD inline int auto_experts_per_wave(int rows, int l1_ntiles, int experts, int ctas) {
  const long long work = (long long)rows * l1_ntiles;  // Linear-1 tiles of the layer
  long long w = work <= experts ? ctas : ((long long)ctas * experts + work - 1) / work;
  if (w < 1) w = 1;
  if (w > experts) w = experts;
  return int(w);
}

class MoeExpertWaveScheduler {
 public:
  struct Params {
    MoeLayout layout;
    int instances = 1;
    int roles = 1;
    int experts_per_wave = 1;
    // experts_per_wave 0 and wave_ctas > 0: auto_experts_per_wave(layout rows, ..., wave_ctas), resolved when a
    // scheduler is constructed (on the device for a layout in device memory).
    int wave_ctas = 0;
    // 0: a wave's L2 tiles right after its L1 tiles (the paper's Expert-Wave); 1: after the next wave's L1 tiles.
    int wave_lag = 0;
  };
  using WorkTileInfo = sched::WorkTileInfo<MoeTile>;  // cursor[0] = position k in the global wave order

  XSTAGE_HD MoeExpertWaveScheduler(const Params& p, int instance, int role) : p_(resolved(p)), g_(instance), r_(role) {}
  XSTAGE_HD MoeExpertWaveScheduler(const Params& p, int cta)
      : p_(resolved(p)), g_(cta / p.roles), r_(cta % p.roles) {}
  XSTAGE_HD static int grid_size(const Params& p) { return p.instances * p.roles; }
  XSTAGE_HD int experts_per_wave() const { return p_.experts_per_wave; }

#ifndef __CUDA_ARCH__
  static void validate(const Params& p) {
    detail::check_moe_params(p.layout, p.instances, p.roles);
    XSTAGE_REQUIRE(p.experts_per_wave > 0 || (p.experts_per_wave == 0 && p.wave_ctas > 0),
                   "expert-wave scheduler: experts per wave must be positive (or 0 with wave_ctas > 0: sized from the "
                   "layout), got ", p.experts_per_wave, " (wave_ctas ", p.wave_ctas, ")");
    XSTAGE_REQUIRE(p.wave_lag == 0 || p.wave_lag == 1, "expert-wave scheduler: wave lag must be 0 or 1, got ",
                   p.wave_lag);
    // num_waves() rounds up as (experts + per wave - 1) / per wave in int: both below 2^30 keep that sum below 2^31.
    XSTAGE_REQUIRE(p.experts_per_wave <= (1 << 30) && p.layout.num_experts <= (1 << 30),
                   "expert-wave scheduler: experts per wave ", p.experts_per_wave, " or experts ",
                   p.layout.num_experts, " exceed 2^30");
  }
#endif

  XSTAGE_HD int num_waves() const {
    return (p_.layout.num_experts + p_.experts_per_wave - 1) / p_.experts_per_wave;
  }

  XSTAGE_HD WorkTileInfo get_initial_work() const { return at(g_); }
  XSTAGE_HD WorkTileInfo get_next_work(const WorkTileInfo& cur) const { return at(cur.cursor[0] + p_.instances); }

 private:
  XSTAGE_HD static Params resolved(Params p) {
    if (p.experts_per_wave <= 0)
      p.experts_per_wave = auto_experts_per_wave(p.layout.rows(), p.layout.l1_ntiles, p.layout.num_experts, p.wave_ctas);
    return p;
  }
  XSTAGE_HD int wave_first_row(int w) const {
    const long long e = (long long)w * p_.experts_per_wave;
    return p_.layout.row_offset[e < p_.layout.num_experts ? e : p_.layout.num_experts];
  }
  XSTAGE_HD WorkTileInfo at(int k) const {
    const MoeLayout& l = p_.layout;
    const int P1 = l.l1_ntiles / p_.roles, P2 = l.l2_ntiles / p_.roles;
    WorkTileInfo w;
    w.cursor[0] = k;
    if (k >= l.rows() * (P1 + P2)) return w;  // invalid: past the last wave
    if (p_.wave_lag != 0) {
      // The segment holding k: the largest s in [0, waves] with O_s P1 + O_{s-1} P2 <= k (non-decreasing in s).
      auto start = [&](int s) { return wave_first_row(s) * P1 + (s > 0 ? wave_first_row(s - 1) : 0) * P2; };
      int lo = 0, hi = num_waves();
      while (lo < hi) {
        const int mid = lo + (hi - lo + 1) / 2;
        if (start(mid) <= k)
          lo = mid;
        else
          hi = mid - 1;
      }
      const int first = wave_first_row(lo), l1_tiles = (wave_first_row(lo + 1) - first) * P1;
      const int local = k - start(lo);
      if (local < l1_tiles) {
        w.tile = l.tile(MoeTileKind::L1, first + local / P1, p_.roles * (local % P1) + r_);
      } else {
        const int l2 = local - l1_tiles;  // wave lo - 1's L2 tiles (lo >= 1 here: segment 0 holds no L2 tile)
        w.tile = l.tile(MoeTileKind::L2, wave_first_row(lo - 1) + l2 / P2, p_.roles * (l2 % P2) + r_);
      }
      return w;
    }
    // The wave holding position k: the largest w with first_row(w) * (P1 + P2) <= k (empty waves have
    // an empty range, so the largest such w is the one that holds k).
    int lo = 0, hi = num_waves() - 1;
    while (lo < hi) {
      const int mid = lo + (hi - lo + 1) / 2;
      if (wave_first_row(mid) * (P1 + P2) <= k)
        lo = mid;
      else
        hi = mid - 1;
    }
    const int first = wave_first_row(lo), rows = wave_first_row(lo + 1) - first;
    const int local = k - first * (P1 + P2);
    if (local < rows * P1)
      w.tile = l.tile(MoeTileKind::L1, first + local / P1, p_.roles * (local % P1) + r_);
    else
      w.tile = l.tile(MoeTileKind::L2, first + (local - rows * P1) / P2, p_.roles * ((local - rows * P1) % P2) + r_);
    return w;
  }

  Params p_;
  int g_, r_;
};

}  // namespace xstage::sched
