#include "server/generation/stop_filter.h"

#include "sample/stop_checker.h"

namespace dsv4::server {

class StopFilter::Impl {
  public:
    Impl(std::vector<std::string> stop_strings, bool include_stop)
        : enabled_(!stop_strings.empty()), matcher_(std::move(stop_strings), include_stop) {}

    Result push(std::string_view text, bool detect_stops) {
        if (!enabled_) return {std::string(text), false, {}};
        StopStringMatcher::Result result = matcher_.push(text, detect_stops);
        return {std::move(result.emit), result.stopped, std::move(result.matched)};
    }
    std::string flush() { return enabled_ ? matcher_.flush() : std::string(); }
    bool stopped() const { return enabled_ && matcher_.stopped(); }

  private:
    bool enabled_;
    StopStringMatcher matcher_;
};

StopFilter::StopFilter(std::vector<std::string> stop_strings, bool include_stop_str_in_output)
    : impl_(std::make_unique<Impl>(std::move(stop_strings), include_stop_str_in_output)) {}
StopFilter::~StopFilter() = default;
StopFilter::StopFilter(StopFilter&&) noexcept = default;
StopFilter& StopFilter::operator=(StopFilter&&) noexcept = default;

StopFilter::Result StopFilter::push(std::string_view text, bool detect_stops) {
    return impl_->push(text, detect_stops);
}
std::string StopFilter::flush() {
    return impl_->flush();
}
bool StopFilter::stopped() const {
    return impl_->stopped();
}

}  // namespace dsv4::server
