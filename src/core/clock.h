// Elapsed wall time for timings and metrics (one definition for every module).
#pragma once

#include <chrono>

namespace dsv4 {

// Seconds from `start` to now on the steady clock.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace dsv4
