// FP8 tensor-core helpers for the decode GEMVs of fast numerics (mma.sync m16n8k32, e4m3 x e4m3, float32
// accumulation; sm_89 and later). Fragment layouts (lane = 4 g + tq, four e4m3 codes per register, K index of the
// first code given): A 16 x 32 row-major: {row g, K 4 tq}, {row g + 8, K 4 tq}, {row g, K 16 + 4 tq}, {row g + 8,
// K 16 + 4 tq}; B 32 x 8: {col g, K 4 tq}, {col g, K 16 + 4 tq}; C 16 x 8: {row g, cols 2 tq, +1}, {row g + 8, same}.
// A dot product does not care in which order its K terms are listed, so a kernel may hand each lane any K positions
// as long as the A and B fragments of that lane list the same ones: the GEMVs give lane tq bytes [16 tq, 16 tq + 16)
// and [64 + 16 tq, + 16) of every 128-byte K block, two whole 64-byte runs per row for each pair of vector loads.
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

#include "backend/fp4_layout.h"

namespace dsv4::cuda {

// Hopper has no FP8 mma.sync: ptxas lowers an e4m3 m16n8k32 to byte-pair conversions to f16 (F2FP) and two f16
// HMMAs (SASS, performance-log.md 2026-12-04). Every e4m3 value is exact in f16 and f16 products are exact in the
// float32 accumulator, so a kernel may as well convert and multiply in f16 itself where that lets it choose its own
// fragments (kernels_expert_gemv_fp4.cu). The FP8 GEMV keeps the e4m3 instruction: staging its tokens as f16 (no
// activation conversions in the loop) measured 3-6% slower on the H200 (twice the shared memory and its loads).

// The f16 values of four e4m3 codes: codes 0, 1 into `lo`, codes 2, 3 into `hi` (the high half read in place, no
// shift).
__device__ __forceinline__ void e4m3x4_to_f16x2x2(uint32_t four_codes, uint32_t& lo, uint32_t& hi) {
    asm("{\n .reg .b16 l, h;\n mov.b32 {l, h}, %2;\n cvt.rn.f16x2.e4m3x2 %0, l;\n cvt.rn.f16x2.e4m3x2 %1, h;\n}"
        : "=r"(lo), "=r"(hi)
        : "r"(four_codes));
}

// d += a . b, one m16n8k16 f16 tile with float32 accumulation (A 16 x 16 row-major: {row g, K 2 tq, +1}, {row g + 8,
// same}, {row g, K 2 tq + 8, +9}, {row g + 8, same}; B 16 x 8: {K 2 tq, +1 of column g}, {K 2 tq + 8, +9}).
__device__ __forceinline__ void mma_f16(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// d = a . b + c for one m16n8k32 e4m3 tile.
__device__ __forceinline__ void mma_e4m3(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
    asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%10, %11, %12, %13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

// One 128-wide K block of a 16-row tile: lane (g, tq) holds bytes [16 tq, + 16) (`lo`) and [64 + 16 tq, + 16) (`hi`)
// of rows g (index 0) and g + 8 (index 1); the activations of token g the same bytes. Returns the block's 16 x 8 dot
// products (four m16n8k32 steps, float32 accumulation from zero).
__device__ __forceinline__ void mma_kblock_e4m3(const uint4 (&lo)[2], const uint4 (&hi)[2], uint4 x_lo, uint4 x_hi,
                                                float d[4]) {
    const float zero[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const uint32_t a0[4] = {lo[0].x, lo[1].x, lo[0].y, lo[1].y}, b0[2] = {x_lo.x, x_lo.y};
    const uint32_t a1[4] = {lo[0].z, lo[1].z, lo[0].w, lo[1].w}, b1[2] = {x_lo.z, x_lo.w};
    const uint32_t a2[4] = {hi[0].x, hi[1].x, hi[0].y, hi[1].y}, b2[2] = {x_hi.x, x_hi.y};
    const uint32_t a3[4] = {hi[0].z, hi[1].z, hi[0].w, hi[1].w}, b3[2] = {x_hi.z, x_hi.w};
    mma_e4m3(d, a0, b0, zero);
    mma_e4m3(d, a1, b1, d);
    mma_e4m3(d, a2, b2, d);
    mma_e4m3(d, a3, b3, d);
}

// The eight codes of a sign-split FP4 word (backend/fp4_layout.h) as e4m3 codes of their values times 2^-6, exactly,
// column 0 first (lo: columns 0..3, hi: 4..7), through the 2^-6 magnitude table.
__device__ __forceinline__ Fp4Bytes fp4_word_to_e4m3_down6(uint32_t w) {
    return expand_fp4_word(w, kE2m1E4m3Down6Lo, kE2m1E4m3Down6Hi);
}
constexpr float kE2m1E4m3Factor = 64.0f;  // what fp4_word_to_e4m3_down6's codes are multiplied by to read true

// 16 bytes of weights read once: through the non-coherent path, not kept in L1. Volatile: a kernel issues these
// before its griddepcontrol.wait (pdl.cuh), and the compiler must keep them there.
__device__ __forceinline__ uint4 load_stream16(const void* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

}  // namespace dsv4::cuda
