#include "bench_oracle.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>

#include "backend/tensor_reads.h"
#include "bench_weights.h"
#include "core/error.h"
#include "model/model_loader.h"
#include "model/tensor_spec.h"
#include "runtime/step_graphs.h"
#include "sample/spec_verify.h"
#include "spec/drafter.h"

namespace dsv4::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Oracle {
    const ModelConfig& config;
    Backend& backend;
    const OracleOptions& options;
    std::unique_ptr<LoadedModel> loaded;
    std::unique_ptr<Drafter> drafter;
    std::unique_ptr<StepGraphs> graphs;
    int blocks_per_slot = 0;
    int k = 0;

    DeepseekV4& model() { return *loaded->model; }
    std::vector<int32_t> table(int slot) const {
        std::vector<int32_t> t(blocks_per_slot);
        std::iota(t.begin(), t.end(), slot * blocks_per_slot);
        return t;
    }
};

// The drafter's view of one sequence's part of a step.
DraftInput draft_input(const Oracle& o, int slot, const std::vector<int32_t>& table, int32_t row_begin, int64_t start,
                       std::vector<int32_t> next_tokens, uint64_t base) {
    DraftInput in;
    in.slot = slot;
    in.block_table = table;
    in.row_begin = row_begin;
    in.start = start;
    in.next_tokens = std::move(next_tokens);
    in.propose = true;
    in.seed = o.options.seed + static_cast<uint64_t>(slot);
    in.base = base;
    return in;
}

// The greedy choice of each logits row, as the engine makes it for greedy requests (runtime/step_logits.h).
std::vector<int32_t> greedy_tokens(Oracle& o, const Tensor& logits) {
    std::vector<int32_t> picks = read_argmax_rows(o.backend, logits);
    for (const int32_t t : picks) DSV4_CHECK(t != kNoArgmax, "oracle: a logits row holds NaN or +inf");
    return picks;
}

// Prefills every sequence's prompt in chunks; the drafter (when given) absorbs each chunk. Returns the argmax of
// each prompt's last row (the first generated token).
std::vector<int32_t> prefill(Oracle& o, const std::vector<std::vector<int32_t>>& prompts,
                             const std::vector<std::vector<int32_t>>* continuation) {
    const auto batch = static_cast<int>(prompts.size());
    const int64_t len = static_cast<int64_t>(prompts[0].size());
    std::vector<std::vector<int32_t>> tables;
    for (int i = 0; i < batch; ++i) {
        o.backend.reset_slot(i);
        tables.push_back(o.table(i));
    }
    std::vector<int32_t> first(batch, 0);
    // prefill_chunk is the step's token budget, shared by the batch (as the engine's scheduler shares it).
    const int64_t chunk = std::max<int64_t>(1, o.options.prefill_chunk / std::max(1, batch));
    for (int64_t begin = 0; begin < len; begin += chunk) {
        const int64_t end = std::min(len, begin + chunk);
        StepBatch sb;
        for (int i = 0; i < batch; ++i) {
            sb.add_sequence(i, begin, std::span(prompts[i]).subspan(begin, end - begin), tables[i]);
            if (end == len) sb.logit_rows.push_back(static_cast<int32_t>((i + 1) * (end - begin) - 1));
        }
        ForwardRequest request;
        if (continuation != nullptr) request.hidden_layers = o.drafter->hidden_layers();
        const ForwardResult r = o.graphs->forward(sb, request);
        const std::vector<int32_t> picks = greedy_tokens(o, r.logits);
        std::copy(picks.begin(), picks.end(), first.begin());
        if (continuation == nullptr) continue;
        std::vector<DraftInput> inputs;
        for (int i = 0; i < batch; ++i) {
            std::vector<int32_t> next(prompts[i].begin() + begin + 1, prompts[i].begin() + end);
            next.push_back(end == len ? (*continuation)[i][0] : prompts[i][end]);
            inputs.push_back(draft_input(o, i, tables[i], static_cast<int32_t>(i * (end - begin)), begin, next, 0));
        }
        o.drafter->step(r, inputs);
    }
    return first;
}

