#include "model/synthetic_weights.h"

#include <array>
#include <cmath>

#include "core/error.h"
#include "model/synthetic_routing.h"

namespace dsv4 {
namespace {

class SyntheticBuilder {
  public:
    SyntheticBuilder(const ModelConfig& c, Backend& b, uint64_t seed, const ExpertResidency& residency,
                     const std::vector<double>& skew, HostExpertSink* host_experts)
        : c_(c), b_(b), seed_(seed), residency_(residency), skew_(skew), host_experts_(host_experts) {}

    WeightRef linear(WeightFormat format, int64_t rows, int64_t cols) {
        return b_.synthetic_linear(format, rows, cols, 1.0f / std::sqrt(static_cast<float>(cols)), next());
    }
    WeightRef fp8(int64_t rows, int64_t cols) {
        return linear(c_.fp8_weights ? WeightFormat::kFp8Block : WeightFormat::kBF16, rows, cols);
    }
    WeightFormat expert_format() const {
        switch (c_.expert_dtype) {
            case ExpertDtype::kFp4:
                return WeightFormat::kFp4Row;
            case ExpertDtype::kFp8:
                return WeightFormat::kFp8Block;
            case ExpertDtype::kBf16:
                return WeightFormat::kBF16;
        }
        return WeightFormat::kBF16;
    }
    WeightRef expert(int64_t rows, int64_t cols) { return linear(expert_format(), rows, cols); }
    // The same values in host memory (the expert tier's copy of a routed expert that is not resident).
    WeightRef host_expert(int64_t rows, int64_t cols) {
        return b_.synthetic_host_linear(expert_format(), rows, cols, 1.0f / std::sqrt(static_cast<float>(cols)),
                                        next());
    }
    VecRef vec(int64_t n, float mean, float stddev) { return b_.synthetic_vector(n, mean, stddev, next()); }

    MhcWeights mhc() {
        const int64_t hc = c_.hc_mult, mixes = (2 + hc) * hc, width = hc * c_.hidden_size;
        return {vec(mixes * width, 0.0f, 2.0f / std::sqrt(static_cast<float>(width))), vec(mixes, 0.0f, 0.5f),
                vec(3, 1.0f, 0.3f)};
    }

    CompressorWeights compressor(int head_dim, int ratio, bool overlap) {
        CompressorWeights w;
        const int64_t width = overlap ? 2 * head_dim : head_dim;
        w.wkv = linear(WeightFormat::kBF16, width, c_.hidden_size);
        w.wgate = linear(WeightFormat::kBF16, width, c_.hidden_size);
        w.ape = vec(ratio * width, 0.0f, 0.5f);
        w.norm = vec(head_dim, 1.0f, 0.1f);
        w.ratio = ratio;
        w.head_dim = head_dim;
        w.overlap = overlap;
        return w;
    }

    LayerWeights layer(const LayerConfig& lc) {
        LayerWeights l;
        const int64_t d = c_.hidden_size, heads_dim = int64_t{c_.num_heads} * c_.head_dim;
        const int64_t inter = c_.moe_intermediate_size;
        l.attn_norm = vec(d, 1.0f, 0.1f);
        l.ffn_norm = vec(d, 1.0f, 0.1f);
        l.hc_attn = mhc();
        l.hc_ffn = mhc();
        AttentionWeights& a = l.attn;
        a.wq_a = fp8(c_.q_lora_rank, d);
        a.q_norm = vec(c_.q_lora_rank, 1.0f, 0.1f);
        a.wq_b = fp8(heads_dim, c_.q_lora_rank);
        a.wkv = fp8(c_.head_dim, d);
        a.kv_norm = vec(c_.head_dim, 1.0f, 0.1f);
        a.wo_a = fp8(int64_t{c_.o_groups} * c_.o_lora_rank, heads_dim / c_.o_groups);
        a.wo_b = fp8(d, int64_t{c_.o_groups} * c_.o_lora_rank);
        a.sinks = vec(c_.num_heads, 0.0f, 0.5f);
        if (lc.attention == AttentionType::kCsa) {
            a.compressor = compressor(c_.head_dim, lc.compress_ratio, true);
            IndexerWeights ix;
            ix.compressor = compressor(c_.index_head_dim, lc.compress_ratio, true);
            ix.wq_b = fp8(int64_t{c_.index_n_heads} * c_.index_head_dim, c_.q_lora_rank);
            ix.weights_proj = linear(WeightFormat::kBF16, c_.index_n_heads, d);
            a.indexer = ix;
        } else if (lc.attention == AttentionType::kHca) {
            a.compressor = compressor(c_.head_dim, lc.compress_ratio, false);
        }
        MoeWeights& m = l.ffn;
        m.gate = linear(WeightFormat::kBF16, c_.n_routed_experts, d);
        const double skew = routing_skew_of(skew_, layer_index_, c_.num_layers);
        if (skew > 0) {  // one seed drawn, as unskewed
            const uint64_t seed = next();
            if (lc.routing == RoutingType::kHash) {
                m.tid2eid = skewed_table(skew, seed);
            } else {
                m.bias = skewed_bias(skew, seed);
            }
            if (host_experts_ != nullptr && layer_index_ >= 0) {  // the tier's placement starts warm
                host_experts_->expected_popularity(layer_index_,
                                                   zipf_expected_shares(c_.n_routed_experts, skew, seed, layer_index_));
            }
        } else if (lc.routing == RoutingType::kHash) {
            m.tid2eid = b_.synthetic_table(c_.vocab_size, c_.n_experts_per_tok, c_.n_routed_experts, next());
        } else {
            m.bias = vec(c_.n_routed_experts, 0.0f, 0.1f);
        }
        for (int e = 0; e < c_.n_routed_experts; ++e) {
            if (layer_index_ < 0 || expert_resident(residency_, layer_index_, e)) {
                m.experts.push_back({expert(inter, d), expert(d, inter), expert(inter, d)});
            } else if (host_experts_ != nullptr) {
                // Braced: the three seeds are drawn in order, as for a resident expert.
                host_experts_->put(layer_index_, e,
                                   ExpertWeights{host_expert(inter, d), host_expert(d, inter), host_expert(inter, d)});
                m.experts.emplace_back();
            } else {
                for (int i = 0; i < 3; ++i) next();  // the seeds a resident expert would have drawn
                m.experts.emplace_back();
            }
        }
        if (c_.n_shared_experts > 0) m.shared = ExpertWeights{fp8(inter, d), fp8(d, inter), fp8(inter, d)};
        return l;
    }

