#include "model/tensor_spec.h"

#include "core/error.h"

namespace dsv4 {
namespace {

int64_t ceil_div(int64_t a, int64_t b) {
    return (a + b - 1) / b;
}

class SpecBuilder {
  public:
    SpecBuilder(const ModelConfig& config, std::vector<TensorSpec>& out) : c_(config), out_(out) {}

    void plain(const std::string& name, DType dtype, std::vector<int64_t> shape, Component component) {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        out_.push_back({name, dtype, std::move(shape), component, dtype == DType::kI64 ? 0 : n, false});
    }

    // A weight [out, in] as the checkpoint stores it: FP8 + 128x128 UE8M0 scales when quantized, else BF16.
    void fp8_linear(const std::string& base, int64_t out, int64_t in, Component component) {
        if (!c_.fp8_weights) {
            plain(base + ".weight", DType::kBF16, {out, in}, component);
            return;
        }
        out_.push_back({base + ".weight", DType::kF8E4M3, {out, in}, component, out * in, false});
        out_.push_back({base + ".scale",
                        DType::kF8E8M0,
                        {ceil_div(out, c_.weight_block_rows), ceil_div(in, c_.weight_block_cols)},
                        component,
                        0,
                        true});
    }

    void expert_linear(const std::string& base, int64_t out, int64_t in) {
        switch (c_.expert_dtype) {
            case ExpertDtype::kFp4:
                // Two e2m1 codes per byte along the input dim; one UE8M0 scale per row and 32 inputs.
                out_.push_back(
                    {base + ".weight", DType::kI8, {out, in / 2}, Component::kRoutedExperts, out * in, false});
                out_.push_back({base + ".scale",
                                DType::kF8E8M0,
                                {out, in / c_.fp4_scale_block},
                                Component::kRoutedExperts,
                                0,
                                true});
                return;
            case ExpertDtype::kFp8:
                fp8_linear(base, out, in, Component::kRoutedExperts);
                return;
            case ExpertDtype::kBf16:
                plain(base + ".weight", DType::kBF16, {out, in}, Component::kRoutedExperts);
                return;
        }
    }

    void mhc(const std::string& prefix, Component component) {
        const int64_t hc = c_.hc_mult;
        const int64_t mixes = (2 + hc) * hc;
        plain(prefix + "_fn", DType::kF32, {mixes, hc * c_.hidden_size}, component);
        plain(prefix + "_base", DType::kF32, {mixes}, component);
        plain(prefix + "_scale", DType::kF32, {3}, component);
    }

    void compressor(const std::string& prefix, int64_t head_dim, int ratio, bool overlap, Component component) {
        const int64_t width = overlap ? 2 * head_dim : head_dim;
        plain(prefix + "wkv.weight", DType::kBF16, {width, c_.hidden_size}, component);
        plain(prefix + "wgate.weight", DType::kBF16, {width, c_.hidden_size}, component);
        plain(prefix + "ape", DType::kF32, {ratio, width}, component);
        plain(prefix + "norm.weight", DType::kBF16, {head_dim}, component);
    }

