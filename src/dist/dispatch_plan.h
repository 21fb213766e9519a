// DispatchPlan: where each (token, expert) pair of one rank's MoE layer goes, computed on the host from the routing
// ids and the placement (a pure function; dispatch and combine both follow it). Pairs leave grouped by destination
// rank, in pair order within each group; the combine brings every result back in the same order, so the pair
// p = t * k + j finds its expert output at slot_of_pair[p] of the returned rows.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "dist/expert_placement.h"

namespace dsv4::dist {

struct DispatchPlan {
    std::vector<int64_t> send_counts;   // [ranks] pairs sent to each rank
    std::vector<int32_t> send_token;    // [P] token row of each sent pair (grouped by destination)
    std::vector<int32_t> send_pair;     // [P] its pair index t * k + j
    std::vector<int32_t> send_expert;   // [P] its expert id
    std::vector<int32_t> slot_of_pair;  // [N * k] position of pair p among the sent (and returned) rows
};

// ids [tokens * k] of rank `rank`; token rows are offset by token_base (a micro-batch's first row) in send_token and
// in the replica choice, pair indices by token_base * k.
DispatchPlan plan_dispatch(std::span<const int32_t> ids, int k, const LayerPlacement& layer, int rank, int ranks,
                           int64_t token_base = 0);

}  // namespace dsv4::dist
