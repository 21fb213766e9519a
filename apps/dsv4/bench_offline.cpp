// `dsv4 bench offline`: decode and prefill throughput of a synthetic DeepSeek-V4-Flash-shaped model made directly in
// device memory (real formats, random values), next to the device ceilings measured in the same run, with the
// achieved fraction of the roofline, a per-component time breakdown and the kernel launches per decode step.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend_options.h"
#include "bench_registry.h"
#include "core/error.h"
#include "model/deepseek_v4.h"
#include "model/flash_preset.h"
#include "model/model_loader.h"
#include "model/tensor_spec.h"
#include "runtime/step_graphs.h"
#include "state/state_format.h"
#ifdef DSV4_WITH_CUDA
#include "backend/cuda/cuda_factory.h"
#endif

namespace dsv4::cli {
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
    int64_t prefill_chunk = 2048;  // the engine's default token budget per step
    int steps = 8;
    std::string json_out;
    uint64_t seed = 1;
    bool enforce_eager = false;  // decode steps without CUDA graphs
};

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Bytes of the weights a decode step reads besides the routed experts, and one routed expert's bytes.
struct WeightBytes {
    double non_expert = 0.0;  // excluding the embedding table (a step reads B rows of it)
    double per_expert = 0.0;
    double active_params = 0.0;  // per token: everything but the embedding table and the unused experts
};

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
    std::unique_ptr<LoadedModel> loaded;  // synthetic: no checkpoint, only the model
    std::unique_ptr<StepGraphs> graphs;   // decode steps as the engine runs them (graphs unless --enforce-eager)
    int blocks_per_slot = 0;
    DeepseekV4& model() { return *loaded->model; }
    // One step as the engine runs it, its logits copied to the host (the step's end, as in serving).
    void step(const StepBatch& batch) { model().host_logits(graphs->forward(batch)); }
};

Setup build(const OfflineOptions& o, int max_batch, int64_t max_context) {
    Setup s;
    s.config = flash_preset_config(o.preset, o.layers, o.experts);
    s.backend = make_cli_backend(o.device, o.numerics, 0, o.fp8_dialect);
    StateConfig state;
    state.max_slots = max_batch;
    state.block_tokens = 256;
    state.rewind_capacity = 8;
    state.kv_dtype = parse_state_dtype(o.kv_cache_dtype);
    s.blocks_per_slot = static_cast<int>((max_context + 1024 + 255) / 256);
    state.num_blocks = s.blocks_per_slot * max_batch;
    const auto t0 = Clock::now();
    s.loaded = make_synthetic_model(s.config, *s.backend, state, o.seed);  // state sized after the weights
    s.graphs = std::make_unique<StepGraphs>(s.model(), o.enforce_eager);
    std::fprintf(stderr, "%s\n", s.backend->memory_report().c_str());
    std::fprintf(stderr, "synthetic %s model (%d layers, %d experts) built in %.1f s\n", o.preset.c_str(),
                 s.config.num_layers, s.config.n_routed_experts, seconds_since(t0));
    return s;
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
    for (int w = 0; w < 2; ++w) s.step(step_batch(ctx + w));  // warm-up (and graph recording)
    const int64_t launches0 = b.launches();
    const auto t0 = Clock::now();
    for (int i = 0; i < steps; ++i) s.step(step_batch(ctx + 2 + i));
    const double step_s = seconds_since(t0) / steps;
    const double launches = static_cast<double>(b.launches() - launches0) / steps;
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
                        {"launches_per_step", launches}};
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
            {"breakdown_ms", br}};
}

void print_breakdown(const nlohmann::json& r) {
    std::printf("       breakdown ms:");
    for (const auto& [k, v] : r["breakdown_ms"].items()) std::printf(" %s %.2f", k.c_str(), v.get<double>());
    std::printf("\n");
}

void run(const OfflineOptions& o) {
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
                     {"fp8_dialect", fp8_dialect_name(s.backend->fp8_dialect())}};
    std::printf("%-6s %-8s %10s %10s %12s %9s %9s\n", "batch", "context", "step ms", "tok/s", "roofline", "fraction",
                "launches");
    for (int64_t ctx : o.contexts) {
        for (int batch : o.batches) {
            nlohmann::json r = decode_run(s, batch, ctx, o.steps, wb, copy_tbps);
            std::printf("%-6d %-8lld %10.2f %10.1f %12.1f %8.1f%% %9.0f\n", batch, static_cast<long long>(ctx),
                        r["step_ms"].get<double>(), r["tok_per_s"].get<double>(), r["roofline_tok_per_s"].get<double>(),
                        100.0 * r["roofline_fraction"].get<double>(), r["launches_per_step"].get<double>());
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
    if (!o.json_out.empty()) std::ofstream(o.json_out) << out.dump(2) << "\n";
}

const BenchmarkRegistrar kRegistrar{
    "offline", "Decode/prefill throughput of a synthetic full-size model (no checkpoint needed)", [](CLI::App& app) {
        auto o = std::make_shared<OfflineOptions>();
        app.add_option("--preset", o->preset, "flash | flash-0731 | flash-160 (160 experts)");
        app.add_option("--layers", o->layers, "Truncate to L layers (0 = all)");
        app.add_option("--experts", o->experts, "Routed experts (0 = the preset's)");
        app.add_option("--device", o->device, "cuda | cpu");
        app.add_option("--numerics", o->numerics, "exact | reference | fast");
        app.add_option("--kv-cache-dtype", o->kv_cache_dtype, "K=V rows and indexer keys: fp8 | bf16 | f32");
        add_fp8_dialect_option(app, o->fp8_dialect);
        app.add_option("--batch", o->batches, "Decode batch sizes")->delimiter(',');
        app.add_option("--context", o->contexts, "Decode context lengths")->delimiter(',');
        app.add_option("--prefill", o->prefills, "Prefill prompt lengths (empty: none)")->delimiter(',');
        app.add_option("--prefill-chunk", o->prefill_chunk, "Prefill chunk size");
        app.add_option("--steps", o->steps, "Timed decode steps per point");
        app.add_option("--json", o->json_out, "Write the results as JSON");
        app.add_option("--seed", o->seed, "Weight seed");
        app.add_flag("--enforce-eager", o->enforce_eager, "Run decode steps eagerly (no CUDA graphs)");
        app.callback([o] { run(*o); });
    }};

}  // namespace
}  // namespace dsv4::cli
