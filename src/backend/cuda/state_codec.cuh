// Device codec of the stored sequence-state rows (layouts in backend/state_format.h; the CPU backend's host codec
// writes the same bytes): a warp-cooperative encoder used by every kernel that writes K=V rows or indexer keys
// (ring writes, compressor emission, this step's rows for attention, synthetic contexts), and element loaders
// templated on the dtype for the kernels that read them (attention, indexer scores).
#pragma once

#include <cuda_fp8.h>

#include "backend/cuda/kernels.h"
#include "backend/cuda/quant_sim.cuh"

namespace dsv4::cuda {

// e4m3 code of v as core encode_e4m3(clamp(v, +-448)) writes it: NaN keeps its sign (S.1111.111), the rest
// saturates and rounds to nearest even.
__device__ __forceinline__ uint8_t encode_e4m3_dev(float v) {
    if (isnan(v)) return signbit(v) ? 0xffu : 0x7fu;
    const float clamped = fminf(fmaxf(v, -448.0f), 448.0f);
    return static_cast<uint8_t>(__nv_cvt_float_to_fp8(clamped, __NV_SATFINITE, __NV_E4M3));
}

// bf16 bits of v (core encode_bf16: round to nearest even, NaN made quiet with its sign kept).
__device__ __forceinline__ uint16_t encode_bf16_dev(float v) {
    const uint32_t u = __float_as_uint(v);
    if (isnan(v)) return static_cast<uint16_t>((u >> 16) | 0x40u);
    return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// The e4m3 code of v in a quantiser's dialect, clamped to its maximum (core encode_e4m3 of the clamped value).
__device__ __forceinline__ uint8_t encode_e4m3_dev(float v, Fp8QuantDev q) {
    if (!q.fnuz && q.qmax == 448.0f) return encode_e4m3_dev(v);
    if (isnan(v)) return q.fnuz ? 0x80u : (signbit(v) ? 0xffu : 0x7fu);
    const float clamped = fminf(fmaxf(v, -q.qmax), q.qmax);
    return q.fnuz ? encode_e4m3_fnuz_dev(clamped)
                  : static_cast<uint8_t>(__nv_cvt_float_to_fp8(clamped, __NV_SATFINITE, __NV_E4M3));
}

// FP8 codes of x[begin, end) under one power-of-two scale: the amax of the bf16-rounded values (NaN ignored),
// floored at 1e-4, e = ceil(log2(amax / qmax)), codes in q's dialect. Returns e. Called by all 32 lanes of a warp.
__device__ __forceinline__ int warp_encode_fp8_block(const float* x, int begin, int end, Fp8QuantDev q,
                                                     uint8_t* codes) {
    const int lane = threadIdx.x & 31;
    float amax = 0.0f;
    for (int j = begin + lane; j < end; j += 32) amax = fmaxf(amax, fabsf(to_bf16(x[j])));
    amax = warp_max(amax);
    const int e = pow2_scale_exponent_dev(amax, kFp8AmaxFloorDev, q.qmax);
    const float inverse = ldexpf(1.0f, -e);
    for (int j = begin + lane; j < end; j += 32) codes[j - begin] = encode_e4m3_dev(to_bf16(x[j]) * inverse, q);
    return e;
}

// An fp8_ds_mla row of at most kMaxRegisterRowDim dims, as warp_encode_row's loop below writes it, from registers: the
// lanes load the whole row first (one round trip; the loop below makes one per 64-dim block, a serial chain of ~8).
// Element 32 j + lane is register j of the lane, so block b (64 dims) is registers 2b and 2b + 1.
constexpr int kMaxRegisterRowDim = 512;
static_assert(kRowFp8Block == 64, "warp_encode_fp8_row_registers: a block is two registers of each lane");
__device__ __forceinline__ void warp_encode_fp8_row_registers(const float* x, uint8_t* dst, const RowFormatDev& f) {
    constexpr int kRegs = kMaxRegisterRowDim / 32;
    const int lane = threadIdx.x & 31, nope = f.dim - f.rope_dim;
    float v[kRegs];
#pragma unroll
    for (int j = 0; j < kRegs; ++j) v[j] = lane + 32 * j < f.dim ? x[lane + 32 * j] : 0.0f;
    uint8_t* scales = dst + nope + 2 * f.rope_dim;
    auto* rope = reinterpret_cast<uint16_t*>(dst + nope);
#pragma unroll
    for (int b = 0; b < kRegs / 2; ++b) {
        if (b * kRowFp8Block >= nope) break;  // uniform over the warp
        float amax = 0.0f;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            if (lane + 32 * (2 * b + h) < nope) amax = fmaxf(amax, fabsf(to_bf16(v[2 * b + h])));
        }
        amax = warp_max(amax);
        const int e = pow2_scale_exponent_dev(amax, kFp8AmaxFloorDev, f.fp8.qmax);
        const float inverse = ldexpf(1.0f, -e);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int i = lane + 32 * (2 * b + h);
            if (i < nope) dst[i] = encode_e4m3_dev(to_bf16(v[2 * b + h]) * inverse, f.fp8);
        }
        if (lane == 0) scales[b] = static_cast<uint8_t>(e + 127);
    }
#pragma unroll
    for (int j = 0; j < kRegs; ++j) {
        const int i = lane + 32 * j;
        if (i >= nope && i < f.dim) rope[i - nope] = encode_bf16_dev(v[j]);
    }
    const int used = (nope + kRowFp8Block - 1) / kRowFp8Block;
    for (int j = used + lane; j < f.bytes - (nope + 2 * f.rope_dim); j += 32) scales[j] = 0;
    __syncwarp();
}

