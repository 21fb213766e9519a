#include "loader/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace dsv4 {

std::string format_bytes(double bytes) {
    static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int unit = 0;
    while (bytes >= 1024.0 && unit < 4) {
        bytes /= 1024.0;
        ++unit;
    }
    return unit == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.2f} {}", bytes, kUnits[unit]);
}

std::string format_duration(double seconds) {
    if (!std::isfinite(seconds) || seconds < 0 || seconds > 1e9) return "?";
    auto s = static_cast<int64_t>(std::llround(seconds));
    int64_t h = s / 3600, m = (s / 60) % 60, sec = s % 60;
    if (h > 0) return fmt::format("{}h{:02}m{:02}s", h, m, sec);
    if (m > 0) return fmt::format("{}m{:02}s", m, sec);
    return fmt::format("{}s", sec);
}

std::string format_progress(std::string_view label, uint64_t done, uint64_t total, double elapsed_s, size_t items_done,
                            size_t items_total, bool with_bar) {
    double fraction = total == 0 ? 1.0 : std::min(1.0, static_cast<double>(done) / static_cast<double>(total));
    double rate = elapsed_s > 0 ? static_cast<double>(done) / elapsed_s : 0.0;
    std::string eta = done >= total ? "0s" : rate > 0 ? format_duration(static_cast<double>(total - done) / rate) : "?";
    std::string bar;
    if (with_bar) {
        constexpr int kWidth = 30;
        int filled = static_cast<int>(fraction * kWidth);
        // Built by appends: GCC 12 -O3 reports a bogus -Wrestrict on chained std::string operator+.
        bar.reserve(kWidth + 3);
        bar.push_back('[');
        bar.append(static_cast<size_t>(filled), '#');
        bar.append(static_cast<size_t>(kWidth - filled), '.');
        bar.append("] ");
    }
    return fmt::format("{}: {}{:5.1f}%  {} / {}  {}/s  ETA {}  {}/{} files", label, bar, fraction * 100.0,
                       format_bytes(static_cast<double>(done)), format_bytes(static_cast<double>(total)),
                       format_bytes(rate), eta, items_done, items_total);
}

ByteProgress::ByteProgress(std::string label, uint64_t total_bytes, size_t total_items, ProgressMode mode,
                           std::FILE* stream, double log_interval_s)
    : label_(std::move(label)),
      total_bytes_(total_bytes),
      total_items_(total_items),
      mode_(mode),
      stream_(stream),
      interval_s_(log_interval_s),
      start_(std::chrono::steady_clock::now()) {
    if (stream_ == nullptr) mode_ = ProgressMode::kNone;
    if (mode_ == ProgressMode::kAuto) mode_ = ::isatty(::fileno(stream_)) ? ProgressMode::kBar : ProgressMode::kLog;
    if (mode_ == ProgressMode::kBar) interval_s_ = 0.25;
    if (mode_ != ProgressMode::kNone) printer_ = std::thread([this] { run(); });
}

ByteProgress::~ByteProgress() {
    finish();
}

void ByteProgress::finish() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stop_) return;
        stop_ = true;
    }
    wake_.notify_all();
    if (printer_.joinable()) printer_.join();
    if (mode_ != ProgressMode::kNone) print(true);
}

void ByteProgress::run() {
    std::unique_lock<std::mutex> lock(mutex_);
    auto interval = std::chrono::duration<double>(std::max(0.01, interval_s_));
    while (!wake_.wait_for(lock, interval, [this] { return stop_; })) print(false);
}

void ByteProgress::print(bool final_line) {
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::string line =
        format_progress(label_, done_bytes_.load(std::memory_order_relaxed), total_bytes_, elapsed,
                        done_items_.load(std::memory_order_relaxed), total_items_, mode_ == ProgressMode::kBar);
    if (mode_ == ProgressMode::kBar) {
        // \r + erase-to-end-of-line redraws in place; the final draw ends the line.
        std::fprintf(stream_, "\r%s\x1b[K%s", line.c_str(), final_line ? "\n" : "");
    } else {
        std::fprintf(stream_, "%s\n", line.c_str());
    }
    std::fflush(stream_);
}

}  // namespace dsv4
