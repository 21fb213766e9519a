// Expert-parallel runs of the golden fixtures on loopback ranks: a few sequences cut from a fixture's tokens, fed
// in the same steps (two prefill chunks, then single-token decode) either all on one rank with the plain moe op, or
// spread over N ranks (sequence i on rank i % N; data-parallel attention, expert-parallel MoE). Every step's logits
// of every sequence are kept for bit-for-bit comparison.
#pragma once

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "../model/golden_support.h"
#include "dist/eplb_controller.h"
#include "dist/expert_parallel_moe.h"
#include "dist/loopback_communicator.h"
#include "dist/rank_group.h"
#include "model/weights_loader.h"

namespace dsv4::dist::testing {

struct SequencePlan {
    std::vector<int32_t> tokens;
};

// Steps: [0, c1), [c1, c2), then one token per step: every sequence feeds the same schedule.
struct Schedule {
    int64_t chunk1 = 9, chunk2 = 21, total = 24;
};

inline std::vector<SequencePlan> make_sequences(const std::vector<int32_t>& fixture_tokens, int count,
                                                const Schedule& s) {
    std::vector<SequencePlan> out;
    for (int i = 0; i < count; ++i) {
        const auto begin = fixture_tokens.begin() + 37 * i;
        out.push_back({std::vector<int32_t>(begin, begin + s.total)});
    }
    return out;
}

inline std::vector<std::pair<int64_t, int64_t>> step_ranges(const Schedule& s) {
    std::vector<std::pair<int64_t, int64_t>> r = {{0, s.chunk1}, {s.chunk1, s.chunk2}};
    for (int64_t t = s.chunk2; t < s.total; ++t) r.emplace_back(t, t + 1);
    return r;
}

// logits[seq][step]: float32 [tokens of the step, vocab].
using RunLogits = std::vector<std::vector<std::vector<float>>>;

// One rank's batch of a step: its sequences (local slots 0, 1, ...), logits of every row.
inline StepBatch rank_batch(const std::vector<SequencePlan>& seqs, const std::vector<int>& mine,
                            std::pair<int64_t, int64_t> range) {
    StepBatch b;
    for (size_t i = 0; i < mine.size(); ++i) {
        const auto& t = seqs[mine[i]].tokens;
        const auto slot = static_cast<int32_t>(i);
        b.add_sequence(slot, range.first, std::span(t).subspan(range.first, range.second - range.first), {slot * 8});
    }
    for (int32_t r = 0; r < static_cast<int32_t>(b.n_tokens()); ++r) b.logit_rows.push_back(r);
    return b;
}

// Splits a step's logits [rows, vocab] back per sequence of the batch.
inline void keep_logits(const std::vector<float>& all, const std::vector<int>& mine, int64_t tokens_each, int64_t vocab,
                        RunLogits& out) {
    for (size_t i = 0; i < mine.size(); ++i) {
        const auto first = all.begin() + static_cast<int64_t>(i) * tokens_each * vocab;
        out[mine[i]].emplace_back(first, first + tokens_each * vocab);
    }
}

using BackendFactory = std::function<std::unique_ptr<Backend>(int rank)>;

inline std::unique_ptr<Backend> cpu_exact(int) {
    return make_cpu_backend(Numerics::kExact, 1);
}

inline RunLogits single_rank_run(const std::string& fixture, const std::vector<SequencePlan>& seqs, const Schedule& s,
                                 const BackendFactory& make_backend = cpu_exact) {
    auto backend = make_backend(0);
    auto loaded = load_model(golden::fixture_dir(fixture), *backend, golden::test_state(4));
    std::vector<int> all(seqs.size());
    for (size_t i = 0; i < seqs.size(); ++i) all[i] = static_cast<int>(i);
    RunLogits out(seqs.size());
    const int64_t vocab = loaded->model->config().vocab_size;
    for (auto range : step_ranges(s)) {
        const StepBatch b = rank_batch(seqs, all, range);
        keep_logits(loaded->model->logits(b), all, range.second - range.first, vocab, out);
    }
    return out;
}

struct EpRunOptions {
    int ranks = 1;
    ExpertParallelOptions moe;
    // Placement over `ranks` for a model of `layers` layers and `experts` experts.
    std::function<ExpertPlacement(int layers, int experts, int ranks)> placement;
    int64_t rebalance_after_step = -1;  // EPLB re-plans (and moves experts) after this step, when >= 0
    int fail_rank = -1;                 // this rank throws at layer 2 of step 1 (a dying rank)
    BackendFactory make_backend = cpu_exact;
    // The communicators over the ranks' backends (default: loopback).
    std::function<std::vector<std::unique_ptr<Communicator>>(const std::vector<Backend*>&)> make_comms;
};

// Sums of the ranks' ExpertParallelStats, so a test can show the exchanges really ran.
struct EpTotals {
    int64_t pairs_sent = 0, pairs_received = 0, moe_layers = 0, low_latency_layers = 0, experts_moved = 0;
};

inline RunLogits expert_parallel_run(const std::string& fixture, const std::vector<SequencePlan>& seqs,
                                     const Schedule& s, const EpRunOptions& o, EpTotals* totals = nullptr) {
    const ModelConfig config = load_model_config(golden::fixture_dir(fixture) / "config.json");
    const auto placement =
        std::make_shared<const ExpertPlacement>(o.placement(config.num_layers, config.n_routed_experts, o.ranks));
    std::vector<std::unique_ptr<Backend>> backends;
    std::vector<Backend*> raw_backends;
    for (int r = 0; r < o.ranks; ++r) {
        backends.push_back(o.make_backend(r));
        raw_backends.push_back(backends.back().get());
    }
    auto group = o.make_comms ? o.make_comms(raw_backends) : make_loopback_group(o.ranks);
    std::vector<Communicator*> comms;
    for (auto& c : group) comms.push_back(c.get());
    RunLogits out(seqs.size());
    std::mutex out_mutex;
    EpTotals sums;
    run_ranks(comms, [&](int rank) {
        auto backend = make_cpu_backend(Numerics::kExact, 1);
        auto loaded =
            load_model(golden::fixture_dir(fixture), *backend, golden::test_state(4), placement->residency(rank));
        DeepseekV4& model = *loaded->model;
        ExpertParallelMoe moe(*comms[rank], *backend, config, placement, o.moe);
        model.set_moe_dispatch(&moe);
        EplbController eplb(
            moe, model,
            [&](int layer, int expert) { return load_expert_weights(config, *loaded->bound, *backend, layer, expert); },
            {1000000, 0});
        std::vector<int> mine;
        for (int i = rank; i < static_cast<int>(seqs.size()); i += o.ranks) mine.push_back(i);
        int64_t step = 0;
        for (auto range : step_ranges(s)) {
            if (step == 1 && rank == o.fail_rank) {
                model.debug_hook = [](const std::string& name, const Tensor&) {
                    if (name == "moe2") throw Error("injected failure: rank died in layer 2");
                };
            }
            const StepBatch b = rank_batch(seqs, mine, range);
            const ForwardResult r = expert_parallel_forward(model, moe, b);
            const std::vector<float> logits = model.host_logits(r);
            {
                std::lock_guard lock(out_mutex);
                keep_logits(logits, mine, range.second - range.first, config.vocab_size, out);
            }
            if (step == o.rebalance_after_step) eplb.rebalance();
            ++step;
        }
        std::lock_guard lock(out_mutex);
        sums.pairs_sent += moe.stats().pairs_sent;
        sums.pairs_received += moe.stats().pairs_received;
        sums.moe_layers += moe.stats().moe_layers;
        sums.low_latency_layers += moe.stats().low_latency_layers;
        sums.experts_moved += eplb.experts_moved();
    });
    if (totals != nullptr) *totals = sums;
    return out;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace dsv4::dist::testing
