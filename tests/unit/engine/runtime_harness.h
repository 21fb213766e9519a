// The engine's step loop without its thread, on a fixture model: KvCacheManager + Scheduler + ModelRunner, with
// the runner's logits hook recording every sampled row. Lets tests compare the exact logits a request sees in
// different situations (alone, batched, after a prefix-cache hit).
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/npy.h"
#include "model/model_loader.h"
#include "model/tensor_spec.h"
#include "runtime/model_runner.h"
#include "sched/scheduler.h"
#include "spec/drafter.h"

namespace dsv4::engine_test {

struct HarnessOptions {
    std::string fixture = "flash_schedule";
    std::string model_dir;  // overrides fixture (e.g. a synthetic checkpoint with draft stages)
    int max_num_seqs = 6;
    int budget = 2048;
    int long_prefill = 1024;
    int num_blocks = 40;
    int block_tokens = 128;
    int num_snapshots = 8;
    bool prefix_caching = true;
    Numerics numerics = Numerics::kExact;
    StateDtype kv_dtype = StateDtype::kF32;
    int rewind_capacity = 16;
    // Speculative decoding (src/spec): method "" = off.
    std::string spec_method;
    int spec_tokens = 3;
    bool spec_probabilistic = true;
    VerifyMethod verify = VerifyMethod::kStandard;
    int spec_disable_batch_size = 0;
    double spec_confidence_threshold = 0.0;
    double spec_oracle_length = 0.0;  // oracle acceptance (ModelRunner::set_oracle_acceptance); 0: real verification
    // Keep every sampled row's logits (logits()); off, the runner samples as the engine does (argmax ids and draws
    // on the backend, sample_rows).
    bool record_logits = true;
    // Host / disk tiers of the prefix cache (kv/kv_tiers.h): none when host_blocks is 0.
    int host_blocks = 0;
    int host_snapshots = 0;
    std::string disk_dir;
    int64_t disk_bytes = int64_t{1} << 30;
};

class RuntimeHarness {
  public:
    explicit RuntimeHarness(const HarnessOptions& o)
        : backend_(make_cpu_backend(o.numerics, 1)),
          loaded_(load_model(o.model_dir.empty() ? dir(o.fixture) : std::filesystem::path(o.model_dir), *backend_,
                             state_config(o), {}, DraftLoad{draft_stages(o)})),
          kv_(kv_config(o)),
          scheduler_(sched_config(o, loaded_->model->config()), kv_),
          runner_(*loaded_->model) {
        if (o.host_blocks > 0) attach_tiers(o);
        if (o.record_logits) {
            runner_.logits_hook = [this](const ScheduledSequence& e, std::span<const float> row) {
                logits_[{e.seq->group->request_id, e.seq->completion_index}].emplace_back(row.begin(), row.end());
            };
        }
        if (!o.spec_method.empty()) {
            DraftOptions d;
            d.num_speculative_tokens = o.spec_tokens;
            d.probabilistic = o.spec_probabilistic;
            d.confidence_threshold = o.spec_confidence_threshold;
            drafter_ = make_drafter(o.spec_method, *loaded_->model, std::move(loaded_->drafts), d);
            runner_.set_drafter(drafter_.get(), o.verify);
            if (o.spec_oracle_length > 0.0)
                runner_.set_oracle_acceptance(oracle_acceptance_rate(o.spec_oracle_length, o.spec_tokens));
        }
    }

    static std::filesystem::path dir(const std::string& fixture) {
        return std::filesystem::path(DSV4_SOURCE_DIR) / "tests" / "fixtures" / fixture;
    }
    static std::vector<int32_t> tokens(const std::string& fixture) {
        return read_npy_i32((dir(fixture) / "tokens.npy").string()).values;
    }

    void add(const std::string& id, std::vector<int32_t> prompt, int max_tokens, int n = 1) {
        SamplingParams p;
        p.temperature = 0.0;
        p.max_tokens = max_tokens;
        p.ignore_eos = true;
        p.n = n;
        add(id, std::move(prompt), p);
    }
    void add(const std::string& id, std::vector<int32_t> prompt, const SamplingParams& params) {
        GenerateRequest r;
        r.request_id = id;
        r.prompt_tokens = std::move(prompt);
        r.params = params;
        scheduler_.add(r);
    }
    void abort(const std::string& id) {
        UpdateResult r;
        scheduler_.abort(id, r);
        runner_.apply(r.state_ops);
    }

    void step() {
        SchedulerOutput out = scheduler_.schedule();
        RunnerOutput ro = runner_.execute(out);
        UpdateResult r = scheduler_.update(out, ro);
        runner_.apply(r.state_ops);
        for (const CompletionUpdate& u : r.outputs) {
            auto& info = outputs_[{u.request_id, u.output.completion_index}];
            if (u.output.prompt_tokens > 0) info.cached = u.output.cached_prompt_tokens;
            for (const GeneratedToken& t : u.output.tokens) info.tokens.push_back(t.token);
        }
    }
    void run() {
        for (int i = 0; i < 100000 && scheduler_.has_work(); ++i) step();
    }