    void attention(const std::string& p, const LayerConfig& layer, Component comp) {
        const int64_t d = c_.hidden_size;
        plain(p + "attn_norm.weight", DType::kBF16, {d}, comp);
        fp8_linear(p + "attn.wq_a", c_.q_lora_rank, d, comp);
        plain(p + "attn.q_norm.weight", DType::kBF16, {c_.q_lora_rank}, comp);
        fp8_linear(p + "attn.wq_b", int64_t{c_.num_heads} * c_.head_dim, c_.q_lora_rank, comp);
        fp8_linear(p + "attn.wkv", c_.head_dim, d, comp);
        plain(p + "attn.kv_norm.weight", DType::kBF16, {c_.head_dim}, comp);
        fp8_linear(p + "attn.wo_a", int64_t{c_.o_groups} * c_.o_lora_rank,
                   int64_t{c_.num_heads} * c_.head_dim / c_.o_groups, comp);
        fp8_linear(p + "attn.wo_b", d, int64_t{c_.o_groups} * c_.o_lora_rank, comp);
        plain(p + "attn.attn_sink", DType::kF32, {c_.num_heads}, comp);
        const bool draft = comp == Component::kDraft;
        if (layer.attention == AttentionType::kCsa) {
            compressor(p + "attn.compressor.", c_.head_dim, layer.compress_ratio, true,
                       draft ? comp : Component::kCompressor);
            const Component ix = draft ? comp : Component::kIndexer;
            compressor(p + "attn.indexer.compressor.", c_.index_head_dim, layer.compress_ratio, true, ix);
            fp8_linear(p + "attn.indexer.wq_b", int64_t{c_.index_n_heads} * c_.index_head_dim, c_.q_lora_rank, ix);
            plain(p + "attn.indexer.weights_proj.weight", DType::kBF16, {c_.index_n_heads, d}, ix);
        } else if (layer.attention == AttentionType::kHca) {
            compressor(p + "attn.compressor.", c_.head_dim, layer.compress_ratio, false,
                       draft ? comp : Component::kCompressor);
        }
    }

    void moe(const std::string& p, const LayerConfig& layer, bool draft) {
        const int64_t d = c_.hidden_size;
        const int64_t inter = c_.moe_intermediate_size;
        const Component norms = draft ? Component::kDraft : Component::kNorms;
        const Component router = draft ? Component::kDraft : Component::kRouter;
        plain(p + "ffn_norm.weight", DType::kBF16, {d}, norms);
        plain(p + "ffn.gate.weight", DType::kBF16, {c_.n_routed_experts, d}, router);
        if (layer.routing == RoutingType::kHash) {
            plain(p + "ffn.gate.tid2eid", DType::kI64, {c_.vocab_size, c_.n_experts_per_tok}, router);
        } else {
            plain(p + "ffn.gate.bias", DType::kF32, {c_.n_routed_experts}, router);
        }
        for (int e = 0; e < c_.n_routed_experts; ++e) {
            const std::string base = p + "ffn.experts." + std::to_string(e) + ".";
            expert_linear(base + "w1", inter, d);
            expert_linear(base + "w3", inter, d);
            expert_linear(base + "w2", d, inter);
            if (draft) {
                for (size_t i = out_.size() - (c_.expert_dtype == ExpertDtype::kBf16 ? 3 : 6); i < out_.size(); ++i) {
                    out_[i].component = Component::kDraft;
                }
            }
        }
        if (c_.n_shared_experts > 0) {
            const Component shared = draft ? Component::kDraft : Component::kSharedExperts;
            fp8_linear(p + "ffn.shared_experts.w1", inter, d, shared);
            fp8_linear(p + "ffn.shared_experts.w3", inter, d, shared);
            fp8_linear(p + "ffn.shared_experts.w2", d, inter, shared);
        }
    }

    void hc_head(const std::string& prefix, Component component) {
        const int64_t hc = c_.hc_mult;
        plain(prefix + "hc_head_fn", DType::kF32, {hc, hc * c_.hidden_size}, component);
        plain(prefix + "hc_head_base", DType::kF32, {hc}, component);
        plain(prefix + "hc_head_scale", DType::kF32, {1}, component);
    }

