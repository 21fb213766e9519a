#include "core/dtype.h"

#include <gtest/gtest.h>

namespace dsv4 {
namespace {

TEST(DType, SafetensorsNamesRoundTrip) {
    for (const char* name : {"BF16", "F16", "F32", "I64", "I32", "I8", "U8", "F8_E4M3", "F8_E5M2", "F8_E8M0"}) {
        auto parsed = parse_safetensors_dtype(name);
        ASSERT_TRUE(parsed.has_value()) << name;
        EXPECT_EQ(dtype_name(*parsed), name);
    }
}

TEST(DType, UnknownNamesAreRejected) {
    EXPECT_FALSE(parse_safetensors_dtype("F8_E4M3FN").has_value());
    EXPECT_FALSE(parse_safetensors_dtype("bf16").has_value());
    EXPECT_FALSE(parse_safetensors_dtype("").has_value());
}

TEST(DType, Bits) {
    EXPECT_EQ(dtype_bits(DType::kF4E2M1), 4);
    EXPECT_EQ(dtype_bits(DType::kBF16), 16);
    EXPECT_EQ(dtype_bits(DType::kI64), 64);
}

}  // namespace
}  // namespace dsv4
