// Model inspection: counts, KV footprint and GPU fit (see inspect.h). Reports are in inspect_report.cpp.
#include "model/inspect.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "loader/checkpoint.h"

namespace dsv4 {
namespace {

constexpr Component kAllComponents[] = {
    Component::kEmbedding, Component::kHead,          Component::kAttention,     Component::kCompressor,
    Component::kIndexer,   Component::kRoutedExperts, Component::kSharedExperts, Component::kRouter,
    Component::kMhc,       Component::kNorms,         Component::kDraft,
};

uint64_t spec_bytes(const TensorSpec& spec) {
    uint64_t numel = 1;
    for (int64_t d : spec.shape) numel *= static_cast<uint64_t>(d);
    return numel * static_cast<uint64_t>(dtype_bits(spec.dtype)) / 8;
}

bool is_routed_expert(const TensorSpec& spec) {
    return spec.component == Component::kRoutedExperts ||
           (spec.component == Component::kDraft && spec.name.find(".ffn.experts.") != std::string::npos);
}

int64_t round_up(int64_t value, int64_t multiple) {
    return (value + multiple - 1) / multiple * multiple;
}

KvFootprint kv_footprint(const ModelConfig& c, const Inspection& inspection) {
    KvFootprint kv;
    const int64_t nope = c.head_dim - c.rope_head_dim;
    kv.bf16_row = int64_t{c.head_dim} * 2;
    kv.fp8_row = nope + int64_t{c.rope_head_dim} * 2 + round_up((nope + 63) / 64, 8);
    kv.bf16_indexer = int64_t{c.index_head_dim} * 2;
    kv.fp8_indexer = c.index_head_dim + 4;
    kv.mxfp4_indexer = c.index_head_dim / 2 + c.index_head_dim / 32;
    const double csa = inspection.csa_layers, hca = inspection.hca_layers;
    auto per_token = [&](int64_t row, int64_t indexer) {
        return csa * static_cast<double>(row + indexer) / c.csa_ratio + hca * static_cast<double>(row) / c.hca_ratio;
    };
    kv.bf16_per_token = per_token(kv.bf16_row, kv.bf16_indexer);
    kv.fp8_per_token = per_token(kv.fp8_row, kv.fp8_indexer);
    kv.fp8_mxfp4_per_token = per_token(kv.fp8_row, kv.mxfp4_indexer);
    const auto window = static_cast<uint64_t>(c.sliding_window);
    kv.swa_ring_bf16 = static_cast<uint64_t>(c.num_layers) * window * static_cast<uint64_t>(kv.bf16_row);
    kv.swa_ring_fp8 = static_cast<uint64_t>(c.num_layers) * window * static_cast<uint64_t>(kv.fp8_row);
    kv.draft_swa_ring_bf16 =
        static_cast<uint64_t>(inspection.drafts.stages) * window * static_cast<uint64_t>(kv.bf16_row);
    kv.draft_swa_ring_fp8 =
        static_cast<uint64_t>(inspection.drafts.stages) * window * static_cast<uint64_t>(kv.fp8_row);
    // Pending compressor state, fp32 kv and gate(+ape) per position: CSA keeps two overlapping windows of
    // 2*dim-wide rows (main and indexer compressor), HCA one window of dim-wide rows (model-spec 5.1).
    const uint64_t csa_state =
        2ull * c.csa_ratio * 2 * (2ull * c.head_dim) * 4 + 2ull * c.csa_ratio * 2 * (2ull * c.index_head_dim) * 4;
    const uint64_t hca_state = 1ull * c.hca_ratio * 2 * static_cast<uint64_t>(c.head_dim) * 4;
    kv.compressor_state = static_cast<uint64_t>(inspection.csa_layers) * csa_state +
                          static_cast<uint64_t>(inspection.hca_layers) * hca_state;
    return kv;
}

void count_schedule(const ModelConfig& c, Inspection& inspection) {
    for (const auto& layer : c.layers) {
        inspection.sliding_layers += layer.attention == AttentionType::kSliding;
        inspection.csa_layers += layer.attention == AttentionType::kCsa;
        inspection.hca_layers += layer.attention == AttentionType::kHca;
        inspection.hash_layers += layer.routing == RoutingType::kHash;
    }
}

}  // namespace

DraftLayout draft_layout_from_config(const ModelConfig& config) {
    if (config.dspark.has_value()) return kDsparkLayout;
    if (config.num_nextn_predict_layers > 0) return {DraftKind::kMtp, config.num_nextn_predict_layers};
    return {};
}

Inspection inspect_model(const ModelConfig& config, const DraftLayout& drafts) {
    DSV4_CHECK(config.n_routed_experts > 0, "inspect: the config has no routed experts");
    Inspection inspection;
    inspection.drafts = drafts;
    count_schedule(config, inspection);
    for (Component c : kAllComponents) inspection.components.push_back({c, 0, 0, 0});

    const std::vector<TensorSpec> specs = expected_tensors(config, drafts);
    inspection.tensors = specs.size();
    int64_t routed_backbone = 0, routed_draft = 0, embedding = 0;
    for (const auto& spec : specs) {
        const uint64_t bytes = spec_bytes(spec);
        auto& component = inspection.components[static_cast<size_t>(spec.component)];
        component.params += spec.params;
        component.bytes += bytes;
        ++component.tensors;
        auto dtype = std::find_if(inspection.dtypes.begin(), inspection.dtypes.end(),
                                  [&](const auto& d) { return d.dtype == spec.dtype; });
        if (dtype == inspection.dtypes.end())
            dtype = inspection.dtypes.insert(inspection.dtypes.end(), {spec.dtype, 0, 0});
        dtype->bytes += bytes;
        ++dtype->tensors;
        inspection.params_total += spec.params;
        inspection.bytes_total += bytes;
        const bool draft = spec.component == Component::kDraft;
        if (!draft) {
            inspection.params_backbone += spec.params;
            inspection.bytes_backbone += bytes;
        }
        if (is_routed_expert(spec)) (draft ? routed_draft : routed_backbone) += spec.params;
        if (spec.component == Component::kEmbedding) embedding += spec.params;
    }
    std::sort(inspection.dtypes.begin(), inspection.dtypes.end(),
              [](const auto& a, const auto& b) { return a.bytes != b.bytes ? a.bytes > b.bytes : a.dtype < b.dtype; });
    // Only top-k of the E routed experts run per token (every expert has the same size, so this is exact).
    const int64_t k = config.n_experts_per_tok, e = config.n_routed_experts;
    const int64_t inactive_backbone = routed_backbone - routed_backbone / e * k;
    const int64_t inactive_draft = routed_draft - routed_draft / e * k;
    inspection.params_activated = inspection.params_backbone - embedding - inactive_backbone;
    inspection.params_activated_with_embedding_and_drafts =
        inspection.params_total - inactive_backbone - inactive_draft;
    inspection.kv = kv_footprint(config, inspection);
    inspection.max_position = config.max_position_embeddings;
    return inspection;
}

GpuFit estimate_gpu_fit(const Inspection& inspection, double gpu_mem_gib, double reserve_gib) {
    DSV4_CHECK(gpu_mem_gib > 0 && std::isfinite(gpu_mem_gib), "--gpu-mem-gib must be a positive number");
    constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
    GpuFit fit;
    fit.gpu_gib = gpu_mem_gib;
    fit.reserve_gib = reserve_gib;
    fit.weights_gib = static_cast<double>(inspection.bytes_total) / kGiB;
    const KvFootprint& kv = inspection.kv;
    const double fixed_fp8 = static_cast<double>(kv.swa_ring_fp8 + kv.draft_swa_ring_fp8 + kv.compressor_state) / kGiB;
    const double fixed_bf16 =
        static_cast<double>(kv.swa_ring_bf16 + kv.draft_swa_ring_bf16 + kv.compressor_state) / kGiB;
    fit.free_gib = gpu_mem_gib - fit.weights_gib - reserve_gib - fixed_fp8;
    fit.fits = fit.free_gib > 0;
    // Tokens of context one sequence can hold in the free memory; -1: the cache does not grow (no compressed layers).
    auto tokens = [&](double free_gib, double per_token) -> int64_t {
        if (per_token <= 0) return -1;
        if (free_gib <= 0) return 0;
        auto n = static_cast<int64_t>(std::min(free_gib * kGiB / per_token, 9e18));
        return inspection.max_position > 0 ? std::min(n, inspection.max_position) : n;
    };
    fit.max_context_tokens_fp8 = tokens(fit.free_gib, kv.fp8_per_token);
    fit.max_context_tokens_bf16 = tokens(gpu_mem_gib - fit.weights_gib - reserve_gib - fixed_bf16, kv.bf16_per_token);
    const double usable = gpu_mem_gib - reserve_gib;
    fit.min_gpus = usable > 0 ? static_cast<int>(std::ceil(fit.weights_gib / usable)) : 0;
    return fit;
}

}  // namespace dsv4

