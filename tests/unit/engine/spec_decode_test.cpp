// Speculative decoding in the engine's step loop (scheduler + runner + drafter): greedy decoding with MTP or DSpark
// drafts emits exactly the tokens plain greedy decoding emits, on synthetic checkpoints whose draft stages are random
// (drafts rejected: verify steps cross window, compression and prefix-cache block boundaries and are rewound) and on
// the trained demo models (drafts accepted); rewinds deeper than the capacity re-prefill; a prefix-cache hit after
// speculative steps gives the logits of a cold run; aborting a request mid-verify frees its state; a model without
// draft weights refuses a drafter.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"
#include "model/synthetic_checkpoint.h"
#include "runtime_harness.h"
#include "sample/sampler.h"
#include "spec/draft_steps.h"

namespace dsv4::engine_test {
namespace {

// A synthetic checkpoint with draft stages (model/synthetic_presets.h), written once per test process.
std::string synthetic_dir(const std::string& preset) {
    static std::map<std::string, std::string> dirs;
    auto it = dirs.find(preset);
    if (it != dirs.end()) return it->second;
    const auto dir = std::filesystem::temp_directory_path() /
                     ("dsv4_spec_test_" + preset + "_" + std::to_string(static_cast<long>(getpid())));
    std::filesystem::remove_all(dir);
    SyntheticOptions options;
    options.seed = 7;
    options.shards = 1;
    write_synthetic_checkpoint(dir, synthetic_preset(preset), options);
    return dirs[preset] = dir.string();
}

// Greedy drafts are chosen where the logits are (ModelOps::argmax_rows; the CPU backend's is the host path): the
// lowest index of the largest value, as the sampler's argmax; a row with no choice (NaN, +inf, only -inf) is a
// drafter fault, reported as an error.
TEST(SpecDecode, GreedyDraftTokensAreEachRowsArgmax) {
    auto backend = make_cpu_backend(Numerics::kExact, 1);
    // What the MTP drafter does with a substep's logits: argmax_rows where they are, then read_draft_ids.
    auto greedy_draft_tokens = [&](const Tensor& logits) {
        Tensor ids = backend->alloc(DType::kI32, {logits.size(0)});
        backend->argmax_rows(logits, ids);
        return read_draft_ids(*backend, ids);
    };
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    const std::vector<float> rows = {
        1.0f, 3.0f,  3.0f, 2.0f, 0.0f,  // a tie: the lower index
        -inf, -1.0f, 4.0f, -inf, 4.0f,  // -inf is a mask, not a fault
    };
    const size_t mark = backend->scratch_mark();
    Tensor logits = backend->alloc(DType::kF32, {2, 5});
    backend->from_host(logits, rows.data());
    EXPECT_EQ(greedy_draft_tokens(logits), (std::vector<int32_t>{1, 2}));
    for (const std::vector<float>& fault : {std::vector<float>{nan, 1.0f, 2.0f}, std::vector<float>{-2.0f, inf, 5.0f},
                                            std::vector<float>{-inf, -inf, -inf}}) {
        EXPECT_EQ(argmax_of_row(fault), kNoArgmax);
        Tensor one = backend->alloc(DType::kF32, {1, 3});
        backend->from_host(one, fault.data());
        EXPECT_THROW(greedy_draft_tokens(one), Error);
    }
    std::mt19937 gen(3);
    std::uniform_int_distribution<int> value(0, 9);
    std::vector<float> wide(static_cast<size_t>(4 * 1000));
    for (float& v : wide) v = static_cast<float>(value(gen));
    Tensor many = backend->alloc(DType::kF32, {4, 1000});
    backend->from_host(many, wide.data());
    const std::vector<int32_t> picks = greedy_draft_tokens(many);
    for (int64_t r = 0; r < 4; ++r) {
        EXPECT_EQ(picks[r], argmax_token(std::span<const float>(wide).subspan(r * 1000, 1000))) << "row " << r;
    }
    backend->scratch_release(mark);
}

std::string demo_dir(const std::string& name) {
    return (std::filesystem::path(DSV4_SOURCE_DIR) / "models" / name).string();
}

std::vector<int32_t> random_prompt(size_t length, int64_t vocab, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<int32_t> p(length);
    for (int32_t& t : p) t = static_cast<int32_t>(2 + rng() % static_cast<uint64_t>(vocab - 3));
    return p;
}

// Held-out demo text (BOS + Brown Corpus tokens): the drafters were trained on such text.
std::vector<int32_t> demo_prompt(size_t length, size_t row) {
    const auto path = std::filesystem::path(DSV4_SOURCE_DIR) / "tests" / "data" / "demo_heldout_tokens.npy";
    const NpyTensor<int32_t> tokens = read_npy_i32(path.string());
    const size_t cols = static_cast<size_t>(tokens.shape.at(1));
    return {tokens.values.begin() + static_cast<std::ptrdiff_t>(row * cols),
            tokens.values.begin() + static_cast<std::ptrdiff_t>(row * cols + length)};
}

HarnessOptions options_for(const std::string& model_dir, const std::string& method) {
    HarnessOptions o;
    o.model_dir = model_dir;
    o.spec_method = method;
    o.block_tokens = 32;
    o.num_blocks = 64;
    o.num_snapshots = 8;
    return o;
}

struct Request {
    std::string id;
    std::vector<int32_t> prompt;
    int max_tokens;
    int n = 1;
};

// Runs the requests together in one harness; returns every completion's tokens.
std::map<std::string, std::vector<int32_t>> run_all(RuntimeHarness& h, const std::vector<Request>& requests) {
    for (const Request& r : requests) h.add(r.id, r.prompt, r.max_tokens, r.n);
    h.run();
    std::map<std::string, std::vector<int32_t>> out;
    for (const Request& r : requests) {
        for (int c = 0; c < r.n; ++c) out[r.id + "/" + std::to_string(c)] = h.output(r.id, c).tokens;
    }
    return out;
}

void expect_same_tokens(const std::map<std::string, std::vector<int32_t>>& plain,
                        const std::map<std::string, std::vector<int32_t>>& spec) {
    ASSERT_EQ(plain.size(), spec.size());
    for (const auto& [id, tokens] : plain) {
        EXPECT_FALSE(tokens.empty()) << id;
        EXPECT_EQ(tokens, spec.at(id)) << id;
    }
}

class SpecDecodeSynthetic : public ::testing::TestWithParam<const char*> {};

// Prompts of 29 and 31 tokens generating 20 and 12: verify steps of 4 tokens cross the window (32), HCA (32, 48) and
// prefix-cache block (32) boundaries at several offsets, CSA windows (4) all the time; random drafts are nearly
// always rejected, so those positions are rewound and fed again. n = 2 completions share the prompt's state.
TEST_P(SpecDecodeSynthetic, GreedyEqualsPlainGreedy) {
    const std::string method = GetParam();
    const std::string dir = synthetic_dir(method == std::string("mtp") ? "tiny-mtp" : "tiny-dspark");
    const std::vector<Request> requests = {{"p29", random_prompt(29, 512, 29), 20},
                                           {"n2", random_prompt(31, 512, 99), 12, 2}};
    RuntimeHarness plain(options_for(dir, ""));
    RuntimeHarness spec(options_for(dir, method));
    expect_same_tokens(run_all(plain, requests), run_all(spec, requests));
    const SchedulerStats& s = spec.scheduler().stats();
    EXPECT_GT(s.spec_drafts_total, 10);
    EXPECT_LE(s.spec_draft_tokens_total, 3 * s.spec_drafts_total);  // k = 3, trimmed near max_tokens
    EXPECT_GT(s.spec_draft_tokens_total, 2 * s.spec_drafts_total);
}

INSTANTIATE_TEST_SUITE_P(Methods, SpecDecodeSynthetic, ::testing::Values("mtp", "dspark"));

TEST(SpecDecode, RewindDeeperThanTheCapacityReprefills) {
    const std::string dir = synthetic_dir("tiny-mtp");
    const std::vector<Request> requests = {{"a", random_prompt(14, 512, 5), 8}};
    HarnessOptions o = options_for(dir, "mtp");
    o.rewind_capacity = 2;  // a 5-token verify step rejected early is rewound 3-4 positions
    o.spec_tokens = 4;
    RuntimeHarness plain(options_for(dir, ""));
    RuntimeHarness spec(o);
    expect_same_tokens(run_all(plain, requests), run_all(spec, requests));
    EXPECT_GT(spec.scheduler().stats().spec_reprefills_total, 0);
    EXPECT_EQ(spec.kv().num_free_slots(), o.max_num_seqs);
}

TEST(SpecDecode, PrefixHitAfterSpeculativeStepsGivesTheLogitsOfAColdRun) {
    const std::string dir = synthetic_dir("tiny-mtp");
    const std::vector<int32_t> prompt = random_prompt(24, 512, 11);
    RuntimeHarness warm(options_for(dir, "mtp"));
    warm.add("a", prompt, 16);  // decode crosses the block boundary at 32 in verify steps
    warm.run();
    ASSERT_EQ(warm.output("a").tokens.size(), 16u);
    std::vector<int32_t> next = prompt;
    next.insert(next.end(), warm.output("a").tokens.begin(), warm.output("a").tokens.begin() + 12);
    warm.add("b", next, 1);
    warm.run();
    EXPECT_EQ(warm.output("b").cached, 32);  // served from the block and snapshot saved during speculation
    HarnessOptions cold_options = options_for(dir, "");
    cold_options.prefix_caching = false;
    RuntimeHarness cold(cold_options);
    cold.add("b", next, 1);
    cold.run();
    EXPECT_TRUE(same_rows(warm.logits("b"), cold.logits("b")));
}

TEST(SpecDecode, AbortMidVerifyFreesTheState) {
    const std::string dir = synthetic_dir("tiny-dspark");
    HarnessOptions o = options_for(dir, "dspark");
    o.prefix_caching = false;
    RuntimeHarness h(o);
    h.add("a", random_prompt(20, 512, 3), 50);
    h.add("b", random_prompt(18, 512, 4), 4);
    for (int i = 0; i < 3; ++i) h.step();  // both past their prompt, verifying drafts
    ASSERT_GT(h.scheduler().stats().spec_drafts_total, 0);
    h.abort("a");
    h.run();
    EXPECT_EQ(h.output("b").tokens.size(), 4u);
    EXPECT_LT(h.output("a").tokens.size(), 50u);
    EXPECT_EQ(h.kv().num_free_slots(), o.max_num_seqs);
    EXPECT_EQ(h.kv().num_free_blocks(), o.num_blocks);
    EXPECT_FALSE(h.scheduler().has_work());
}

// The trained drafters: drafts are accepted (acceptance is far from zero), the output is still plain greedy's, and
// the drafts do not depend on how the prompt was fed (chunked prefill absorbs the same rows).
class SpecDecodeDemo : public ::testing::TestWithParam<const char*> {};

TEST_P(SpecDecodeDemo, GreedyEqualsPlainGreedyWithAcceptedDrafts) {
    const std::string method = GetParam();
    const std::string dir = demo_dir(method == std::string("mtp") ? "demo" : "demo-dspark");
    const std::vector<Request> requests = {{"r0", demo_prompt(50, 29), 16}};  // crosses the window (64)
    HarnessOptions o = options_for(dir, method);
    o.block_tokens = 64;  // a multiple of the demo's HCA ratio (32)
    RuntimeHarness plain(options_for(dir, ""));
    RuntimeHarness spec(o);
    HarnessOptions chunked_options = o;
    chunked_options.long_prefill = 16;
    RuntimeHarness chunked(chunked_options);
    const auto want = run_all(plain, requests);
    expect_same_tokens(want, run_all(spec, requests));
    expect_same_tokens(want, run_all(chunked, requests));
    const SchedulerStats& s = spec.scheduler().stats();
    // Random draft stages accept ~1 / vocabulary; the trained ones accept ~0.4-0.55 drafts per step (performance-log).
    EXPECT_GT(static_cast<double>(s.spec_accepted_tokens_total) / static_cast<double>(s.spec_drafts_total), 0.1);
    EXPECT_EQ(s.spec_accepted_per_pos, chunked.scheduler().stats().spec_accepted_per_pos);
}

INSTANTIATE_TEST_SUITE_P(Methods, SpecDecodeDemo, ::testing::Values("mtp", "dspark"));

// DSpark's confidence scheduling: drafts stop where the survival of the confidence head's estimates falls below the
// threshold, so fewer than k drafts are fed on average, and the output is still plain greedy's.
TEST(SpecDecode, DsparkConfidenceShortensTheDrafts) {
    const std::string dir = demo_dir("demo-dspark");
    const std::vector<Request> requests = {{"r0", demo_prompt(30, 58), 10}};
    HarnessOptions o = options_for(dir, "dspark");
    o.block_tokens = 64;
    o.spec_tokens = 5;
    o.spec_confidence_threshold = 0.3;
    RuntimeHarness plain(options_for(dir, ""));
    RuntimeHarness spec(o);
    expect_same_tokens(run_all(plain, requests), run_all(spec, requests));
    const SchedulerStats& s = spec.scheduler().stats();
    ASSERT_GT(s.spec_drafts_total, 0);
    EXPECT_LT(s.spec_draft_tokens_total, 4 * s.spec_drafts_total);
}

// Sampled requests with one-hot (greedy) drafts are verified where the logits are (sample_rows with probes, the CPU
// backend's being the definition): the same tokens as the host's verification of the same rows (the harness keeps
// the rows and verifies on the host when it records logits), for standard and block verification, with the trained
// MTP drafter so that drafts are accepted and corrected.
TEST(SpecDecode, SampledRequestsVerifyOnTheDeviceAsOnTheHost) {
    const std::string dir = demo_dir("demo");
    for (VerifyMethod method : {VerifyMethod::kStandard, VerifyMethod::kBlock}) {
        auto run = [&](bool host_verify) {
            HarnessOptions o = options_for(dir, "mtp");
            o.block_tokens = 64;
            o.spec_probabilistic = false;
            o.verify = method;
            o.record_logits = host_verify;
            RuntimeHarness h(o);
            for (int r = 0; r < 3; ++r) {
                SamplingParams p;
                p.temperature = r == 2 ? 1.0 : 0.7;
                p.top_p = r == 1 ? 0.9 : 1.0;
                p.frequency_penalty = r == 2 ? 0.3 : 0.0;
                p.max_tokens = 24;
                p.ignore_eos = true;
                p.seed = 90 + r;
                h.add("r" + std::to_string(r), demo_prompt(30, 10 + r), p);
            }
            h.run();
            std::vector<std::vector<int32_t>> outputs;
            for (int r = 0; r < 3; ++r) outputs.push_back(h.output("r" + std::to_string(r), 0).tokens);
            return std::make_pair(outputs, h.scheduler().stats().spec_accepted_tokens_total);
        };
        const auto [device, device_accepted] = run(false);
        const auto [host, host_accepted] = run(true);
        EXPECT_EQ(device, host) << verify_method_name(method);
        EXPECT_EQ(device_accepted, host_accepted);
        EXPECT_GT(device_accepted, 5) << "drafts were accepted";
        for (const std::vector<int32_t>& tokens : device) EXPECT_EQ(tokens.size(), 24u);
    }
}

// Oracle acceptance (a benchmark mode for drafters that accept nothing, like these random weights): a verify step emits
// the chosen tokens on average whatever the logits say (k = 3, length 2.5: 1.5 accepted drafts a step), with the real
// verify and draft steps; greedy and sampled requests (the next token drawn through sample_rows) complete, and seeded
// requests repeat themselves run after run.
TEST(SpecDecode, OracleAcceptanceEmitsTheChosenLengthOnAverage) {
    const std::string dir = synthetic_dir("tiny-mtp");
    HarnessOptions o = options_for(dir, "mtp");
    o.spec_oracle_length = 2.5;
    o.record_logits = false;
    auto run = [&] {
        RuntimeHarness h(o);
        for (int r = 0; r < 4; ++r) {
            SamplingParams p;
            p.temperature = r % 2 == 0 ? 0.0 : 1.0;
            p.top_p = 0.9;
            p.presence_penalty = r == 3 ? 0.5 : 0.0;
            p.max_tokens = 64;
            p.ignore_eos = true;
            p.seed = 40 + r;
            h.add("r" + std::to_string(r), random_prompt(20 + r, 512, r), p);
        }
        h.run();
        std::vector<std::vector<int32_t>> outputs;
        for (int r = 0; r < 4; ++r) outputs.push_back(h.output("r" + std::to_string(r), 0).tokens);
        const SchedulerStats& s = h.scheduler().stats();
        return std::make_tuple(outputs, s.spec_drafts_total, s.spec_accepted_tokens_total);
    };
    const auto [outputs, verify_steps, accepted] = run();
    for (const std::vector<int32_t>& tokens : outputs) EXPECT_EQ(tokens.size(), 64u);
    ASSERT_GT(verify_steps, 60);
    EXPECT_NEAR(static_cast<double>(accepted) / static_cast<double>(verify_steps), 1.5, 0.35);
    const auto [again, steps_again, accepted_again] = run();
    EXPECT_EQ(again, outputs);
    EXPECT_EQ(accepted_again, accepted);
}

TEST(SpecDecode, ModelsWithoutTheDraftWeightsRefuseTheDrafter) {
    auto backend = make_cpu_backend(Numerics::kExact, 1);
    StateConfig state;
    state.num_blocks = 4;
    state.block_tokens = 128;
    auto fixture = load_model(RuntimeHarness::dir("flash_schedule"), *backend, state);  // no draft stages
    try {
        make_drafter("mtp", *fixture->model, {}, DraftOptions{});
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("no draft stages"), std::string::npos) << e.what();
    }
    auto tiny = load_model(synthetic_dir("tiny-mtp"), *backend, state, {}, DraftLoad{1});
    try {
        make_drafter("dspark", *tiny->model, std::move(tiny->drafts), DraftOptions{});
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("use method 'mtp'"), std::string::npos) << e.what();
    }
    EXPECT_THROW(make_drafter("eagle", *fixture->model, {}, DraftOptions{}), Error);
}

}  // namespace
}  // namespace dsv4::engine_test
