#include "engine/result_stream.h"

namespace dsv4 {

std::optional<RequestOutput> ResultStreamQueue::pop(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    ready_.wait_for(lock, timeout, [&] { return !queue_.empty() || finished_popped_ == completions_; });
    if (queue_.empty()) return std::nullopt;
    RequestOutput out = std::move(queue_.front());
    queue_.pop_front();
    if (out.finished) ++finished_popped_;
    if (finished_popped_ == completions_) ready_.notify_all();
    return out;
}

bool ResultStreamQueue::done() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return finished_popped_ == completions_;
}

void ResultStreamQueue::push(RequestOutput output) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        queue_.push_back(std::move(output));
    }
    ready_.notify_all();
}

}  // namespace dsv4
