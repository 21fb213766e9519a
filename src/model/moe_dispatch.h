// MoeDispatch: the seam where the model's routed-expert sub-layer can run elsewhere. DeepseekV4's ffn_site calls the
// backend's moe op unless a dispatcher is set; expert parallelism (src/dist/expert_parallel_moe.h) sets one that
// sends each (token, expert) pair to a rank holding the expert and combines the results back. With no dispatcher the
// single-device path is exactly what it was (one pointer test per layer).
#pragma once

#include <cstdint>

#include "backend/tensor.h"
#include "backend/weights.h"

namespace dsv4 {

class MoeDispatch {
  public:
    virtual ~MoeDispatch() = default;
    // Must write y [N, D] as ModelOps::moe(h, w, weights, ids, limit, y) would (the same bits in exact numerics).
    virtual void moe(int layer, const Tensor& h, const MoeWeights& w, const Tensor& weights, const Tensor& ids,
                     float limit, Tensor y) = 0;
    // Whether moe() for a step of `tokens` tokens only queues device work (no host reads, no synchronisation), so
    // that a step graph may record it. Expert parallelism and the tier's planned steps read the routing on the host.
    virtual bool device_only(int64_t tokens) const {
        (void)tokens;
        return false;
    }
};

}  // namespace dsv4