// The ring row of step token t (the last ring_rows positions of each sequence are kept), or null where the token's
// position falls out of its sequence's ring within this step.
__device__ __forceinline__ uint8_t* ring_row(const StepMeta& m, int64_t t, int ring_rows, uint8_t* ring, int bytes) {
    const int seq = m.seq_of_token[t];
    const int64_t pos = m.positions[t];
    const int64_t end = m.seq_start[seq] + m.seq_n_tokens[seq];
    if (pos < end - ring_rows) return nullptr;
    return ring + (static_cast<int64_t>(m.seq_slot[seq]) * ring_rows + pos % ring_rows) * bytes;
}

// Encodes the row x[0, f.dim) (readable by every lane) into dst[0, f.bytes). Called by all 32 lanes of one warp.
__device__ __forceinline__ void warp_encode_row(const float* x, uint8_t* dst, const RowFormatDev& f) {
    const int lane = threadIdx.x & 31;
    if (f.dtype == kRowFp8 && !f.index_key && f.dim <= kMaxRegisterRowDim) {
        warp_encode_fp8_row_registers(x, dst, f);
        return;
    }
    if (f.dtype == kRowF32) {
        float* out = reinterpret_cast<float*>(dst);
        for (int j = lane; j < f.dim; j += 32) out[j] = x[j];
    } else if (f.dtype == kRowBf16) {
        uint16_t* out = reinterpret_cast<uint16_t*>(dst);
        for (int j = lane; j < f.dim; j += 32) out[j] = encode_bf16_dev(x[j]);
    } else if (f.index_key) {
        const int e = warp_encode_fp8_block(x, 0, f.dim, f.fp8, dst);
        if (lane == 0) *reinterpret_cast<float*>(dst + f.dim) = ldexpf(1.0f, e);
    } else {
        const int nope = f.dim - f.rope_dim;
        uint8_t* scales = dst + nope + 2 * f.rope_dim;
        for (int b = 0; b * kRowFp8Block < nope; ++b) {
            const int begin = b * kRowFp8Block;
            const int e = warp_encode_fp8_block(x, begin, min(nope, begin + kRowFp8Block), f.fp8, dst + begin);
            if (lane == 0) scales[b] = static_cast<uint8_t>(e + 127);
        }
        uint16_t* rope = reinterpret_cast<uint16_t*>(dst + nope);
        for (int j = lane; j < f.rope_dim; j += 32) rope[j] = encode_bf16_dev(x[nope + j]);
        const int used = (nope + kRowFp8Block - 1) / kRowFp8Block;
        for (int j = used + lane; j < f.bytes - (nope + 2 * f.rope_dim); j += 32) scales[j] = 0;
    }
    __syncwarp();
}

// Element i of a stored row of dtype D (exactly the host decoder's value).
template <int D>
__device__ __forceinline__ float row_elem(const uint8_t* row, int i, const RowFormatDev& f) {
    if constexpr (D == kRowF32) {
        return reinterpret_cast<const float*>(row)[i];
    } else if constexpr (D == kRowBf16) {
        return bf16_bits_to_float(reinterpret_cast<const uint16_t*>(row)[i]);
    } else {
        const Fp8Dialect dialect = f.fp8.fnuz ? Fp8Dialect::kFnuz : Fp8Dialect::kOcp;
        if (f.index_key) return decode_e4m3(row[i], dialect) * *reinterpret_cast<const float*>(row + f.dim);
        const int nope = f.dim - f.rope_dim;
        if (i >= nope) return bf16_bits_to_float(reinterpret_cast<const uint16_t*>(row + nope)[i - nope]);
        return decode_e4m3(row[i], dialect) * decode_ue8m0(row[nope + 2 * f.rope_dim + i / kRowFp8Block]);
    }
}

}  // namespace dsv4::cuda
