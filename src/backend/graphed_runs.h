// GraphedRuns: the warm-up / record / replay policy of one kind of recordable work, keyed by its launch shape (the
// runner's forward steps, runtime/step_graphs.h; the MTP drafter's absorb and recursive substeps,
// spec/mtp_drafter.cpp). The first run of a key is eager (lazy uploads happen outside any capture), the second is
// recorded and replayed, later ones replay. A replayed run's results live at the recorded addresses, which the
// caller's deterministic scratch makes the same for every run of a key, so the recorded run's Result is returned
// again. Key 0 always runs eagerly. Callers keep their keys apart (one recorder holds them all): each mixes in its
// own seed.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <utility>

#include "backend/graph_recorder.h"

namespace dsv4 {

// Steps (and substeps) that feed more tokens a sequence run eagerly: prefill chunks, whose kernels are long, so launch
// cost does not matter (decode feeds 1, draft verification k + 1).
inline constexpr int32_t kMaxGraphTokensPerSeq = 16;

// FNV-style mixing of a graph key's fields.
inline uint64_t mix_graph_key(uint64_t h, uint64_t v) {
    return (h ^ v) * 0x100000001b3ull + (h >> 29);
}

template <class Result>
class GraphedRuns {
  public:
    explicit GraphedRuns(GraphRecorder* recorder) : recorder_(recorder) {}

    // Whether work can be recorded now (a recorder, and the backend not profiling).
    bool available() const { return recorder_ != nullptr && recorder_->graphs_available(); }
    // The one key formula of every graphed run: 0 (run eagerly) when nothing can be recorded or `batch` is not a
    // uniform step of at most kMaxGraphTokensPerSeq tokens a sequence (mixed lengths, prefill chunks); otherwise the
    // caller's seed, the batch's shape (token, sequence and logit-row counts, tokens a sequence), the recorder's own
    // part (GraphRecorder::shape_key) and `extra` (whatever else the recorded work depends on) mixed, never 0.
    uint64_t key(uint64_t seed, const StepBatch& batch, std::span<const uint64_t> extra = {}) const {
        if (!available()) return 0;
        const int32_t per_seq = batch.uniform_tokens_per_seq();
        if (per_seq == 0 || per_seq > kMaxGraphTokensPerSeq) return 0;
        uint64_t key = seed;
        for (uint64_t field : {static_cast<uint64_t>(batch.n_tokens()), static_cast<uint64_t>(batch.seqs.size()),
                               static_cast<uint64_t>(per_seq), static_cast<uint64_t>(batch.logit_rows.size()),
                               recorder_->shape_key(batch)})
            key = mix_graph_key(key, field);
        for (uint64_t field : extra) key = mix_graph_key(key, field);
        return key == 0 ? 1 : key;
    }

    // Runs `work` (a callable returning Result) eagerly, recording, or replays what was recorded under `key`.
    template <class Work>
    Result run(uint64_t key, Work&& work) {
        if (key == 0) return work();
        if (auto it = recorded_.find(key); it != recorded_.end()) {
            recorder_->replay(key);
            ++replays_;
            return it->second;
        }
        if (warmed_.insert(key).second) return work();
        recorder_->begin_capture();
        Result result = work();  // recorded, not run
        recorder_->end_capture(key);
        recorded_.emplace(key, result);
        recorder_->replay(key);
        ++replays_;
        return result;
    }

    int64_t recorded() const { return static_cast<int64_t>(recorded_.size()); }
    int64_t replays() const { return replays_; }

  private:
    GraphRecorder* recorder_;  // null: never records (no recorder, or --enforce-eager)
    std::set<uint64_t> warmed_;
    std::map<uint64_t, Result> recorded_;
    int64_t replays_ = 0;
};

}  // namespace dsv4
