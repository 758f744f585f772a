#pragma once
// Device view of one symmetric buffer: the base address of every rank's copy, as this launch sees them
// (real ranks: NCCL LSA pointers into the peers' windows; emulated ranks: the local allocations that play
// the peers). A table is a plain struct so it travels in kernel parameters; peer(ptr, rank) in one helper.
#include <cstddef>

#include "xstage/common/hd.hpp"

namespace xstage::runtime {

// Ranks a peer table (and so one kernel launch) can address: one NVLink domain of our H200 nodes. A
// world above it is rejected on the host with a message naming both numbers.
inline constexpr int kMaxRanks = 8;

struct PeerTable {
  char* base[kMaxRanks] = {};

  // Rank `rank`'s copy of the buffer, `byte_offset` bytes in.
  template <class T>
  XSTAGE_HD T* at(int rank, size_t byte_offset = 0) const {
    return reinterpret_cast<T*>(base[rank] + byte_offset);
  }
};

// Completion-signal counters (SignalSet): byte offset of counter (slot, source rank) in a rank's
// signal buffer; `slots` counters per source rank.
XSTAGE_HD inline size_t signal_offset(int world, int slot, int src) {
  return sizeof(unsigned) * (size_t(slot) * size_t(world) + size_t(src));
}

}  // namespace xstage::runtime
