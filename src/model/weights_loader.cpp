#include "model/weights_loader.h"

#include <array>
#include <string>
#include <vector>

#include "core/error.h"

namespace dsv4 {
namespace {

class Binder {
  public:
    Binder(const ModelConfig& c, const BoundWeights& bound, Backend& backend, const ExpertResidency& residency = {},
           bool host_experts = false)
        : c_(c), bound_(bound), backend_(backend), residency_(residency), host_experts_(host_experts) {}

    // A routed-expert matrix: device memory, or host memory for the expert tier.
    WeightRef expert_upload(const TensorView& w, const TensorView* s, WeightFormat format, int64_t out, int64_t in,
                            int br, int bc) {
        if (host_experts_) return backend_.upload_host_linear(w, s, format, out, in, br, bc);
        return backend_.upload_linear(w, s, format, out, in, br, bc);
    }

    // The binder validated every tensor against the config (weight_binding.h); this re-checks the shape it relies on.
    const TensorView& tensor(const std::string& name, DType dtype, const std::vector<int64_t>& shape) {
        const TensorView& t = bound_.get(name);
        DSV4_CHECK(t.dtype == dtype && std::equal(t.shape.begin(), t.shape.end(), shape.begin(), shape.end()),
                   "tensor '{}' does not have the dtype and shape the config implies", name);
        return t;
    }

    VecRef vec(const std::string& name, DType dtype, const std::vector<int64_t>& shape) {
        return backend_.upload_vector(tensor(name, dtype, shape));
    }

    // A linear weight [out, in] in the checkpoint's format (FP8 + block scales, or BF16 when unquantized).
    // expert: a routed expert's matrix (host memory for the expert tier).
    WeightRef fp8_linear(const std::string& base, int64_t out, int64_t in, bool expert = false) {
        if (!c_.fp8_weights) return bf16_linear(base + ".weight", out, in, expert);
        const int br = c_.weight_block_rows, bc = c_.weight_block_cols;
        DSV4_CHECK(bound_.fp8_dialect == backend_.fp8_dialect(),
                   "{}: FP8 weights are {} but the {} backend holds {} (model/fp8_weights.h converts them first)", base,
                   fp8_dialect_label(bound_.fp8_dialect), backend_.name(), fp8_dialect_label(backend_.fp8_dialect()));
        const TensorView& w = tensor(base + ".weight", DType::kF8E4M3, {out, in});
        const TensorView& s = tensor(base + ".scale", DType::kF8E8M0, {(out + br - 1) / br, (in + bc - 1) / bc});
        if (expert) return expert_upload(w, &s, WeightFormat::kFp8Block, out, in, br, bc);
        return backend_.upload_linear(w, &s, WeightFormat::kFp8Block, out, in, br, bc);
    }

    WeightRef bf16_linear(const std::string& name, int64_t out, int64_t in, bool expert = false) {
        const TensorView& w = tensor(name, DType::kBF16, {out, in});
        if (expert) return expert_upload(w, nullptr, WeightFormat::kBF16, out, in, 1, 1);
        return backend_.upload_linear(w, nullptr, WeightFormat::kBF16, out, in, 1, 1);
    }

    WeightRef expert_linear(const std::string& base, int64_t out, int64_t in) {
        switch (c_.expert_dtype) {
            case ExpertDtype::kFp4: {
                const int blk = c_.fp4_scale_block;
                const TensorView& w = tensor(base + ".weight", DType::kI8, {out, in / 2});
                const TensorView& s = tensor(base + ".scale", DType::kF8E8M0, {out, in / blk});
                return expert_upload(w, &s, WeightFormat::kFp4Row, out, in, 1, blk);
            }
            case ExpertDtype::kFp8:
                return fp8_linear(base, out, in, true);
            case ExpertDtype::kBf16:
                return bf16_linear(base + ".weight", out, in, true);
        }
        fail("unreachable expert dtype");
    }

    MhcWeights mhc(const std::string& prefix) {
        const int64_t hc = c_.hc_mult, mixes = (2 + hc) * hc;
        return {vec(prefix + "_fn", DType::kF32, {mixes, hc * c_.hidden_size}),
                vec(prefix + "_base", DType::kF32, {mixes}), vec(prefix + "_scale", DType::kF32, {3})};
    }

    CompressorWeights compressor(const std::string& p, int head_dim, int ratio, bool overlap) {
        CompressorWeights w;
        const int64_t width = overlap ? 2 * head_dim : head_dim;
        w.wkv = bf16_linear(p + "wkv.weight", width, c_.hidden_size);
        w.wgate = bf16_linear(p + "wgate.weight", width, c_.hidden_size);
        w.ape = vec(p + "ape", DType::kF32, {ratio, width});
        w.norm = vec(p + "norm.weight", DType::kBF16, {head_dim});
        w.ratio = ratio;
        w.head_dim = head_dim;
        w.overlap = overlap;
        return w;
    }

