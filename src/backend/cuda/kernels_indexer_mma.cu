// Lightning-indexer scores on tensor cores (fast numerics): score[t][e] = sum_h w[t][h] relu(q[t][h] . K[e]) for the
// eligible entries (the same output as index_scores_kernel, for the same top-k kernel, which reads no others). One
// block per (token, range of up to 256 entries): the token's query heads stay in shared memory while chunks of 64 keys
// pass.
//
// Numerics: the keys enter the MMA as their stored codes (an e4m3 or bf16 value is exact in bf16) and an fp8 key's
// float scale multiplies the dot product afterwards; the query is split into a bf16 high part and a bf16 remainder
// (two MMAs), which carries ~16 of float32's 24 mantissa bits: the scores agree with the float32 kernel to ~1e-5
// relative, so the picks are those of the other numerics except at near-exact ties.
#include "backend/cuda/head_rows.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma_bf16.cuh"
#include "backend/cuda/pdl.cuh"

namespace dsv4::cuda {
namespace {

constexpr int kHeads = 64;        // query heads per block: 4 warps of 16
constexpr int kKeys = 64;         // keys per chunk: 8 n-tiles per warp
constexpr int kMaxRange = 256;    // entries per block (fewer for decode-sized steps: more blocks)
constexpr int kLongRange = 1024;  // entries per block where the step has blocks enough (long contexts)
constexpr int kWarps = kHeads / 16;
constexpr int kPad = 8;

__host__ __device__ constexpr size_t smem_bytes(int dim) {
    return static_cast<size_t>(2 * kHeads + kKeys) * (dim + kPad) * 2 + kKeys * 4 + kWarps * kKeys * 4 + kHeads * 4 +
           kKeys * sizeof(void*);
}

constexpr int kRowBatch = 8;                       // key rows a warp loads before it decodes any
constexpr int kQuadsPerLane = kMaxIndexDim / 128;  // four elements a lane and quad

// Four stored elements of a key row from their raw bytes (four e4m3 codes in bits.x, or four bf16 values) as bf16
// into dst.
template <int D>
__device__ __forceinline__ void store_key_quad(uint2 bits, const RowFormatDev& f, __nv_bfloat16* dst) {
    float v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
        if constexpr (D == kRowFp8) {
            v[u] =
                decode_e4m3(static_cast<uint8_t>(bits.x >> (8 * u)), f.fp8.fnuz ? Fp8Dialect::kFnuz : Fp8Dialect::kOcp);
        } else {
            const uint32_t word = u < 2 ? bits.x : bits.y;
            v[u] = bf16_bits_to_float(static_cast<uint16_t>(word >> (16 * (u % 2))));
        }
    }
    auto* out = reinterpret_cast<uint32_t*>(dst);
    out[0] = pack_bf16(v[0], v[1]);
    out[1] = pack_bf16(v[2], v[3]);
}

// The chunk's key rows (rows[r]: stored row of key r, null when absent) as bf16 codes into ks and their scales (1 for
// bf16 keys; NaN and zero codes when absent). A warp issues the loads of kRowBatch rows before it decodes any: the
// rows' latency once a batch, not once a row.
template <int D>
__device__ void load_keys(const uint8_t* const* rows, const RowFormatDev& f, int ld, __nv_bfloat16* ks, float* scale) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    constexpr int kBytes = D == kRowFp8 ? 1 : 2;
    for (int r0 = warp; r0 < kKeys; r0 += kRowBatch * kWarps) {
        uint2 raw[kRowBatch][kQuadsPerLane];
        float row_scale = __int_as_float(0x7fc00000);  // lane b: row b of the batch (NaN marks an absent key)
#pragma unroll
        for (int b = 0; b < kRowBatch; ++b) {
            const int r = r0 + b * kWarps;
            const uint8_t* row = r < kKeys ? rows[r] : nullptr;
#pragma unroll
            for (int j = 0; j < kQuadsPerLane; ++j) {
                const int i = 4 * lane + 128 * j;
                raw[b][j] = make_uint2(0u, 0u);
                if (row == nullptr || i >= f.dim) continue;
                if constexpr (D == kRowFp8) {
                    raw[b][j].x = *reinterpret_cast<const uint32_t*>(row + i);
                } else {
                    raw[b][j] = *reinterpret_cast<const uint2*>(row + kBytes * i);
                }
            }
            if (lane == b && row != nullptr) {
                row_scale = D == kRowFp8 ? *reinterpret_cast<const float*>(row + f.dim) : 1.0f;
            }
        }
#pragma unroll
        for (int b = 0; b < kRowBatch; ++b) {
            const int r = r0 + b * kWarps;
            if (r >= kKeys) break;
#pragma unroll
            for (int j = 0; j < kQuadsPerLane; ++j) {
                const int i = 4 * lane + 128 * j;
                if (i < f.dim) store_key_quad<D>(raw[b][j], f, ks + r * ld + i);
            }
            if (lane == b) scale[r] = row_scale;
        }
    }
}

