// GraphedRuns (backend/graphed_runs.h): the one key formula of the runner's step graphs and the drafter's substep
// graphs, and the warm-up / record / replay policy, against a recorder that only counts what it is asked to do.
#include "backend/graphed_runs.h"

#include <gtest/gtest.h>

#include <vector>

namespace dsv4 {
namespace {

class CountingRecorder final : public GraphRecorder {
  public:
    bool available = true;
    uint64_t shape = 7;
    int captures = 0;
    std::vector<uint64_t> replayed;
    bool capturing = false;

    bool graphs_available() const override { return available; }
    bool replay(uint64_t key) override {
        replayed.push_back(key);
        return true;
    }
    void begin_capture() override {
        capturing = true;
        ++captures;
    }
    void end_capture(uint64_t) override { capturing = false; }
    uint64_t shape_key(const StepBatch&) const override { return shape; }
};

StepBatch decode_batch(int seqs, int tokens_per_seq) {
    StepBatch batch;
    std::vector<int32_t> ids(static_cast<size_t>(tokens_per_seq), 3);
    for (int s = 0; s < seqs; ++s) batch.add_sequence(s, 100, ids, {0});
    batch.logit_rows.push_back(0);
    return batch;
}

TEST(GraphedRuns, KeyIsZeroWhereStepsRunEagerly) {
    CountingRecorder recorder;
    GraphedRuns<int> runs(&recorder);
    EXPECT_NE(runs.key(1, decode_batch(4, 1)), 0u);
    EXPECT_NE(runs.key(1, decode_batch(2, kMaxGraphTokensPerSeq)), 0u);
    EXPECT_EQ(runs.key(1, decode_batch(2, kMaxGraphTokensPerSeq + 1)), 0u);  // a prefill chunk
    StepBatch mixed = decode_batch(2, 1);
    const int32_t two[] = {1, 2};
    mixed.add_sequence(9, 5, two, {0});
    EXPECT_EQ(runs.key(1, mixed), 0u);  // mixed lengths
    EXPECT_EQ(runs.key(1, StepBatch{}), 0u);
    recorder.available = false;  // e.g. per-kernel profiling
    EXPECT_EQ(runs.key(1, decode_batch(4, 1)), 0u);
    EXPECT_EQ(GraphedRuns<int>(nullptr).key(1, decode_batch(4, 1)), 0u);  // --enforce-eager
}

TEST(GraphedRuns, KeyTellsShapesSeedsAndExtrasApart) {
    CountingRecorder recorder;
    GraphedRuns<int> runs(&recorder);
    const uint64_t base = runs.key(1, decode_batch(4, 1));
    EXPECT_EQ(runs.key(1, decode_batch(4, 1)), base);  // a function of its fields only
    EXPECT_NE(runs.key(2, decode_batch(4, 1)), base);  // another caller's seed
    EXPECT_NE(runs.key(1, decode_batch(5, 1)), base);
    EXPECT_NE(runs.key(1, decode_batch(2, 2)), base);
    StepBatch more_logits = decode_batch(4, 1);
    more_logits.logit_rows.push_back(1);
    EXPECT_NE(runs.key(1, more_logits), base);
    const uint64_t extra[] = {5};
    EXPECT_NE(runs.key(1, decode_batch(4, 1), extra), base);
    recorder.shape = 8;  // the backend's own part (context buckets)
    EXPECT_NE(runs.key(1, decode_batch(4, 1)), base);
}

TEST(GraphedRuns, WarmsUpThenRecordsThenReplays) {
    CountingRecorder recorder;
    GraphedRuns<int> runs(&recorder);
    int eager = 0, recorded = 0;
    auto work = [&] {
        ++(recorder.capturing ? recorded : eager);
        return 40 + eager + recorded;
    };
    EXPECT_EQ(runs.run(9, work), 41);  // warm-up: eager
    EXPECT_EQ(runs.run(9, work), 42);  // recorded and replayed
    EXPECT_EQ(runs.run(9, work), 42);  // replayed: the recorded result, work not called
    EXPECT_EQ(eager, 1);
    EXPECT_EQ(recorded, 1);
    EXPECT_EQ(recorder.captures, 1);
    EXPECT_EQ(recorder.replayed, (std::vector<uint64_t>{9, 9}));
    EXPECT_EQ(runs.recorded(), 1);
    EXPECT_EQ(runs.replays(), 2);
    runs.run(0, work);  // key 0: always eager
    runs.run(0, work);
    EXPECT_EQ(eager, 3);
    EXPECT_EQ(recorder.captures, 1);
}

}  // namespace
}  // namespace dsv4
