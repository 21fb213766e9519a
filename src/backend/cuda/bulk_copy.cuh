// Hopper bulk copies (the TMA's one-dimensional form, no tensor map) into shared memory, completed on mbarriers.
// A copy of N bytes is one instruction of one thread, not N / 16 loads held in registers: a warp can keep kilobytes in
// flight while it computes on the copies that have landed. Rules the callers keep: source, destination and size are
// multiples of 16 bytes; a barrier's phase completes when its expected bytes have all arrived.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace dsv4::cuda {

__device__ __forceinline__ uint32_t shared_address(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// One arrival (the issuing thread's) completes a phase, once the bytes announced with it have landed.
__device__ __forceinline__ void mbarrier_init(uint64_t* bar) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(shared_address(bar)) : "memory");
}

// A barrier whose phases complete after `count` arrivals (threads signalling with mbarrier_arrive; no bytes).
__device__ __forceinline__ void mbarrier_init_count(uint64_t* bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(bar)), "r"(count) : "memory");
}

// This thread's arrival (release: its earlier shared-memory reads and writes are ordered before the phase completes).
__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(shared_address(bar)) : "memory");
}

// Makes initialised barriers visible to the copy engine (the async proxy) before the first copy names them.
__device__ __forceinline__ void fence_barrier_init() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// Orders this thread's earlier shared-memory reads before a later bulk copy that overwrites them.
__device__ __forceinline__ void fence_async_shared() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// This thread's arrival on the barrier, announcing `bytes` that copies will complete on it.
__device__ __forceinline__ void mbarrier_arrive_expect(uint64_t* bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(bar)), "r"(bytes)
                 : "memory");
}

// Copies `bytes` from global memory to `dst`, completing them on the barrier (announced by the caller).
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     shared_address(dst)),
                 "l"(src), "r"(bytes), "r"(shared_address(bar))
                 : "memory");
}

// Announces `bytes` on the barrier (this thread's arrival) and starts copying them from global memory to `dst`.
__device__ __forceinline__ void bulk_copy_announced(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
    mbarrier_arrive_expect(bar, bytes);
    bulk_copy(dst, src, bytes, bar);
}

// Two copies completing one phase (data and its scales): announced together, so the phase cannot complete between.
__device__ __forceinline__ void bulk_copy_pair_announced(void* dst0, const void* src0, uint32_t bytes0, void* dst1,
                                                         const void* src1, uint32_t bytes1, uint64_t* bar) {
    mbarrier_arrive_expect(bar, bytes0 + bytes1);
    bulk_copy(dst0, src0, bytes0, bar);
    bulk_copy(dst1, src1, bytes1, bar);
}

// A 2-D box of a tensor map (tensor_map.h) at (column c0, row c1) into shared memory, completing on `bar` (its bytes
// announced by the caller); the map lives in kernel parameter (__grid_constant__) or global memory.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int c0, int c1, uint64_t* bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
        "[%4];" ::"r"(shared_address(dst)),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(shared_address(bar))
        : "memory");
}

// Waits until the barrier's phase with this parity has completed.
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
    uint32_t done = 0;
    while (!done) {
        asm volatile(
            "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
            : "=r"(done)
            : "r"(shared_address(bar)), "r"(parity)
            : "memory");
    }
}

}  // namespace dsv4::cuda
