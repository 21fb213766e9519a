// validate_sampling_params accepts the documented ranges and names the offending parameter otherwise.
#include "sample/sampling_params.h"

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>

#include "core/error.h"

namespace dsv4 {
namespace {

constexpr int64_t kVocab = 1000;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Expects validation of the edited defaults to fail with a message that names `parameter`.
void expect_rejected(const std::function<void(SamplingParams&)>& edit, const std::string& parameter) {
    SamplingParams params;
    edit(params);
    try {
        validate_sampling_params(params, kVocab);
        ADD_FAILURE() << "accepted an invalid '" << parameter << "'";
    } catch (const Error& error) {
        EXPECT_NE(std::string(error.what()).find("'" + parameter + "'"), std::string::npos) << error.what();
    }
}

void expect_accepted(const std::function<void(SamplingParams&)>& edit) {
    SamplingParams params;
    edit(params);
    EXPECT_NO_THROW(validate_sampling_params(params, kVocab));
}

TEST(SamplingParamsValidation, DefaultsAndBoundariesAreAccepted) {
    expect_accepted([](SamplingParams&) {});
    expect_accepted([](SamplingParams& p) { p.temperature = 0.0; });
    expect_accepted([](SamplingParams& p) { p.temperature = 100.0; });
    expect_accepted([](SamplingParams& p) { p.top_p = 1e-9; });
    expect_accepted([](SamplingParams& p) { p.top_k = -1; });
    expect_accepted([](SamplingParams& p) { p.top_k = 5000; });
    expect_accepted([](SamplingParams& p) { p.min_p = 1.0; });
    expect_accepted([](SamplingParams& p) { p.repetition_penalty = 0.01; });
    expect_accepted([](SamplingParams& p) { p.presence_penalty = -2.0; });
    expect_accepted([](SamplingParams& p) { p.frequency_penalty = 2.0; });
    expect_accepted([](SamplingParams& p) { p.logit_bias = {{0, -100.0f}, {999, 100.0f}}; });
    expect_accepted([](SamplingParams& p) { p.min_tokens = p.max_tokens; });
    expect_accepted([](SamplingParams& p) { p.logprobs = 0; });
    expect_accepted([](SamplingParams& p) { p.logprobs = 20; });
    expect_accepted([](SamplingParams& p) { p.n = 128; });
    expect_accepted([](SamplingParams& p) { p.stop = std::vector<std::string>(64, "x"); });
    expect_accepted([](SamplingParams& p) { p.stop_token_ids = {0, 999}; });
}

TEST(SamplingParamsValidation, DistributionParametersOutOfRange) {
    expect_rejected([](SamplingParams& p) { p.temperature = -0.1; }, "temperature");
    expect_rejected([](SamplingParams& p) { p.temperature = kNaN; }, "temperature");
    expect_rejected([](SamplingParams& p) { p.temperature = kInf; }, "temperature");
    expect_rejected([](SamplingParams& p) { p.top_p = 0.0; }, "top_p");
    expect_rejected([](SamplingParams& p) { p.top_p = 1.01; }, "top_p");
    expect_rejected([](SamplingParams& p) { p.top_p = kNaN; }, "top_p");
    expect_rejected([](SamplingParams& p) { p.top_k = -2; }, "top_k");
    expect_rejected([](SamplingParams& p) { p.min_p = -0.01; }, "min_p");
    expect_rejected([](SamplingParams& p) { p.min_p = 1.5; }, "min_p");
    expect_rejected([](SamplingParams& p) { p.min_p = kNaN; }, "min_p");
}

TEST(SamplingParamsValidation, PenaltiesAndBiasOutOfRange) {
    expect_rejected([](SamplingParams& p) { p.repetition_penalty = 0.0; }, "repetition_penalty");
    expect_rejected([](SamplingParams& p) { p.repetition_penalty = -1.0; }, "repetition_penalty");
    expect_rejected([](SamplingParams& p) { p.repetition_penalty = kInf; }, "repetition_penalty");
    expect_rejected([](SamplingParams& p) { p.presence_penalty = 2.5; }, "presence_penalty");
    expect_rejected([](SamplingParams& p) { p.presence_penalty = kNaN; }, "presence_penalty");
    expect_rejected([](SamplingParams& p) { p.frequency_penalty = -2.01; }, "frequency_penalty");
    expect_rejected([](SamplingParams& p) { p.logit_bias = {{1000, 1.0f}}; }, "logit_bias");
    expect_rejected([](SamplingParams& p) { p.logit_bias = {{-1, 1.0f}}; }, "logit_bias");
    expect_rejected(
        [](SamplingParams& p) {
            p.logit_bias = {{3, std::numeric_limits<float>::infinity()}};
        },
        "logit_bias");
    expect_rejected(
        [](SamplingParams& p) {
            p.logit_bias = {{3, std::numeric_limits<float>::quiet_NaN()}};
        },
        "logit_bias");
}

TEST(SamplingParamsValidation, LengthAndStopParametersOutOfRange) {
    expect_rejected([](SamplingParams& p) { p.max_tokens = 0; }, "max_tokens");
    expect_rejected([](SamplingParams& p) { p.min_tokens = -1; }, "min_tokens");
    expect_rejected(
        [](SamplingParams& p) {
            p.max_tokens = 10;
            p.min_tokens = 11;
        },
        "min_tokens");
    expect_rejected([](SamplingParams& p) { p.stop_token_ids = {5, 1000}; }, "stop_token_ids");
    expect_rejected([](SamplingParams& p) { p.stop = {"ok", ""}; }, "stop");
    expect_rejected([](SamplingParams& p) { p.stop = std::vector<std::string>(65, "x"); }, "stop");
    expect_rejected([](SamplingParams& p) { p.stop = {std::string(1025, 'x')}; }, "stop");
}

TEST(SamplingParamsValidation, OutputParametersOutOfRange) {
    expect_rejected([](SamplingParams& p) { p.logprobs = -1; }, "logprobs");
    expect_rejected([](SamplingParams& p) { p.logprobs = 21; }, "logprobs");
    expect_rejected([](SamplingParams& p) { p.n = 0; }, "n");
    expect_rejected([](SamplingParams& p) { p.n = 129; }, "n");
}

TEST(SamplingParamsValidation, MessagesGiveTheRangeAndTheValue) {
    SamplingParams params;
    params.top_p = 1.5;
    try {
        validate_sampling_params(params, kVocab);
        FAIL() << "accepted top_p = 1.5";
    } catch (const Error& error) {
        std::string message = error.what();
        EXPECT_NE(message.find("(0, 1]"), std::string::npos) << message;
        EXPECT_NE(message.find("1.5"), std::string::npos) << message;
    }
    EXPECT_THROW(validate_sampling_params(SamplingParams{}, 0), Error);
}

TEST(SamplingParamsValidation, GreedyThreshold) {
    SamplingParams params;
    params.temperature = 0.0;
    EXPECT_TRUE(is_greedy(params));
    params.temperature = 0.9e-5;
    EXPECT_TRUE(is_greedy(params));
    params.temperature = 1e-5;
    EXPECT_FALSE(is_greedy(params));
}

}  // namespace
}  // namespace dsv4