// Plain greedy decoding: the baseline's seconds per step and each sequence's continuation (first token included).
double plain_decode(Oracle& o, const std::vector<std::vector<int32_t>>& prompts, int steps,
                    std::vector<std::vector<int32_t>>& continuation) {
    const auto batch = static_cast<int>(prompts.size());
    const int64_t ctx = static_cast<int64_t>(prompts[0].size());
    const std::vector<int32_t> first = prefill(o, prompts, nullptr);
    continuation.assign(batch, {});
    for (int i = 0; i < batch; ++i) continuation[i].push_back(first[i]);
    const auto t0 = Clock::now();
    for (int s = 0; s < steps; ++s) {
        StepBatch sb;
        for (int i = 0; i < batch; ++i) {
            sb.add_sequence(i, ctx + s, std::span(&continuation[i].back(), 1), o.table(i));
            sb.logit_rows.push_back(i);
        }
        const std::vector<int32_t> picks = greedy_tokens(o, o.graphs->forward(sb).logits);
        for (int i = 0; i < batch; ++i) continuation[i].push_back(picks[i]);
    }
    return seconds_since(t0) / steps;
}

struct SpecTimes {
    double verify_s = 0.0, draft_s = 0.0;
    int64_t emitted = 0, steps = 0;
};

// Speculative steps with oracle acceptance alpha over the precomputed continuations.
SpecTimes oracle_decode(Oracle& o, const std::vector<std::vector<int32_t>>& prompts,
                        const std::vector<std::vector<int32_t>>& continuation, double alpha) {
    const auto batch = static_cast<int>(prompts.size());
    const int64_t ctx = static_cast<int64_t>(prompts[0].size());
    prefill(o, prompts, &continuation);
    std::mt19937_64 rng(o.options.seed);
    std::uniform_real_distribution<double> coin(0.0, 1.0);
    std::vector<int64_t> j(batch, 0);  // index of each sequence's last emitted token in its continuation
    SpecTimes t;
    for (int s = 0; s < o.options.steps; ++s) {
        StepBatch sb;
        std::vector<std::vector<int32_t>> tables;
        for (int i = 0; i < batch; ++i) {
            const auto fed = std::span(continuation[i]).subspan(j[i], o.k + 1);  // last token + the oracle drafts
            tables.push_back(o.table(i));
            sb.add_sequence(i, ctx + j[i], fed, tables.back());
            for (int r = 0; r <= o.k; ++r) sb.logit_rows.push_back(i * (o.k + 1) + r);
        }
        auto t0 = Clock::now();
        ForwardRequest request;
        request.hidden_layers = o.drafter->hidden_layers();
        const ForwardResult r = o.graphs->forward(sb, request);
        greedy_tokens(o, r.logits);  // the greedy verifier reads every row's argmax
        t.verify_s += seconds_since(t0);
        std::vector<DraftInput> inputs;
        for (int i = 0; i < batch; ++i) {
            int n = 0;
            while (n < o.k && coin(rng) < alpha) ++n;
            std::vector<int32_t> next(continuation[i].begin() + j[i] + 1, continuation[i].begin() + j[i] + n + 2);
            inputs.push_back(draft_input(o, i, tables[i], i * (o.k + 1), ctx + j[i], next, 0));
            j[i] += n + 1;
            t.emitted += n + 1;
        }
        t0 = Clock::now();
        o.drafter->step(r, inputs);
        t.draft_s += seconds_since(t0);
        ++t.steps;
    }
    return t;
}

// Expected distinct experts per layer that `tokens` token rows touch under even routing.
double experts_touched(const ModelConfig& c, int64_t tokens) {
    const double e = c.n_routed_experts, k = c.n_experts_per_tok;
    return e * (1.0 - std::pow(1.0 - k / e, static_cast<double>(tokens)));
}

}  // namespace

