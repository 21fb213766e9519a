// `dsv4 generate`: runs a prompt through the engine (include/dsv4/engine.h) and prints the completion and the
// throughput. The prompt is text (tokenized with --tokenizer FILE, or the model directory's tokenizer.json; BOS is
// prepended unless --no-bos) or token ids (--prompt-tokens 1,2,3, for the tokenizer-less fixture models; output is
// then printed as ids). --concurrency C submits C copies at once (copy i uses seed + i) to measure batched decoding.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend_options.h"
#include "command.h"
#include "core/error.h"
#include "dsv4/engine.h"
#include "server/speculative_cli.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace dsv4::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct GenerateOptions {
    std::string model;
    std::string prompt;
    std::string prompt_tokens;
    std::string tokenizer;
    int max_tokens = 64;
    double temperature = 0.0;
    double top_p = 1.0;
    int top_k = 0;
    std::optional<uint64_t> seed;
    int concurrency = 1;
    bool ignore_eos = false;
    bool no_bos = false;
    std::string numerics = "exact";
    std::string device = "cpu";
    int threads = 0;
    int max_model_len = 0;
    int64_t kv_cache_bytes = 0;
    int gpu_experts = -1;
    int64_t expert_read_in_place_tokens = 0;
    double host_kv_cache_gib = 0.0;
    std::string kv_cache_dtype = "auto";
    std::string fp8_dialect;
    bool enforce_eager = false;
    std::string speculative_config;  // vLLM's --speculative-config JSON
    int rewind_capacity = 16;
};

