#include "runtime/model_runner.h"

#include <algorithm>
#include <exception>

#include "runtime/step_logits.h"
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

// Runs `produce`, which fills a sequence's sample; a failure (e.g. non-finite logits) becomes the sample's error,
// with no tokens.
template <typename Produce>
SequenceSample guarded(Produce&& produce) {
    SequenceSample out;
    try {
        produce(out);
    } catch (const std::exception& e) {
        out.tokens.clear();
        out.error = e.what();
    }
    return out;
}

void add_outcome(const VerifyOutcome& v, SequenceSample& out) {
    for (const SampleResult& r : v.tokens) out.tokens.push_back(to_generated(r));
    out.accepted = v.accepted;
}

// Verifies a verify entry's drafts against its k + 1 logits rows; the emitted tokens are recorded in its sampler.
SequenceSample verify_entry(const ScheduledSequence& entry, std::span<const float> rows, VerifyMethod method) {
    return guarded([&](SequenceSample& out) {
        Sequence& seq = *entry.seq;
        const size_t vocab = rows.size() / (entry.drafts.size() + 1);
        DraftProposal draft;
        draft.tokens = entry.drafts;
        if (!seq.draft.probs.empty()) {
            draft.probs.assign(seq.draft.probs.begin(), seq.draft.probs.begin() + entry.drafts.size() * vocab);
        }
        add_outcome(verify_drafts(rows, draft, seq.group->params, seq.sampler, method), out);
    });
}

// verify_entry for a request whose sample is the raw argmax (samples_raw_argmax), from its rows' argmax ids.
SequenceSample verify_entry_by_argmax(const ScheduledSequence& entry, std::span<const int32_t> row_argmax) {
    return guarded([&](SequenceSample& out) {
        add_outcome(verify_greedy_argmax(row_argmax, entry.drafts, entry.seq->sampler), out);
    });
}

// Samples entry's sequence (and its fork children) from one logits row.
SequenceSample sample_entry(const ScheduledSequence& entry, std::span<const float> row) {
    return guarded([&](SequenceSample& out) {
        const SamplingParams& params = entry.seq->group->params;
        out.tokens.push_back(to_generated(sample(row, params, entry.seq->sampler)));
        for (Sequence* child : entry.fork_children)
            out.tokens.push_back(to_generated(sample(row, params, child->sampler)));
    });
}

// sample_entry for requests whose sample is the raw argmax (samples_raw_argmax), from the row's argmax id.
SequenceSample sample_entry_by_argmax(const ScheduledSequence& entry, int32_t row_argmax) {
    return guarded([&](SequenceSample& out) {
        out.tokens.push_back(to_generated(record_argmax(row_argmax, entry.seq->sampler)));
        for (Sequence* child : entry.fork_children)
            out.tokens.push_back(to_generated(record_argmax(row_argmax, child->sampler)));
    });
}

