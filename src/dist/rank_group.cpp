#include "dist/rank_group.h"

#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dsv4::dist {

void run_ranks(std::span<Communicator* const> comms, const std::function<void(int rank)>& body) {
    std::mutex mutex;
    std::string root_cause, follow_on;  // a rank's own failure; a peer's CommError caused by it
    auto record = [&](int rank, const std::string& what, bool comm_error) {
        std::lock_guard lock(mutex);
        std::string& slot = comm_error ? follow_on : root_cause;
        if (slot.empty()) slot = "expert-parallel rank " + std::to_string(rank) + ": " + what;
    };
    std::vector<std::thread> threads;
    threads.reserve(comms.size());
    for (size_t r = 0; r < comms.size(); ++r) {
        threads.emplace_back([&, r] {
            const int rank = static_cast<int>(r);
            try {
                body(rank);
            } catch (const CommError& e) {
                record(rank, e.what(), true);
                comms[r]->abort(e.what());
            } catch (const std::exception& e) {
                record(rank, e.what(), false);
                comms[r]->abort(e.what());
            } catch (...) {
                record(rank, "unknown exception", false);
                comms[r]->abort("unknown exception");
            }
        });
    }
    for (auto& t : threads) t.join();
    if (!root_cause.empty()) throw Error(root_cause);
    if (!follow_on.empty()) throw Error(follow_on);
}

ForwardResult expert_parallel_forward(DeepseekV4& model, ExpertParallelMoe& moe, const StepBatch& batch,
                                      const ForwardRequest& request) {
    DSV4_CHECK(model.moe_dispatch() == &moe, "expert_parallel_forward: the model does not dispatch through this MoE");
    moe.begin_step(batch.n_tokens());
    return model.forward(batch, request);
}

}  // namespace dsv4::dist
