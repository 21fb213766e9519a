// Whole-model golden tests: the CPU backend in exact numerics against HF transformers' float32 full-sequence
// reference (tests/fixtures), in every feeding mode: whole prompt, chunks that split compression windows, and
// prefill-then-decode. Tolerance: max |diff| <= 1e-4 x max |reference logit|.
#include <gtest/gtest.h>

#include <random>

#include "golden_support.h"

namespace dsv4::golden {
namespace {

constexpr double kExactTolerance = 1e-4;

struct Mode {
    const char* name;
    int64_t chunk;
    int64_t decode_from;
};

class ExactGolden : public ::testing::TestWithParam<std::tuple<std::string, Mode>> {};

TEST_P(ExactGolden, MatchesReference) {
    const auto& [name, mode] = GetParam();
    Fixture f = open_fixture(name, Numerics::kExact);
    std::vector<float> got = run_logits(f, mode.chunk, mode.decode_from);
    ASSERT_EQ(got.size(), f.reference.values.size());
    const double err = relative_max_error(got, f.reference.values);
    std::printf("[ golden ] %s %s: max|diff|/max|ref| = %.3e\n", name.c_str(), mode.name, err);
    EXPECT_LE(err, kExactTolerance);
}

const Mode kModes[] = {
    {"whole", 0, -1},      {"chunk1_decode_all", 1, -1},  {"chunk3", 3, -1},
    {"chunk5", 5, -1},     {"chunk37", 37, -1},           {"chunk100", 100, -1},
    {"chunk129", 129, -1}, {"prefill130_decode", 0, 130}, {"prefill7_chunks_then_decode", 7, 250},
};

INSTANTIATE_TEST_SUITE_P(Fixtures, ExactGolden,
                         ::testing::Combine(::testing::ValuesIn(fixture_names()), ::testing::ValuesIn(kModes)),
                         [](const auto& param_info) {
                             return std::get<0>(param_info.param) + "_" + std::get<1>(param_info.param).name;
                         });

// Feed, rewind, feed other tokens: must equal a fresh run over the final token sequence.
TEST(Rewind, MatchesFreshRun) {
    for (const auto& name : fixture_names()) {
        Fixture f = open_fixture(name, Numerics::kExact);
        std::mt19937 rng(7);
        std::uniform_int_distribution<int32_t> token(2, static_cast<int32_t>(f.vocab() - 1));
        std::vector<int32_t> first(f.tokens.begin(), f.tokens.begin() + 200);
        SequenceRunner rewound(f.model(), 0, 8);
        rewound.feed(first, false);
        for (int64_t cut : {197, 192, 189}) {  // inside a CSA window, at a boundary, 14 back from the furthest
            rewound.truncate(cut);
            std::vector<int32_t> extra(6);
            for (auto& t : extra) t = token(rng);
            auto got = rewound.feed(extra, true);
            std::vector<int32_t> combined(first.begin(), first.begin() + cut);
            combined.insert(combined.end(), extra.begin(), extra.end());
            SequenceRunner fresh(f.model(), 1, 8);
            auto full = fresh.feed(combined, true);
            std::vector<float> want(full.end() - static_cast<int64_t>(got.size()), full.end());
            const double err = relative_max_error(got, want);
            EXPECT_LE(err, 1e-5) << name << " cut " << cut;
            first = combined;
            rewound.truncate(static_cast<int64_t>(combined.size()));
        }
    }
}

TEST(Rewind, BeyondCapacityIsAnError) {
    Fixture f = open_fixture("odd_dims", Numerics::kExact);
    SequenceRunner runner(f.model(), 0, 8);
    runner.feed(std::span(f.tokens).subspan(0, 100), false);
    EXPECT_THROW(runner.truncate(50), Error);
}

}  // namespace
}  // namespace dsv4::golden