    struct Output {
        std::vector<int32_t> tokens;
        int cached = -1;
    };
    const Output& output(const std::string& id, int completion = 0) { return outputs_[{id, completion}]; }
    const std::vector<std::vector<float>>& logits(const std::string& id, int completion = 0) {
        return logits_[{id, completion}];
    }
    Scheduler& scheduler() { return scheduler_; }
    KvCacheManager& kv() { return kv_; }
    KvTiers* tiers() { return tiers_.get(); }

  private:
    static int draft_stages(const HarnessOptions& o) {
        if (o.spec_method.empty()) return 0;
        return o.spec_method == "dspark" ? kDsparkStages : kMtpStages;
    }
    void attach_tiers(const HarnessOptions& o) {
        const StateConfig& s = loaded_->model->backend().state_config();
        const StateLayout layout =
            compute_state_layout(loaded_->model->config(), s.block_tokens, s.rewind_capacity, s.kv_dtype);
        KvTierConfig t;
        t.host_blocks = o.host_blocks;
        t.host_snapshots = o.host_snapshots;
        t.block_bytes = layout.block_bytes;
        t.snapshot_bytes = layout.snapshot_bytes;
        t.disk_dir = o.disk_dir;
        t.disk_bytes = o.disk_bytes;
        t.fingerprint = state_layout_fingerprint(layout, s.block_tokens);
        tier_memory_ = backend_->allocate_host_buffer(t.host_bytes());
        tiers_ = std::make_unique<KvTiers>(t, tier_memory_.span());
        kv_.attach_tiers(tiers_.get());
        runner_.set_tiers(tiers_.get());
    }

    static StateConfig state_config(const HarnessOptions& o) {
        StateConfig s;
        s.max_slots = o.max_num_seqs;
        s.num_blocks = o.num_blocks;
        s.block_tokens = o.block_tokens;
        s.rewind_capacity = o.rewind_capacity;
        s.num_snapshots = o.num_snapshots;
        s.kv_dtype = o.kv_dtype;
        return s;
    }
    static KvCacheConfig kv_config(const HarnessOptions& o) {
        KvCacheConfig k;
        k.max_slots = o.max_num_seqs;
        k.num_blocks = o.num_blocks;
        k.block_tokens = o.block_tokens;
        k.num_snapshots = o.num_snapshots;
        k.rewind_capacity = o.rewind_capacity;
        k.enable_prefix_caching = o.prefix_caching;
        return k;
    }
    static SchedulerConfig sched_config(const HarnessOptions& o, const ModelConfig& m) {
        SchedulerConfig s;
        s.max_num_seqs = o.max_num_seqs;
        s.max_num_batched_tokens = o.budget;
        s.long_prefill_token_threshold = o.long_prefill;
        s.max_model_len = 4096;
        s.vocab_size = m.vocab_size;
        s.eos_token_ids = {m.eos_token_id};
        s.num_speculative_tokens = o.spec_method.empty() ? 0 : o.spec_tokens;
        s.spec_disable_batch_size = o.spec_disable_batch_size;
        return s;
    }

    std::unique_ptr<Backend> backend_;
    std::unique_ptr<LoadedModel> loaded_;
    HostBuffer tier_memory_;
    std::unique_ptr<KvTiers> tiers_;
    KvCacheManager kv_;
    Scheduler scheduler_;
    ModelRunner runner_;
    std::unique_ptr<Drafter> drafter_;
    std::map<std::pair<std::string, int>, std::vector<std::vector<float>>> logits_;
    std::map<std::pair<std::string, int>, Output> outputs_;
};

// Bitwise equality of logits rows (NaN never passes).
inline ::testing::AssertionResult same_rows(const std::vector<std::vector<float>>& a,
                                            const std::vector<std::vector<float>>& b) {
    if (a.size() != b.size()) return ::testing::AssertionFailure() << a.size() << " rows vs " << b.size();
    for (size_t r = 0; r < a.size(); ++r) {
        if (a[r].size() != b[r].size()) return ::testing::AssertionFailure() << "row " << r << " length differs";
        for (size_t i = 0; i < a[r].size(); ++i) {
            if (std::isnan(a[r][i]) || std::memcmp(&a[r][i], &b[r][i], sizeof(float)) != 0) {
                return ::testing::AssertionFailure()
                       << "row " << r << " logit " << i << ": " << a[r][i] << " vs " << b[r][i];
            }
        }
    }
    return ::testing::AssertionSuccess();
}

}  // namespace dsv4::engine_test
