// The indexer's top-k selection kernel against a host selection: the k largest of each token's eligible entries,
// returned in index order, exact ties at the k-th score taken lowest index first, -1 padding when fewer entries are
// eligible. Scores drawn from a few values (ties everywhere) with -inf entries, for eligible counts from below k to
// far above the block's thread count (the parallel compaction's segments). Also the row argmax (greedy drafts)
// against argmax_of_row. Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "backend/cuda/kernels.h"
#include "backend/model_ops.h"
#include "device_copies.h"
#include "op_test_support.h"

namespace dsv4::ops_test {
namespace {

std::vector<int32_t> host_topk(const float* s, int64_t eligible, int k) {
    std::vector<int32_t> order(static_cast<size_t>(eligible));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return s[a] > s[b]; });
    order.resize(static_cast<size_t>(std::min<int64_t>(k, eligible)));
    std::sort(order.begin(), order.end());
    order.resize(static_cast<size_t>(k), -1);
    return order;
}

TEST(CudaTopk, MatchesHostSelectionWithTiesInIndexOrder) {
    DSV4_REQUIRE_GPU();
    const int ratio = 4, k = 512;
    const std::vector<int64_t> eligible = {0, 5, 511, 512, 513, 3000, 16384, 20000};
    const int64_t max_entries = 20000;
    const int n = static_cast<int>(eligible.size());
    std::vector<int32_t> positions(n);
    // (position + 1) / ratio == eligible for positions eligible * ratio - 1 .. + ratio - 2.
    for (int t = 0; t < n; ++t) {
        positions[t] = std::max<int32_t>(0, static_cast<int32_t>(eligible[t] * ratio - 1 + t % ratio));
    }
    std::uniform_int_distribution<int> value(0, 40);
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    std::vector<float> scores(static_cast<size_t>(n * max_entries));
    for (float& v : scores)
        v = u(rng()) < 0.05f ? -std::numeric_limits<float>::infinity() : 0.25f * value(rng()) - 3.0f;
    cuda::StepMeta m;
    m.n_tokens = n;
    int32_t* pos_d = to_device(positions);
    float* scores_d = to_device(scores);
    int32_t* out_d = to_device(std::vector<int32_t>(static_cast<size_t>(n) * k, 7));
    m.positions = pos_d;
    cuda::launch_topk(nullptr, m, scores_d, max_entries, ratio, k, out_d);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<int32_t> out(static_cast<size_t>(n) * k);
    ASSERT_EQ(cudaMemcpy(out.data(), out_d, out.size() * sizeof(int32_t), cudaMemcpyDeviceToHost), cudaSuccess);
    for (int t = 0; t < n; ++t) {
        const std::vector<int32_t> want = host_topk(scores.data() + t * max_entries, eligible[t], k);
        const std::vector<int32_t> got(out.begin() + t * k, out.begin() + (t + 1) * k);
        EXPECT_EQ(got, want) << "token " << t << ", " << eligible[t] << " eligible";
    }
    cudaFree(pos_d);
    cudaFree(scores_d);
    cudaFree(out_d);
}

// Rows of few distinct values (ties everywhere) with -inf sprinkled in, and rows with no choice (NaN first or last,
// +inf, only NaN, only -inf), widths from 1 to the V4 vocabulary: the kernel picks what argmax_of_row picks.
TEST(CudaArgmax, MatchesTheHostChoiceWithTiesAndFaults) {
    DSV4_REQUIRE_GPU();
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    std::uniform_int_distribution<int> value(0, 30);
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    for (const int64_t cols : {int64_t{1}, int64_t{7}, int64_t{256}, int64_t{1000}, int64_t{129280}}) {
        const int64_t rows = 10;
        std::vector<float> x;
        for (int64_t i = 0; i < rows * cols; ++i) {
            const int64_t r = i / cols, j = i % cols;
            float v = u(rng()) < 0.05f ? -inf : 0.5f * value(rng()) - 7.0f;
            if (r == 0 && j == 0) v = nan;         // row 0: NaN first
            if (r == 1 && j == cols / 2) v = inf;  // row 1: +inf
            if (r == 2) v = nan;                   // row 2: only NaN
            if (r == 3) v = -inf;                  // row 3: only -inf
            if (r == 4 && j == cols - 1) v = nan;  // row 4: NaN last
            x.push_back(v);
        }
        float* x_d = to_device(x);
        int32_t* out_d = to_device(std::vector<int32_t>(static_cast<size_t>(rows), -7));
        cuda::launch_argmax_rows(nullptr, x_d, rows, cols, out_d);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        std::vector<int32_t> out(static_cast<size_t>(rows));
        ASSERT_EQ(cudaMemcpy(out.data(), out_d, out.size() * sizeof(int32_t), cudaMemcpyDeviceToHost), cudaSuccess);
        for (int64_t r = 0; r < rows; ++r) {
            const int32_t want = argmax_of_row(std::span<const float>(x).subspan(r * cols, cols));
            EXPECT_EQ(out[r], want) << "row " << r << " of width " << cols;
            if (r <= 4) {
                EXPECT_EQ(want, kNoArgmax) << "row " << r << " of width " << cols;
            }
        }
        cudaFree(x_d);
        cudaFree(out_d);
    }
}

}  // namespace
}  // namespace dsv4::ops_test