// Whether every sampler of the entry samples the raw argmax of its rows (then only argmax ids need reach the host).
bool samples_by_argmax(const ScheduledSequence& entry) {
    const SamplingParams& params = entry.seq->group->params;
    if (!samples_raw_argmax(params, entry.seq->sampler)) return false;
    return std::all_of(entry.fork_children.begin(), entry.fork_children.end(),
                       [&](const Sequence* child) { return samples_raw_argmax(params, child->sampler); });
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
        if (!entry.drafts.empty()) {  // verify: the last token, then the drafts; every row's logits
            std::vector<int32_t> fed{seq.tokens[entry.start]};
            fed.insert(fed.end(), entry.drafts.begin(), entry.drafts.end());
            batch.add_sequence(seq.kv.slot, entry.start, fed, seq.kv.blocks);
            for (int32_t i = 0; i < entry.num_tokens; ++i) batch.logit_rows.push_back(begin + i);
            continue;
        }
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

bool ModelRunner::prefetch_masks(const SchedulerOutput& output) {
    std::vector<SamplerState*> states;
    for (const ScheduledSequence& entry : output.seqs) {
        if (!entry.sample) continue;
        if (entry.seq->sampler.has_constraint()) states.push_back(&entry.seq->sampler);
        for (Sequence* child : entry.fork_children) {
            if (child->sampler.has_constraint()) states.push_back(&child->sampler);
        }
    }
    if (states.empty()) return false;
    if (!prefetch_) prefetch_ = std::make_unique<MaskPrefetcher>();
    prefetch_->start(std::move(states));
    return true;
}

RunnerOutput ModelRunner::execute(const SchedulerOutput& output) {
    apply(output.state_ops);
    RunnerOutput result;
    result.samples.resize(output.seqs.size());
    if (output.seqs.empty()) return result;
    const StepBatch batch = build_step_batch(output);
    // The masks are computed while the forward pass runs; every exit waits for them (the samplers are shared).
    struct WaitForMasks {
        MaskPrefetcher* prefetch;
        ~WaitForMasks() {
            if (prefetch != nullptr) prefetch->wait();
        }
    } masks{prefetch_masks(output) ? prefetch_.get() : nullptr};
    ForwardRequest request;
    if (drafter_ != nullptr) request.hidden_layers = drafter_->hidden_layers();
    const ForwardResult forward = graphs_.forward(batch, request);
    if (masks.prefetch != nullptr) masks.prefetch->wait();
    sample_all(output, forward.logits, result);
    if (drafter_ != nullptr) draft(output, forward, result);
    return result;
}

void ModelRunner::sample_all(const SchedulerOutput& output, const Tensor& logits_dev, RunnerOutput& result) {
    // The sampling entries in row order: one row each, k + 1 for a verify entry.
    std::vector<int64_t> entries;
    std::vector<RequestRows> rows;
    for (size_t j = 0; j < output.seqs.size(); ++j) {
        const ScheduledSequence& entry = output.seqs[j];
        if (!entry.sample) continue;
        entries.push_back(static_cast<int64_t>(j));
        rows.push_back({entry.drafts.empty() ? 1 : entry.num_tokens, !logits_hook && samples_by_argmax(entry)});
    }
    const StepLogits logits(model_.backend(), logits_dev, rows);
    const auto n = static_cast<int64_t>(entries.size());
    if (logits_hook) {
        for (int64_t i = 0; i < n; ++i) {
            const auto all = logits.rows(i);
            logits_hook(output.seqs[entries[i]], all.subspan(all.size() - all.size() / rows[i].count));  // the last row
        }
    }
    // Each entry owns its samplers and reads its own rows: independent, so in parallel.
#pragma omp parallel for schedule(dynamic) if (n > 1)
    for (int64_t i = 0; i < n; ++i) {
        const ScheduledSequence& entry = output.seqs[entries[i]];
        SequenceSample& out = result.samples[entries[i]];
        if (logits.has_argmax(i)) {
            out = entry.drafts.empty() ? sample_entry_by_argmax(entry, logits.argmax(i)[0])
                                       : verify_entry_by_argmax(entry, logits.argmax(i));
        } else {
            out = entry.drafts.empty() ? sample_entry(entry, logits.rows(i))
                                       : verify_entry(entry, logits.rows(i), verify_method_);
        }
    }
}

void ModelRunner::draft(const SchedulerOutput& output, const ForwardResult& target, RunnerOutput& result) {
    std::vector<DraftInput> inputs(output.seqs.size());
    int32_t row = 0;
    for (size_t j = 0; j < output.seqs.size(); ++j) {
        const ScheduledSequence& entry = output.seqs[j];
        const Sequence& seq = *entry.seq;
        const SequenceSample& sample = result.samples[j];
        DraftInput& in = inputs[j];
        in.slot = seq.kv.slot;
        in.block_table = seq.kv.blocks;
        in.row_begin = row;
        in.start = entry.start;
        row += entry.num_tokens;
        if (!sample.error.empty()) continue;  // the sequence fails: nothing to absorb
        if (!entry.drafts.empty()) {          // the accepted drafts and the correction token follow the last token
            for (const GeneratedToken& t : sample.tokens) in.next_tokens.push_back(t.token);
        } else {
            // Final rows are the chunk's; the token after each is the next known token or the one just sampled.
            const int64_t end = entry.start + entry.num_tokens;
            for (int64_t p = entry.start + 1; p < end; ++p) in.next_tokens.push_back(seq.tokens[p]);
            in.next_tokens.push_back(entry.sample ? sample.tokens.at(0).token : seq.tokens[end]);
        }
        in.propose = output.propose_drafts && entry.sample;
        in.seed = seq.sampler.seed();
        in.base = static_cast<uint64_t>(seq.sampler.num_output_tokens());
        in.temperature = seq.group->params.temperature;
    }
    std::vector<DraftOutput> drafts;
    try {
        drafts = drafter_->step(target, inputs);
    } catch (const std::exception&) {
        // A drafter failure (e.g. non-finite draft logits) costs this step's proposals, never the requests: the
        // next steps decode without drafts until the drafter proposes again.
        return;
    }
    for (size_t j = 0; j < drafts.size(); ++j) {
        result.samples[j].next_draft = std::move(drafts[j].proposal);
        result.samples[j].written_end = drafts[j].written_end;
    }
}

}  // namespace dsv4
