// MaskPrefetcher: computes the structured-output masks of a step's sampling sequences on a helper thread while the
// forward pass runs. A mask depends only on the tokens a completion has so far, not on the step's logits, so it
// overlaps the GPU step (and the CPU backend's step on another core) instead of following it. Steps without a
// constrained sequence never touch the thread. A mask that fails here is left for the sampler, which computes it
// again and reports the error on that sequence.
#pragma once

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "sample/sampler_state.h"

namespace dsv4 {

class MaskPrefetcher {
  public:
    MaskPrefetcher();
    ~MaskPrefetcher();
    MaskPrefetcher(const MaskPrefetcher&) = delete;
    MaskPrefetcher& operator=(const MaskPrefetcher&) = delete;

    // Starts computing the masks of `states` (returns at once). The states must not be used until wait().
    void start(std::vector<SamplerState*> states);
    // Blocks until the masks started last are computed. Safe to call when nothing was started.
    void wait();

  private:
    void run();

    std::mutex mutex_;
    std::condition_variable cv_;
    std::vector<SamplerState*> work_;
    bool busy_ = false;
    bool stop_ = false;
    std::thread thread_;
};

}  // namespace dsv4
