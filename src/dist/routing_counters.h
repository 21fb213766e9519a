// RoutingCounters: how many (token, expert) pairs each routed expert of each MoE layer received, counted by every
// rank from its own routing. Summed over the ranks (an all-reduce), they are EPLB's only input (eplb.h), and host
// memory tiers can read the same counts to decide expert residency.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace dsv4::dist {

class RoutingCounters {
  public:
    RoutingCounters(int layers, int experts);

    // Counts every id of a layer's routing (ids outside [0, experts) are the dispatcher's error, not counted here).
    void add(int layer, std::span<const int32_t> ids);
    int64_t count(int layer, int expert) const { return counts_[static_cast<size_t>(layer) * experts_ + expert]; }
    // [layer][expert]
    std::vector<std::vector<int64_t>> per_layer() const;
    // The flat [layers * experts] array (all-reduced across ranks in place).
    std::vector<int64_t>& flat() { return counts_; }
    int64_t total() const;
    void reset();
    int layers() const { return layers_; }
    int experts() const { return experts_; }

  private:
    int layers_, experts_;
    std::vector<int64_t> counts_;
};

}  // namespace dsv4::dist
