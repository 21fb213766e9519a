// Profiler: named timing regions of the forward pass (the per-component breakdown of `dsv4 bench offline`) and
// launch counts. Every method is optional: the defaults do nothing and report nothing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dsv4 {

class Profiler {
  public:
    virtual ~Profiler() = default;

    // Turns region timing on or off (it may disable graph recording while on).
    virtual void set_profiling(bool on) { (void)on; }
    // The ops from here on belong to region `name` (until the next call); a no-op unless profiling is on.
    virtual void region(std::string_view name) { (void)name; }
    // Accumulated milliseconds per region since the last reset.
    virtual std::vector<std::pair<std::string, double>> profile(bool reset) {
        (void)reset;
        return {};
    }
    // Kernel launches issued so far (0 where not counted).
    virtual int64_t launches() const { return 0; }
    // Nodes of the recorded graphs launched so far by replaying them (0 where steps are not recorded): with
    // launches(), what a step costs the GPU's front end.
    virtual int64_t graph_nodes_replayed() const { return 0; }
    // One line on the memory the backend holds and what is free (logged at startup).
    virtual std::string memory_report() const { return {}; }
    // The device's step scratch (a bump arena reset every step; CUDA: --cuda-workspace-mib): its bytes, and the most
    // of it in use at once since the backend started or the last reset_workspace_high_water(); 0 where there is none.
    // What a workspace setting must cover for a token budget and batch.
    virtual int64_t workspace_bytes() const { return 0; }
    virtual int64_t workspace_high_water_bytes() const { return 0; }
    virtual void reset_workspace_high_water() {}
};

}  // namespace dsv4
