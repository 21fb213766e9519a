// The FP8 weights of a bound checkpoint and their dialect (core/fp8_dialect.h): the load-time check that refuses bytes
// of one dialect labelled as the other (the 2x trap: core/fp8_census.h says what the bytes can tell), and the exact
// conversion to the backend's dialect (core/fp8_convert.h), held as owned copies inside BoundWeights.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "config/model_config.h"
#include "core/fp8_census.h"
#include "core/fp8_convert.h"
#include "model/weight_binding.h"

namespace dsv4 {

struct Fp8WeightTensor {
    std::string weight;  // original name of the e4m3 codes ("layers.0.attn.wq_a.weight")
    std::string scale;   // its UE8M0 scale grid ("layers.0.attn.wq_a.scale")
    Fp8BlockGrid grid;
};

// Every FP8 block-scaled weight of the bound tensor set, in spec order.
std::vector<Fp8WeightTensor> fp8_weight_tensors(const ModelConfig& config, const BoundWeights& bound);

// What the bytes of every FP8 weight say about their dialect, and where.
struct Fp8DialectEvidence {
    Fp8CodeCensus census;  // summed over the tensors (no block maxima: the fast scan)
    Fp8Evidence evidence = Fp8Evidence::kNone;
    int64_t tensors = 0;
    int64_t tensors_with_80 = 0;
    int64_t tensors_with_7f = 0;
    std::string first_80_tensor;  // the first tensor (spec order) holding 0x80; empty when none
    std::string first_7f_tensor;
};

Fp8DialectEvidence fp8_dialect_evidence(const ModelConfig& config, const BoundWeights& bound);

// Throws dsv4::Error naming both dialects (and the fix) when the evidence contradicts `claimed` (config.json's
// quantization_config.fmt). `what` names the checkpoint.
void check_fp8_dialect(const Fp8DialectEvidence& evidence, Fp8Dialect claimed, const std::string& what);

// Converts every FP8 weight of `bound` (in bound.fp8_dialect) to `target`, one tensor at a time, handing its new
// codes and scales to `sink`. Exact or nothing: a code that cannot be represented is a dsv4::Error naming the tensor
// and the code (NaN codes are carried over and counted).
using Fp8ConvertedSink =
    std::function<void(const Fp8WeightTensor& tensor, std::vector<uint8_t> codes, std::vector<uint8_t> scales)>;
Fp8ConversionReport convert_each_fp8_weight(const ModelConfig& config, const BoundWeights& bound, Fp8Dialect target,
                                            const Fp8ConvertedSink& sink);

// Converts every FP8 weight of `bound` to `target` in place (owned copies) unless it is already there.
Fp8ConversionReport convert_fp8_weights(const ModelConfig& config, BoundWeights& bound, Fp8Dialect target);

}  // namespace dsv4
