#include "structured/number_range.h"

#include <vector>

namespace dsv4::structured {
namespace {

constexpr int kMaxExponent = 400;

class RangeBuilder {
  public:
    explicit RangeBuilder(Grammar& grammar) : g_(grammar) {}

    int32_t digit() { return g_.bytes(ByteSet::range('0', '9')); }
    int32_t digits(char lo, char hi) {
        return g_.bytes(ByteSet::range(static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)));
    }
    int32_t nothing() { return g_.bytes(ByteSet{}); }
    int32_t any_digits() { return g_.star(digit()); }
    int32_t any_integer() { return g_.alt({g_.literal("0"), g_.seq({digits('1', '9'), any_digits()})}); }
    int32_t any_fraction() { return g_.optional(g_.seq({g_.literal("."), g_.plus(digit())})); }
    int32_t any_magnitude() { return g_.seq({any_integer(), any_fraction()}); }

    // Integer texts with a value above I (I: digits without leading zeros, "" = 0).
    int32_t int_greater(const std::string& i) {
        const auto n = static_cast<int32_t>(i.size());
        std::vector<int32_t> alts{g_.seq({digits('1', '9'), g_.repeat(digit(), n, -1)})};
        for (int32_t k = 0; k < n; ++k) {
            if (i[static_cast<size_t>(k)] == '9') continue;
            alts.push_back(g_.seq({g_.literal(i.substr(0, static_cast<size_t>(k))),
                                   digits(static_cast<char>(i[static_cast<size_t>(k)] + 1), '9'),
                                   g_.repeat(digit(), n - 1 - k, n - 1 - k)}));
        }
        return g_.alt(std::move(alts));
    }

    // Integer texts with a value below I.
    int32_t int_less(const std::string& i) {
        const auto n = static_cast<int32_t>(i.size());
        if (n == 0) return nothing();
        std::vector<int32_t> alts{g_.literal("0")};
        if (n >= 2) alts.push_back(g_.seq({digits('1', '9'), g_.repeat(digit(), 0, n - 2)}));
        for (int32_t k = 0; k < n; ++k) {
            const char lo = k == 0 ? '1' : '0';
            const char hi = static_cast<char>(i[static_cast<size_t>(k)] - 1);
            if (hi < lo) continue;
            alts.push_back(g_.seq({g_.literal(i.substr(0, static_cast<size_t>(k))), digits(lo, hi),
                                   g_.repeat(digit(), n - 1 - k, n - 1 - k)}));
        }
        return g_.alt(std::move(alts));
    }

    int32_t int_equal(const std::string& i) { return g_.literal(i.empty() ? "0" : i); }

    // Fraction parts ("" or "." digits) with a value >= F (> F when strict).
    int32_t fraction_at_least(const std::string& f, bool strict) {
        const int32_t nonzero_tail = g_.seq({any_digits(), digits('1', '9'), any_digits()});
        if (f.empty()) return strict ? g_.seq({g_.literal("."), nonzero_tail}) : any_fraction();
        std::vector<int32_t> alts;
        for (size_t k = 0; k < f.size(); ++k) {
            if (f[k] == '9') continue;
            alts.push_back(
                g_.seq({g_.literal(f.substr(0, k)), digits(static_cast<char>(f[k] + 1), '9'), any_digits()}));
        }
        alts.push_back(g_.seq({g_.literal(f), nonzero_tail}));
        if (!strict) alts.push_back(g_.seq({g_.literal(f), any_digits()}));
        return g_.seq({g_.literal("."), g_.alt(std::move(alts))});
    }

    // Fraction parts with a value <= F (< F when strict).
    int32_t fraction_at_most(const std::string& f, bool strict) {
        const int32_t zeros = g_.seq({g_.literal("."), g_.plus(g_.literal("0"))});
        if (f.empty()) return strict ? nothing() : g_.optional(zeros);
        std::vector<int32_t> alts;
        for (size_t k = 0; k < f.size(); ++k) {
            if (f[k] != '0')
                alts.push_back(
                    g_.seq({g_.literal(f.substr(0, k)), digits('0', static_cast<char>(f[k] - 1)), any_digits()}));
            if (k > 0) alts.push_back(g_.literal(f.substr(0, k)));  // a proper prefix is smaller
        }
        if (!strict) alts.push_back(g_.seq({g_.literal(f), g_.star(g_.literal("0"))}));
        return g_.optional(g_.seq({g_.literal("."), g_.alt(std::move(alts))}));
    }

    int32_t magnitude_at_least(const Decimal& d, bool strict) {
        return g_.alt({g_.seq({int_greater(d.integer), any_fraction()}),
                       g_.seq({int_equal(d.integer), fraction_at_least(d.fraction, strict)})});
    }
    int32_t magnitude_at_most(const Decimal& d, bool strict) {
        return g_.alt({g_.seq({int_less(d.integer), any_fraction()}),
                       g_.seq({int_equal(d.integer), fraction_at_most(d.fraction, strict)})});
    }