    AttentionWeights attention(const std::string& p, const LayerConfig& lc) {
        AttentionWeights a;
        const int64_t d = c_.hidden_size, heads_dim = int64_t{c_.num_heads} * c_.head_dim;
        a.wq_a = fp8_linear(p + "attn.wq_a", c_.q_lora_rank, d);
        a.q_norm = vec(p + "attn.q_norm.weight", DType::kBF16, {c_.q_lora_rank});
        a.wq_b = fp8_linear(p + "attn.wq_b", heads_dim, c_.q_lora_rank);
        a.wkv = fp8_linear(p + "attn.wkv", c_.head_dim, d);
        a.kv_norm = vec(p + "attn.kv_norm.weight", DType::kBF16, {c_.head_dim});
        a.wo_a = fp8_linear(p + "attn.wo_a", int64_t{c_.o_groups} * c_.o_lora_rank, heads_dim / c_.o_groups);
        a.wo_b = fp8_linear(p + "attn.wo_b", d, int64_t{c_.o_groups} * c_.o_lora_rank);
        a.sinks = vec(p + "attn.attn_sink", DType::kF32, {c_.num_heads});
        if (lc.attention == AttentionType::kCsa) {
            a.compressor = compressor(p + "attn.compressor.", c_.head_dim, lc.compress_ratio, true);
            IndexerWeights ix;
            ix.compressor = compressor(p + "attn.indexer.compressor.", c_.index_head_dim, lc.compress_ratio, true);
            ix.wq_b =
                fp8_linear(p + "attn.indexer.wq_b", int64_t{c_.index_n_heads} * c_.index_head_dim, c_.q_lora_rank);
            ix.weights_proj = bf16_linear(p + "attn.indexer.weights_proj.weight", c_.index_n_heads, d);
            a.indexer = ix;
        } else if (lc.attention == AttentionType::kHca) {
            a.compressor = compressor(p + "attn.compressor.", c_.head_dim, lc.compress_ratio, false);
        }
        return a;
    }

    ExpertWeights expert(int layer, int e) { return expert_at("layers." + std::to_string(layer) + ".", e); }

    // Routed expert e of the block under prefix p ("layers.3." or "mtp.0.").
    ExpertWeights expert_at(const std::string& p, int e) {
        const int64_t d = c_.hidden_size, inter = c_.moe_intermediate_size;
        const std::string base = p + "ffn.experts." + std::to_string(e) + ".";
        return {expert_linear(base + "w1", inter, d), expert_linear(base + "w2", d, inter),
                expert_linear(base + "w3", inter, d)};
    }

    // layer: the residency index of the block's experts (-1: a draft stage, every expert resident).
    MoeWeights moe(const std::string& p, int layer, const LayerConfig& lc) {
        MoeWeights m;
        const int64_t d = c_.hidden_size, inter = c_.moe_intermediate_size;
        m.gate = bf16_linear(p + "ffn.gate.weight", c_.n_routed_experts, d);
        if (lc.routing == RoutingType::kHash) {
            m.tid2eid = backend_.upload_table(
                tensor(p + "ffn.gate.tid2eid", DType::kI64, {c_.vocab_size, c_.n_experts_per_tok}),
                c_.n_routed_experts);
        } else {
            m.bias = vec(p + "ffn.gate.bias", DType::kF32, {c_.n_routed_experts});
        }
        for (int e = 0; e < c_.n_routed_experts; ++e) {
            const bool resident = layer < 0 || expert_resident(residency_, layer, e);
            m.experts.push_back(resident ? expert_at(p, e) : ExpertWeights{});
        }
        if (c_.n_shared_experts > 0) {
            const std::string base = p + "ffn.shared_experts.";
            m.shared = ExpertWeights{fp8_linear(base + "w1", inter, d), fp8_linear(base + "w2", d, inter),
                                     fp8_linear(base + "w3", inter, d)};
        }
        return m;
    }

    LayerWeights layer(int i) { return block("layers." + std::to_string(i) + ".", i, c_.layers[i]); }

    LayerWeights block(const std::string& p, int i, const LayerConfig& lc) {
        LayerWeights l;
        l.attn_norm = vec(p + "attn_norm.weight", DType::kBF16, {c_.hidden_size});
        l.ffn_norm = vec(p + "ffn_norm.weight", DType::kBF16, {c_.hidden_size});
        l.hc_attn = mhc(p + "hc_attn");
        l.hc_ffn = mhc(p + "hc_ffn");
        l.attn = attention(p, lc);
        l.ffn = moe(p, i, lc);
        return l;
    }

    HcHeadWeights hc_head(const std::string& p) {
        const int64_t hc = c_.hc_mult;
        return {vec(p + "hc_head_fn", DType::kF32, {hc, hc * c_.hidden_size}),
                vec(p + "hc_head_base", DType::kF32, {hc}), vec(p + "hc_head_scale", DType::kF32, {1})};
    }

