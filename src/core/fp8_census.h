// Which FP8 dialect do these bytes hold? The evidence in e4m3 codes themselves (the "2x trap": the same byte read in
// the other dialect is exactly half / twice the value, so a mislabelled checkpoint runs and answers fluently wrong).
//
// Only codes that are NaN in one dialect and finite in the other decide:
//   0x80        -0 in OCP (DeepSeek's quantiser writes it for tiny negative weights), NaN in FNUZ: FNUZ writers never
//               emit it for a number, so its presence means OCP bytes.
//   0x7F, 0xFF  NaN in OCP, +-240 in FNUZ (a block whose largest value is 240 at its scale): FNUZ bytes.
// Both present: the bytes hold NaNs whichever dialect reads them (corrupt). Neither: no evidence either way.
//
// Block maxima cannot decide. A power-of-two-scale quantiser puts a block's largest code in the top binade of its
// qmax: OCP (448) codes 0x76..0x7E; FNUZ quantised with qmax 224 (vLLM on gfx942) writes exactly those bytes (scale
// doubled), so the two are the same byte streams; FNUZ with qmax 240 (or our exact conversion) differs from them only
// by the 0x7F codes counted above. The census still records the block-maximum histogram, for reports and for the
// reliability measurements in docs/architecture.md.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/fp8_convert.h"
#include "core/fp8_dialect.h"

namespace dsv4 {

struct Fp8CodeCensus {
    int64_t codes = 0;
    int64_t code_80 = 0;                   // 0x80: OCP -0, FNUZ NaN
    int64_t code_7f = 0;                   // 0x7F / 0xFF: OCP NaN, FNUZ +-240
    int64_t blocks = 0;                    // blocks counted in block_max (0 when the census was taken without a grid)
    std::array<int64_t, 128> block_max{};  // blocks by their largest magnitude code (code & 0x7F)

    void add(const Fp8CodeCensus& other);
};

// Counts 0x80 / 0x7F / 0xFF over n bytes (no block maxima): the fast scan done at every load.
Fp8CodeCensus census_fp8_codes(const uint8_t* codes, int64_t n);
// The same plus the block-maximum histogram of a [rows, cols] matrix in block_rows x block_cols blocks.
Fp8CodeCensus census_fp8_blocks(const uint8_t* codes, const Fp8BlockGrid& grid);

enum class Fp8Evidence : uint8_t {
    kNone,           // no code tells the dialects apart
    kOcp,            // 0x80 present, no 0x7F / 0xFF
    kFnuz,           // 0x7F / 0xFF present, no 0x80
    kContradictory,  // both: NaN codes in either reading
};

Fp8Evidence fp8_evidence(const Fp8CodeCensus& census);
std::string_view fp8_evidence_name(Fp8Evidence evidence);  // "none" | "ocp" | "fnuz" | "contradictory"
// Whether the evidence contradicts a claimed dialect (kContradictory contradicts both).
bool contradicts(Fp8Evidence evidence, Fp8Dialect claimed);
// "12 codes 0x80 (-0 in OCP, NaN in FNUZ), 0 codes 0x7F/0xFF (NaN in OCP, +-240 in FNUZ)".
std::string describe_census(const Fp8CodeCensus& census);

}  // namespace dsv4
