#include "runtime/model_runner.h"

#include <exception>

#include "sample/sampler.h"

namespace dsv4 {
namespace {

GeneratedToken to_generated(const SampleResult& r) {
    GeneratedToken t;
    t.token = static_cast<int32_t>(r.token);
    if (r.logprobs) {
        t.logprob = r.logprobs->logprob;
        t.top.reserve(r.logprobs->top.size());
        for (const TopLogprob& top : r.logprobs->top) t.top.push_back({static_cast<int32_t>(top.token), top.logprob});
    }
    return t;
}

// Samples entry's sequence (and its fork children) from one logits row.
SequenceSample sample_entry(const ScheduledSequence& entry, std::span<const float> row) {
    SequenceSample out;
    try {
        const SamplingParams& params = entry.seq->group->params;
        out.tokens.push_back(to_generated(sample(row, params, entry.seq->sampler)));
        for (Sequence* child : entry.fork_children)
            out.tokens.push_back(to_generated(sample(row, params, child->sampler)));
    } catch (const std::exception& e) {
        out.tokens.clear();
        out.error = e.what();
    }
    return out;
}

}  // namespace

StepBatch build_step_batch(const SchedulerOutput& output) {
    StepBatch batch;
    batch.tokens.reserve(output.num_batched_tokens);
    batch.positions.reserve(output.num_batched_tokens);
    batch.seq_index.reserve(output.num_batched_tokens);
    batch.seqs.reserve(output.seqs.size());
    for (const ScheduledSequence& entry : output.seqs) {
        const Sequence& seq = *entry.seq;
        const auto begin = static_cast<int32_t>(batch.tokens.size());
        batch.add_sequence(seq.kv.slot, entry.start,
                           std::span<const int32_t>(seq.tokens).subspan(entry.start, entry.num_tokens), seq.kv.blocks);
        if (entry.sample) batch.logit_rows.push_back(begin + entry.num_tokens - 1);
    }
    return batch;
}

void apply_state_ops(Backend& backend, std::span<const StateOp> ops, KvTiers* tiers) {
    for (const StateOp& op : ops) {
        switch (op.kind) {
            case StateOp::Kind::kResetSlot:
                backend.reset_slot(op.a);
                break;
            case StateOp::Kind::kRestoreSnapshot:
                backend.restore_snapshot(op.a, op.b, op.boundary);
                break;
            case StateOp::Kind::kSaveSnapshot:
                backend.save_snapshot(op.a, op.b, op.boundary);
                break;
            case StateOp::Kind::kCopySlot:
                backend.copy_slot(op.a, op.b);
                break;
            case StateOp::Kind::kCopyBlock:
                backend.copy_block(op.a, op.b);
                break;
            default:  // the host / disk tiers' copies (runtime/tier_ops.cpp)
                apply_tier_op(backend, op, tiers);
                break;
        }
    }
    if (tiers != nullptr) tiers->ops_applied();
}

RunnerOutput ModelRunner::execute(const SchedulerOutput& output) {
    apply(output.state_ops);
    RunnerOutput result;
    result.samples.resize(output.seqs.size());
    if (output.seqs.empty()) return result;
    const StepBatch batch = build_step_batch(output);
    const std::vector<float> logits = model_.host_logits(graphs_.forward(batch));
    const int64_t vocab = model_.config().vocab_size;
    // Row r of the logits belongs to the r-th sampling entry.
    std::vector<int64_t> entries, rows;
    for (size_t j = 0; j < output.seqs.size(); ++j) {
        if (!output.seqs[j].sample) continue;
        rows.push_back(static_cast<int64_t>(entries.size()));
        entries.push_back(static_cast<int64_t>(j));
    }
    const auto n = static_cast<int64_t>(entries.size());
    if (logits_hook) {
        for (int64_t i = 0; i < n; ++i) {
            logits_hook(output.seqs[entries[i]], std::span<const float>(logits).subspan(rows[i] * vocab, vocab));
        }
    }
    // Each entry owns its samplers and reads its own row: independent, so in parallel.
#pragma omp parallel for schedule(dynamic) if (n > 1)
    for (int64_t i = 0; i < n; ++i) {
        const ScheduledSequence& entry = output.seqs[entries[i]];
        result.samples[entries[i]] =
            sample_entry(entry, std::span<const float>(logits).subspan(rows[i] * vocab, vocab));
    }
    return result;
}

}  // namespace dsv4
