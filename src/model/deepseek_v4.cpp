#include "model/deepseek_v4.h"

#include <cmath>

#include "core/error.h"
#include "model/tensor_spec.h"

namespace dsv4 {

DeepseekV4::DeepseekV4(ModelConfig config, ModelWeights weights, Backend& backend)
    : config_(std::move(config)), weights_(std::move(weights)), backend_(backend) {}

void DeepseekV4::set_routed_expert(int layer, int expert, const ExpertWeights& weights) {
    DSV4_CHECK(layer >= 0 && layer < config_.num_layers && expert >= 0 &&
                   expert < static_cast<int>(weights_.layers[layer].ffn.experts.size()),
               "set_routed_expert: layer {} expert {} is outside the model", layer, expert);
    weights_.layers[layer].ffn.experts[expert] = weights;
    backend_.expert_set_changed();
}

void DeepseekV4::begin_step(const StepBatch& batch) {
    backend_.begin_step(batch);
}

ForwardResult DeepseekV4::forward(const StepBatch& batch, const ForwardRequest& request) {
    begin_step(batch);
    return run(batch, request);
}

std::vector<float> DeepseekV4::host_logits(const ForwardResult& result) {
    std::vector<float> out(result.logits.numel());
    if (!out.empty()) backend_.to_host(result.logits, out.data());
    return out;
}

ForwardResult DeepseekV4::run(const StepBatch& batch, const ForwardRequest& request) {
    Backend& b = backend_;
    const int64_t n = batch.n_tokens(), d = config_.hidden_size, hc = config_.hc_mult;
    ForwardResult result;
    // Outputs first: they outlive the layers' scratch marks.
    for (int layer : request.hidden_layers) {
        DSV4_CHECK(layer >= 0 && layer < config_.num_layers,
                   "forward: hidden state of layer {} asked, the model has {}", layer, config_.num_layers);
        result.hidden.push_back(b.alloc(DType::kF32, {n, hc, d}));
    }
    const auto m = static_cast<int64_t>(batch.logit_rows.size());
    result.logits = b.alloc(DType::kF32, {m, config_.vocab_size});
    Tensor streams = b.alloc(DType::kF32, {n, hc, d});
    SiteCarry carry = site_carry(n);
    b.region("embed");
    b.embed(weights_.embed, streams);
    for (int l = 0; l < config_.num_layers; ++l) {
        const size_t mark = b.scratch_mark();  // the layer's temporaries are released at its end
        attention_site(backbone(l), streams, carry);
        ffn_site(backbone(l), streams, carry);
        if (debug_hook) {
            apply_pending(carry, streams);
            debug_hook("layer" + std::to_string(l), streams);
        }
        b.scratch_release(mark);
        for (size_t i = 0; i < request.hidden_layers.size(); ++i) {
            if (request.hidden_layers[i] != l) continue;
            apply_pending(carry, streams);
            b.copy(streams, result.hidden[i]);
        }
    }
    apply_pending(carry, streams);
    if (m == 0) return result;
    b.region("head");
    Tensor picked = b.alloc(DType::kF32, {m, hc, d});
    b.gather_rows(streams, batch.logit_rows, picked);
    Tensor y = b.alloc(DType::kF32, {m, d});
    b.hc_head(picked, weights_.hc_head, static_cast<float>(config_.hc_eps), static_cast<float>(config_.rms_norm_eps),
              y);
    b.rms_norm(y, &weights_.norm, static_cast<float>(config_.rms_norm_eps), y);
    b.linear(y, weights_.head, LinearKind::kF32Out, result.logits);
    return result;
}

void DeepseekV4::draft_block(const LayerWeights& w, int state_layer, Tensor streams, BlockAttention mode) {
    const LayerConfig lc = draft_layer_config(config_);
    const BlockRef block{w, lc, state_layer, mode};
    const size_t mark = backend_.scratch_mark();
    SiteCarry carry = site_carry(streams.size(0));
    attention_site(block, streams, carry);
    ffn_site(block, streams, carry);
    apply_pending(carry, streams);
    backend_.scratch_release(mark);
}

DeepseekV4::SiteCarry DeepseekV4::site_carry(int64_t n) {
    Backend& b = backend_;
    const int64_t hc = config_.hc_mult;
    SiteCarry carry;
    carry.y = b.alloc(DType::kF32, {n, config_.hidden_size});
    for (int i = 0; i < 2; ++i) {
        carry.post[i] = b.alloc(DType::kF32, {n, hc});
        carry.comb[i] = b.alloc(DType::kF32, {n, hc, hc});
    }
    return carry;
}

void DeepseekV4::apply_pending(SiteCarry& carry, Tensor streams) {
    if (!carry.pending) return;
    backend_.region("mhc");
    backend_.hc_post(streams, carry.y, carry.post[carry.next ^ 1], carry.comb[carry.next ^ 1]);
    carry.pending = false;
}

void DeepseekV4::enter_site(SiteCarry& carry, Tensor streams, const MhcWeights& mhc, const VecRef& norm, Tensor u) {
    const HcPostInputs prev{carry.y, carry.post[carry.next ^ 1], carry.comb[carry.next ^ 1]};
    backend_.region("mhc");
    backend_.hc_post_pre(streams, carry.pending ? &prev : nullptr, mhc, norm, config_.hc_sinkhorn_iters,
                         static_cast<float>(config_.hc_eps), static_cast<float>(config_.rms_norm_eps), u,
                         carry.post[carry.next], carry.comb[carry.next]);
    carry.next ^= 1;       // the pair just written is the one the next site applies
    carry.pending = true;  // once this site's sub-layer has written y
}

void DeepseekV4::attention_site(const BlockRef& block, Tensor streams, SiteCarry& carry) {
    const LayerWeights& w = block.w;
    Tensor u = backend_.alloc(DType::kF32, {streams.size(0), config_.hidden_size});
    enter_site(carry, streams, w.hc_attn, w.attn_norm, u);
    attention(block, u, carry.y);
    if (debug_hook) debug_hook("attn" + std::to_string(block.state_layer), carry.y);
}

void DeepseekV4::ffn_site(const BlockRef& block, Tensor streams, SiteCarry& carry) {
    Backend& b = backend_;
    const LayerWeights& w = block.w;
    const int layer = block.state_layer;
    const int64_t n = streams.size(0), d = config_.hidden_size, k = config_.n_experts_per_tok;
    Tensor u = b.alloc(DType::kF32, {n, d});
    enter_site(carry, streams, w.hc_ffn, w.ffn_norm, u);
    Tensor weights = b.alloc(DType::kF32, {n, k}), ids = b.alloc(DType::kI32, {n, k});
    b.region("router");
    b.route(u, w.ffn, config_, block.lc.routing, weights, ids);
    Tensor y = carry.y;
    b.region("experts+shared");
    if (moe_dispatch_ != nullptr && layer < config_.num_layers) {  // draft stages keep every expert locally
        moe_dispatch_->moe(layer, u, w.ffn, weights, ids, static_cast<float>(config_.swiglu_limit), y);
    } else {
        b.moe(u, w.ffn, weights, ids, static_cast<float>(config_.swiglu_limit), y);
    }
    if (debug_hook) debug_hook("moe" + std::to_string(layer), y);
}

void DeepseekV4::attention(const BlockRef& block, const Tensor& x, Tensor y) {
    Backend& b = backend_;
    const int layer = block.state_layer;
    const LayerConfig& lc = block.lc;
    const AttentionWeights& w = block.w.attn;
    const int64_t n = x.size(0), heads = config_.num_heads, hd = config_.head_dim;
    const auto eps = static_cast<float>(config_.rms_norm_eps);

    // The compressors (their projections of x and their state updates) write only what the attention and the
    // indexer read: issued first, a backend may run them beside the query path.
    std::vector<CompressTarget> compressors;
    auto compressor = [&](CompressorRole role, const CompressorWeights& c) {
        const int64_t width = c.overlap ? 2 * c.head_dim : c.head_dim;
        compressors.push_back({role, &c, b.alloc(DType::kF32, {n, width}), b.alloc(DType::kF32, {n, width})});
    };
    if (w.compressor) compressor(CompressorRole::kMain, *w.compressor);
    if (w.indexer) compressor(CompressorRole::kIndexer, w.indexer->compressor);
    if (!compressors.empty()) {
        b.region("compressor");
        b.compressors(layer, x, compressors, lc.rope, eps);
    }

    // The projections of x that the query path needs, at once (one launch per weight format where the backend can):
    // the query's low-rank path and the K=V head.
    b.region("attention");
    Tensor q_residual = b.alloc(DType::kF32, {n, config_.q_lora_rank});
    Tensor kv = b.alloc(DType::kF32, {n, hd});
    std::vector<LinearTarget> from_x = {{&w.wq_a, LinearKind::kQuantized, q_residual},
                                        {&w.wkv, LinearKind::kQuantized, kv}};
    b.linears(x, from_x);

    // Query: q_norm, the up projection, per-head weightless RMSNorm, RoPE on the trailing dims (with the attention,
    // below). The single shared K=V head's norm and RoPE go with q_norm (one launch where the backend can).
    // Draft blocks store no rows.
    const int window_layer = block.mode == BlockAttention::kDraftBlock ? -1 : layer;
    const NormRopeTarget before_wq_b[] = {{q_residual.view({n, 1, config_.q_lora_rank}), &w.q_norm, nullptr},
                                          {kv.view({n, 1, hd}), &w.kv_norm, &lc.rope, window_layer}};
    b.norm_ropes(before_wq_b, eps);
    // The indexer needs x and q_residual only: issued before the up projection, a backend may run it beside. Short
    // contexts (no token sees more than index_topk entries): no indexer, the attention takes every entry.
    const bool scored = w.indexer && !b.indexer_picks_all(lc.compress_ratio, config_.index_topk);
    Tensor topk;
    if (scored) topk = indexer(block, x, q_residual);

    b.region("attention");
    Tensor q = b.alloc(DType::kF32, {n, heads, hd});
    b.linear(q_residual, w.wq_b, LinearKind::kQuantized, q);
    b.kv_cache_sim(kv, config_.nope_head_dim());

    Tensor o = b.alloc(DType::kF32, {n, heads, hd});
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    // The output with the keys' rotation carried by V undone at the query position, then the grouped output
    // projection. The query heads' weightless RMSNorm and RoPE first (in the attention where the backend can; the
    // attention's outputs in the projection's input form where it can).
    const int64_t groups = config_.o_groups;
    Tensor z = b.alloc(DType::kF32, {n, groups * config_.o_lora_rank});
    if (block.mode == BlockAttention::kDraftBlock) {
        b.norm_rope(q, nullptr, eps, lc.rope);
        b.block_attention(layer, q, kv, w.sinks, scale, o);
        b.rope(o, lc.rope, true);
        b.grouped_linear(o.view({n, groups, heads / groups * hd}), w.wo_a, static_cast<int>(groups), z);
    } else {
        b.normed_attention_projected(layer, lc, q, kv, w.sinks, scored ? &topk : nullptr, scale, eps, o, w.wo_a,
                                     static_cast<int>(groups), z);
        b.store_window(layer, kv);
    }
    b.linear(z, w.wo_b, LinearKind::kQuantized, y);
}

Tensor DeepseekV4::indexer(const BlockRef& block, const Tensor& x, const Tensor& q_residual) {
    Backend& b = backend_;
    const LayerConfig& lc = block.lc;
    b.region("indexer");
    Tensor topk = b.alloc(DType::kI32, {q_residual.size(0), config_.index_topk});
    b.indexer_picks(block.state_layer, x, q_residual, *block.w.attn.indexer, lc.rope, lc.compress_ratio,
                    static_cast<int>(config_.index_n_heads), topk);
    if (debug_hook) debug_hook("topk" + std::to_string(block.state_layer), topk);
    return topk;
}

}  // namespace dsv4
