#pragma once
// Global-memory loads, stores, reductions and fences, named by memory order and scope (DeepGEMM
// style). Addresses may be local or a peer's (an LSA / peer-mapped pointer): `.sys` scope is what makes
// an access ordered with respect to another GPU. Bulk (TMA) stores live in tma.cuh.
#include <cstdint>

namespace xstage::ptx {

// L2 cache policies (createpolicy, fraction 1.0): a hint attached to a load or store about how long its lines
// should stay in L2 relative to other lines (evict_first: streamed data; evict_last: data read again soon).
__device__ __forceinline__ uint64_t l2_policy_evict_first() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}
__device__ __forceinline__ uint64_t l2_policy_evict_last() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
  return p;
}

// st_weak_v4 with an L2 cache policy (l2_policy_*).
__device__ __forceinline__ void st_weak_v4_hint(void* ptr, uint4 v, uint64_t policy) {
  asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1, %2, %3, %4}, %5;" ::"l"(ptr), "r"(v.x), "r"(v.y), "r"(v.z),
               "r"(v.w), "l"(policy)
               : "memory");
}
// 16-byte weak store (the plain epilogue store); the address may be local or a peer (LSA) address.
__device__ __forceinline__ void st_weak_v4(void* ptr, uint4 v) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(ptr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

__device__ __forceinline__ void st_relaxed_sys_u32(uint32_t* ptr, uint32_t v) {
  asm volatile("st.relaxed.sys.global.u32 [%0], %1;" ::"l"(ptr), "r"(v) : "memory");
}

__device__ __forceinline__ void st_release_sys_u32(uint32_t* ptr, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(ptr), "r"(v) : "memory");
}

__device__ __forceinline__ uint32_t ld_acquire_sys_u32(const uint32_t* ptr) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(ptr) : "memory");
  return v;
}

__device__ __forceinline__ uint32_t ld_relaxed_gpu_u32(const uint32_t* ptr) {
  uint32_t v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(ptr) : "memory");
  return v;
}

// Relaxed: no ordering of earlier stores. A release here would wait until this thread's earlier
// remote stores are performed, i.e. couple the issuer to remote completion (the X-Stage would vanish).
__device__ __forceinline__ void red_add_relaxed_gpu_u32(uint32_t* ptr, uint32_t v) {
  asm volatile("red.relaxed.gpu.global.add.u32 [%0], %1;" ::"l"(ptr), "r"(v) : "memory");
}

// Release at system scope: every write this thread has performed or observed (cumulativity) is
// visible to whoever acquires the new value, on any GPU. Use it only where the stores it orders have
// already completed (else it waits for them: see red_add_relaxed_gpu_u32).
__device__ __forceinline__ void red_add_release_sys_u32(uint32_t* ptr, uint32_t v) {
  asm volatile("red.release.sys.global.add.u32 [%0], %1;" ::"l"(ptr), "r"(v) : "memory");
}

// Orders async-proxy (TMA / bulk) global accesses with this thread's later generic-proxy accesses.
__device__ __forceinline__ void fence_proxy_async_global() { asm volatile("fence.proxy.async.global;" ::: "memory"); }

}  // namespace xstage::ptx