// The token's query heads split into bf16 high parts and remainders (heads past the last are zero), eight loads a
// thread in flight.
__device__ void stage_queries(const float* q, int t, int heads, int dim, int ld, __nv_bfloat16* q_hi,
                              __nv_bfloat16* q_lo) {
    stage_head_rows<8>(q, t, heads, 0, kHeads, dim, [&](int h, int c, float4 v) {
        const float x[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const __nv_bfloat16 hi = __float2bfloat16_rn(x[u]);
            q_hi[h * ld + c + u] = hi;
            q_lo[h * ld + c + u] = __float2bfloat16_rn(x[u] - __bfloat162float(hi));
        }
    });
}

// A warp's A fragments of its 16 heads' query, high and low parts, for the k-step at k0.
struct QFragments {
    uint32_t hi[4], lo[4];
};

__device__ __forceinline__ QFragments q_fragments(const __nv_bfloat16* a_hi, const __nv_bfloat16* a_lo, int ld,
                                                  int k0) {
    QFragments f;
    f.hi[0] = *reinterpret_cast<const uint32_t*>(a_hi + k0);
    f.hi[1] = *reinterpret_cast<const uint32_t*>(a_hi + 8 * ld + k0);
    f.hi[2] = *reinterpret_cast<const uint32_t*>(a_hi + k0 + 8);
    f.hi[3] = *reinterpret_cast<const uint32_t*>(a_hi + 8 * ld + k0 + 8);
    f.lo[0] = *reinterpret_cast<const uint32_t*>(a_lo + k0);
    f.lo[1] = *reinterpret_cast<const uint32_t*>(a_lo + 8 * ld + k0);
    f.lo[2] = *reinterpret_cast<const uint32_t*>(a_lo + k0 + 8);
    f.lo[3] = *reinterpret_cast<const uint32_t*>(a_lo + 8 * ld + k0 + 8);
    return f;
}

// acc[nt] += (q_hi + q_lo) . codes of keys 8 nt .. over the k-step at k0 (high part first).
__device__ __forceinline__ void key_step(float (&acc)[kKeys / 8][4], const QFragments& f, const __nv_bfloat16* ks,
                                         int ld, int k0) {
    const int lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; ++nt) {
        const __nv_bfloat16* kb = ks + (8 * nt + g) * ld + k0 + 2 * tq;
        const uint32_t bf[2] = {*reinterpret_cast<const uint32_t*>(kb), *reinterpret_cast<const uint32_t*>(kb + 8)};
        mma_bf16(acc[nt], f.hi, bf);
        mma_bf16(acc[nt], f.lo, bf);
    }
}

