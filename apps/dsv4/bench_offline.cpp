// `dsv4 bench offline`: decode and prefill throughput of a synthetic DeepSeek-V4-Flash-shaped model made directly in
// device memory (real formats, random values), next to the device ceilings measured in the same run, with the
// achieved fraction of the roofline, a per-component time breakdown and the kernel launches per decode step.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/tensor_reads.h"
#include "backend_options.h"
#include "bench_oracle.h"
#include "bench_registry.h"
#include "bench_weights.h"
#include "core/error.h"
#include "dist/expert_tier_moe.h"
#include "engine/capacity_plan.h"
#include "engine/device_registry.h"
#include "engine/step_budget.h"
#include "model/deepseek_v4.h"
#include "model/flash_preset.h"
#include "model/model_loader.h"
#include "model/synthetic_presets.h"
#include "model/synthetic_routing.h"
#include "model/tensor_spec.h"
#include "runtime/step_graphs.h"
#include "server/speculative_cli.h"
#include "state/state_format.h"
#ifdef DSV4_WITH_CUDA
#include "backend/cuda/cuda_factory.h"
#endif

namespace dsv4::cli {

WeightBytes weight_bytes(const ModelConfig& c) {
    WeightBytes w;
    double expert_bytes_all = 0.0, expert_params_all = 0.0;
    for (const TensorSpec& s : expected_tensors(c)) {
        const double n =
            static_cast<double>(std::accumulate(s.shape.begin(), s.shape.end(), int64_t{1}, std::multiplies<>()));
        const double bytes = n * dtype_bits(s.dtype) / 8.0;
        if (s.component == Component::kEmbedding) continue;
        if (s.component == Component::kRoutedExperts) {
            expert_bytes_all += bytes;
            expert_params_all += static_cast<double>(s.params);
            continue;
        }
        w.non_expert += bytes;
        w.active_params += static_cast<double>(s.params);
    }
    const double experts = static_cast<double>(c.n_routed_experts) * c.num_layers;
    w.per_expert = expert_bytes_all / experts;
    w.active_params += expert_params_all / experts * c.n_experts_per_tok * c.num_layers;
    return w;
}

namespace {

struct OfflineOptions {
    std::string preset = "flash";
    int layers = 0;
    int experts = 0;
    std::string device = "cuda";
    std::string numerics = "exact";
    std::string kv_cache_dtype = "fp8";
    std::string fp8_dialect;
    std::vector<int> batches{1, 8, 64};
    std::vector<int64_t> contexts{1024, 8192};
    std::vector<int64_t> prefills{1024, 8192};
    int64_t prefill_chunk = 0;  // 0: the engine's default token budget on the device (engine/step_budget.h)
    int steps = 8;
    std::string json_out;
    uint64_t seed = 1;
    bool enforce_eager = false;      // decode steps without CUDA graphs
    std::string speculative_config;  // oracle mode (bench_oracle.h) when set
    std::string model_dir;           // oracle mode: a checkpoint instead of synthetic weights
    std::vector<double> oracle_acceptance{2.5, 3.0, 5.6};
    double gpu_memory_utilization = 0.95;
    std::string routing_skew;  // Zipf exponent(s) of expert popularity (model/synthetic_routing.h)
    int gpu_experts = -1;      // expert tier: routed experts per layer on the device (-1 = all)
    int expert_fetch_min_pairs = 1;
    int64_t expert_read_in_place_tokens = 0;
};

// flash / flash-0731 / flash-160 (model/flash_preset.h), or a `make-model` preset (tiny, tiny-mtp, mid, ...).
ModelConfig preset_config(const OfflineOptions& o) {
    if (o.preset.rfind("flash", 0) == 0) return flash_preset_config(o.preset, o.layers, o.experts);
    SyntheticModel m = synthetic_preset(o.preset);
    truncate_synthetic_model(m, o.layers > 0 ? std::optional<int>(o.layers) : std::nullopt,
                             o.experts > 0 ? std::optional<int>(o.experts) : std::nullopt);
    return parse_model_config(m.config);
}

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// State bytes a decode token reads at context `ctx` with rows and indexer keys stored as `dtype`.
double state_bytes_per_token(const ModelConfig& c, StateDtype dtype, int64_t ctx) {
    const auto row = static_cast<double>(kv_row_format(dtype, c, kOcpQuant).bytes());  // same in both dialects
    const auto index_row = static_cast<double>(index_key_format(dtype, c, kOcpQuant).bytes());
    double bytes = 0.0;
    for (const LayerConfig& l : c.layers) {
        bytes += std::min<int64_t>(ctx, c.sliding_window) * row;
        if (l.attention == AttentionType::kCsa) {
            const double entries = static_cast<double>(ctx / l.compress_ratio);
            bytes += std::min<double>(entries, c.index_topk) * row + entries * index_row;
        } else if (l.attention == AttentionType::kHca) {
            bytes += static_cast<double>(ctx / l.compress_ratio) * row;
        }
    }
    return bytes;
}

std::vector<int32_t> block_table(int slot, int blocks_per_slot) {
    std::vector<int32_t> t(blocks_per_slot);
    std::iota(t.begin(), t.end(), slot * blocks_per_slot);
    return t;
}

struct Setup {
    ModelConfig config;
    std::unique_ptr<Backend> backend;
    std::unique_ptr<LoadedModel> loaded;    // synthetic: no checkpoint, only the model
    std::unique_ptr<StepGraphs> graphs;     // decode steps as the engine runs them (graphs unless --enforce-eager)
    std::unique_ptr<Backend> host_backend;  // --gpu-experts: the host pairs' CPU backend
    std::unique_ptr<dist::ExpertTierMoe> expert_tier;  // --gpu-experts: host-resident experts
    int blocks_per_slot = 0;
    DeepseekV4& model() { return *loaded->model; }
    // One step as the engine runs it for greedy requests: the argmax of each logits row chosen on the backend and the
    // ids copied to the host (runtime/step_logits.h).
    // One step as the engine runs it, the expert tier's work between steps included.
    void step(const StepBatch& batch) {
        read_argmax_rows(model().backend(), graphs->forward(batch).logits);
        if (expert_tier) expert_tier->end_step();
    }
};

// The capacity plan of the benchmark's state (max_batch slots, the blocks of max_context tokens each) before anything
// is allocated: a model that cannot fit fails here with the bytes and the flags, not in cudaMalloc.
void check_capacity(const OfflineOptions& o, const ModelConfig& config, const StateConfig& state) {
    EngineConfig engine = cli_engine_config(o.device, o.numerics, 0, o.fp8_dialect);  // make_cli_backend's
    engine.synthetic_preset = o.preset;
    engine.gpu_memory_utilization = o.gpu_memory_utilization;
    const StateLayout layout = compute_state_layout(config, state.block_tokens, state.rewind_capacity, state.kv_dtype);
    CapacityRequest r;
    r.numerics = parse_numerics(o.numerics);
    r.state_dtype = state.kv_dtype;
    r.device = find_device_backend(o.device).memory(engine);
    r.host_available_bytes = available_host_bytes();
    r.max_num_seqs = state.max_slots;
    r.block_tokens = state.block_tokens;
    r.rewind_capacity = state.rewind_capacity;
    r.num_snapshots = 0;
    r.kv_cache_bytes = state.max_slots * layout.slot_bytes + int64_t{state.num_blocks} * layout.block_bytes + 1;
    r.gpu_experts = o.gpu_experts;
    try {
        std::fprintf(stderr, "%s\n", plan_capacity(config, r).summary().c_str());
    } catch (const Error& e) {
        fail(
            "{} (bench offline: the state is --batch's largest value in slots and --context's largest in tokens "
            "per slot; the utilization is --gpu-memory-utilization)",
            e.what());
    }
}

// --gpu-experts: o.gpu_experts routed experts of each layer in the device's cache, the others in pinned host memory,
// host pairs on a CPU backend (dist::host_pairs_numerics). Made before the model: the synthetic
// builder hands it every expert.
void make_expert_tier(const OfflineOptions& o, Setup& s) {
    const Numerics n = parse_numerics(o.numerics);
    s.host_backend = make_cpu_backend(dist::host_pairs_numerics(n), 0);
    dist::ExpertCacheConfig cache;
    cache.layers = s.config.num_layers;
    cache.experts = s.config.n_routed_experts;
    cache.slots = o.gpu_experts;
    cache.min_pairs_to_fetch = o.expert_fetch_min_pairs;
    cache.read_in_place_max_tokens = o.expert_read_in_place_tokens;
    s.expert_tier = std::make_unique<dist::ExpertTierMoe>(*s.backend, *s.host_backend, cache);
}

Setup build(const OfflineOptions& o, int max_batch, int64_t max_context) {
    Setup s;
    s.config = preset_config(o);
    s.backend = make_cli_backend(o.device, o.numerics, 0, o.fp8_dialect);
    StateConfig state;
    state.max_slots = max_batch;
    state.block_tokens = 256;
    state.rewind_capacity = 8;
    state.kv_dtype = parse_state_dtype(o.kv_cache_dtype);
    s.blocks_per_slot = static_cast<int>((max_context + 1024 + 255) / 256);
    state.num_blocks = s.blocks_per_slot * max_batch;
    check_capacity(o, s.config, state);
    const auto t0 = Clock::now();
    const bool tiered = o.gpu_experts >= 0 && o.gpu_experts < s.config.n_routed_experts;
    DSV4_CHECK(o.expert_read_in_place_tokens == 0 || o.gpu_experts >= 0,
               "--expert-read-in-place-tokens needs --gpu-experts: it says how the expert tier uses host experts");
    if (tiered) make_expert_tier(o, s);
    s.loaded = make_synthetic_model(s.config, *s.backend, state, o.seed,  // state sized after the weights
                                    tiered ? ExpertResidency([](int, int) { return false; }) : ExpertResidency{}, {},
                                    parse_routing_skew(o.routing_skew), s.expert_tier.get());
    if (tiered) {
        s.expert_tier->finish_loading();
        s.model().set_moe_dispatch(s.expert_tier.get());
    }
    s.graphs = std::make_unique<StepGraphs>(s.model(), o.enforce_eager);
    std::fprintf(stderr, "%s\n", s.backend->memory_report().c_str());
    std::fprintf(stderr, "synthetic %s model (%d layers, %d experts) built in %.1f s\n", o.preset.c_str(),
                 s.config.num_layers, s.config.n_routed_experts, seconds_since(t0));
    return s;
}

// The most of the device's step scratch the run's steps used (MiB; 0 on the CPU): what --cuda-workspace-mib must cover
// for the batch or chunk.
double workspace_mib(const Backend& b) {
    return static_cast<double>(b.workspace_high_water_bytes()) / (1 << 20);
}

nlohmann::json decode_run(Setup& s, int batch, int64_t ctx, int steps, const WeightBytes& wb, double copy_tbps) {
    Backend& b = *s.backend;
    for (int i = 0; i < batch; ++i) {
        b.reset_slot(i);
        b.synthetic_context(i, ctx, block_table(i, s.blocks_per_slot), 7 + i);
    }
    auto step_batch = [&](int64_t pos) {
        StepBatch sb;
        for (int i = 0; i < batch; ++i) {
            const int32_t token = static_cast<int32_t>((pos * 31 + i * 977) % s.config.vocab_size);
            sb.add_sequence(i, pos, std::span(&token, 1), block_table(i, s.blocks_per_slot));
            sb.logit_rows.push_back(i);
        }
        return sb;
    };
    b.reset_workspace_high_water();
    for (int w = 0; w < 2; ++w) s.step(step_batch(ctx + w));  // warm-up (and graph recording)
    const int64_t launches0 = b.launches(), nodes0 = b.graph_nodes_replayed();
    const auto t0 = Clock::now();
    for (int i = 0; i < steps; ++i) s.step(step_batch(ctx + 2 + i));
    const double step_s = seconds_since(t0) / steps;
    const double launches = static_cast<double>(b.launches() - launches0) / steps;
    // GPU work items per step: kernels launched eagerly plus the nodes of replayed graphs.
    const double nodes = launches + static_cast<double>(b.graph_nodes_replayed() - nodes0) / steps;
    b.set_profiling(true);
    s.step(step_batch(ctx + 2 + steps));
    auto regions = b.profile(true);
    b.set_profiling(false);
    const double experts_touched =
        s.config.n_routed_experts *
        (1.0 - std::pow(1.0 - static_cast<double>(s.config.n_experts_per_tok) / s.config.n_routed_experts, batch));
    const double bytes = wb.non_expert + wb.per_expert * experts_touched * s.config.num_layers +
                         batch * state_bytes_per_token(s.config, s.backend->state_config().kv_dtype, ctx);
    const double roofline_s = bytes / (copy_tbps * 1e12);
    nlohmann::json r = {{"batch", batch},
                        {"context", ctx},
                        {"step_ms", step_s * 1e3},
                        {"tok_per_s", batch / step_s},
                        {"bytes_per_step", bytes},
                        {"roofline_tok_per_s", batch / roofline_s},
                        {"roofline_fraction", roofline_s / step_s},
                        {"launches_per_step", launches},
                        {"nodes_per_step", nodes},
                        {"nodes_per_layer", nodes / s.config.num_layers},
                        {"workspace_high_water_mib", workspace_mib(b)}};
    nlohmann::json br = nlohmann::json::object();
    for (const auto& [name, ms] : regions) br[name] = ms;
    r["breakdown_ms"] = br;
    return r;
}

nlohmann::json prefill_run(Setup& s, int64_t prompt, int64_t chunk, const WeightBytes& wb, double gemm_tflops) {
    std::vector<int32_t> tokens(prompt);
    for (int64_t i = 0; i < prompt; ++i) tokens[i] = static_cast<int32_t>((i * 7919) % s.config.vocab_size);
    auto run = [&](bool profiled) {
        s.backend->reset_slot(0);
        for (int64_t begin = 0; begin < prompt; begin += chunk) {
            StepBatch sb;
            const int64_t len = std::min(chunk, prompt - begin);
            sb.add_sequence(0, begin, std::span(tokens).subspan(begin, len), block_table(0, s.blocks_per_slot));
            sb.logit_rows.push_back(static_cast<int32_t>(len - 1));
            s.step(sb);
            if (profiled) s.backend->profile(false);  // accumulates this chunk's regions
        }
    };
    s.backend->reset_workspace_high_water();
    run(false);  // warm-up
    const auto t0 = Clock::now();
    run(false);
    const double secs = seconds_since(t0);
    s.backend->set_profiling(true);  // a third, profiled pass for the breakdown (its time is not reported)
    run(true);
    auto regions = s.backend->profile(true);
    s.backend->set_profiling(false);
    nlohmann::json br = nlohmann::json::object();
    for (const auto& [name, ms] : regions) br[name] = ms;
    const double flops = 2.0 * wb.active_params * prompt;  // GEMM work; attention/indexer FLOPs are extra
    return {{"prompt", prompt},    {"chunk", chunk},
            {"seconds", secs},     {"tok_per_s", prompt / secs},
            {"gemm_flops", flops}, {"compute_fraction", flops / secs / (gemm_tflops * 1e12)},
            {"breakdown_ms", br},  {"workspace_high_water_mib", workspace_mib(*s.backend)}};
}

void print_breakdown(const nlohmann::json& r) {
    std::printf("       breakdown ms:");
    for (const auto& [k, v] : r["breakdown_ms"].items()) std::printf(" %s %.2f", k.c_str(), v.get<double>());
    std::printf("\n");
}

void run_oracle_mode(const OfflineOptions& o) {
    OracleOptions oracle;
    oracle.speculative = server::parse_speculative_config(o.speculative_config);
    oracle.acceptance_lengths = o.oracle_acceptance;
    oracle.batches = o.batches;
    oracle.context = o.contexts.empty() ? 256 : o.contexts.front();
    oracle.steps = o.steps;
    oracle.prefill_chunk = o.prefill_chunk;
    oracle.seed = o.seed;
    oracle.enforce_eager = o.enforce_eager;
    oracle.model_dir = o.model_dir;
    oracle.check_capacity = [&o](const ModelConfig& c, const StateConfig& state) { check_capacity(o, c, state); };
    const ModelConfig config =
        o.model_dir.empty() ? preset_config(o) : load_model_config(std::filesystem::path(o.model_dir) / "config.json");
    auto backend = make_cli_backend(o.device, o.numerics, 0, o.fp8_dialect);
    const std::string model = o.model_dir.empty() ? o.preset : o.model_dir;
    std::printf("oracle speculative decoding: %s, k = %d, model %s (%d layers, %d experts), context %lld\n",
                oracle.speculative.method.c_str(), oracle.speculative.num_speculative_tokens, model.c_str(),
                config.num_layers, config.n_routed_experts, static_cast<long long>(oracle.context));
    const nlohmann::json out = {{"model", model},
                                {"method", oracle.speculative.method},
                                {"num_speculative_tokens", oracle.speculative.num_speculative_tokens},
                                {"context", oracle.context},
                                {"device", o.device},
                                {"numerics", o.numerics},
                                {"oracle", run_oracle(config, *backend, oracle)}};
    if (!o.json_out.empty()) std::ofstream(o.json_out) << out.dump(2) << "\n";
}

// --prefill-chunk's default: the engine's token budget on the device, so a prompt prefills in the server's steps.
int64_t default_prefill_chunk(const OfflineOptions& o) {
    EngineConfig c;
    c.device = o.device;
    c.gpu_experts = o.gpu_experts;
    return default_step_tokens(c);
}

void run(const OfflineOptions& o) {
    if (!o.speculative_config.empty()) {
        run_oracle_mode(o);
        return;
    }
    double copy_tbps = 4.3, gemm_tflops = 790.0;
    nlohmann::json out;
#ifdef DSV4_WITH_CUDA
    if (o.device == "cuda") {
        DeviceCeilings ceilings = measure_device_ceilings();
        copy_tbps = ceilings.copy_tb_per_s;
        gemm_tflops = ceilings.bf16_gemm_tflops;
        out["device"] = ceilings.device_name;
        std::printf("device %s: copy %.2f TB/s (read+write), bf16 GEMM %.0f TFLOP/s, free %.1f GiB\n",
                    ceilings.device_name.c_str(), copy_tbps, gemm_tflops, ceilings.free_bytes / 1073741824.0);
        if (o.gpu_experts >= 0) {  // the expert tier's ceilings, measured before the model takes the memory
            const PcieCeilings pcie = measure_pcie_ceilings();
            out["pcie_copy_gb_per_s"] = pcie.copy_gb_per_s;
            out["pcie_read_in_place_gb_per_s"] = pcie.read_in_place_gb_per_s;
            std::printf("PCIe host -> device: copy %.1f GB/s, kernels reading host memory in place %.1f GB/s\n",
                        pcie.copy_gb_per_s, pcie.read_in_place_gb_per_s);
        }
    }
#endif
    out["copy_tb_per_s"] = copy_tbps;
    out["bf16_gemm_tflops"] = gemm_tflops;
    const int max_batch = *std::max_element(o.batches.begin(), o.batches.end());
    int64_t max_ctx = 0;
    for (int64_t c : o.contexts) max_ctx = std::max(max_ctx, c);
    for (int64_t p : o.prefills) max_ctx = std::max(max_ctx, p);
    Setup s = build(o, max_batch, max_ctx);
    const WeightBytes wb = weight_bytes(s.config);
    out["config"] = {{"preset", o.preset},
                     {"layers", s.config.num_layers},
                     {"experts", s.config.n_routed_experts},
                     {"numerics", o.numerics},
                     {"kv_cache_dtype", o.kv_cache_dtype},
                     {"routing_skew", o.routing_skew.empty() ? "0" : o.routing_skew},
                     {"fp8_dialect", fp8_dialect_name(s.backend->fp8_dialect())}};
    std::printf("%-6s %-8s %10s %10s %12s %9s %9s %11s\n", "batch", "context", "step ms", "tok/s", "roofline",
                "fraction", "launches", "nodes/layer");
    for (int64_t ctx : o.contexts) {
        for (int batch : o.batches) {
            nlohmann::json r = decode_run(s, batch, ctx, o.steps, wb, copy_tbps);
            std::printf("%-6d %-8lld %10.2f %10.1f %12.1f %8.1f%% %9.0f %11.1f\n", batch, static_cast<long long>(ctx),
                        r["step_ms"].get<double>(), r["tok_per_s"].get<double>(), r["roofline_tok_per_s"].get<double>(),
                        100.0 * r["roofline_fraction"].get<double>(), r["launches_per_step"].get<double>(),
                        r["nodes_per_layer"].get<double>());
            print_breakdown(r);
            out["decode"].push_back(r);
        }
    }
    for (int64_t p : o.prefills) {
        if (p <= 0) continue;
        nlohmann::json r = prefill_run(s, p, std::min(o.prefill_chunk, p), wb, gemm_tflops);
        std::printf("prefill %lld tokens (chunk %lld): %.3f s, %.0f tok/s, GEMM compute fraction %.1f%%\n",
                    static_cast<long long>(p), r["chunk"].get<long long>(), r["seconds"].get<double>(),
                    r["tok_per_s"].get<double>(), 100.0 * r["compute_fraction"].get<double>());
        print_breakdown(r);
        out["prefill"].push_back(r);
    }
    if (s.expert_tier) {
        const dist::ExpertCacheStats& c = s.expert_tier->cache().stats();
        const dist::ExpertTierStats& t = s.expert_tier->stats();
        out["expert_tier"] = {{"gpu_experts", o.gpu_experts},
                              {"hit_rate", c.hit_rate()},
                              {"pairs", c.pairs},
                              {"host_pairs", c.host_pairs},
                              {"in_place_pairs", c.in_place_pairs},
                              {"in_place_pair_bytes", t.in_place_pair_bytes},
                              {"read_in_place_tokens", o.expert_read_in_place_tokens},
                              {"fetched_bytes", t.fetched_bytes},
                              {"written_back_bytes", t.written_back_bytes},
                              {"host_expert_bytes", s.expert_tier->host_bytes()},
                              {"activation_bytes", t.activation_bytes}};
        std::printf(
            "expert tier (%d per layer on the device, %.2f GiB of experts in host memory): hit rate %.3f, %lld of "
            "%lld pairs on the host, %lld read in place (%.2f GB at most), %.2f GB fetched, %.2f GB written back, "
            "%.2f GB of activations\n",
            o.gpu_experts, s.expert_tier->host_bytes() / 1073741824.0, c.hit_rate(),
            static_cast<long long>(c.host_pairs), static_cast<long long>(c.pairs),
            static_cast<long long>(c.in_place_pairs), t.in_place_pair_bytes / 1e9, t.fetched_bytes / 1e9,
            t.written_back_bytes / 1e9, t.activation_bytes / 1e9);
    }
    if (!o.json_out.empty()) std::ofstream(o.json_out) << out.dump(2) << "\n";
}

const BenchmarkRegistrar kRegistrar{
    "offline", "Decode/prefill throughput of a synthetic full-size model (no checkpoint needed)", [](CLI::App& app) {
        auto o = std::make_shared<OfflineOptions>();
        app.add_option("--preset", o->preset,
                       "flash | flash-0731 | flash-160 (160 experts), or a make-model preset (mid, tiny-mtp, ...)");
        app.add_option("--layers", o->layers, "Truncate to L layers (0 = all)");
        app.add_option("--experts", o->experts, "Routed experts (0 = the preset's)");
        app.add_option("--device", o->device, "cuda | cpu");
        app.add_option("--numerics", o->numerics, "exact | reference | fast");
        app.add_option("--kv-cache-dtype", o->kv_cache_dtype, "K=V rows and indexer keys: fp8 | bf16 | f32");
        add_fp8_dialect_option(app, o->fp8_dialect);
        app.add_option("--batch", o->batches, "Decode batch sizes")->delimiter(',');
        app.add_option("--context", o->contexts, "Decode context lengths")->delimiter(',');
        app.add_option("--prefill", o->prefills, "Prefill prompt lengths (empty: none)")->delimiter(',');
        app.add_option("--prefill-chunk", o->prefill_chunk,
                       "Prefill chunk size (0 = the engine's token budget: 8192 on cuda, 2048 on cpu or with "
                       "--gpu-experts)")
            ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
        app.add_option("--steps", o->steps, "Timed decode steps per point");
        app.add_option("--json", o->json_out, "Write the results as JSON");
        app.add_option("--seed", o->seed, "Weight seed");
        app.add_option("--gpu-memory-utilization", o->gpu_memory_utilization, "Fraction of GPU memory to use")
            ->check(CLI::Range(0.05, 1.0));
        app.add_option("--gpu-experts", o->gpu_experts,
                       "Routed experts per layer on the device; the others in pinned host memory (-1 = all)");
        app.add_option("--expert-fetch-min-pairs", o->expert_fetch_min_pairs,
                       "With --gpu-experts: host experts with fewer pairs in a step run on the host CPU")
            ->check(CLI::Range(1, 1 << 30));
        app.add_option("--expert-read-in-place-tokens", o->expert_read_in_place_tokens,
                       "With --gpu-experts: steps of at most N tokens read host experts in place over PCIe (graphs); "
                       "0 = never")
            ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
        app.add_option("--synthetic-routing-skew", o->routing_skew,
                       "Zipf exponent of expert popularity (S, or S0,S1,... per layer; 0 / empty = even routing)");
        app.add_flag("--enforce-eager", o->enforce_eager, "Run decode steps eagerly (no CUDA graphs)");
        app.add_option(
            "--speculative-config", o->speculative_config,
            "Oracle speculative decoding (vLLM's JSON, e.g. {\"method\":\"mtp\",\"num_speculative_tokens\":3}): "
            "drafts are the target's greedy continuation, accepted per token with the probability giving "
            "each --oracle-acceptance length; the first --context is prefilled for real");
        app.add_option("--oracle-acceptance", o->oracle_acceptance, "Oracle tokens per verify step (default 2.5,3,5.6)")
            ->delimiter(',');
        app.add_option("--model", o->model_dir,
                       "Oracle mode: a checkpoint with draft stages instead of synthetic weights (e.g. models/demo; "
                       "the CPU backend makes no synthetic weights)");
        app.callback([o] {
            if (o->prefill_chunk == 0) o->prefill_chunk = default_prefill_chunk(*o);
            run(*o);
        });
    }};

}  // namespace
}  // namespace dsv4::cli
