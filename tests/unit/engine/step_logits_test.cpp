// StepLogits (runtime/step_logits.h): requests on the argmax path get each row's argmax and no rows; the others get
// their rows, copied whole (all rows, or the gathered subset); a request whose argmax finds a fault gets its rows, so
// the sampler reports the fault as before.
#include "runtime/step_logits.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/tensor_reads.h"
#include "core/error.h"
#include "sample/sampler.h"

namespace dsv4 {
namespace {

constexpr int64_t kVocab = 257;

std::vector<float> random_rows(int64_t rows, uint64_t seed) {
    std::mt19937 gen(static_cast<uint32_t>(seed));
    std::uniform_int_distribution<int> value(-20, 20);  // few values: ties
    std::vector<float> x(static_cast<size_t>(rows * kVocab));
    for (float& v : x) v = 0.25f * static_cast<float>(value(gen));
    return x;
}

std::span<const float> row_span(const std::vector<float>& x, int64_t first, int64_t count) {
    return std::span<const float>(x).subspan(static_cast<size_t>(first * kVocab), static_cast<size_t>(count * kVocab));
}

struct Fixture {
    std::unique_ptr<Backend> backend = make_cpu_backend(Numerics::kExact, 1);
    Tensor upload(const std::vector<float>& x) {
        Tensor t = backend->alloc(DType::kF32, {static_cast<int64_t>(x.size()) / kVocab, kVocab});
        backend->from_host(t, x.data());
        return t;
    }
};

TEST(StepLogits, ArgmaxRequestsGetIdsTheOthersTheirRows) {
    Fixture f;
    std::vector<float> x = random_rows(8, 1);
    x[static_cast<size_t>(6 * kVocab + 9)] = std::numeric_limits<float>::quiet_NaN();  // request 3's second row
    // Requests: 1 row by argmax, 3 rows (a verify entry) by rows, 1 row by argmax, 2 rows by argmax with a fault,
    // 1 row by rows.
    const std::vector<RequestRows> requests = {{1, true}, {3, false}, {1, true}, {2, true}, {1, false}};
    const StepLogits logits(*f.backend, f.upload(x), requests);
    EXPECT_TRUE(logits.has_argmax(0));
    EXPECT_FALSE(logits.has_argmax(1));
    EXPECT_TRUE(logits.has_argmax(2));
    EXPECT_FALSE(logits.has_argmax(3));  // the fault sends it to the rows
    EXPECT_FALSE(logits.has_argmax(4));
    EXPECT_EQ(logits.host_rows(), 6);
    EXPECT_EQ(logits.argmax(0)[0], argmax_token(row_span(x, 0, 1)));
    EXPECT_EQ(logits.argmax(2)[0], argmax_token(row_span(x, 4, 1)));
    const auto rows1 = logits.rows(1);
    const auto want1 = row_span(x, 1, 3);
    EXPECT_TRUE(std::equal(rows1.begin(), rows1.end(), want1.begin(), want1.end()));
    const auto rows3 = logits.rows(3);
    ASSERT_EQ(rows3.size(), static_cast<size_t>(2 * kVocab));
    EXPECT_TRUE(std::isnan(rows3[kVocab + 9]));
    const auto rows4 = logits.rows(4);
    const auto want4 = row_span(x, 7, 1);
    EXPECT_TRUE(std::equal(rows4.begin(), rows4.end(), want4.begin(), want4.end()));
    EXPECT_THROW(logits.rows(0), Error);
}

TEST(StepLogits, EveryRowOrNoRowComesToTheHost) {
    Fixture f;
    const std::vector<float> x = random_rows(4, 2);
    const Tensor t = f.upload(x);
    const std::vector<RequestRows> all_rows = {{2, false}, {1, false}, {1, false}};
    const StepLogits rows(*f.backend, t, all_rows);
    EXPECT_EQ(rows.host_rows(), 4);
    const std::vector<RequestRows> all_ids = {{3, true}, {1, true}};
    const StepLogits ids(*f.backend, t, all_ids);
    EXPECT_EQ(ids.host_rows(), 0);
    for (int64_t r = 0; r < 3; ++r) EXPECT_EQ(ids.argmax(0)[r], argmax_token(row_span(x, r, 1)));
    EXPECT_EQ(ids.argmax(1)[0], argmax_token(row_span(x, 3, 1)));
    const std::vector<RequestRows> short_by_one = {{3, true}};
    EXPECT_THROW(StepLogits(*f.backend, t, short_by_one), Error);
    // A step that samples nothing (a prefill chunk) has no logits rows: nothing to read.
    const Tensor none = f.backend->alloc(DType::kF32, {0, kVocab});
    EXPECT_TRUE(read_argmax_rows(*f.backend, none).empty());
    const StepLogits empty(*f.backend, none, {});
    EXPECT_EQ(empty.host_rows(), 0);
}

}  // namespace
}  // namespace dsv4
