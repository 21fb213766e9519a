#include "core/fp8_convert.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/float_formats.h"
#include "core/parallel.h"

namespace dsv4 {
namespace {

constexpr uint8_t kNanScale = 0xFF;
constexpr int kMaxScaleByte = 0xFE;

// For one direction and one scale shift k: every source code's target code for the value v * 2^-k (the block scale
// becomes 2^(e + k)), whether that is exact, and whether the source code is NaN.
struct CodeMap {
    std::array<uint8_t, 256> code{};
    std::array<bool, 256> exact{};
    std::array<bool, 256> nan{};
};

CodeMap make_code_map(Fp8Dialect from, Fp8Dialect to, int shift) {
    CodeMap map;
    for (int c = 0; c < 256; ++c) {
        const float v = decode_e4m3(static_cast<uint8_t>(c), from);
        if (std::isnan(v)) {
            map.code[c] = encode_e4m3(v, to);
            map.exact[c] = true;
            map.nan[c] = true;
            continue;
        }
        const float target = std::ldexp(v, -shift);  // exact: a power-of-two scaling far from float's limits
        map.code[c] = encode_e4m3(target, to);
        map.exact[c] = decode_e4m3(map.code[c], to) == target;  // -0 == +0: -0 -> +0 counts as exact
    }
    return map;
}

// Shifts 0, +1, -1 for each (from) dialect; built once.
const CodeMap& code_map(Fp8Dialect from, int shift) {
    static const std::array<std::array<CodeMap, 3>, 2> maps = [] {
        std::array<std::array<CodeMap, 3>, 2> m{};
        for (int f = 0; f < 2; ++f) {
            const auto from_dialect = static_cast<Fp8Dialect>(f);
            const Fp8Dialect to = from_dialect == Fp8Dialect::kOcp ? Fp8Dialect::kFnuz : Fp8Dialect::kOcp;
            for (int s = 0; s < 3; ++s) m[f][s] = make_code_map(from_dialect, to, s - 1);
        }
        return m;
    }();
    return maps[static_cast<int>(from)][shift + 1];
}

// The block's alternative to keeping its scale: towards FNUZ values halve (raise the exponent), towards OCP they
// double (lower it).
int alternative_shift(Fp8Dialect to) {
    return to == Fp8Dialect::kFnuz ? 1 : -1;
}

struct BlockView {
    const uint8_t* codes;
    uint8_t* out;
    int64_t stride;
    int64_t row0, col0, rows, cols;
};

std::array<int64_t, 256> code_histogram(const BlockView& b) {
    std::array<int64_t, 256> histogram{};
    for (int64_t r = 0; r < b.rows; ++r) {
        const uint8_t* row = b.codes + (b.row0 + r) * b.stride + b.col0;
        for (int64_t c = 0; c < b.cols; ++c) ++histogram[row[c]];
    }
    return histogram;
}

bool map_is_exact(const CodeMap& map, const std::array<int64_t, 256>& histogram) {
    for (int c = 0; c < 256; ++c) {
        if (histogram[c] != 0 && !map.exact[c]) return false;
    }
    return true;
}

// The scale shift a block takes (see fp8_convert.h) and whether the result is exact.
std::pair<int, bool> choose_shift(Fp8Dialect from, Fp8Dialect to, uint8_t scale,
                                  const std::array<int64_t, 256>& histogram) {
    if (map_is_exact(code_map(from, 0), histogram)) return {0, true};
    const int shift = alternative_shift(to);
    const int moved = static_cast<int>(scale) + shift;
    if (scale == kNanScale) return {0, true};  // every value is NaN whatever the codes
    if (moved >= 0 && moved <= kMaxScaleByte && map_is_exact(code_map(from, shift), histogram)) return {shift, true};
    return {0, false};
}

void note_inexact(const BlockView& b, const CodeMap& map, const std::array<int64_t, 256>& histogram,
                  Fp8ConversionReport& report) {
    int64_t count = 0;
    for (int c = 0; c < 256; ++c) count += map.exact[c] ? 0 : histogram[c];
    report.inexact_codes += count;
    ++report.inexact_blocks;
    if (report.first_inexact_row >= 0) return;
    for (int64_t r = 0; r < b.rows; ++r) {
        const uint8_t* row = b.codes + (b.row0 + r) * b.stride + b.col0;
        for (int64_t c = 0; c < b.cols; ++c) {
            if (map.exact[row[c]]) continue;
            report.first_inexact_row = b.row0 + r;
            report.first_inexact_col = b.col0 + c;
            report.first_inexact_code = row[c];
            return;
        }
    }
}

// Converts one block; returns its scale byte.
uint8_t convert_block(const BlockView& b, uint8_t scale, Fp8Dialect from, Fp8Dialect to, Fp8ConversionReport& report) {
    const std::array<int64_t, 256> histogram = code_histogram(b);
    const auto [shift, exact] = choose_shift(from, to, scale, histogram);
    const CodeMap& map = code_map(from, shift);
    for (int c = 0; c < 256; ++c) report.nan_codes += map.nan[c] ? histogram[c] : 0;
    if (!exact) note_inexact(b, map, histogram, report);
    report.blocks_rescaled += shift != 0;
    for (int64_t r = 0; r < b.rows; ++r) {
        const uint8_t* src = b.codes + (b.row0 + r) * b.stride + b.col0;
        uint8_t* dst = b.out + (b.row0 + r) * b.stride + b.col0;
        for (int64_t c = 0; c < b.cols; ++c) dst[c] = map.code[src[c]];
    }
    if (scale == kNanScale) {
        ++report.nan_scales;
        return scale;
    }
    return static_cast<uint8_t>(static_cast<int>(scale) + shift);
}

void check_grid(const Fp8BlockGrid& g) {
    DSV4_CHECK(g.rows >= 0 && g.cols >= 0 && g.block_rows >= 1 && g.block_cols >= 1,
               "FP8 conversion: bad grid [{}, {}] with {}x{} blocks", g.rows, g.cols, g.block_rows, g.block_cols);
}

}  // namespace

void Fp8ConversionReport::add(const Fp8ConversionReport& o) {
    if (first_inexact_row < 0 && o.first_inexact_row >= 0) {
        first_inexact_row = o.first_inexact_row;
        first_inexact_col = o.first_inexact_col;
        first_inexact_code = o.first_inexact_code;
    }
    codes += o.codes;
    blocks += o.blocks;
    blocks_rescaled += o.blocks_rescaled;
    inexact_codes += o.inexact_codes;
    inexact_blocks += o.inexact_blocks;
    nan_codes += o.nan_codes;
    nan_scales += o.nan_scales;
}

std::string Fp8ConversionReport::describe() const {
    std::string text =
        fmt::format("{} codes in {} blocks ({} with the scale moved one binade)", codes, blocks, blocks_rescaled);
    if (exact()) {
        text += ": exact";
    } else {
        text +=
            fmt::format(": {} codes in {} blocks NOT representable, rounded (first: element [{}, {}], code 0x{:02X})",
                        inexact_codes, inexact_blocks, first_inexact_row, first_inexact_col, first_inexact_code);
    }
    if (nan_codes > 0) text += fmt::format("; {} NaN codes (kept NaN)", nan_codes);
    if (nan_scales > 0) text += fmt::format("; {} NaN scales (kept)", nan_scales);
    return text;
}

Fp8ConversionReport convert_fp8_blocks(const uint8_t* codes, const uint8_t* scales, const Fp8BlockGrid& grid,
                                       Fp8Dialect from, Fp8Dialect to, uint8_t* out_codes, uint8_t* out_scales) {
    check_grid(grid);
    const int64_t scale_rows = grid.scale_rows(), scale_cols = grid.scale_cols();
    Fp8ConversionReport total;
    total.codes = grid.rows * grid.cols;
    total.blocks = scale_rows * scale_cols;
    if (from == to) {
        std::memcpy(out_codes, codes, static_cast<size_t>(total.codes));
        std::memcpy(out_scales, scales, static_cast<size_t>(total.blocks));
        return total;
    }
    std::vector<Fp8ConversionReport> per_row(static_cast<size_t>(scale_rows));
    parallel_for(scale_rows, grid.block_rows * grid.cols, [&](int64_t br) {
        for (int64_t bc = 0; bc < scale_cols; ++bc) {
            const int64_t row0 = br * grid.block_rows, col0 = bc * grid.block_cols;
            const BlockView block{codes,
                                  out_codes,
                                  grid.cols,
                                  row0,
                                  col0,
                                  std::min<int64_t>(grid.block_rows, grid.rows - row0),
                                  std::min<int64_t>(grid.block_cols, grid.cols - col0)};
            const int64_t s = br * scale_cols + bc;
            out_scales[s] = convert_block(block, scales[s], from, to, per_row[br]);
        }
    });
    for (const Fp8ConversionReport& r : per_row) total.add(r);
    return total;
}

}  // namespace dsv4