// kSteps > 0: the key dim is 16 kSteps and each warp's query fragments stay in registers for every chunk of its range
// (a k-step then reads only the keys' fragments from shared memory); 0: any dim, the fragments read each k-step. The
// same products in the same order either way.
template <int D, int kSteps>
__global__ void __launch_bounds__(kWarps * 32, 4)
    index_scores_mma_kernel(StepMeta m, const float* q, const float* weights, const uint8_t* keys, RowFormatDev f,
                            int heads, int ratio, int per_block, int64_t max_entries, int range, float* scores) {
    pdl_begin();
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const int dim = f.dim, ld = dim + kPad;
    auto* q_hi = reinterpret_cast<__nv_bfloat16*>(smem_raw);
    __nv_bfloat16* q_lo = q_hi + kHeads * ld;
    __nv_bfloat16* ks = q_lo + kHeads * ld;
    auto* key_scale = reinterpret_cast<float*>(ks + kKeys * ld);
    float* partial = key_scale + kKeys;                           // [kWarps][kKeys]
    float* w = partial + kWarps * kKeys;                          // [kHeads]
    auto** rows = reinterpret_cast<const uint8_t**>(w + kHeads);  // [kKeys] (8-byte aligned: kHeads floats before)
    const int t = blockIdx.x;
    const int64_t e_begin = static_cast<int64_t>(blockIdx.y) * range;
    const int64_t e_end = min64(e_begin + range, max_entries);
    const int64_t eligible = (m.positions[t] + 1) / ratio;
    float* out = scores + static_cast<int64_t>(t) * max_entries;
    if (e_begin >= eligible) return;  // nothing visible in this range (the top-k reads eligible entries only)
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
    stage_queries(q, t, heads, dim, ld, q_hi, q_lo);
    for (int h = threadIdx.x; h < kHeads; h += blockDim.x)
        w[h] = h < heads ? weights[static_cast<int64_t>(t) * heads + h] : 0.0f;
    const int seq = m.seq_of_token[t];
    const __nv_bfloat16* a_hi = q_hi + (16 * warp + g) * ld + 2 * tq;
    const __nv_bfloat16* a_lo = q_lo + (16 * warp + g) * ld + 2 * tq;
    QFragments held[kSteps > 0 ? kSteps : 1];
    if constexpr (kSteps > 0) {
        __syncthreads();  // the staged queries
#pragma unroll
        for (int st = 0; st < kSteps; ++st) held[st] = q_fragments(a_hi, a_lo, ld, 16 * st);
    }
    for (int64_t c0 = e_begin; c0 < e_end; c0 += kKeys) {
        __syncthreads();            // the previous chunk's keys and partials are consumed; the queries are in place
        if (threadIdx.x < kKeys) {  // one thread a key: the block-table lookups side by side
            const int64_t e = c0 + threadIdx.x;
            const uint8_t* row = nullptr;
            if (e < eligible && e < e_end) {
                const int64_t stored = paged_row(m, seq, e, per_block);
                if (stored < 0) {
                    flag_error(m, kErrorBlockTable);
                } else {
                    row = keys + stored * f.bytes;
                }
            }
            rows[threadIdx.x] = row;
        }
        __syncthreads();
        load_keys<D>(rows, f, ld, ks, key_scale);
        __syncthreads();
        // This warp's 16 heads x 64 keys: (q_hi + q_lo) . codes.
        float acc[kKeys / 8][4] = {};
        if constexpr (kSteps > 0) {
#pragma unroll
            for (int st = 0; st < kSteps; ++st) key_step(acc, held[st], ks, ld, 16 * st);
        } else {
            for (int k0 = 0; k0 < dim; k0 += 16) key_step(acc, q_fragments(a_hi, a_lo, ld, k0), ks, ld, k0);
        }
        // sum over this warp's heads of w_h relu(scale_e * dot), reduced over the 8 row groups of the warp.
        const float w_lo = w[16 * warp + g], w_hi = w[16 * warp + g + 8];
#pragma unroll
        for (int nt = 0; nt < kKeys / 8; ++nt) {
#pragma unroll
            for (int c = 0; c < 2; ++c) {
                const int key = 8 * nt + 2 * tq + c;
                const float sc = key_scale[key];
                float v = w_lo * fmaxf(sc * acc[nt][c], 0.0f) + w_hi * fmaxf(sc * acc[nt][2 + c], 0.0f);
                v += __shfl_xor_sync(0xffffffffu, v, 4);
                v += __shfl_xor_sync(0xffffffffu, v, 8);
                v += __shfl_xor_sync(0xffffffffu, v, 16);
                if (g == 0) partial[warp * kKeys + key] = v;
            }
        }
        __syncthreads();
        if (threadIdx.x < kKeys) {
            const int64_t e = c0 + threadIdx.x;
            if (e < e_end) {
                float s = -INFINITY;
                if (e < eligible && !isnan(key_scale[threadIdx.x])) {
                    s = 0.0f;
                    for (int wi = 0; wi < kWarps; ++wi) s += partial[wi * kKeys + threadIdx.x];
                }
                if (e < eligible) out[e] = s;
            }
        }
    }
}

