#pragma once
// Thin PTX wrappers for remote/local stores, named by memory order and scope (DeepGEMM style).
#include <cstdint>

namespace xstage::ptx {

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

// Relaxed: no ordering of earlier stores. A release here would wait until this thread's earlier
// remote stores are performed, i.e. couple the issuer to remote completion (the X-Stage would vanish).
__device__ __forceinline__ void red_add_relaxed_gpu_u32(uint32_t* ptr, uint32_t v) {
  asm volatile("red.relaxed.gpu.global.add.u32 [%0], %1;" ::"l"(ptr), "r"(v) : "memory");
}

__device__ __forceinline__ uint32_t ld_relaxed_gpu_u32(const uint32_t* ptr) {
  uint32_t v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(ptr) : "memory");
  return v;
}

// Make generic-proxy writes to shared memory visible to the async proxy (TMA reads them next).
__device__ __forceinline__ void fence_proxy_async_shared_cta() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// TMA bulk store: `bytes` (multiple of 16, 16-byte aligned ends) from this CTA's shared memory to
// global memory (local or peer), tracked in the calling thread's bulk group.
__device__ __forceinline__ void tma_store_bulk(void* gmem_dst, const void* smem_src, uint32_t bytes) {
  uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem_src));
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(gmem_dst), "r"(s), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void bulk_commit_group() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }

// Waits until every committed bulk store has finished READING its shared-memory source (the staging
// buffer may be reused); the writes may still be in flight (that is the X-Stage).
__device__ __forceinline__ void bulk_wait_group_read_0() {
  asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}

// Waits until every committed bulk store has completed (writes performed).
__device__ __forceinline__ void bulk_wait_group_0() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }

}  // namespace xstage::ptx
