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
};

}  // namespace dsv4
