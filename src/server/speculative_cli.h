// `--speculative-config JSON` (vLLM's spelling and keys) for `dsv4 serve`, `dsv4 generate` and `dsv4 bench offline`:
//   {"method": "mtp" | "dspark", "num_speculative_tokens": K,
//    "draft_sample_method": "probabilistic" | "greedy", "rejection_sample_method": "standard" | "block",
//    "disable_by_batch_size": N, "confidence_threshold": X}
// Unknown keys and wrong types are errors naming the key and the accepted keys (JSON stays out of the engine).
#pragma once

#include <string_view>

#include "dsv4/engine.h"

namespace dsv4::server {

// "" -> speculation off. Throws dsv4::Error on malformed JSON, an unknown key or a wrongly typed value; the values
// themselves are checked by Engine::create.
SpeculativeConfig parse_speculative_config(std::string_view json);

}  // namespace dsv4::server
