// ExpertResidency: which routed experts of which layers one device holds. Expert parallelism
// (src/dist/expert_placement.h) decides it per rank; the weight loaders upload only those experts (the others stay
// invalid WeightRefs, and the MoE ops refuse a pair routed to one). Empty: every expert (the single-device default).
#pragma once

#include <functional>

namespace dsv4 {

using ExpertResidency = std::function<bool(int layer, int expert)>;

inline bool expert_resident(const ExpertResidency& residency, int layer, int expert) {
    return !residency || residency(layer, expert);
}

}  // namespace dsv4
