// `dsv4 inspect`'s FP8 dialect section: the dialect config.json claims for the FP8 weights, what the bytes of every
// FP8 tensor group say (core/fp8_census.h: the codes that tell the dialects apart and the block maxima), and the
// dialect and maximum of every runtime FP8 site (weights in memory, activation quantisation, fp8 K=V rows, fp8
// indexer keys) for a given --fp8-dialect.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "config/model_config.h"
#include "core/fp8_census.h"
#include "model/weight_binding.h"

namespace dsv4 {

struct Fp8GroupCensus {
    std::string pattern;  // "layers.#.attn.wq_a.weight"
    int64_t tensors = 0;
    Fp8CodeCensus census;  // with block maxima
};

struct Fp8Inspection {
    Fp8Dialect claimed = Fp8Dialect::kOcp;  // quantization_config.fmt
    bool scanned = false;                   // the weights were present and bound (else groups is empty)
    std::vector<Fp8GroupCensus> groups;
    Fp8CodeCensus total;
    Fp8Evidence evidence = Fp8Evidence::kNone;
    Fp8Sites runtime;  // fp8_sites(--fp8-dialect)
    bool consistent() const { return !contradicts(evidence, claimed); }
};

// bound: the checkpoint's tensors when DIR has weights that matched the config (null: config only).
Fp8Inspection inspect_fp8(const ModelConfig& config, const BoundWeights* bound, Fp8Dialect runtime);

std::string fp8_inspection_text(const Fp8Inspection& inspection);
nlohmann::json fp8_inspection_json(const Fp8Inspection& inspection);

}  // namespace dsv4
