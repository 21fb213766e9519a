// The in-process loopback Communicator: N ranks as threads of one process, buffers in host memory. Every collective
// is a rendezvous of all N ranks on a shared hub: each rank posts its send buffer, waits for the others, copies what
// is addressed to it straight out of its peers' buffers, and waits again (so no buffer is reused early). The ranks
// must call the same collectives in the same order (checked: a mismatch is a CommError, as is a wait past the
// timeout or a peer's abort).
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "dist/communicator.h"

namespace dsv4::dist {

// N communicators sharing one hub; communicator r is rank r (hand each to its own thread).
std::vector<std::unique_ptr<Communicator>> make_loopback_group(
    int ranks, std::chrono::milliseconds timeout = std::chrono::milliseconds(120000));

}  // namespace dsv4::dist
