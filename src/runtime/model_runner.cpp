#include "runtime/model_runner.h"

#include <algorithm>
#include <chrono>
#include <exception>

#include "backend/tensor_reads.h"
#include "core/clock.h"
#include "runtime/device_sampling.h"
#include "runtime/step_logits.h"
#include "sample/sampler.h"
#include "sample/sampling_params.h"
#include "sample/spec_verify.h"

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
        out.tokens.push_back(to_generated(record_chosen(row_argmax, entry.seq->sampler)));
        for (Sequence* child : entry.fork_children)
            out.tokens.push_back(to_generated(record_chosen(row_argmax, child->sampler)));
    });
}

// sample_entry for requests sampled on the device: the draws of the sequence, then of its fork children (ids, and
// their logprobs when the request asked for them).
SequenceSample sample_entry_on_device(const ScheduledSequence& entry, std::span<const int32_t> ids,
                                      std::span<const DrawLogprobs> logprobs) {
    return guarded([&](SequenceSample& out) {
        const bool report = entry.seq->group->params.logprobs.has_value();
        auto record = [&](size_t k, SamplerState& state) {
            SampleResult r = record_chosen(ids[k], state);
            if (report) r.logprobs = to_sampled_logprobs(logprobs[k]);
            out.tokens.push_back(to_generated(r));
        };
        record(0, entry.seq->sampler);
        for (size_t c = 0; c < entry.fork_children.size(); ++c) record(c + 1, entry.fork_children[c]->sampler);
    });
}

// Whether every sampler of the entry passes `test(params, state)`.
template <typename Test>
bool every_sampler(const ScheduledSequence& entry, Test&& test) {
    const SamplingParams& params = entry.seq->group->params;
    if (!test(params, entry.seq->sampler)) return false;
    return std::all_of(entry.fork_children.begin(), entry.fork_children.end(),
                       [&](const Sequence* child) { return test(params, child->sampler); });
}

// Whether every sampler of the entry samples the raw argmax of its rows (then only argmax ids need reach the host).
bool samples_by_argmax(const ScheduledSequence& entry) {
    return every_sampler(entry, samples_raw_argmax);
}

// Whether the entry is one row whose every sampler can draw on the device (then only the drawn ids reach the host). A
// sampler over another vocabulary than the logits' stays on the host, whose sampler reports the mismatch.
bool draws_on_device(const SamplingParams& params, const SamplerState& state, int64_t vocab) {
    return state.vocab_size() == vocab && DeviceDraws::supports(params, state);
}

bool samples_on_device(const ScheduledSequence& entry, int64_t vocab) {
    return entry.drafts.empty() && every_sampler(entry, [&](const SamplingParams& params, const SamplerState& state) {
               return draws_on_device(params, state, vocab);
           });
}

// Whether the entry's drafts are verified where the logits are (DeviceDraws::add_verify, verify_device_rows): one
// sequence sampling (not greedy: greedy requests compare argmax ids), one-hot drafts (draft_sample_method greedy),
// no logprobs or constraint (the accepted drafts' logprobs and the constraint's walk need the rows), and a sampler
// the device supports. Only k + 1 ids and k pairs of masses then reach the host.
bool verifies_on_device(const ScheduledSequence& entry, int64_t vocab) {
    if (entry.drafts.empty() || !entry.fork_children.empty() || !entry.seq->draft.probs.empty()) return false;
    if (static_cast<int64_t>(entry.drafts.size()) > kMaxVerifyDrafts) return false;
    const SamplingParams& params = entry.seq->group->params;
    const SamplerState& state = entry.seq->sampler;
    if (is_greedy(params) || params.logprobs || state.has_constraint() || !draws_on_device(params, state, vocab))
        return false;
    return std::all_of(entry.drafts.begin(), entry.drafts.end(), [&](int32_t t) { return t >= 0 && t < vocab; });
}

