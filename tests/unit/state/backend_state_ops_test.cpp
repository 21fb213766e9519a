// The backend ops the engine added (backend.h): save_snapshot / restore_snapshot, copy_slot and copy_block, on the
// CPU backend with the fixture models. Every comparison is bit-exact: a sequence resumed from a snapshot or forked
// from a copied slot must produce exactly the logits of a cold run over the same tokens.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "core/npy.h"
#include "model/model_loader.h"

namespace dsv4 {
namespace {

struct Model {
    std::unique_ptr<Backend> backend;
    std::unique_ptr<LoadedModel> loaded;
    std::vector<int32_t> tokens;

    DeepseekV4& model() { return *loaded->model; }
    Backend& b() { return *backend; }

    // Logits of every fed position.
    std::vector<float> feed(int32_t slot, int64_t start, std::span<const int32_t> toks, std::vector<int32_t> table) {
        StepBatch batch;
        batch.add_sequence(slot, start, toks, std::move(table));
        for (int32_t i = 0; i < static_cast<int32_t>(toks.size()); ++i) batch.logit_rows.push_back(i);
        return model().logits(batch);
    }
};

Model open(const std::string& name) {
    const auto dir = std::filesystem::path(DSV4_SOURCE_DIR) / "tests" / "fixtures" / name;
    StateConfig s;
    s.max_slots = 3;
    s.num_blocks = 12;
    s.block_tokens = 128;
    s.rewind_capacity = 16;
    s.num_snapshots = 2;
    Model m;
    m.backend = make_cpu_backend(Numerics::kExact, 1);
    m.loaded = load_model(dir, *m.backend, s);
    m.tokens = read_npy_i32((dir / "tokens.npy").string()).values;
    return m;
}

::testing::AssertionResult bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return ::testing::AssertionFailure() << "sizes " << a.size() << " vs " << b.size();
    for (size_t i = 0; i < a.size(); ++i) {
        if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0 || std::isnan(a[i])) {
            return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << b[i];
        }
    }
    return ::testing::AssertionSuccess();
}

std::span<const int32_t> part(const std::vector<int32_t>& t, size_t begin, size_t end) {
    return std::span<const int32_t>(t).subspan(begin, end - begin);
}

class StateOps : public ::testing::TestWithParam<const char*> {};

TEST_P(StateOps, ChunkedFeedingIsBitExact) {
    Model m = open(GetParam());
    m.b().reset_slot(0);
    const auto whole = m.feed(0, 0, part(m.tokens, 0, 270), {0, 1, 2});
    m.b().reset_slot(1);
    std::vector<float> chunked;
    for (auto [begin, end] : {std::pair<size_t, size_t>{0, 5}, {5, 130}, {130, 131}, {131, 256}, {256, 270}}) {
        auto part_logits = m.feed(1, static_cast<int64_t>(begin), part(m.tokens, begin, end), {3, 4, 5});
        chunked.insert(chunked.end(), part_logits.begin(), part_logits.end());
    }
    EXPECT_TRUE(bit_equal(whole, chunked));
}

TEST_P(StateOps, SnapshotResumeMatchesAColdRun) {
    Model m = open(GetParam());
    const auto& t = m.tokens;
    // Slot 0 computes 266 positions (10 past the boundary, within the rewind capacity) and saves boundary 256.
    m.b().reset_slot(0);
    m.feed(0, 0, part(t, 0, 266), {0, 1, 2});
    m.b().save_snapshot(0, 1, 256);
    // Slot 1 resumes at 256 on slot 0's first two blocks, with other tokens than slot 0 saw after 256.
    std::vector<int32_t> other(t.begin(), t.begin() + 280);
    for (size_t i = 256; i < other.size(); ++i) other[i] = (other[i] * 7 + 3) % 300 + 2;
    m.b().reset_slot(1);
    m.b().restore_snapshot(1, 1, 256);
    const auto resumed = m.feed(1, 256, part(other, 256, 280), {0, 1, 3});
    // Cold: the whole sequence from scratch in one chunk.
    m.b().reset_slot(2);
    const auto cold = m.feed(2, 0, part(other, 0, 280), {4, 5, 6});
    const size_t vocab = m.model().config().vocab_size;
    std::vector<float> cold_tail(cold.end() - static_cast<std::ptrdiff_t>(24 * vocab), cold.end());
    EXPECT_TRUE(bit_equal(resumed, cold_tail));
}

TEST_P(StateOps, ForkedSlotsContinueIndependentlyAndExactly) {
    Model m = open(GetParam());
    const auto& t = m.tokens;
    m.b().reset_slot(0);
    m.feed(0, 0, part(t, 0, 200), {0, 1});
    // Fork at 200: slot 1 copies slot 0, block 1 (partial) is copied to block 2; block 0 is shared.
    m.b().reset_slot(1);
    m.b().copy_slot(0, 1);
    m.b().copy_block(1, 2);
    std::vector<int32_t> alt(t.begin(), t.begin() + 210);
    for (size_t i = 200; i < alt.size(); ++i) alt[i] = (alt[i] + 11) % 300 + 2;
    // Both continue in one batch, different tokens.
    StepBatch batch;
    batch.add_sequence(0, 200, part(t, 200, 210), {0, 1});
    batch.add_sequence(1, 200, part(alt, 200, 210), {0, 2});
    for (int32_t i = 0; i < 20; ++i) batch.logit_rows.push_back(i);
    const auto both = m.model().logits(batch);
    const size_t half = both.size() / 2;
    // Cold references in slot 2.
    m.b().reset_slot(2);
    const auto cold_a = m.feed(2, 0, part(t, 0, 210), {3, 4});
    m.b().reset_slot(2);
    const auto cold_b = m.feed(2, 0, part(alt, 0, 210), {5, 6});
    const size_t vocab = m.model().config().vocab_size;
    EXPECT_TRUE(bit_equal(std::vector<float>(both.begin(), both.begin() + half),
                          std::vector<float>(cold_a.end() - 10 * vocab, cold_a.end())));
    EXPECT_TRUE(bit_equal(std::vector<float>(both.begin() + half, both.end()),
                          std::vector<float>(cold_b.end() - 10 * vocab, cold_b.end())));
}

TEST_P(StateOps, BadIdsAreErrors) {
    Model m = open(GetParam());
    EXPECT_THROW(m.b().save_snapshot(0, 2, 128), Error);     // snapshot out of range
    EXPECT_THROW(m.b().save_snapshot(3, 0, 128), Error);     // slot out of range
    EXPECT_THROW(m.b().restore_snapshot(0, 0, 100), Error);  // not a block boundary
    EXPECT_THROW(m.b().restore_snapshot(0, 0, 0), Error);
    EXPECT_THROW(m.b().copy_slot(0, 3), Error);
    EXPECT_THROW(m.b().copy_block(12, 0), Error);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, StateOps, ::testing::Values("flash_schedule", "odd_dims"));

}  // namespace
}  // namespace dsv4
