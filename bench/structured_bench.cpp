// structured_bench: the cost of structured outputs on the real DeepSeek-V4 vocabulary (129,280 ids).
//
//   structured_bench --tokenizer build/release/tokenizer/deepseek_v4/tokenizer.json [--rounds N]
//
// For each workload (a typical nested JSON schema, JSON mode, a forced DSML tool call): the vocabulary build (once),
// the compile time (spec -> grammar -> automata, median of N fresh compiles), and the time to compute the token
// mask at every position of a realistic output (an instance tokenized with the tokenizer): "cold" on a fresh mask
// cache (the first request with a new schema), "warm" on a second pass (every later request with that schema),
// median and p99 over the positions; plus applying a mask to a 129K logits row in the sampler.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "sample/logits_processors.h"
#include "sample/sampler_state.h"
#include "structured/compiled_grammar.h"
#include "structured/grammar_cache.h"
#include "structured/grammar_constraint.h"
#include "structured/grammar_matcher.h"
#include "tokenizer/chat_tokens.h"
#include "tokenizer/tokenizer.h"

namespace dsv4::structured {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Workload {
    const char* name;
    GrammarSpec spec;
    std::string output;  // a valid output, tokenized to drive the matcher
};

std::vector<Workload> workloads() {
    std::vector<Workload> out;
    GrammarSpec nested;
    nested.kind = GrammarKind::kJsonSchema;
    nested.text = R"({"type":"object","additionalProperties":false,"required":["id","name","email","address","orders"],
      "properties":{"id":{"type":"integer","minimum":1},"name":{"type":"string","maxLength":64},
      "email":{"type":"string","format":"email"},"active":{"type":"boolean"},
      "address":{"type":"object","additionalProperties":false,"required":["street","city","country"],
        "properties":{"street":{"type":"string"},"city":{"type":"string"},"zip":{"type":"string","pattern":"^[0-9]{5}$"},
          "country":{"enum":["DE","FR","US","JP"]}}},
      "orders":{"type":"array","maxItems":10,"items":{"type":"object","additionalProperties":false,
        "required":["sku","quantity","price"],"properties":{"sku":{"type":"string","pattern":"^[A-Z]{3}-[0-9]{4}$"},
          "quantity":{"type":"integer","minimum":1,"maximum":100},"price":{"type":"number","minimum":0},
          "tags":{"type":"array","items":{"type":"string"}}}}}}})";
    out.push_back({"nested schema", nested,
                   "{\n  \"id\": 4821,\n  \"name\": \"Ada Lovelace\",\n  \"email\": \"ada@example.org\",\n"
                   "  \"active\": true,\n  \"address\": {\"street\": \"12 Analytical Row\", \"city\": \"London\", "
                   "\"zip\": \"10115\", \"country\": \"DE\"},\n  \"orders\": [\n    {\"sku\": \"ABC-1234\", "
                   "\"quantity\": 3, \"price\": 19.99, \"tags\": [\"gift\", \"express\"]},\n    {\"sku\": "
                   "\"XYZ-0001\", \"quantity\": 12, \"price\": 4.5}\n  ]\n}"});
    GrammarSpec json_mode;
    json_mode.kind = GrammarKind::kJsonObject;
    out.push_back({"JSON mode", json_mode,
                   "{\"title\": \"Structured outputs\", \"year\": 2025, \"tags\": [\"json\", \"grammar\"], "
                   "\"nested\": {\"ok\": true, \"ratio\": 0.75, \"none\": null}}"});
    GrammarSpec tools;
    tools.kind = GrammarKind::kToolCalls;
    tools.tools = {{"get_weather", R"({"type":"object","properties":{"city":{"type":"string"},
                     "days":{"type":"integer","minimum":1,"maximum":14},"units":{"enum":["metric","imperial"]}},
                     "required":["city"]})"},
                   {"get_time", R"({"type":"object","properties":{"zone":{"type":"string"}},"required":["zone"]})"}};
    out.push_back({"tool call", tools,
                   "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" "
                   "string=\"true\">San Francisco</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" "
                   "string=\"false\">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>"});
    return out;
}

struct Stats {
    double median_us = 0;
    double p99_us = 0;
    double max_us = 0;
};

Stats summarize(std::vector<double> seconds) {
    std::sort(seconds.begin(), seconds.end());
    Stats s;
    if (seconds.empty()) return s;
    s.median_us = seconds[seconds.size() / 2] * 1e6;
    s.p99_us = seconds[std::min(seconds.size() - 1, seconds.size() * 99 / 100)] * 1e6;
    s.max_us = seconds.back() * 1e6;
    return s;
}

