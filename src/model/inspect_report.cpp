// Text and JSON renderings of an Inspection (`dsv4 inspect` / `dsv4 inspect --json`).
#include <fmt/format.h>

#include "model/inspect.h"

namespace dsv4 {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;

std::string_view draft_kind_name(DraftKind kind) {
    switch (kind) {
        case DraftKind::kNone:
            return "none";
        case DraftKind::kMtp:
            return "mtp";
        case DraftKind::kDspark:
            return "dspark";
    }
    return "?";
}

std::string_view routing_name(RoutingType routing) {
    return routing == RoutingType::kHash ? "hash" : "learned";
}

std::string_view validation_state_name(ValidationSummary::State state) {
    switch (state) {
        case ValidationSummary::State::kSkipped:
            return "skipped";
        case ValidationSummary::State::kOk:
            return "ok";
        case ValidationSummary::State::kFailed:
            return "failed";
    }
    return "?";
}

std::string rope_text(const RopeParams& rope) {
    std::string text = fmt::format("theta {:g}", rope.theta);
    if (rope.yarn) text += fmt::format(" + yarn x{:g}", rope.yarn->factor);
    return text;
}

void append_schedule(std::string& out, const ModelConfig& c, const Inspection& in) {
    out += fmt::format("\nlayer schedule ({} sliding, {} CSA, {} HCA; {} hash-routed):\n", in.sliding_layers,
                       in.csa_layers, in.hca_layers, in.hash_layers);
    out += "  layer  attention  ratio  routing  rope\n";
    for (size_t i = 0; i < c.layers.size(); ++i) {
        const LayerConfig& layer = c.layers[i];
        out += fmt::format("  {:>5}  {:<9}  {:>5}  {:<7}  {}\n", i, attention_type_name(layer.attention),
                           layer.compress_ratio, routing_name(layer.routing), rope_text(layer.rope));
    }
}

void append_components(std::string& out, const Inspection& in) {
    out += "\nparameters and bytes by component:\n";
    out += fmt::format("  {:<15} {:>19} {:>19} {:>10} {:>8}\n", "component", "params", "bytes", "GiB", "tensors");
    for (const auto& c : in.components) {
        if (c.tensors == 0) continue;
        out += fmt::format("  {:<15} {:>19} {:>19} {:>10.2f} {:>8}\n", component_name(c.component),
                           group_digits(static_cast<uint64_t>(c.params)), group_digits(c.bytes),
                           static_cast<double>(c.bytes) / kGiB, c.tensors);
    }
    out += fmt::format("  {:<15} {:>19} {:>19} {:>10.2f} {:>8}\n", "total",
                       group_digits(static_cast<uint64_t>(in.params_total)), group_digits(in.bytes_total),
                       static_cast<double>(in.bytes_total) / kGiB, in.tensors);
    out += fmt::format("  backbone (without drafts): {:.2f} B params, {} bytes ({:.2f} GiB)\n",
                       static_cast<double>(in.params_backbone) / 1e9, group_digits(in.bytes_backbone),
                       static_cast<double>(in.bytes_backbone) / kGiB);
    out += fmt::format(
        "  activated per token: {:.2f} B (excluding the embedding table); {:.2f} B with the embedding "
        "table and the draft stages\n",
        static_cast<double>(in.params_activated) / 1e9,
        static_cast<double>(in.params_activated_with_embedding_and_drafts) / 1e9);
    out += "\nbytes by dtype:\n";
    for (const auto& d : in.dtypes) {
        out += fmt::format("  {:<8} {:>19} ({:>7.2f} GiB) in {} tensors\n", dtype_name(d.dtype), group_digits(d.bytes),
                           static_cast<double>(d.bytes) / kGiB, d.tensors);
    }
}

void append_kv(std::string& out, const KvFootprint& kv) {
    out += "\nKV cache per token of context (all layers; per-sequence totals include the fixed state below):\n";
    auto line = [&](std::string_view label, double per_token, uint64_t fixed) {
        out += fmt::format("  {:<40} {:>9.2f} B/token   128K ctx: {:.2f} GiB, 1M ctx: {:.2f} GiB\n", label, per_token,
                           (per_token * 131072 + static_cast<double>(fixed)) / kGiB,
                           (per_token * 1048576 + static_cast<double>(fixed)) / kGiB);
    };
    line(fmt::format("fp8_ds_mla ({} B) + FP8 indexer ({} B)", kv.fp8_row, kv.fp8_indexer), kv.fp8_per_token,
         kv.swa_ring_fp8 + kv.compressor_state);
    line(fmt::format("fp8_ds_mla + MXFP4 indexer ({} B)", kv.mxfp4_indexer), kv.fp8_mxfp4_per_token,
         kv.swa_ring_fp8 + kv.compressor_state);
    line(fmt::format("bf16 ({} B + {} B)", kv.bf16_row, kv.bf16_indexer), kv.bf16_per_token,
         kv.swa_ring_bf16 + kv.compressor_state);
    out += fmt::format(
        "  fixed per sequence: SWA rings {:.2f} MiB fp8 / {:.2f} MiB bf16, compressor state {:.2f} MiB "
        "(fp32); draft stages' rings {:.2f} / {:.2f} MiB\n",
        static_cast<double>(kv.swa_ring_fp8) / kMiB, static_cast<double>(kv.swa_ring_bf16) / kMiB,
        static_cast<double>(kv.compressor_state) / kMiB, static_cast<double>(kv.draft_swa_ring_fp8) / kMiB,
        static_cast<double>(kv.draft_swa_ring_bf16) / kMiB);
}

void append_fit(std::string& out, const GpuFit& fit) {
    out += fmt::format("\nGPU fit ({:.1f} GiB per GPU, {:.1f} GiB assumed for the runtime): weights {:.2f} GiB -> ",
                       fit.gpu_gib, fit.reserve_gib, fit.weights_gib);
    if (!fit.fits) {
        out +=
            fmt::format("does NOT fit one GPU; weights alone need >= {} such GPUs (expert parallel)\n", fit.min_gpus);
        return;
    }
    auto tokens = [](int64_t n) { return n < 0 ? std::string("unbounded") : group_digits(static_cast<uint64_t>(n)); };
    out += fmt::format("fits, {:.2f} GiB left for KV: one sequence of up to {} tokens (fp8_ds_mla) or {} (bf16)\n",
                       fit.free_gib, tokens(fit.max_context_tokens_fp8), tokens(fit.max_context_tokens_bf16));
}

nlohmann::json components_json(const Inspection& in) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& c : in.components) {
        list.push_back({{"component", component_name(c.component)},
                        {"params", c.params},
                        {"bytes", c.bytes},
                        {"tensors", c.tensors}});
    }
    return list;
}

