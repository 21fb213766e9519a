// Helpers of the engine tests: small engines on the tiny fixtures (tests/fixtures), and draining result streams.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/npy.h"
#include "dsv4/engine.h"

namespace dsv4::engine_test {

// DSV4_SOURCE_DIR from the environment wins (test binaries run on another machine), else the build's.
inline std::string fixture_dir(const std::string& name) {
    const char* env = std::getenv("DSV4_SOURCE_DIR");
    const std::filesystem::path root =
        env != nullptr ? std::filesystem::path(env) : std::filesystem::path(DSV4_SOURCE_DIR);
    return (root / "tests" / "fixtures" / name).string();
}

inline std::vector<int32_t> fixture_tokens(const std::string& name) {
    return read_npy_i32((std::filesystem::path(fixture_dir(name)) / "tokens.npy").string()).values;
}

// Small state: block 128 (a multiple of the HCA ratio), a few slots; enough blocks for several 300-token prompts.
inline EngineConfig small_config(const std::string& fixture, int max_num_seqs = 8) {
    EngineConfig c;
    c.model_dir = fixture_dir(fixture);
    c.max_num_seqs = max_num_seqs;
    c.block_tokens = 128;
    c.max_model_len = 1024;
    c.kv_cache_bytes = 24 << 20;
    c.num_prefix_snapshots = 16;
    c.threads = 1;
    return c;
}

inline SamplingParams greedy(int max_tokens) {
    SamplingParams p;
    p.temperature = 0.0;
    p.max_tokens = max_tokens;
    p.ignore_eos = true;
    return p;
}

struct Completion {
    std::vector<int32_t> tokens;
    std::vector<float> logprobs;
    std::vector<std::vector<TokenLogprob>> top;
    FinishReason reason = FinishReason::kNone;
    std::string error;
    int prompt_tokens = -1;
    int cached_prompt_tokens = -1;
    int events = 0;
};

// Pops every event of a stream (fails the test after 120 s without one).
inline std::vector<Completion> drain(ResultStream& stream, int n = 1) {
    std::vector<Completion> out(n);
    while (!stream.done()) {
        auto ev = stream.pop(std::chrono::seconds(120));
        if (!ev) {
            ADD_FAILURE() << "no event within 120 s";
            break;
        }
        EXPECT_GE(ev->completion_index, 0);
        EXPECT_LT(ev->completion_index, n);
        Completion& c = out.at(ev->completion_index);
        EXPECT_EQ(c.reason, FinishReason::kNone) << "event after the finished one";
        if (c.events++ == 0) {
            c.prompt_tokens = ev->prompt_tokens;
            c.cached_prompt_tokens = ev->cached_prompt_tokens;
        }
        for (const GeneratedToken& t : ev->tokens) {
            c.tokens.push_back(t.token);
            if (t.logprob) c.logprobs.push_back(*t.logprob);
            c.top.push_back(t.top);
        }
        if (ev->finished) {
            c.reason = ev->finish_reason;
            c.error = ev->error;
        }
    }
    return out;
}

inline GenerateRequest make_request(const std::string& id, std::vector<int32_t> prompt, SamplingParams params) {
    GenerateRequest r;
    r.request_id = id;
    r.prompt_tokens = std::move(prompt);
    r.params = std::move(params);
    return r;
}

}  // namespace dsv4::engine_test
