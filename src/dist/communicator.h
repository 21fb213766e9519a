// Communicator: the collectives expert parallelism needs between the ranks of one job (one rank per GPU): all-to-all
// with variable counts (token dispatch and combine), all-gather (counts, routing counters), all-reduce (sums) and a
// barrier. Two implementations: NCCL (nccl_communicator.h; buffers in device memory, collectives enqueued on the
// rank's CUDA stream, capturable in CUDA graphs) and an in-process loopback (loopback_communicator.h; N ranks as
// threads, host memory) for the CPU tests. Buffers live where memory() says.
//
// Failure model: a rank that fails calls abort(reason); every collective of every other rank that is waiting or
// comes later throws CommError naming the failed rank and its reason, so the job ends with that error instead of a
// hang. A collective that waits longer than the communicator's timeout fails the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "core/error.h"

namespace dsv4::dist {

enum class CommDtype : uint8_t { kF32, kI32, kI64, kU8 };
size_t comm_dtype_bytes(CommDtype dtype);

enum class CommMemory : uint8_t { kHost, kDevice };

// A collective failed because a rank stopped, the job timed out, or the ranks disagreed on a collective.
class CommError : public Error {
  public:
    explicit CommError(const std::string& message) : Error(message) {}
};

class Communicator {
  public:
    virtual ~Communicator() = default;

    virtual int rank() const = 0;
    virtual int size() const = 0;
    virtual std::string name() const = 0;  // "loopback", "nccl"
    virtual CommMemory memory() const = 0;

    // Rank r's send_counts[q] elements (contiguous, in rank order) go to rank q, which receives them at its offset
    // for r (contiguous, in rank order, recv_counts[r] elements). Counts must agree pairwise.
    virtual void all_to_all_v(const void* send, std::span<const int64_t> send_counts, void* recv,
                              std::span<const int64_t> recv_counts, CommDtype dtype) = 0;
    // recv [size * count]: rank r's `count` elements at r * count.
    virtual void all_gather(const void* send, int64_t count, void* recv, CommDtype dtype) = 0;
    // buf = elementwise sum over the ranks, in place (F32, I32, I64). Host memory is accepted here by every
    // communicator (NCCL stages it through the device): routing counters are summed between steps.
    virtual void all_reduce_sum(void* buf, int64_t count, CommDtype dtype) = 0;
    virtual void barrier() = 0;
    // Waits for this rank's enqueued collectives (NCCL: its stream, watching for a failed peer); loopback: no-op.
    virtual void synchronize() {}
    // This rank gives up: its peers' collectives fail with CommError naming it and the reason. Idempotent.
    virtual void abort(const std::string& reason) = 0;
};

}  // namespace dsv4::dist