nlohmann::json kv_json(const KvFootprint& kv) {
    return {{"fp8_row_bytes", kv.fp8_row},
            {"bf16_row_bytes", kv.bf16_row},
            {"fp8_indexer_bytes", kv.fp8_indexer},
            {"mxfp4_indexer_bytes", kv.mxfp4_indexer},
            {"bf16_indexer_bytes", kv.bf16_indexer},
            {"bytes_per_token_fp8_ds_mla", kv.fp8_per_token},
            {"bytes_per_token_fp8_ds_mla_mxfp4_indexer", kv.fp8_mxfp4_per_token},
            {"bytes_per_token_bf16", kv.bf16_per_token},
            {"swa_ring_bytes_fp8", kv.swa_ring_fp8},
            {"swa_ring_bytes_bf16", kv.swa_ring_bf16},
            {"draft_swa_ring_bytes_fp8", kv.draft_swa_ring_fp8},
            {"draft_swa_ring_bytes_bf16", kv.draft_swa_ring_bf16},
            {"compressor_state_bytes", kv.compressor_state}};
}

nlohmann::json validation_json(const ValidationSummary& v) {
    nlohmann::json j = {{"state", validation_state_name(v.state)}, {"text", v.text}};
    if (v.report) {
        const BindingReport& r = *v.report;
        j["naming"] = checkpoint_naming_name(r.naming);
        j["expected"] = r.expected;
        j["matched"] = r.matched;
        j["missing"] = r.missing.size();
        j["unexpected"] = r.unexpected.size();
        j["wrong"] = r.wrong.size();
        j["unsupported"] = r.unsupported.size();
    }
    return j;
}

}  // namespace