    ModelWeights model() {
        ModelWeights m;
        m.embed = b_.synthetic_linear(WeightFormat::kBF16, c_.vocab_size, c_.hidden_size, 1.0f, next());
        m.head = linear(WeightFormat::kBF16, c_.vocab_size, c_.hidden_size);
        m.norm = vec(c_.hidden_size, 1.0f, 0.1f);
        m.hc_head = hc_head();
        for (const LayerConfig& lc : c_.layers) {
            m.layers.push_back(layer(lc));
            ++layer_index_;
        }
        return m;
    }

    HcHeadWeights hc_head() {
        const int64_t hc = c_.hc_mult, width = hc * c_.hidden_size;
        return {vec(hc * width, 0.0f, 2.0f / std::sqrt(static_cast<float>(width))), vec(hc, 0.0f, 0.5f),
                vec(1, 1.0f, 0.3f)};
    }

    DraftWeights drafts(const DraftLayout& layout) {
        DraftWeights w;
        w.layout = layout;
        const int64_t d = c_.hidden_size;
        const LayerConfig lc = draft_layer_config(c_);
        layer_index_ = -1;  // draft stages: every expert resident
        if (layout.kind == DraftKind::kMtp) {
            for (int s = 0; s < layout.stages; ++s) {
                MtpStageWeights m;
                m.block = layer(lc);
                m.e_proj = fp8(d, d);
                m.h_proj = fp8(d, d);
                m.enorm = vec(d, 1.0f, 0.1f);
                m.hnorm = vec(d, 1.0f, 0.1f);
                m.norm = vec(d, 1.0f, 0.1f);
                m.hc_head = hc_head();
                w.mtp.push_back(m);
            }
        } else if (layout.kind == DraftKind::kDspark) {
            DSV4_CHECK(c_.dspark.has_value(), "synthetic DSpark drafts need the dspark_* keys in the config");
            const int64_t rank = c_.dspark->markov_rank;
            const auto targets = static_cast<int64_t>(c_.dspark->target_layer_ids.size());
            DsparkWeights ds;
            for (int s = 0; s < layout.stages; ++s) ds.stages.push_back(layer(lc));
            ds.main_proj = fp8(d, targets * d);
            ds.main_norm = vec(d, 1.0f, 0.1f);
            ds.norm = vec(d, 1.0f, 0.1f);
            ds.hc_head = hc_head();
            ds.markov_w1 = linear(WeightFormat::kBF16, c_.vocab_size, rank);
            ds.markov_w2 = linear(WeightFormat::kBF16, c_.vocab_size, rank);
            ds.confidence_h = linear(WeightFormat::kBF16, 1, d);
            ds.confidence_m = linear(WeightFormat::kBF16, 1, rank);
            w.dspark = ds;
        }
        return w;
    }

  private:
    // Skewed routing (model/synthetic_routing.h), uploaded from host values.
    VecRef skewed_bias(double skew, uint64_t seed) {
        const std::vector<float> bias = zipf_router_bias(c_.n_routed_experts, skew, seed, layer_index_);
        const std::array<int64_t, 1> shape = {c_.n_routed_experts};
        return b_.upload_vector(
            {reinterpret_cast<const uint8_t*>(bias.data()), DType::kF32, shape, bias.size() * sizeof(float)});
    }
    TableRef skewed_table(double skew, uint64_t seed) {
        const int k = c_.n_experts_per_tok;
        const std::vector<int64_t> table =
            zipf_expert_table(c_.vocab_size, k, c_.n_routed_experts, skew, seed, layer_index_);
        const std::array<int64_t, 2> shape = {c_.vocab_size, k};
        return b_.upload_table(
            {reinterpret_cast<const uint8_t*>(table.data()), DType::kI64, shape, table.size() * sizeof(int64_t)},
            c_.n_routed_experts);
    }

    uint64_t next() { return seed_ = seed_ * 6364136223846793005ull + 1442695040888963407ull; }

    const ModelConfig& c_;
    Backend& b_;
    uint64_t seed_;
    const ExpertResidency& residency_;
    const std::vector<double>& skew_;
    HostExpertSink* host_experts_;
    int layer_index_ = 0;
};

}  // namespace

DraftWeights make_synthetic_draft_weights(const ModelConfig& config, Backend& backend, const DraftLayout& layout,
                                          uint64_t seed) {
    const ExpertResidency all;
    const std::vector<double> even_routing;  // the builder keeps a reference: it must outlive it
    return SyntheticBuilder(config, backend, seed ^ 0x6a09e667f3bcc909ull, all, even_routing, nullptr).drafts(layout);
}

ModelWeights make_synthetic_weights(const ModelConfig& config, Backend& backend, uint64_t seed,
                                    const ExpertResidency& residency, const std::vector<double>& routing_skew,
                                    HostExpertSink* host_experts) {
    return SyntheticBuilder(config, backend, seed, residency, routing_skew, host_experts).model();
}

}  // namespace dsv4
