// Weight handles as the backends see them: every linear weight stays in its checkpoint form (FP8 + 128x128 UE8M0
// block scales, FP4 e2m1 + per-32 UE8M0 scales, BF16) and is dequantized on the fly inside the kernels (design.md
// principle 2). Small tensors (norm weights, biases, mHC parameters, ape, sinks) are converted once to float32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "backend/fp4_layout.h"
#include "core/fp8_dialect.h"

namespace dsv4 {

enum class WeightFormat : uint8_t {
    kF32,
    kBF16,
    kFp8Block,  // e4m3 codes [rows, cols] in WeightRef::fp8_dialect + UE8M0 scales [ceil(rows/br), ceil(cols/bc)]
    kFp4Row,    // packed e2m1 [rows, cols/2] (low nibble = even column) + UE8M0 scales [rows, cols/32], the codes'
                // bits in WeightRef::fp4_layout
};

// A linear weight W [rows = out features, cols = in features] resident on a backend.
struct WeightRef {
    WeightFormat format = WeightFormat::kF32;
    int64_t rows = 0;
    int64_t cols = 0;
    const void* data = nullptr;                     // backend memory
    const uint8_t* scales = nullptr;                // backend memory; null for F32/BF16
    int64_t scale_cols = 0;                         // scale row stride
    int block_rows = 1;                             // rows sharing one scale row (128 for FP8, 1 for FP4)
    int block_cols = 1;                             // columns sharing one scale (128 for FP8, 32 for FP4)
    Fp8Dialect fp8_dialect = Fp8Dialect::kOcp;      // how kFp8Block codes are read (the backend's dialect)
    Fp4Layout fp4_layout = Fp4Layout::kCheckpoint;  // how kFp4Row codes lie (backend/fp4_layout.h; CUDA: sign-split)
    bool valid() const { return data != nullptr; }
};

// A small float32 vector or matrix resident on a backend (converted from BF16/F32 at load).
struct VecRef {
    const float* data = nullptr;
    int64_t n = 0;
    bool valid() const { return data != nullptr; }
};

// An int32 table resident on a backend (tid2eid, converted from I64 at load with range checks).
struct TableRef {
    const int32_t* data = nullptr;
    int64_t rows = 0;
    int64_t cols = 0;
    bool valid() const { return data != nullptr; }
};

struct MhcWeights {
    VecRef fn;     // [(2 + hc) * hc, hc * D]
    VecRef base;   // [(2 + hc) * hc]
    VecRef scale;  // [3]
};

struct HcHeadWeights {
    VecRef fn;     // [hc, hc * D]
    VecRef base;   // [hc]
    VecRef scale;  // [1]
};

struct CompressorWeights {
    WeightRef wkv;    // [width, D] (width = 2 * head_dim when overlapping)
    WeightRef wgate;  // [width, D]
    VecRef ape;       // [ratio, width]
    VecRef norm;      // [head_dim]
    int ratio = 0;
    int head_dim = 0;
    bool overlap = false;  // CSA: two series (Ca, Cb) pooled over 2 * ratio slots
};

struct IndexerWeights {
    CompressorWeights compressor;
    WeightRef wq_b;          // [index_heads * index_head_dim, q_lora_rank]
    WeightRef weights_proj;  // [index_heads, D]
};

struct AttentionWeights {
    WeightRef wq_a, wq_b, wkv, wo_a, wo_b;
    VecRef q_norm, kv_norm, sinks;
    std::optional<CompressorWeights> compressor;
    std::optional<IndexerWeights> indexer;
};

// Bytes of a weight's codes and of its scales, in checkpoint form.
inline int64_t weight_data_bytes(const WeightRef& w) {
    const int64_t n = w.rows * w.cols;
    switch (w.format) {
        case WeightFormat::kF32:
            return n * 4;
        case WeightFormat::kBF16:
            return n * 2;
        case WeightFormat::kFp8Block:
            return n;
        case WeightFormat::kFp4Row:
            return n / 2;
    }
    return 0;
}
inline int64_t weight_scale_bytes(const WeightRef& w) {
    if (w.scales == nullptr) return 0;
    return (w.rows + w.block_rows - 1) / w.block_rows * w.scale_cols;
}

struct ExpertWeights {
    WeightRef w1, w2, w3;  // gate [I, D], down [D, I], up [I, D]
    int64_t bytes() const {
        int64_t b = 0;
        for (const WeightRef* w : {&w1, &w2, &w3}) b += weight_data_bytes(*w) + weight_scale_bytes(*w);
        return b;
    }
};

// One contiguous piece of an expert in checkpoint form: a matrix's codes or its scales.
struct ExpertRange {
    const void* at = nullptr;
    int64_t bytes = 0;
};

// An expert's pieces in the order an expert-cache slot stores them back to back: w1, w2, w3, each its codes and then
// its scales (when it has any).
inline std::vector<ExpertRange> expert_ranges(const ExpertWeights& e) {
    std::vector<ExpertRange> out;
    for (const WeightRef* w : {&e.w1, &e.w2, &e.w3}) {
        out.push_back({w->data, weight_data_bytes(*w)});
        if (w->scales != nullptr) out.push_back({w->scales, weight_scale_bytes(*w)});
    }
    return out;
}

// `e`'s handles with its pieces placed back to back from `base` in that order (the handles of a slot holding it).
inline ExpertWeights expert_placed_at(const ExpertWeights& e, const std::byte* base) {
    ExpertWeights out = e;
    for (WeightRef* w : {&out.w1, &out.w2, &out.w3}) {
        const int64_t data = weight_data_bytes(*w), scales = weight_scale_bytes(*w);
        w->data = base;
        base += data;
        if (w->scales != nullptr) {
            w->scales = reinterpret_cast<const uint8_t*>(base);
            base += scales;
        }
    }
    return out;
}

struct MoeWeights {
    WeightRef gate;    // [E, D]
    VecRef bias;       // [E] learned routing (selection only)
    TableRef tid2eid;  // [vocab, k] hash routing
    std::vector<ExpertWeights> experts;
    std::optional<ExpertWeights> shared;
};

struct LayerWeights {
    VecRef attn_norm, ffn_norm;
    MhcWeights hc_attn, hc_ffn;
    AttentionWeights attn;
    MoeWeights ffn;
};

struct ModelWeights {
    WeightRef embed;  // [vocab, D] BF16
    WeightRef head;   // [vocab, D] BF16
    VecRef norm;
    HcHeadWeights hc_head;
    std::vector<LayerWeights> layers;
};

}  // namespace dsv4
