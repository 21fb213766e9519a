// Sparse attention with sinks and the lightning indexer on the CPU (model-spec 2.5, 2.6, 2.8, 2.9).
// Every index read from state or from the indexer is bounds-checked before it touches memory (design.md principle 4).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_map>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_numerics.h"
#include "core/block_dequant.h"
#include "core/parallel.h"

namespace dsv4 {
namespace {

// Number of compressed entries a query at `pos` may see (windows that ended at or before it).
int64_t visible_entries(int64_t pos, int ratio) {
    return (pos + 1) / ratio;
}

// Float32 views of stored rows: the rows themselves when they are stored as float32, else every distinct row
// decoded once into `decoded`.
std::vector<std::vector<const float*>> float_rows(const std::vector<std::vector<const uint8_t*>>& rows,
                                                  const StateRowFormat& format, std::vector<float>& decoded) {
    std::vector<std::vector<const float*>> out(rows.size());
    if (format.dtype == StateDtype::kF32) {
        for (size_t t = 0; t < rows.size(); ++t) {
            for (const uint8_t* row : rows[t]) out[t].push_back(reinterpret_cast<const float*>(row));
        }
        return out;
    }
    std::unordered_map<const uint8_t*, int64_t> index;
    std::vector<const uint8_t*> unique;
    for (const auto& list : rows) {
        for (const uint8_t* row : list) {
            if (index.emplace(row, static_cast<int64_t>(unique.size())).second) unique.push_back(row);
        }
    }
    decoded.resize(unique.size() * format.dim);
    parallel_for(static_cast<int64_t>(unique.size()), format.dim,
                 [&](int64_t i) { format.decode(unique[i], decoded.data() + i * format.dim); });
    for (size_t t = 0; t < rows.size(); ++t) {
        for (const uint8_t* row : rows[t]) out[t].push_back(decoded.data() + index[row] * format.dim);
    }
    return out;
}

// Index score of one key: sum_h w_h relu(q_h . key), rounded to float once.
template <typename Acc>
float index_score(const float* q, const float* w, const float* key, int64_t heads, int64_t dim) {
    Acc s = 0;
    for (int64_t h = 0; h < heads; ++h) s += Acc(w[h]) * std::max(cpu::dot_acc<Acc>(q + h * dim, key, dim), Acc(0));
    return static_cast<float>(s);
}

// Attention of one query head over its key rows (K = V) with the sink. Exact: subtract the max including the sink
// (no overflow for any sink). Reference: the running max of the real scores (DeepSeek's kernel), probabilities
// rounded to bf16 before P.V.
template <typename Acc>
void attend_head(const float* qh, const std::vector<const float*>& keys, int64_t dim, float scale, float sink, bool ref,
                 float* o) {
    std::vector<Acc> s(keys.size());
    Acc mx = -std::numeric_limits<Acc>::infinity();
    for (size_t i = 0; i < keys.size(); ++i) {
        s[i] = cpu::dot_acc<Acc>(qh, keys[i], dim) * Acc(scale);
        mx = std::max(mx, s[i]);
    }
    if (!ref) mx = std::max(mx, Acc(sink));
    Acc denom = std::exp(Acc(sink) - mx);
    std::vector<Acc> acc(dim, Acc(0));
    for (size_t i = 0; i < keys.size(); ++i) {
        const Acc p = std::exp(s[i] - mx);
        denom += p;
        const Acc pv = ref ? Acc(cpu::bf(static_cast<float>(p))) : p;
        const float* v = keys[i];
        for (int64_t c = 0; c < dim; ++c) acc[c] += pv * v[c];
    }
    for (int64_t c = 0; c < dim; ++c) o[c] = cpu::store(acc[c] / denom, ref);
}

}  // namespace

void CpuBackend::indexer_topk(int layer, const Tensor& q, const Tensor& weights, int ratio, Tensor topk) {
    const int64_t n = q.size(0), heads = q.size(1), dim = q.size(2);
    const int64_t k = topk.size(1);
    const bool stored_f32 = key_format_.dtype == StateDtype::kF32;
    const bool ref = reference();
    int64_t max_visible = 1;
    for (int64_t t = 0; t < n; ++t) max_visible = std::max(max_visible, visible_entries(step_.positions[t], ratio));
    parallel_for(n, max_visible * heads * dim, [&](int64_t t) {
        const SequenceSlice& seq = step_.seqs[step_.seq_index[t]];
        const int64_t eligible = visible_entries(step_.positions[t], ratio);
        std::vector<float> scores(eligible), decoded(stored_f32 ? 0 : dim);
        for (int64_t e = 0; e < eligible; ++e) {
            const uint8_t* stored = entry_row(layer, CompressorRole::kIndexer, seq, e);
            DSV4_CHECK(stored != nullptr, "indexer: entry {} is not covered by the block table", e);
            const float* key = reinterpret_cast<const float*>(stored);
            if (!stored_f32) {
                key_format_.decode(stored, decoded.data());
                key = decoded.data();
            }
            scores[e] = cpu::with_acc(ref, [&](auto acc) {
                using Acc = decltype(acc);
                return index_score<Acc>(q.f32() + t * heads * dim, weights.f32() + t * heads, key, heads, dim);
            });
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

std::vector<std::vector<const uint8_t*>> CpuBackend::stored_key_rows(int layer, const LayerConfig& lc,
                                                                     const uint8_t* step_rows, const Tensor* topk) {
    const auto n = static_cast<int64_t>(step_.tokens.size());
    const int window = model_.sliding_window;
    const int64_t row_bytes = kv_format_.bytes();
    std::vector<std::vector<const uint8_t*>> stored(n);
    parallel_for(n, int64_t{8} * window, [&](int64_t t) {  // pointer gathering: a few operations per row
        const SequenceSlice& seq = step_.seqs[step_.seq_index[t]];
        const int64_t pos = step_.positions[t];
        auto& list = stored[t];
        for (int64_t j = std::max<int64_t>(0, pos - window + 1); j <= pos; ++j) {
            if (j >= seq.start_pos) {
                list.push_back(step_rows + (seq.token_begin + j - seq.start_pos) * row_bytes);
            } else {
                list.push_back(ring_row(layer, seq.slot, j));
            }
        }
        if (lc.attention == AttentionType::kSliding) return;
        const int64_t visible = visible_entries(pos, lc.compress_ratio);
        if (lc.attention == AttentionType::kHca || topk == nullptr) {  // CSA without picks: every entry
            for (int64_t e = 0; e < visible; ++e) list.push_back(entry_row(layer, CompressorRole::kMain, seq, e));
        } else {
            const int64_t k = topk->size(1);
            for (int64_t i = 0; i < k; ++i) {
                const int32_t e = topk->i32()[t * k + i];
                if (e < 0 || e >= visible) continue;  // -1 sentinel or an out-of-range pick: contributes nothing
                list.push_back(entry_row(layer, CompressorRole::kMain, seq, e));
            }
        }
        for (const uint8_t* row : list) DSV4_CHECK(row != nullptr, "attention: a key row is not covered by the state");
    });
    return stored;
}

const uint8_t* CpuBackend::step_rows_as_stored(const Tensor& kv, std::vector<float>& storage) {
    const int64_t n = kv.size(0), dim = kv.size(1), row_bytes = kv_format_.bytes();
    if (kv_format_.dtype == StateDtype::kF32) return reinterpret_cast<const uint8_t*>(kv.f32());
    storage.resize(static_cast<size_t>(n * row_bytes / 4));
    auto* dst = reinterpret_cast<uint8_t*>(storage.data());
    parallel_for(n, dim, [&](int64_t t) { kv_format_.encode(kv.f32() + t * dim, dst + t * row_bytes); });
    return dst;
}

void CpuBackend::attend_all(const Tensor& q, const std::vector<std::vector<const uint8_t*>>& stored,
                            const VecRef& sinks, float scale, Tensor out) {
    const int64_t n = q.size(0), heads = q.size(1), dim = q.size(2);
    std::vector<float> decoded;
    const std::vector<std::vector<const float*>> keys = float_rows(stored, kv_format_, decoded);
    const bool ref = reference();
    int64_t key_rows = 0;
    for (const auto& list : keys) key_rows += static_cast<int64_t>(list.size());
#pragma omp parallel for collapse(2) schedule(dynamic) if (worth_parallel(2 * key_rows * heads * dim))
    for (int64_t t = 0; t < n; ++t) {
        for (int64_t h = 0; h < heads; ++h) {
            const float* qh = q.f32() + (t * heads + h) * dim;
            float* o = out.f32() + (t * heads + h) * dim;
            cpu::with_acc(
                ref, [&](auto acc) { attend_head<decltype(acc)>(qh, keys[t], dim, scale, sinks.data[h], ref, o); });
        }
    }
}

void CpuBackend::attention(int layer, const LayerConfig& lc, const Tensor& q, const Tensor& kv, const VecRef& sinks,
                           const Tensor* topk, float scale, Tensor out) {
    // This step's own rows as the ring will store them, so that a query reads the same values whether its keys were
    // fed in this step or an earlier one.
    std::vector<float> step_storage;
    const uint8_t* step_rows = step_rows_as_stored(kv, step_storage);
    attend_all(q, stored_key_rows(layer, lc, step_rows, topk), sinks, scale, out);
}

std::vector<std::vector<const uint8_t*>> CpuBackend::block_key_rows(int layer, const uint8_t* step_rows) {
    const auto n = static_cast<int64_t>(step_.tokens.size());
    const int64_t window = model_.sliding_window, row_bytes = kv_format_.bytes();
    DSV4_CHECK(window <= ring_rows_, "block_attention: window {} exceeds the ring's {} rows", window, ring_rows_);
    std::vector<std::vector<const uint8_t*>> stored(n);
    for (int64_t t = 0; t < n; ++t) {
        const SequenceSlice& seq = step_.seqs[step_.seq_index[t]];
        auto& list = stored[t];
        for (int64_t j = std::max<int64_t>(0, seq.start_pos - window); j < seq.start_pos; ++j) {
            list.push_back(ring_row(layer, seq.slot, j));
        }
        for (int64_t i = 0; i < seq.n_tokens; ++i) list.push_back(step_rows + (seq.token_begin + i) * row_bytes);
    }
    return stored;
}

void CpuBackend::block_attention(int layer, const Tensor& q, const Tensor& kv, const VecRef& sinks, float scale,
                                 Tensor out) {
    DSV4_CHECK(layer >= 0 && layer < static_cast<int>(layers_.size()),
               "block_attention: state layer {} outside [0, {})", layer, layers_.size());
    std::vector<float> step_storage;
    const uint8_t* step_rows = step_rows_as_stored(kv, step_storage);
    attend_all(q, block_key_rows(layer, step_rows), sinks, scale, out);
}

}  // namespace dsv4
