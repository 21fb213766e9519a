// Key rows of sparse attention, shared by the attention kernels: resolving key j of a query to its stored row (step
// rows, sliding ring, paged compressed store; every index checked) and reading fp8_ds_mla rows four codes at a time.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "backend/cuda/kernels.h"
#include "backend/cuda/state_codec.cuh"

namespace dsv4::cuda {

// Stored row of key j of query t (window rows first, then compressed rows), or null when j is not a valid key.
__device__ inline const uint8_t* key_row(const StepMeta& m, const AttentionArgs& a, int t, int j, int n_window) {
    const int seq = m.seq_of_token[t];
    const int64_t pos = m.positions[t];
    const int64_t bytes = a.format.bytes;
    if (j < n_window) {
        const int64_t p = pos - (n_window - 1) + j;
        const int64_t start = m.seq_start[seq];
        // This step's rows from a.kv, or, when the step wrote them to the ring first (a.kv null), from the ring.
        if (p >= start && a.kv != nullptr) return a.kv + (m.seq_token_begin[seq] + (p - start)) * bytes;
        return a.ring + (static_cast<int64_t>(m.seq_slot[seq]) * a.ring_rows + p % a.ring_rows) * bytes;
    }
    const int64_t visible = (pos + 1) / a.ratio;
    int64_t entry = j - n_window;
    if (a.csa) {
        entry = a.topk[static_cast<int64_t>(t) * a.topk_k + entry];
        if (entry < 0) return nullptr;  // -1: nothing picked here
        if (entry >= visible) {
            flag_error(m, kErrorTopkIndex);
            return nullptr;
        }
    }
    const int64_t row = paged_row(m, seq, entry, a.per_block);
    if (row < 0) {
        flag_error(m, kErrorBlockTable);
        return nullptr;
    }
    return a.store + row * bytes;
}

constexpr int kMaxAttentionLaneElems = kMaxAttentionDim / 32;

// q . k over a warp, k a stored row of dtype D, in the arithmetic Acc.
template <int D, typename Acc>
__device__ Acc dot_warp(const float* q, const uint8_t* k, const RowFormatDev& f) {
    Acc s = 0;
    for (int i = threadIdx.x % 32; i < f.dim; i += 32) s += Acc(q[i]) * row_elem<D>(k, i, f);
    return warp_sum(s);
}

// Softmax attention of query row th (head h) over the keys key(j), j < n_keys (null: not a key), with the sink, by
// one warp in two passes: the max score, then exp(s - M) v (probabilities rounded to bf16 in reference numerics) and
// the denominator. Acc: float (exact numerics) or double (reference numerics). Writes a.out's row th.
template <int D, typename Acc, typename Keys>
__device__ void attend_two_pass(const AttentionArgs& a, int64_t th, int h, int n_keys, Keys key) {
    const int lane = threadIdx.x % 32;
    const float* q = a.q + th * a.dim;
    Acc mx = -INFINITY;
    for (int j = 0; j < n_keys; ++j) {
        const uint8_t* k = key(j);
        if (k == nullptr) continue;
        const Acc score = dot_warp<D, Acc>(q, k, a.format) * Acc(a.scale);
        mx = score > mx ? score : mx;
    }
    const Acc sink = a.sinks[h];
    if (!a.reference) mx = sink > mx ? sink : mx;
    Acc denom = exp_acc(sink - mx);
    Acc acc[kMaxAttentionLaneElems] = {};
    for (int j = 0; j < n_keys; ++j) {
        const uint8_t* k = key(j);
        if (k == nullptr) continue;
        const Acc p = exp_acc(dot_warp<D, Acc>(q, k, a.format) * Acc(a.scale) - mx);
        denom += p;
        const Acc pv = a.reference ? Acc(to_bf16(static_cast<float>(p))) : p;
#pragma unroll
        for (int r = 0; r < kMaxAttentionLaneElems; ++r) {
            const int i = lane + 32 * r;
            if (i < a.dim) acc[r] += pv * row_elem<D>(k, i, a.format);
        }
    }
    float* o = a.out + th * a.dim;
#pragma unroll
    for (int r = 0; r < kMaxAttentionLaneElems; ++r) {
        const int i = lane + 32 * r;
        if (i < a.dim) o[i] = store_acc(acc[r] / denom, a.reference);
    }
}

// Whether fp8_row_quad() may read rows of format f: K=V rows (not index keys) whose bf16 tail starts on a multiple of
// 8 bytes (its 8-byte loads at byte 2 i - nope) and whose size is a multiple of 8 (the stores are 256-byte aligned
// allocations), so every load is aligned and no 4-element group straddles the codes and the tail.
inline bool fp8_quads_aligned(const RowFormatDev& f) {
    return !f.index_key && (f.dim - f.rope_dim) % 8 == 0 && f.bytes % 8 == 0;
}

// The raw bytes behind elements [i, i + 4) of an fp8_ds_mla row, i a multiple of 4: four e4m3 codes (`bits.x`) and
// their block's UE8M0 scale, or four bf16 values of the tail (`bits`). Split from the decode so a caller can issue many
// rows' loads before it decodes any (their latency once, not once a row). Needs fp8_quads_aligned(f).
struct Fp8RowQuad {
    uint2 bits = make_uint2(0u, 0u);
    uint8_t scale = 0;
};
__device__ __forceinline__ Fp8RowQuad load_fp8_row_quad(const uint8_t* row, int i, const RowFormatDev& f) {
    const int nope = f.dim - f.rope_dim;
    Fp8RowQuad q;
    if (i >= nope) {
        q.bits = *reinterpret_cast<const uint2*>(row + nope + 2 * (i - nope));
    } else {
        q.bits.x = *reinterpret_cast<const uint32_t*>(row + i);
        q.scale = row[nope + 2 * f.rope_dim + i / kRowFp8Block];
    }
    return q;
}

// Elements [i, i + 4) from their raw bytes, decoded exactly as row_elem does (e4m3 -> half is exact, so the hardware
// conversion gives the same values; FNUZ rows are decoded in software).
__device__ __forceinline__ void decode_fp8_row_quad(const Fp8RowQuad& q, int i, const RowFormatDev& f, float out[4]) {
    if (i >= f.dim - f.rope_dim) {
        out[0] = bf16_bits_to_float(static_cast<uint16_t>(q.bits.x & 0xffffu));
        out[1] = bf16_bits_to_float(static_cast<uint16_t>(q.bits.x >> 16));
        out[2] = bf16_bits_to_float(static_cast<uint16_t>(q.bits.y & 0xffffu));
        out[3] = bf16_bits_to_float(static_cast<uint16_t>(q.bits.y >> 16));
        return;
    }
    const uint32_t codes = q.bits.x;
    const float scale = decode_ue8m0(q.scale);
    if (f.fp8.fnuz) {
#pragma unroll
        for (int k = 0; k < 4; ++k) out[k] = decode_e4m3_fnuz(static_cast<uint8_t>(codes >> (8 * k))) * scale;
        return;
    }
    const __half2_raw lo = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(codes & 0xffffu), __NV_E4M3);
    const __half2_raw hi = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(codes >> 16), __NV_E4M3);
    out[0] = __half2float(__half(__half_raw{lo.x})) * scale;
    out[1] = __half2float(__half(__half_raw{lo.y})) * scale;
    out[2] = __half2float(__half(__half_raw{hi.x})) * scale;
    out[3] = __half2float(__half(__half_raw{hi.y})) * scale;
}

// Elements [i, i + 4) of an fp8_ds_mla row (load and decode at once). Needs fp8_quads_aligned(f).
__device__ __forceinline__ void fp8_row_quad(const uint8_t* row, int i, const RowFormatDev& f, float out[4]) {
    decode_fp8_row_quad(load_fp8_row_quad(row, i, f), i, f, out);
}

}  // namespace dsv4::cuda
