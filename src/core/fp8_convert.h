// Exact conversion of block-scaled e4m3 tensors between the FP8 dialects (core/fp8_dialect.h): the same VALUES,
// new codes and, where needed, a block scale moved by one binade. Used at load (--fp8-dialect differing from the
// checkpoint's) and by `dsv4 convert-checkpoint`.
//
// When is a value representable? Let v be a code's value at its block's scale (the scale 2^e multiplies it).
//   OCP -> FNUZ at the same scale: exact iff |v| <= 240 (every OCP value up to 240 is on the FNUZ grid, subnormals
//     included: FNUZ reaches one binade lower). OCP codes 0x78..0x7E (256..448) are not: the block's scale exponent
//     is raised by one and every code re-encoded as v / 2, which is exact for EVERY finite OCP value (it is the same
//     byte read as FNUZ, -0 aside). So an OCP block always converts exactly unless its scale byte is 0xFE (2^127
//     cannot be raised).
//   FNUZ -> OCP at the same scale: exact iff v is on the OCP grid: FNUZ's odd multiples of 2^-10 (codes 0x01, 0x03,
//     0x05, 0x07 and their negatives) are not. Then the exponent is lowered by one and codes re-encoded as 2v, exact
//     for every FNUZ value but +-240 (0x7F, 0xFF: 480 exceeds 448). A block holding both kinds, or a lowest-binade
//     scale (byte 0x00) that must be lowered, cannot be converted exactly.
// Per block the converter keeps the scale when that is exact, else moves it one binade in the direction above; when
// neither is exact it keeps the scale and rounds (RNE, saturating), counting every such code. -0 (OCP 0x80) becomes
// +0 (FNUZ has no -0). NaN codes stay NaN (OCP 0x7F / 0xFF <-> FNUZ 0x80) and are counted; a NaN scale (0xFF) stays
// NaN with its codes mapped value for value.
#pragma once

#include <cstdint>
#include <string>

#include "core/fp8_dialect.h"

namespace dsv4 {

// A [rows, cols] e4m3 matrix with one UE8M0 scale per block_rows x block_cols block (row-major scale grid of
// ceil(rows / block_rows) x ceil(cols / block_cols)).
struct Fp8BlockGrid {
    int64_t rows = 0;
    int64_t cols = 0;
    int block_rows = 128;
    int block_cols = 128;

    int64_t scale_rows() const { return (rows + block_rows - 1) / block_rows; }
    int64_t scale_cols() const { return (cols + block_cols - 1) / block_cols; }
};

// What a conversion did. exact() when no code was rounded; NaN codes are reported separately (they stay NaN).
struct Fp8ConversionReport {
    int64_t codes = 0;
    int64_t blocks = 0;
    int64_t blocks_rescaled = 0;  // scale moved one binade (raised towards FNUZ, lowered towards OCP)
    int64_t inexact_codes = 0;    // rounded: no scale choice holds the block exactly
    int64_t inexact_blocks = 0;
    int64_t nan_codes = 0;   // NaN in the source (NaN in the result)
    int64_t nan_scales = 0;  // blocks with a NaN (0xFF) scale byte
    // The first inexact code: element (row, col) and its source code byte.
    int64_t first_inexact_row = -1;
    int64_t first_inexact_col = -1;
    uint8_t first_inexact_code = 0;

    bool exact() const { return inexact_codes == 0; }
    void add(const Fp8ConversionReport& other);
    // "16384 codes in 1 blocks: 1 rescaled, exact" / "... 3 codes rounded (first: element [0, 5], code 0x7E) ...".
    std::string describe() const;
};

// Converts codes [rows, cols] (row stride cols) and their scale grid from one dialect to the other into out_codes /
// out_scales (same layouts; may not alias the inputs). from == to copies. Throws dsv4::Error on a bad grid.
Fp8ConversionReport convert_fp8_blocks(const uint8_t* codes, const uint8_t* scales, const Fp8BlockGrid& grid,
                                       Fp8Dialect from, Fp8Dialect to, uint8_t* out_codes, uint8_t* out_scales);

}  // namespace dsv4
