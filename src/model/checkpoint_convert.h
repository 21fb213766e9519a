// `dsv4 convert-checkpoint`: a checkpoint's FP8 weights rewritten in the other dialect (core/fp8_convert.h: the same
// values, codes re-encoded and block scales moved one binade where needed), everything else copied byte for byte.
//
//   - The input must be a checkpoint: a directory with config.json declaring FP8 weights (quantization_config) and
//     safetensors that match it (model/weight_binding.h). Its SHA256SUMS, when present, is verified first; its FP8
//     bytes must be in the dialect its config.json claims (model/fp8_weights.h: a mislabelled input is refused).
//   - Safetensors shards keep their headers and layout: only the bytes of the FP8 weights and their UE8M0 scales
//     change (same dtype F8_E4M3: safetensors has no FNUZ dtype, so the dialect is recorded in config.json's
//     quantization_config.fmt: "e4m3" = OCP, "e4m3_fnuz" = FNUZ; config.json is re-serialised with that one value
//     changed). Every other file is copied byte for byte; the input's SHA256SUMS is replaced by a new one.
//   - Exact or nothing: a code the target dialect cannot hold fails the conversion, naming the tensor.
//   - The output is written to OUT.partial, its SHA256SUMS written and verified, the result re-opened and checked
//     (structure, binding, dialect evidence), then renamed to OUT. OUT must not exist; on any error nothing is left.
#pragma once

#include <cstdint>
#include <filesystem>

#include "core/fp8_convert.h"
#include "core/fp8_dialect.h"

namespace dsv4 {

struct CheckpointConversionOptions {
    std::filesystem::path in;
    std::filesystem::path out;
    Fp8Dialect target = Fp8Dialect::kFnuz;
    int hash_threads = 4;  // files hashed in parallel (SHA256SUMS)
};

struct CheckpointConversionResult {
    Fp8Dialect from = Fp8Dialect::kOcp;
    Fp8ConversionReport report;  // over every FP8 weight
    int64_t fp8_tensors = 0;     // weights converted (each with its scale grid)
    int64_t files = 0;           // files written, SHA256SUMS included
    uint64_t bytes = 0;          // bytes of those files
    bool input_sums_verified = false;
};

CheckpointConversionResult convert_checkpoint(const CheckpointConversionOptions& options);

}  // namespace dsv4