    int32_t negative(int32_t magnitude) { return g_.seq({g_.literal("-"), magnitude}); }

    // Signed texts with a value >= L (> L when strict). -0 counts as 0.
    int32_t at_least(const Decimal& l, bool strict) {
        if (!l.negative && !l.is_zero()) return magnitude_at_least(l, strict);
        if (l.is_zero() && strict) return magnitude_at_least(l, true);
        return g_.alt({any_magnitude(), negative(magnitude_at_most(l, strict))});
    }
    // Signed texts with a value <= M (< M when strict).
    int32_t at_most(const Decimal& m, bool strict) {
        if (m.negative && !m.is_zero()) return negative(magnitude_at_least(m, strict));
        if (m.is_zero() && strict) return negative(magnitude_at_least(m, true));
        return g_.alt({magnitude_at_most(m, strict), negative(any_magnitude())});
    }

    int32_t syntax(const NumberSyntax& s, bool ranged) {
        const int32_t integer =
            g_.alt({g_.literal("0"), g_.seq({digits('1', '9'), g_.repeat(digit(), 0, kMaxIntegerDigits - 1)})});
        std::vector<int32_t> parts{g_.optional(g_.literal("-")), integer};
        if (s.integer) {
            if (s.zero_fraction)
                parts.push_back(
                    g_.optional(g_.seq({g_.literal("."), g_.repeat(g_.literal("0"), 1, kMaxFractionDigits)})));
            return g_.seq(std::move(parts));
        }
        parts.push_back(g_.optional(g_.seq({g_.literal("."), g_.repeat(digit(), 1, kMaxFractionDigits)})));
        if (s.exponent && !ranged) {
            ByteSet e = ByteSet::single('e');
            e.insert('E');
            parts.push_back(
                g_.optional(g_.seq({g_.bytes(e), g_.optional(g_.bytes(sign_set())), g_.repeat(digit(), 1, 3)})));
        }
        return g_.seq(std::move(parts));
    }

  private:
    static ByteSet sign_set() {
        ByteSet set = ByteSet::single('+');
        set.insert('-');
        return set;
    }
    Grammar& g_;
};

}  // namespace

std::optional<Decimal> parse_decimal(std::string_view text) {
    Decimal d;
    size_t pos = 0;
    if (pos < text.size() && text[pos] == '-') {
        d.negative = true;
        ++pos;
    }
    std::string digits;
    int point = -1;
    for (; pos < text.size() && ((text[pos] >= '0' && text[pos] <= '9') || text[pos] == '.'); ++pos) {
        if (text[pos] == '.') {
            if (point >= 0) return std::nullopt;
            point = static_cast<int>(digits.size());
        } else {
            digits += text[pos];
        }
    }
    if (digits.empty()) return std::nullopt;
    if (point < 0) point = static_cast<int>(digits.size());
    if (pos < text.size() && (text[pos] == 'e' || text[pos] == 'E')) {
        ++pos;
        bool negative_exponent = false;
        if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) negative_exponent = text[pos++] == '-';
        int exponent = 0;
        if (pos >= text.size()) return std::nullopt;
        for (; pos < text.size() && text[pos] >= '0' && text[pos] <= '9'; ++pos) {
            exponent = exponent * 10 + (text[pos] - '0');
            if (exponent > kMaxExponent) return std::nullopt;
        }
        point += negative_exponent ? -exponent : exponent;
    }
    if (pos != text.size()) return std::nullopt;
    while (point < 0) {
        digits.insert(digits.begin(), '0');
        ++point;
    }
    while (static_cast<int>(digits.size()) < point) digits += '0';
    d.integer = digits.substr(0, static_cast<size_t>(point));
    d.fraction = digits.substr(static_cast<size_t>(point));
    d.integer.erase(
        0, d.integer.find_first_not_of('0') == std::string::npos ? d.integer.size() : d.integer.find_first_not_of('0'));
    while (!d.fraction.empty() && d.fraction.back() == '0') d.fraction.pop_back();
    if (d.is_zero()) d.negative = false;
    return d;
}

int32_t number_expr(Grammar& grammar, const NumberSyntax& syntax, const NumberRange& range) {
    RangeBuilder b(grammar);
    const bool ranged = range.min.has_value() || range.max.has_value();
    const int32_t text = b.syntax(syntax, ranged);
    if (!ranged) return text;
    int32_t language = -1;
    if (range.min) language = b.at_least(*range.min, range.min_exclusive);
    if (range.max) {
        const int32_t upper = b.at_most(*range.max, range.max_exclusive);
        language = language < 0 ? upper : grammar.intersect(language, upper);
    }
    return grammar.intersect(language, text);
}

}  // namespace dsv4::structured
