// parallel_for: an OpenMP loop whose body may throw. Exceptions cannot cross an OpenMP region, so the first one is
// captured and rethrown (as dsv4::Error) after the loop; the other iterations still run.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>

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

// Runs body(i) for i in [0, n) on the OpenMP threads (dynamic schedule).
template <typename F>
void parallel_for(int64_t n, F&& body) {
    ParallelErrors errors;
#pragma omp parallel for schedule(dynamic)
    for (int64_t i = 0; i < n; ++i) errors.guard([&] { body(i); });
    errors.rethrow();
}

}  // namespace dsv4
