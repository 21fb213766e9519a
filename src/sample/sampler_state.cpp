#include "sample/sampler_state.h"

#include <algorithm>
#include <atomic>
#include <random>

#include "core/error.h"

namespace dsv4 {
namespace {

constexpr uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ULL;  // 2^64 / golden ratio, the SplitMix64 increment

// SplitMix64's output function: a bijective 64-bit mixer with full avalanche.
uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

}  // namespace

double uniform_at(uint64_t seed, uint64_t position, uint64_t lane) {
    // Two mixing rounds so that nearby seeds (seed + i for n > 1) and nearby positions give unrelated streams.
    uint64_t counter = mix64(position * kGoldenGamma + lane);
    uint64_t bits = mix64(seed ^ counter);
    return static_cast<double>(bits >> 11) * 0x1.0p-53;  // 53 random bits -> [0, 1)
}

uint64_t draw_random_seed() {
    static std::atomic<uint64_t> counter{[] {
        std::random_device device;
        return (static_cast<uint64_t>(device()) << 32) ^ device();
    }()};
    return mix64(counter.fetch_add(kGoldenGamma, std::memory_order_relaxed));
}

SamplerState::SamplerState(const SamplingParams& params, std::span<const int64_t> prompt_tokens,
                           std::span<const int64_t> eos_token_ids, int64_t vocab_size, int completion_index)
    : vocab_size_(vocab_size) {
    DSV4_CHECK(vocab_size > 0, "SamplerState: vocab_size must be positive (got {})", vocab_size);
    DSV4_CHECK(completion_index >= 0, "SamplerState: completion_index must be >= 0 (got {})", completion_index);
    seed_ = params.seed ? *params.seed + static_cast<uint64_t>(completion_index) : draw_random_seed();

    tracks_prompt_ = params.repetition_penalty != 1.0;
    if (tracks_prompt_) {
        for (int64_t token : prompt_tokens) {
            check_token(token, "prompt token");
            history_[token].in_prompt = true;
        }
    }
    for (int64_t token : eos_token_ids) {
        check_token(token, "EOS token");
        masked_ids_.push_back(token);
    }
    for (int64_t token : params.stop_token_ids) {
        check_token(token, "stop token");
        masked_ids_.push_back(token);
    }
    std::sort(masked_ids_.begin(), masked_ids_.end());
    masked_ids_.erase(std::unique(masked_ids_.begin(), masked_ids_.end()), masked_ids_.end());
    if (params.constraint) {
        DSV4_CHECK(params.constraint->vocab_size() == vocab_size,
                   "SamplerState: the structured-output constraint covers {} tokens, the vocabulary has {}",
                   params.constraint->vocab_size(), vocab_size);
        constraint_ = params.constraint->start();
        mask_.assign(static_cast<size_t>((vocab_size + 63) / 64), 0);
    }
}

void SamplerState::record_output(int64_t token) {
    check_token(token, "output token");
    if (constraint_) {
        if (!constraint_->accept(static_cast<int32_t>(token)))
            fail("token {} is not allowed by the request's structured-output constraint", token);
        mask_ready_ = false;
    }
    ++history_[token].output_count;
    ++num_output_tokens_;
}

void SamplerState::unrecord_outputs(std::span<const int64_t> tokens) {
    DSV4_CHECK(static_cast<int64_t>(tokens.size()) <= num_output_tokens_,
               "unrecord_outputs: {} tokens, {} were recorded", tokens.size(), num_output_tokens_);
    for (const int64_t token : tokens) {
        auto it = history_.find(token);
        DSV4_CHECK(it != history_.end() && it->second.output_count > 0,
                   "unrecord_outputs: token {} is not among the recorded outputs", token);
        if (--it->second.output_count == 0 && !it->second.in_prompt) history_.erase(it);
        --num_output_tokens_;
    }
    if (constraint_ && !tokens.empty()) {
        constraint_->rollback(static_cast<int>(tokens.size()));
        mask_ready_ = false;
    }
}

void SamplerState::prepare_constraint_mask() {
    if (!constraint_ || mask_ready_) return;
    mask_summary_ = constraint_->fill_allowed(mask_);
    mask_ready_ = true;
}

void SamplerState::check_token(int64_t token, const char* what) const {
    if (token < 0 || token >= vocab_size_) fail("{} id {} is outside the vocabulary [0, {})", what, token, vocab_size_);
}

}  // namespace dsv4
