// bf16 tensor-core helpers (mma.sync m16n8k16, float32 accumulation) shared by the hand-written MMA kernels.
// Fragment layouts (lane = 4 g + tq): A 16 x 16 row-major: {row g, cols 2 tq, +1}, {row g + 8, same}, {row g, cols
// 2 tq + 8, +9}, {row g + 8, same}; B 16 x 8 column: {rows 2 tq, +1 of col g}, {rows 2 tq + 8, +9}; C 16 x 8:
// {row g, cols 2 tq, +1}, {row g + 8, same}.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace dsv4::cuda {

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
}

__device__ __forceinline__ uint32_t pack_raw(__nv_bfloat16 lo, __nv_bfloat16 hi) {
    __nv_bfloat162 v;
    v.x = lo;
    v.y = hi;
    return *reinterpret_cast<const uint32_t*>(&v);
}

// d += a . b for one m16n8k16 tile (a: 16 x 16 row-major fragment, b: 16 x 8 column fragment).
__device__ __forceinline__ void mma_bf16(float d[4], const uint32_t a[4], const uint32_t b[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Max / sum over the 4 lanes of a quad (lanes 4 g .. 4 g + 3: they hold the same row of a C fragment).
__device__ __forceinline__ float quad_max(float v) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
    return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

__device__ __forceinline__ float quad_sum(float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// Four 8 x 8 bf16 matrices from shared memory, lane i naming row i % 8 of matrix i / 8 (16-byte aligned rows): r[j]
// is matrix j's fragment, {row g, cols 2 tq, +1}. With the rows of an A tile (rows 0-7 / 8-15 at cols k0 / k0 + 8 as
// matrices 0, 1, 2, 3) that is the A fragment of mma_bf16; with the rows of a [n][k] tile (B column-major), two B
// fragments.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
    const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address)
                 : "memory");
}

// The same, transposed: r[j] is {rows 2 tq, +1 of col g} of matrix j, the B fragment of a [k][n] (row-major) tile.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
    const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address)
                 : "memory");
}

}  // namespace dsv4::cuda
