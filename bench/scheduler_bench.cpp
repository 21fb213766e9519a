// Scheduler overhead per step with 64 running sequences in steady decode: Scheduler::schedule + build_step_batch
// (the forward batch) + Scheduler::update, excluding the forward pass and sampling (a fixed token stands in for the
// sampled one). Prompts of ~1,000 tokens with 256-token blocks, prefix caching on (block hashing and snapshot
// bookkeeping run whenever a sequence crosses a block boundary). Target: < 100 us per step.
// Run: cmake --preset release && cmake --build --preset release --target scheduler_bench &&
//      build/release/bench/scheduler_bench
#include <benchmark/benchmark.h>

#include <numeric>
#include <string>

#include "kv/kv_cache_manager.h"
#include "runtime/model_runner.h"
#include "sched/scheduler.h"

namespace dsv4 {
namespace {

constexpr int kVocab = 129280;

RunnerOutput fixed_tokens(const SchedulerOutput& out) {
    RunnerOutput r;
    r.samples.resize(out.seqs.size());
    for (size_t j = 0; j < out.seqs.size(); ++j) {
        if (!out.seqs[j].sample) continue;
        r.samples[j].tokens.resize(1 + out.seqs[j].fork_children.size());
        for (auto& t : r.samples[j].tokens) t.token = static_cast<int32_t>(1000 + j);
    }
    return r;
}

void BM_SchedulerStep(benchmark::State& state) {
    const int seqs = static_cast<int>(state.range(0));
    KvCacheConfig kv_config;
    kv_config.max_slots = seqs;
    kv_config.num_blocks = 1 << 17;
    kv_config.block_tokens = 256;
    kv_config.num_snapshots = 2 * seqs;
    kv_config.rewind_capacity = 16;
    KvCacheManager kv(kv_config);
    SchedulerConfig config;
    config.max_num_seqs = seqs;
    config.max_num_batched_tokens = 2048;
    config.long_prefill_token_threshold = 1024;
    config.max_model_len = 1 << 24;
    config.vocab_size = kVocab;
    config.eos_token_ids = {1};
    Scheduler scheduler(config, kv);
    for (int i = 0; i < seqs; ++i) {
        GenerateRequest r;
        r.request_id = "r" + std::to_string(i);
        r.prompt_tokens.resize(900 + 7 * i);
        std::iota(r.prompt_tokens.begin(), r.prompt_tokens.end(), 100 * i);
        r.params.max_tokens = 1 << 22;
        r.params.ignore_eos = true;
        r.params.temperature = 0.0;
        scheduler.add(r);
    }
    // Prefill everything; from then on every step is 64 decodes.
    for (int i = 0; i < 1000; ++i) {
        SchedulerOutput out = scheduler.schedule();
        if (out.num_batched_tokens == seqs) break;
        scheduler.update(out, fixed_tokens(out));
    }
    int64_t tokens = 0;
    for (auto _ : state) {
        SchedulerOutput out = scheduler.schedule();
        StepBatch batch = build_step_batch(out);
        benchmark::DoNotOptimize(batch.tokens.data());
        UpdateResult result = scheduler.update(out, fixed_tokens(out));
        benchmark::DoNotOptimize(result.outputs.data());
        tokens += out.num_batched_tokens;
    }
    state.counters["seqs_per_step"] = static_cast<double>(tokens) / static_cast<double>(state.iterations());
    state.counters["steps_per_s"] =
        benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SchedulerStep)->Arg(64)->Arg(8)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace dsv4

BENCHMARK_MAIN();
