#include "sample/stop_checker.h"

#include <algorithm>

#include "core/error.h"

namespace dsv4 {
namespace {

// failure[i] = length of the longest proper prefix of pattern[0..i] that is also its suffix.
std::vector<size_t> prefix_function(const std::string& pattern) {
    std::vector<size_t> failure(pattern.size(), 0);
    for (size_t i = 1; i < pattern.size(); ++i) {
        size_t k = failure[i - 1];
        while (k > 0 && pattern[i] != pattern[k]) k = failure[k - 1];
        if (pattern[i] == pattern[k]) ++k;
        failure[i] = k;
    }
    return failure;
}

}  // namespace

StopStringMatcher::StopStringMatcher(std::vector<std::string> stop_strings, bool include_stop_str_in_output)
    : include_stop_(include_stop_str_in_output) {
    for (std::string& pattern : stop_strings) {
        DSV4_CHECK(!pattern.empty(), "StopStringMatcher: stop strings must be non-empty");
        Automaton automaton;
        automaton.failure = prefix_function(pattern);
        automaton.pattern = std::move(pattern);
        automata_.push_back(std::move(automaton));
    }
}

StopStringMatcher::StopStringMatcher(const SamplingParams& params)
    : StopStringMatcher(params.stop, params.include_stop_str_in_output) {}

bool StopStringMatcher::advance(Automaton& automaton, char byte) const {
    const std::string& pattern = automaton.pattern;
    size_t state = automaton.state;
    while (state > 0 && pattern[state] != byte) state = automaton.failure[state - 1];
    if (pattern[state] == byte) ++state;
    bool complete = state == pattern.size();
    // On completion keep scanning as KMP does (matters only when detection is off): fall back to the longest
    // proper border, so state stays a proper-prefix length.
    automaton.state = complete ? automaton.failure[state - 1] : state;
    return complete;
}

size_t StopStringMatcher::held_length() const {
    size_t held = 0;
    for (const Automaton& automaton : automata_) held = std::max(held, automaton.state);
    return held;
}

StopStringMatcher::Result StopStringMatcher::push(std::string_view new_text, bool detect_stops) {
    Result result;
    if (stopped_) {
        result.stopped = true;
        result.matched = matched_;
        return result;
    }
    for (char byte : new_text) {
        pending_.push_back(byte);
        const Automaton* winner = nullptr;
        for (Automaton& automaton : automata_) {
            bool complete = advance(automaton, byte);
            if (complete && detect_stops && (!winner || automaton.pattern.size() > winner->pattern.size())) {
                winner = &automaton;
            }
        }
        if (winner) {
            size_t end = include_stop_ ? pending_.size() : pending_.size() - winner->pattern.size();
            result.emit = pending_.substr(0, end);
            result.stopped = true;
            result.matched = winner->pattern;
            stopped_ = true;
            matched_ = winner->pattern;
            pending_.clear();
            return result;
        }
    }
    // A held suffix is a proper prefix of a stop string; with include_stop_str_in_output it is emitted anyway.
    size_t held = include_stop_ ? 0 : std::min(held_length(), pending_.size());
    result.emit = pending_.substr(0, pending_.size() - held);
    pending_.erase(0, pending_.size() - held);
    return result;
}

std::string StopStringMatcher::flush() {
    std::string rest = std::move(pending_);
    pending_.clear();
    return rest;
}

std::string_view openai_finish_reason(FinishCause reason) {
    switch (reason) {
        case FinishCause::kNone:
            return "";
        case FinishCause::kEos:
            return "stop";
        case FinishCause::kStopToken:
            return "stop";
        case FinishCause::kStopString:
            return "stop";
        case FinishCause::kLength:
            return "length";
    }
    return "";
}

FinishCause check_finish(const SamplingParams& params, std::span<const int64_t> eos_token_ids,
                         const FinishInput& input) {
    if (input.num_output_tokens > params.min_tokens) {
        auto is = [&](std::span<const int64_t> ids) {
            return std::find(ids.begin(), ids.end(), input.last_token) != ids.end();
        };
        if (!params.ignore_eos && is(eos_token_ids)) return FinishCause::kEos;
        if (is(params.stop_token_ids)) return FinishCause::kStopToken;
    }
    bool context_full = input.max_model_len > 0 && input.num_total_tokens >= input.max_model_len;
    if (input.num_output_tokens >= params.max_tokens || context_full) return FinishCause::kLength;
    return FinishCause::kNone;
}

}  // namespace dsv4
