// Engine::create: checks the configuration, sizes the sequence state from the memory budget (kv/state_plan.h),
// loads the model on the device backend and starts the engine thread.
#include <filesystem>

#include "config/model_config.h"
#include "core/error.h"
#include "engine/capacity_plan.h"
#include "engine/device_registry.h"
#include "engine/engine_core.h"
#include "kv/state_plan.h"
#include "model/flash_preset.h"
#include "model/synthetic_routing.h"
#include "model/weights_loader.h"

namespace dsv4 {
namespace {

// Positions a slot can be rewound without recompute (speculative decoding); also how far past a block boundary a
// step may end and still save that boundary's prefix-cache snapshot.
constexpr int kRewindCapacity = 16;
constexpr uint64_t kSyntheticSeed = 1;  // synthetic weights: the same model on every run

void check_config(const EngineConfig& c) {
    DSV4_CHECK(c.max_num_seqs > 0, "max_num_seqs must be positive, got {}", c.max_num_seqs);
    DSV4_CHECK(c.max_num_batched_tokens > 0, "max_num_batched_tokens must be positive, got {}",
               c.max_num_batched_tokens);
    DSV4_CHECK(c.long_prefill_token_threshold >= 0, "long_prefill_token_threshold must be >= 0 (0 = no cap), got {}",
               c.long_prefill_token_threshold);
    DSV4_CHECK(c.max_model_len >= 0, "max_model_len must be >= 0 (0 = the model's), got {}", c.max_model_len);
    DSV4_CHECK(c.max_queued_requests >= 0 && c.max_queued_tokens >= 0, "queue limits must be >= 0");
    DSV4_CHECK(c.kv_cache_bytes >= 0, "kv_cache_bytes must be >= 0 (0 = automatic), got {}", c.kv_cache_bytes);
    DSV4_CHECK(c.block_tokens > 0, "block_tokens must be positive, got {}", c.block_tokens);
    DSV4_CHECK(c.num_prefix_snapshots >= -1, "num_prefix_snapshots must be >= -1 (-1 = automatic), got {}",
               c.num_prefix_snapshots);
    DSV4_CHECK(c.host_kv_cache_bytes >= 0 && c.disk_kv_cache_bytes >= 0, "KV tier sizes must be >= 0");
    DSV4_CHECK(c.expert_fetch_min_pairs >= 1, "--expert-fetch-min-pairs must be >= 1, got {}",
               c.expert_fetch_min_pairs);
    parse_routing_skew(c.synthetic_routing_skew);  // a malformed value fails before anything is loaded
    DSV4_CHECK(c.disk_kv_cache_dir.empty() || c.host_kv_cache_bytes > 0,
               "--disk-kv-cache needs --host-kv-cache-gib: the disk tier holds what the host pool evicts");
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
// on the backend itself (CPU) or on a CPU backend in the closest numerics (a GPU's fast numerics: reference).
void create_expert_tier(const EngineConfig& c, const CapacityPlan& capacity, HostExperts host_experts,
                        EngineParts& parts) {
    ModelOps* host_ops = parts.backend.get();
    if (c.device != "cpu") {
        const Numerics n = parse_numerics(c.numerics);
        parts.host_backend = make_cpu_backend(n == Numerics::kFast ? Numerics::kReference : n, c.threads);
        host_ops = parts.host_backend.get();
    }
    dist::ExpertCacheConfig cache;
    cache.layers = static_cast<int>(host_experts.size());
    cache.experts = capacity.weights.experts_per_layer;
    cache.slots = capacity.resident_experts;
    cache.min_pairs_to_fetch = c.expert_fetch_min_pairs;
    parts.expert_tier =
        std::make_unique<dist::ExpertTierMoe>(*parts.backend, *host_ops, std::move(host_experts), cache);
    parts.model->model->set_moe_dispatch(parts.expert_tier.get());
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
    // Where every byte goes, decided before anything is allocated (a model that does not fit fails here, naming the
    // flags that would make it fit).
    CapacityRequest capacity;
    capacity.numerics = parse_numerics(config.numerics);
    capacity.state_dtype = dtype;
    capacity.device = device.memory(config);
    capacity.host_available_bytes = available_host_bytes();
    capacity.max_num_seqs = config.max_num_seqs;
    capacity.block_tokens = config.block_tokens;
    capacity.rewind_capacity = kRewindCapacity;
    capacity.num_snapshots = config.enable_prefix_caching ? config.num_prefix_snapshots : 0;
    capacity.max_model_len = config.max_model_len;
    capacity.kv_cache_bytes = config.kv_cache_bytes;
    capacity.gpu_experts = config.gpu_experts;
    capacity.host_kv_cache_bytes = config.host_kv_cache_bytes;
    const CapacityPlan capacity_plan = plan_capacity(model_config, capacity);
    const StatePlan& plan = capacity_plan.state;
    const int64_t max_model_len = capacity_plan.max_model_len;
    EngineParts parts;
    parts.config = config;
    parts.config.max_model_len = static_cast<int>(std::min<int64_t>(max_model_len, INT32_MAX));
    parts.backend = device.create(config);
    // With the expert tier no routed expert is uploaded the usual way: all live in host memory, some cached.
    const bool tiered = capacity_plan.host_experts > 0;
    const ExpertResidency residency = tiered ? ExpertResidency([](int, int) { return false; }) : ExpertResidency{};
    HostExperts host_experts;
    parts.model = synthetic ? make_synthetic_model(model_config, *parts.backend, plan.state, kSyntheticSeed, residency,
                                                   parse_routing_skew(config.synthetic_routing_skew),
                                                   tiered ? &host_experts : nullptr)
                            : load_model(dir, *parts.backend, plan.state, residency);
    if (tiered) {
        if (!synthetic) host_experts = load_host_experts(model_config, *parts.model->bound, *parts.backend);
        create_expert_tier(config, capacity_plan, std::move(host_experts), parts);
    }
    parts.kv.max_slots = plan.state.max_slots;
    parts.kv.num_blocks = plan.state.num_blocks;
    parts.kv.block_tokens = plan.state.block_tokens;
    parts.kv.num_snapshots = plan.state.num_snapshots;
    parts.kv.rewind_capacity = plan.state.rewind_capacity;
    parts.kv.enable_prefix_caching = config.enable_prefix_caching;
    create_tiers(config, plan, *parts.backend, parts);
    parts.scheduler.max_num_seqs = config.max_num_seqs;
    parts.scheduler.max_num_batched_tokens = config.max_num_batched_tokens;
    parts.scheduler.long_prefill_token_threshold = config.long_prefill_token_threshold;
    parts.scheduler.max_model_len = parts.config.max_model_len;
    parts.scheduler.vocab_size = model_config.vocab_size;
    parts.scheduler.eos_token_ids = {model_config.eos_token_id};
    parts.scheduler.seed = config.seed;
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