nlohmann::json run_oracle(const ModelConfig& config, Backend& backend, const OracleOptions& options) {
    const SpeculativeConfig& spec = options.speculative;
    DSV4_CHECK(spec.enabled(), "oracle mode needs --speculative-config (the drafter whose cost is measured)");
    Oracle o{config, backend, options, nullptr, nullptr, nullptr, 0, 0};
    o.k = spec.num_speculative_tokens;
    const int max_batch = *std::max_element(options.batches.begin(), options.batches.end());
    const int decode_steps = options.steps * (o.k + 1) + 2;
    StateConfig state;
    state.max_slots = max_batch;
    state.block_tokens = 256;
    state.rewind_capacity = 16;
    o.blocks_per_slot = static_cast<int>((options.context + decode_steps + o.k + 256) / 256);
    state.num_blocks = o.blocks_per_slot * max_batch;
    const DraftLoad drafts{draft_state_stages(spec.method, config)};
    if (options.check_capacity) options.check_capacity(config_with_draft_state(config, drafts.state_stages), state);
    o.loaded = options.model_dir.empty() ? make_synthetic_model(config, backend, state, options.seed, {}, drafts)
                                         : load_model(options.model_dir, backend, state, {}, drafts);
    DraftOptions draft;
    draft.num_speculative_tokens = o.k;
    draft.probabilistic = false;
    draft.enforce_eager = options.enforce_eager;
    o.drafter = make_drafter(spec.method, o.model(), std::move(o.loaded->drafts), draft);
    o.graphs = std::make_unique<StepGraphs>(o.model(), options.enforce_eager);
    const WeightBytes wb = weight_bytes(config);
    nlohmann::json out = nlohmann::json::array();
    std::printf("%-6s %-6s %8s %9s %11s %11s %9s %9s %8s %11s\n", "batch", "accept", "alpha", "tok/step", "plain tok/s",
                "spec tok/s", "speedup", "verify ms", "draft ms", "byte ratio");
    for (int batch : options.batches) {
        std::vector<std::vector<int32_t>> prompts(batch), continuation;
        for (int i = 0; i < batch; ++i) {
            for (int64_t p = 0; p < options.context; ++p) {
                prompts[i].push_back(static_cast<int32_t>((p * 7919 + i * 104729 + 11) % config.vocab_size));
            }
        }
        const double plain_step_s = plain_decode(o, prompts, decode_steps, continuation);
        const double plain_tps = batch / plain_step_s;
        const double decode_bytes = wb.non_expert + wb.per_expert * experts_touched(config, batch) * config.num_layers;
        const double verify_bytes =
            wb.non_expert + wb.per_expert * experts_touched(config, int64_t{batch} * (o.k + 1)) * config.num_layers;
        for (double length : options.acceptance_lengths) {
            if (length > o.k + 1.0) {
                std::printf("%-6d %-6.2f needs at least %d drafts (num_speculative_tokens %d): skipped\n", batch,
                            length, static_cast<int>(std::ceil(length)) - 1, o.k);
                continue;
            }
            const double alpha = oracle_acceptance_rate(length, o.k);
            const SpecTimes t = oracle_decode(o, prompts, continuation, alpha);
            const double spec_tps = static_cast<double>(t.emitted) / (t.verify_s + t.draft_s);
            const double per_step = static_cast<double>(t.emitted) / static_cast<double>(t.steps * batch);
            std::printf("%-6d %-6.2f %8.3f %9.2f %11.2f %11.2f %8.2fx %9.1f %8.1f %11.2f\n", batch, length, alpha,
                        per_step, plain_tps, spec_tps, spec_tps / plain_tps, 1e3 * t.verify_s / t.steps,
                        1e3 * t.draft_s / t.steps, verify_bytes / decode_bytes);
            out.push_back({{"batch", batch},
                           {"acceptance_length", length},
                           {"alpha", alpha},
                           {"measured_tokens_per_step", per_step},
                           {"plain_tok_per_s", plain_tps},
                           {"spec_tok_per_s", spec_tps},
                           {"speedup", spec_tps / plain_tps},
                           {"verify_ms", 1e3 * t.verify_s / t.steps},
                           {"draft_ms", 1e3 * t.draft_s / t.steps},
                           {"plain_step_ms", 1e3 * plain_step_s},
                           {"byte_ratio", verify_bytes / decode_bytes},
                           {"expert_byte_ratio",
                            experts_touched(config, int64_t{batch} * (o.k + 1)) / experts_touched(config, batch)}});
        }
    }
    return out;
}

}  // namespace dsv4::cli
