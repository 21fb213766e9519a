// Helpers shared by the number-format tests: an independent reference decoder (sign/exponent/mantissa with
// std::ldexp, written here and not taken from the implementation), seeded RNGs and NaN-safe comparisons.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>

namespace dsv4::testing {

// Value of a normal/subnormal code of a sign-exponent-mantissa format, ignoring special codes (callers handle those).
inline double reference_value(uint32_t code, int exp_bits, int man_bits, int bias) {
    const uint32_t man_mask = (1u << man_bits) - 1;
    const uint32_t exp_mask = (1u << exp_bits) - 1;
    const bool negative = ((code >> (exp_bits + man_bits)) & 1u) != 0;
    const int field = static_cast<int>((code >> man_bits) & exp_mask);
    const double mantissa = static_cast<double>(code & man_mask);
    double value = 0.0;
    if (field == 0) {
        value = std::ldexp(mantissa, 1 - bias - man_bits);
    } else {
        value = std::ldexp(1.0 + std::ldexp(mantissa, -man_bits), field - bias);
    }
    return negative ? -value : value;
}

// A fresh random seed per run; tests print it through SCOPED_TRACE so that a failure can be replayed.
inline uint32_t fresh_seed() {
    return std::random_device{}();
}

inline std::string seed_note(uint32_t seed) {
    return "random seed " + std::to_string(seed);
}

// Passes when both are the same float bit-for-bit or both are NaN (used where NaN is the expected value).
inline ::testing::AssertionResult same_float_or_both_nan(float expected, float actual) {
    if (std::isnan(expected) && std::isnan(actual)) return ::testing::AssertionSuccess();
    if (std::isnan(expected) || std::isnan(actual) || expected != actual ||
        std::signbit(expected) != std::signbit(actual)) {
        return ::testing::AssertionFailure() << "expected " << expected << " got " << actual;
    }
    return ::testing::AssertionSuccess();
}

// |actual - expected| <= tolerance; fails on any NaN.
inline ::testing::AssertionResult close_no_nan(double expected, double actual, double tolerance) {
    if (std::isnan(expected) || std::isnan(actual)) {
        return ::testing::AssertionFailure() << "NaN: expected " << expected << " got " << actual;
    }
    if (std::fabs(actual - expected) > tolerance) {
        return ::testing::AssertionFailure() << "expected " << expected << " got " << actual << " (|diff| "
                                             << std::fabs(actual - expected) << " > " << tolerance << ")";
    }
    return ::testing::AssertionSuccess();
}

}  // namespace dsv4::testing
