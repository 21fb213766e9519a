// Double-accumulated dot products: the sums of the reference numerics. A product of two floats is exact in double
// and a double sum of n such products is within about n * 2^-53 of the exact value, so the float it is rounded to
// does not depend on the order of the additions (except in the rare case where the exact sum sits within that
// distance of a float rounding boundary). Any two implementations (SIMD widths, GPU warps) that accumulate in double
// therefore give the same floats; float32 accumulation differs in the last bits with the order, and in reference
// numerics one bit can move a bf16 or FP8 rounding and, through a top-k choice, the whole result.
#pragma once

#include <cstdint>

namespace dsv4 {

// Dispatched to the active SIMD kernels (core/block_dequant.h: set_simd_isa); every ISA gives the same rounded float.
double dot_f64(const float* a, const float* b, int64_t k);

}  // namespace dsv4