// A verify entry decided from its device rows: draws [0, k) are the drafts' residual draws with their probe masses,
// draw k the bonus.
SequenceSample verify_entry_on_device(const ScheduledSequence& entry, std::span<const int32_t> ids,
                                      std::span<const ProbeMasses> probes, VerifyMethod method) {
    return guarded([&](SequenceSample& out) {
        const size_t k = entry.drafts.size();
        std::vector<DeviceDraftRow> rows(k);
        for (size_t i = 0; i < k; ++i) {
            const ProbeMasses& m = probes[i];
            rows[i].p_draft = m.kept > 0 ? static_cast<double>(m.probe) / static_cast<double>(m.kept) : 0.0;
            rows[i].residual = ids[i];
        }
        add_outcome(verify_device_rows(rows, ids[k], entry.drafts, entry.seq->sampler, method), out);
    });
}

// Whether the oracle (ModelRunner::set_oracle_acceptance) verifies the entry: a verify entry of one sequence whose next
// token can be drawn on the device, without logprobs or a constraint (the drafts are recorded unchecked by either).
bool oracle_verifies(const ScheduledSequence& entry, int64_t vocab, double alpha) {
    if (alpha <= 0.0 || entry.drafts.empty() || !entry.fork_children.empty()) return false;
    const SamplingParams& params = entry.seq->group->params;
    const SamplerState& state = entry.seq->sampler;
    if (params.logprobs || state.has_constraint() || !draws_on_device(params, state, vocab)) return false;
    return std::all_of(entry.drafts.begin(), entry.drafts.end(), [&](int32_t t) { return t >= 0 && t < vocab; });
}

// The oracle's verify outcome: the accepted drafts (already recorded), then the token drawn after them.
SequenceSample oracle_entry(const ScheduledSequence& entry, int accepted, int32_t drawn) {
    return guarded([&](SequenceSample& out) {
        for (int i = 0; i < accepted; ++i) {
            GeneratedToken t;
            t.token = entry.drafts[static_cast<size_t>(i)];
            out.tokens.push_back(t);
        }
        out.tokens.push_back(to_generated(record_chosen(drawn, entry.seq->sampler)));
        out.accepted = accepted;
    });
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
    const auto forward_start = std::chrono::steady_clock::now();
    const ForwardResult forward = graphs_.forward(batch, request);
    model_.backend().synchronize();  // the forward's time ends here, not in the first read of its results
    result.forward_seconds = seconds_since(forward_start);
    if (masks.prefetch != nullptr) masks.prefetch->wait();
    const auto sample_start = std::chrono::steady_clock::now();
    sample_all(output, forward.logits, result);
    result.sample_seconds = seconds_since(sample_start);
    if (drafter_ != nullptr) {
        const auto draft_start = std::chrono::steady_clock::now();
        draft(output, forward, result);
        result.forward_seconds += seconds_since(draft_start);
    }
    return result;
}

