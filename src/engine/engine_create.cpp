// Engine::create: checks the configuration, sizes the sequence state from the memory budget (kv/state_plan.h),
// loads the model on the device backend and starts the engine thread.
#include <filesystem>

#include "config/model_config.h"
#include "core/error.h"
#include "engine/capacity_plan.h"
#include "engine/device_registry.h"
#include "engine/engine_core.h"
#include "engine/step_budget.h"
#include "kv/state_plan.h"
#include "model/flash_preset.h"
#include "model/synthetic_routing.h"
#include "model/tensor_spec.h"
#include "model/weights_loader.h"
#include "sample/spec_verify.h"
#include "spec/drafter.h"

namespace dsv4 {
namespace {

constexpr uint64_t kSyntheticSeed = 1;  // synthetic weights: the same model on every run

// The largest k: a verify step feeds k + 1 tokens per sequence, and steps of up to kMaxGraphTokensPerSeq are graphed.
constexpr int kMaxSpeculativeTokens = 15;

void check_speculative_config(const SpeculativeConfig& s) {
    if (!s.enabled()) return;
    DSV4_CHECK(s.method == "mtp" || s.method == "dspark", "speculative method '{}' is not supported (mtp | dspark)",
               s.method);
    DSV4_CHECK(s.num_speculative_tokens >= 1 && s.num_speculative_tokens <= kMaxSpeculativeTokens,
               "num_speculative_tokens must be in [1, {}], got {}", kMaxSpeculativeTokens, s.num_speculative_tokens);
    DSV4_CHECK(s.draft_sample_method == "greedy" || s.draft_sample_method == "probabilistic",
               "draft_sample_method '{}' is not supported (greedy | probabilistic)", s.draft_sample_method);
    parse_verify_method(s.rejection_sample_method);  // throws naming the accepted values
    DSV4_CHECK(s.disable_by_batch_size >= 0, "disable_by_batch_size must be >= 0 (0: never), got {}",
               s.disable_by_batch_size);
    DSV4_CHECK(s.confidence_threshold >= 0.0 && s.confidence_threshold < 1.0,
               "confidence_threshold must be in [0, 1), got {}", s.confidence_threshold);
    DSV4_CHECK(s.confidence_threshold == 0.0 || s.method == "dspark",
               "confidence_threshold needs DSpark's confidence head (method 'dspark')");
    DSV4_CHECK(s.oracle_acceptance_length == 0.0 ||
                   (s.oracle_acceptance_length >= 1.0 && s.oracle_acceptance_length <= s.num_speculative_tokens + 1.0),
               "oracle_acceptance_length must be 0 (off) or in [1, {}] for {} drafts, got {}",
               s.num_speculative_tokens + 1, s.num_speculative_tokens, s.oracle_acceptance_length);
}

void check_config(const EngineConfig& c) {
    DSV4_CHECK(c.max_num_seqs > 0, "max_num_seqs must be positive, got {}", c.max_num_seqs);
    DSV4_CHECK(c.max_num_batched_tokens >= 0, "max_num_batched_tokens must be >= 0 (0 = the device's default), got {}",
               c.max_num_batched_tokens);
    DSV4_CHECK(c.long_prefill_token_threshold >= -1,
               "long_prefill_token_threshold must be >= 0 (0 = no cap; -1 = the device's default), got {}",
               c.long_prefill_token_threshold);
    DSV4_CHECK(c.max_model_len >= 0, "max_model_len must be >= 0 (0 = the model's), got {}", c.max_model_len);
    DSV4_CHECK(c.max_queued_requests >= 0 && c.max_queued_tokens >= 0, "queue limits must be >= 0");
    DSV4_CHECK(c.kv_cache_bytes >= 0, "kv_cache_bytes must be >= 0 (0 = automatic), got {}", c.kv_cache_bytes);
    DSV4_CHECK(c.block_tokens > 0, "block_tokens must be positive, got {}", c.block_tokens);
    DSV4_CHECK(c.num_prefix_snapshots >= -1, "num_prefix_snapshots must be >= -1 (-1 = automatic), got {}",
               c.num_prefix_snapshots);
    // rewind_capacity: positions a slot can be truncated without recompute (speculative decoding's rejections);
    // also how far past a block boundary a step may end and still save that boundary's prefix-cache snapshot.
    DSV4_CHECK(c.rewind_capacity >= 0, "rewind_capacity must be >= 0, got {}", c.rewind_capacity);
    check_speculative_config(c.speculative);
    DSV4_CHECK(c.host_kv_cache_bytes >= 0 && c.disk_kv_cache_bytes >= 0, "KV tier sizes must be >= 0");
    DSV4_CHECK(c.expert_fetch_min_pairs >= 1, "--expert-fetch-min-pairs must be >= 1, got {}",
               c.expert_fetch_min_pairs);
    DSV4_CHECK(c.expert_read_in_place_tokens >= 0, "--expert-read-in-place-tokens must be >= 0, got {}",
               c.expert_read_in_place_tokens);
    DSV4_CHECK(c.expert_read_in_place_tokens == 0 || c.gpu_experts >= 0,
               "--expert-read-in-place-tokens needs --gpu-experts: it says how the expert tier uses host experts");
    parse_routing_skew(c.synthetic_routing_skew);  // a malformed value fails before anything is loaded
    DSV4_CHECK(c.disk_kv_cache_dir.empty() || c.host_kv_cache_bytes > 0,
               "--disk-kv-cache needs --host-kv-cache-gib: the disk tier holds what the host pool evicts");
}

// Draft-stage rings a speculative method keeps per slot (none without speculation).
int draft_state_stages(const SpeculativeConfig& spec, const ModelConfig& model) {
    return spec.enabled() ? draft_state_stages(spec.method, model) : 0;
}

// The runner's drafter and verification method (null drafter: no speculative decoding).
void make_speculation(const SpeculativeConfig& spec, bool enforce_eager, EngineParts& parts) {
    if (!spec.enabled()) return;
    DraftOptions options;
    options.enforce_eager = enforce_eager;
    options.num_speculative_tokens = spec.num_speculative_tokens;
    options.probabilistic = spec.draft_sample_method == "probabilistic";
    options.confidence_threshold = spec.confidence_threshold;
    parts.drafter = make_drafter(spec.method, *parts.model->model, std::move(parts.model->drafts), options);
    parts.verify_method = parse_verify_method(spec.rejection_sample_method);
    if (spec.oracle_acceptance_length > 0.0)
        parts.oracle_alpha = oracle_acceptance_rate(spec.oracle_acceptance_length, spec.num_speculative_tokens);
}

constexpr int64_t kDefaultDiskBytes = int64_t{64} << 30;

// The host pool and the disk tier of the prefix cache, when asked for (and prefix caching is on).
void create_tiers(const EngineConfig& c, const StatePlan& plan, Backend& backend, EngineParts& parts) {
    if (c.host_kv_cache_bytes == 0 || !c.enable_prefix_caching) return;
    KvTierConfig t = host_tier_config(c.host_kv_cache_bytes, plan.layout);
    DSV4_CHECK(t.host_blocks > 0,
               "--host-kv-cache-gib: {} bytes cannot hold one block ({} bytes) and one boundary "
               "snapshot ({} bytes) of this model's state",
               c.host_kv_cache_bytes, plan.layout.block_bytes, plan.layout.snapshot_bytes);
    DSV4_CHECK(plan.state.num_snapshots > 0,
               "--host-kv-cache-gib needs boundary snapshots on the device, and the state plan left room for none "
               "(raise the state budget)");
    t.disk_dir = c.disk_kv_cache_dir;
    t.disk_bytes = c.disk_kv_cache_bytes > 0 ? c.disk_kv_cache_bytes : kDefaultDiskBytes;
    t.fingerprint = state_layout_fingerprint(plan.layout, plan.state.block_tokens);
    parts.tier_memory = backend.allocate_host_buffer(t.host_bytes());
    parts.tiers = std::make_unique<KvTiers>(t, parts.tier_memory.span());
}

std::string model_name(const std::string& dir) {
    std::filesystem::path p = std::filesystem::path(dir).lexically_normal();
    if (p.filename().empty()) p = p.parent_path();
    return p.filename().string();
}

// The expert tier (--gpu-experts below the model's routed experts): the cache's slots on the device, the host pairs
// on the backend itself (CPU) or on a CPU backend (dist::host_pairs_numerics). Made
// before the weights: the loaders hand it every routed expert.
void create_expert_tier(const EngineConfig& c, const CapacityPlan& capacity, int layers, EngineParts& parts) {
    ModelOps* host_ops = parts.backend.get();
    if (c.device != "cpu") {
        const Numerics n = parse_numerics(c.numerics);
        parts.host_backend = make_cpu_backend(dist::host_pairs_numerics(n), c.threads);
        host_ops = parts.host_backend.get();
    }
    dist::ExpertCacheConfig cache;
    cache.layers = layers;
    cache.experts = capacity.weights.experts_per_layer;
    cache.slots = capacity.resident_experts;
    cache.min_pairs_to_fetch = c.expert_fetch_min_pairs;
    cache.read_in_place_max_tokens = c.expert_read_in_place_tokens;
    parts.expert_tier = std::make_unique<dist::ExpertTierMoe>(*parts.backend, *host_ops, cache);
}

}  // namespace

ModelConfig engine_model_config(const EngineConfig& config) {
    if (!config.synthetic_preset.empty()) {
        DSV4_CHECK(config.synthetic_layers >= 0, "synthetic_layers must be >= 0, got {}", config.synthetic_layers);
        return flash_preset_config(config.synthetic_preset, config.synthetic_layers);
    }
    const std::filesystem::path dir(config.model_dir);
    DSV4_CHECK(std::filesystem::is_directory(dir), "model directory '{}' does not exist", config.model_dir);
    return load_model_config(dir / "config.json");
}

std::unique_ptr<Engine> Engine::create(const EngineConfig& config) {
    check_config(config);
    const DeviceBackend& device = find_device_backend(config.device);
    const std::filesystem::path dir(config.model_dir);
    const bool synthetic = !config.synthetic_preset.empty();
    const ModelConfig model_config = engine_model_config(config);
    DSV4_CHECK(config.max_model_len <= model_config.max_position_embeddings,
               "max_model_len {} exceeds the model's "
               "max_position_embeddings {}",
               config.max_model_len, model_config.max_position_embeddings);

    const StateDtype dtype = device.state_dtype(config);
    // Speculative decoding's draft stages keep rings of their own in every slot: the state is planned for the model
    // with those extra state layers.
    const DraftLoad drafts{draft_state_stages(config.speculative, model_config)};
    const ModelConfig state_config = config_with_draft_state(model_config, drafts.state_stages);
    // Where every byte goes, decided before anything is allocated (a model that does not fit fails here, naming the
    // flags that would make it fit).
    CapacityRequest capacity;
    capacity.numerics = parse_numerics(config.numerics);
    capacity.state_dtype = dtype;
    capacity.device = device.memory(config);
    capacity.host_available_bytes = available_host_bytes();
    capacity.max_num_seqs = config.max_num_seqs;
    capacity.block_tokens = config.block_tokens;
    capacity.rewind_capacity = config.rewind_capacity;
    capacity.num_snapshots = config.enable_prefix_caching ? config.num_prefix_snapshots : 0;
    capacity.max_model_len = config.max_model_len;
    capacity.kv_cache_bytes = config.kv_cache_bytes;
    capacity.gpu_experts = config.gpu_experts;
    capacity.host_kv_cache_bytes = config.host_kv_cache_bytes;
    const CapacityPlan capacity_plan = plan_capacity(state_config, capacity);
    const StatePlan& plan = capacity_plan.state;
    const int64_t max_model_len = std::min<int64_t>(capacity_plan.max_model_len, model_config.max_position_embeddings);
    EngineParts parts;
    parts.config = config;
    parts.config.max_model_len = static_cast<int>(std::min<int64_t>(max_model_len, INT32_MAX));
    parts.backend = device.create(config);
    // With the expert tier no routed expert is uploaded the usual way: each is handed to the tier, which keeps it in
    // host memory or moves it into a slot.
    const bool tiered = capacity_plan.host_experts > 0;
    const ExpertResidency residency = tiered ? ExpertResidency([](int, int) { return false; }) : ExpertResidency{};
    if (tiered) create_expert_tier(config, capacity_plan, model_config.num_layers, parts);
    parts.model =
        synthetic ? make_synthetic_model(model_config, *parts.backend, plan.state, kSyntheticSeed, residency, drafts,
                                         parse_routing_skew(config.synthetic_routing_skew), parts.expert_tier.get())
                  : load_model(dir, *parts.backend, plan.state, residency, drafts);
    if (tiered) {
        if (!synthetic) load_host_experts(model_config, *parts.model->bound, *parts.backend, *parts.expert_tier);
        parts.expert_tier->finish_loading();
        parts.model->model->set_moe_dispatch(parts.expert_tier.get());
    }
    make_speculation(config.speculative, config.enforce_eager, parts);
    parts.kv.max_slots = plan.state.max_slots;
    parts.kv.num_blocks = plan.state.num_blocks;
    parts.kv.block_tokens = plan.state.block_tokens;
    parts.kv.num_snapshots = plan.state.num_snapshots;
    parts.kv.rewind_capacity = plan.state.rewind_capacity;
    parts.kv.enable_prefix_caching = config.enable_prefix_caching;
    create_tiers(config, plan, *parts.backend, parts);
    parts.scheduler.max_num_seqs = config.max_num_seqs;
    const StepBudget budget = resolve_step_budget(config);
    parts.scheduler.max_num_batched_tokens = budget.max_num_batched_tokens;
    parts.scheduler.long_prefill_token_threshold = budget.long_prefill_token_threshold;
    parts.scheduler.max_model_len = parts.config.max_model_len;
    parts.scheduler.vocab_size = model_config.vocab_size;
    parts.scheduler.eos_token_ids = {model_config.eos_token_id};
    parts.scheduler.seed = config.seed;
    parts.scheduler.num_speculative_tokens =
        config.speculative.enabled() ? config.speculative.num_speculative_tokens : 0;
    parts.scheduler.spec_disable_batch_size = config.speculative.disable_by_batch_size;
    parts.info.name = model_name(config.model_dir);
    parts.info.vocab_size = model_config.vocab_size;
    parts.info.max_model_len = parts.config.max_model_len;
    parts.info.eos_token_ids = {static_cast<int32_t>(model_config.eos_token_id)};
    parts.info.bos_token_id = static_cast<int32_t>(model_config.bos_token_id);
    parts.info.cache.block_size = plan.state.block_tokens;
    parts.info.cache.cache_dtype = std::string(state_dtype_name(dtype));
    parts.info.cache.num_blocks = plan.state.num_blocks;
    parts.info.cache.num_slots = plan.state.max_slots;
    parts.info.cache.enable_prefix_caching = config.enable_prefix_caching;
    parts.info.cache.gpu_memory_utilization = config.device == "cuda" ? config.gpu_memory_utilization : 0.0;
    parts.info.cache.state_bytes = plan.total_bytes;
    parts.info.cache.memory_plan = capacity_plan.summary();
    return std::make_unique<EngineCore>(std::move(parts));
}

}  // namespace dsv4
