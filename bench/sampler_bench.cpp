// CPU sampler cost per token on a DeepSeek-V4-sized vocabulary (129,280 logits), and stop-string matching.
// Run: cmake --preset release && cmake --build --preset release --target sampler_bench &&
// build/release/bench/sampler_bench
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "sample/sampler.h"
#include "sample/sampler_state.h"
#include "sample/stop_checker.h"

namespace dsv4 {
namespace {

constexpr int64_t kVocab = 129280;

std::vector<float> model_like_logits() {
    std::mt19937_64 rng(1);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::vector<float> logits(kVocab);
    for (float& x : logits) x = normal(rng);
    return logits;
}

void run_sampler(benchmark::State& bench, const SamplingParams& params, int64_t prompt_tokens = 0) {
    auto logits = model_like_logits();
    std::vector<int64_t> prompt(static_cast<size_t>(prompt_tokens));
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int64_t>((i * 7919) % kVocab);
    std::vector<int64_t> eos = {1};
    SamplerState state(params, prompt, eos, kVocab);
    for (auto _ : bench) benchmark::DoNotOptimize(sample(logits, params, state).token);
    bench.SetItemsProcessed(bench.iterations());
}

void BM_Greedy(benchmark::State& bench) {
    SamplingParams params;
    params.temperature = 0.0;
    run_sampler(bench, params);
}

void BM_Temperature(benchmark::State& bench) {
    run_sampler(bench, SamplingParams{});
}

void BM_TopP(benchmark::State& bench) {
    SamplingParams params;
    params.temperature = 0.7;
    params.top_p = 0.95;
    run_sampler(bench, params);
}

void BM_TopK(benchmark::State& bench) {
    SamplingParams params;
    params.top_k = 50;
    run_sampler(bench, params);
}

void BM_AllFiltersPenaltiesLogprobs(benchmark::State& bench) {
    SamplingParams params;
    params.temperature = 0.8;
    params.top_p = 0.9;
    params.top_k = 100;
    params.min_p = 0.02;
    params.repetition_penalty = 1.1;
    params.frequency_penalty = 0.3;
    params.presence_penalty = 0.3;
    params.logprobs = 5;
    run_sampler(bench, params, 4096);
}

void BM_StopStrings(benchmark::State& bench) {
    std::string text;
    std::mt19937_64 rng(2);
    for (int i = 0; i < 4096; ++i) text.push_back(static_cast<char>('a' + rng() % 26));
    std::vector<std::string> stops = {"</answer>", "\n\nUser:", "STOP", "aaaa"};
    for (auto _ : bench) {
        StopStringMatcher matcher(stops, false);
        for (size_t pos = 0; pos < text.size(); pos += 4) benchmark::DoNotOptimize(matcher.push(text.substr(pos, 4)));
    }
    bench.SetBytesProcessed(bench.iterations() * static_cast<int64_t>(text.size()));
}

BENCHMARK(BM_Greedy);
BENCHMARK(BM_Temperature);
BENCHMARK(BM_TopP);
BENCHMARK(BM_TopK);
BENCHMARK(BM_AllFiltersPenaltiesLogprobs);
BENCHMARK(BM_StopStrings);

}  // namespace
}  // namespace dsv4

BENCHMARK_MAIN();
