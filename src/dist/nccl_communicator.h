// The NCCL Communicator (CUDA build only): one communicator per local GPU, created together by the one process that
// drives them (one worker thread per GPU uses its own). Collectives are enqueued on the rank's CUDA stream (the
// backend's, so they order with its kernels and CUDA graphs can capture them); synchronize() waits for that stream
// while watching NCCL's asynchronous errors, a peer's abort and a timeout, so a dead rank ends the job with a clear
// error instead of a hang. Multi-node: every node's process calls make_nccl_group for its GPUs after
// prepare_nccl_environment (dist_env.h): NCCL_COMM_ID makes every process derive the same unique id, and global
// rank 0 hosts NCCL's bootstrap root. NVLink multicast stays off (NCCL_NVLS_ENABLE=0, set there).
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dist/communicator.h"

namespace dsv4::dist {

struct NcclRankSpec {
    int device = 0;          // CUDA device ordinal
    int global_rank = 0;     // in [0, world)
    void* stream = nullptr;  // cudaStream_t the collectives are enqueued on (the rank's backend stream)
};

// The communicators of this process's ranks of a `world`-rank job. Throws a clear error for a missing GPU, an NCCL
// library whose version differs from the one dsv4 was built against, or ranks that disagree on the NCCL version.
std::vector<std::unique_ptr<Communicator>> make_nccl_group(std::span<const NcclRankSpec> ranks, int world,
                                                           std::chrono::milliseconds timeout = std::chrono::minutes(5));

// "2.28.9" for the loaded library; throws when its major.minor differs from the headers dsv4 was built with.
std::string checked_nccl_version();

}  // namespace dsv4::dist
