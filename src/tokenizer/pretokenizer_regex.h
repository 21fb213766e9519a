// A compiled Oniguruma regex (the engine HF tokenizers uses), shared read-only between threads.
// Syntax ONIG_SYNTAX_DEFAULT (Ruby), UTF-8, no options: the settings of the Rust `onig` crate's Regex::new.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace dsv4::tokenizer {

// Calls onig_initialize for UTF-8 once per process (thread-safe).
void ensure_oniguruma_initialized();

class OnigRegex {
  public:
    // Throws dsv4::Error naming the pattern and Oniguruma's message when it does not compile.
    explicit OnigRegex(std::string_view pattern);
    ~OnigRegex();
    OnigRegex(const OnigRegex&) = delete;
    OnigRegex& operator=(const OnigRegex&) = delete;

    // Calls on_match(begin, end) (byte offsets into `text`) for every match, left to right, with the iteration
    // rules of the Rust onig crate's find_iter: an empty match right where the previous match ended is skipped
    // by advancing one character. `text` must be valid UTF-8; it is searched as a whole string (^, $ and
    // look-arounds see its ends).
    void for_each_match(std::string_view text, const std::function<void(size_t, size_t)>& on_match) const;

    const std::string& pattern() const { return pattern_; }

  private:
    std::string pattern_;
    void* regex_ = nullptr;  // regex_t*
};

}  // namespace dsv4::tokenizer
