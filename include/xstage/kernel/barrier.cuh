#pragma once
// Named barriers addressed by a kernel's own enum (ids 1..15; 0 is __syncthreads). Each kernel declares
//   enum class Bar : uint32_t { kFoo = 1, ... };
// and calls bar_sync(Bar::kFoo, threads) / bar_arrive(Bar::kFoo + i, threads) so no bare integer
// appears at a call site. `offset` selects one of a family of barriers (one per warpgroup, say).
#include <cstdint>
#include <type_traits>

#include "xstage/ptx/sync.cuh"

namespace xstage::kernel {

template <class Id>
__device__ __forceinline__ void bar_sync(Id id, uint32_t threads, int offset = 0) {
  static_assert(std::is_enum_v<Id>, "named barriers are addressed by an enum");
  ptx::named_barrier_sync(uint32_t(id) + uint32_t(offset), threads);
}
template <class Id>
__device__ __forceinline__ void bar_arrive(Id id, uint32_t threads, int offset = 0) {
  static_assert(std::is_enum_v<Id>, "named barriers are addressed by an enum");
  ptx::named_barrier_arrive(uint32_t(id) + uint32_t(offset), threads);
}

}  // namespace xstage::kernel
