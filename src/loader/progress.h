// Progress reporting for long byte-streaming jobs (checksumming, later weight upload): a redrawn bar with rate and
// ETA on a terminal, periodic log lines otherwise. Workers call add_bytes / item_done from any thread; a background
// thread does the printing.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

namespace dsv4 {

enum class ProgressMode {
    kAuto,  // bar if the stream is a terminal, else periodic log lines
    kBar,
    kLog,
    kNone,
};

// "1.50 GiB", "512 B".
std::string format_bytes(double bytes);
// "1h02m03s", "4m05s", "7s"; "?" for a negative or non-finite value.
std::string format_duration(double seconds);
// One progress line (no newline): percent, done/total, rate, ETA, items.
std::string format_progress(std::string_view label, uint64_t done, uint64_t total, double elapsed_s, size_t items_done,
                            size_t items_total, bool with_bar);

class ByteProgress {
  public:
    ByteProgress(std::string label, uint64_t total_bytes, size_t total_items, ProgressMode mode, std::FILE* stream,
                 double log_interval_s);
    ByteProgress(const ByteProgress&) = delete;
    ByteProgress& operator=(const ByteProgress&) = delete;
    ~ByteProgress();  // finish()es

    void add_bytes(uint64_t n) { done_bytes_.fetch_add(n, std::memory_order_relaxed); }
    void item_done() { done_items_.fetch_add(1, std::memory_order_relaxed); }
    // Stops the printer and prints the final line (once).
    void finish();

  private:
    void run();
    void print(bool final_line);

    std::string label_;
    uint64_t total_bytes_;
    size_t total_items_;
    ProgressMode mode_;  // resolved: kBar, kLog or kNone
    std::FILE* stream_;
    double interval_s_;
    std::chrono::steady_clock::time_point start_;
    std::atomic<uint64_t> done_bytes_{0};
    std::atomic<size_t> done_items_{0};
    std::mutex mutex_;
    std::condition_variable wake_;
    bool stop_ = false;
    std::thread printer_;
};

}  // namespace dsv4
