#include "dist/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <mutex>
#include <numeric>
#include <thread>

#include "dist/dist_env.h"

namespace dsv4::dist {
namespace {

std::string version_string(int code) {
    // NCCL >= 2.9 encodes major * 10000 + minor * 100 + patch.
    return fmt::format("{}.{}.{}", code / 10000, code / 100 % 100, code % 100);
}

void check_nccl(ncclResult_t r, const char* what) {
    if (r == ncclSuccess || r == ncclInProgress) return;
    throw CommError(fmt::format("NCCL {} failed: {}", what, ncclGetErrorString(r)));
}

void check_cuda(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw CommError(fmt::format("CUDA {} failed: {}", what, cudaGetErrorString(e)));
}

ncclDataType_t nccl_type(CommDtype d) {
    switch (d) {
        case CommDtype::kF32:
            return ncclFloat32;
        case CommDtype::kI32:
            return ncclInt32;
        case CommDtype::kI64:
            return ncclInt64;
        case CommDtype::kU8:
            return ncclUint8;
    }
    return ncclUint8;
}

bool is_device_pointer(const void* p) {
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();  // clear: a plain host pointer
        return false;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

// Shared by the ranks of one process: the first local abort, seen by every local rank's wait loop.
struct LocalJob {
    std::atomic<bool> aborted{false};
    std::mutex mutex;
    std::string reason;
};

class NcclCommunicator final : public Communicator {
  public:
    NcclCommunicator(ncclComm_t comm, const NcclRankSpec& spec, int world, std::shared_ptr<LocalJob> job,
                     std::chrono::milliseconds timeout)
        : comm_(comm),
          spec_(spec),
          world_(world),
          stream_(static_cast<cudaStream_t>(spec.stream)),
          job_(std::move(job)),
          timeout_(timeout) {}
    ~NcclCommunicator() override {
        if (comm_ != nullptr) {
            if (job_->aborted) {
                ncclCommAbort(comm_);
            } else {
                ncclCommDestroy(comm_);
            }
        }
    }

    int rank() const override { return spec_.global_rank; }
    int size() const override { return world_; }
    std::string name() const override { return "nccl"; }
    CommMemory memory() const override { return CommMemory::kDevice; }

    void all_to_all_v(const void* send, std::span<const int64_t> send_counts, void* recv,
                      std::span<const int64_t> recv_counts, CommDtype dtype) override {
        DSV4_CHECK(static_cast<int>(send_counts.size()) == world_ && static_cast<int>(recv_counts.size()) == world_,
                   "all_to_all_v: counts for {} / {} ranks, the job has {}", send_counts.size(), recv_counts.size(),
                   world_);
        begin();
        const size_t bytes = comm_dtype_bytes(dtype);
        int64_t so = 0, ro = 0;
        check_nccl(ncclGroupStart(), "group start");
        for (int peer = 0; peer < world_; ++peer) {
            if (send_counts[peer] > 0) {
                check_nccl(ncclSend(static_cast<const char*>(send) + so * bytes, send_counts[peer], nccl_type(dtype),
                                    peer, comm_, stream_),
                           "send");
            }
            if (recv_counts[peer] > 0) {
                check_nccl(ncclRecv(static_cast<char*>(recv) + ro * bytes, recv_counts[peer], nccl_type(dtype), peer,
                                    comm_, stream_),
                           "recv");
            }
            so += send_counts[peer];
            ro += recv_counts[peer];
        }
        check_nccl(ncclGroupEnd(), "all_to_all_v");
        wait_enqueued();
    }

    void all_gather(const void* send, int64_t count, void* recv, CommDtype dtype) override {
        begin();
        check_nccl(ncclAllGather(send, recv, count, nccl_type(dtype), comm_, stream_), "all_gather");
        wait_enqueued();
    }

    void all_reduce_sum(void* buf, int64_t count, CommDtype dtype) override {
        DSV4_CHECK(dtype != CommDtype::kU8, "all_reduce_sum: bytes cannot be summed");
        begin();
        const size_t bytes = comm_dtype_bytes(dtype) * static_cast<size_t>(count);
        if (count > 0 && !is_device_pointer(buf)) {  // host memory (routing counters): staged through the device
            void* dev = nullptr;
            check_cuda(cudaSetDevice(spec_.device), "set device");
            check_cuda(cudaMalloc(&dev, bytes), "staging buffer");
            check_cuda(cudaMemcpyAsync(dev, buf, bytes, cudaMemcpyHostToDevice, stream_), "stage in");
            check_nccl(ncclAllReduce(dev, dev, count, nccl_type(dtype), ncclSum, comm_, stream_), "all_reduce");
            wait_enqueued();
            check_cuda(cudaMemcpyAsync(buf, dev, bytes, cudaMemcpyDeviceToHost, stream_), "stage out");
            synchronize();
            cudaFree(dev);
            return;
        }
        check_nccl(ncclAllReduce(buf, buf, count, nccl_type(dtype), ncclSum, comm_, stream_), "all_reduce");
        wait_enqueued();
    }

    void barrier() override {
        int64_t one = 1;
        all_reduce_sum(&one, 1, CommDtype::kI64);
        DSV4_CHECK(one == world_, "barrier: {} of {} ranks", one, world_);
    }

    // Waits for the stream; a peer's abort, an NCCL error or the timeout aborts this communicator and throws.
    void synchronize() override {
        const auto deadline = std::chrono::steady_clock::now() + timeout_;
        for (;;) {
            const cudaError_t q = cudaStreamQuery(stream_);
            if (q == cudaSuccess) return;
            if (q != cudaErrorNotReady)
                fail_job(fmt::format("CUDA error on rank {}: {}", rank(), cudaGetErrorString(q)));
            watch(deadline);
            std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
    }

    void abort(const std::string& reason) override {
        {
            std::lock_guard lock(job_->mutex);
            if (job_->reason.empty()) job_->reason = fmt::format("rank {} stopped: {}", rank(), reason);
        }
        job_->aborted = true;
    }

  private:
    void begin() {
        if (job_->aborted) throw CommError(job_->reason);
    }

    // Non-blocking communicators may return before a call is enqueued: wait for that (not for the GPU).
    void wait_enqueued() {
        const auto deadline = std::chrono::steady_clock::now() + timeout_;
        for (;;) {
            ncclResult_t state = ncclSuccess;
            check_nccl(ncclCommGetAsyncError(comm_, &state), "async error query");
            if (state == ncclSuccess) return;
            if (state != ncclInProgress)
                fail_job(fmt::format("NCCL error on rank {}: {}", rank(), ncclGetErrorString(state)));
            watch(deadline);
            std::this_thread::yield();
        }
    }

    void watch(std::chrono::steady_clock::time_point deadline) {
        if (job_->aborted) fail_job(job_->reason);
        ncclResult_t state = ncclSuccess;
        ncclCommGetAsyncError(comm_, &state);
        if (state != ncclSuccess && state != ncclInProgress) {
            fail_job(fmt::format("NCCL error on rank {}: {} (a peer rank may have died)", rank(),
                                 ncclGetErrorString(state)));
        }
        if (std::chrono::steady_clock::now() > deadline) {
            fail_job(fmt::format("rank {}: a collective did not finish within {} ms (a peer rank stopped?)", rank(),
                                 timeout_.count()));
        }
    }

    [[noreturn]] void fail_job(const std::string& message) {
        abort(message);
        ncclCommAbort(comm_);  // frees this rank's side; the peers see the error or time out the same way
        comm_ = nullptr;
        throw CommError(message);
    }

    ncclComm_t comm_;
    NcclRankSpec spec_;
    int world_;
    cudaStream_t stream_;
    std::shared_ptr<LocalJob> job_;
    std::chrono::milliseconds timeout_;
};

}  // namespace

std::string checked_nccl_version() {
    int loaded = 0;
    check_nccl(ncclGetVersion(&loaded), "version query");
    if (loaded / 100 != NCCL_VERSION_CODE / 100) {
        throw CommError(
            fmt::format("NCCL {} is loaded but dsv4 was built against NCCL {}: put the matching "
                        "libnccl.so.2 first on LD_LIBRARY_PATH (the CUDA toolkit's lib64)",
                        version_string(loaded), version_string(NCCL_VERSION_CODE)));
    }
    return version_string(loaded);
}

std::vector<std::unique_ptr<Communicator>> make_nccl_group(std::span<const NcclRankSpec> ranks, int world,
                                                           std::chrono::milliseconds timeout) {
    DSV4_CHECK(!ranks.empty() && world >= static_cast<int>(ranks.size()), "NCCL group: {} local ranks of {}",
               ranks.size(), world);
    checked_nccl_version();
    ::setenv("NCCL_NVLS_ENABLE", "0", 1);  // whatever the caller did: NVLink multicast stays off
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
    for (const NcclRankSpec& r : ranks) {
        DSV4_CHECK(r.device >= 0 && r.device < devices,
                   "expert parallelism needs GPU {} on this node; {} visible (CUDA_VISIBLE_DEVICES and the driver "
                   "decide)",
                   r.device, devices);
        DSV4_CHECK(r.global_rank >= 0 && r.global_rank < world, "NCCL group: rank {} of {}", r.global_rank, world);
    }
    ncclUniqueId id;
    check_nccl(ncclGetUniqueId(&id), "unique id");  // multi-node: derived from NCCL_COMM_ID, the same everywhere
    std::vector<ncclComm_t> comms(ranks.size(), nullptr);
    check_nccl(ncclGroupStart(), "group start");
    for (size_t i = 0; i < ranks.size(); ++i) {
        check_cuda(cudaSetDevice(ranks[i].device), "set device");
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0;  // so a wait can watch for peers and time out (abortable)
        check_nccl(ncclCommInitRankConfig(&comms[i], world, id, ranks[i].global_rank, &config), "init");
    }
    check_nccl(ncclGroupEnd(), "init group");
    auto job = std::make_shared<LocalJob>();
    std::vector<std::unique_ptr<Communicator>> out;
    for (size_t i = 0; i < ranks.size(); ++i) {
        // Wait for the non-blocking init of each communicator.
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        ncclResult_t state = ncclInProgress;
        while (state == ncclInProgress) {
            check_nccl(ncclCommGetAsyncError(comms[i], &state), "init status");
            DSV4_CHECK(std::chrono::steady_clock::now() < deadline,
                       "NCCL init of rank {} did not finish within {} ms (are all nodes started?)",
                       ranks[i].global_rank, timeout.count());
            std::this_thread::yield();
        }
        check_nccl(state, "init");
        out.push_back(std::make_unique<NcclCommunicator>(comms[i], ranks[i], world, job, timeout));
    }
    return out;
}

}  // namespace dsv4::dist
