#include "runtime/mask_prefetch.h"

#include <exception>

namespace dsv4 {

MaskPrefetcher::MaskPrefetcher() : thread_([this] { run(); }) {}

MaskPrefetcher::~MaskPrefetcher() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

void MaskPrefetcher::start(std::vector<SamplerState*> states) {
    wait();
    {
        std::lock_guard lock(mutex_);
        work_ = std::move(states);
        busy_ = true;
    }
    cv_.notify_all();
}

void MaskPrefetcher::wait() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [this] { return !busy_; });
}

void MaskPrefetcher::run() {
    std::unique_lock lock(mutex_);
    while (true) {
        cv_.wait(lock, [this] { return busy_ || stop_; });
        if (stop_) return;
        std::vector<SamplerState*> work = std::move(work_);
        lock.unlock();
        for (SamplerState* state : work) {
            try {
                state->prepare_constraint_mask();
            } catch (const std::exception&) {
                // The sampler computes this mask again and reports the error on its sequence.
            }
        }
        lock.lock();
        busy_ = false;
        cv_.notify_all();
    }
}

}  // namespace dsv4
