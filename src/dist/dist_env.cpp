#include "dist/dist_env.h"

#include <cstdlib>

#include "core/error.h"

namespace dsv4::dist {

void validate_dist_options(const DistOptions& o, int visible_gpus) {
    DSV4_CHECK(o.expert_parallel >= 1 && o.expert_parallel <= 1024, "--expert-parallel {}: must be in 1..1024",
               o.expert_parallel);
    DSV4_CHECK(o.nnodes >= 1 && o.expert_parallel % o.nnodes == 0,
               "--expert-parallel {} over --nnodes {}: the ranks must divide evenly over the nodes", o.expert_parallel,
               o.nnodes);
    DSV4_CHECK(o.node_rank >= 0 && o.node_rank < o.nnodes, "--node-rank {} is outside 0..{}", o.node_rank,
               o.nnodes - 1);
    DSV4_CHECK(o.nnodes == 1 || !o.master_addr.empty(),
               "--nnodes {} needs --master-addr (the host of node 0, where NCCL's bootstrap root listens)", o.nnodes);
    DSV4_CHECK(o.master_port >= 1 && o.master_port <= 65535, "--master-port {} is outside 1..65535", o.master_port);
    if (visible_gpus >= 0) {
        DSV4_CHECK(o.local_ranks() <= visible_gpus,
                   "--expert-parallel {} needs {} GPU(s) on this node; {} visible (CUDA_VISIBLE_DEVICES and the "
                   "driver decide)",
                   o.expert_parallel, o.local_ranks(), visible_gpus);
    }
}

void prepare_nccl_environment(const DistOptions& o) {
    ::setenv("NCCL_NVLS_ENABLE", "0", 1);
    if (o.nnodes > 1) {
        const std::string id = o.master_addr + ":" + std::to_string(o.master_port);
        ::setenv("NCCL_COMM_ID", id.c_str(), 1);
    }
}

}  // namespace dsv4::dist