    MtpStageWeights mtp_stage(int s) {
        const std::string p = "mtp." + std::to_string(s) + ".";
        const int64_t d = c_.hidden_size;
        MtpStageWeights w;
        w.block = block(p, -1, draft_layer_config(c_));
        w.e_proj = fp8_linear(p + "e_proj", d, d);
        w.h_proj = fp8_linear(p + "h_proj", d, d);
        w.enorm = vec(p + "enorm.weight", DType::kBF16, {d});
        w.hnorm = vec(p + "hnorm.weight", DType::kBF16, {d});
        w.norm = vec(p + "norm.weight", DType::kBF16, {d});
        w.hc_head = hc_head(p);
        return w;
    }

    DsparkWeights dspark(int stages) {
        DSV4_CHECK(c_.dspark.has_value(), "DSpark stages need the dspark_* keys in config.json");
        const int64_t d = c_.hidden_size, rank = c_.dspark->markov_rank, vocab = c_.vocab_size;
        const auto targets = static_cast<int64_t>(c_.dspark->target_layer_ids.size());
        const std::string last = "mtp." + std::to_string(stages - 1) + ".";
        DsparkWeights w;
        for (int s = 0; s < stages; ++s)
            w.stages.push_back(block("mtp." + std::to_string(s) + ".", -1, draft_layer_config(c_)));
        w.main_proj = fp8_linear("mtp.0.main_proj", d, targets * d);
        w.main_norm = vec("mtp.0.main_norm.weight", DType::kBF16, {d});
        w.norm = vec(last + "norm.weight", DType::kBF16, {d});
        w.hc_head = hc_head(last);
        w.markov_w1 = bf16_linear(last + "markov_head.markov_w1.weight", vocab, rank);
        w.markov_w2 = bf16_linear(last + "markov_head.markov_w2.weight", vocab, rank);
        // The confidence head [1, D + rank] as two row vectors, so each half is one plain linear.
        const TensorView& proj = tensor(last + "confidence_head.proj.weight", DType::kBF16, {1, d + rank});
        const std::array<int64_t, 2> h_shape{1, d}, m_shape{1, rank};
        const TensorView h{proj.data, DType::kBF16, h_shape, static_cast<size_t>(d) * 2};
        const TensorView m{proj.data + d * 2, DType::kBF16, m_shape, static_cast<size_t>(rank) * 2};
        w.confidence_h = backend_.upload_linear(h, nullptr, WeightFormat::kBF16, 1, d, 1, 1);
        w.confidence_m = backend_.upload_linear(m, nullptr, WeightFormat::kBF16, 1, rank, 1, 1);
        return w;
    }

    ModelWeights model() {
        ModelWeights m;
        const int64_t hc = c_.hc_mult;
        m.embed = bf16_linear("embed.weight", c_.vocab_size, c_.hidden_size);
        m.head = bf16_linear("head.weight", c_.vocab_size, c_.hidden_size);
        m.norm = vec("norm.weight", DType::kBF16, {c_.hidden_size});
        m.hc_head = {vec("hc_head_fn", DType::kF32, {hc, hc * c_.hidden_size}), vec("hc_head_base", DType::kF32, {hc}),
                     vec("hc_head_scale", DType::kF32, {1})};
        for (int i = 0; i < c_.num_layers; ++i) m.layers.push_back(layer(i));
        return m;
    }

  private:
    const ModelConfig& c_;
    const BoundWeights& bound_;
    Backend& backend_;
    ExpertResidency residency_;
    bool host_experts_ = false;
};

}  // namespace

ModelWeights load_model_weights(const ModelConfig& config, const BoundWeights& bound, Backend& backend,
                                const ExpertResidency& residency) {
    return Binder(config, bound, backend, residency).model();
}

DraftWeights load_draft_weights(const ModelConfig& config, const BoundWeights& bound, Backend& backend) {
    DraftWeights w;
    w.layout = bound.drafts;
    Binder binder(config, bound, backend);
    if (w.layout.kind == DraftKind::kMtp) {
        for (int s = 0; s < w.layout.stages; ++s) w.mtp.push_back(binder.mtp_stage(s));
    } else if (w.layout.kind == DraftKind::kDspark) {
        w.dspark = binder.dspark(w.layout.stages);
    }
    return w;
}

ExpertWeights load_expert_weights(const ModelConfig& config, const BoundWeights& bound, Backend& backend, int layer,
                                  int expert) {
    DSV4_CHECK(layer >= 0 && layer < config.num_layers && expert >= 0 && expert < config.n_routed_experts,
               "load_expert_weights: layer {} expert {} is outside the model ({} layers, {} experts)", layer, expert,
               config.num_layers, config.n_routed_experts);
    return Binder(config, bound, backend).expert(layer, expert);
}

void load_host_experts(const ModelConfig& config, const BoundWeights& bound, Backend& backend, HostExpertSink& sink) {
    Binder binder(config, bound, backend, {}, true);
    for (int l = 0; l < config.num_layers; ++l) {
        for (int e = 0; e < config.n_routed_experts; ++e) sink.put(l, e, binder.expert(l, e));
    }
}

}  // namespace dsv4