template <int D, int kSteps>
void launch_typed(cudaStream_t s, const StepMeta& m, const float* q, const float* weights, const uint8_t* keys,
                  const RowFormatDev& f, int heads, int ratio, int per_block, int64_t max_entries, float* scores) {
    static bool configured = false;  // the largest dim's smem is allowed once per instantiation
    if (!configured) {
        cudaFuncSetAttribute(index_scores_mma_kernel<D, kSteps>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(smem_bytes(kMaxIndexDim)));
        configured = true;
    }
    // Whole chunks per block: long ranges where there are blocks enough (each block stages its token's queries once:
    // long contexts), ranges of one chunk when the step is too small to fill the GPU with longer ones.
    int range = kKeys;
    if (m.n_tokens * blocks_for(max_entries, kLongRange) >= 4 * 264) {
        range = kLongRange;
    } else if (m.n_tokens * blocks_for(max_entries, kMaxRange) >= 264) {
        range = kMaxRange;
    }
    const dim3 grid(static_cast<unsigned>(m.n_tokens), blocks_for(max_entries, range));
    launch_kernel(index_scores_mma_kernel<D, kSteps>, grid, kWarps * 32, smem_bytes(f.dim), s, m, q, weights, keys, f,
                  heads, ratio, per_block, max_entries, range, scores);
}

// DeepSeek-V4's index head dim (128) keeps its query fragments in registers.
template <int D>
void launch_dim(cudaStream_t s, const StepMeta& m, const float* q, const float* weights, const uint8_t* keys,
                const RowFormatDev& f, int heads, int ratio, int per_block, int64_t max_entries, float* scores) {
    if (f.dim == 128) {
        launch_typed<D, 8>(s, m, q, weights, keys, f, heads, ratio, per_block, max_entries, scores);
    } else {
        launch_typed<D, 0>(s, m, q, weights, keys, f, heads, ratio, per_block, max_entries, scores);
    }
}

}  // namespace

bool index_scores_mma_supported(const RowFormatDev& f, int heads) {
    return heads <= kHeads && f.dim % 16 == 0 && f.dim <= kMaxIndexDim &&
           ((f.dtype == kRowFp8 && f.index_key) || f.dtype == kRowBf16);
}

void launch_index_scores_mma(cudaStream_t s, const StepMeta& m, const float* q, const float* weights,
                             const uint8_t* keys, const RowFormatDev& f, int heads, int ratio, int per_block,
                             int64_t max_entries, float* scores) {
    if (m.n_tokens == 0 || max_entries == 0) return;
    if (f.dtype == kRowFp8) {
        launch_dim<kRowFp8>(s, m, q, weights, keys, f, heads, ratio, per_block, max_entries, scores);
    } else {
        launch_dim<kRowBf16>(s, m, q, weights, keys, f, heads, ratio, per_block, max_entries, scores);
    }
}

}  // namespace dsv4::cuda