std::vector<int32_t> parse_token_list(const std::string& text) {
    std::vector<int32_t> ids;
    size_t pos = 0;
    while (pos <= text.size()) {
        const size_t comma = std::min(text.find(',', pos), text.size());
        const std::string item = text.substr(pos, comma - pos);
        size_t used = 0;
        long long value = -1;
        try {
            value = std::stoll(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        DSV4_CHECK(used == item.size() && !item.empty() && value >= 0 && value <= INT32_MAX,
                   "--prompt-tokens: '{}' "
                   "is not a token id (expected comma-separated non-negative integers, e.g. 1,2,3)",
                   item);
        ids.push_back(static_cast<int32_t>(value));
        pos = comma + 1;
    }
    return ids;
}

std::optional<tokenizer::Tokenizer> open_tokenizer(const GenerateOptions& o) {
    if (!o.tokenizer.empty()) return tokenizer::Tokenizer::load(o.tokenizer);
    const auto in_model = std::filesystem::path(o.model) / "tokenizer.json";
    if (std::filesystem::exists(in_model)) return tokenizer::Tokenizer::load(in_model.string());
    return std::nullopt;
}

struct Run {
    std::shared_ptr<ResultStream> stream;
    std::vector<int32_t> tokens;
    std::string text;
    FinishReason reason = FinishReason::kNone;
    std::string error;
    std::optional<tokenizer::StreamingDetokenizer> detokenizer;
};

const char* reason_name(FinishReason r) {
    switch (r) {
        case FinishReason::kNone:
            return "none";
        case FinishReason::kStop:
            return "stop";
        case FinishReason::kLength:
            return "length";
        case FinishReason::kAbort:
            return "abort";
        case FinishReason::kError:
            return "error";
    }
    return "?";
}

EngineConfig engine_config(const GenerateOptions& o) {
    EngineConfig c;
    c.model_dir = o.model;
    c.device = o.device;
    c.numerics = o.numerics;
    c.threads = o.threads;
    c.max_num_seqs = std::max(o.concurrency, 1);
    c.max_model_len = o.max_model_len;
    c.kv_cache_bytes = o.kv_cache_bytes;
    c.gpu_experts = o.gpu_experts;
    c.expert_read_in_place_tokens = o.expert_read_in_place_tokens;
    c.host_kv_cache_bytes = static_cast<int64_t>(o.host_kv_cache_gib * 1024.0 * 1024.0 * 1024.0);
    c.kv_cache_dtype = o.kv_cache_dtype;
    c.fp8_dialect = o.fp8_dialect;
    c.enforce_eager = o.enforce_eager;
    c.speculative = server::parse_speculative_config(o.speculative_config);
    c.rewind_capacity = o.rewind_capacity;
    return c;
}

SamplingParams sampling(const GenerateOptions& o, int copy) {
    SamplingParams p;
    p.temperature = o.temperature;
    p.top_p = o.top_p;
    p.top_k = o.top_k;
    p.max_tokens = o.max_tokens;
    p.ignore_eos = o.ignore_eos;
    if (o.seed) p.seed = *o.seed + static_cast<uint64_t>(copy);
    return p;
}

// Pops every stream until all are done; streams copy 0's text when there is one stream and a tokenizer.
void collect(std::vector<Run>& runs, bool stream_text, Clock::time_point& first_token) {
    bool any_token = false;
    for (size_t finished = 0; finished < runs.size();) {
        finished = 0;
        for (Run& run : runs) {
            if (run.stream->done()) {
                ++finished;
                continue;
            }
            auto ev = run.stream->pop(std::chrono::milliseconds(runs.size() == 1 ? 1000 : 5));
            if (!ev) continue;
            for (const GeneratedToken& t : ev->tokens) {
                if (!any_token) first_token = Clock::now();
                any_token = true;
                run.tokens.push_back(t.token);
                if (!run.detokenizer) continue;
                const std::string piece = run.detokenizer->push(t.token);
                run.text += piece;
                if (stream_text) std::fwrite(piece.data(), 1, piece.size(), stdout), std::fflush(stdout);
            }
            if (ev->finished) {
                run.reason = ev->finish_reason;
                run.error = ev->error;
                if (run.detokenizer) {
                    const std::string tail = run.detokenizer->flush();
                    run.text += tail;
                    if (stream_text) std::fwrite(tail.data(), 1, tail.size(), stdout);
                }
            }
        }
    }
}

std::string ids_text(const std::vector<int32_t>& ids) {
    std::string s;
    for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
    return s;
}

// Speculative decoding: drafts accepted per verify step, tokens per step and the acceptance of each position.
void print_acceptance(const EngineStats& s) {
    const double steps = static_cast<double>(s.spec_drafts_total);
    std::fprintf(stderr,
                 "speculative: %lld verify steps, %lld drafts, %lld accepted: %.3f accepted drafts/step, "
                 "%.3f tokens/step; per position:",
                 static_cast<long long>(s.spec_drafts_total), static_cast<long long>(s.spec_draft_tokens_total),
                 static_cast<long long>(s.spec_accepted_tokens_total), s.spec_accepted_tokens_total / steps,
                 (s.spec_accepted_tokens_total + steps) / steps);
    for (int64_t n : s.spec_accepted_per_pos) std::fprintf(stderr, " %.3f", static_cast<double>(n) / steps);
    std::fprintf(stderr, "\n");
}

void run(const GenerateOptions& o) {
    DSV4_CHECK(o.prompt.empty() != o.prompt_tokens.empty(),
               "pass exactly one of --prompt TEXT and --prompt-tokens "
               "IDS");
    DSV4_CHECK(o.concurrency >= 1, "--concurrency must be at least 1, got {}", o.concurrency);
    std::optional<tokenizer::Tokenizer> tok = open_tokenizer(o);
    DSV4_CHECK(o.prompt.empty() || tok.has_value(),
               "--prompt needs a tokenizer: {} has no tokenizer.json; pass "
               "--tokenizer FILE or give token ids with --prompt-tokens",
               o.model);
    auto engine = Engine::create(engine_config(o));
    std::vector<int32_t> prompt;
    if (!o.prompt.empty()) {
        if (!o.no_bos) prompt.push_back(engine->model_info().bos_token_id);
        const std::vector<int32_t> ids = tok->encode(o.prompt);
        prompt.insert(prompt.end(), ids.begin(), ids.end());
    } else {
        prompt = parse_token_list(o.prompt_tokens);
    }
    std::vector<Run> runs(o.concurrency);
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < o.concurrency; ++i) {
        GenerateRequest request;
        request.request_id = "generate-" + std::to_string(i);
        request.prompt_tokens = prompt;
        request.params = sampling(o, i);
        SubmitResult submitted = engine->submit(std::move(request));
        DSV4_CHECK(submitted.stream != nullptr, "request rejected: {}", submitted.message);
        runs[i].stream = std::move(submitted.stream);
        if (tok) runs[i].detokenizer.emplace(*tok, true);
    }
    const bool stream_text = tok.has_value() && runs.size() == 1;
    Clock::time_point first_token = start;
    collect(runs, stream_text, first_token);
    const Clock::time_point end = Clock::now();
    int64_t generated = 0;
    for (size_t i = 0; i < runs.size(); ++i) {
        const Run& r = runs[i];
        generated += static_cast<int64_t>(r.tokens.size());
        if (runs.size() > 1) std::printf("--- completion %zu ---\n", i);
        if (!stream_text) std::printf("%s", tok ? r.text.c_str() : ids_text(r.tokens).c_str());
        std::printf("\n");
        if (r.reason == FinishReason::kError) std::fprintf(stderr, "completion %zu failed: %s\n", i, r.error.c_str());
    }
    const double total_s = std::chrono::duration<double>(end - start).count();
    const double decode_s = std::chrono::duration<double>(end - first_token).count();
    const int64_t decode_tokens = generated - static_cast<int64_t>(runs.size());
    std::fprintf(stderr,
                 "prompt %zu tokens x %d, generated %lld tokens (finish: %s) in %.3f s: %.2f tok/s overall, "
                 "time to first token %.1f ms, decode %.2f tok/s\n",
                 prompt.size(), o.concurrency, static_cast<long long>(generated), reason_name(runs[0].reason), total_s,
                 static_cast<double>(generated) / total_s,
                 std::chrono::duration<double, std::milli>(first_token - start).count(),
                 decode_s > 0 && decode_tokens > 0 ? static_cast<double>(decode_tokens) / decode_s : 0.0);
    const EngineStats stats = engine->stats();
    if (stats.spec_drafts_total > 0) print_acceptance(stats);
    engine->shutdown(std::chrono::seconds(5));
}

const CommandRegistrar kRegistrar{
    "generate", "Generate a completion for a prompt with the engine and report tokens/s", [](CLI::App& app) {
        auto o = std::make_shared<GenerateOptions>();
        app.add_option("--model", o->model, "Model directory (config.json + safetensors)")->required();
        app.add_option("--prompt", o->prompt, "Prompt text (needs a tokenizer)");
        app.add_option("--prompt-tokens", o->prompt_tokens, "Prompt as comma-separated token ids, e.g. 1,2,3");
        app.add_option("--tokenizer", o->tokenizer, "tokenizer.json (default: the model directory's)");
        app.add_option("-n,--max-tokens", o->max_tokens, "Tokens to generate (default 64)");
        app.add_option("--temperature", o->temperature, "Sampling temperature (default 0: greedy)");
        app.add_option("--top-p", o->top_p, "Nucleus sampling mass (default 1: off)");
        app.add_option("--top-k", o->top_k, "Top-k sampling (default 0: off)");
        app.add_option("--seed", o->seed, "Sampling seed (copy i of --concurrency uses seed + i)");
        app.add_option("--concurrency", o->concurrency, "Submit C copies of the request at once (default 1)");
        app.add_flag("--ignore-eos", o->ignore_eos, "Do not stop at the end-of-sequence token");
        app.add_flag("--no-bos", o->no_bos, "Do not prepend the BOS token to a text prompt");
        app.add_flag("--enforce-eager", o->enforce_eager, "Run every step eagerly (no CUDA graphs)");
        app.add_option("--speculative-config", o->speculative_config,
                       "Speculative decoding (vLLM's JSON), e.g. {\"method\":\"mtp\",\"num_speculative_tokens\":3}");
        app.add_option("--rewind-capacity", o->rewind_capacity,
                       "Positions a sequence can be rewound without recompute (default 16)");
        app.add_option("--numerics", o->numerics, "exact | reference | fast");
        app.add_option("--device", o->device, "cpu | cuda");
        app.add_option("--threads", o->threads, "CPU threads (0 = all)");
        app.add_option("--max-model-len", o->max_model_len, "Context length (0 = the model's, capped by memory)");
        app.add_option("--kv-cache-bytes", o->kv_cache_bytes, "Bytes for the sequence state (0 = automatic)");
        app.add_option("--gpu-experts", o->gpu_experts,
                       "Routed experts per layer on the device, the others in host memory (-1 = all)");
        app.add_option("--expert-read-in-place-tokens", o->expert_read_in_place_tokens,
                       "With --gpu-experts: steps of at most N tokens read host experts in place (0 = never)")
            ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
        app.add_option("--host-kv-cache-gib", o->host_kv_cache_gib, "Host pool for evicted prefix-cache blocks");
        app.add_option("--kv-cache-dtype", o->kv_cache_dtype,
                       "K=V rows and indexer keys as auto | f32 | bf16 | fp8 (auto: f32 in exact numerics, else fp8)");
        add_fp8_dialect_option(app, o->fp8_dialect);
        app.callback([o] { run(*o); });
    }};

}  // namespace
}  // namespace dsv4::cli