  private:
    const ModelConfig& c_;
    std::vector<TensorSpec>& out_;
};

void append_draft_tensors(const ModelConfig& c, const DraftLayout& drafts, std::vector<TensorSpec>& out) {
    SpecBuilder b(c, out);
    const LayerConfig layer = draft_layer_config(c);
    const int64_t d = c.hidden_size;
    for (int s = 0; s < drafts.stages; ++s) {
        const std::string p = "mtp." + std::to_string(s) + ".";
        append_block_tensors(c, p, layer, Component::kDraft, out);
        if (drafts.kind == DraftKind::kMtp) {
            b.fp8_linear(p + "e_proj", d, d, Component::kDraft);
            b.fp8_linear(p + "h_proj", d, d, Component::kDraft);
            b.plain(p + "enorm.weight", DType::kBF16, {d}, Component::kDraft);
            b.plain(p + "hnorm.weight", DType::kBF16, {d}, Component::kDraft);
            b.plain(p + "norm.weight", DType::kBF16, {d}, Component::kDraft);
            b.hc_head(p, Component::kDraft);
        } else {
            DSV4_CHECK(c.dspark.has_value(), "DSpark draft stages need the dspark_* keys in config.json");
            const int64_t targets = static_cast<int64_t>(c.dspark->target_layer_ids.size());
            const int64_t rank = c.dspark->markov_rank;
            if (s == 0) {
                b.fp8_linear(p + "main_proj", d, targets * d, Component::kDraft);
                b.plain(p + "main_norm.weight", DType::kBF16, {d}, Component::kDraft);
            }
            if (s == drafts.stages - 1) {
                b.plain(p + "norm.weight", DType::kBF16, {d}, Component::kDraft);
                b.hc_head(p, Component::kDraft);
                b.plain(p + "markov_head.markov_w1.weight", DType::kBF16, {c.vocab_size, rank}, Component::kDraft);
                b.plain(p + "markov_head.markov_w2.weight", DType::kBF16, {c.vocab_size, rank}, Component::kDraft);
                b.plain(p + "confidence_head.proj.weight", DType::kBF16, {1, d + rank}, Component::kDraft);
            }
        }
    }
}

}  // namespace

LayerConfig draft_layer_config(const ModelConfig& config) {
    LayerConfig layer;
    layer.attention = AttentionType::kSliding;
    layer.routing = RoutingType::kLearned;
    layer.rope.theta = config.rope_theta;
    layer.rope.rope_dim = config.rope_head_dim;
    return layer;
}

ModelConfig config_with_draft_state(const ModelConfig& config, int stages) {
    DSV4_CHECK(stages >= 0, "draft state: {} stages", stages);
    ModelConfig out = config;
    for (int s = 0; s < stages; ++s) out.layers.push_back(draft_layer_config(config));
    out.num_layers += stages;
    return out;
}

std::string_view component_name(Component c) {
    switch (c) {
        case Component::kEmbedding:
            return "embedding";
        case Component::kHead:
            return "head";
        case Component::kAttention:
            return "attention";
        case Component::kCompressor:
            return "compressors";
        case Component::kIndexer:
            return "indexers";
        case Component::kRoutedExperts:
            return "routed_experts";
        case Component::kSharedExperts:
            return "shared_experts";
        case Component::kRouter:
            return "routers";
        case Component::kMhc:
            return "mhc";
        case Component::kNorms:
            return "norms";
        case Component::kDraft:
            return "draft";
    }
    return "?";
}

void append_block_tensors(const ModelConfig& config, const std::string& prefix, const LayerConfig& layer,
                          Component attention_component, std::vector<TensorSpec>& out) {
    SpecBuilder b(config, out);
    const bool draft = attention_component == Component::kDraft;
    b.mhc(prefix + "hc_attn", draft ? Component::kDraft : Component::kMhc);
    b.mhc(prefix + "hc_ffn", draft ? Component::kDraft : Component::kMhc);
    b.attention(prefix, layer, attention_component);
    b.moe(prefix, layer, draft);
}

std::vector<TensorSpec> expected_tensors(const ModelConfig& config, const DraftLayout& drafts) {
    std::vector<TensorSpec> out;
    SpecBuilder b(config, out);
    b.plain("embed.weight", DType::kBF16, {config.vocab_size, config.hidden_size}, Component::kEmbedding);
    b.plain("head.weight", DType::kBF16, {config.vocab_size, config.hidden_size}, Component::kHead);
    b.plain("norm.weight", DType::kBF16, {config.hidden_size}, Component::kNorms);
    b.hc_head("", Component::kMhc);
    for (int i = 0; i < config.num_layers; ++i) {
        append_block_tensors(config, "layers." + std::to_string(i) + ".", config.layers[i], Component::kAttention, out);
    }
    append_draft_tensors(config, drafts, out);
    return out;
}

}  // namespace dsv4
