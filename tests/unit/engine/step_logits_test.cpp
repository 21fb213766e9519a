// StepLogits (runtime/step_logits.h): requests on the argmax path get each row's argmax and no rows; the others get
// their rows, copied whole (all rows, or the gathered subset); a request whose argmax finds a fault gets its rows, so
// the sampler reports the fault as before; a request sampled on the device reads nothing.
#include "runtime/step_logits.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/tensor_reads.h"
#include "core/error.h"
#include "logits_on_backend.h"
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

using Fixture = LogitsOnBackend<kVocab>;

TEST(StepLogits, ArgmaxRequestsGetIdsTheOthersTheirRows) {
    Fixture f;
    std::vector<float> x = random_rows(8, 1);
    x[static_cast<size_t>(6 * kVocab + 9)] = std::numeric_limits<float>::quiet_NaN();  // request 3's second row
    // Requests: 1 row by argmax, 3 rows (a verify entry) by rows, 1 row by argmax, 2 rows by argmax with a fault,
    // 1 row by rows.
    const std::vector<RequestRows> requests = {{1, RowsRead::kArgmax},
                                               {3, RowsRead::kRows},
                                               {1, RowsRead::kArgmax},
                                               {2, RowsRead::kArgmax},
                                               {1, RowsRead::kRows}};
    const StepLogits logits(*f.backend, f.upload(x), requests);
    EXPECT_EQ(logits.got(0), RowsRead::kArgmax);
    EXPECT_EQ(logits.got(1), RowsRead::kRows);
    EXPECT_EQ(logits.got(2), RowsRead::kArgmax);
    EXPECT_EQ(logits.got(3), RowsRead::kRows);  // the fault sends it to the rows
    EXPECT_EQ(logits.got(4), RowsRead::kRows);
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
    const std::vector<RequestRows> all_rows = {{2, RowsRead::kRows}, {1, RowsRead::kRows}, {1, RowsRead::kRows}};
    const StepLogits rows(*f.backend, t, all_rows);
    EXPECT_EQ(rows.host_rows(), 4);
    const std::vector<RequestRows> all_ids = {{3, RowsRead::kArgmax}, {1, RowsRead::kArgmax}};
    const StepLogits ids(*f.backend, t, all_ids);
    EXPECT_EQ(ids.host_rows(), 0);
    for (int64_t r = 0; r < 3; ++r) EXPECT_EQ(ids.argmax(0)[r], argmax_token(row_span(x, r, 1)));
    EXPECT_EQ(ids.argmax(1)[0], argmax_token(row_span(x, 3, 1)));
    // A request sampled on the device reads nothing; the others are unaffected.
    const std::vector<RequestRows> mixed = {{1, RowsRead::kNothing}, {2, RowsRead::kRows}, {1, RowsRead::kArgmax}};
    const StepLogits some(*f.backend, t, mixed);
    EXPECT_EQ(some.got(0), RowsRead::kNothing);
    EXPECT_EQ(some.host_rows(), 2);
    EXPECT_THROW(some.rows(0), Error);
    EXPECT_EQ(some.argmax(2)[0], argmax_token(row_span(x, 3, 1)));
    const std::vector<RequestRows> short_by_one = {{3, RowsRead::kArgmax}};
    EXPECT_THROW(StepLogits(*f.backend, t, short_by_one), Error);
    // A step that samples nothing (a prefill chunk) has no logits rows: nothing to read.
    const Tensor none = f.backend->alloc(DType::kF32, {0, kVocab});
    EXPECT_TRUE(read_argmax_rows(*f.backend, none).empty());
    const StepLogits empty(*f.backend, none, {});
    EXPECT_EQ(empty.host_rows(), 0);
}

}  // namespace
}  // namespace dsv4
