// When a request stops, and what text a client may see: stop strings matched on the detokenized stream (with
// holdback, so no byte of a stop string or after it is ever sent), and the token-level finish rules (EOS, stop
// token ids, min_tokens, max_tokens, context length).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dsv4/sampling_params.h"

namespace dsv4 {

// Matches stop strings incrementally on bytes. Text that could be the start of a stop string is held back until
// it is disambiguated. The stop is the earliest position at which any stop string completes; among strings that
// complete at the same byte the longest wins. The result depends only on the concatenated text, never on how it
// was split into pushes. One KMP automaton per stop string: O(number of stop strings) per byte.
class StopStringMatcher {
  public:
    struct Result {
        std::string emit;      // text that may be sent now
        bool stopped = false;  // a stop string completed: finish the request; later pushes emit nothing
        std::string matched;   // the stop string that completed (vLLM's stop_reason), empty if none
    };

    // include_stop_str_in_output: emit the matched stop string too; then nothing needs holding back.
    // Throws dsv4::Error on an empty stop string.
    StopStringMatcher(std::vector<std::string> stop_strings, bool include_stop_str_in_output);
    explicit StopStringMatcher(const SamplingParams& params);

    // Feeds newly detokenized text. With detect_stops = false (inside min_tokens, see stop_strings_active) stop
    // strings that end in this text are not matched, but text is still held back so a stop string that starts
    // here and ends in a later push is found.
    Result push(std::string_view new_text, bool detect_stops = true);

    // The request finished for another reason: returns the held-back text (empty after a stop).
    std::string flush();

    bool stopped() const { return stopped_; }

  private:
    struct Automaton {
        std::string pattern;
        std::vector<size_t> failure;  // KMP prefix function of pattern
        size_t state = 0;             // longest suffix of the text so far that is a proper prefix of pattern
    };

    bool advance(Automaton& automaton, char byte) const;  // true when the pattern completes at this byte
    size_t held_length() const;

    std::vector<Automaton> automata_;
    bool include_stop_;
    std::string pending_;  // text not emitted yet
    bool stopped_ = false;
    std::string matched_;
};

// Why a completion finished, at token level. Named FinishCause (not FinishReason) because include/dsv4/engine.h owns
// dsv4::FinishReason, the public one; the engine maps kEos / kStopToken / kStopString to FinishReason::kStop.
enum class FinishCause : uint8_t {
    kNone,        // keep generating
    kEos,         // the model's end token (OpenAI "stop"; vLLM stop_reason null)
    kStopToken,   // an entry of stop_token_ids (OpenAI "stop"; stop_reason = the id)
    kStopString,  // StopStringMatcher reported a match (OpenAI "stop"; stop_reason = the string)
    kLength,      // max_tokens or the model's context length (OpenAI "length")
};

// "stop", "length", or "" for kNone.
std::string_view openai_finish_reason(FinishCause reason);

struct FinishInput {
    int64_t last_token = -1;        // the token just generated
    int64_t num_output_tokens = 0;  // output tokens including last_token
    int64_t num_total_tokens = 0;   // prompt + output tokens
    int64_t max_model_len = 0;      // context limit; 0 = none
};

// Token-level finish check after each generated token. EOS (unless ignore_eos) and stop_token_ids finish only once
// num_output_tokens > min_tokens (the sampler masks them before that, so this only matters for tokens chosen
// elsewhere). A stop token at the last allowed position reports the stop, not kLength: the model did end.
FinishCause check_finish(const SamplingParams& params, std::span<const int64_t> eos_token_ids,
                         const FinishInput& input);

// Whether stop strings may match text produced by the token that brought the output to num_output_tokens
// (vLLM: only after min_tokens tokens). Pass it as StopStringMatcher::push's detect_stops.
inline bool stop_strings_active(const SamplingParams& params, int64_t num_output_tokens) {
    return num_output_tokens > params.min_tokens;
}

}  // namespace dsv4
