// Sparse attention with sinks and the lightning indexer on the CPU (model-spec 2.5, 2.6, 2.8, 2.9).
// Every index read from state or from the indexer is bounds-checked before it touches memory (design.md principle 4).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_numerics.h"
#include "core/block_dequant.h"
#include "core/parallel.h"

namespace dsv4 {
namespace {

// Number of compressed entries a query at `pos` may see (windows that ended at or before it).
int64_t visible_entries(int64_t pos, int ratio) { return (pos + 1) / ratio; }

}  // namespace

void CpuBackend::indexer_topk(int layer, const Tensor& q, const Tensor& weights, int ratio, Tensor topk) {
    const int64_t n = q.size(0), heads = q.size(1), dim = q.size(2);
    const int64_t k = topk.size(1);
    parallel_for(n, [&](int64_t t) {
        const SequenceSlice& seq = step_.seqs[step_.seq_index[t]];
        const int64_t eligible = visible_entries(step_.positions[t], ratio);
        std::vector<float> scores(eligible);
        for (int64_t e = 0; e < eligible; ++e) {
            const float* key = entry_row(layer, CompressorRole::kIndexer, seq, e);
            DSV4_CHECK(key != nullptr, "indexer: entry {} is not covered by the block table", e);
            float s = 0.0f;
            for (int64_t h = 0; h < heads; ++h) {
                const float dot = dot_f32(q.f32() + (t * heads + h) * dim, key, dim);
                s += weights.f32()[t * heads + h] * std::max(dot, 0.0f);
            }
            scores[e] = s;
        }
        const int64_t picks = std::min(k, eligible);
        std::vector<int32_t> order(eligible);
        std::iota(order.begin(), order.end(), 0);
        std::partial_sort(order.begin(), order.begin() + picks, order.end(), [&](int32_t x, int32_t y) {
            return scores[x] > scores[y] || (scores[x] == scores[y] && x < y);
        });
        int32_t* out = topk.i32() + t * k;
        for (int64_t i = 0; i < k; ++i) out[i] = i < picks ? order[i] : -1;
    });
}

void CpuBackend::attention(int layer, const LayerConfig& lc, const Tensor& q, const Tensor& kv, const VecRef& sinks,
                           const Tensor* topk, float scale, Tensor out) {
    const int64_t n = q.size(0), heads = q.size(1), dim = q.size(2);
    const int window = model_.sliding_window;
    CpuLayerState& ls = layers_[layer];

    // Key rows of every query: its window (this step's rows or the ring), then the visible compressed rows.
    std::vector<std::vector<const float*>> keys(n);
    parallel_for(n, [&](int64_t t) {
        const SequenceSlice& seq = step_.seqs[step_.seq_index[t]];
        const int64_t pos = step_.positions[t];
        auto& list = keys[t];
        for (int64_t j = std::max<int64_t>(0, pos - window + 1); j <= pos; ++j) {
            if (j >= seq.start_pos) {
                list.push_back(kv.f32() + (seq.token_begin + j - seq.start_pos) * dim);
            } else {
                list.push_back(ls.ring.data() + (static_cast<int64_t>(seq.slot) * ring_rows_ + j % ring_rows_) * dim);
            }
        }
        if (lc.attention == AttentionType::kSliding) return;
        const int64_t visible = visible_entries(pos, lc.compress_ratio);
        if (lc.attention == AttentionType::kHca) {
            for (int64_t e = 0; e < visible; ++e) list.push_back(entry_row(layer, CompressorRole::kMain, seq, e));
        } else {
            const int64_t k = topk->size(1);
            for (int64_t i = 0; i < k; ++i) {
                const int32_t e = topk->i32()[t * k + i];
                if (e < 0 || e >= visible) continue;  // -1 sentinel or an out-of-range pick: contributes nothing
                list.push_back(entry_row(layer, CompressorRole::kMain, seq, e));
            }
        }
        for (const float* row : list) DSV4_CHECK(row != nullptr, "attention: a key row is not covered by the state");
    });

    const bool ref = reference();
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int64_t t = 0; t < n; ++t) {
        for (int64_t h = 0; h < heads; ++h) {
            const float* qh = q.f32() + (t * heads + h) * dim;
            const auto& list = keys[t];
            std::vector<float> s(list.size());
            float mx = -std::numeric_limits<float>::infinity();
            for (size_t i = 0; i < list.size(); ++i) {
                s[i] = dot_f32(qh, list[i], dim) * scale;
                mx = std::max(mx, s[i]);
            }
            const float sink = sinks.data[h];
            // Exact: subtract the max including the sink (no overflow for any sink). Reference: the running max of
            // the real scores (DeepSeek's kernel), probabilities rounded to bf16 before P.V.
            if (!ref) mx = std::max(mx, sink);
            float denom = std::exp(sink - mx);
            std::vector<float> acc(dim, 0.0f);
            for (size_t i = 0; i < list.size(); ++i) {
                const float p = std::exp(s[i] - mx);
                denom += p;
                const float pv = ref ? cpu::bf(p) : p;
                const float* v = list[i];
                for (int64_t c = 0; c < dim; ++c) acc[c] += pv * v[c];
            }
            float* o = out.f32() + (t * heads + h) * dim;
            for (int64_t c = 0; c < dim; ++c) o[c] = ref ? cpu::bf(acc[c] / denom) : acc[c] / denom;
        }
    }
}

}  // namespace dsv4
