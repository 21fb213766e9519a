#include "dist/routing_counters.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace dsv4::dist {

RoutingCounters::RoutingCounters(int layers, int experts)
    : layers_(layers), experts_(experts), counts_(static_cast<size_t>(layers) * experts, 0) {
    DSV4_CHECK(layers >= 0 && experts >= 1, "routing counters: {} layers, {} experts", layers, experts);
}

void RoutingCounters::add(int layer, std::span<const int32_t> ids) {
    DSV4_CHECK(layer >= 0 && layer < layers_, "routing counters: layer {} of {}", layer, layers_);
    int64_t* row = counts_.data() + static_cast<size_t>(layer) * experts_;
    for (int32_t e : ids) {
        if (e >= 0 && e < experts_) ++row[e];
    }
}

std::vector<std::vector<int64_t>> RoutingCounters::per_layer() const {
    std::vector<std::vector<int64_t>> out(layers_);
    for (int l = 0; l < layers_; ++l) {
        out[l].assign(counts_.begin() + static_cast<int64_t>(l) * experts_,
                      counts_.begin() + static_cast<int64_t>(l + 1) * experts_);
    }
    return out;
}

int64_t RoutingCounters::total() const {
    return std::accumulate(counts_.begin(), counts_.end(), int64_t{0});
}

void RoutingCounters::reset() {
    std::fill(counts_.begin(), counts_.end(), 0);
}

}  // namespace dsv4::dist