namespace dsv4 {

DirectoryInspection inspect_directory(const std::filesystem::path& dir, std::optional<double> gpu_mem_gib,
                                      Fp8Dialect fp8_runtime) {
    DirectoryInspection result;
    result.config = load_model_config(dir / "config.json");
    DraftLayout drafts = draft_layout_from_config(result.config);
    std::error_code ec;
    const bool has_weights =
        std::filesystem::exists(dir / kSingleFileName, ec) || std::filesystem::exists(dir / kIndexFileName, ec);
    if (!has_weights) {
        result.validation.text = fmt::format("no {} or {} in {}: counts are from config.json alone", kSingleFileName,
                                             kIndexFileName, dir.string());
    } else {
        try {
            Checkpoint checkpoint = Checkpoint::open(dir);
            BoundWeights bound;
            BindingReport report = validate_weights(result.config, checkpoint, &bound);
            drafts = report.drafts;
            if (result.config.fp8_weights) {
                result.fp8 = inspect_fp8(result.config, report.ok() ? &bound : nullptr, fp8_runtime);
            }
            result.validation.state = report.ok() ? ValidationSummary::State::kOk : ValidationSummary::State::kFailed;
            result.validation.text = report.describe();
            for (const auto& warning : checkpoint.warnings()) result.validation.text += "\nwarning: " + warning;
            result.validation.report = std::move(report);
        } catch (const Error& e) {
            result.validation.state = ValidationSummary::State::kFailed;
            result.validation.text = e.what();
        }
    }
    if (result.config.fp8_weights && !result.fp8) result.fp8 = inspect_fp8(result.config, nullptr, fp8_runtime);
    result.inspection = inspect_model(result.config, drafts);
    if (gpu_mem_gib) result.fit = estimate_gpu_fit(result.inspection, *gpu_mem_gib);
    return result;
}

}  // namespace dsv4
