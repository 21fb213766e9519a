// Named shapes for synthetic checkpoints (`dsv4 make-model --preset NAME`): a DeepSeek-style config.json plus the
// draft stages the checkpoint carries. All presets use the real number formats and the real layer schedule pattern
// (0, 0, then CSA/HCA alternating; the first three layers hash-routed).
//
//   random-v4   (old name: bundled) the real V4 vocabulary (129,280, so the V4 tokenizer works), small dims
//               (hidden 128, 4 layers 0,0,4,128, 8 experts top-2, window 128) and one MTP stage. Random weights:
//               it produces gibberish; it exists to exercise every code path end to end (tests, e2e). The model
//               `dsv4 serve` runs with no --model is the trained demo model, models/demo (docs/demo-model.md).
//   tiny        like the golden fixture flash_schedule (vocab 512, hidden 128, 6 layers, 8 experts)
//   tiny-mtp    tiny with window 32, HCA ratio 16 and one MTP stage (speculative-decoding tests)
//   tiny-dspark the same with three DSpark stages (target layers 3-5, block 5, Markov rank 16, noise token 511)
//   mid         hidden 1024, 8 layers, 64 experts top-6 (the CPU benchmark model)
//   flash       DeepSeek-V4-Flash exactly (43 layers, 256 experts, 1 MTP stage): ~160 GB when written whole
//   flash-0731  DeepSeek-V4-Flash-0731 (the same backbone + 3 DSpark stages): ~167 GB
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/tensor_spec.h"

namespace dsv4 {

struct SyntheticModel {
    std::string preset;
    nlohmann::json config;  // DeepSeek-style config.json
    DraftLayout drafts;
};

std::vector<std::string> synthetic_preset_names();
// Throws dsv4::Error naming the known presets when `name` is not one.
SyntheticModel synthetic_preset(std::string_view name);

// Keeps the first `layers` backbone layers (schedule, hash layers and DSpark target layers follow) and/or
// `experts` routed experts (top-k clamped to it). Throws on values below 1 or above the preset's.
void truncate_synthetic_model(SyntheticModel& model, std::optional<int> layers, std::optional<int> experts);

}  // namespace dsv4
