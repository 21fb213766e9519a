// Weight bytes a step reads, for the offline benchmarks' rooflines and byte ratios (bench_offline.cpp).
#pragma once

#include "config/model_config.h"

namespace dsv4::cli {

// Bytes of the weights a decode step reads besides the routed experts, and one routed expert's bytes.
struct WeightBytes {
    double non_expert = 0.0;  // excluding the embedding table (a step reads B rows of it)
    double per_expert = 0.0;
    double active_params = 0.0;  // per token: everything but the embedding table and the unused experts
};

WeightBytes weight_bytes(const ModelConfig& c);

}  // namespace dsv4::cli
