// ResultStreamQueue: the thread-safe queue behind a request's ResultStream (include/dsv4/engine.h). The engine
// thread pushes events; any thread pops them.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>

#include "dsv4/engine.h"

namespace dsv4 {

class ResultStreamQueue final : public ResultStream {
  public:
    explicit ResultStreamQueue(int completions) : completions_(completions) {}

    std::optional<RequestOutput> pop(std::chrono::milliseconds timeout) override;
    bool done() const override;
    void push(RequestOutput output);

  private:
    mutable std::mutex mutex_;
    std::condition_variable ready_;
    std::deque<RequestOutput> queue_;
    int completions_;
    int finished_popped_ = 0;
};

}  // namespace dsv4
