#pragma once
// Counter-based hashing for fills that must give the same values whatever the grid (device fills of test and
// benchmark data): element i's bits are a function of (i, seed) alone.
#include <cstdint>

#include "xstage/common/hd.hpp"

namespace xstage::hash {

// lowbias32 (Chris Wellons' integer hash): a bijection of 32-bit words with good avalanche.
XSTAGE_HD inline std::uint32_t lowbias32(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// MurmurHash3's 64-bit finalizer (fmix64): a bijection of 64-bit words with good avalanche.
XSTAGE_HD inline std::uint64_t fmix64(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

// A finite e4m3 code from hash bits: the low byte, with the two NaN codes 0x7F / 0xFF moved to +-448 (0x7E / 0xFE).
XSTAGE_HD inline std::uint8_t finite_e4m3(std::uint32_t h) {
  const std::uint32_t c = h & 0xFFu;
  return std::uint8_t((c & 0x7Fu) == 0x7Fu ? c ^ 1u : c);
}

}  // namespace xstage::hash
