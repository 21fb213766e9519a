// Expert parallelism over NCCL. One GPU: the NCCL path with N = 1 matches the non-distributed path (exact numerics;
// the GPU combine fuses the routing weight into its sum as one FMA, the dispatched path rounds the weighted pair
// first, so ulps may differ: bound 1e-5 of the logit range). Multi-GPU: N = 2 (and every GPU visible) is
// bit-identical to N = 1 in exact numerics and within the fast-numerics bound in fast numerics (the MoE kernel path
// depends on how many pairs a rank computes); a rank that dies ends the job with its error, no hang.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>

#include "../dist/ep_harness.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_factory.h"
#include "dist/nccl_communicator.h"

namespace dsv4::dist::testing {
namespace {

int gpu_count() {
    int n = 0;
    if (!cuda_available() || cudaGetDeviceCount(&n) != cudaSuccess) return 0;
    return n;
}

#define REQUIRE_GPUS(n) \
    if (gpu_count() < (n)) GTEST_SKIP() << "skipped: needs " << (n) << " GPU(s), " << gpu_count() << " visible"

BackendFactory cuda_backend(Numerics numerics) {
    return [numerics](int rank) {
        CudaOptions o;
        o.device = rank;
        return make_cuda_backend(numerics, o);
    };
}

std::vector<std::unique_ptr<Communicator>> nccl_comms(const std::vector<Backend*>& backends) {
    std::vector<NcclRankSpec> specs;
    for (size_t r = 0; r < backends.size(); ++r) {
        auto& cuda = static_cast<cuda::CudaBackend&>(*backends[r]);
        specs.push_back({static_cast<int>(r), static_cast<int>(r), cuda.stream()});
    }
    return make_nccl_group(specs, static_cast<int>(specs.size()), std::chrono::seconds(20));
}

EpRunOptions nccl_run(int ranks, Numerics numerics) {
    EpRunOptions o;
    o.ranks = ranks;
    o.placement = contiguous_placement;
    o.moe.low_latency_max_tokens = 4;
    o.make_backend = cuda_backend(numerics);
    o.make_comms = nccl_comms;
    return o;
}

double worst(const RunLogits& got, const RunLogits& want) {
    double err = 0.0;
    for (size_t s = 0; s < want.size(); ++s)
        for (size_t t = 0; t < want[s].size(); ++t)
            err = std::max(err, golden::relative_max_error(got[s][t], want[s][t]));
    return err;
}

bool all_same_bits(const RunLogits& got, const RunLogits& want) {
    for (size_t s = 0; s < want.size(); ++s)
        for (size_t t = 0; t < want[s].size(); ++t)
            if (!same_bits(got[s][t], want[s][t])) return false;
    return true;
}

TEST(EpNccl, OneRankMatchesTheNonDistributedPath) {
    REQUIRE_GPUS(1);
    const Schedule schedule;
    for (const auto& fixture : golden::fixture_names()) {
        const auto tokens = read_npy_i32((golden::fixture_dir(fixture) / "tokens.npy").string()).values;
        const auto seqs = make_sequences(tokens, 3, schedule);
        const RunLogits want = single_rank_run(fixture, seqs, schedule, cuda_backend(Numerics::kExact));
        const RunLogits got = expert_parallel_run(fixture, seqs, schedule, nccl_run(1, Numerics::kExact));
        const double err = worst(got, want);
        std::printf("[ ep-nccl ] %s N=1 vs plain: max|diff|/max|ref| = %.3e\n", fixture.c_str(), err);
        EXPECT_LE(err, 1e-5) << fixture;
    }
}

TEST(EpNccl, MultiGpuMatchesOneRank) {
    REQUIRE_GPUS(2);
    const Schedule schedule;
    for (int ranks : {2, gpu_count()}) {
        for (const auto& fixture : golden::fixture_names()) {
            const auto tokens = read_npy_i32((golden::fixture_dir(fixture) / "tokens.npy").string()).values;
            const auto seqs = make_sequences(tokens, 3, schedule);
            const RunLogits exact1 = expert_parallel_run(fixture, seqs, schedule, nccl_run(1, Numerics::kExact));
            const RunLogits exactn = expert_parallel_run(fixture, seqs, schedule, nccl_run(ranks, Numerics::kExact));
            EXPECT_TRUE(all_same_bits(exactn, exact1)) << fixture << " N=" << ranks << " exact";
            const RunLogits fast1 = expert_parallel_run(fixture, seqs, schedule, nccl_run(1, Numerics::kFast));
            const RunLogits fastn = expert_parallel_run(fixture, seqs, schedule, nccl_run(ranks, Numerics::kFast));
            const double err = worst(fastn, fast1);
            std::printf("[ ep-nccl ] %s N=%d fast vs N=1 fast: %.3e\n", fixture.c_str(), ranks, err);
            EXPECT_LE(err, 5e-2) << fixture;
        }
    }
}

TEST(EpNccl, KilledRankEndsTheJobWithAClearError) {
    REQUIRE_GPUS(2);
    const Schedule schedule;
    const auto tokens = read_npy_i32((golden::fixture_dir("odd_dims") / "tokens.npy").string()).values;
    EpRunOptions o = nccl_run(2, Numerics::kFast);
    o.fail_rank = 1;
    const auto t0 = std::chrono::steady_clock::now();
    try {
        expert_parallel_run("odd_dims", make_sequences(tokens, 3, schedule), schedule, o);
        FAIL() << "the job did not fail";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
    }
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 60.0);
}

}  // namespace
}  // namespace dsv4::dist::testing
