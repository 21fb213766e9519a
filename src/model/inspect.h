// Model inspection (`dsv4 inspect`): layer schedule, parameter and byte counts per component and dtype, activated
// parameters per token, KV-cache bytes per token of context and fixed per-sequence state, and a GPU-memory fit
// estimate. Everything is computed from the ModelConfig and the expected tensor set (tensor_spec.h), without
// touching weights, so it works on a config.json alone. Formulas: model-spec 1.5 / 1.6 (counts) and 5.1 / 5.4 (KV).
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "config/model_config.h"
#include "model/fp8_inspect.h"
#include "model/tensor_spec.h"
#include "model/weight_binding.h"

namespace dsv4 {

struct ComponentTotals {
    Component component = Component::kAttention;
    int64_t params = 0;
    uint64_t bytes = 0;
    size_t tensors = 0;
};

struct DtypeTotals {
    DType dtype = DType::kU8;
    uint64_t bytes = 0;
    size_t tensors = 0;
};

struct KvFootprint {
    // Bytes of one cache entry.
    int64_t bf16_row = 0;       // head_dim bf16 values
    int64_t fp8_row = 0;        // fp8_ds_mla: nope as e4m3 + rope as bf16 + UE8M0 scale per 64 nope (padded to 8)
    int64_t bf16_indexer = 0;   // index_head_dim bf16 values
    int64_t fp8_indexer = 0;    // e4m3 values + one fp32 scale
    int64_t mxfp4_indexer = 0;  // e2m1 pairs + one UE8M0 per 32
    // Marginal bytes per token of context over all backbone layers (CSA rows + indexer keys every csa_ratio tokens,
    // HCA rows every hca_ratio tokens).
    double bf16_per_token = 0;
    double fp8_per_token = 0;        // fp8_ds_mla + FP8 indexer keys
    double fp8_mxfp4_per_token = 0;  // fp8_ds_mla + MXFP4 indexer keys
    // Fixed per-sequence state.
    uint64_t swa_ring_bf16 = 0;  // backbone layers x sliding_window rows
    uint64_t swa_ring_fp8 = 0;
    uint64_t draft_swa_ring_bf16 = 0;  // the draft stages' own rings
    uint64_t draft_swa_ring_fp8 = 0;
    uint64_t compressor_state = 0;  // pending fp32 kv + gate state of every compressor (2 windows for CSA overlap)
};

struct Inspection {
    DraftLayout drafts;
    int sliding_layers = 0, csa_layers = 0, hca_layers = 0, hash_layers = 0;
    std::vector<ComponentTotals> components;  // every Component, enum order
    std::vector<DtypeTotals> dtypes;          // dtypes present, by bytes descending
    size_t tensors = 0;
    int64_t params_total = 0;
    int64_t params_backbone = 0;  // without draft stages (embedding and head included)
    // Per token: everything but the embedding table and the routed experts not selected (top-k of E).
    int64_t params_activated = 0;
    // As params_activated, plus the embedding table and the draft stages' activated parameters ([nano]'s convention).
    int64_t params_activated_with_embedding_and_drafts = 0;
    uint64_t bytes_total = 0;
    uint64_t bytes_backbone = 0;
    KvFootprint kv;
    int64_t max_position = 0;  // max_position_embeddings: caps the context estimates
};

Inspection inspect_model(const ModelConfig& config, const DraftLayout& drafts);

// Draft stages implied by config.json alone: DSpark -> 3 stages (0731 ships 3 while its raw
// num_nextn_predict_layers is 1; vLLM's default too), else num_nextn_predict_layers MTP stages.
DraftLayout draft_layout_from_config(const ModelConfig& config);

struct GpuFit {
    double gpu_gib = 0;
    double reserve_gib = 0;  // assumed runtime overhead: CUDA context, activations, workspaces (an estimate)
    double weights_gib = 0;
    bool fits = false;
    double free_gib = 0;  // for KV after weights, reserve and one sequence's fixed state
    // One sequence, fp8_ds_mla + FP8 indexer, capped at max_position_embeddings; -1 = cache does not grow.
    int64_t max_context_tokens_fp8 = 0;
    int64_t max_context_tokens_bf16 = 0;
    int min_gpus = 0;  // GPUs of this size needed for the weights alone (+ reserve each), expert-parallel split
};

GpuFit estimate_gpu_fit(const Inspection& inspection, double gpu_mem_gib, double reserve_gib = 4.0);

// "1,234,567".
std::string group_digits(uint64_t value);

// What `inspect` found when it checked the weights against the config.
struct ValidationSummary {
    enum class State : uint8_t { kSkipped, kOk, kFailed };
    State state = State::kSkipped;
    std::string text;                     // why it was skipped, the report, or the structural error
    std::optional<BindingReport> report;  // when the binding check ran
};

// Everything `dsv4 inspect --model DIR` shows: config.json parsed, the checkpoint (if DIR has weights) opened and
// validated (drafts then come from the weights, else from the config), the counts computed.
struct DirectoryInspection {
    ModelConfig config;
    Inspection inspection;
    std::optional<GpuFit> fit;
    ValidationSummary validation;
    std::optional<Fp8Inspection> fp8;  // FP8 checkpoints: the dialect of every FP8 tensor group and runtime site
};
// fp8_runtime: the --fp8-dialect whose runtime sites (weights in memory, activations, caches) are reported.
DirectoryInspection inspect_directory(const std::filesystem::path& dir, std::optional<double> gpu_mem_gib,
                                      Fp8Dialect fp8_runtime = Fp8Dialect::kOcp);

// Human-readable report; fit and validation are optional sections.
std::string inspection_text(const ModelConfig& config, const Inspection& inspection, const std::optional<GpuFit>& fit,
                            const std::optional<ValidationSummary>& validation);
nlohmann::json inspection_json(const ModelConfig& config, const Inspection& inspection,
                               const std::optional<GpuFit>& fit, const std::optional<ValidationSummary>& validation);

}  // namespace dsv4
