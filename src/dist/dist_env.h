// The job's shape and the process environment for expert parallelism: how many ranks on how many nodes, and where
// NCCL's bootstrap root listens. Multi-node jobs run one process per node, each driving all its local GPUs; NCCL's
// own bootstrap joins them: every process sets NCCL_COMM_ID=<master-addr>:<master-port> before ncclGetUniqueId, so
// all derive the same id and global rank 0 (node 0, local GPU 0) hosts the bootstrap root there
// (docs/operations.md, "Expert parallelism").
#pragma once

#include <string>

namespace dsv4::dist {

struct DistOptions {
    int expert_parallel = 1;  // ranks in the whole job (GPUs over all nodes)
    int nnodes = 1;
    int node_rank = 0;
    std::string master_addr;  // required when nnodes > 1
    int master_port = 29500;

    int local_ranks() const { return expert_parallel / nnodes; }
    int first_global_rank() const { return node_rank * local_ranks(); }
};

// Throws a clear error for an impossible shape: ranks not a multiple of nodes, node rank out of range, no master
// address for several nodes, a port outside 1..65535, more local ranks than `visible_gpus` (when >= 0).
void validate_dist_options(const DistOptions& options, int visible_gpus = -1);

// Sets what the process needs before NCCL starts: NCCL_NVLS_ENABLE=0 always (NVLink multicast stays off on these
// machines, whatever the caller's environment says), and NCCL_COMM_ID for multi-node jobs.
void prepare_nccl_environment(const DistOptions& options);

}  // namespace dsv4::dist