void ModelRunner::sample_all(const SchedulerOutput& output, const Tensor& logits_dev, RunnerOutput& result) {
    // The sampling entries in row order: one row each, k + 1 for a verify entry.
    std::vector<int64_t> entries;
    std::vector<RequestRows> rows;
    const int64_t vocab = logits_dev.numel() == 0 ? 0 : logits_dev.size(-1);
    DeviceDraws draws(vocab);
    std::vector<int64_t> first_draw;   // per sampling entry: its first draw, or -1
    std::vector<int> oracle_accepted;  // per sampling entry: the drafts the oracle accepted, or -1
    std::vector<bool> device_verify;   // per sampling entry: verified from its device draws
    int64_t row = 0;
    for (size_t j = 0; j < output.seqs.size(); ++j) {
        const ScheduledSequence& entry = output.seqs[j];
        if (!entry.sample) continue;
        entries.push_back(static_cast<int64_t>(j));
        RequestRows r{entry.drafts.empty() ? 1 : entry.num_tokens, RowsRead::kRows};
        first_draw.push_back(-1);
        oracle_accepted.push_back(-1);
        device_verify.push_back(false);
        if (!logits_hook && oracle_verifies(entry, vocab, oracle_alpha_)) {
            SamplerState& state = entry.seq->sampler;
            const int accepted = oracle_accepted_drafts(oracle_alpha_, static_cast<int>(entry.drafts.size()),
                                                        state.seed(), static_cast<uint64_t>(state.num_output_tokens()));
            for (int d = 0; d < accepted; ++d) state.record_output(entry.drafts[static_cast<size_t>(d)]);
            r.read = RowsRead::kNothing;
            first_draw.back() = static_cast<int64_t>(draws.size());
            oracle_accepted.back() = accepted;
            draws.add(row + accepted, entry.seq->group->params, state);
        } else if (!logits_hook && samples_by_argmax(entry)) {
            r.read = RowsRead::kArgmax;
        } else if (!logits_hook && verifies_on_device(entry, vocab)) {
            r.read = RowsRead::kNothing;
            first_draw.back() = static_cast<int64_t>(draws.size());
            device_verify.back() = true;
            draws.add_verify(row, entry.drafts, entry.seq->group->params, entry.seq->sampler);
        } else if (!logits_hook && samples_on_device(entry, vocab)) {
            r.read = RowsRead::kNothing;
            first_draw.back() = static_cast<int64_t>(draws.size());
            const SamplingParams& params = entry.seq->group->params;
            draws.add(row, params, entry.seq->sampler);
            for (Sequence* child : entry.fork_children) draws.add(row, params, child->sampler);
        }
        rows.push_back(r);
        row += r.count;
    }
    const SampledRows sampled = read_sampled_rows(model_.backend(), logits_dev, draws.args());
    const auto n = static_cast<int64_t>(entries.size());
    auto draw_count = [&](int64_t i) {  // a verify entry's k + 1, else one for the sequence and each fork child
        const ScheduledSequence& entry = output.seqs[entries[i]];
        return device_verify[i] ? entry.drafts.size() + 1 : 1 + entry.fork_children.size();
    };
    auto draws_of = [&](int64_t i) {
        return std::span<const int32_t>(sampled.ids).subspan(static_cast<size_t>(first_draw[i]), draw_count(i));
    };
    auto probes_of = [&](int64_t i) {
        return std::span<const ProbeMasses>(sampled.probes).subspan(static_cast<size_t>(first_draw[i]), draw_count(i));
    };
    auto logprobs_of = [&](int64_t i) {
        if (sampled.logprobs.empty()) return std::span<const DrawLogprobs>();
        const size_t count = 1 + output.seqs[entries[i]].fork_children.size();
        return std::span<const DrawLogprobs>(sampled.logprobs).subspan(static_cast<size_t>(first_draw[i]), count);
    };
    for (int64_t i = 0; i < n; ++i) {  // a row without a choice goes to the host sampler, which reports why
        if (first_draw[i] < 0) continue;
        const auto own = draws_of(i);
        if (std::find(own.begin(), own.end(), kNoSample) == own.end()) continue;
        rows[i].read = RowsRead::kRows;
        if (oracle_accepted[i] > 0) {  // the host verifies the rows instead (and reports the fault)
            const ScheduledSequence& entry = output.seqs[entries[i]];
            const std::vector<int64_t> recorded(entry.drafts.begin(), entry.drafts.begin() + oracle_accepted[i]);
            entry.seq->sampler.unrecord_outputs(recorded);
        }
        oracle_accepted[i] = -1;
        device_verify[i] = false;
    }
    const StepLogits logits(model_.backend(), logits_dev, rows);
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
        switch (logits.got(i)) {
            case RowsRead::kNothing:
                if (device_verify[i]) {
                    out = verify_entry_on_device(entry, draws_of(i), probes_of(i), verify_method_);
                } else {
                    out = oracle_accepted[i] >= 0 ? oracle_entry(entry, oracle_accepted[i], draws_of(i)[0])
                                                  : sample_entry_on_device(entry, draws_of(i), logprobs_of(i));
                }
                break;
            case RowsRead::kArgmax:
                out = entry.drafts.empty() ? sample_entry_by_argmax(entry, logits.argmax(i)[0])
                                           : verify_entry_by_argmax(entry, logits.argmax(i));
                break;
            case RowsRead::kRows:
                out = entry.drafts.empty() ? sample_entry(entry, logits.rows(i))
                                           : verify_entry(entry, logits.rows(i), verify_method_);
                break;
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