// Mask time at every position of the workload's output.
std::vector<double> mask_times(const std::shared_ptr<const TokenMasker>& masker, const std::vector<int32_t>& tokens) {
    GrammarMatcher matcher(masker);
    std::vector<uint64_t> bits(masker->words());
    std::vector<double> times;
    for (int32_t token : tokens) {
        const auto start = Clock::now();
        matcher.fill_mask(bits);
        times.push_back(since(start));
        if (!((bits[static_cast<size_t>(token) >> 6] >> (token & 63)) & 1) || !matcher.accept_token(token)) {
            std::fprintf(stderr, "token %d is not allowed: the workload's output does not match its grammar\n", token);
            std::exit(1);
        }
    }
    return times;
}

void run(const tokenizer::Tokenizer& tok, int rounds) {
    const int32_t eos = *tok.token_to_id(chat_tokens::kEos);
    auto start = Clock::now();
    const auto vocabulary = make_vocabulary(tok, {eos}, tok.vocab_size());
    std::printf("vocabulary: %lld ids, %d trie nodes, built in %.1f ms\n\n",
                static_cast<long long>(vocabulary->mask_bits), vocabulary->trie->num_nodes(), since(start) * 1e3);
    std::printf("%-14s %8s %7s %7s | %-26s | %-26s\n", "workload", "compile", "states", "tokens",
                "cold mask us (med/p99/max)", "warm mask us (med/p99/max)");
    for (const Workload& w : workloads()) {
        std::vector<double> compiles;
        std::shared_ptr<const TokenMasker> masker;
        for (int r = 0; r < rounds; ++r) {
            GrammarCache cache(vocabulary, 1);
            start = Clock::now();
            masker = cache.masker(w.spec);
            compiles.push_back(since(start));
        }
        std::sort(compiles.begin(), compiles.end());
        std::vector<int32_t> tokens = tok.encode(w.output, true);
        tokens.push_back(eos);
        const Stats cold = summarize(mask_times(masker, tokens));
        std::vector<double> warm_all;
        for (int r = 0; r < rounds; ++r) {
            const std::vector<double> t = mask_times(masker, tokens);
            warm_all.insert(warm_all.end(), t.begin(), t.end());
        }
        const Stats warm = summarize(warm_all);
        std::printf("%-14s %6.2fms %7d %7zu | %7.1f %7.1f %9.1f | %7.1f %7.1f %9.1f\n", w.name,
                    compiles[compiles.size() / 2] * 1e3, masker->grammar().num_states(), tokens.size(), cold.median_us,
                    cold.p99_us, cold.max_us, warm.median_us, warm.p99_us, warm.max_us);
    }
}

// The sampler's part: applying a mask that allows ~half the vocabulary to a 129K logits row.
void run_apply(const tokenizer::Tokenizer& tok) {
    class HalfState final : public TokenConstraintState {
      public:
        TokenMaskSummary fill_allowed(std::span<uint64_t> allowed) override {
            std::fill(allowed.begin(), allowed.end(), 0x5555555555555555ULL);
            return {true, false};
        }
        bool accept(int32_t) override { return true; }
        void rollback(int) override {}
    };
    class Half final : public TokenConstraint {
      public:
        explicit Half(int64_t vocab) : vocab_(vocab) {}
        std::unique_ptr<TokenConstraintState> start() const override { return std::make_unique<HalfState>(); }
        int64_t vocab_size() const override { return vocab_; }

      private:
        int64_t vocab_;
    };
    SamplingParams params;
    params.constraint = std::make_shared<Half>(tok.vocab_size());
    std::vector<float> logits(static_cast<size_t>(tok.vocab_size()), 0.5f);
    std::vector<double> times;
    for (int i = 0; i < 200; ++i) {
        SamplerState state(params, {}, {}, tok.vocab_size());
        state.prepare_constraint_mask();
        const auto start = Clock::now();
        apply_constraint_mask(logits, state);
        times.push_back(since(start));
    }
    const Stats s = summarize(times);
    std::printf("\nsampler: applying a mask to a %d-entry logits row: median %.1f us, p99 %.1f us\n", tok.vocab_size(),
                s.median_us, s.p99_us);
}

}  // namespace
}  // namespace dsv4::structured

int main(int argc, char** argv) {
    std::string path;
    int rounds = 5;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--tokenizer") == 0 && i + 1 < argc)
            path = argv[++i];
        else if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            rounds = std::max(1, std::atoi(argv[++i]));
    }
    if (path.empty()) {
        std::fprintf(stderr, "usage: structured_bench --tokenizer tokenizer.json [--rounds N]\n");
        return 2;
    }
    try {
        const auto tok = dsv4::tokenizer::Tokenizer::load(path);
        dsv4::structured::run(tok, rounds);
        dsv4::structured::run_apply(tok);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "structured_bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
