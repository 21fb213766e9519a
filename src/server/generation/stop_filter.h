// StopFilter: the sampler's StopStringMatcher (sample/stop_checker.h) as the server uses it: a request without stop
// strings passes text straight through (no per-byte automaton work), and the sampler header stays out of the
// server's other headers. Semantics are StopStringMatcher's exactly.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dsv4::server {

class StopFilter {
  public:
    struct Result {
        std::string emit;      // text that may be sent now
        bool stopped = false;  // a stop string completed
        std::string matched;   // which one
    };

    // No stop strings: every push passes its text through unchanged.
    StopFilter(std::vector<std::string> stop_strings, bool include_stop_str_in_output);
    ~StopFilter();
    StopFilter(StopFilter&&) noexcept;
    StopFilter& operator=(StopFilter&&) noexcept;

    Result push(std::string_view text, bool detect_stops);
    std::string flush();  // held-back text when the output ends for another reason
    bool stopped() const;

  private:
    class Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace dsv4::server
