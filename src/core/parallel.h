// parallel_for: an OpenMP loop whose body may throw. Exceptions cannot cross an OpenMP region, so the first one is
// captured and rethrown (as dsv4::Error) after the loop; the other iterations still run.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <utility>

#include "core/error.h"

namespace dsv4 {

class ParallelErrors {
  public:
    template <typename F>
    void guard(F&& body) noexcept {
        try {
            body();
        } catch (const std::exception& e) {
            record(e.what());
        } catch (...) {
            record("unknown exception in a parallel loop");
        }
    }
    void rethrow() const {
        if (failed_.load()) throw Error(first_);
    }

  private:
    void record(const char* what) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!failed_.exchange(true)) first_ = what;
    }
    std::mutex mutex_;
    std::string first_;
    std::atomic<bool> failed_{false};
};

// Below this many scalar operations a loop stays on the calling thread. An OpenMP fork/join costs microseconds,
// and far more when the cores are shared (the idle workers spin), which small models and decode steps would pay on
// every op.
inline constexpr int64_t kMinParallelWork = int64_t{1} << 15;
inline bool worth_parallel(int64_t work) {
    return work >= kMinParallelWork;
}

// Runs body(i) for i in [0, n) on the OpenMP threads (dynamic schedule) when the loop is worth it: `work_per_item`
// is a rough count of scalar operations per iteration.
template <typename F>
void parallel_for(int64_t n, int64_t work_per_item, F&& body) {
    ParallelErrors errors;
#pragma omp parallel for schedule(dynamic) if (n > 1 && worth_parallel(n * work_per_item))
    for (int64_t i = 0; i < n; ++i) errors.guard([&] { body(i); });
    errors.rethrow();
}

// Runs body(i) for i in [0, n) on the OpenMP threads; for loops whose iterations are each substantial.
template <typename F>
void parallel_for(int64_t n, F&& body) {
    parallel_for(n, kMinParallelWork, std::forward<F>(body));
}

}  // namespace dsv4
