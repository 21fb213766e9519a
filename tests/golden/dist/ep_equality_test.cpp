// Expert parallelism on loopback ranks against one rank: for every fixture, N = 1, 2, 4 ranks, every placement
// (contiguous, strided, every expert everywhere, EPLB with replicated hot experts), dual-batch overlap off and on,
// and both exchanges (prefill steps normal, decode steps low latency), the logits of every sequence at every step
// are bit-identical to one rank running all sequences with the plain moe op, in exact numerics. Also: EPLB moving
// experts between steps keeps the bits, and a rank that dies ends the job with its error instead of a hang.
#include <gtest/gtest.h>

#include <chrono>

#include "dist/eplb.h"
#include "ep_harness.h"

namespace dsv4::dist::testing {
namespace {

// Three sequences: with four ranks one of them runs empty batches (it still serves its experts).
constexpr int kSequences = 3;

struct NamedPlacement {
    const char* name;
    std::function<ExpertPlacement(int, int, int)> make;
};

// EPLB from skewed synthetic counters: expert 0 hot everywhere, so it gets copies on several ranks.
ExpertPlacement eplb_replicated(int layers, int experts, int ranks) {
    std::vector<std::vector<int64_t>> counts(layers, std::vector<int64_t>(experts, 1));
    for (int l = 0; l < layers; ++l) {
        counts[l][0] = 1000;
        counts[l][(l + 1) % experts] = 300;
    }
    return plan_expert_placement(counts, ranks, (experts + ranks - 1) / ranks + 1);
}

const NamedPlacement kPlacements[] = {
    {"contiguous", contiguous_placement},
    {"strided", strided_placement},
    {"replicated", replicated_placement},
    {"eplb", eplb_replicated},
};

class EpEquality : public ::testing::TestWithParam<std::string> {};

TEST_P(EpEquality, BitIdenticalToOneRank) {
    const std::string fixture = GetParam();
    const Schedule schedule;
    const auto tokens = read_npy_i32((golden::fixture_dir(fixture) / "tokens.npy").string()).values;
    const auto seqs = make_sequences(tokens, kSequences, schedule);
    const RunLogits want = single_rank_run(fixture, seqs, schedule);
    for (int ranks : {1, 2, 4}) {
        for (const NamedPlacement& placement : kPlacements) {
            for (bool dbo : {false, true}) {
                EpRunOptions o;
                o.ranks = ranks;
                o.placement = placement.make;
                o.moe.dual_batch_overlap = dbo;
                o.moe.low_latency_max_tokens = 4;  // prefill chunks (12+ tokens per rank) normal, decode low latency
                EpTotals totals;
                const RunLogits got = expert_parallel_run(fixture, seqs, schedule, o, &totals);
                // The exchanges ran: pairs crossed ranks (unless every rank holds every expert), and both the
                // normal (prefill) and the low-latency (decode) exchange were used.
                EXPECT_EQ(totals.pairs_sent, totals.pairs_received);
                if (ranks > 1 && std::string(placement.name) != "replicated") {
                    EXPECT_GT(totals.pairs_sent, 0);
                }
                EXPECT_GT(totals.low_latency_layers, 0);
                EXPECT_LT(totals.low_latency_layers, totals.moe_layers);
                for (int s = 0; s < kSequences; ++s) {
                    ASSERT_EQ(got[s].size(), want[s].size());
                    for (size_t step = 0; step < want[s].size(); ++step) {
                        EXPECT_TRUE(same_bits(got[s][step], want[s][step]))
                            << fixture << " ranks " << ranks << " " << placement.name << " dbo " << dbo << " seq " << s
                            << " step " << step << ": max diff "
                            << golden::relative_max_error(got[s][step], want[s][step]);
                    }
                }
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EpEquality, ::testing::ValuesIn(golden::fixture_names()),
                         [](const auto& param_info) { return param_info.param; });

TEST(EpEplb, MovingExpertsBetweenStepsKeepsTheBits) {
    const std::string fixture = "flash_schedule";
    const Schedule schedule;
    const auto tokens = read_npy_i32((golden::fixture_dir(fixture) / "tokens.npy").string()).values;
    const auto seqs = make_sequences(tokens, kSequences, schedule);
    const RunLogits want = single_rank_run(fixture, seqs, schedule);
    EpRunOptions o;
    o.ranks = 2;
    o.placement = strided_placement;
    o.rebalance_after_step = 1;  // after the prefill: real routing counts decide the next placement
    EpTotals totals;
    const RunLogits got = expert_parallel_run(fixture, seqs, schedule, o, &totals);
    EXPECT_GT(totals.experts_moved, 0) << "EPLB kept the strided placement: the test would not exercise a move";
    for (int s = 0; s < kSequences; ++s) {
        for (size_t step = 0; step < want[s].size(); ++step) {
            EXPECT_TRUE(same_bits(got[s][step], want[s][step])) << "seq " << s << " step " << step;
        }
    }
}

TEST(EpFailure, DyingRankEndsTheJobWithItsError) {
    const std::string fixture = "odd_dims";
    const Schedule schedule;
    const auto tokens = read_npy_i32((golden::fixture_dir(fixture) / "tokens.npy").string()).values;
    const auto seqs = make_sequences(tokens, kSequences, schedule);
    EpRunOptions o;
    o.ranks = 4;
    o.placement = contiguous_placement;
    o.fail_rank = 2;
    const auto t0 = std::chrono::steady_clock::now();
    try {
        expert_parallel_run(fixture, seqs, schedule, o);
        FAIL() << "the job did not fail";
    } catch (const Error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("rank 2"), std::string::npos) << what;
        EXPECT_NE(what.find("injected failure"), std::string::npos) << what;
    }
    // The peers stopped on the abort, not on the collective timeout (120 s).
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0);
}

}  // namespace
}  // namespace dsv4::dist::testing
