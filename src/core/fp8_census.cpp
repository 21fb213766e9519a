#include "core/fp8_census.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"

namespace dsv4 {
namespace {

// Counts over one contiguous run (written so the compiler vectorises it: the load-time scan touches every FP8 byte).
void count_codes(const uint8_t* codes, int64_t n, Fp8CodeCensus& census) {
    int64_t c80 = 0, c7f = 0;
    for (int64_t i = 0; i < n; ++i) {
        c80 += codes[i] == 0x80;
        c7f += (codes[i] & 0x7F) == 0x7F;
    }
    census.codes += n;
    census.code_80 += c80;
    census.code_7f += c7f;
}

}  // namespace

void Fp8CodeCensus::add(const Fp8CodeCensus& o) {
    codes += o.codes;
    code_80 += o.code_80;
    code_7f += o.code_7f;
    blocks += o.blocks;
    for (size_t i = 0; i < block_max.size(); ++i) block_max[i] += o.block_max[i];
}

Fp8CodeCensus census_fp8_codes(const uint8_t* codes, int64_t n) {
    DSV4_CHECK(n >= 0, "FP8 census: negative length {}", n);
    Fp8CodeCensus census;
    count_codes(codes, n, census);
    return census;
}

Fp8CodeCensus census_fp8_blocks(const uint8_t* codes, const Fp8BlockGrid& g) {
    DSV4_CHECK(g.rows >= 0 && g.cols >= 0 && g.block_rows >= 1 && g.block_cols >= 1,
               "FP8 census: bad grid [{}, {}] with {}x{} blocks", g.rows, g.cols, g.block_rows, g.block_cols);
    Fp8CodeCensus census;
    count_codes(codes, g.rows * g.cols, census);
    for (int64_t br = 0; br < g.scale_rows(); ++br) {
        for (int64_t bc = 0; bc < g.scale_cols(); ++bc) {
            const int64_t row_end = std::min<int64_t>(g.rows, (br + 1) * g.block_rows);
            const int64_t col0 = bc * g.block_cols, col_end = std::min<int64_t>(g.cols, col0 + g.block_cols);
            uint8_t largest = 0;
            for (int64_t r = br * g.block_rows; r < row_end; ++r) {
                for (int64_t c = col0; c < col_end; ++c)
                    largest = std::max<uint8_t>(largest, codes[r * g.cols + c] & 0x7F);
            }
            ++census.block_max[largest];
            ++census.blocks;
        }
    }
    return census;
}

Fp8Evidence fp8_evidence(const Fp8CodeCensus& c) {
    if (c.code_80 > 0 && c.code_7f > 0) return Fp8Evidence::kContradictory;
    if (c.code_80 > 0) return Fp8Evidence::kOcp;
    if (c.code_7f > 0) return Fp8Evidence::kFnuz;
    return Fp8Evidence::kNone;
}

std::string_view fp8_evidence_name(Fp8Evidence evidence) {
    switch (evidence) {
        case Fp8Evidence::kNone:
            return "none";
        case Fp8Evidence::kOcp:
            return "ocp";
        case Fp8Evidence::kFnuz:
            return "fnuz";
        case Fp8Evidence::kContradictory:
            return "contradictory";
    }
    return "?";
}

bool contradicts(Fp8Evidence evidence, Fp8Dialect claimed) {
    switch (evidence) {
        case Fp8Evidence::kNone:
            return false;
        case Fp8Evidence::kOcp:
            return claimed != Fp8Dialect::kOcp;
        case Fp8Evidence::kFnuz:
            return claimed != Fp8Dialect::kFnuz;
        case Fp8Evidence::kContradictory:
            return true;
    }
    return true;
}

std::string describe_census(const Fp8CodeCensus& c) {
    return fmt::format("{} codes 0x80 (-0 in OCP, NaN in FNUZ), {} codes 0x7F/0xFF (NaN in OCP, +-240 in FNUZ)",
                       c.code_80, c.code_7f);
}

}  // namespace dsv4
