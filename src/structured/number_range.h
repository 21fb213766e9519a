// JSON numbers inside a range, as a regular grammar over their text. A bound is a decimal (sign, integer digits,
// fraction digits); "x >= 1.5" becomes the set of number texts whose value is >= 1.5, built digit by digit
// (longer integer part, or equal prefix then a larger digit, ...) and intersected with the number syntax. Ranged
// numbers are written without an exponent; integers have at most kMaxIntegerDigits digits and fractions at most
// kMaxFractionDigits, which keeps generated numbers finite.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "structured/grammar.h"

namespace dsv4::structured {

inline constexpr int kMaxIntegerDigits = 20;
inline constexpr int kMaxFractionDigits = 20;

struct Decimal {
    bool negative = false;
    std::string integer;   // no leading zeros; "" for 0
    std::string fraction;  // no trailing zeros
    bool is_zero() const { return integer.empty() && fraction.empty(); }
};

// Parses a JSON number text ("-12.50e+3" -> -12500). nullopt on anything else or absurd exponents.
std::optional<Decimal> parse_decimal(std::string_view text);

struct NumberRange {
    std::optional<Decimal> min;
    bool min_exclusive = false;
    std::optional<Decimal> max;
    bool max_exclusive = false;
};

struct NumberSyntax {
    bool integer = false;        // no fraction (except .0+ when zero_fraction) and no exponent
    bool zero_fraction = false;  // integers may be written 5.0 (JSON Schema counts them as integers)
    bool exponent = true;        // numbers (unranged) may have an exponent
};

// Number text of the given syntax; with a range, the range too (then without exponent).
int32_t number_expr(Grammar& grammar, const NumberSyntax& syntax, const NumberRange& range);

}  // namespace dsv4::structured