std::string group_digits(uint64_t value) {
    std::string digits = std::to_string(value);
    std::string out;
    for (size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
        out += digits[i];
    }
    return out;
}

std::string inspection_text(const ModelConfig& c, const Inspection& in, const std::optional<GpuFit>& fit,
                            const std::optional<ValidationSummary>& validation) {
    std::string out = fmt::format(
        "model {}: {} layers, hidden {}, {} heads x {}, vocab {}, {} routed experts (top-{}) + {} shared\n",
        c.model_type, c.num_layers, c.hidden_size, c.num_heads, c.head_dim,
        group_digits(static_cast<uint64_t>(c.vocab_size)), c.n_routed_experts, c.n_experts_per_tok, c.n_shared_experts);
    out += fmt::format("drafts: {}, {} stage(s)\n", draft_kind_name(in.drafts.kind), in.drafts.stages);
    append_schedule(out, c, in);
    append_components(out, in);
    append_kv(out, in.kv);
    if (fit) append_fit(out, *fit);
    if (validation) {
        out += fmt::format("\nvalidation: {}\n{}\n", validation_state_name(validation->state), validation->text);
    }
    return out;
}

nlohmann::json inspection_json(const ModelConfig& c, const Inspection& in, const std::optional<GpuFit>& fit,
                               const std::optional<ValidationSummary>& validation) {
    nlohmann::json schedule = nlohmann::json::array();
    for (size_t i = 0; i < c.layers.size(); ++i) {
        const LayerConfig& layer = c.layers[i];
        schedule.push_back({{"layer", i},
                            {"attention", attention_type_name(layer.attention)},
                            {"compress_ratio", layer.compress_ratio},
                            {"routing", routing_name(layer.routing)},
                            {"rope_theta", layer.rope.theta},
                            {"yarn_factor", layer.rope.yarn ? nlohmann::json(layer.rope.yarn->factor) : nullptr}});
    }
    nlohmann::json dtypes = nlohmann::json::array();
    for (const auto& d : in.dtypes) {
        dtypes.push_back({{"dtype", dtype_name(d.dtype)}, {"bytes", d.bytes}, {"tensors", d.tensors}});
    }
    nlohmann::json j = {
        {"model_type", c.model_type},
        {"layers", c.num_layers},
        {"schedule", schedule},
        {"drafts", {{"kind", draft_kind_name(in.drafts.kind)}, {"stages", in.drafts.stages}}},
        {"components", components_json(in)},
        {"dtypes", dtypes},
        {"tensors", in.tensors},
        {"params_total", in.params_total},
        {"params_backbone", in.params_backbone},
        {"params_activated_per_token", in.params_activated},
        {"params_activated_with_embedding_and_drafts", in.params_activated_with_embedding_and_drafts},
        {"bytes_total", in.bytes_total},
        {"bytes_backbone", in.bytes_backbone},
        {"kv", kv_json(in.kv)},
    };
    if (fit) {
        j["gpu_fit"] = {{"gpu_gib", fit->gpu_gib},
                        {"reserve_gib", fit->reserve_gib},
                        {"weights_gib", fit->weights_gib},
                        {"fits", fit->fits},
                        {"free_gib", fit->free_gib},
                        {"max_context_tokens_fp8", fit->max_context_tokens_fp8},
                        {"max_context_tokens_bf16", fit->max_context_tokens_bf16},
                        {"min_gpus", fit->min_gpus}};
    }
    if (validation) j["validation"] = validation_json(*validation);
    return j;
}

}  // namespace dsv4
